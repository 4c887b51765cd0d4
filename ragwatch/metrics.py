"""Every Prometheus metric ragwatch exports, defined in one place.

Dashboards, alert rules and docs may reference only the names below (a test enforces it). Labels are
bounded by construction: service and model names come from configuration or from the LLM response
(capped at :data:`MAX_MODELS` distinct values, the rest become ``other``), never from user text.

The hot path binds label children once and caches them, so a request costs a dictionary lookup and a
few lock-protected adds — the prometheus_client way.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from .settings import DEFAULT_LATENCY_BUCKETS

__all__ = [
    "CHUNK_BUCKETS",
    "MAX_MODELS",
    "METRIC_NAMES",
    "CaptureMetrics",
    "ModelChildren",
    "capture_metrics",
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
BUILD_INFO = "ragwatch_build_info"

#: Every family name as it appears in the exposition (counters gain ``_total``).
METRIC_NAMES: frozenset[str] = frozenset(
    {
        STAGE_DURATION,
        TTFT,
        TOKENS + "_total",
        COST + "_total",
        RETRIEVED_CHUNKS,
        UNPRICED + "_total",
        INTERNAL_ERRORS + "_total",
        BUILD_INFO,
    }
)


class ModelChildren:
    """Label children of one (service, model) pair, bound once and reused for every call."""

    __slots__ = ("cached", "cost", "input", "input_est", "output", "output_est", "ttft", "unpriced")

    def __init__(self, m: CaptureMetrics, service: str, model: str) -> None:
        self.input = m.tokens.labels(service, model, "input", "reported")
        self.input_est = m.tokens.labels(service, model, "input", "estimated")
        self.cached = m.tokens.labels(service, model, "cached_input", "reported")
        self.output = m.tokens.labels(service, model, "output", "reported")
        self.output_est = m.tokens.labels(service, model, "output", "estimated")
        self.cost = m.cost.labels(service, model)
        self.ttft = m.ttft.labels(service, model)
        self.unpriced = m.unpriced.labels(service, model)


class CaptureMetrics:
    """The service-side metric families, registered once per registry."""

    def __init__(
        self,
        registry: CollectorRegistry | None = REGISTRY,
        latency_buckets: Sequence[float] = DEFAULT_LATENCY_BUCKETS,
    ) -> None:
        buckets = tuple(latency_buckets)
        self.latency_buckets = buckets
        self.stage_duration = Histogram(
            STAGE_DURATION,
            "Duration of one pipeline stage (request, retrieve, generate) by outcome.",
            ["service", "stage", "outcome"],
            buckets=buckets,
            registry=registry,
        )
        self.ttft = Histogram(
            TTFT,
            "Time from the start of a streamed LLM call to its first token of answer text.",
            ["service", "model"],
            buckets=buckets,
            registry=registry,
        )
        self.tokens = Counter(
            TOKENS,
            "LLM tokens by kind (input, cached_input, output); source says reported by the API or estimated.",
            ["service", "model", "kind", "source"],
            registry=registry,
        )
        self.cost = Counter(
            COST,
            "Estimated LLM spend in US dollars from the pricing table.",
            ["service", "model"],
            registry=registry,
        )
        self.retrieved_chunks = Histogram(
            RETRIEVED_CHUNKS,
            "Number of chunks one retriever call returned.",
            ["service"],
            buckets=CHUNK_BUCKETS,
            registry=registry,
        )
        self.unpriced = Counter(
            UNPRICED,
            "LLM calls whose model has no entry in the pricing table (no cost recorded).",
            ["service", "model"],
            registry=registry,
        )
        self.internal_errors = Counter(
            INTERNAL_ERRORS,
            "Errors inside ragwatch itself, swallowed so the host never sees them (fail open).",
            ["component"],
            registry=registry,
        )
        self.build_info = Gauge(
            BUILD_INFO,
            "ragwatch version, always 1.",
            ["version"],
            registry=registry,
            multiprocess_mode="max",
        )
        from . import __version__

        self.build_info.labels(__version__).set(1)
        self._models: dict[tuple[str, str], ModelChildren] = {}
        self._lock = threading.Lock()

    def model(self, service: str, model: str) -> ModelChildren:
        """Children for one model, folding models past :data:`MAX_MODELS` into ``other``."""
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


_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, CaptureMetrics] = weakref.WeakKeyDictionary()
_UNREGISTERED: dict[tuple[float, ...], CaptureMetrics] = {}
_CREATE = threading.Lock()


def capture_metrics(
    registry: CollectorRegistry | None = REGISTRY,
    latency_buckets: Sequence[float] = DEFAULT_LATENCY_BUCKETS,
) -> CaptureMetrics:
    """The metric families for ``registry``, created on first use.

    Several :class:`~ragwatch.RagWatch` objects (one per service) share one registry, and a metric name
    may be registered only once per registry; the ``service`` label tells them apart.
    """
    with _CREATE:
        if registry is None:
            key = tuple(latency_buckets)
            found = _UNREGISTERED.get(key)
            if found is None:
                found = _UNREGISTERED[key] = CaptureMetrics(None, key)
            return found
        found = _BY_REGISTRY.get(registry)
        if found is None:
            found = _BY_REGISTRY[registry] = CaptureMetrics(registry, latency_buckets)
        return found
