"""Fail open: ragwatch's own errors are counted and logged, never raised into the host.

Every piece of bookkeeping that runs beside a host call goes through :meth:`Guard.failed` when it breaks.
Logging is rate-limited per component, because an error on the hot path repeats on every request and a
flood of identical tracebacks is its own outage.
"""

from __future__ import annotations

import logging
import threading
import time

from prometheus_client import Counter

from ragwatch.labels import safe_text

__all__ = ["COMPONENTS", "Guard"]

log = logging.getLogger("ragwatch")

#: The bounded set of `component` label values of ``ragwatch_internal_errors_total``.
COMPONENTS = ("capture", "chunks", "response", "pricing", "tracing", "stream", "asgi", "listener", "export", "scoring")


class Guard:
    """Counts and logs internal errors of one process; safe to call from any thread."""

    def __init__(self, counter: Counter | None, every_seconds: float = 60.0) -> None:
        self._every = every_seconds
        self._children = {c: counter.labels(c) for c in COMPONENTS} if counter is not None else {}
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def failed(self, component: str, exc: BaseException | None = None, message: str = "") -> None:
        """Record one internal error; logs at most once per ``every_seconds`` per component."""
        try:
            child = self._children.get(component)
            if child is not None:
                child.inc()
        except Exception:
            pass
        self.note(component, exc, message)

    def note(
        self, component: str, exc: BaseException | None = None, message: str = "", *, key: str | None = None
    ) -> None:
        """Log a problem at most once per ``every_seconds`` per ``key`` (default: the component), without
        counting it as ours (an unreachable Redis is counted by its own metric, not as a ragwatch bug).

        Threads sharing a component pass their own ``key``: the sample flusher's "queue write failed" must
        not be silenced for a minute because the mode watcher just logged that it cannot read the flag.
        """
        try:
            now = time.monotonic()
            key = key or component
            with self._lock:
                last = self._last.get(key)
                if last is not None and now - last < self._every:
                    self._suppressed[key] = self._suppressed.get(key, 0) + 1
                    return
                self._last[key] = now
                skipped = self._suppressed.pop(key, 0)
            what = safe_text(message or (type(exc).__name__ if exc is not None else "error"))
            log.warning(
                "ragwatch %s error (ignored, the host is unaffected): %s%s",
                component,
                what,
                f" [{skipped} similar errors not logged]" if skipped else "",
                exc_info=exc if exc is not None else None,
            )
        except Exception:  # the last line of defence must not raise either
            pass
