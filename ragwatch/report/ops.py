"""Operations beside quality: request rate, error ratio, p95 latency and cost per hour for the page's range.

A quality dip during a latency spike or a burst of errors is read differently from one on a quiet,
healthy service. A service that scores in process reads its own request histogram and cost counter
(:class:`InProcessOperations`); a worker reads the same series from Prometheus when ``prometheus_url`` is
set (:class:`PrometheusOperations`); otherwise the panel says where the figures are (:func:`where_to_look`).

In process the counters only go up since the process started, so the figures for a range are differences
between snapshots: one at start (all zero, at the families' creation) and one per page refresh, kept in a
bounded list. A range reaching further back than the oldest snapshot is said so (``since``).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from ragwatch.errors import QueueError
from ragwatch.report.select import TimeRange

__all__ = ["InProcessOperations", "PrometheusOperations", "histogram_quantile", "operations_view", "where_to_look"]

REQUEST_HISTOGRAM = "ragwatch_stage_duration_seconds"
COST_COUNTER = "ragwatch_cost_usd"
#: Snapshots kept in process (one per refresh, at most one a second: a day of a page open every 5 s is 17k).
MAX_SNAPSHOTS = 20_000


def where_to_look(service: str) -> dict[str, Any]:
    """The panel without figures: where request rate, errors, latency and cost are to be found."""
    return {
        "available": False,
        "note": (
            f"Request rate, errors, latency and cost of {service} are on the service's /metrics "
            f'({REQUEST_HISTOGRAM}{{stage="request"}}, {COST_COUNTER}_total): set prometheus_url on the '
            "worker to show them here, or open them in Grafana."
        ),
    }


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' ``histogram_quantile`` over cumulative ``(upper bound, count)`` pairs (+Inf last):
    linear within the bucket; the highest finite bound when the quantile falls in +Inf."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


def _figures(requests: float, errors: float, buckets: list[tuple[float, float]], cost: float, seconds: float) -> dict:
    seconds = max(seconds, 1e-9)
    return {
        "available": True,
        "requests": requests,
        "rate_per_second": requests / seconds,
        "error_ratio": errors / requests if requests else None,
        "p95_seconds": histogram_quantile(0.95, buckets),
        "cost_per_hour": cost * 3600.0 / seconds,
    }


class InProcessOperations:
    """Figures from this process's own metric families (the request histogram and the cost counter)."""

    def __init__(self, families: Iterable[Any], service: str) -> None:
        self.families = list(families)
        self.service = service
        self._lock = threading.Lock()
        zero = self._read()
        zero = {"requests": 0.0, "errors": 0.0, "cost": 0.0, "buckets": [(b, 0.0) for b, _ in zero["buckets"]]}
        self._snapshots: deque[tuple[float, dict[str, Any]]] = deque([(self._created(), zero)], maxlen=MAX_SNAPSHOTS)

    def _created(self) -> float:
        created = [
            s.value
            for f in self.families
            for m in f.collect()
            for s in m.samples
            if s.name.endswith("_created") and s.labels.get("service") == self.service
        ]
        return min(created) if created else time.time()

    def _read(self) -> dict[str, Any]:
        requests = errors = cost = 0.0
        buckets: dict[float, float] = {}
        for family in self.families:
            for metric in family.collect():
                for s in metric.samples:
                    if s.labels.get("service") != self.service:
                        continue
                    if s.name == REQUEST_HISTOGRAM + "_count" and s.labels.get("stage") == "request":
                        requests += s.value
                        if s.labels.get("outcome") == "error":
                            errors += s.value
                    elif s.name == REQUEST_HISTOGRAM + "_bucket" and s.labels.get("stage") == "request":
                        le = float(s.labels["le"])
                        buckets[le] = buckets.get(le, 0.0) + s.value
                    elif s.name == COST_COUNTER + "_total":
                        cost += s.value
        return {"requests": requests, "errors": errors, "cost": cost, "buckets": sorted(buckets.items())}

    def figures(self, span: TimeRange, now: float | None = None) -> dict[str, Any]:
        """The range's figures: the newest snapshot minus the newest one at or before the range's start."""
        now = time.time() if now is None else now
        current = self._read()
        with self._lock:
            if now - self._snapshots[-1][0] >= 1.0:
                self._snapshots.append((now, current))
            start = span.start if span.start is not None else self._snapshots[0][0]
            base_t, base = self._snapshots[0]
            for t, snap in self._snapshots:
                if t > start:
                    break
                base_t, base = t, snap
        before = dict(base["buckets"])
        buckets = [(b, c - before.get(b, 0.0)) for b, c in current["buckets"]]
        out = _figures(
            current["requests"] - base["requests"],
            current["errors"] - base["errors"],
            buckets,
            current["cost"] - base["cost"],
            now - base_t,
        )
        out["since"] = base_t
        out["from"] = "this process's metrics"
        return out


class PrometheusOperations:
    """Figures read from a Prometheus server (``prometheus_url``) with instant queries at the range's end."""

    def __init__(self, url: str, service: str, *, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.service = service
        self.timeout = timeout

    def _query(self, expr: str, at: float) -> float | None:
        import httpx

        try:
            response = httpx.get(f"{self.url}/api/v1/query", params={"query": expr, "time": at}, timeout=self.timeout)
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise QueueError(f"prometheus {self.url}: {exc}") from None
        if response.status_code != 200 or data.get("status") != "success":
            raise QueueError(f"prometheus {self.url}: HTTP {response.status_code} {str(data.get('error', ''))[:200]}")
        result = data.get("data", {}).get("result") or []
        if not result:
            return None
        value = float(result[0]["value"][1])
        return value if math.isfinite(value) else None

    def figures(self, span: TimeRange, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        end = min(span.end if span.end is not None else now, now)
        start = span.start if span.start is not None else end - 3600.0
        window = f"{max(1, round(end - start))}s"
        service = self.service.replace("\\", "\\\\").replace('"', '\\"')
        sel = f'{REQUEST_HISTOGRAM}_count{{service="{service}",stage="request"}}'
        requests = self._query(f"sum(increase({sel}[{window}]))", end) or 0.0
        errors = self._query(f'sum(increase({sel[:-1]},outcome="error"}}[{window}]))', end) or 0.0
        p95 = self._query(
            f"histogram_quantile(0.95, sum by (le) (increase({REQUEST_HISTOGRAM}_bucket"
            f'{{service="{service}",stage="request"}}[{window}])))',
            end,
        )
        cost = self._query(f'sum(increase({COST_COUNTER}_total{{service="{service}"}}[{window}]))', end) or 0.0
        out = _figures(requests, errors, [], cost, end - start)
        out["p95_seconds"] = p95
        out["since"] = start
        out["from"] = f"Prometheus at {self.url}"
        return out


def operations_view(provider: Any, span: TimeRange, service: str) -> Mapping[str, Any]:
    """The panel's data: the provider's figures, or where to look (no provider, or it failed)."""
    if provider is None:
        return where_to_look(service)
    try:
        return provider.figures(span)
    except QueueError as exc:
        return where_to_look(service) | {"error": str(exc)[:300]}
