"""Now, apart from history: the live window of each scored metric and the breaker's state in words.

The mode is decided on a *window* (the newest ``window_samples`` scores within ``window_seconds``), not on
the range a report covers; an engineer arriving after an incident must see the window that decides now
(the number ``ragwatch_window_value`` exports) beside its line and how far from it, and why a degraded
period outlasts the dip (the recovery line, the hold time, the dwell). This module computes exactly that,
with the breaker's own :func:`~ragwatch.mode.degrade.window_value`, from the points the SLA evaluator reads
(a queue's window store) or, for a file, from the records as of the newest one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ragwatch.mode.degrade import ModeState, Policy, direction_of, effective, window_value
from ragwatch.report.select import record_time

__all__ = ["breaker_state", "breaker_words", "format_time", "now_panel", "window_depth", "window_rows"]

Point = tuple[Any, ...]


def window_depth(policy: Policy) -> int:
    """How many newest points the evaluator reads per metric: past the window's size when a per-client
    cap may drop some (the same depth :class:`~ragwatch.mode.sla.SLAEvaluator` reads)."""
    if policy.max_client_share >= 1:
        return policy.window_samples
    return min(5 * policy.window_samples, 1000)


def format_time(t: float | None) -> str:
    """One date format everywhere: ISO 8601 in local time, the zone named (``2026-05-01 14:03:07 CEST``)."""
    if t is None:
        return "–"
    return datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def points_from_records(records: Sequence[Mapping[str, Any]], metric: str) -> list[Point]:
    """(time, value, client) of ``metric``, newest first: what a window store would hold."""
    out = []
    for r in records:
        scores = r.get("scores")
        v = scores.get(metric) if isinstance(scores, Mapping) else None
        t = record_time(r)
        if t is None or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        client = r.get("client")
        out.append((t, float(v), client if isinstance(client, str) else ""))
    out.sort(key=lambda p: -p[0])
    return out


def window_rows(
    points: Mapping[str, Sequence[Point]], thresholds: Mapping[str, float], policy: Policy, now: float
) -> list[dict[str, Any]]:
    """Per metric: the window value, samples, its line and the margin (positive: on the good side)."""
    rows = []
    for metric, pts in points.items():
        value, samples = window_value(pts, policy, now)
        threshold = thresholds.get(metric)
        direction = direction_of(metric)
        margin = None
        if value is not None and threshold is not None:
            margin = value - threshold if direction == "min" else threshold - value
        rows.append(
            {
                "metric": metric,
                "value": value,
                "samples": samples,
                "threshold": threshold,
                "direction": direction,
                "margin": margin,
                "sla": metric == policy.metric,
                "enough": samples >= policy.min_samples,
            }
        )
    return rows


def breaker_state(policy: Policy, mode: ModeState | None, value: float | None, now: float) -> dict[str, Any] | None:
    """The breaker as facts: state, since when, the line that would switch it, hold progress, dwell."""
    if mode is None:
        return None
    minimum = "<" if policy.direction == "min" else ">"
    good = "≥" if policy.direction == "min" else "≤"
    state = {"on": "forced_on", "off": "forced_off"}.get(mode.override) or ("degraded" if effective(mode) else "normal")
    dwell_until = mode.since + policy.min_dwell_seconds if mode.since else None
    return {
        "state": state,
        "since": mode.since or None,
        "metric": policy.metric,
        "value": value,
        "enter": {"op": minimum, "line": policy.threshold, "min_samples": policy.min_samples},
        "leave": {
            "op": good,
            "line": policy.recover_at,
            "hold": policy.hold_seconds,
            "so_far": None if mode.recovering_since is None else max(0.0, now - mode.recovering_since),
        },
        "not_before": dwell_until if dwell_until is not None and dwell_until > now else None,
        "window": {"samples": policy.window_samples, "seconds": policy.window_seconds},
    }


def breaker_words(b: Mapping[str, Any] | None, when: Callable[[float | None], str] = format_time) -> str:
    """The breaker in one sentence ("degraded since …; leaves when CP@3 ≥ 0.70 for 120 s — 45 s so far").

    ``dashboard.js`` says the same in the browser's time zone; a test holds both to the same words."""
    if b is None:
        return "mode: not in this source"
    m, enter, leave = b["metric"], b["enter"], b["leave"]
    dwell = f"; not before {when(b['not_before'])} (minimum dwell)" if b.get("not_before") else ""
    if b["state"] == "forced_on":
        return f"degraded by an operator since {when(b['since'])}; stays until `ragwatch degrade auto`"
    if b["state"] == "forced_off":
        return "normal by an operator (the window is not acted on) until `ragwatch degrade auto`"
    if b["state"] == "degraded":
        progress = f"{leave['so_far']:.0f} s so far" if leave.get("so_far") is not None else "not there yet"
        return (
            f"degraded since {when(b['since'])}; leaves when {m} {leave['op']} {leave['line']:.2f} for "
            f"{leave['hold']:.0f} s — {progress}{dwell}"
        )
    since = f" since {when(b['since'])}" if b.get("since") else ""
    return (
        f"normal{since}; enters degraded when {m} {enter['op']} {enter['line']:.2f} over at least "
        f"{enter['min_samples']} samples{dwell}"
    )


def now_panel(
    thresholds: Mapping[str, float],
    policy: Policy,
    mode: ModeState | None,
    *,
    points: Mapping[str, Sequence[Point]] | None = None,
    records: Sequence[Mapping[str, Any]] = (),
    metrics: Sequence[str] = (),
    now: float | None = None,
) -> dict[str, Any]:
    """The now-panel: ``points`` (per metric, newest first) from a window store, or else the windows
    rebuilt from ``records`` as of the newest record (a file has no "now" of its own)."""
    names = [policy.metric] + [m for m in metrics if m in thresholds and m != policy.metric]
    if points is not None:
        as_of = time.time() if now is None else now
        origin = "window store"
        pts = {m: points.get(m, []) for m in names}
    else:
        times = [t for r in records if (t := record_time(r)) is not None]
        as_of = (max(times) if times else time.time()) if mode is None else (time.time() if now is None else now)
        origin = "records"
        pts = {m: points_from_records(records, m) for m in names}
    all_thresholds = {**thresholds, policy.metric: policy.threshold}
    rows = window_rows(pts, all_thresholds, policy, as_of)
    sla_value = rows[0]["value"] if rows else None
    b = breaker_state(policy, mode, sla_value, as_of)
    return {"as_of": as_of, "from": origin, "windows": rows, "breaker": b, "words": breaker_words(b)}
