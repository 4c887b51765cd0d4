"""Moved to :mod:`ragwatch.scoring.retrieval_metrics`.

Kept so that the documented ``ragwatch.retrieval_metrics`` imports keep working.
"""

from ragwatch.scoring.retrieval_metrics import (
    average_precision,
    average_precision_from_labels,
    context_precision_mean,
    context_precision_ranked,
    hit_rate,
    mean_average_precision,
    mean_reciprocal_rank,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
)

__all__ = [
    "average_precision",
    "average_precision_from_labels",
    "context_precision_mean",
    "context_precision_ranked",
    "hit_rate",
    "mean_average_precision",
    "mean_reciprocal_rank",
    "precision_at_k",
    "recall_at_k",
    "reciprocal_rank",
]
