"""The sample queue contract, shared by the Redis Stream backend and the in-process memory backend.

Semantics are those of a Redis Stream read through a consumer group: entries are delivered at least once;
an entry stays *pending* until acknowledged; a pending entry idle for too long can be claimed by another
consumer (its delivery count grows); entries that fail too often go to a dead-letter stream. Applying a
score is idempotent per sample id, so a redelivered sample is never counted twice.

``open_queue(url, service)`` picks the backend from the URL:

- ``memory://`` (or ``memory://name``): in-process, shared by everything in the process using the same
  name — the embedded default for tests, the demo and single-process use;
- ``redis://``, ``rediss://`` (TLS), ``unix://``: one Redis, password or ACL user in the URL;
- ``redis+sentinel://[user:password@]host:port[,host:port…]/master-name[/db]``: Sentinel;
- ``redis+cluster://[user:password@]host:port``: Redis Cluster (keys carry a ``{service}`` hash tag).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragwatch.errors import QueueError, QueueFullError
from ragwatch.mode.degrade import ModeState, with_override

__all__ = [
    "DEFAULT_QUEUE_URL",
    "Applied",
    "Entry",
    "ModeListener",
    "Queue",
    "QueueStats",
    "Retention",
]

DEFAULT_QUEUE_URL = "memory://"


@dataclass(frozen=True, slots=True)
class Entry:
    """One delivered stream entry. ``payload`` is None when the entry is malformed (no sample field)."""

    id: str
    payload: bytes | None
    deliveries: int = 1


@dataclass(frozen=True, slots=True)
class QueueStats:
    length: int  # entries in the stream (bounded by MAXLEN)
    pending: int  # delivered to a worker, not yet acknowledged
    lag: int  # entries not yet delivered to any worker of the group
    dead: int  # entries in the dead-letter stream


@dataclass(frozen=True, slots=True)
class Retention:
    """What one :meth:`Queue.trim_retention` pass saw and did."""

    headroom: float | None  # share of Redis ``maxmemory`` still free; None without a limit (or in process)
    scores: int = 0  # score records trimmed from the scores stream
    markers: int = 0  # idempotency markers (applied sample ids) dropped with their hour sets
    pressure: bool = False  # trimmed under memory pressure (headroom under the floor, or a refused write)


#: One score to apply: (sample id, record, values, time), optionally followed by the sample's client id.
Applied = (
    tuple[str, bytes, Mapping[str, float], "float | None"]
    | tuple[str, bytes, Mapping[str, float], "float | None", "str | None"]
)


class Queue(ABC):
    """A service's sample stream plus the stores the worker writes (scores, totals, dead letters)."""

    service: str
    url: str

    # -- producer side ----------------------------------------------------------------------------------
    @abstractmethod
    def add(self, payloads: Sequence[bytes]) -> None:
        """Append encoded samples in one round trip; raises :class:`QueueError` when that fails."""

    # -- worker side ------------------------------------------------------------------------------------
    @abstractmethod
    def ensure_group(self) -> bool:
        """Create the consumer group (and the stream) if missing, starting from the oldest entry; True when
        this call created it (exactly one of several workers racing after a wipe)."""

    @abstractmethod
    def read(self, consumer: str, count: int, block_ms: int) -> list[Entry]:
        """New entries for ``consumer``, waiting up to ``block_ms`` when there are none."""

    @abstractmethod
    def claim_stale(self, consumer: str, min_idle_ms: int, count: int) -> tuple[list[Entry], list[str]]:
        """Take over entries pending longer than ``min_idle_ms`` (crashed workers); returns the entries and
        the ids of pending entries whose data was already trimmed away (acknowledged here, counted lost)."""

    @abstractmethod
    def ack(self, ids: Sequence[str]) -> None: ...

    @abstractmethod
    def trim_scored(self) -> int:
        """Delete entries every worker has acknowledged (scored or dead-lettered); returns how many.

        Why: ``MAXLEN`` trims only on ``XADD``, and a Redis at ``maxmemory`` with ``noeviction`` refuses the
        ``XADD`` — so without this the stream would stay full of scored entries forever."""

    @abstractmethod
    def discard(self, ids: Sequence[str]) -> None:
        """Acknowledge and delete entries without scoring them (Redis is full and refuses the score)."""

    def full_reason(self) -> str | None:
        """Why the queue refuses writes and what to do about it; None while it accepts them."""
        return None

    def trim_retention(self, pressure: bool = False) -> Retention:
        """Keep what workers store (score records, idempotency markers) within its byte budgets, and shrink
        it further under memory pressure — ``pressure`` forces that (a write was just refused).

        Why: ``trim_scored`` frees only the sample stream; at ``maxmemory`` with ``noeviction`` the scores
        and markers would otherwise hold the memory until every write is refused. The in-process backend
        is bounded by counts and reports no headroom."""
        return Retention(None)

    @abstractmethod
    def dead_letter(self, entry: Entry, error: str) -> None:
        """Move an entry to the dead-letter stream with its error, and acknowledge it, atomically."""

    @abstractmethod
    def apply(
        self,
        sample_id: str,
        record: bytes,
        values: Mapping[str, float],
        at: float | None = None,
        client: str | None = None,
    ) -> bool:
        """Store a score record, add ``values`` to the per-metric totals and push them (stamped ``at``,
        default now, and tagged with the request's ``client`` id) onto each metric's rolling window — all
        once per sample id, atomically. Returns False (and changes nothing) when this sample was applied
        before."""

    def apply_many(self, items: Sequence[Applied]) -> list[bool]:
        """:meth:`apply` for a batch, in one round trip where the backend can; results in order."""
        results: list[bool] = []
        for item in items:
            try:
                results.append(self.apply(*item))
            except QueueFullError as exc:  # the ones before went in; this one and the rest did not
                missing: list[bool | None] = [None] * (len(items) - len(results))
                raise QueueFullError(str(exc), [*results, *missing]) from exc
        return results

    @abstractmethod
    def window(self, metric: str, count: int) -> list[tuple[float, float]]:
        """The newest ``count`` (time, value) points of a metric's window, newest first."""

    def window_clients(self, metric: str, count: int) -> list[tuple[float, float, str]]:
        """:meth:`window` with each point's client id ("" when unknown), for the per-client cap."""
        return [(stamp, value, "") for stamp, value in self.window(metric, count)]

    # -- degraded mode ----------------------------------------------------------------------------------
    @abstractmethod
    def read_mode(self) -> ModeState:
        """The shared degraded-mode state (the default, normal state when none was written)."""

    @abstractmethod
    def write_mode(self, state: ModeState, expected_version: int) -> bool:
        """Compare-and-set: store ``state`` only if the stored version is ``expected_version``, then notify
        every listener. False when another writer won the race (re-read and decide again)."""

    @abstractmethod
    def restore_mode(self, state: ModeState) -> bool:
        """Write ``state`` back whole unless the store holds a version at least as new; True when written.

        For a store that lost the state (an empty restart): every process that saw a newer version than the
        store now holds writes what it saw, and the newest wins — a replica that missed the last change can
        never bring back an older state for good."""

    def set_override(self, override: str, *, tries: int = 20) -> ModeState:
        """Force degraded mode ``on`` or ``off``, or give control back to the window (``auto``).

        Written through :meth:`write_mode`'s compare-and-set, with the time it was set in the state's override
        log (the page marks it; the evaluators' own writes keep the log, since they step the state they read).
        One implementation for every backend, so no path writes an override without its time. Raises
        :class:`QueueError` when the state kept changing for ``tries`` attempts (only the SLA evaluators write
        besides the operator, and rarely)."""
        for _ in range(tries):
            current = self.read_mode()
            state = with_override(current, override, time.time())
            if self.write_mode(state, current.version):
                return state
        raise QueueError(f"the mode state kept changing; the override {override!r} was not written, try again")

    @abstractmethod
    def mode_listener(self) -> ModeListener:
        """A subscription that wakes up when the mode changes (replicas also re-read periodically)."""

    @abstractmethod
    def stats(self) -> QueueStats: ...

    @abstractmethod
    def totals(self) -> dict[str, tuple[int, float]]:
        """Per metric: (number of scores, sum of scores), exactly once per sample."""

    @abstractmethod
    def recent_scores(self, count: int) -> list[bytes]:
        """The newest ``count`` score records, newest first."""

    # -- feedback (a person's corrections of the judge) -------------------------------------------------
    @abstractmethod
    def add_feedback(self, sample_id: str, record: bytes) -> None:
        """Store one encoded feedback record (:mod:`ragwatch.sampling.feedback`) about ``sample_id`` beside the
        scores; the store keeps the newest ``feedback_maxlen`` records, so it stays bounded in count and, each
        record's texts being capped, in bytes. Raises :class:`QueueError` when the write fails."""

    @abstractmethod
    def feedback(self, count: int) -> list[tuple[str, bytes]]:
        """The newest ``count`` feedback records as (sample id, record), newest first."""

    @abstractmethod
    def dead_letters(self, count: int) -> list[dict[str, Any]]:
        """The newest dead letters: ``{"id", "error", "deliveries", "payload"}``."""

    @abstractmethod
    def heartbeat(self, worker: str) -> None:
        """Record that ``worker`` is alive now (for health checks)."""

    @abstractmethod
    def forget_worker(self, worker: str) -> None:
        """Remove ``worker``'s heartbeat (a clean exit), so health checks stop counting it as live."""

    @abstractmethod
    def live_workers(self, max_age_seconds: float) -> dict[str, float]:
        """Workers that sent a heartbeat in the last ``max_age_seconds``, with its unix time."""

    def close(self) -> None:  # noqa: B027 - optional: only backends holding connections override it
        """Release connections; the queue may not be used afterwards."""


class ModeListener(ABC):
    @abstractmethod
    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True when a change was announced."""

    def close(self) -> None:  # noqa: B027 - optional
        """Stop listening."""
