"""The health report: what the stored scores say about a service, in Markdown (people) or JSON (machines).

Dashboards show a line going down; the person on call needs three more things, in this order: which scores
are out of line and by how much since last time (the table), concrete bad answers with the claims that were
not supported and the chunk each was checked against (the worst samples), and which stage to open first
(counts by diagnosis, with advice). The report is built from score records only — the same dicts the worker
stores (:class:`~ragwatch.scoring.worker.ScoreRecord`) — so it works from Redis, from a JSONL export or in the demo.

The comparison with the previous report uses a small JSON state file (``means`` per metric), written by the
CLI after each report, so a scheduled report shows drift without a database.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragwatch.mode.degrade import direction_of
from ragwatch.report.now import breaker_words, format_time, now_panel
from ragwatch.report.select import TimeRange, diagnoses_of, record_time, select, time_range
from ragwatch.scoring.diagnosis import ADVICE, DIAGNOSES

__all__ = [
    "DEFAULT_STATE_PATH",
    "METRICS",
    "WARN_BAND",
    "MetricRow",
    "Report",
    "ScoreSource",
    "WorstSample",
    "build_report",
    "default_thresholds",
    "load_records_jsonl",
    "load_state",
    "report_from",
    "save_state",
]

#: The scores reported, in table order (others present in the records are ignored). ``hallucination_rate``
#: (share of answers with an unsupported claim) is held to a ceiling, the others to a floor
#: (:func:`ragwatch.mode.degrade.direction_of`).
METRICS = ("faithfulness", "hallucination_rate", "answer_relevance", "context_relevance", "context_precision_3")
#: A mean this far past its threshold (under a floor, over a ceiling) is a warning (⚠️), further a failure (❌).
WARN_BAND = 0.05
DEFAULT_STATE_PATH = ".ragwatch-report.json"
#: Worst samples of these carry their unsupported claims.
_CLAIM_METRICS = ("faithfulness", "hallucination_rate")
_STATUS_ICON = {"ok": "✅", "warn": "⚠️", "fail": "❌", "no data": "–"}


def default_thresholds(settings: Any = None) -> dict[str, float]:
    """Health lines from settings: ``health_thresholds`` plus the SLA metric at ``sla_threshold``."""
    if settings is None:
        from ragwatch.settings import load_settings

        settings = load_settings(None)
    thresholds = dict(settings.health_thresholds)
    thresholds[settings.sla_metric] = settings.sla_threshold
    return thresholds


@dataclass(frozen=True, slots=True)
class MetricRow:
    metric: str
    samples: int
    mean: float | None
    std: float | None  # population standard deviation (defined for one sample, and what a window spreads)
    delta: float | None  # mean minus the previous report's mean
    threshold: float | None
    status: str  # "ok" | "warn" | "fail" | "no data"
    direction: str = "min"  # "min": the threshold is a floor (quality scores); "max": a ceiling (bad-outcome rates)


@dataclass(frozen=True, slots=True)
class WorstSample:
    sample_id: str
    metric: str
    score: float
    question: str | None
    answer: str | None
    diagnosis: str | None  # the first label, for readers of the single-label form
    unsupported: list[dict[str, Any]] = field(default_factory=list)  # {"text", "chunk_id", "evidence", "rule"?}
    diagnoses: list[str] = field(default_factory=list)  # every label (a sample can carry several)
    trace_id: str | None = None


@dataclass(slots=True)
class Report:
    generated_at: float
    samples: int
    services: list[str]
    rows: list[MetricRow]
    worst: dict[str, list[WorstSample]]
    diagnoses: dict[str, int]
    previous_at: float | None = None
    #: who scored the window: one entry per judge name and version, with its number of records
    judges: list[dict[str, Any]] = field(default_factory=list)
    #: the range the table, worst samples and diagnoses cover (start/end None: open on that side)
    span: TimeRange = field(default_factory=TimeRange)
    #: first and last record time inside the range
    first_at: float | None = None
    last_at: float | None = None
    #: the live windows and the breaker (:func:`ragwatch.report.now.now_panel`), when known
    now: dict[str, Any] | None = None

    # -- machine form --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Everything in the Markdown, as plain JSON-able data."""
        return {
            "generated_at": self.generated_at,
            "previous_at": self.previous_at,
            "range": self.span.to_dict() | {"first_at": self.first_at, "last_at": self.last_at},
            "now": self.now,
            "samples": self.samples,
            "services": self.services,
            "metrics": [
                {
                    "metric": r.metric,
                    "samples": r.samples,
                    "mean": r.mean,
                    "std": r.std,
                    "delta": r.delta,
                    "threshold": r.threshold,
                    "direction": r.direction,
                    "status": r.status,
                }
                for r in self.rows
            ],
            "worst": {
                m: [
                    {
                        "sample_id": w.sample_id,
                        "score": w.score,
                        "question": w.question,
                        "answer": w.answer,
                        "diagnosis": w.diagnosis,
                        "diagnoses": w.diagnoses,
                        "trace_id": w.trace_id,
                        "unsupported": w.unsupported,
                    }
                    for w in ws
                ]
                for m, ws in self.worst.items()
            },
            "diagnoses": [
                {"diagnosis": d, "count": n, "advice": ADVICE.get(d, "")} for d, n in self._diagnoses_sorted()
            ],
            "look_first": self.look_first(),
            "judges": self.judges,
            "mixed_judges": self.mixed_judges(),
        }

    def state(self) -> dict[str, Any]:
        """What the next report compares against."""
        return {
            "generated_at": self.generated_at,
            "samples": self.samples,
            "means": {r.metric: r.mean for r in self.rows if r.mean is not None},
        }

    def mixed_judges(self) -> list[str]:
        """Judges that scored this window under more than one version (other weights, another threshold or
        relevance offset): their scores on either side of the change do not measure the same thing."""
        names = [j["name"] for j in self.judges]
        return sorted({n for n in names if names.count(n) > 1})

    def look_first(self) -> str | None:
        """The most frequent problem diagnosis (not healthy/unknown), or None when there is none."""
        problems = [(d, n) for d, n in self._diagnoses_sorted() if d not in ("healthy", "unknown") and n > 0]
        return problems[0][0] if problems else None

    def _judge_lines(self) -> list[str]:
        if not self.judges:
            return []
        scored = " · ".join(f"{_code(j['name'])} {_code(j['version'])} ({j['samples']})" for j in self.judges)
        lines = [f"Scored by {scored}", ""]
        for name in self.mixed_judges():
            lines += [
                f"⚠️ {_code(name)} scored this window under more than one version (weights, threshold or "
                "relevance offset changed): scores from either side of the change do not measure the same thing.",
                "",
            ]
        return lines

    def _diagnoses_sorted(self) -> list[tuple[str, int]]:
        order = {d: i for i, d in enumerate(DIAGNOSES)}
        return sorted(self.diagnoses.items(), key=lambda kv: (-kv[1], order.get(kv[0], len(order))))

    def range_words(self) -> str:
        """Which stretch of time the figures cover, in words."""
        start = self.span.start if self.span.start is not None else self.first_at
        end = self.span.end if self.span.end is not None else self.last_at
        name = {"all": "every record read", "custom": "chosen range"}.get(self.span.name, f"last {self.span.name}")
        return f"{format_time(start)} → {format_time(end)} ({name})"

    def _now_lines(self) -> list[str]:
        now = self.now
        if not now:
            return []
        lines = [
            "## Now",
            "",
            f"Mode: {_md(breaker_words(now.get('breaker')))}",
            "",
            f"Live windows as of {format_time(now.get('as_of'))} (from the {_md(now.get('from'))}):",
            "",
            "| metric | window | threshold | margin | samples |",
            "|---|---:|---:|---:|---:|",
        ]
        for w in now.get("windows", []):
            line = w.get("threshold")
            lines.append(
                f"| {w['metric']}{' (SLA)' if w.get('sla') else ''} | {_num(w.get('value'))} | "
                f"{_bound(w['direction']) + _num(line) if line is not None else '–'} | "
                f"{_delta(w.get('margin'))} | {w.get('samples', 0)} |"
            )
        return [*lines, ""]

    # -- human form ----------------------------------------------------------------------------------
    def markdown(self) -> str:
        when = format_time(self.generated_at)
        lines = [
            "# ragwatch health report",
            "",
            f"{self.samples} scored samples from {_md(', '.join(self.services)) or 'no service'} · generated {when}"
            + (f" · Δ against the report of {format_time(self.previous_at)}" if self.previous_at else ""),
            "",
            *self._now_lines(),
            f"Range: {self.range_words()}",
            "",
            *self._judge_lines(),
            "## Scores",
            "",
            "| metric | samples | mean | std | Δ | threshold | status |",
            "|---|---:|---:|---:|---:|---:|:---:|",
        ]
        for r in self.rows:
            lines.append(
                f"| {r.metric} | {r.samples} | {_num(r.mean)} | {_num(r.std)} | {_delta(r.delta)} | "
                f"{_bound(r.direction) + _num(r.threshold) if r.threshold is not None else '–'} | "
                f"{_STATUS_ICON[r.status]} |"
            )
        lines += [
            "",
            f"✅ on the right side of the threshold (≥ a floor, ≤ a ceiling) · ⚠️ within {WARN_BAND} past it · "
            "❌ further past",
            "",
        ]
        lines += ["## Worst samples", ""]
        any_worst = False
        for metric, samples in self.worst.items():
            if not samples:
                continue
            any_worst = True
            lines += [f"### {metric}", ""]
            for w in samples:
                diagnosis = _md(", ".join(w.diagnoses)) if w.diagnoses else "no diagnosis"
                trace = f" trace {_code(w.trace_id)}" if w.trace_id else ""
                lines.append(
                    f"- **{w.score:.2f}** {_code(w.sample_id)}{trace} ({diagnosis}) — Q: {_md(_one_line(w.question))}"
                )
                lines.append(f"  - A: {_md(_one_line(w.answer))}")
                for claim in w.unsupported:
                    lines.append(
                        f"  - unsupported: “{_md(_one_line(claim.get('text')))}” — checked against "
                        f"{_code(claim.get('chunk_id')) if claim.get('chunk_id') else 'no chunk'}: "
                        f"“{_md(_one_line(claim.get('evidence')))}”"
                        + (f" (rule: {_md(claim['rule'])})" if claim.get("rule") else "")
                    )
            lines.append("")
        if not any_worst:
            lines += ["No sample is past a threshold.", ""]
        lines += ["## Diagnoses", "", "| diagnosis | samples | share |", "|---|---:|---:|"]
        total = self.samples or 1  # a share of samples: with several labels a sample counts under each
        for d, n in self._diagnoses_sorted():
            lines.append(f"| {_md(d)} | {n} | {100 * n / total:.0f}% |")
        lines.append("")
        first = self.look_first()
        if first:
            lines += [f"**Look first at `{first}`:** {ADVICE[first]}", ""]
            for d, n in self._diagnoses_sorted():
                if d != first and n and d not in ("healthy", "unknown"):
                    lines.append(f"- `{d}` ({n}): {ADVICE[d]}")
            lines.append("")
        else:
            lines += ["Nothing to look at first: no sample was diagnosed with a problem.", ""]
        return "\n".join(lines)


def _bound(direction: str) -> str:
    return "≤ " if direction == "max" else "≥ "


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _delta(x: float | None) -> str:
    return "–" if x is None else f"{x:+.3f}"


#: Characters that mean something in the middle of a CommonMark/GFM line: links and images start with ``[``,
#: then emphasis, code spans, table cells, strikethrough, raw HTML and entities. List and heading markers only
#: count at a line start, and no report line starts with user text, so ``-``, ``#`` or ``.`` stay readable.
_MD_ESCAPES = {ord(c): "\\" + c for c in "\\`*_[]|~"} | {ord("<"): "&lt;", ord(">"): "&gt;", ord("&"): "&amp;"}


def _md(text: Any) -> str:
    """User text as literal Markdown, so a planted ``<script>``, ``[x](javascript:…)``, ``![](https://tracker)``
    or a ``|`` that would split a table cell renders as the characters it is made of, in any renderer."""
    return str(text or "").translate(_MD_ESCAPES)


def _code(text: Any) -> str:
    """A code span that no backtick inside can close (CommonMark: the fence is one backtick longer than the
    longest run inside); nothing in a code span is markup, so ids show verbatim."""
    s = _one_line(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s[:1] == "`" or s[-1:] == "`" else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _one_line(text: Any, limit: int = 240) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _score(record: Mapping[str, Any], metric: str) -> float | None:
    scores = record.get("scores")
    if not isinstance(scores, dict) and not isinstance(scores, Mapping):  # dict first: the abc check is slow
        return None  # one bad record must not stop a report
    value = scores.get(metric)
    if type(value) is not float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return None
    return float(value) if math.isfinite(value) else None  # NaN (stored as null) means "could not decide"


def _claims(details: Any, depth: int = 0) -> list[dict[str, Any]]:
    """The claims list of the first judge that reported one (the offline judge: details["offline"]["claims"])."""
    if not isinstance(details, Mapping) or depth > 3:
        return []
    claims = details.get("claims")
    if isinstance(claims, list) and all(isinstance(c, Mapping) for c in claims):
        return [dict(c) for c in claims]
    for value in details.values():
        found = _claims(value, depth + 1)
        if found:
            return found
    return []


def _unsupported(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for c in _claims(record.get("details")):
        if c.get("verdict") == "UNSUPPORTED":
            item = {"text": c.get("text"), "chunk_id": c.get("chunk_id"), "evidence": c.get("evidence")}
            if c.get("rule"):
                item["rule"] = c["rule"]
            out.append(item)
    return out


def _past(value: float, threshold: float, direction: str) -> float:
    """How far ``value`` is on the wrong side of ``threshold`` (≤ 0: on the right side)."""
    return value - threshold if direction == "max" else threshold - value


def _status(mean: float | None, threshold: float | None, direction: str = "min") -> str:
    if mean is None:
        return "no data"
    if threshold is None or _past(mean, threshold, direction) <= 1e-12:
        return "ok"
    return "warn" if _past(mean, threshold, direction) <= WARN_BAND + 1e-12 else "fail"


def build_report(
    records: Iterable[Mapping[str, Any]],
    thresholds: Mapping[str, float],
    previous: Mapping[str, Any] | None = None,
    *,
    worst: int = 5,
    metrics: Sequence[str] = METRICS,
    now: float | None = None,
    span: TimeRange | None = None,
    live: Mapping[str, Any] | None = None,
) -> Report:
    """A report over score records (dicts shaped like :class:`~ragwatch.scoring.worker.ScoreRecord`).

    ``previous`` is a former report's :meth:`Report.state` (Δ column). Worst samples are, per metric, the
    ``worst`` scores *past* the threshold — under a floor, lowest first; over a ceiling (``hallucination_rate``),
    highest first; ties by sample id — so a healthy metric lists none. ``span`` keeps the records inside a
    time range (default: all); ``live`` is the now-panel (:func:`ragwatch.report.now.now_panel`) shown first.
    """
    span = span or TimeRange()
    records = select(records, span)
    prev_means = (previous or {}).get("means") or {}
    rows: list[MetricRow] = []
    worst_by: dict[str, list[WorstSample]] = {}
    for metric in metrics:
        values = [(v, r) for r in records if (v := _score(r, metric)) is not None]
        threshold = thresholds.get(metric)
        direction = direction_of(metric)
        mean = statistics.fmean(v for v, _ in values) if values else None
        std = statistics.pstdev([v for v, _ in values]) if values else None
        before = prev_means.get(metric)
        delta = mean - float(before) if mean is not None and isinstance(before, (int, float)) else None
        status = _status(mean, threshold, direction)
        rows.append(MetricRow(metric, len(values), mean, std, delta, threshold, status, direction))
        sign = -1.0 if direction == "max" else 1.0
        under = [(v, r) for v, r in values if threshold is not None and _past(v, threshold, direction) > 0]
        under.sort(key=lambda p: (sign * p[0], str(p[1].get("sample_id", ""))))
        worst_by[metric] = [
            WorstSample(
                sample_id=str(r.get("sample_id", "?")),
                metric=metric,
                score=v,
                question=r.get("question"),
                answer=r.get("answer"),
                diagnosis=next(iter(diagnoses_of(r)), None),
                unsupported=_unsupported(r) if metric in _CLAIM_METRICS else [],
                diagnoses=diagnoses_of(r),
                trace_id=r["trace_id"] if isinstance(r.get("trace_id"), str) else None,
            )
            for v, r in under[:worst]
        ]
    counts = {d: 0 for d in DIAGNOSES if d != "unknown"}
    for r in records:
        for d in dict.fromkeys(d if d in ADVICE else "unknown" for d in diagnoses_of(r)):
            counts[d] = counts.get(d, 0) + 1  # a label this version does not know has no advice: unknown
    services = sorted({str(r["service"]) for r in records if r.get("service")})
    prev_at = (previous or {}).get("generated_at")
    times = [t for r in records if (t := record_time(r)) is not None]
    versions: dict[tuple[str, str], int] = {}
    for r in records:
        judges = r.get("judges")
        for j in judges if isinstance(judges, list) else ():
            if isinstance(j, Mapping) and isinstance(j.get("name"), str):  # one bad entry never stops a report
                key = (_one_line(j["name"], 40), _one_line(j.get("version", "?"), 80))
                versions[key] = versions.get(key, 0) + 1
    return Report(
        generated_at=time.time() if now is None else now,
        samples=len(records),
        services=services,
        rows=rows,
        worst=worst_by,
        diagnoses=counts,
        previous_at=float(prev_at) if isinstance(prev_at, (int, float)) else None,
        judges=[
            {"name": n, "version": v, "samples": c}
            for (n, v), c in sorted(versions.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1]))
        ],
        span=span,
        first_at=min(times) if times else None,
        last_at=max(times) if times else None,
        now=dict(live) if live is not None else None,
    )


class ScoreSource(Protocol):
    """Anything that hands out recent score records: ``RagWatch`` (in-process or Redis scores) and friends."""

    def scores(self, count: int = 1000) -> list[dict[str, Any]]:
        """The newest ``count`` score records (dicts shaped like ScoreRecord), newest first."""
        ...


def report_from(
    source: ScoreSource,
    settings: Any = None,
    *,
    count: int = 1000,
    worst: int = 5,
    since: str | float | None = None,
    until: str | float | None = None,
) -> Report:
    """The report over ``source.scores(count)`` with the thresholds of ``settings`` (no Δ state), for the
    records between ``since`` and ``until`` (epoch seconds, ISO 8601 or a duration ago such as ``"1h"``;
    default: all). A source with a queue and a mode (``RagWatch``) also gets the now-panel."""
    if settings is None:
        from ragwatch.settings import load_settings

        settings = load_settings(None)
    thresholds = default_thresholds(settings)
    records = source.scores(count)
    mode = getattr(source, "mode", None)
    queue = getattr(source, "queue", None)
    policy = settings.sla_policy()
    live = None
    if queue is not None and hasattr(mode, "override"):
        from ragwatch.report.now import window_depth

        names = [policy.metric, *(m for m in METRICS if m in thresholds and m != policy.metric)]
        points = {m: queue.window_clients(m, window_depth(policy)) for m in names}
        live = now_panel(thresholds, policy, mode, points=points, metrics=METRICS)
    span = time_range(since=since, until=until, now=time.time(), default=None)
    return build_report(records, thresholds, worst=worst, span=span, live=live)


# -- inputs and state ------------------------------------------------------------------------------------
def load_records_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Score records, one JSON object a line (blank lines skipped; a bad line names its number)."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
    return out


def load_state(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The previous report's state, or None when there is none (or it is unreadable: then no Δ, no failure)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def save_state(path: str | os.PathLike[str], report: Report) -> None:
    """Write atomically (tmp + rename) so an interrupted run never leaves a half-written state file."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(report.state(), indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, target)
