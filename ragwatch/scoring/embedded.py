"""In-process scoring: the service scores its own samples on one background thread, no Redis needed.

With the ``memory://`` queue (the default when ``redis_url`` is unset) nothing outside the process can read
the samples, so ``scoring="auto"`` runs the scoring worker inside the service: the same
:class:`~ragwatch.scoring.worker.Worker` loop and :class:`~ragwatch.scoring.worker.Scoring` core as ``ragwatch worker``
(same score records, same idempotent apply, same metric families on the service's own registry, the same
SLA evaluator and breaker deciding degraded mode), only with ``concurrency=0`` — judges run on the loop's
thread — and a budget in samples per second, so a service cannot notice its scorer. Samples over the
budget are acknowledged unscored and counted in ``ragwatch_scoring_skipped_total{reason="budget"}``.

The thread starts with the first request (as the mode watcher and the flusher do), so a pre-fork master
never runs one; after ``fork()`` each child starts its own. On ``memory://`` every process then has its own
window and mode: that is detected and logged once per process, since a fleet that should degrade together
needs the shared windows of Redis and ``ragwatch worker``.

``content_off`` on a shared queue is the other way a service scores its own samples: no text may leave the
process, so no worker could judge it. :class:`PreScorer` judges each sampled run on judging threads of its
own (:mod:`ragwatch.scoring.judging`, handed the run by the producer's flusher thread) and sends the textless
sample with its scores; workers apply them without judging, into the same shared windows.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ragwatch.forks import call_in_child
from ragwatch.guard import Guard
from ragwatch.metrics.catalog import WorkerMetrics, families
from ragwatch.mode.sla import SLAEvaluator
from ragwatch.queue.contract import Queue
from ragwatch.sampling.sample import build_record, build_sample, encode_record
from ragwatch.scoring.content import not_scored, prescored
from ragwatch.scoring.diagnosis import Thresholds
from ragwatch.scoring.judges.budget import JudgeTimeExceeded
from ragwatch.scoring.judging import JudgingStage
from ragwatch.scoring.worker import ScoreRecord, Scoring, Worker, not_a_sample

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ragwatch.capture.run import Run
    from ragwatch.settings import Settings

__all__ = ["Budget", "InProcessScorer", "PreScorer", "scores_in_process"]

log = logging.getLogger("ragwatch.embedded")

_forked = False
_warned_multiprocess = False


def _mark_forked() -> None:
    global _forked, _warned_multiprocess
    _forked = True
    _warned_multiprocess = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked)


def scores_in_process(settings: Settings) -> bool:
    """See :meth:`Settings.scores_in_process`."""
    return settings.scores_in_process()


def several_processes() -> str | None:
    """Why this looks like one of several server processes (forked, spawned, or multiprocess metrics)."""
    if _forked:
        return "forked from a parent process (gunicorn, uvicorn --workers)"
    if multiprocessing.parent_process() is not None:
        return "started by multiprocessing (uvicorn --workers)"
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return "PROMETHEUS_MULTIPROC_DIR is set"
    return None


class Budget:
    """A token bucket: at most ``rate`` admissions per second on average, bursts of at most ``burst``."""

    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1.0, rate if burst is None else burst)
        self._clock = clock
        self._tokens = self.burst
        self._at = clock()

    def __call__(self) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


#: Runs waiting for a judging thread, per thread: a burst within the budget waits, a flood goes unscored.
BACKLOG_PER_THREAD = 4


class _Job(NamedTuple):
    """A sampled run handed to the judging threads, with the textless record it will be sent as."""

    run: Run
    reason: str
    record: dict[str, Any]


class PreScorer:
    """``content_off`` on a shared queue: the service judges its own sampled runs before they leave it.

    Samples reach Redis without text, so no worker can judge them; the service can, and only it. :meth:`encode`
    is the producer's build function, so it runs on the flusher thread — never the request thread, which still
    only appends the run to the producer's bounded buffer. It builds the textless record there and hands it,
    with the run, to a :class:`~ragwatch.scoring.judging.JudgingStage`: ``worker_concurrency`` daemon threads
    and a queue of ``BACKLOG_PER_THREAD`` runs per thread. Judging takes no time of the flusher's, so a slow
    judge (the LLM judge's HTTP calls take seconds) never holds back the other samples' sending. A judging
    thread builds the record again with the same sample id, with its text (redacted and cut like any
    sample), as a :class:`Sample` for the judges, held in memory only, judges it, adds the verdict to the
    textless record (:func:`~ragwatch.scoring.content.prescored`: scores, text-free evidence, diagnoses) and
    hands the payload back to the producer. The judges are the ones the service's settings name, each call
    capped by ``judge_time_budget_s`` and scored by the same :class:`~ragwatch.scoring.worker.Scoring` core
    as a worker's; the worker applies the verdict without judging, once per sample id, into the shared
    windows.

    Bounded: at most ``scoring_max_per_second`` samples judged per second per process (the in-process
    scorer's budget), and none when the judging queue is full. Those samples go out unscored at once, counted
    by the worker as ``ragwatch_scoring_skipped_total{reason="budget"}``. So do the runs still waiting or being
    judged when the producer closes and its ``close_timeout`` has passed. A judge that runs over its time
    budget or fails marks the sample so, and the worker dead-letters it, counted (``over_time_budget``,
    ``dead_lettered``).
    """

    def __init__(
        self,
        queue: Queue,
        settings: Settings,
        record_options: dict[str, Any],
        *,
        guard: Guard,
        judges: list[Any] | None = None,
    ) -> None:
        from ragwatch.scoring.judges import make_judges

        self.judges = judges if judges is not None else make_judges(settings.judges, settings)  # ConfigError now
        self.scoring = Scoring(
            queue, self.judges, thresholds=Thresholds.of(settings), time_budget_s=settings.judge_time_budget_s
        )
        self._options = record_options  # build_record's limits, redactors and service_version
        self._guard = guard
        self.admit = Budget(settings.scoring_max_per_second)
        threads = settings.worker_concurrency
        #: where runs wait to be judged; its ``deliver`` is set to the producer's once the producer exists
        self.stage: JudgingStage[_Job] = JudgingStage(
            self._judged, self._unjudged, threads=threads, size=BACKLOG_PER_THREAD * threads, guard=guard
        )

    def encode(self, run: Run, reason: str) -> bytes | None:
        """The textless sample record of ``run`` marked unscored, encoded; or None when the judging stage
        took it over, to send it with its verdict once judged."""
        job = _Job(run, reason, build_record(run, reason=reason, content=False, **self._options))
        if self.admit() and self.stage.submit(job):
            return None
        return self._unjudged(job)

    def _judged(self, job: _Job) -> bytes:
        """On a judging thread: the textless record with the service's verdict on it, encoded."""
        return encode_record({**job.record, "scored": self._verdict(job.run, job.reason, job.record["sample_id"])})

    def _unjudged(self, job: _Job) -> bytes:
        """The textless record without a verdict: a budget skip (over the rate, the judging queue full, or the
        stage released at shutdown)."""
        return encode_record({**job.record, "scored": not_scored("budget")})

    def _verdict(self, run: Run, reason: str, sample_id: str) -> dict[str, Any]:
        try:  # whatever fails here, the textless sample still leaves, marked (its latency and cost are kept)
            sample = build_sample(run, reason=reason, keep_text=True, **self._options)  # in memory only
            sample.sample_id = sample_id
            unfit = not_a_sample(sample)
            if unfit is not None:
                return not_scored(unfit)
            return prescored(self.scoring.score(sample))
        except JudgeTimeExceeded as exc:  # its message says how far the judge got, never the text
            return not_scored("over_time_budget", str(exc))
        except Exception as exc:  # a judge's bug or its endpoint's: the message may quote the text
            self._guard.note("scoring", exc, f"content_off: judging in the service failed: {type(exc).__name__}")
            return not_scored("judge_error", type(exc).__name__)


class _InProcessWorker(Worker):
    """The worker loop, plus counting the samples the bounded memory queue trimmed before it read them."""

    _trimmed_seen = 0

    def _maintenance(self) -> None:
        super()._maintenance()
        trimmed = getattr(self.queue, "trimmed", 0)
        if trimmed > self._trimmed_seen:
            self.skip("trimmed", trimmed - self._trimmed_seen)
        self._trimmed_seen = trimmed


class InProcessScorer:
    """Runs a :class:`~ragwatch.scoring.worker.Worker` for ``queue`` on one daemon thread of the service."""

    def __init__(
        self,
        queue: Queue,
        settings: Settings,
        *,
        guard: Guard,
        registry: CollectorRegistry | None,
        judges: list[Any] | None = None,
    ) -> None:
        from ragwatch.scoring.judges import make_judges

        self.queue = queue
        self.settings = settings
        self._guard = guard
        self.judges = judges if judges is not None else make_judges(settings.judges, settings)  # ConfigError now
        self.metrics = families(WorkerMetrics, registry, settings.latency_buckets) if settings.metrics else None
        self.on_score: list[Callable[[ScoreRecord], None]] = []
        self._memory = queue.url.lower().startswith("memory:")
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._stopping = threading.Event()
        self.worker = self._build_worker()
        call_in_child(self._after_fork)

    def _build_worker(self) -> Worker:
        s = self.settings
        worker = _InProcessWorker(
            self.queue,
            self.judges,
            name=f"in-process-{os.getpid()}",
            concurrency=0,
            batch=min(64, s.worker_batch),
            block_ms=min(500, s.worker_block_ms),
            claim_idle_ms=int(s.claim_idle_seconds * 1000),
            max_deliveries=s.max_deliveries,
            metrics=self.metrics,
            maintenance_seconds=min(1.0, s.sla_evaluate_seconds),
            evaluator=SLAEvaluator(self.queue, s.sla_policy(), s.health_thresholds, self.metrics),
            thresholds=Thresholds.of(s),
            # content_off on Redis: the budget was spent judging before sending; applying costs no judge
            admit=None if s.prescores(self.queue.url) else Budget(s.scoring_max_per_second),
            judge_time_budget_s=s.judge_time_budget_s,
            on_score=(self._announce,),
        )
        worker.scoring.content = not s.content_off  # judged in memory, stored without text
        return worker

    def _announce(self, record: ScoreRecord) -> None:
        for callback in self.on_score:
            callback(record)

    # -- life cycle ---------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether this process's scoring thread was started (and not stopped, nor lost to a fork)."""
        return self._thread is not None

    def start(self) -> None:
        """Start the scoring thread; idempotent (capture starts it with a process's first request)."""
        with self._start_lock:
            if self._thread is None and not self._stopping.is_set():
                self._warn_if_several_processes()
                self._thread = threading.Thread(target=self._run, name="ragwatch-scorer", daemon=True)
                self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Finish the sample being scored and stop the thread."""
        self._stopping.set()
        self.worker.stop()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def _after_fork(self) -> None:
        self._thread = None  # threads do not survive fork: the child's first request starts its own
        self._start_lock = threading.Lock()
        self.worker = self._build_worker()  # its own consumer name, loop state and budget

    def _run(self) -> None:
        backoff = 0.5
        while not self._stopping.is_set():
            try:
                self.worker.work()
            except Exception as exc:  # a bug of ours or a judge's: count it, keep scoring later
                self._guard.failed("scoring", exc, f"in-process scoring failed, restarting: {type(exc).__name__}")
                self._stopping.wait(backoff)
                backoff = min(30.0, backoff * 2)

    def _warn_if_several_processes(self) -> None:
        global _warned_multiprocess
        if not self._memory or _warned_multiprocess:
            return
        why = several_processes()
        if why is not None:
            _warned_multiprocess = True
            log.warning(
                "ragwatch: process %d (%s) scores its own samples on memory://: its quality window and "
                "degraded mode are its own, not shared with the other processes; set redis_url and run "
                "`ragwatch worker` to share them",
                os.getpid(),
                why,
            )
