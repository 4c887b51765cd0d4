"""One replay run's figures: availability, error kinds, latency quantiles, retrieval metrics and drift.

Pure aggregation of :class:`~ragwatch.replay.client.ProbeResult` s, plus the one function that writes them
to the replay metrics; the run loop decides when and where they go.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragwatch.metrics.catalog import ReplayMetrics
from ragwatch.replay.client import ERROR_KINDS, ProbeResult
from ragwatch.replay.options import ReplayOptions
from ragwatch.replay.source import similarity
from ragwatch.scoring.retrieval_metrics import hit_rate, mean_reciprocal_rank, precision_at_k, recall_at_k

__all__ = ["QUANTILES", "RunSummary", "record_metrics", "summarize"]

QUANTILES: tuple[float, ...] = (0.5, 0.95, 0.99)


def _quantile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), None for no data."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _dist(values: Sequence[float]) -> dict[str, float | None]:
    return {f"p{round(q * 100)}": _quantile(values, q) for q in QUANTILES} | {
        "mean": sum(values) / len(values) if values else None,
        "count": len(values),
    }


@dataclass(slots=True)
class RunSummary:
    """One run's figures — the JSON summary is :meth:`to_dict`."""

    service: str
    started_at: float
    duration: float
    requests: int
    ok: int
    availability: float
    errors: dict[str, int]
    latency: dict[str, float | None]
    ttft: dict[str, float | None]
    k: int
    retrieval: dict[str, float] | None  # None without golden questions answered
    golden_answered: int
    drift: dict[str, float | None]
    drift_counts: dict[str, int]
    passed: bool
    failures: list[str]
    sources: dict[str, int]
    examples: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def markdown(self) -> str:
        def ms(v: float | None) -> str:
            return "–" if v is None else f"{v * 1000:.0f} ms"

        def num(v: float | None) -> str:
            return "–" if v is None else f"{v:.3f}"

        lines = [
            f"## ragwatch replay — {self.service}: {'PASS' if self.passed else 'FAIL'}",
            "",
            f"{self.requests} requests ({', '.join(f'{n} {s}' for s, n in self.sources.items())}) "
            f"in {self.duration:.2f} s; availability **{self.availability:.3f}** ({self.ok} ok)",
            "",
            "| | p50 | p95 | p99 | n |",
            "|---|---|---|---|---|",
        ]
        for name, d in (("latency", self.latency), ("TTFT", self.ttft)):
            lines.append(f"| {name} | {ms(d['p50'])} | {ms(d['p95'])} | {ms(d['p99'])} | {d['count']} |")
        errors = {k: v for k, v in self.errors.items() if v}
        lines += ["", "Errors: " + (", ".join(f"{k} {v}" for k, v in errors.items()) if errors else "none")]
        if self.retrieval is not None:
            r = self.retrieval
            lines += [
                "",
                f"Retrieval over {self.golden_answered} answered golden questions (K={self.k}): "
                f"Hit Rate {num(r['hit_rate'])}, Recall {num(r['recall'])}, Precision {num(r['precision'])}, "
                f"MRR {num(r['mrr'])}",
            ]
        for basis, value in self.drift.items():
            if value is not None:
                lines.append(f"Answer drift from {basis} answers: {value:.3f} (n={self.drift_counts[basis]})")
        if self.failures:
            lines += ["", *[f"- floor not met: {f}" for f in self.failures]]
        return "\n".join(lines) + "\n"


def summarize(options: ReplayOptions, results: Sequence[ProbeResult], started_at: float, duration: float) -> RunSummary:
    """Aggregate one run. Retrieval metrics cover golden questions that got a usable answer (a failed request
    is counted by availability, not a second time as a retrieval miss); drift covers answered questions that
    have a reference (golden) or historical (traffic) answer."""
    n = len(results)
    ok = [r for r in results if r.ok]
    errors = {kind: 0 for kind in ERROR_KINDS}
    errors.update(Counter(r.outcome for r in results if not r.ok))
    golden = [r for r in ok if r.question.relevant_ids is not None]
    retrieval = None
    if golden:
        retrieved = [r.chunk_ids for r in golden]
        relevant = [r.question.relevant_ids or [] for r in golden]
        k = options.k
        retrieval = {
            "hit_rate": hit_rate(retrieved, relevant, k),
            "recall": sum(recall_at_k(a, b, k) for a, b in zip(retrieved, relevant, strict=True)) / len(golden),
            "precision": sum(precision_at_k(a, b, k) for a, b in zip(retrieved, relevant, strict=True)) / len(golden),
            "mrr": mean_reciprocal_rank(retrieved, relevant, k),
        }
    drift_values: dict[str, list[float]] = {"reference": [], "historical": []}
    for r in ok:
        if r.question.reference_answer is not None:
            drift_values["reference"].append(1.0 - similarity(r.answer or "", r.question.reference_answer))
        if r.question.historical_answer is not None:
            drift_values["historical"].append(1.0 - similarity(r.answer or "", r.question.historical_answer))
    availability = len(ok) / n if n else 0.0
    failures = []
    if options.min_availability is not None and availability < options.min_availability:
        failures.append(f"availability {availability:.3f} < {options.min_availability}")
    if options.min_hit_rate is not None:
        if retrieval is None:
            failures.append(f"hit rate unknown (no golden question answered) < {options.min_hit_rate}")
        elif retrieval["hit_rate"] < options.min_hit_rate:
            failures.append(f"hit rate {retrieval['hit_rate']:.3f} < {options.min_hit_rate}")
    examples = [
        {"question": r.question.text[:200], "outcome": r.outcome, "error": r.error, "status": r.status}
        for r in results
        if not r.ok
    ][:10]
    return RunSummary(
        service=options.service,
        started_at=started_at,
        duration=duration,
        requests=n,
        ok=len(ok),
        availability=availability,
        errors=errors,
        latency=_dist([r.latency for r in ok if r.latency is not None]),
        ttft=_dist([r.ttft for r in ok if r.ttft is not None]),
        k=options.k,
        retrieval=retrieval,
        golden_answered=len(golden),
        drift={b: (sum(v) / len(v) if v else None) for b, v in drift_values.items()},
        drift_counts={b: len(v) for b, v in drift_values.items()},
        passed=not failures,
        failures=failures,
        sources=dict(Counter(r.question.source for r in results)),
        examples=examples,
    )


def record_metrics(metrics: ReplayMetrics, summary: RunSummary, results: Sequence[ProbeResult]) -> None:
    """Counters and histograms per request; gauges overwritten with this run's figures."""
    s = summary.service
    for kind in ("ok", *ERROR_KINDS):
        metrics.requests.labels(s, kind)  # every series exists from the first run (rate() needs a zero)
    for r in results:
        metrics.requests.labels(s, r.outcome).inc()
        if r.ok and r.latency is not None:
            metrics.duration.labels(s).observe(r.latency)
        if r.ok and r.ttft is not None:
            metrics.ttft.labels(s).observe(r.ttft)
    metrics.availability.labels(s).set(summary.availability)
    for kind, dist in (("latency", summary.latency), ("ttft", summary.ttft)):
        for q in QUANTILES:
            value = dist[f"p{round(q * 100)}"]
            if value is not None:
                metrics.latency_quantile.labels(s, kind, str(q)).set(value)
    if summary.retrieval is not None:
        for name, value in summary.retrieval.items():
            metrics.retrieval.labels(s, name, str(summary.k)).set(value)
    for basis, value in summary.drift.items():
        if value is not None:
            metrics.answer_drift.labels(s, basis).set(value)
    metrics.runs.labels(s, "pass" if summary.passed else "fail").inc()
    metrics.last_run.labels(s).set(summary.started_at + summary.duration)
