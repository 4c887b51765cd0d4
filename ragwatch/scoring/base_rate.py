"""The judges' two base-rate numbers, fitted to a team's own labelled traffic.

Why only these two: the offline judge's claim model gives odds that are a likelihood ratio (it was fitted
with both classes weighing the same), and the chunk-relevance model ranks and then calibrates. What does
not transfer from the dev files to a service is the base rate: how often its answers invent something, how
many of its retrieved chunks are relevant. The shipped claim threshold and relevance intercepts carry the
dev files' base rates (RAGTruth's 25 % hallucinated answers; WikiQA's 5 % relevant sentences, RGB's 34 %
relevant passages), so on a service whose rates differ the faithfulness panel flags too much or too little
and CP@3 reads high or low against its SLA. Both are set from a file of the service's own answers or
retrieved lists, labelled by hand, through ``ragwatch eval-judge --thresholds`` and ``--calibration``; the
settings ``offline_threshold`` and ``relevance_offset`` apply them. Nothing else is refitted: a few hundred
labels fix a base rate, not a model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ragwatch.scoring.judge_metrics import expected_calibration_error, precision_recall_f1

__all__ = ["THRESHOLD_GRID", "relevance_offset", "threshold_table"]

#: Claim thresholds tried by :func:`threshold_table`: 0.05 to 0.95 in steps of 0.01.
THRESHOLD_GRID = tuple(round(0.05 + 0.01 * i, 2) for i in range(91))


def _flagged(claims: Sequence[tuple[float, bool]], threshold: float) -> bool:
    """An answer is flagged when a verifiable claim is vetoed by a hard rule or under the threshold."""
    return any(vetoed or p < threshold for p, vetoed in claims)


def threshold_table(
    labels: Sequence[bool],
    claims: Sequence[Sequence[tuple[float, bool]]],
    current: float,
    min_precision: float | None = None,
) -> dict[str, Any]:
    """Response-level precision, recall and F1 of "contains a hallucination" at each claim threshold.

    ``claims[i]`` holds answer i's verifiable claims as (P(supported), vetoed by a hard rule). The best
    threshold maximises F1; among equal F1s the one nearest ``current`` (the judge's threshold) wins, so a
    flat optimum never moves the setting for nothing.

    ``min_precision`` adds ``"for_precision"``: the threshold that catches the most hallucinated answers
    while at least that share of the flagged ones are hallucinated — the rule for a team that pages on the
    faithfulness panel and can afford only so many false pages, where F1 weighs a false page and a missed
    hallucination the same. Among equal recalls the higher precision wins, then the threshold nearest
    ``current``. Its ``row`` is ``None`` when no threshold reaches the precision on this file.
    """
    if len(labels) != len(claims):
        raise ValueError("labels and claims differ in length")
    if min_precision is not None and not 0.0 < min_precision < 1.0:
        raise ValueError("min_precision must be between 0 and 1")
    rows = []
    exact: list[tuple[float, float]] = []  # unrounded (precision, recall) of each row: the rounded ones could
    # put a row at exactly the asked precision that is under it
    for t in THRESHOLD_GRID:
        predictions = [_flagged(c, t) for c in claims]
        precision, recall, f1 = precision_recall_f1(labels, predictions)
        exact.append((precision, recall))
        rows.append(
            {
                "threshold": t,
                "precision": round(precision, 4),
                "recall": round(recall, 4),
                "f1": round(f1, 4),
                "flagged_share": round(sum(predictions) / len(predictions), 4) if predictions else 0.0,
            }
        )
    best = max(rows, key=lambda r: (r["f1"], -abs(r["threshold"] - current)))
    predictions = [_flagged(c, current) for c in claims]
    at_current = dict(zip(("precision", "recall", "f1"), precision_recall_f1(labels, predictions), strict=True))
    table: dict[str, Any] = {
        "current": {"threshold": current, **{k: round(v, 4) for k, v in at_current.items()}},
        "best": best,
        "hallucinated_share": round(sum(1 for y in labels if y) / len(labels), 4) if labels else 0.0,
        "rows": rows,
    }
    if min_precision is not None:
        reaching = [(e, r) for e, r in zip(exact, rows, strict=True) if e[0] >= min_precision and e[1] > 0]
        pick = max(reaching, key=lambda er: (er[0][1], er[0][0], -abs(er[1]["threshold"] - current)), default=None)
        table["for_precision"] = {"min_precision": min_precision, "row": None if pick is None else pick[1]}
    return table


def _logit(p: float) -> float:
    p = min(1.0 - 1e-6, max(1e-6, float(p)))
    return math.log(p / (1.0 - p))


def _shifted(logits: Sequence[float], delta: float) -> list[float]:
    return [1.0 / (1.0 + math.exp(-(z + delta))) for z in logits]


def relevance_offset(labels: Sequence[bool], scores: Sequence[float], current: float = 0.0) -> dict[str, Any]:
    """The logit shift of every relevance score that fits the labels best (maximum likelihood).

    At that shift the mean score equals the share of relevant chunks (the score equation of a logistic
    intercept), which is what CP@K read against an SLA needs. ``scores`` were produced with the offset
    ``current`` already applied; ``suggested`` is the total to set. ``None`` with one class only: a file of
    all-relevant (or no relevant) chunks says nothing about a base rate.
    """
    if len(labels) != len(scores):
        raise ValueError("labels and scores differ in length")
    positives = sum(1 for y in labels if y)
    if positives == 0 or positives == len(labels):
        return {"current": current, "suggested": None, "reason": "the file needs relevant and irrelevant chunks"}
    logits = [_logit(p) for p in scores]
    delta = 0.0
    for _ in range(100):  # Newton's method on a concave one-dimensional likelihood: a handful of steps
        ps = _shifted(logits, delta)
        grad = positives - sum(ps)
        hess = sum(p * (1.0 - p) for p in ps)
        if hess <= 0:
            break
        step = max(-2.0, min(2.0, grad / hess))
        delta += step
        if abs(step) < 1e-9:
            break
    delta = max(-10.0 - current, min(10.0 - current, delta))  # the setting's range
    after = _shifted(logits, delta)
    return {
        "current": current,
        "suggested": round(current + delta, 3) + 0.0,  # + 0.0: never "-0"
        "positive_rate": round(positives / len(labels), 4),
        "mean_score_before": round(sum(scores) / len(scores), 4),
        "mean_score_after": round(sum(after) / len(after), 4),
        "ece_before": round(expected_calibration_error(labels, scores) or 0.0, 4),
        "ece_after": round(expected_calibration_error(labels, after) or 0.0, 4),
    }
