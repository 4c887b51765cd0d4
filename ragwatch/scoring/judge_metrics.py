"""How well a judge's scores match labels: ROC-AUC, precision/recall/F1, calibration (ECE, reliability).

Pure functions on plain lists, apart from ``ragwatch eval-judge`` (:mod:`ragwatch.scoring.evaluate`) so the
fitting of a team's own base-rate parameters (:mod:`ragwatch.scoring.base_rate`) and the training scripts
use the same definitions. Each is tested on hand-computed cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["expected_calibration_error", "precision_recall_f1", "reliability_table", "roc_auc"]


def roc_auc(labels: Sequence[bool], scores: Sequence[float]) -> float | None:
    """ROC-AUC via the Mann–Whitney U statistic with average ranks for ties; ``None`` if a class is absent.

    Ties matter here: ``1 − faithfulness`` takes few distinct values, and a tie must count one half.
    """
    n = len(labels)
    if n != len(scores):
        raise ValueError("labels and scores differ in length")
    n_pos = sum(1 for y in labels if y)
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = sorted(range(n), key=lambda i: scores[i])
    ranks = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        avg = (i + j) / 2 + 1  # ranks are 1-based
        for t in range(i, j + 1):
            ranks[order[t]] = avg
        i = j + 1
    rank_sum = sum(r for r, y in zip(ranks, labels, strict=True) if y)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def _bin_sums(labels: Sequence[bool], scores: Sequence[float], bins: int) -> list[tuple[int, float, int]]:
    """(count, sum of scores, positives) per equal-width score bin; the last bin is closed at 1.0."""
    if len(labels) != len(scores):
        raise ValueError("labels and scores differ in length")
    sums = [[0, 0.0, 0] for _ in range(bins)]
    for y, p in zip(labels, scores, strict=True):
        b = min(bins - 1, max(0, int(float(p) * bins)))
        sums[b][0] += 1
        sums[b][1] += float(p)
        sums[b][2] += 1 if y else 0
    return [(int(n), float(total), int(pos)) for n, total, pos in sums]


def reliability_table(labels: Sequence[bool], scores: Sequence[float], bins: int = 10) -> list[dict[str, Any]]:
    """Per equal-width score bin: its range, count, mean score and share of positives. Empty bins are
    listed (n 0) so the tables of different runs line up."""
    return [
        {
            "low": round(b / bins, 4),
            "high": round((b + 1) / bins, 4),
            "n": n,
            "mean_score": round(total / n, 4) if n else None,
            "positive_rate": round(pos / n, 4) if n else None,
        }
        for b, (n, total, pos) in enumerate(_bin_sums(labels, scores, bins))
    ]


def expected_calibration_error(labels: Sequence[bool], scores: Sequence[float], bins: int = 10) -> float | None:
    """ECE: the count-weighted mean, over equal-width score bins, of |mean score − share of positives|.

    Why it matters here: Context Precision@K is a mean of these scores compared with an SLA (0.65), so a
    score of 0.7 must mean "relevant about 70 % of the time", not merely rank above 0.6. ``None`` when empty.
    """
    if not labels:
        return None
    return sum(abs(total - pos) for n, total, pos in _bin_sums(labels, scores, bins) if n) / len(labels)


def precision_recall_f1(labels: Sequence[bool], predictions: Sequence[bool]) -> tuple[float, float, float]:
    """Precision, recall and F1 of the positive class; 0.0 where a ratio has an empty denominator."""
    tp = sum(1 for y, p in zip(labels, predictions, strict=True) if y and p)
    fp = sum(1 for y, p in zip(labels, predictions, strict=True) if not y and p)
    fn = sum(1 for y, p in zip(labels, predictions, strict=True) if y and not p)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1
