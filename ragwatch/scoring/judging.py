"""A bounded judging stage with threads of its own, so that judging a sample never holds up sending others.

Under ``content_off`` on a shared queue the service judges each sampled run before it leaves
(:class:`~ragwatch.scoring.embedded.PreScorer`). Judging on the producer's flusher thread made every other
sample wait behind the judge, for seconds per sample with the LLM judge. Now the flusher only hands the run
over: :meth:`JudgingStage.submit` puts it in a bounded queue and returns at once (False when the queue is
full: the caller sends the sample unscored right away). Daemon threads judge the runs and deliver each
payload to the producer, which sends it with its next batch.

Every accepted job is delivered exactly once, by whoever takes it out of ``_open`` first: a judging thread,
with its judged payload, or :meth:`JudgingStage.release` at shutdown, with the unjudged one. A judgement that
finishes after the release is thrown away. The text-bearing runs are held only while queued or being judged,
so at most ``size + threads`` at a time. After ``fork()`` the child starts with an empty stage, and its first
``submit`` starts its threads. The parent's jobs stay the parent's, as the producer's buffer does.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from ragwatch.forks import call_in_child
from ragwatch.guard import Guard

__all__ = ["JudgingStage"]

log = logging.getLogger("ragwatch.judging")

T = TypeVar("T")

#: How often an idle judging thread checks whether the stage was released.
_POLL_S = 0.5


def _nowhere(payload: bytes | None) -> None:
    raise RuntimeError("JudgingStage.deliver was not set")


class JudgingStage(Generic[T]):
    """Judges jobs on ``threads`` daemon threads, at most ``size`` waiting, and delivers each payload once.

    ``judge(job)`` returns the payload to send. It should contain its own failures, but when it raises
    anyway the error is counted (``ragwatch_internal_errors_total{component="scoring"}``) and
    ``unjudged(job)`` is sent instead. ``unjudged(job)`` is also what :meth:`release` sends. ``deliver`` is
    the producer's :meth:`~ragwatch.queue.producer.Producer.deliver`, set once the producer exists.
    """

    def __init__(
        self,
        judge: Callable[[T], bytes],
        unjudged: Callable[[T], bytes],
        *,
        threads: int,
        size: int,
        guard: Guard,
    ) -> None:
        self._judge = judge
        self._unjudged = unjudged
        self.threads = max(1, threads)
        self.size = max(1, size)
        self._guard = guard
        self.deliver: Callable[[bytes | None], None] = _nowhere
        self._reset()
        call_in_child(self._reset)

    def _reset(self) -> None:
        """Fresh state: at construction and in a forked child (threads do not survive fork)."""
        self._jobs: queue.Queue[int] = queue.Queue(maxsize=self.size)  # keys of _open, in arrival order
        self._open: dict[int, T] = {}  # accepted and not delivered yet: queued or being judged
        self._keys = itertools.count()
        self._workers: list[threading.Thread] = []
        self._start_lock = threading.Lock()
        self._released = threading.Event()

    # -- the producer's flusher thread -------------------------------------------------------------------
    def submit(self, job: T) -> bool:
        """Take ``job`` over (True: it will be delivered) or refuse it (False: full or released, the caller
        sends it itself). Never blocks."""
        if self._released.is_set():
            return False
        if not self._workers:
            self._start()
        key = next(self._keys)
        self._open[key] = job
        try:
            self._jobs.put_nowait(key)
        except queue.Full:
            return self._open.pop(key, None) is None  # None: a release took it meanwhile, and delivered it
        if self._released.is_set():  # released while we queued it: whoever pops it first delivers it
            return self._open.pop(key, None) is None
        return True

    def _start(self) -> None:
        with self._start_lock:
            if self._workers or self._released.is_set():
                return
            for i in range(self.threads):
                thread = threading.Thread(target=self._run, name=f"ragwatch-judge-{i}", daemon=True)
                thread.start()
                self._workers.append(thread)

    # -- judging threads ---------------------------------------------------------------------------------
    def _run(self) -> None:
        jobs, released = self._jobs, self._released  # this generation's: a fork replaces them
        while not released.is_set():
            try:
                key = jobs.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            job = self._open.get(key)
            if job is None:  # released before its turn
                continue
            try:
                payload: bytes | None = self._judge(job)
            except Exception as exc:  # a bug of ours: the sample still goes, unjudged
                self._guard.failed("scoring", exc, f"content_off: judging stage failed: {type(exc).__name__}")
                payload = self._unjudged_payload(job)
            del job
            if self._open.pop(key, None) is not None:  # not released while it was judged
                self._send(payload)

    # -- shutdown ----------------------------------------------------------------------------------------
    def release(self) -> int:
        """Stop judging and deliver every job not delivered yet, unjudged, at once; returns how many.

        Called by the producer at close, once the flush it was given has passed."""
        self._released.set()
        released = 0
        for key in list(self._open):
            job = self._open.pop(key, None)
            if job is not None:
                self._send(self._unjudged_payload(job))
                released += 1
        if released:
            log.warning(
                "ragwatch: %d sampled requests sent unscored at shutdown: their judging did not finish in time",
                released,
            )
        return released

    # -- both --------------------------------------------------------------------------------------------
    def pending(self) -> int:
        """Jobs accepted and not delivered yet."""
        return len(self._open)

    def _unjudged_payload(self, job: T) -> bytes | None:
        try:
            return self._unjudged(job)
        except Exception as exc:  # a bug of ours: the producer counts the sample as an encode_error drop
            self._guard.failed("scoring", exc, f"content_off: could not encode a sample: {type(exc).__name__}")
            return None

    def _send(self, payload: bytes | None) -> None:
        try:
            self.deliver(payload)
        except Exception as exc:  # a bug of ours: counted, never raised into the flusher or the host
            self._guard.failed("scoring", exc, f"content_off: could not hand a sample back: {type(exc).__name__}")
