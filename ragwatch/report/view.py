"""What the HTML report and the live page show, computed from score records: plain JSON-able data.

The page answers, at a glance and in this order: is quality falling and since when (each score over time
against its line, with the degraded periods shaded), why (the diagnosis mix over time), where (mean score
per route, model and tag), and which answers are the bad ones (the worst samples with every claim marked
and the chunk it was checked against). Everything here is pure — records in, a dict out — so the static
report, the live endpoint and the tests compute the same thing; the browser only draws it.

The view covers a time range (the live page: the last hour unless the query names another) and, when
asked, only the records the filters of "find things" accept; the now-panel (the live windows and the
breaker, :mod:`ragwatch.report.now`) is never filtered. A metric equal to another by construction
(``context_relevance`` is ``context_precision_3`` when the retriever returns exactly K chunks) is shown once.

Degraded periods are *replayed* from the SLA metric's scores with the same breaker (:func:`ragwatch.mode.degrade.step`)
the workers run, on a fine tick grid, because no history of mode switches is stored; operator overrides are
not in the scores, so the live state (when the source has one) is shown beside it and an ongoing degraded
state extends the last period to now.
"""

from __future__ import annotations

import bisect
import math
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragwatch.mode.degrade import ModeState, Policy, direction_of, effective, step, window_value
from ragwatch.report.build import METRICS, _score, build_report
from ragwatch.report.markers import markers
from ragwatch.report.select import Filters, TimeRange, diagnoses_of, record_time, select
from ragwatch.report.worst import worst_groups
from ragwatch.scoring.diagnosis import ADVICE, DIAGNOSES

__all__ = ["bucket_seconds", "degraded_periods", "equal_metrics", "view_data"]

#: Metrics that can equal another by construction: (shown, hidden when equal on every sample).
_SAME_BY_CONSTRUCTION = (("context_precision_3", "context_relevance"),)

#: Bucket widths the time axis snaps to (seconds), so a bucket reads as "1 min" and not "73 s".
_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
#: Slices in the heatmap at most (the busiest of each kind first): a page, not a spreadsheet.
MAX_SLICES = 24
#: Ticks of the degraded-mode replay over the records' time span (bounded work whatever the span).
REPLAY_TICKS = 600


def bucket_seconds(span: float, buckets: int = 60) -> float:
    """The smallest step of :data:`_STEPS` that covers ``span`` in at most ``buckets`` buckets."""
    for s in _STEPS:
        if span / s <= buckets:
            return s
    return _STEPS[-1]


_time = record_time


def equal_metrics(records: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, str]:
    """``{hidden: shown}`` for metrics equal on every sample that has both (at least one): two identical
    charts, heatmap columns and worst lists say nothing the first did not."""
    out = {}
    for shown, hidden in _SAME_BY_CONSTRUCTION:
        if shown not in metrics or hidden not in metrics:
            continue
        pairs = [(_score(r, shown), _score(r, hidden)) for r in records]
        both = [(a, b) for a, b in pairs if a is not None and b is not None]
        if both and all(abs(a - b) <= 1e-9 for a, b in both):
            out[hidden] = shown
    return out


def degraded_periods(
    points: Sequence[tuple[float, float]], policy: Policy, *, end: float | None = None
) -> list[dict[str, Any]]:
    """Replay the breaker over (time, value) points (oldest first): [{"start", "end", "reason"}].

    The window at each tick holds the points at or before it, as a worker ticking then would have seen.
    A period still open at the last tick ends at ``end`` (default: the last point) and is marked ``open``.
    """
    if not points:
        return []
    times = [t for t, _ in points]
    first, last = times[0], max(times[-1], end or times[-1])
    tick = max((last - first) / REPLAY_TICKS, 0.05)
    state = ModeState(since=first - policy.min_dwell_seconds - 1)
    periods: list[dict[str, Any]] = []
    now = first
    while now <= last + 1e-9:
        i = bisect.bisect_right(times, now)
        window = [(t, v) for t, v in reversed(points[max(0, i - policy.window_samples) : i])]
        value, n = window_value(window, policy, now)
        new = step(policy, state, value, n, now)
        if new.degraded != state.degraded:
            if new.degraded:
                periods.append({"start": now, "end": None, "reason": new.reason, "open": True})
            elif periods:
                periods[-1].update(end=now, open=False, recovered=new.reason)
        state = new
        now += tick
    if periods and periods[-1]["end"] is None:
        periods[-1]["end"] = last
    return periods


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _slices(records: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, list[Mapping[str, Any]]]]:
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        keys = []
        for kind in ("route", "model"):
            if isinstance(r.get(kind), str) and r[kind]:
                keys.append((kind, r[kind]))
        tags = r.get("tags")
        if isinstance(tags, Mapping):
            keys += [("tag", f"{k}={v}") for k, v in tags.items() if isinstance(k, str)]
        for key in keys:
            groups.setdefault(key, []).append(r)
    order = {"route": 0, "model": 1, "tag": 2}
    ranked = sorted(groups.items(), key=lambda kv: (order[kv[0][0]], -len(kv[1]), kv[0][1]))
    return [(kind, value, rs) for (kind, value), rs in ranked[:MAX_SLICES]]


def view_data(
    records: Iterable[Mapping[str, Any]],
    thresholds: Mapping[str, float],
    policy: Policy | None = None,
    mode: ModeState | None = None,
    previous: Mapping[str, Any] | None = None,
    *,
    source: str = "",
    worst: int = 5,
    buckets: int = 60,
    metrics: Sequence[str] = METRICS,
    now: float | None = None,
    span: TimeRange | None = None,
    filters: Filters | None = None,
    live: Mapping[str, Any] | None = None,
    trace_url: str | None = None,
    operations: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything the page draws. ``policy`` (the SLA) enables the degraded-period replay; ``mode`` is the
    live shared state, when the source has one. ``span`` and ``filters`` choose the records (default: all);
    ``live`` is the now-panel, ``trace_url`` a template with ``{trace_id}`` for links to a trace viewer,
    ``operations`` the request rate, errors, latency and cost of the range (:mod:`ragwatch.report.ops`)."""
    span = span or TimeRange()
    filters = filters or Filters()
    in_range = select(records, span)
    options = _filter_options(in_range)
    records = select(in_range, None, filters)
    now = time.time() if now is None else now
    merged = equal_metrics(records, metrics)
    metrics = [m for m in metrics if m not in merged]
    report = build_report(records, thresholds, previous, worst=worst, metrics=metrics, now=now, span=span, live=live)
    scores = {id(r): {m: _score(r, m) for m in metrics} for r in records}  # each record's scores, read once

    def values(rs: list[Mapping[str, Any]], metric: str) -> list[float]:
        return [v for r in rs if (v := scores[id(r)][metric]) is not None]

    timed = sorted(((t, r) for r in records if (t := _time(r)) is not None), key=lambda p: p[0])
    first = timed[0][0] if timed else now
    last = timed[-1][0] if timed else now
    # the axis starts at the range's first record (a service up for three minutes of a 1-hour range would
    # otherwise be a sliver at the right) and reaches the range's end, or now
    if timed and (span.end is not None or span.start is not None):
        last = max(last, min(span.end if span.end is not None else now, now))
    step_s = bucket_seconds(last - first, buckets)
    origin = math.floor(first / step_s) * step_s
    n_buckets = int((last - origin) // step_s) + 1 if timed else 0
    t_axis = [round(origin + i * step_s, 3) for i in range(n_buckets)]  # bucket starts
    per_bucket: list[list[Mapping[str, Any]]] = [[] for _ in range(n_buckets)]
    for t, r in timed:
        per_bucket[min(n_buckets - 1, int((t - origin) // step_s))].append(r)

    series: dict[str, dict[str, list[Any]]] = {}
    for metric in metrics:
        means, counts = [], []
        for rs in per_bucket:
            vs = values(rs, metric)
            means.append(_mean(vs))
            counts.append(len(vs))
        series[metric] = {"mean": means, "count": counts}

    names = [d for d in DIAGNOSES if d != "unknown"] + ["unknown"]
    labels = {id(r): set(diagnoses_of(r)) for r in records}
    mix = {d: [sum(1 for r in rs if d in labels[id(r)]) for rs in per_bucket] for d in names}
    mix = {d: c for d, c in mix.items() if any(c) or d != "unknown"}

    heat_rows = []
    for kind, value, rs in _slices(records):
        cells = {}
        for metric in metrics:
            vs = values(rs, metric)
            cells[metric] = {"mean": _mean(vs), "n": len(vs)}
        heat_rows.append({"kind": kind, "value": value, "samples": len(rs), "cells": cells})

    groups = worst_groups(records, thresholds, metrics, trace_url=trace_url)

    periods: list[dict[str, Any]] = []
    sla = None
    if policy is not None:
        sla = {
            "metric": policy.metric,
            "threshold": policy.threshold,
            "recover_at": policy.recover_at,
            "direction": policy.direction,
            "window_samples": policy.window_samples,
        }
        # the breaker saw every record, whatever the filters: replay over the whole range
        everything = sorted(
            (t, v) for r in in_range if (t := _time(r)) is not None and (v := _score(r, policy.metric)) is not None
        )
        periods = degraded_periods(everything, policy)
    mode_view = None
    if mode is not None:
        in_force = effective(mode)
        mode_view = {
            "degraded": in_force,
            "since": mode.since or None,
            "reason": mode.reason,
            "override": mode.override,
            "value": mode.value,
            # the operators' overrides with their times, as stored ("on@1712.5 auto@1790.0"): a report built
            # from this page (``ragwatch report --url``) marks them too
            "override_log": mode.to_fields()["override_log"],
        }
        if in_force and (not periods or not periods[-1].get("open")):
            start = max(mode.since or first, first)
            periods.append({"start": start, "end": max(last, start), "reason": mode.reason, "open": True})
    summary = report.to_dict()
    return {
        "generated_at": now,
        "range": summary["range"],
        "filters": filters.to_dict(),
        "filter_options": options,
        "merged": merged,
        "now": dict(live) if live is not None else None,
        "operations": dict(operations) if operations is not None else None,
        "markers": markers(in_range, periods, mode),
        "trace_url": trace_url is not None,
        "source": source,
        "services": report.services,
        "samples": report.samples,
        "first_at": first if timed else None,
        "last_at": last if timed else None,
        "metrics": summary["metrics"],
        "previous_at": summary["previous_at"],
        "diagnoses": summary["diagnoses"],
        "look_first": summary["look_first"],
        "judges": summary["judges"],
        "mixed_judges": summary["mixed_judges"],
        "advice": ADVICE.get(summary["look_first"] or "", ""),
        "timeline": {"step": step_s, "t": t_axis, "series": series},
        "thresholds": {m: thresholds.get(m) for m in metrics},
        "directions": {m: direction_of(m) for m in metrics},  # "min": the line is a floor; "max": a ceiling
        "sla": sla,
        "degraded_periods": periods,
        "mode": mode_view,
        "diagnosis_mix": mix,
        "heatmap": {"metrics": list(metrics), "rows": heat_rows},
        "worst": groups,
    }


def _filter_options(records: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """What the filter menus offer: the routes, models, tags and labels present in the range (bounded)."""
    routes: set[str] = set()
    models: set[str] = set()
    tags: set[str] = set()
    labels: set[str] = set()
    for r in records:
        if isinstance(r.get("route"), str):
            routes.add(r["route"])
        if isinstance(r.get("model"), str):
            models.add(r["model"])
        t = r.get("tags")
        if isinstance(t, Mapping):
            tags.update(f"{k}={v}" for k, v in t.items() if isinstance(k, str))
        labels.update(diagnoses_of(r))
    order = {d: i for i, d in enumerate(DIAGNOSES)}
    return {
        "route": sorted(routes)[: MAX_SLICES * 2],
        "model": sorted(models)[: MAX_SLICES * 2],
        "tag": sorted(tags)[: MAX_SLICES * 2],
        "diagnosis": sorted(labels, key=lambda d: (order.get(d, len(order)), d))[:MAX_SLICES],
    }
