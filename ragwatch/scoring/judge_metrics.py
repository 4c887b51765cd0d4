"""How well a judge's scores match labels: ROC-AUC, precision/recall/F1, calibration (ECE, reliability), and
bootstrap intervals around them.

Pure functions (numpy inside where a bootstrap repeats them), apart from ``ragwatch eval-judge``
(:mod:`ragwatch.scoring.evaluate`) so the fitting of a team's own base-rate parameters
(:mod:`ragwatch.scoring.base_rate`) and the training scripts use the same definitions. Each is tested on
hand-computed cases.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["bootstrap_interval", "expected_calibration_error", "precision_recall_f1", "reliability_table", "roc_auc"]


def roc_auc(labels: Sequence[bool] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float | None:
    """ROC-AUC via the Mann–Whitney U statistic with average ranks for ties; ``None`` if a class is absent.

    Ties matter here: ``1 − faithfulness`` takes few distinct values, and a tie must count one half. In
    numpy because :func:`bootstrap_interval` recomputes it a thousand times over 20,000 chunks; the ranks
    are half-integers, so their sum is exact and the result does not depend on the order of summation.
    """
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape:
        raise ValueError("labels and scores differ in length")
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)  # 1-based rank of the last member of each group of equal scores
    ranks = (ends - (counts - 1) / 2.0)[inverse]
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def bootstrap_interval(
    n: int,
    statistic: Callable[[np.ndarray], float | None],
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> list[float] | None:
    """Percentile bootstrap interval of ``statistic`` over ``n`` units (answers, or questions for ranking).

    ``statistic`` takes the drawn unit indices (with repetition). Why it is reported: a dev file of 446
    answers or 38 questions moves an F1 or a MAP by several hundredths between samples of the same traffic,
    so a gap to a target, or between two judges on a team's own 200 labels, is read against it. Seeded, so
    the same file and judge give the same interval; draws where the statistic is undefined (one class only)
    are left out, and ``None`` when every draw is.
    """
    if n <= 0:
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        v = statistic(rng.integers(0, n, size=n))
        if v is not None:
            values.append(v)
    if not values:
        return None
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(np.asarray(values), [tail, 1.0 - tail])
    return [round(float(lo), 4), round(float(hi), 4)]


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
