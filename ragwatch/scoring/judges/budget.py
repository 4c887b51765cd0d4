"""A time budget for one judge call: checked by the judge's own loops, so a hostile sample cannot hold a worker.

Why cooperative: a judge runs on a worker thread (or the service's in-process scorer thread), and Python
cannot interrupt a thread from outside — a signal alarm works only on the main thread. So the caller opens a
budget around ``judge.score(sample)`` (:func:`time_budget`) and the judge's long loops call :func:`check`
between units of work (the offline judge: once per claim). Past the deadline, :func:`check` raises
:class:`JudgeTimeExceeded`, and the worker dead-letters the sample with that reason and counts it
(``ragwatch_worker_entries_total{outcome="over_time_budget"}``). A judge without a budget open (tests,
``eval-judge``, the benchmarks) never raises.

Wall-clock time, not CPU time: the budget protects the worker's liveness (``/livez``) and its throughput,
both measured on the wall. A judge that waits on the network (the LLM judge) bounds its own calls with its
HTTP timeouts and does not call :func:`check`.

The deadline lives in a context variable, so each worker thread has its own and a judge needs no extra
argument: the :class:`~ragwatch.scoring.judges.base.Judge` protocol stays ``score(sample)``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ragwatch.errors import RagwatchError

__all__ = ["JudgeTimeExceeded", "check", "time_budget"]


class JudgeTimeExceeded(RagwatchError):
    """A judge ran past its time budget; the message says how far it got (never quotes the sample)."""


#: (deadline on the monotonic clock, the budget in seconds) of the judge call open on this thread.
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("ragwatch_judge_deadline", default=None)


@contextmanager
def time_budget(seconds: float | None) -> Iterator[None]:
    """Open a budget of ``seconds`` for the judge call inside the block (None or 0: no budget)."""
    if not seconds:
        yield
        return
    token = _DEADLINE.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check(done: int, total: int, unit: str) -> None:
    """Raise :class:`JudgeTimeExceeded` when the open budget is spent; ``done`` of ``total`` ``unit``s
    (e.g. 120 of 267 claims) say how far the judge got, for the dead letter's reason."""
    open_budget = _DEADLINE.get()
    if open_budget is not None and time.monotonic() > open_budget[0]:
        raise JudgeTimeExceeded(f"over the judge time budget of {open_budget[1]:g} s after {done} of {total} {unit}")
