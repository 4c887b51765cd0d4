"""The scoring worker: read samples from the queue, judge them, store the scores, acknowledge.

One loop, readable in one sitting (:meth:`Worker.work`): set up, then repeat — stop flag, maintenance
(heartbeat, queue gauges, claim entries a crashed worker left pending), a blocking read with a timeout,
scoring on a thread pool, apply + acknowledge — and always tear down in ``finally``.

Delivery is at least once; counting is exactly once: a score is applied with the sample id as an
idempotency key *before* the entry is acknowledged, so a worker killed between the two leaves an entry
that the next worker finds already applied (counted ``duplicate``) and simply acknowledges. An entry whose
scoring fails stays pending and is retried after ``claim_idle``; after ``max_deliveries`` it goes to the
dead-letter stream with its error. Malformed entries go there at once: they will not get better.

Threads, not processes: judges calling an LLM spend their time waiting on the network, so a pool of
``concurrency`` threads keeps many requests in flight. CPU-bound judges gain nothing from more threads
(the GIL): run one worker process per core instead — they share the consumer group.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import orjson

from ragwatch.errors import QueueError, QueueFullError
from ragwatch.labels import safe_text
from ragwatch.metrics.catalog import WorkerMetrics
from ragwatch.mode.sla import SLAEvaluator
from ragwatch.queue.contract import Entry, Queue, Retention
from ragwatch.sampling.sample import Limits, Sample, SampleDecodeError, decode_sample
from ragwatch.scoring.content import Judged, NotScored, read_scored, without_text
from ragwatch.scoring.diagnosis import Thresholds, diagnose_all
from ragwatch.scoring.evaluation_events import EvaluationEvents
from ragwatch.scoring.judges.base import Judge
from ragwatch.scoring.judges.budget import JudgeTimeExceeded, time_budget
from ragwatch.settings import JUDGE_TIME_BUDGET_S

__all__ = ["SKIP_REASONS", "ScoreRecord", "Scoring", "Worker", "not_a_sample", "record_of"]

log = logging.getLogger("ragwatch.worker")
#: How many times a write that a full Redis refused is retried after trimming before its scores are shed.
_FULL_RETRIES = 3


@dataclass(slots=True)
class ScoreRecord:
    """What is stored per scored sample (the ``scores`` stream) and read back by reports."""

    sample_id: str
    trace_id: str | None
    service: str
    judges: list[dict[str, str]]
    scores: dict[str, float]
    details: dict[str, Any]
    timings: dict[str, float]
    scored_at: float
    created_at: float
    question: str | None
    answer: str | None
    chunk_ids: list[str]
    model: str | None
    route: str | None
    reason: str
    diagnosis: str
    tags: dict[str, str] = field(default_factory=dict)  # force_sample tags: the report's per-tag slices
    span_id: str | None = None  # the sampled request's span: evaluation events are parented to it
    diagnoses: list[str] = field(default_factory=list)  # every label, causal order; diagnosis is the first
    service_version: str | None = None  # the producer's service_version setting: a change is a chart marker


def record_of(sample: Sample, judged: Judged) -> ScoreRecord:
    """The score record of ``sample`` with what its judges said — here, or in the service (``content_off``)."""
    return ScoreRecord(
        sample_id=sample.sample_id,
        trace_id=sample.trace_id,
        service=sample.service,
        judges=judged.judges,
        scores=judged.scores,
        details=judged.details,
        timings=judged.timings,
        scored_at=judged.scored_at,
        created_at=sample.created_at,
        question=sample.question,
        answer=sample.answer,
        chunk_ids=[c.id for c in sample.chunks],
        model=sample.model,
        route=sample.route,
        reason=sample.reason,
        diagnosis=judged.diagnoses[0],
        tags=dict(sample.tags),
        span_id=sample.span_id,
        diagnoses=judged.diagnoses,
        service_version=sample.service_version,
    )


#: Why a delivered entry was acknowledged without being scored (``ragwatch_scoring_skipped_total``): over
#: the in-process budget, trimmed before anything read it, or not a quality sample (:func:`not_a_sample`).
SKIP_REASONS = ("budget", "trimmed", "no_context", "no_question")
#: Seconds between two debug lines about samples that were not quality samples.
_SKIP_LOG_SECONDS = 60.0


def not_a_sample(sample: Sample) -> str | None:
    """Why ``sample`` is no quality sample, or None when it is one.

    ``no_context``: no retriever ran for it (no chunks, no ``retrieve`` duration) — faithfulness would call
    every claim unsupported and context precision would be 0, zeros that are facts about the routing, not
    about the answers. A retriever that ran and found nothing is a sample: a retrieval miss. ``no_question``:
    nothing to grade relevance against. The service's sampler already skips such runs (and error responses,
    a policy only the service knows: ``sample_errors``); this catches samples of older or foreign producers.
    """
    if not sample.chunks and "retrieve" not in sample.durations:
        return "no_context"
    question = sample.question
    if (not question or question.isspace()) and sample.question_sha256 is None:
        return "no_question"
    return None


class Scoring:
    """What happens to one sample, wherever it is scored: judge it, store the record once, count it.

    The Redis worker (:class:`Worker`) and the in-process scorer (:mod:`ragwatch.scoring.embedded`) share this one
    definition, so a score means the same thing — the same record, the same idempotent ``apply`` into the
    queue's store and rolling windows, the same metrics and evaluation events, the same SLA evaluation —
    whether a fleet of workers or the service's own background thread produced it. ``on_score`` callbacks
    see each record applied for the first time; their errors are contained.
    """

    time_budget_s: float | None = JUDGE_TIME_BUDGET_S
    content = True

    def __init__(
        self,
        queue: Queue,
        judges: Sequence[Judge],
        *,
        metrics: WorkerMetrics | None = None,
        evaluator: SLAEvaluator | None = None,
        thresholds: Thresholds | None = None,
        evaluation_events: EvaluationEvents | None = None,
        on_score: Sequence[Callable[[ScoreRecord], None]] = (),
        time_budget_s: float | None = JUDGE_TIME_BUDGET_S,
        content: bool = True,
    ) -> None:
        self.queue = queue
        self.judges = list(judges)
        self.content = content  # False (content_off): records keep the scores, no text (scoring.content)
        self.time_budget_s = time_budget_s  # per judge call (judges.budget); None or 0: unbounded
        self.metrics = metrics
        self.evaluator = evaluator
        self.thresholds = thresholds or Thresholds()
        self.evaluation_events = evaluation_events or EvaluationEvents(thresholds=self.thresholds)
        self.on_score: list[Callable[[ScoreRecord], None]] = list(on_score)
        service = queue.service
        self._timers = {j.name: metrics.scoring.labels(service, j.name) for j in self.judges} if metrics else {}

    def score(self, sample: Sample) -> ScoreRecord:
        """Run every judge on ``sample``; raises when a judge fails or returns a score outside 0..1."""
        scores: dict[str, float] = {}
        details: dict[str, Any] = {}
        timings: dict[str, float] = {}
        for judge in self.judges:
            started = time.perf_counter()
            with time_budget(self.time_budget_s):
                verdict = judge.score(sample)
            elapsed = time.perf_counter() - started
            timings[judge.name] = elapsed
            timer = self._timers.get(judge.name)
            if timer is not None:
                timer.observe(elapsed)
            for metric, value in verdict.scores.items():
                if not 0.0 <= value <= 1.0:
                    raise ValueError(f"judge {judge.name} returned {metric}={value}, outside 0..1")
                scores[metric] = float(value)
            if verdict.details:
                details[judge.name] = verdict.details
        relevances = next(
            (
                [float(c["relevance"]) for c in d["chunks"]]
                for d in details.values()
                if isinstance(d.get("chunks"), list)
            ),
            None,
        )
        judged = Judged(
            judges=[{"name": j.name, "version": j.version} for j in self.judges],
            scores=scores,
            details=details,
            timings=timings,
            diagnoses=list(diagnose_all(scores, relevances, self.thresholds)),
            scored_at=time.time(),
        )
        record = record_of(sample, judged)
        return record if self.content else without_text(record)

    def store(self, scored: Sequence[tuple[ScoreRecord, bytes, str | None]]) -> list[bool | None]:
        """Apply (record, encoded record, client id) triples once per sample id, in one round trip.

        True for each applied for the first time — which alone is observed in the score histograms and
        diagnoses, emitted as an evaluation event and handed to ``on_score`` — False for a duplicate, None
        for one a full Redis refused even after trimming."""
        now = time.time()
        fresh = self._apply([(r.sample_id, raw, r.scores, min(r.created_at, now), c) for r, raw, c in scored])
        m = self.metrics
        service = self.queue.service
        for (record, _raw, _client), new in zip(scored, fresh, strict=True):
            if not new:
                continue
            if m is not None:
                for metric, value in record.scores.items():
                    m.scores.labels(service, metric).observe(value)
                for label in record.diagnoses or [record.diagnosis]:  # each label once per sample
                    m.diagnoses.labels(service, label).inc()
            self.evaluation_events.emit_record(record)  # scores next to traces; never raises
            for callback in self.on_score:
                try:
                    callback(record)
                except Exception as exc:  # a listener's bug must not lose the score or stop scoring
                    log.warning("ragwatch: on_score callback failed: %s: %s", type(exc).__name__, exc)
        return fresh

    def _apply(self, items: list[Any]) -> list[bool | None]:
        """Apply scores; None marks one that a full Redis refused even after trimming, up to
        ``_FULL_RETRIES`` times: each trim under pressure halves the score records, and Redis's memory
        figure can lag what a trim freed (a loaded machine), so one trim is not always room enough."""
        try:
            return list(self.queue.apply_many(items))
        except QueueFullError as exc:
            results: list[bool | None] = exc.results or [None] * len(items)
        for _ in range(_FULL_RETRIES):
            self.queue.trim_scored()  # frees the memory of acknowledged entries, then one more try
            self.relieve(pressure=True)  # …and of score records and old markers: a refused write is pressure
            retry = [i for i, r in enumerate(results) if r is None]
            try:
                again: list[bool | None] = list(self.queue.apply_many([items[i] for i in retry]))
            except QueueFullError as exc:
                again = exc.results or [None] * len(retry)
            for i, result in zip(retry, again, strict=True):
                results[i] = result
            if all(r is not None for r in results):
                break
        return results

    def relieve(self, pressure: bool = False) -> Retention:
        """Keep score records and idempotency markers within their byte budgets (harder under memory
        pressure) and export Redis's memory headroom and what was trimmed."""
        retention = self.queue.trim_retention(pressure)
        m = self.metrics
        if m is None:
            return retention
        service = self.queue.service
        if retention.headroom is None:  # no maxmemory (or in process): no series, rather than a false 0
            with contextlib.suppress(KeyError):
                m.redis_headroom.remove(service)
        else:
            m.redis_headroom.labels(service).set(retention.headroom)
        if retention.scores:
            m.redis_trimmed.labels(service, "scores").inc(retention.scores)
        if retention.markers:
            m.redis_trimmed.labels(service, "markers").inc(retention.markers)
        if retention.scores or retention.markers:
            log.warning(
                "ragwatch worker: trimmed %d score records and %d idempotency markers of %s (%s)",
                retention.scores,
                retention.markers,
                service,
                "Redis memory pressure" if retention.pressure else "over their byte budgets",
            )
        return retention

    def evaluate(self) -> None:
        """Evaluate the SLA window once (export window and threshold gauges, switch the mode if due)."""
        if self.evaluator is not None:
            self.evaluator.tick()


class Worker:
    """The scoring loop around :class:`Scoring`: read, decode, score, store, acknowledge, maintain.

    ``concurrency=0`` scores on the loop's own thread (the in-process scorer: one background thread);
    ``admit`` is a budget: a first delivery it refuses is acknowledged unscored and counted as skipped.
    """

    def __init__(
        self,
        queue: Queue,
        judges: Sequence[Judge],
        *,
        name: str | None = None,
        concurrency: int = 4,
        batch: int = 64,
        block_ms: int = 2000,
        claim_idle_ms: int = 60_000,
        max_deliveries: int = 5,
        metrics: WorkerMetrics | None = None,
        maintenance_seconds: float = 5.0,
        evaluator: SLAEvaluator | None = None,
        thresholds: Thresholds | None = None,
        limits: Limits | None = None,
        max_sample_bytes: int = 1_000_000,
        stall_seconds: float | None = None,
        evaluation_events: EvaluationEvents | None = None,
        admit: Callable[[], bool] | None = None,
        on_score: Sequence[Callable[[ScoreRecord], None]] = (),
        judge_time_budget_s: float | None = JUDGE_TIME_BUDGET_S,
    ) -> None:
        """``evaluation_events`` emits each recorded score as a ``gen_ai.evaluation.result`` event on the
        judged request's trace; by default through the global LoggerProvider (off until one is set)."""
        self.queue = queue
        self.scoring = Scoring(
            queue,
            judges,
            metrics=metrics,
            evaluator=evaluator,
            thresholds=thresholds,
            evaluation_events=evaluation_events,
            on_score=on_score,
            time_budget_s=judge_time_budget_s,
        )
        self.judges = self.scoring.judges
        self.on_score = self.scoring.on_score
        self.admit = admit
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.concurrency = concurrency
        self.batch = batch
        self.block_ms = block_ms
        self.claim_idle_ms = claim_idle_ms
        self.max_deliveries = max_deliveries
        self.maintenance_seconds = maintenance_seconds
        self.evaluator = evaluator
        self.thresholds = self.scoring.thresholds
        self.limits = limits or Limits()
        self.max_sample_bytes = max_sample_bytes
        #: /livez fails after this long without the loop turning or a sample finishing (None: derived from
        #: the read timeout and maintenance interval; an LLM judge needs its worst case here).
        self.stall_seconds = stall_seconds
        self.evaluation_events = self.scoring.evaluation_events
        self.processed = 0
        self.reached = False  # the queue answered at least once (``ragwatch worker`` exits 1 otherwise)
        self.ready = False
        self.last_loop = 0.0
        self._stop = threading.Event()
        self._signals = 0
        self._pool: ThreadPoolExecutor | None = None
        service = queue.service
        self._m = metrics
        self._outcomes = (
            {
                o: metrics.entries.labels(service, o)
                for o in (
                    "scored",
                    "duplicate",
                    "retry",
                    "dead_lettered",
                    "malformed",
                    "oversized",
                    "queue_full",
                    "trimmed",
                    "over_time_budget",
                    "lost",
                )
            }
            if metrics
            else {}
        )
        self._skipped = {r: metrics.skipped.labels(service, r) for r in SKIP_REASONS} if metrics else {}
        self._skip_logged = float("-inf")
        self._errors = metrics.queue_errors.labels(service, "worker") if metrics else None
        self._backlog = (0, 0)  # (lag + pending, self.processed) as of the last stats

    # -- the loop ---------------------------------------------------------------------------------------
    def work(self, *, burst: bool = False, max_seconds: float | None = None) -> int:
        """Process entries until stopped (or, with ``burst``, until the queue is drained); returns how many
        entries were handled. ``max_seconds`` bounds a run (tests, one-shot jobs)."""
        deadline = time.monotonic() + max_seconds if max_seconds else None
        self._install_signal_handlers()
        self._pool = (
            ThreadPoolExecutor(self.concurrency, thread_name_prefix="ragwatch-judge") if self.concurrency else None
        )
        backoff = 0.0
        next_maintenance = 0.0
        try:
            while not self._stop.is_set():
                if deadline is not None and time.monotonic() > deadline:
                    break
                self.last_loop = time.monotonic()
                try:
                    if not self.ready:
                        if self.queue.ensure_group() and self.reached:  # it existed, and vanished
                            self._count_lost()
                        self.ready = self.reached = True
                    if time.monotonic() >= next_maintenance or burst:
                        self._maintenance()
                        next_maintenance = time.monotonic() + self.maintenance_seconds
                    wait_ms = (
                        50 if burst else min(self.block_ms, max(1, int(1000 * (next_maintenance - time.monotonic()))))
                    )
                    entries = self.queue.read(self.name, self.batch, wait_ms)
                    if entries:
                        self._handle(entries)
                    elif burst and self._drained():
                        break
                    backoff = 0.0
                except QueueError as exc:
                    self.ready = False
                    if self._errors is not None:
                        self._errors.inc()
                    backoff = min(30.0, max(0.1, backoff * 2))
                    log.warning("ragwatch worker: queue unavailable (%s); retrying in %.1fs", exc, backoff)
                    self._stop.wait(backoff)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._pool = None
            self._restore_signal_handlers()
            self._sign_off()
        return self.processed

    def _sign_off(self) -> None:
        """Remove our heartbeat, so ``ragwatch health`` stops counting a worker that exited cleanly."""
        if not self.reached:
            return
        try:
            self.queue.forget_worker(self.name)
        except QueueError as exc:  # Redis away: the heartbeat simply ages out
            log.info("ragwatch worker: could not remove the heartbeat on exit (%s)", exc)

    def stop(self) -> None:
        """Finish the entries in flight, then return from :meth:`work`."""
        self._stop.set()

    def _count_lost(self) -> None:
        """The stream vanished with what it held (Redis restarted empty) and this worker recreated its
        group: count as ``lost`` the entries it last saw waiting or pending, less those it handled since —
        an estimate as old as the last maintenance pass, counted once however many workers run."""
        backlog, processed = self._backlog
        lost = max(0, backlog - (self.processed - processed))
        self._backlog = (0, self.processed)
        self._count("lost", lost)
        log.error(
            "ragwatch worker: the sample stream of %s vanished (Redis restarted empty?); about %d sampled "
            "requests waiting in it were lost unscored",
            self.queue.service,
            lost,
        )

    # -- steps --------------------------------------------------------------------------------------------
    def _maintenance(self) -> None:
        self.queue.trim_scored()  # first: it frees memory when Redis is full and refuses everything else
        self.scoring.relieve()  # then score records and markers over their budgets, or under pressure
        try:
            self.queue.heartbeat(self.name)
        except QueueFullError as exc:  # keep scoring: that, and trimming, is what empties a full Redis
            log.warning("ragwatch worker: heartbeat refused (%s)", exc)
        claimed, gone = self.queue.claim_stale(self.name, self.claim_idle_ms, self.batch)
        if gone:
            self._count("trimmed", len(gone))
            log.warning("ragwatch worker: %d pending entries were trimmed from the stream before scoring", len(gone))
        if claimed:
            self._handle(claimed)
        self.scoring.evaluate()
        stats = self.queue.stats()
        self._backlog = (stats.lag + stats.pending, self.processed)  # what a vanished stream would have held
        if self._m is not None:
            service = self.queue.service
            self._m.length.labels(service).set(stats.length)
            self._m.pending.labels(service).set(stats.pending)
            self._m.lag.labels(service).set(stats.lag)
            self._m.dead.labels(service).set(stats.dead)

    def _drained(self) -> bool:
        stats = self.queue.stats()
        return stats.lag == 0 and stats.pending == 0

    def _handle(self, entries: list[Entry]) -> None:
        """Score a batch on the pool (inline without one); apply and acknowledge each result as it lands.

        Every entry is settled on its own: one that cannot be decoded, is too big, or whose record cannot
        be encoded is dead-lettered alone and never takes the good entries of its batch with it.
        """
        jobs: dict[Future[ScoreRecord], tuple[Entry, str | None]] = {}
        inline: list[tuple[Entry, Sample]] = []
        skipped: list[str] = []
        unscored: list[tuple[str, str]] = []
        scored: list[tuple[Entry, ScoreRecord, bytes, str | None]] = []
        for entry in entries:
            if entry.deliveries > self.max_deliveries:
                self._dead(entry, f"gave up after {entry.deliveries - 1} failed deliveries", "dead_lettered")
                continue
            if self.admit is not None and entry.deliveries == 1 and not self.admit():
                skipped.append(entry.id)  # over the budget: not worth decoding
                continue
            if entry.payload is not None and len(entry.payload) > self.max_sample_bytes:
                self._dead(entry, f"oversized: {len(entry.payload)} bytes > {self.max_sample_bytes}", "oversized")
                continue
            try:
                if entry.payload is None:
                    raise SampleDecodeError("entry has no sample field")
                sample = decode_sample(entry.payload, self.limits)
            except SampleDecodeError as exc:
                self._dead(entry, f"malformed: {exc}", "malformed")
                continue
            client = sample.client if isinstance(sample.client, str) else None
            if sample.scored is not None:  # content_off: judged in the service, applied here without judging
                outcome = self._prescored(entry, sample)
                if isinstance(outcome, tuple):
                    scored.append((entry, *outcome, client))
                elif outcome == "budget":  # over the service's judging budget
                    skipped.append(entry.id)
                elif outcome is not None:
                    unscored.append((entry.id, outcome))
                continue
            unfit = not_a_sample(sample)
            if unfit is not None:  # acknowledged unscored: never judged, never in a window
                unscored.append((entry.id, unfit))
                continue
            if self._pool is None:
                inline.append((entry, sample))
            else:
                jobs[self._pool.submit(self.scoring.score, sample)] = (entry, client)
        for entry, sample in inline:
            try:
                record = self.scoring.score(sample)
                client = sample.client if isinstance(sample.client, str) else None
                scored.append((entry, record, orjson.dumps(record), client))
            except Exception as exc:
                self._failed(entry, exc)
            self.last_loop = time.monotonic()
        waiting = set(jobs)
        while waiting:  # the loop counts as alive while samples finish (honest /livez under slow judges)
            done, waiting = wait(waiting, timeout=1.0, return_when=FIRST_COMPLETED)
            if done:
                self.last_loop = time.monotonic()
            for future in done:
                entry, client = jobs[future]
                try:
                    record = future.result()
                    scored.append((entry, record, orjson.dumps(record), client))
                except Exception as exc:
                    self._failed(entry, exc)
        fresh = self.scoring.store([(record, raw, client) for _, record, raw, client in scored])
        shed: list[str] = []
        for (entry, _record, _raw, _client), new in zip(scored, fresh, strict=True):
            if new is None:
                shed.append(entry.id)
            else:
                self._count("scored" if new else "duplicate")
        if shed:
            self._shed(shed)
        if skipped:
            self.skip("budget", len(skipped))
        for _, reason in unscored:
            self.skip(reason)
        if unscored:
            self._log_unscored(unscored)
        settled = [entry.id for (entry, *_), new in zip(scored, fresh, strict=True) if new is not None]
        self.queue.ack(settled + skipped + [entry_id for entry_id, _ in unscored])
        self.processed += len(entries)

    def _prescored(self, entry: Entry, sample: Sample) -> tuple[ScoreRecord, bytes] | str | None:
        """A sample the service judged (``content_off``): its score record and its encoding, never judged again
        here; or the reason the service gave for sending none (a skip, acknowledged and counted); or None when
        the entry was dead-lettered — its ``scored`` object is malformed or hostile, or the judging failed."""
        try:
            said = read_scored(sample.scored or {})
            if isinstance(said, NotScored):
                if said.skipped is not None:
                    return said.skipped
                self._dead(entry, safe_text(said.error), said.outcome or "dead_lettered")
                return None
            record = without_text(record_of(sample, said))  # nothing a foreign producer sent keeps its text
            return record, orjson.dumps(record)
        except (SampleDecodeError, TypeError, ValueError) as exc:
            self._dead(entry, f"malformed: {safe_text(str(exc))}", "malformed")
            return None

    def _log_unscored(self, unscored: list[tuple[str, str]]) -> None:
        """At debug level, at most once a minute: samples that were not quality samples (the counter has all)."""
        now = time.monotonic()
        if now - self._skip_logged < _SKIP_LOG_SECONDS or not log.isEnabledFor(logging.DEBUG):
            return
        self._skip_logged = now
        entry_id, reason = unscored[0]
        log.debug(
            "ragwatch worker: %d samples acknowledged unscored, not quality samples (e.g. entry %s: %s); "
            "see ragwatch_scoring_skipped_total",
            len(unscored),
            entry_id,
            reason,
        )

    def skip(self, reason: str, n: int = 1) -> None:
        """Count ``n`` samples acknowledged (or lost) without a score, by reason (see SKIP_REASONS)."""
        child = self._skipped.get(reason)
        if child is not None and n:
            child.inc(n)

    def _shed(self, ids: list[str]) -> None:
        """Redis is full and refuses the scores even after trimming: drop these entries, counted, so memory
        falls and the pipeline heals by itself (waiting would keep it full forever)."""
        self.queue.discard(ids)
        self._count("queue_full", len(ids))
        log.error(
            "ragwatch worker: Redis is full (maxmemory, noeviction) and refused %d scores: entries discarded",
            len(ids),
        )

    def _score(self, sample: Sample) -> ScoreRecord:
        return self.scoring.score(sample)

    def _failed(self, entry: Entry, exc: Exception) -> None:
        error = safe_text(f"{type(exc).__name__}: {exc}")  # a judge's error may quote a whole response
        if isinstance(exc, JudgeTimeExceeded):  # the same text takes as long again: never retried
            self._dead(entry, error, "over_time_budget")
        elif entry.deliveries >= self.max_deliveries:
            self._dead(entry, error, "dead_lettered")
        else:  # left pending: claimed again after claim_idle, by this worker or another
            self._count("retry")
            log.warning("ragwatch worker: scoring entry %s failed (%s); will retry", entry.id, error)

    def _dead(self, entry: Entry, error: str, outcome: str) -> None:
        self.queue.dead_letter(entry, error)
        self._count(outcome)
        log.warning("ragwatch worker: entry %s dead-lettered: %s", entry.id, error)

    def _count(self, outcome: str, n: int = 1) -> None:
        child = self._outcomes.get(outcome)
        if child is not None:
            child.inc(n)

    # -- signals ------------------------------------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def _restore_signal_handlers(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        """First signal: finish in-flight work and stop. Second: stop now (in-flight entries stay pending
        and are claimed by another worker)."""
        self._signals += 1
        if self._signals == 1:
            log.info("ragwatch worker: %s received, finishing in-flight work", signal.Signals(signum).name)
            self._stop.set()
        else:
            raise SystemExit(128 + signum)


def _chunk_relevances(details: dict[str, Any], depth: int = 0) -> list[float] | None:
    """The first judge's per-chunk relevances, wherever a judge (or a cascade inside it) reported them."""
    chunks = details.get("chunks")
    if isinstance(chunks, list) and all(isinstance(c, dict) and "relevance" in c for c in chunks):
        return [float(c["relevance"]) for c in chunks]
    if depth < 3:
        for value in details.values():
            if isinstance(value, dict):
                found = _chunk_relevances(value, depth + 1)
                if found is not None:
                    return found
    return None
