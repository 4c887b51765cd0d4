"""The worst samples, grouped by question: the cards of the page.

Twenty cards of which three ask the same question bury the fourth problem; one card per question, with how
many of the range's samples asked it and failed, shows more in less room. A sample is "past" when any shown
metric is on the wrong side of its line; its card is the group's worst (the largest distance past a line),
with every claim marked, the chunks and the trace it belongs to.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ragwatch.mode.degrade import direction_of
from ragwatch.report.build import _claims, _past, _score
from ragwatch.report.select import diagnoses_of, record_time

__all__ = ["MAX_GROUPS", "trace_link", "worst_groups"]

#: Groups sent to the page at most (it pages through them).
MAX_GROUPS = 100
#: Other samples listed under a group's card at most.
MAX_OTHERS = 10


def trace_link(template: str | None, trace_id: Any) -> str | None:
    """``template`` with ``{trace_id}`` replaced by the id, percent-encoded (so no id can add a parameter,
    a fragment or a path), or None without a template, an id, or an http(s) template."""
    if not template or not isinstance(trace_id, str) or not trace_id:
        return None
    if not template.lower().startswith(("http://", "https://")):
        return None
    return template.replace("{trace_id}", quote(trace_id, safe=""))


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


def _card(
    r: Mapping[str, Any], metric: str, score: float, metrics: Sequence[str], trace_url: str | None
) -> dict[str, Any]:
    trace_id = r.get("trace_id") if isinstance(r.get("trace_id"), str) else None
    return {
        "metric": metric,
        "score": score,
        "sample_id": str(r.get("sample_id", "?")),
        "trace_id": trace_id,
        "trace_link": trace_link(trace_url, trace_id),
        "question": None if r.get("question") is None else str(r["question"]),
        "answer": None if r.get("answer") is None else str(r["answer"]),
        "diagnoses": diagnoses_of(r),
        "route": None if r.get("route") is None else str(r["route"]),
        "model": None if r.get("model") is None else str(r["model"]),
        "created_at": record_time(r),
        "scores": {m: _score(r, m) for m in metrics},
        "claims": [_claim_view(c) for c in _claims(r.get("details"))],
        "chunks": _chunks_view(r),
    }


def worst_groups(
    records: Sequence[Mapping[str, Any]],
    thresholds: Mapping[str, float],
    metrics: Sequence[str],
    *,
    trace_url: str | None = None,
    limit: int = MAX_GROUPS,
) -> list[dict[str, Any]]:
    """Samples past a line, grouped by question (whitespace and case folded; no question: by sample),
    the groups with most failing samples first, then the furthest past; each with its worst sample's card."""
    groups: dict[str, list[tuple[float, str, float, Mapping[str, Any], dict[str, float]]]] = {}
    for r in records:
        failing = {}
        for m in metrics:
            v, line = _score(r, m), thresholds.get(m)
            if v is not None and line is not None and _past(v, line, direction_of(m)) > 0:
                failing[m] = v
        if not failing:
            continue
        metric = max(failing, key=lambda m: (_past(failing[m], thresholds[m], direction_of(m)), -metrics.index(m)))
        severity = _past(failing[metric], thresholds[metric], direction_of(metric))
        q = r.get("question")
        key = " ".join(q.split()).casefold() if isinstance(q, str) and q.strip() else f"\0{r.get('sample_id')}"
        groups.setdefault(key, []).append((severity, metric, failing[metric], r, failing))
    out: list[dict[str, Any]] = []
    for members in groups.values():
        members.sort(key=lambda m: (-m[0], str(m[3].get("sample_id", ""))))
        severity, metric, score, r, _ = members[0]
        counts: dict[str, int] = {}
        for *_, failing in members:
            for m in failing:
                counts[m] = counts.get(m, 0) + 1
        out.append(
            {
                "count": len(members),
                "severity": severity,
                "metrics": {m: counts[m] for m in metrics if m in counts},
                "sample": _card(r, metric, score, metrics, trace_url),
                "others": [
                    {
                        "sample_id": str(o.get("sample_id", "?")),
                        "metric": m,
                        "score": v,
                        "created_at": record_time(o),
                        "trace_id": o.get("trace_id") if isinstance(o.get("trace_id"), str) else None,
                    }
                    for _, m, v, o, _ in members[1 : 1 + MAX_OTHERS]
                ],
            }
        )
    out.sort(key=lambda g: (-g["count"], -g["severity"], g["sample"]["sample_id"]))
    return out[:limit]
