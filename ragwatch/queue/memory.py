"""The in-process queue backend: Redis Stream consumer-group semantics without a Redis.

It passes the same contract tests as :mod:`ragwatch.queue.redis`, so the demo, single-process deployments
and unit tests exercise the same worker logic. Queues are shared by name within the process, so a producer
and a worker thread opened on ``memory://`` talk to each other.

Everything it holds is bounded whatever the traffic and whether or not anything consumes: entries, score
records, dead letters and remembered sample ids each have a cap, and a payload is copied out of orjson's
buffer (which reserves kilobytes per small document) so an entry costs what it encodes. After ``fork()``
the child gets fresh locks and an empty stream: the parent's samples remain the parent's to score, and
each process keeps its own windows and mode (sharing them across processes is what Redis is for).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ragwatch.mode.degrade import ModeState
from ragwatch.queue.contract import Entry, ModeListener, Queue, QueueStats

__all__ = ["MemoryQueue"]


def _compact(payload: bytes | None) -> bytes | None:
    """A copy sized to its content: orjson's result keeps its (≥ 4 KB) working buffer allocated."""
    return None if payload is None else bytes(memoryview(payload))


class MemoryQueue(Queue):
    #: Entries kept at most, whatever ``maxlen`` asks: without a worker in the process nothing drains the
    #: stream, and a service that only wanted metrics must not grow by megabytes of sample text.
    MAX_ENTRIES = 2_000
    #: Score records kept at most (``recent_scores``, ``rw.scores()``, reports).
    MAX_SCORES = 1_000
    #: Dead letters kept at most (they hold the offending payload).
    MAX_DEAD = 100
    #: Sample ids remembered for exactly-once apply: far more than entries can be pending or redelivered.
    MAX_APPLIED = 20_000
    #: Feedback records kept at most (people's corrections: a few hundred bytes each).
    MAX_FEEDBACK = 1_000

    _named: ClassVar[dict[tuple[str, str], MemoryQueue]] = {}
    _named_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        service: str,
        *,
        maxlen: int = 100_000,
        scores_maxlen: int = 100_000,
        dead_maxlen: int = 10_000,
        window_cap: int = 1000,
        applied_ttl_seconds: int = 7 * 24 * 3600,
        feedback_maxlen: int = 10_000,
        url: str = "memory://",
        **_: Any,
    ) -> None:
        self.service = service
        self.url = url
        self._maxlen = min(maxlen, self.MAX_ENTRIES)
        self._dead: deque[dict[str, Any]] = deque(maxlen=min(dead_maxlen, self.MAX_DEAD))
        self._scores: deque[bytes] = deque(maxlen=min(scores_maxlen, self.MAX_SCORES))
        self._feedback: deque[tuple[str, bytes]] = deque(maxlen=min(feedback_maxlen, self.MAX_FEEDBACK))
        self._applied: dict[int, tuple[set[str], float]] = {}  # unix hour -> (ids applied, expires at)
        self._applied_ttl = applied_ttl_seconds
        self._applied_order: deque[tuple[int, str]] = deque()  # (hour, id), oldest first: the count cap
        self._totals: dict[str, list[float]] = {}
        self._workers: dict[str, float] = {}
        self._window_cap = window_cap
        self._windows: dict[str, deque[tuple[float, float, str]]] = {}
        self._mode = ModeState()
        self._reset_stream()
        _LIVE.add(self)

    def _reset_stream(self) -> None:
        """An empty sample stream and fresh locks: at construction and in a forked child."""
        self._entries: OrderedDict[str, bytes | None] = OrderedDict()
        self._seq = 0
        self._last_ms = 0
        self._group = False
        #: ids not yet read by the group, oldest first: always the newest ids of ``_entries``
        self._undelivered: deque[str] = deque()
        self._pel: dict[str, list[Any]] = {}  # id -> [consumer, delivered_at_monotonic, deliveries]
        self._workers = {}
        #: entries trimmed before anything read them (the in-process scorer counts them as skipped)
        self.trimmed = 0
        self._mode_changed = threading.Condition()
        self._cond = threading.Condition()

    @classmethod
    def named(cls, url: str, service: str, **options: Any) -> MemoryQueue:
        """The process-wide queue for ``url`` and ``service``, created on first use."""
        name = url.split("://", 1)[1] if "://" in url else ""
        with cls._named_lock:
            queue = cls._named.get((name, service))
            if queue is None:
                queue = cls._named[(name, service)] = cls(service, url=url, **options)
            return queue

    @classmethod
    def reset_all(cls) -> None:
        """Forget every named queue (tests)."""
        with cls._named_lock:
            cls._named.clear()

    # -- producer -------------------------------------------------------------------------------------
    def add(self, payloads: Sequence[bytes]) -> None:
        with self._cond:
            for payload in payloads:
                self._append(payload)
            self._cond.notify_all()

    def add_raw(self, payload: bytes | None) -> str:
        """Append an entry without a sample field, as a hand-written malformed entry would be (tests)."""
        with self._cond:
            entry_id = self._append(payload)
            self._cond.notify_all()
            return entry_id

    def _append(self, payload: bytes | None) -> str:
        now = int(time.time() * 1000)
        if now <= self._last_ms:
            self._seq += 1
        else:
            self._last_ms, self._seq = now, 0
        entry_id = f"{self._last_ms}-{self._seq}"
        self._entries[entry_id] = _compact(payload)
        self._undelivered.append(entry_id)
        undelivered = self._undelivered
        while len(self._entries) > self._maxlen:
            oldest, _ = self._entries.popitem(last=False)
            if undelivered and undelivered[0] == oldest:  # never read: its id goes too
                undelivered.popleft()
                self.trimmed += 1
        return entry_id

    # -- worker ---------------------------------------------------------------------------------------
    def ensure_group(self) -> bool:
        with self._cond:
            created, self._group = not self._group, True
            return created

    def read(self, consumer: str, count: int, block_ms: int) -> list[Entry]:
        deadline = time.monotonic() + block_ms / 1000
        with self._cond:
            while True:
                fresh: list[Entry] = []
                now = time.monotonic()
                while self._undelivered and len(fresh) < count:
                    entry_id = self._undelivered.popleft()
                    if entry_id in self._entries:  # else discarded before anyone read it
                        self._pel[entry_id] = [consumer, now, 1]
                        fresh.append(Entry(entry_id, self._entries[entry_id], 1))
                if fresh:
                    return fresh
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)

    def claim_stale(self, consumer: str, min_idle_ms: int, count: int) -> tuple[list[Entry], list[str]]:
        now = time.monotonic()
        claimed: list[Entry] = []
        gone: list[str] = []
        with self._cond:
            for entry_id, state in list(self._pel.items()):
                if len(claimed) >= count:
                    break
                if (now - state[1]) * 1000 < min_idle_ms:
                    continue
                if entry_id not in self._entries:
                    del self._pel[entry_id]
                    gone.append(entry_id)
                    continue
                state[0], state[1], state[2] = consumer, now, state[2] + 1
                claimed.append(Entry(entry_id, self._entries[entry_id], state[2]))
        return claimed, gone

    def ack(self, ids: Sequence[str]) -> None:
        with self._cond:
            for entry_id in ids:
                self._pel.pop(entry_id, None)

    def trim_scored(self) -> int:
        with self._cond:
            first_new = next((i for i in self._undelivered if i in self._entries), None)
            removed = 0
            for entry_id in list(self._entries):
                if entry_id == first_new or entry_id in self._pel:
                    break
                del self._entries[entry_id]
                removed += 1
            return removed

    def discard(self, ids: Sequence[str]) -> None:
        with self._cond:
            for entry_id in ids:
                self._pel.pop(entry_id, None)
                self._entries.pop(entry_id, None)

    def dead_letter(self, entry: Entry, error: str) -> None:
        with self._cond:
            self._dead.append(
                {"id": entry.id, "error": error, "deliveries": entry.deliveries, "payload": entry.payload}
            )
            self._pel.pop(entry.id, None)

    def apply(
        self,
        sample_id: str,
        record: bytes,
        values: Mapping[str, float],
        at: float | None = None,
        client: str | None = None,
    ) -> bool:
        stamp = time.time() if at is None else at
        with self._cond:
            hour = int(stamp // 3600)
            now = time.time()
            for old in [h for h, (_, expires) in self._applied.items() if expires <= now]:
                del self._applied[old]  # as Redis expires an hour's set
            if any(sample_id in self._applied.get(h, ((),))[0] for h in (hour, hour - 1)):
                return False
            expires = (int(now // 3600) + 1) * 3600 + self._applied_ttl
            ids = self._applied.setdefault(hour, (set(), expires))[0]
            ids.add(sample_id)
            self._applied[hour] = (ids, expires)
            order = self._applied_order
            order.append((hour, sample_id))
            while len(order) > self.MAX_APPLIED:  # also bounded by count, whatever the traffic
                old_hour, old_id = order.popleft()
                bucket = self._applied.get(old_hour)
                if bucket is not None:
                    bucket[0].discard(old_id)
            self._scores.append(_compact(record))  # type: ignore[arg-type]
            for metric, value in values.items():
                total = self._totals.setdefault(metric, [0, 0.0])
                total[0] += 1
                total[1] += float(value)
                window = self._windows.get(metric)
                if window is None:
                    window = self._windows[metric] = deque(maxlen=self._window_cap)
                window.appendleft((stamp, float(value), client or ""))
            return True

    def window(self, metric: str, count: int) -> list[tuple[float, float]]:
        with self._cond:
            return [(stamp, value) for stamp, value, _ in list(self._windows.get(metric, ()))[:count]]

    def window_clients(self, metric: str, count: int) -> list[tuple[float, float, str]]:
        with self._cond:
            return list(self._windows.get(metric, ()))[:count]

    def read_mode(self) -> ModeState:
        with self._mode_changed:
            return self._mode

    def write_mode(self, state: ModeState, expected_version: int) -> bool:
        with self._mode_changed:
            if self._mode.version != expected_version:
                return False
            self._mode = state
            self._mode_changed.notify_all()
            return True

    def restore_mode(self, state: ModeState) -> bool:
        with self._mode_changed:
            if self._mode.version >= state.version:
                return False
            self._mode = state
            self._mode_changed.notify_all()
            return True

    def mode_listener(self) -> ModeListener:
        return _MemoryModeListener(self)

    def stats(self) -> QueueStats:
        with self._cond:
            lag = sum(1 for i in self._undelivered if i in self._entries)  # ≤ MAX_ENTRIES ids
            return QueueStats(len(self._entries), len(self._pel), lag, len(self._dead))

    def totals(self) -> dict[str, tuple[int, float]]:
        with self._cond:
            return {m: (int(t[0]), t[1]) for m, t in self._totals.items()}

    def recent_scores(self, count: int) -> list[bytes]:
        with self._cond:
            return list(reversed(self._scores))[:count]

    def dead_letters(self, count: int) -> list[dict[str, Any]]:
        with self._cond:
            return list(reversed(self._dead))[:count]

    def add_feedback(self, sample_id: str, record: bytes) -> None:
        with self._cond:
            self._feedback.append((sample_id, bytes(record)))

    def feedback(self, count: int) -> list[tuple[str, bytes]]:
        with self._cond:
            return list(reversed(self._feedback))[:count]

    def heartbeat(self, worker: str) -> None:
        with self._cond:
            self._workers[worker] = time.time()

    def forget_worker(self, worker: str) -> None:
        with self._cond:
            self._workers.pop(worker, None)

    def live_workers(self, max_age_seconds: float) -> dict[str, float]:
        horizon = time.time() - max_age_seconds
        with self._cond:
            return {w: at for w, at in self._workers.items() if at >= horizon}


_LIVE: weakref.WeakSet[MemoryQueue] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """Threads do not survive fork, but a lock one of them held does: give every queue fresh locks."""
    MemoryQueue._named_lock = threading.Lock()
    for queue in list(_LIVE):
        queue._reset_stream()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _MemoryModeListener(ModeListener):
    def __init__(self, queue: MemoryQueue) -> None:
        self._queue = queue
        self._seen = queue.read_mode().version

    def wait(self, timeout: float) -> bool:
        cond = self._queue._mode_changed
        with cond:
            changed = cond.wait_for(lambda: self._queue._mode.version != self._seen, timeout)
            self._seen = self._queue._mode.version
            return bool(changed)
