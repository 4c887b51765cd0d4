"""What the HTML report and the live page show, computed from score records: plain JSON-able data.

The page answers, at a glance and in this order: is quality falling and since when (each score over time
against its line, with the degraded periods shaded), why (the diagnosis mix over time), where (mean score
per route, model and tag), and which answers are the bad ones (the worst samples with every claim marked
and the chunk it was checked against). Everything here is pure — records in, a dict out — so the static
report, the live endpoint and the tests compute the same thing; the browser only draws it.

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
from ragwatch.report.build import METRICS, _claims, _score, build_report
from ragwatch.scoring.diagnosis import ADVICE, DIAGNOSES

__all__ = ["bucket_seconds", "degraded_periods", "view_data"]

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


def _time(record: Mapping[str, Any]) -> float | None:
    t = record.get("created_at")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        t = record.get("scored_at")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            return None
    return float(t)


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


def _claim_view(c: Mapping[str, Any]) -> dict[str, Any]:
    def pos(x: Any) -> int | None:
        return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else None

    return {
        "text": str(c.get("text") or ""),
        "verdict": str(c.get("verdict") or "UNVERIFIABLE").upper(),
        "start": pos(c.get("start")),
        "end": pos(c.get("end")),
        "chunk_id": None if c.get("chunk_id") is None else str(c["chunk_id"]),
        "evidence": None if c.get("evidence") is None else str(c["evidence"]),
        "rule": None if not c.get("rule") else str(c["rule"]),
    }


def _chunks_view(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Retrieved chunks with the judge's relevance (and whether the answer used them), else only ids."""

    def find(details: Any, depth: int = 0) -> list[Any] | None:
        if not isinstance(details, Mapping) or depth > 3:
            return None
        chunks = details.get("chunks")
        if isinstance(chunks, list) and all(isinstance(c, Mapping) for c in chunks):
            return chunks
        for value in details.values():
            found = find(value, depth + 1)
            if found is not None:
                return found
        return None

    judged = find(record.get("details"))
    if judged:
        out = []
        for c in judged:
            rel = c.get("relevance")
            ok = isinstance(rel, (int, float)) and not isinstance(rel, bool) and math.isfinite(rel)
            out.append({"id": str(c.get("id", "?")), "relevance": float(rel) if ok else None, "used": c.get("used")})
        return out
    ids = record.get("chunk_ids")
    return [{"id": str(i), "relevance": None, "used": None} for i in ids] if isinstance(ids, list) else []


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
) -> dict[str, Any]:
    """Everything the page draws. ``policy`` (the SLA) enables the degraded-period replay; ``mode`` is the
    live shared state, when the source has one."""
    records = [r for r in records if isinstance(r, Mapping)]
    now = time.time() if now is None else now
    report = build_report(records, thresholds, previous, worst=worst, metrics=metrics, now=now)
    scores = {id(r): {m: _score(r, m) for m in metrics} for r in records}  # each record's scores, read once

    def values(rs: list[Mapping[str, Any]], metric: str) -> list[float]:
        return [v for r in rs if (v := scores[id(r)][metric]) is not None]

    timed = sorted(((t, r) for r in records if (t := _time(r)) is not None), key=lambda p: p[0])
    first = timed[0][0] if timed else now
    last = timed[-1][0] if timed else now
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
    mix = {d: [sum(1 for r in rs if r.get("diagnosis") == d) for rs in per_bucket] for d in names}
    mix = {d: c for d, c in mix.items() if any(c) or d != "unknown"}

    heat_rows = []
    for kind, value, rs in _slices(records):
        cells = {}
        for metric in metrics:
            vs = values(rs, metric)
            cells[metric] = {"mean": _mean(vs), "n": len(vs)}
        heat_rows.append({"kind": kind, "value": value, "samples": len(rs), "cells": cells})

    by_id = {str(r.get("sample_id", "?")): r for r in records}
    worst_view = []
    for metric, samples in report.worst.items():
        for w in samples:
            r = by_id.get(w.sample_id, {})
            worst_view.append(
                {
                    "metric": metric,
                    "score": w.score,
                    "sample_id": w.sample_id,
                    "question": None if w.question is None else str(w.question),
                    "answer": None if w.answer is None else str(w.answer),
                    "diagnosis": None if w.diagnosis is None else str(w.diagnosis),
                    "route": None if r.get("route") is None else str(r["route"]),
                    "model": None if r.get("model") is None else str(r["model"]),
                    "created_at": _time(r),
                    "scores": {m: _score(r, m) for m in metrics},  # r may be {} (a duplicate id)
                    "claims": [_claim_view(c) for c in _claims(r.get("details"))],
                    "chunks": _chunks_view(r),
                }
            )

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
        points = [(t, v) for t, r in timed if (v := _score(r, policy.metric)) is not None]  # SLA metric may be extra
        periods = degraded_periods(points, policy)
    mode_view = None
    if mode is not None:
        live = effective(mode)
        mode_view = {
            "degraded": live,
            "since": mode.since or None,
            "reason": mode.reason,
            "override": mode.override,
            "value": mode.value,
        }
        if live and (not periods or not periods[-1].get("open")):
            start = max(mode.since or first, first)
            periods.append({"start": start, "end": max(last, start), "reason": mode.reason, "open": True})
    summary = report.to_dict()
    return {
        "generated_at": now,
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
        "worst": worst_view,
    }
