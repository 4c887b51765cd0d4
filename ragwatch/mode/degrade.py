"""Degraded mode: a circuit breaker whose signal is answer quality instead of errors.

The vocabulary is that of mature breakers (resilience4j, Envoy outlier detection): a sliding window (the
last ``window_samples`` scores within ``window_seconds``), a minimum number of samples before any decision,
a threshold to open (*enter* degraded mode), a margin so the value that closes is not the value that opens,
a hold time the recovered value must last, and a minimum dwell in either state. The difference from an
error breaker: scores arrive asynchronously from the workers, so decisions lag requests by the scoring
delay, and both the window and the state live in the queue's store so they survive worker restarts.

One client must not be able to flip the mode for everyone by sending a minority of crafted traffic, so
with ``max_client_share`` below 1 no single client's scores count for more than that share of the window
(see :func:`window_value`).

Everything here is pure: :func:`step` maps (policy, state, window, now) to the next state, so the
anti-flapping behaviour is tested on simulated score streams without any I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ragwatch.errors import ConfigError
from ragwatch.labels import safe_text

__all__ = [
    "HIGHER_IS_WORSE",
    "MAX_REASON_CHARS",
    "OVERRIDES",
    "ModeState",
    "Policy",
    "direction_of",
    "effective",
    "parse_override_log",
    "step",
    "window_value",
    "with_override",
]

#: Longest reason kept from the store: anyone who can write to Redis can write the reason.
MAX_REASON_CHARS = 300

#: What an operator can force with ``ragwatch degrade on|off|auto``.
OVERRIDES = ("auto", "on", "off")

#: Operator overrides remembered in the state (the newest kept), each with the time it was set: the page marks
#: them on its charts. Bounded because the state is read by every replica on every change.
MAX_OVERRIDE_LOG = 8

#: Scores that are rates of bad outcomes, where a higher window is worse: their lines are ceilings ("max").
#: Every other score is a quality score held to a floor ("min"). The shipped Prometheus rules and Grafana
#: alerts list the same names (``metric=~"hallucination_rate"``); a test keeps them in step.
HIGHER_IS_WORSE = frozenset({"hallucination_rate"})


def direction_of(metric: str) -> str:
    """How ``metric``'s line is held: ``"max"`` (breached above it) for :data:`HIGHER_IS_WORSE`, else ``"min"``."""
    return "max" if metric in HIGHER_IS_WORSE else "min"


@dataclass(frozen=True, slots=True)
class Policy:
    """When to enter and leave degraded mode. Defaults: CP@3 ≥ 0.65 over the last 15 minutes."""

    metric: str = "context_precision_3"
    threshold: float = 0.65
    #: "min": the window must stay at or above the threshold (quality scores); "max": at or below it
    #: (a rate of bad outcomes, say the share of hallucinated answers).
    direction: str = "min"
    window_seconds: float = 900.0
    window_samples: int = 200
    min_samples: int = 20
    margin: float = 0.05
    hold_seconds: float = 120.0
    min_dwell_seconds: float = 300.0
    #: Largest share of the window one client's scores may take (1.0: no cap).
    max_client_share: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.max_client_share <= 1:
            raise ConfigError(f"degraded-mode max_client_share must be within (0, 1], got {self.max_client_share}")
        if self.direction not in ("min", "max"):
            raise ConfigError(f"degraded-mode direction must be 'min' or 'max', got {self.direction!r}")
        if not 0 <= self.threshold <= 1:
            raise ConfigError(f"degraded-mode threshold must be within 0..1, got {self.threshold}")
        if not 0 <= self.recover_at <= 1 or self.margin < 0:
            raise ConfigError(f"degraded-mode margin must keep the recovery line within 0..1, got {self.margin}")
        if self.window_seconds <= 0 or self.hold_seconds < 0 or self.min_dwell_seconds < 0:
            raise ConfigError("degraded-mode window must be > 0 s; hold and dwell ≥ 0 s")
        if not 1 <= self.min_samples <= self.window_samples:
            raise ConfigError(
                f"degraded-mode min_samples ({self.min_samples}) must be within 1..window_samples "
                f"({self.window_samples})"
            )

    @property
    def recover_at(self) -> float:
        """The value that closes: the threshold moved by the margin towards the good side."""
        return self.threshold + self.margin if self.direction == "min" else self.threshold - self.margin

    def breaches(self, value: float) -> bool:
        return value < self.threshold if self.direction == "min" else value > self.threshold

    def recovered(self, value: float) -> bool:
        return value >= self.recover_at if self.direction == "min" else value <= self.recover_at


@dataclass(frozen=True, slots=True)
class ModeState:
    """The shared state every replica reads. ``version`` increases on every write (compare-and-set)."""

    degraded: bool = False
    since: float = 0.0
    reason: str = ""
    value: float | None = None
    samples: int = 0
    recovering_since: float | None = None
    override: str = "auto"
    #: ``(command, unix time)`` of the last operator overrides, oldest first; empty when unknown (a state
    #: stored before the log existed, or never overridden).
    override_log: tuple[tuple[str, float], ...] = ()
    version: int = 0

    def to_fields(self) -> dict[str, str]:
        return {
            "degraded": "1" if self.degraded else "0",
            "since": repr(self.since),
            "reason": self.reason,
            "value": "" if self.value is None else repr(self.value),
            "samples": str(self.samples),
            "recovering_since": "" if self.recovering_since is None else repr(self.recovering_since),
            "override": self.override,
            "override_log": " ".join(f"{command}@{at!r}" for command, at in self.override_log),
            "version": str(self.version),
        }

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> ModeState:
        """Parse the stored form; a missing or garbled store reads as the default (normal) state."""
        f = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in fields.items()
        }
        try:
            return cls(
                degraded=f.get("degraded") == "1",
                since=float(f.get("since") or 0.0),
                reason=safe_text(f.get("reason", ""), MAX_REASON_CHARS),
                value=float(f["value"]) if f.get("value") else None,
                samples=int(f.get("samples") or 0),
                recovering_since=float(f["recovering_since"]) if f.get("recovering_since") else None,
                override=str(f["override"]) if f.get("override") in OVERRIDES else "auto",
                override_log=parse_override_log(f.get("override_log")),
                version=int(f.get("version") or 0),
            )
        except (TypeError, ValueError):
            return cls()


def parse_override_log(text: Any) -> tuple[tuple[str, float], ...]:
    """Parse ``"on@1712.5 auto@1790.0"``; entries that do not parse are dropped (anyone who can write to
    Redis can write this field), and a missing field is an empty log: the times are unknown."""
    if not isinstance(text, str):
        return ()
    out: list[tuple[str, float]] = []
    for token in text.split()[-MAX_OVERRIDE_LOG:]:
        command, _, at = token.partition("@")
        try:
            when = float(at)
        except ValueError:
            continue
        if command in OVERRIDES and math.isfinite(when):
            out.append((command, when))
    return tuple(out)


def with_override(state: ModeState, override: str, now: float) -> ModeState:
    """``state`` with the operator's ``override`` in force and logged at ``now``, versioned one up (the value to
    compare-and-set over ``state``)."""
    if override not in OVERRIDES:
        raise ConfigError(f"degraded-mode override must be one of {', '.join(OVERRIDES)}, got {override!r}")
    log = (*state.override_log, (override, now))[-MAX_OVERRIDE_LOG:]
    return replace(state, override=override, override_log=log, version=state.version + 1)


def effective(state: ModeState) -> bool:
    """Whether replicas should behave degraded: an operator's override wins over the window."""
    if state.override == "on":
        return True
    if state.override == "off":
        return False
    return state.degraded


def window_value(points: Sequence[tuple[Any, ...]], policy: Policy, now: float) -> tuple[float | None, int]:
    """Mean of the newest ``window_samples`` scores no older than ``window_seconds``, and how many.

    Points are ``(time, value)`` or ``(time, value, client)``, newest first. With ``max_client_share`` < 1
    each client keeps only its newest ``quota`` points, where ``quota`` is that share of the fresh points —
    but never less than an even split between the clients seen (so a service whose traffic all comes from
    one address, a proxy say, still has a window). Points with no client id ("") are not capped. The cap is
    applied before the window is cut to ``window_samples``, so a flood from one client cannot push the
    others' scores out of the window either.
    """
    horizon = now - policy.window_seconds
    fresh = [p for p in points if p[0] >= horizon and math.isfinite(p[1])]
    if policy.max_client_share < 1.0:
        fresh = _cap_clients(fresh, policy.max_client_share)
    values = [p[1] for p in fresh[: policy.window_samples]]
    if not values:
        return None, 0
    return sum(values) / len(values), len(values)


def _cap_clients(points: list[tuple[Any, ...]], share: float) -> list[tuple[Any, ...]]:
    counts: dict[str, int] = {}
    for point in points:
        client = point[2] if len(point) > 2 else ""
        if client:
            counts[client] = counts.get(client, 0) + 1
    if not counts:
        return points
    n = len(points)
    quota = max(math.ceil(share * n), math.ceil(n / len(counts)))
    kept: list[tuple[Any, ...]] = []
    taken: dict[str, int] = {}
    for point in points:
        client = point[2] if len(point) > 2 else ""
        if client:
            if taken.get(client, 0) >= quota:
                continue
            taken[client] = taken.get(client, 0) + 1
        kept.append(point)
    return kept


def step(policy: Policy, state: ModeState, value: float | None, samples: int, now: float) -> ModeState:
    """The next state. Returns ``state`` itself when nothing changes (callers compare by identity)."""
    dwelled = now - state.since >= policy.min_dwell_seconds
    enough = value is not None and samples >= policy.min_samples
    if not state.degraded:
        if enough and policy.breaches(value) and dwelled:  # type: ignore[arg-type]
            reason = (
                f"{policy.metric} {value:.3f} {'<' if policy.direction == 'min' else '>'} "
                f"{policy.threshold} over {samples} samples"
            )
            return _switch(state, True, now, reason, value, samples)
        return state
    recovered = enough and policy.recovered(value)  # type: ignore[arg-type]
    if not recovered:
        if state.recovering_since is not None:  # the recovery did not hold: start over
            return replace(state, recovering_since=None, version=state.version + 1)
        return state
    if state.recovering_since is None:
        return replace(state, recovering_since=now, version=state.version + 1)
    if now - state.recovering_since >= policy.hold_seconds and dwelled:
        reason = (
            f"{policy.metric} {value:.3f} {'≥' if policy.direction == 'min' else '≤'} {policy.recover_at:.2f} "
            f"for {now - state.recovering_since:.0f} s"
        )
        return _switch(state, False, now, reason, value, samples)
    return state


def _switch(state: ModeState, degraded: bool, now: float, reason: str, value: float | None, samples: int) -> ModeState:
    """The state after a transition into (or out of) degraded mode, versioned one up."""
    return replace(
        state,
        degraded=degraded,
        since=now,
        reason=reason,
        value=value,
        samples=samples,
        recovering_since=None,
        version=state.version + 1,
    )
