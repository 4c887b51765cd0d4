"""Every Prometheus metric ragwatch exports, defined in one place.

Dashboards, alert rules and docs may reference only the names below (a test enforces it). Labels are
bounded by construction: service and model names come from configuration or from the LLM response
(capped at :data:`MAX_MODELS` distinct values, the rest become ``other``, each at most 128 printable
characters), never from user text.

The hot path binds label children once and caches them; the families a request touches are the
thread-sharded ones of :mod:`ragwatch.metrics.fast`, so a request costs a few lock-free adds.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from ragwatch.labels import safe_label
from ragwatch.metrics.fast import adder, counter, histogram
from ragwatch.settings import DEFAULT_LATENCY_BUCKETS

__all__ = [
    "CHUNK_BUCKETS",
    "MAX_MODELS",
    "METRIC_NAMES",
    "CaptureMetrics",
    "FeedbackMetrics",
    "ModeMetrics",
    "ModelChildren",
    "ProducerMetrics",
    "ReplayMetrics",
    "WorkerMetrics",
    "capture_metrics",
    "families",
]

PREFIX = "ragwatch_"

#: Distinct model label values kept per registry before new ones are folded into ``other``.
MAX_MODELS = 64
OTHER = "other"

CHUNK_BUCKETS: tuple[float, ...] = (0, 1, 2, 3, 5, 8, 10, 20, 50, 100)

STAGE_DURATION = "ragwatch_stage_duration_seconds"
TTFT = "ragwatch_time_to_first_token_seconds"
TOKENS = "ragwatch_tokens"
COST = "ragwatch_cost_usd"
RETRIEVED_CHUNKS = "ragwatch_retrieved_chunks"
UNPRICED = "ragwatch_unpriced_calls"
INTERNAL_ERRORS = "ragwatch_internal_errors"
RUNS_WAITING = "ragwatch_runs_waiting_for_streams"
PROBE_HEADERS = "ragwatch_probe_headers"
DASHBOARD_REQUESTS = "ragwatch_dashboard_requests"
FEEDBACK = "ragwatch_feedback"
BUILD_INFO = "ragwatch_build_info"
SAMPLING_DECISIONS = "ragwatch_sampling_decisions"
SAMPLES_SENT = "ragwatch_samples_sent"
SAMPLES_DROPPED = "ragwatch_samples_dropped"
SAMPLE_BUFFER = "ragwatch_sample_buffer"
QUEUE_ERRORS = "ragwatch_queue_errors"
WORKER_ENTRIES = "ragwatch_worker_entries"
SCORING_DURATION = "ragwatch_scoring_duration_seconds"
SCORING_SKIPPED = "ragwatch_scoring_skipped"
SCORE = "ragwatch_score"
QUEUE_LENGTH = "ragwatch_queue_length"
QUEUE_PENDING = "ragwatch_queue_pending"
QUEUE_LAG = "ragwatch_queue_lag"
DEAD_LETTERS = "ragwatch_dead_letters"
DIAGNOSES = "ragwatch_diagnoses"
WINDOW_VALUE = "ragwatch_window_value"
WINDOW_SAMPLES = "ragwatch_window_samples"
SLA_THRESHOLD = "ragwatch_sla_threshold"
DEGRADED_TRANSITIONS = "ragwatch_degraded_transitions"
DEGRADED = "ragwatch_degraded"
DEGRADED_OVERRIDE = "ragwatch_degraded_override"
DEGRADED_READS = "ragwatch_degraded_state_reads"
REDIS_HEADROOM = "ragwatch_redis_memory_headroom_ratio"
REDIS_TRIMMED = "ragwatch_redis_trimmed"
REPLAY_REQUESTS = "ragwatch_replay_requests"
REPLAY_DURATION = "ragwatch_replay_duration_seconds"
REPLAY_TTFT = "ragwatch_replay_ttft_seconds"
REPLAY_AVAILABILITY = "ragwatch_replay_availability"
REPLAY_LATENCY_QUANTILE = "ragwatch_replay_latency_quantile_seconds"
REPLAY_RETRIEVAL = "ragwatch_replay_retrieval"
REPLAY_ANSWER_DRIFT = "ragwatch_replay_answer_drift"
REPLAY_RUNS = "ragwatch_replay_runs"
REPLAY_LAST_RUN = "ragwatch_replay_last_run_timestamp_seconds"

#: Every family name as it appears in the exposition (counters gain ``_total``).
METRIC_NAMES: frozenset[str] = frozenset(
    {
        STAGE_DURATION,
        TTFT,
        TOKENS + "_total",
        COST + "_total",
        RETRIEVED_CHUNKS,
        UNPRICED + "_total",
        PROBE_HEADERS + "_total",
        DASHBOARD_REQUESTS + "_total",
        FEEDBACK + "_total",
        INTERNAL_ERRORS + "_total",
        RUNS_WAITING,
        BUILD_INFO,
        SAMPLING_DECISIONS + "_total",
        SAMPLES_SENT + "_total",
        SAMPLES_DROPPED + "_total",
        SAMPLE_BUFFER,
        QUEUE_ERRORS + "_total",
        WORKER_ENTRIES + "_total",
        SCORING_DURATION,
        SCORING_SKIPPED + "_total",
        SCORE,
        QUEUE_LENGTH,
        QUEUE_PENDING,
        QUEUE_LAG,
        DEAD_LETTERS,
        DIAGNOSES + "_total",
        WINDOW_VALUE,
        WINDOW_SAMPLES,
        SLA_THRESHOLD,
        DEGRADED_TRANSITIONS + "_total",
        DEGRADED,
        DEGRADED_OVERRIDE,
        DEGRADED_READS + "_total",
        REDIS_HEADROOM,
        REDIS_TRIMMED + "_total",
        REPLAY_REQUESTS + "_total",
        REPLAY_DURATION,
        REPLAY_TTFT,
        REPLAY_AVAILABILITY,
        REPLAY_LATENCY_QUANTILE,
        REPLAY_RETRIEVAL,
        REPLAY_ANSWER_DRIFT,
        REPLAY_RUNS + "_total",
        REPLAY_LAST_RUN,
    }
)


class ModelChildren:
    """Label children of one (service, model) pair, bound once and reused for every call."""

    __slots__ = (
        "add_estimated",
        "add_reported",
        "cached",
        "cost",
        "cost_est",
        "input",
        "input_est",
        "output",
        "output_est",
        "ttft",
        "unpriced",
    )

    def __init__(self, m: CaptureMetrics, service: str, model: str) -> None:
        self.input = m.tokens.labels(service, model, "input", "reported")
        self.input_est = m.tokens.labels(service, model, "input", "estimated")
        self.cached = m.tokens.labels(service, model, "cached_input", "reported")
        self.output = m.tokens.labels(service, model, "output", "reported")
        self.output_est = m.tokens.labels(service, model, "output", "estimated")
        self.cost = m.cost.labels(service, model, "reported")
        self.cost_est = m.cost.labels(service, model, "estimated")
        self.ttft = m.ttft.labels(service, model)
        self.unpriced = m.unpriced.labels(service, model)
        #: add_reported(input, output, cached_input, cost) and add_estimated(input, output, cost): one call
        #: per LLM call for all its counters.
        self.add_reported = adder(self.input, self.output, self.cached, self.cost)
        self.add_estimated = adder(self.input_est, self.output_est, self.cost_est)


class CaptureMetrics:
    """The service-side metric families, registered once per registry."""

    def __init__(
        self,
        registry: CollectorRegistry | None = REGISTRY,
        latency_buckets: Sequence[float] = DEFAULT_LATENCY_BUCKETS,
    ) -> None:
        buckets = tuple(latency_buckets)
        self.latency_buckets = buckets
        self.dashboard_requests = families(DashboardMetrics, registry).requests  # the service's own page
        self.feedback = families(FeedbackMetrics, registry).feedback  # rw.feedback and the page's buttons
        # The request path's families: thread-sharded, a third of prometheus_client's cost (fastmetrics).
        self.stage_duration = histogram(
            STAGE_DURATION,
            "Duration of one pipeline stage (request, retrieve, generate) by outcome.",
            ["service", "stage", "outcome"],
            buckets,
            registry,
        )
        self.ttft = histogram(
            TTFT,
            "Time from the start of a streamed LLM call to its first token of answer text.",
            ["service", "model"],
            buckets,
            registry,
        )
        self.tokens = counter(
            TOKENS,
            "LLM tokens by kind (input, cached_input, output); source says reported by the API or estimated.",
            ["service", "model", "kind", "source"],
            registry,
        )
        self.cost = counter(
            COST,
            "LLM spend in US dollars from the pricing table; source says priced from reported or estimated tokens.",
            ["service", "model", "source"],
            registry,
        )
        self.retrieved_chunks = histogram(
            RETRIEVED_CHUNKS,
            "Number of chunks one retriever call returned.",
            ["service"],
            CHUNK_BUCKETS,
            registry,
        )
        self.unpriced = counter(
            UNPRICED,
            "LLM calls whose model has no entry in the pricing table (no cost recorded).",
            ["service", "model"],
            registry,
        )
        self.probe_headers = counter(
            PROBE_HEADERS,
            "Requests carrying the probe header; outcome accepted (signed or from probe_sources), ignored (no "
            "valid signature over this request), or replayed (its nonce was seen before, or the nonce cache is full).",
            ["service", "outcome"],
            registry,
        )
        self.internal_errors = Counter(
            INTERNAL_ERRORS,
            "Errors inside ragwatch itself, swallowed so the host never sees them (fail open).",
            ["component"],
            registry=registry,
        )
        self.runs_waiting = Gauge(
            RUNS_WAITING,
            "Ended requests waiting for a stream opened in them (a StreamingResponse still being read, a stream "
            "kept by the host) before they reach sampling and the windows.",
            ["service"],
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.build_info = Gauge(
            BUILD_INFO,
            "ragwatch version, always 1.",
            ["version"],
            registry=registry,
            multiprocess_mode="max",
        )
        from ragwatch._version import __version__

        self.build_info.labels(__version__).set(1)
        self._models: dict[tuple[str, str], ModelChildren] = {}
        self._lock = threading.Lock()

    def model(self, service: str, model: str) -> ModelChildren:
        """Children for one model, folding models past :data:`MAX_MODELS` into ``other``; the name is capped
        and cleaned first (:func:`~ragwatch.labels.safe_label`), since it comes from the LLM response."""
        model = safe_label(model)
        key = (service, model)
        children = self._models.get(key)
        if children is not None:
            return children
        with self._lock:
            children = self._models.get(key)
            if children is None:
                if len(self._models) >= MAX_MODELS and model != OTHER:
                    return self._other(service)
                children = self._models[key] = ModelChildren(self, service, model)
            return children

    def _other(self, service: str) -> ModelChildren:
        children = self._models.get((service, OTHER))
        if children is None:  # the cap was reached before `other` itself was ever needed
            children = ModelChildren(self, service, OTHER)
            self._models[(service, OTHER)] = children
        return children


class QueueErrorMetrics:
    """Failed queue operations of producers and workers (both may live in one process and registry)."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.counter = Counter(
            QUEUE_ERRORS,
            "Failed queue (Redis) operations by side (producer, worker); all are retried with backoff.",
            ["service", "side"],
            registry=registry,
        )


class ProducerMetrics:
    """Service side of the queue: sampling decisions, the in-process buffer, what was sent or dropped."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.decisions = counter(  # counted on every request: thread-sharded like the capture families
            SAMPLING_DECISIONS,
            "Sampling decisions by outcome (sampled or skipped) and the rule that decided.",
            ["service", "decision", "reason"],
            registry,
        )
        self.sent = Counter(SAMPLES_SENT, "Samples written to the queue.", ["service"], registry=registry)
        self.dropped = Counter(
            SAMPLES_DROPPED,
            "Samples lost on the service side, by reason (buffer_full, queue_full, encode_error, shutdown).",
            ["service", "reason"],
            registry=registry,
        )
        self.buffered = Gauge(
            SAMPLE_BUFFER,
            "Samples waiting in the in-process buffer.",
            ["service"],
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.queue_errors = families(QueueErrorMetrics, registry).counter


SCORE_BUCKETS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)


class WorkerMetrics:
    """Scoring workers: what they processed, how long judges took, the scores, and the queue's state."""

    def __init__(
        self, registry: CollectorRegistry | None = REGISTRY, latency_buckets: Sequence[float] = DEFAULT_LATENCY_BUCKETS
    ) -> None:
        self.entries = Counter(
            WORKER_ENTRIES,
            "Stream entries handled by workers, by outcome "
            "(scored, duplicate, retry, dead_lettered, malformed, oversized, queue_full, trimmed, over_time_budget, "
            "lost: in the stream unscored when Redis restarted empty, estimated by the worker that recreated it).",
            ["service", "outcome"],
            registry=registry,
        )
        self.scoring = Histogram(
            SCORING_DURATION,
            "Time one judge took to score one sample.",
            ["service", "judge"],
            buckets=tuple(latency_buckets),
            registry=registry,
        )
        self.skipped = Counter(
            SCORING_SKIPPED,
            "Sampled requests acknowledged without a score, by reason (budget: over the in-process scoring "
            "budget; trimmed: dropped from the in-process queue before anything read them; no_context, "
            "no_question: not a quality sample).",
            ["service", "reason"],
            registry=registry,
        )
        self.scores = Histogram(
            SCORE,
            "Scores by metric (0..1) as judged by the workers.",
            ["service", "metric"],
            buckets=SCORE_BUCKETS,
            registry=registry,
        )
        gauge = {"registry": registry, "multiprocess_mode": "max"}
        self.length = Gauge(QUEUE_LENGTH, "Entries in the sample stream.", ["service"], **gauge)  # type: ignore[arg-type]
        self.pending = Gauge(
            QUEUE_PENDING,
            "Entries delivered to a worker and not yet acknowledged.",
            ["service"],
            **gauge,  # type: ignore[arg-type]
        )
        self.lag = Gauge(QUEUE_LAG, "Entries not yet delivered to any worker.", ["service"], **gauge)  # type: ignore[arg-type]
        self.dead = Gauge(DEAD_LETTERS, "Entries in the dead-letter stream.", ["service"], **gauge)  # type: ignore[arg-type]
        self.queue_errors = families(QueueErrorMetrics, registry).counter
        self.diagnoses = Counter(
            DIAGNOSES,
            "Scored samples by diagnosis (retrieval_miss, noisy_retrieval, hallucination, off_topic, healthy, "
            "unknown).",
            ["service", "diagnosis"],
            registry=registry,
        )
        self.window_value = Gauge(
            WINDOW_VALUE,
            "Rolling-window mean of a score.",
            ["service", "metric"],
            **gauge,  # type: ignore[arg-type]
        )
        self.window_samples = Gauge(
            WINDOW_SAMPLES,
            "Scores in the rolling window.",
            ["service", "metric"],
            **gauge,  # type: ignore[arg-type]
        )
        self.sla_threshold = Gauge(
            SLA_THRESHOLD,
            "Threshold a score's window is held to (the SLA metric degrades the service; others are health lines).",
            ["service", "metric"],
            **gauge,  # type: ignore[arg-type]
        )
        self.transitions = Counter(
            DEGRADED_TRANSITIONS,
            "Degraded-mode transitions decided by workers, by the state entered (degraded, normal).",
            ["service", "to"],
            registry=registry,
        )
        self.redis_headroom = Gauge(
            REDIS_HEADROOM,
            "Share of Redis maxmemory still free (1 - used_memory / maxmemory, from INFO memory), read by the "
            "workers' maintenance pass; absent when Redis has no maxmemory.",
            ["service"],
            registry=registry,
            multiprocess_mode="min",
        )
        self.redis_trimmed = Counter(
            REDIS_TRIMMED,
            "What workers trimmed to keep Redis within its byte budgets or under memory pressure, by kind "
            "(scores: score records; markers: idempotency markers, i.e. applied sample ids).",
            ["service", "kind"],
            registry=registry,
        )


class DashboardMetrics:
    """Requests for the live page (service or worker), by outcome: served, busy (too many concurrent store
    reads: 503), or refused by the gate (forwarded, address, no_token, bad_token)."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.requests = Counter(
            DASHBOARD_REQUESTS,
            "Requests for /dashboard, .json and .jsonl by outcome (served, busy, forwarded, address, no_token, "
            "bad_token).",
            ["service", "outcome"],
            registry=registry,
        )


class FeedbackMetrics:
    """People's corrections of the judge (``rw.feedback``, the live page's operator buttons), by what they
    say and what became of them."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.feedback = Counter(
            FEEDBACK,
            "Feedback on scored samples by kind (verdict_right, verdict_wrong, chunk_relevant, chunk_irrelevant, "
            "golden, note; unread: refused before its body was read) and outcome (stored, dropped, refused: not "
            "an operator, invalid).",
            ["service", "kind", "outcome"],
            registry=registry,
        )


class ModeMetrics:
    """Service side of degraded mode: what this replica currently does."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.degraded = Gauge(
            DEGRADED,
            "1 while this replica runs in degraded mode (override included).",
            ["service"],
            registry=registry,
            multiprocess_mode="max",
        )
        self.override = Gauge(
            DEGRADED_OVERRIDE,
            "1 for the operator override in force (auto, on, off).",
            ["service", "mode"],
            registry=registry,
            multiprocess_mode="max",
        )
        self.reads = Counter(
            DEGRADED_READS,
            "Reads of the shared degraded-mode state by this process's background threads, by read (first: "
            "the one a process starts with, off its start-up path; refresh: the later ones) and outcome "
            "(ok, error).",
            ["service", "read", "outcome"],
            registry=registry,
        )


class ReplayMetrics:
    """The replay prober: what synthetic requests to the live service saw.

    Counters and histograms accumulate over the runs of a long-running prober (rate() them); the gauges
    hold the figures of the latest run, which is what a Pushgateway keeps between one-shot CronJob runs.
    """

    def __init__(
        self, registry: CollectorRegistry | None = REGISTRY, latency_buckets: Sequence[float] = DEFAULT_LATENCY_BUCKETS
    ) -> None:
        buckets = tuple(latency_buckets)
        self.requests = Counter(
            REPLAY_REQUESTS,
            "Probe requests by outcome (ok, timeout, connect, transport, http_5xx, http_4xx, bad_json, missing_field).",
            ["service", "outcome"],
            registry=registry,
        )
        self.duration = Histogram(
            REPLAY_DURATION,
            "Time from sending a successful probe request to the end of its response body.",
            ["service"],
            buckets=buckets,
            registry=registry,
        )
        self.ttft = Histogram(
            REPLAY_TTFT,
            "Time from sending a streamed (SSE) probe request to its first text event.",
            ["service"],
            buckets=buckets,
            registry=registry,
        )
        gauge = {"registry": registry, "multiprocess_mode": "max"}
        self.availability = Gauge(
            REPLAY_AVAILABILITY,
            "Share of the latest run's probe requests that succeeded (0..1).",
            ["service"],
            **gauge,  # type: ignore[arg-type]
        )
        self.latency_quantile = Gauge(
            REPLAY_LATENCY_QUANTILE,
            "Latest run's latency or TTFT quantile (kind: latency, ttft; quantile: 0.5, 0.95, 0.99).",
            ["service", "kind", "quantile"],
            **gauge,  # type: ignore[arg-type]
        )
        self.retrieval = Gauge(
            REPLAY_RETRIEVAL,
            "Latest run's golden-set retrieval quality (metric: hit_rate, recall, precision, mrr) at k.",
            ["service", "metric", "k"],
            **gauge,  # type: ignore[arg-type]
        )
        self.answer_drift = Gauge(
            REPLAY_ANSWER_DRIFT,
            "Latest run's mean answer drift (1 - similarity, 0..1) from the reference or historical answer.",
            ["service", "basis"],
            **gauge,  # type: ignore[arg-type]
        )
        self.runs = Counter(
            REPLAY_RUNS,
            "Replay runs by result (pass, fail: a floor was not met).",
            ["service", "result"],
            registry=registry,
        )
        self.last_run = Gauge(
            REPLAY_LAST_RUN,
            "Unix time the latest replay run finished (alert when it stops moving).",
            ["service"],
            **gauge,  # type: ignore[arg-type]
        )


_CACHE: weakref.WeakKeyDictionary[CollectorRegistry, dict[Any, Any]] = weakref.WeakKeyDictionary()
_UNREGISTERED: dict[Any, Any] = {}
_CREATE = threading.RLock()  # families may build other families
T = TypeVar("T")


def families(cls: Callable[..., T], registry: CollectorRegistry | None = REGISTRY, *args: Any) -> T:
    """The metric families of ``cls`` for ``registry``, created on first use.

    A metric name may be registered only once per registry, while several :class:`~ragwatch.RagWatch`
    objects (one per service) or workers may share it; the ``service`` label tells them apart. The first
    caller's arguments (e.g. latency buckets) win.
    """
    with _CREATE:
        cache = _UNREGISTERED if registry is None else _CACHE.setdefault(registry, {})
        key = (cls, args) if registry is None else cls
        found = cache.get(key)
        if found is None:
            found = cache[key] = cls(registry, *args)
        return found


def capture_metrics(
    registry: CollectorRegistry | None = REGISTRY,
    latency_buckets: Sequence[float] = DEFAULT_LATENCY_BUCKETS,
) -> CaptureMetrics:
    return families(CaptureMetrics, registry, tuple(latency_buckets))
