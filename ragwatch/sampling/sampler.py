"""Choose which finished requests are sent to the scoring workers.

Scoring costs an LLM judge call per request, so only a sample can be scored; but the interesting requests
(slow ones, ones a user explicitly flagged) are rare and must not be lost to a low rate. The rules,
in the order :meth:`Sampler.decide` applies them, are therefore: explicit requests first, synthetic probe
traffic kept apart, errors (with ``sample_errors``) and slow requests always, then a per-route / per-tag /
base rate — and a per-process ceiling so a traffic spike (or an error storm) cannot flood the queue and
the judge budget.

Before any rule, a run that is not a quality sample at all is skipped, whatever else it is (forced
included), with its reason counted: ``error_response`` (an exception, a cancellation or an HTTP status of
400 or more, unless ``sample_errors``), ``no_context`` (no retriever ran during it: its answer has nothing
to be faithful to, its context precision is not a number) and ``no_question`` (nothing to judge relevance
against). Scored, such runs would be zeros in the rolling windows — a crawler's 404s alone could switch
degraded mode on. A retriever that ran and found nothing is a quality sample: a retrieval miss.

The rate decision hashes the trace id rather than drawing a random number, the way OpenTelemetry's
``TraceIdRatioBased`` sampler does: every replica then agrees on whether a trace is in the sample. With W3C
propagation a caller chooses the trace id (``traceparent``), and an unkeyed hash would let it choose to be
sampled — and so steer the quality windows and degraded mode. A :class:`Sampler` given a ``secret`` therefore
hashes the trace id with that key (BLAKE2b): processes sharing the secret still agree, outsiders cannot
predict the decision. ``RagWatch`` always passes one (``sample_secret``, else a random key per process).

This runs on the request path of the watched service after every request: it allocates nothing but what
the hash needs, never raises on what it finds in a :class:`~ragwatch.capture.run.Run`, and is safe from any thread.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING

from ragwatch.errors import ConfigError

if TYPE_CHECKING:
    from ragwatch.capture.run import Run

__all__ = ["NOT_A_SAMPLE", "REASONS", "Decision", "Sampler", "TokenBucket"]

#: Why a run is not a quality sample at all (never sampled, whatever the rules say); see the module docstring.
NOT_A_SAMPLE: tuple[str, ...] = ("error_response", "no_context", "no_question")
#: Every value :attr:`Decision.reason` can take. It is a Prometheus label value, so the set is closed:
#: user-supplied text (a ``force_sample`` reason, a route) never becomes a reason.
REASONS: tuple[str, ...] = (
    "forced",
    "probe",
    "error",
    "slow",
    "route",
    "tag",
    "rate",
    "ceiling",
    "unsampled",
    *NOT_A_SAMPLE,
)

_TWO_64 = 2**64
_HEX32 = re.compile(r"[0-9a-fA-F]{32}")


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether one request goes to scoring, and the rule that said so (for the sampling metric).

    Frozen so the few possible decisions can be shared module-wide instead of built per request.
    """

    sampled: bool
    reason: str


_FORCED = Decision(True, "forced")
_PROBE_IN = Decision(True, "probe")
_PROBE_OUT = Decision(False, "probe")
_ERROR = Decision(True, "error")
_SLOW = Decision(True, "slow")
_ROUTE = Decision(True, "route")
_TAG = Decision(True, "tag")
_RATE = Decision(True, "rate")
_CEILING = Decision(False, "ceiling")
_UNSAMPLED = Decision(False, "unsampled")
_ERROR_RESPONSE = Decision(False, "error_response")
_NO_CONTEXT = Decision(False, "no_context")
_NO_QUESTION = Decision(False, "no_question")


def _number(name: str, value: object) -> float:
    # bool is an int, but `rate=True` is far more likely a mistake than a request for 100 %.
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ConfigError(f"{name} must be a number, got {type(value).__name__}")
    return float(value)


def _rate(name: str, value: object) -> float:
    rate = _number(name, value)
    if not 0.0 <= rate <= 1.0:  # also rejects NaN
        raise ConfigError(f"{name} must be within [0, 1], got {value!r}")
    return rate


def _positive(name: str, value: object) -> float:
    number = _number(name, value)
    if not (number > 0.0 and math.isfinite(number)):
        raise ConfigError(f"{name} must be a positive finite number, got {value!r}")
    return number


def _bound(rate: float) -> int:
    """The integer threshold equivalent to ``x < rate * 2**64`` for integer x, so the hot path compares ints."""
    return math.ceil(rate * _TWO_64)


def _lower64(trace_id: str, key: bytes | None = None) -> int:
    """The sampling hash of a trace id: deterministic across processes (sharing ``key``), uniform over
    [0, 2**64); with a key, unpredictable to whoever chose the trace id."""
    if key is not None:
        digest = hashlib.blake2b(trace_id.encode("utf-8", "surrogatepass"), digest_size=8, key=key).digest()
        return int.from_bytes(digest, "big")
    if len(trace_id) == 32 and _HEX32.fullmatch(trace_id) is not None:
        # The low half of a W3C trace id is random by spec (and what OpenTelemetry samples on).
        return int(trace_id[16:], 16)
    # Not an OpenTelemetry id (another tracer's format, a caller-set request id): still hash it stably, so
    # the decision is the same in every process; surrogatepass makes encoding total over any str.
    digest = hashlib.blake2b(trace_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _chance(trace_id: object, rate: float, bound: int, key: bytes | None = None) -> bool:
    """Whether this trace falls in a sample of ``rate``, giving the same answer in every process."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    if isinstance(trace_id, str) and trace_id:
        return _lower64(trace_id, key) < bound
    # Tracing off: nothing to agree on with other processes, so an independent draw is as good as any.
    return random.random() < rate


class TokenBucket:
    """A thread-safe rate limiter: at most ``rate_per_second`` grants on average, ``burst`` at once.

    The bucket starts full, so a process that just started can sample its first ``burst`` candidates
    immediately. The clock is injectable so tests can step time instead of sleeping.
    """

    __slots__ = ("_burst", "_clock", "_last", "_lock", "_rate", "_tokens")

    def __init__(
        self, rate_per_second: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate = _positive("rate_per_second", rate_per_second)
        self._burst = max(1.0, self._rate) if burst is None else _positive("burst", burst)
        if self._burst < 1.0:
            # A bucket that can never hold a whole token would silently grant nothing, ever.
            raise ConfigError(f"burst must be at least 1, got {burst!r}")
        if not callable(clock):
            raise ConfigError(f"clock must be callable, got {type(clock).__name__}")
        self._clock = clock
        self._tokens = self._burst
        self._last = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Consume one token if there is one; never blocks waiting for a refill."""
        with self._lock:
            now = self._clock()
            elapsed = now - self._last
            if elapsed > 0.0:  # a clock that steps back must not drain (or overfill) the bucket
                self._tokens = min(self._burst, self._tokens + elapsed * self._rate)
                self._last = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


class Sampler:
    """Decide, per finished :class:`~ragwatch.capture.run.Run`, whether it is scored (see the module docstring).

    ``route_rates`` maps path prefixes to rates; a prefix matches whole path segments (``/api`` matches
    ``/api`` and ``/api/ask`` but not ``/apix``) and the longest matching prefix wins. ``tag_rates`` maps
    ``"key=value"`` to a rate for runs whose tag ``key`` equals ``value``; the first match in mapping order
    wins. ``max_per_second`` caps the errors, slow requests and rate-sampled requests of this process;
    forced requests and probes are not capped. ``secret`` keys the trace-id hash (see the module docstring;
    None: OpenTelemetry's unkeyed ``TraceIdRatioBased`` rule, which a caller choosing trace ids can steer).
    ``sample_errors`` makes failed requests quality samples, all of them (off: skipped as ``error_response``).
    """

    __slots__ = (
        "_base",
        "_base_bound",
        "_bucket",
        "_key",
        "_probe_bound",
        "_probe_rate",
        "_routes",
        "_sample_errors",
        "_slow",
        "_tags",
    )

    def __init__(
        self,
        rate: float = 0.1,
        *,
        sample_errors: bool = False,
        slow_seconds: float | None = None,
        route_rates: Mapping[str, float] | None = None,
        tag_rates: Mapping[str, float] | None = None,
        probe_rate: float = 0.0,
        max_per_second: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        secret: bytes | None = None,
    ) -> None:
        if secret is not None and (not isinstance(secret, bytes) or not 1 <= len(secret) <= 64):
            raise ConfigError("secret must be 1 to 64 bytes (a BLAKE2b key)")
        self._key = secret
        self._base = _rate("rate", rate)
        self._base_bound = _bound(self._base)
        self._sample_errors = bool(sample_errors)
        self._slow = None if slow_seconds is None else _positive("slow_seconds", slow_seconds)
        self._probe_rate = _rate("probe_rate", probe_rate)
        self._probe_bound = _bound(self._probe_rate)
        self._routes = _route_table(route_rates)
        self._tags = _tag_table(tag_rates)
        if not callable(clock):
            raise ConfigError(f"clock must be callable, got {type(clock).__name__}")
        if max_per_second is None:
            self._bucket: TokenBucket | None = None
        else:
            ceiling = _positive("max_per_second", max_per_second)
            self._bucket = TokenBucket(ceiling, max(1.0, ceiling), clock)

    def decide(self, run: Run) -> Decision:
        """Return the shared :class:`Decision` for ``run``; call once per run (the ceiling counts calls)."""
        status = run.status
        failed = run.outcome != "ok" or (type(status) is int and status >= 400)
        if failed and not self._sample_errors:
            return _ERROR_RESPONSE
        if run.retrieved is None:
            durations = run.durations  # "retrieve" is there when a retriever ran, even one that failed
            if type(durations) is not dict or "retrieve" not in durations:
                return _NO_CONTEXT
        question = run.question
        if not question or not isinstance(question, str) or question.isspace():
            return _NO_QUESTION
        if run.force:
            return _FORCED  # an explicit request from the host: no rate or ceiling overrides it
        tags = run.tags
        if tags.get("probe") == "1":
            # Synthetic replay traffic would skew quality figures if mixed into the real-traffic sample.
            return _PROBE_IN if _chance(run.trace_id, self._probe_rate, self._probe_bound, self._key) else _PROBE_OUT
        if failed:  # sample_errors is on
            return self._admit(_ERROR)
        if self._slow is not None and self._is_slow(run):
            return self._admit(_SLOW)

        rate, bound, decision = self._base, self._base_bound, _RATE
        route = run.route
        for prefix, beneath, route_rate, route_bound in self._routes if isinstance(route, str) else ():
            if route == prefix or (route is not None and route.startswith(beneath)):
                rate, bound, decision = route_rate, route_bound, _ROUTE
                break
        else:  # no route matched: a tag may set the rate
            for key, value, tag_rate, tag_bound in self._tags:
                if tags.get(key) == value:
                    rate, bound, decision = tag_rate, tag_bound, _TAG
                    break
        if _chance(run.trace_id, rate, bound, self._key):
            return self._admit(decision)
        return _UNSAMPLED

    def _is_slow(self, run: Run) -> bool:
        try:
            return run.durations.get("request", 0) >= self._slow  # type: ignore[operator]
        except TypeError:  # a non-numeric duration put there by hand: not evidence of slowness
            return False

    def _admit(self, decision: Decision) -> Decision:
        bucket = self._bucket
        if bucket is None or bucket.take():
            return decision
        return _CEILING


def _route_table(route_rates: Mapping[str, float] | None) -> tuple[tuple[str, str, float, int], ...]:
    """(prefix, prefix-with-slash, rate, bound), longest prefix first so the first hit is the most specific."""
    if route_rates is None:
        return ()
    if not isinstance(route_rates, Mapping):
        raise ConfigError(f"route_rates must map path prefixes to rates, got {type(route_rates).__name__}")
    table = []
    for prefix, value in route_rates.items():
        if not isinstance(prefix, str) or not prefix:
            raise ConfigError(f"route_rates keys must be non-empty path prefixes, got {prefix!r}")
        rate = _rate(f"route_rates[{prefix!r}]", value)
        beneath = prefix if prefix.endswith("/") else prefix + "/"
        table.append((prefix, beneath, rate, _bound(rate)))
    table.sort(key=lambda row: len(row[0]), reverse=True)
    return tuple(table)


def _tag_table(tag_rates: Mapping[str, float] | None) -> tuple[tuple[str, str, float, int], ...]:
    """(tag key, tag value, rate, bound) in mapping order, parsed once so decide() only does dict lookups."""
    if tag_rates is None:
        return ()
    if not isinstance(tag_rates, Mapping):
        raise ConfigError(f"tag_rates must map 'key=value' strings to rates, got {type(tag_rates).__name__}")
    table = []
    for spec, value in tag_rates.items():
        key, sep, tag_value = spec.partition("=") if isinstance(spec, str) else ("", "", "")
        if not sep or not key:
            raise ConfigError(f"tag_rates keys must look like 'key=value', got {spec!r}")
        rate = _rate(f"tag_rates[{spec!r}]", value)
        table.append((key, tag_value, rate, _bound(rate)))
    return tuple(table)
