"""The service side of degraded mode: a background thread keeps a local copy of the shared flag.

The request path reads :attr:`ModeWatcher.state` — a plain attribute, no I/O, no lock. The thread waits on
the queue's change notification (Redis pub/sub) with a timeout and re-reads the state after each wake-up
or timeout, so a lost notification costs at most ``refresh_seconds``. Callbacks run on this thread, one
transition at a time, and their errors are contained.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from ragwatch.forks import call_in_child
from ragwatch.guard import Guard
from ragwatch.metrics.catalog import ModeMetrics
from ragwatch.mode.degrade import ModeState, effective, override_lost
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
        self._last_override = "auto"  # the operator's override as last read, re-asserted if the store forgets
        self.callbacks: list[Callback] = list(callbacks or [])
        self._guard = guard
        service = queue.service
        self._m_degraded = metrics.degraded.labels(service) if metrics else None
        self._m_override = {m: metrics.override.labels(service, m) for m in ("auto", "on", "off")} if metrics else {}
        self._publish(self.state)
        call_in_child(self._after_fork)
        self._stop = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
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
        """Read the state once, now, so the service starts in the right mode (before any request or thread);
        an unreachable store keeps the default (normal) state and the thread tries again."""
        try:
            self.refresh()
        except Exception as exc:
            self._guard.note("export", exc, f"could not read degraded-mode state at start-up: {exc}")

    def refresh(self) -> ModeState:
        """Re-read the shared state now (the thread does this by itself)."""
        new = self.queue.read_mode()
        if override_lost(new, self._last_override):
            new = self.queue.set_override(self._last_override)
            log.warning(
                "ragwatch: degraded-mode state of %s was missing from the queue store (restarted empty?); "
                "re-asserted the operator override %r",
                self.queue.service,
                self._last_override,
            )
        if new.version:
            self._last_override = new.override
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
