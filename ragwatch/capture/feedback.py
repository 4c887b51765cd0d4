"""``rw.feedback(...)`` on the service side: redact a correction and store it beside the scores, off the
request thread.

A host calls ``rw.feedback`` from its own handlers (a thumbs-down button, a support tool), often on a request
thread, so nothing here waits on Redis there: the record is appended to a small bounded buffer and a daemon
thread, started on first use, redacts and writes it. The in-process queue (``memory://``) is the process's
own memory, so it is written at once. A write that fails is retried with backoff (capped) while the buffer
holds it; an overflow drops the oldest record, and what is still buffered at exit after ``close_timeout``
is lost — each loss counted as ``ragwatch_feedback_total{outcome="dropped"}`` and logged (rate-limited),
never raised.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ragwatch.forks import call_at_exit, call_in_child
from ragwatch.guard import Guard
from ragwatch.queue.contract import Queue
from ragwatch.sampling.feedback import Feedback, count_feedback, encode_feedback

__all__ = ["FeedbackWriter"]

#: Records buffered at most while the store is away (a person's clicks: hundreds would be a lot).
BUFFER = 1_000
#: Longest wait between two write attempts while the store is away.
MAX_BACKOFF = 30.0


class FeedbackWriter:
    """Redacts and stores feedback records for one queue; :meth:`offer` never blocks on I/O, never raises."""

    def __init__(
        self,
        queue: Queue,
        redact: Callable[[str], str],
        *,
        guard: Guard,
        counter: Any = None,
        content: bool = True,
        close_timeout: float = 5.0,
    ) -> None:
        self.queue = queue
        self._redact = redact
        self._guard = guard
        self._counter = counter
        self._content = content  # False (content_off): no claim, note or chunk id leaves the process
        self._close_timeout = close_timeout
        self._inline = queue.url.lower().startswith("memory:")  # the process's own memory: no I/O to wait on
        self._reset()
        call_in_child(self._reset)
        call_at_exit(self.close)

    def _reset(self) -> None:
        """Fresh state: at construction and in a forked child (threads do not survive fork)."""
        self._buffer: deque[Feedback] = deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._busy = False
        self._closed = False
        self._close_lock = threading.Lock()

    def count(self, feedback: Feedback, outcome: str) -> None:
        """Count ``feedback`` once per kind it carries under ``outcome``."""
        try:
            count_feedback(self._counter, self.queue.service, feedback.kinds, outcome)
        except Exception as exc:  # a metric must never fail the host
            self._guard.failed("capture", exc)

    def offer(self, feedback: Feedback) -> bool:
        """Hand a record over: True when it was stored (``memory://``) or buffered for storing."""
        if self._inline:
            return self._write(feedback)
        if self._closed:
            self.count(feedback, "dropped")
            return False
        buffer = self._buffer
        buffer.append(feedback)
        if len(buffer) > BUFFER:
            try:
                lost = buffer.popleft()
            except IndexError:  # the writer emptied it meanwhile
                pass
            else:
                self.count(lost, "dropped")
                self._guard.note("export", None, "feedback buffer full: the oldest record was dropped", key="feedback")
        if self._thread is None:
            self._start()
        self._wake.set()
        return True

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._loop, name="ragwatch-feedback", daemon=True)
                self._thread.start()

    def _write(self, feedback: Feedback) -> bool:
        """Redact, encode and store one record; False (counted, logged) when that failed."""
        try:
            record = feedback.redacted(self._redact)
            if not self._content:
                record = record.without_text()
            self.queue.add_feedback(record.sample_id, encode_feedback(record))
        except Exception as exc:
            self._guard.note("export", exc, f"feedback not stored: {type(exc).__name__}", key="feedback")
            return False
        self.count(feedback, "stored")
        return True

    def _loop(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            while not self._stop.is_set():
                self._busy = True  # taken out of the buffer but not yet stored: flush() waits for it
                try:
                    feedback = self._buffer.popleft()
                except IndexError:
                    self._busy = False
                    break
                stored = self._write(feedback)
                if not stored:
                    with self._close_lock:
                        if self._closed:  # close() has counted the buffer already: this one is lost too
                            self.count(feedback, "dropped")
                        else:
                            self._buffer.appendleft(feedback)  # kept for the retry; an overflow may drop it
                self._busy = False
                if not stored:
                    attempt += 1
                    self._stop.wait(random.uniform(0, min(MAX_BACKOFF, 0.1 * 2**attempt)))  # full jitter
                    break
                attempt = 0

    def pending(self) -> int:
        """Records not yet stored."""
        return len(self._buffer) + int(self._busy)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every buffered record was stored (True) or ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        while self.pending():
            if time.monotonic() >= deadline:
                return False
            self._wake.set()
            time.sleep(0.005)
        return True

    def close(self, timeout: float | None = None) -> None:
        """Flush within ``timeout`` (default ``close_timeout``), stop the thread; count what is left as dropped."""
        if self._closed:
            return
        if self._thread is not None:
            self.flush(self._close_timeout if timeout is None else timeout)
        with self._close_lock:
            self._closed = True
            self._stop.set()
            self._wake.set()
            while self._buffer:
                self.count(self._buffer.popleft(), "dropped")
