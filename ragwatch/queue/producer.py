"""The service side of the queue: a bounded in-process buffer and a background flusher.

The request thread only appends ``(run, reason)`` to a ``deque`` — O(1), no I/O, no lock of ours (the
deque's append and popleft are atomic under the GIL). A daemon thread builds samples (normalise, truncate,
redact, encode) and writes them to the queue in pipelined batches. When Redis is down or slow the flusher
backs off exponentially with jitter and keeps one batch for retry; meanwhile the buffer fills up to its
bound and then drops its *oldest* entries, each drop counted by reason: ``queue_full`` while Redis refuses
writes at ``maxmemory``, ``buffer_full`` otherwise. Nothing here ever raises into the host.

Accounting is exact under concurrency: a drop is counted only by the thread whose ``popleft`` removed an
entry, so sent + dropped equals offered to the sample (checking the length first and letting the deque
evict would count a drop whenever the flusher took an entry in between).

Shutdown flushes with a deadline (registered with :mod:`atexit`), so a dead Redis never hangs the host's
exit. After ``fork()`` the child starts with an empty buffer and its own flusher: the parent's samples
remain the parent's to send.

A build may take a run over instead of returning its payload (it returns None): it sends the payload later
through :meth:`Producer.deliver`, exactly once, from a thread of its own — so slow work on a sample (the
service judging it under ``content_off``) never holds up sending the others. Such runs still count as
pending, so :meth:`Producer.flush` waits for them; at :meth:`Producer.close`, after the flush, ``release``
tells the build to hand over what it still holds at once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable

from ragwatch.capture.run import Run
from ragwatch.errors import QueueFullError
from ragwatch.forks import call_at_exit, call_in_child
from ragwatch.guard import Guard
from ragwatch.metrics.catalog import ProducerMetrics
from ragwatch.queue.contract import Queue

__all__ = ["Producer"]

log = logging.getLogger("ragwatch.producer")

#: A run's payload, or None when the build took the run over and will :meth:`Producer.deliver` it itself.
Build = Callable[[Run, str], "bytes | None"]
#: Hand over at once every run a build took over (at close); returns how many it handed over.
Release = Callable[[], int]
#: The most :meth:`Producer.close` waits, past its timeout, to send what ``release`` handed over.
RELEASE_GRACE_S = 1.0


class Producer:
    """Buffers sampled runs and ships them to ``queue`` from a background thread."""

    def __init__(
        self,
        queue: Queue,
        build: Build,
        *,
        metrics: ProducerMetrics | None,
        guard: Guard,
        buffer_size: int = 10_000,
        batch_size: int = 500,
        flush_interval: float = 0.25,
        max_backoff: float = 30.0,
        close_timeout: float = 5.0,
        release: Release | None = None,
    ) -> None:
        self.queue = queue
        self._build = build
        self._release = release
        self._guard = guard
        self._size = buffer_size
        self._batch = batch_size
        self._interval = flush_interval
        self._max_backoff = max_backoff
        self._close_timeout = close_timeout
        service = queue.service
        self._m_sent = metrics.sent.labels(service) if metrics else None
        self._m_buffer_full = metrics.dropped.labels(service, "buffer_full") if metrics else None
        self._m_queue_full = metrics.dropped.labels(service, "queue_full") if metrics else None
        self._m_full = self._m_buffer_full  # what an overflow counts as: queue_full while Redis is full
        self._m_encode = metrics.dropped.labels(service, "encode_error") if metrics else None
        self._m_shutdown = metrics.dropped.labels(service, "shutdown") if metrics else None
        self._m_errors = metrics.queue_errors.labels(service, "producer") if metrics else None
        self._m_buffered = metrics.buffered.labels(service) if metrics else None
        self._reset()
        self._closed = False
        call_in_child(self._reset)
        call_at_exit(self.close)

    def _reset(self) -> None:
        """Fresh state: at construction and in a forked child (threads do not survive fork)."""
        self._buffer: deque[tuple[Run, str]] = deque()
        self._retry: list[bytes] = []
        #: payloads delivered for runs a build took over; at most what it holds, so bounded by it
        self._ready: deque[bytes] = deque()
        self._taken = 0  # runs a build took over and has not delivered yet
        self._taken_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.failures = 0

    # -- request thread ---------------------------------------------------------------------------------
    def offer(self, run: Run, reason: str) -> None:
        """Hand a sampled run over; never blocks, never raises."""
        buffer = self._buffer
        buffer.append((run, reason))  # counted once, as ragwatch_sampling_decisions_total{decision="sampled"}
        if len(buffer) > self._size:
            try:
                buffer.popleft()  # the oldest goes; only a popleft that removed one counts a drop
            except IndexError:  # the flusher emptied the buffer meanwhile: nothing was lost
                pass
            else:
                if self._m_full is not None:
                    self._m_full.inc()
        if self._thread is None:
            self._start()
        if len(buffer) >= self._batch and not self._wake.is_set():
            self._wake.set()

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._loop, name="ragwatch-flusher", daemon=True)
                self._thread.start()

    # -- flusher thread ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            try:
                ok = self._drain()
            except Exception as exc:  # a bug of ours: count it, keep the thread alive
                self._guard.failed("export", exc)
                ok = False
            self._gauge()
            if ok:
                attempt = 0
            else:
                attempt += 1
                self._backoff(random.uniform(0, min(self._max_backoff, 0.1 * 2**attempt)))  # full jitter

    def _backoff(self, seconds: float) -> None:
        """Wait out a backoff, keeping the buffer gauge current: an outage is when it matters."""
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(min(left, self._interval))
            self._gauge()

    def _gauge(self) -> None:
        if self._m_buffered is not None:
            self._m_buffered.set(self.pending())

    def _drain(self) -> bool:
        """Send everything buffered; False when the queue refused (the batch stays for the next try)."""
        self._idle.clear()
        try:
            while True:
                if not self._retry:
                    self._retry = self._next_batch()
                    if not self._retry:
                        return True
                try:
                    self.queue.add(self._retry)
                except Exception as exc:
                    self._keep_unsent(exc)
                    self.failures += 1
                    self._m_full = self._m_queue_full if isinstance(exc, QueueFullError) else self._m_buffer_full
                    if self._m_errors is not None:
                        self._m_errors.inc()
                    message = f"queue write failed, will retry with backoff: {exc}"
                    self._guard.note("export", exc, message, key="sample-flusher")
                    return False
                self._m_full = self._m_buffer_full
                if self._m_sent is not None:
                    self._m_sent.inc(len(self._retry))
                self._retry = []
                self._gauge()
        finally:
            if not self._buffer and not self._retry and not self._ready:
                self._idle.set()

    def _keep_unsent(self, exc: Exception) -> None:
        """After a batch was refused part-way (Redis reached ``maxmemory`` mid-batch), count what went in as
        sent and keep only the rest for the retry: re-sending the whole batch would duplicate the samples
        Redis had already taken. Any other failure keeps the whole batch (at least once)."""
        results = exc.results if isinstance(exc, QueueFullError) else None
        if results is None or len(results) != len(self._retry):
            return
        unsent = [payload for payload, went_in in zip(self._retry, results, strict=True) if not went_in]
        if self._m_sent is not None and len(unsent) < len(self._retry):
            self._m_sent.inc(len(self._retry) - len(unsent))
        self._retry = unsent

    def _next_batch(self) -> list[bytes]:
        payloads: list[bytes] = []
        ready = self._ready
        while ready and len(payloads) < self._batch:
            try:
                payloads.append(ready.popleft())
            except IndexError:
                break
        buffer = self._buffer
        while buffer and len(payloads) < self._batch:
            try:
                run, reason = buffer.popleft()
            except IndexError:
                break
            try:
                payload = self._build(run, reason)
                if payload is None:  # taken over: delivered later, pending until then (its delivery may
                    # come first; pending() is one short meanwhile, but flush() waits while this thread works)
                    with self._taken_lock:
                        self._taken += 1
                else:
                    payloads.append(payload)
            except Exception as exc:
                if self._m_encode is not None:
                    self._m_encode.inc()
                self._guard.failed("export", exc, f"could not build a sample, dropped: {type(exc).__name__}")
        return payloads

    # -- a build's own threads ---------------------------------------------------------------------------
    def deliver(self, payload: bytes | None) -> None:
        """Send ``payload``, built for a run the build took over; None: it could not be built (dropped,
        counted as ``encode_error``). Called once per such run, from any thread but the request's."""
        with self._taken_lock:  # one step for pending(): the run moves from taken to ready
            self._taken -= 1
            if payload is not None:
                self._ready.append(payload)
        if payload is None and self._m_encode is not None:
            self._m_encode.inc()

    # -- control ----------------------------------------------------------------------------------------
    def pending(self) -> int:
        """Samples not yet written to the queue (taken over by the build and not delivered yet included)."""
        with self._taken_lock:
            built_elsewhere = self._taken + len(self._ready)
        return len(self._buffer) + len(self._retry) + built_elsewhere

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything buffered was written (True) or ``timeout`` passed (False)."""
        if self._thread is None and self._buffer:
            self._start()
        deadline = time.monotonic() + timeout
        while True:
            if self.pending() == 0 and self._idle.is_set():
                return True
            if time.monotonic() >= deadline:
                return False
            self._wake.set()
            time.sleep(0.005)

    def close(self, timeout: float | None = None) -> None:
        """Flush within ``timeout`` (default ``close_timeout``), stop the thread; count what is left as lost.

        Runs the build took over get the same ``timeout``; then ``release`` hands over what it still holds,
        sent unfinished within at most :data:`RELEASE_GRACE_S` more."""
        if self._closed:
            return
        self._closed = True
        timeout = self._close_timeout if timeout is None else timeout
        thread = self._thread
        done = self.flush(timeout) if thread is not None else True
        released = self._release_taken()  # also stops the build's threads, whether or not it held any
        if thread is not None:
            if released and not done:
                self.flush(min(timeout, RELEASE_GRACE_S))
            self._stop.set()
            self._wake.set()
            thread.join(0.5)
        left = self.pending()
        if left:
            if self._m_shutdown is not None:
                self._m_shutdown.inc(left)
            log.warning("ragwatch: %d samples not sent before shutdown (queue unreachable)", left)
            self._buffer.clear()
            self._retry = []
            with self._taken_lock:
                self._ready.clear()
                self._taken = 0

    def _release_taken(self) -> int:
        if self._release is None:
            return 0
        try:
            return self._release()
        except Exception as exc:  # a bug of ours: what it held stays pending, counted as lost
            self._guard.failed("export", exc, f"could not release the runs being built: {type(exc).__name__}")
            return 0

    def __repr__(self) -> str:
        return f"<Producer queue={self.queue!r} pending={self.pending()}>"
