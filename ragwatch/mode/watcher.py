"""The service side of degraded mode: a background thread keeps a local copy of the shared flag.

The request path reads :attr:`ModeWatcher.state` — a plain attribute, no I/O, no lock. The thread waits on
the queue's change notification (Redis pub/sub) with a timeout and re-reads the state after each wake-up
or timeout, so a lost notification costs at most ``refresh_seconds``. Callbacks run on this thread, one
transition at a time, and their errors are contained.

The first read happens off the start-up path (:meth:`ModeWatcher.initial_read`); a store that forgot the
state (an empty restart) gets back the newest one this process saw (:mod:`ragwatch.mode.restore`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from ragwatch.forks import call_in_child
from ragwatch.guard import Guard
from ragwatch.metrics.catalog import ModeMetrics
from ragwatch.mode.degrade import ModeState, effective
from ragwatch.mode.restore import read_restoring
from ragwatch.queue.contract import Queue

__all__ = ["ModeWatcher"]

Callback = Callable[[ModeState, ModeState], None]

log = logging.getLogger("ragwatch.mode")


class ModeWatcher:
    def __init__(
        self,
        queue: Queue,
        *,
        guard: Guard,
        refresh_seconds: float = 2.0,
        metrics: ModeMetrics | None = None,
        callbacks: list[Callback] | None = None,
    ) -> None:
        self.queue = queue
        self.refresh_seconds = refresh_seconds
        self.state = ModeState()
        self.degraded = False
        self._last: ModeState | None = None  # the newest state read, written back if the store forgets it
        self._read_lock = threading.Lock()  # background threads only: the first read and the loop's
        self.callbacks: list[Callback] = list(callbacks or [])
        self._guard = guard
        service = queue.service
        self._m_degraded = metrics.degraded.labels(service) if metrics else None
        self._m_override = {m: metrics.override.labels(service, m) for m in ("auto", "on", "off")} if metrics else {}
        self._m_reads = (
            {(r, o): metrics.reads.labels(service, r, o) for r in ("first", "refresh") for o in ("ok", "error")}
            if metrics
            else {}
        )
        self._publish(self.state)
        call_in_child(self._after_fork)
        self._stop = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether this process's background thread was started (and not stopped, nor lost to a fork)."""
        return self._thread is not None

    def start(self) -> None:
        """Start the background thread; idempotent (capture starts it with a process's first request)."""
        with self._start_lock:
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(target=self._loop, name="ragwatch-mode", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self.refresh_seconds + 1)

    def _after_fork(self) -> None:
        self._thread = None  # threads do not survive fork: the child's first request starts its own
        self._start_lock = threading.Lock()
        self._read_lock = threading.Lock()  # a first read in flight at the fork holds the parent's

    def _loop(self) -> None:
        listener = None
        while not self._stop.is_set():
            try:
                if listener is None:
                    listener = self.queue.mode_listener()
                self.refresh()
                listener.wait(self.refresh_seconds)
            except Exception as exc:  # an unreachable store: keep the last known state, try again later
                self._guard.note("export", exc, f"could not read degraded-mode state: {exc}", key="mode-watcher")
                self._stop.wait(self.refresh_seconds)
        if listener is not None:
            listener.close()

    @property
    def view(self) -> ModeState:
        """The state with ``degraded`` meaning the mode in force (override included), as users read it."""
        state = self.state
        return replace(state, degraded=effective(state))

    def initial_read(self) -> None:
        """Read the state once, on a short-lived thread of its own, and return at once: a service's import or
        start-up never waits on the queue (a Redis that accepts connections and never answers would hold it
        for the socket timeout). Until that read lands the process runs in the default state (normal, no
        override); its outcome is logged and counted (``ragwatch_degraded_state_reads_total{read="first"}``),
        and on failure the watching thread tries again."""
        thread = threading.Thread(target=self._first_read, name="ragwatch-mode-first-read", daemon=True)
        thread.start()

    def _first_read(self) -> None:
        started = time.monotonic()
        try:
            state = self._refresh("first")
        except Exception as exc:
            message = (
                f"could not read degraded-mode state at start-up ({time.monotonic() - started:.1f} s), running in "
                f"the default (normal) mode until a read succeeds: {exc}"
            )
            self._guard.note("export", exc, message)
            return
        log.info(
            "ragwatch: degraded-mode state of %s read at start-up in %.2f s: %s, override %s",
            self.queue.service,
            time.monotonic() - started,
            "degraded" if effective(state) else "normal",
            state.override,
        )

    def refresh(self) -> ModeState:
        """Re-read the shared state now (the thread does this by itself)."""
        return self._refresh("refresh")

    def _refresh(self, read: str) -> ModeState:
        with self._read_lock:
            try:
                new = read_restoring(self.queue, self._last)
            except Exception:
                self._count(read, "error")
                raise
            self._count(read, "ok")
            if new.version and (self._last is None or new.version >= self._last.version):
                self._last = new
            return self._adopt(new)

    def _count(self, read: str, outcome: str) -> None:
        child = self._m_reads.get((read, outcome))
        if child is not None:
            child.inc()

    def _adopt(self, new: ModeState) -> ModeState:
        old = self.state
        if new.version != old.version or new != old:
            self.state = new
            self.degraded = effective(new)
            self._publish(new)
            if effective(old) != self.degraded or old.override != new.override:
                for callback in self.callbacks:
                    try:
                        callback(old, new)
                    except Exception as exc:
                        self._guard.failed("listener", exc)
        return new

    def _publish(self, state: ModeState) -> None:
        if self._m_degraded is not None:
            self._m_degraded.set(1 if effective(state) else 0)
        for mode, child in self._m_override.items():
            child.set(1 if state.override == mode else 0)
