"""Retrieval quality metrics as pure functions, with the formulas spelled out.

Two families live here because ragwatch meets retrieval in two situations:

* **Reference-based** — a golden set says which chunk ids are relevant to a question (the replay prober,
  offline evaluation). Precision@K, Recall@K, hit rate, (mean) reciprocal rank and (mean) average precision
  compare the retrieved ids with that set.
* **Reference-free** — in production nobody knows the right answer, so a judge grades each retrieved chunk
  0..1 for relevance to the question. Context Precision@K is computed from those graded relevances, in rank
  order, in the SLA form (a plain mean) and the rank-aware Ragas form.

Metric definitions differ subtly between libraries (what to divide by when fewer than K items came back,
how to count duplicates, how to normalise average precision), and a dashboard is only comparable with an
evaluation report when both use the same one. Each function therefore states its convention, and the
tests pin worked examples computed by hand.

Conventions shared by the reference-based functions:

* ``retrieved`` is in rank order (best first). A repeated id keeps its first position only: later copies
  still take up a slot (the retriever spent a slot on them) but never count as relevant again, so a
  retriever cannot raise its score by returning the same good chunk twice.
* A question whose ``relevant`` set is empty scores 0 on every metric — the convention of
  :func:`average_precision_from_labels` — rather than being undefined, so such a golden entry stays visible
  in a mean instead of silently vanishing.
* ``k=None`` (where allowed) means the whole list. Otherwise ``k`` must be a positive integer; anything else
  is a :class:`~ragwatch.errors.ConfigError`, because K always comes from configuration (an SLA, a prober
  setting), never from request data.
* The ``mean_*`` functions and :func:`hit_rate` take parallel lists (one entry per query); unequal lengths are
  a ``ValueError``, and zero queries give 0.0.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Sequence
from numbers import Integral, Real

from ragwatch.errors import ConfigError

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


# --------------------------------------------------------------------------------------------------- checks


def _check_k(k: int) -> int:
    """K is configuration, so a bad one is a ConfigError; bools are refused because ``True`` would pass as 1."""
    if not isinstance(k, bool):
        try:
            value = operator.index(k)  # ints and integer-like types (numpy), never floats
        except TypeError:
            pass
        else:
            if value >= 1:
                return value
    raise ConfigError(f"k must be a positive integer, got {k!r}")


def _check_optional_k(k: int | None) -> int | None:
    return None if k is None else _check_k(k)


def _check_ids(value: object, name: str) -> None:
    """A bare string is a Sequence of characters: accepting it would score letters instead of chunk ids."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a collection of ids, not a single {type(value).__name__}")


def _check_relevances(relevances: Sequence[float]) -> list[float]:
    """A judge that returns NaN or 1.3 is broken; averaging its output would hide that, so refuse it early.

    Every position is checked, not only the top K, because a bad value anywhere means the judge's output
    cannot be trusted at all.
    """
    _check_ids(relevances, "relevances")
    values: list[float] = []
    for i, r in enumerate(relevances):
        if not isinstance(r, Real):
            raise TypeError(f"relevance at position {i} (rank {i + 1}) is {r!r}; expected a number in [0, 1]")
        x = float(r)
        if math.isnan(x) or not 0.0 <= x <= 1.0:
            raise ValueError(f"relevance at position {i} (rank {i + 1}) is {r!r}; expected a number in [0, 1]")
        values.append(x)
    return values


def _check_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, Real) or not 0.0 <= float(threshold) <= 1.0:
        raise ConfigError(f"threshold must be a number in [0, 1], got {threshold!r}")
    return float(threshold)


def _mean_over_queries(
    metric: Callable[[Sequence[str], Collection[str]], float],
    retrieved_lists: Sequence[Sequence[str]],
    relevant_lists: Sequence[Collection[str]],
) -> float:
    """Unequal lengths almost always mean a golden set and a run file got out of step, so refuse to pair them."""
    if len(retrieved_lists) != len(relevant_lists):
        raise ValueError(
            f"retrieved_lists has {len(retrieved_lists)} queries but relevant_lists has {len(relevant_lists)}"
        )
    if not retrieved_lists:
        return 0.0
    total = sum(metric(ret, rel) for ret, rel in zip(retrieved_lists, relevant_lists, strict=True))
    return total / len(retrieved_lists)


def _hits(retrieved: Sequence[str], relevant: Collection[str], k: int | None) -> list[bool]:
    """Relevance labels of the top-k slots, a repeated id counting as not relevant after its first slot."""
    _check_ids(retrieved, "retrieved")
    _check_ids(relevant, "relevant")
    wanted = set(relevant)
    seen: set[str] = set()
    labels = []
    for doc_id in retrieved if k is None else retrieved[:k]:
        labels.append(doc_id in wanted and doc_id not in seen)
        seen.add(doc_id)
    return labels


# ------------------------------------------------------------------------------------------ reference-based


def precision_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Precision@K = |relevant ∩ top-K retrieved| / K.

    The divisor is K even when fewer than K ids were retrieved (the standard definition): a retriever asked
    for 5 that returns 1 good chunk has not achieved precision 1, it has left 4 slots empty.
    """
    k = _check_k(k)
    return sum(_hits(retrieved, relevant, k)) / k


def recall_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Recall@K = |relevant ∩ top-K retrieved| / |relevant|; 0.0 when ``relevant`` is empty (see module notes)."""
    k = _check_k(k)
    hits = sum(_hits(retrieved, relevant, k))
    n_relevant = len(set(relevant))
    return hits / n_relevant if n_relevant else 0.0


def hit_rate(
    retrieved_lists: Sequence[Sequence[str]],
    relevant_lists: Sequence[Collection[str]],
    k: int | None = None,
) -> float:
    """Share of queries with at least one relevant id in the top K (the whole list when ``k`` is None).

    It is the coarsest retrieval signal — "did the answer have a chance at all" — and the one that moves
    first when an index goes stale.
    """
    k = _check_optional_k(k)
    return _mean_over_queries(lambda ret, rel: float(any(_hits(ret, rel, k))), retrieved_lists, relevant_lists)


def reciprocal_rank(retrieved: Sequence[str], relevant: Collection[str], k: int | None = None) -> float:
    """1 / rank of the first relevant id (ranks start at 1), 0.0 when none is in the top K.

    Only the first hit matters, which is what a user reading the top result (or an LLM that leans on the
    first chunk) experiences.
    """
    k = _check_optional_k(k)
    for rank, hit in enumerate(_hits(retrieved, relevant, k), start=1):
        if hit:
            return 1.0 / rank
    return 0.0


def mean_reciprocal_rank(
    retrieved_lists: Sequence[Sequence[str]],
    relevant_lists: Sequence[Collection[str]],
    k: int | None = None,
) -> float:
    """MRR = mean of :func:`reciprocal_rank` over queries (a query with no hit contributes 0)."""
    k = _check_optional_k(k)
    return _mean_over_queries(lambda ret, rel: reciprocal_rank(ret, rel, k), retrieved_lists, relevant_lists)


def average_precision(retrieved: Sequence[str], relevant: Collection[str], k: int | None = None) -> float:
    """AP@K = Σ_{i ≤ K, slot i relevant} precision@i  /  min(|relevant|, K).

    Normalisation: by ``min(|relevant|, K)`` (``|relevant|`` when ``k`` is None), not by the number of
    relevant ids *found*. Dividing by the hits found would give a retriever that finds one of ten relevant
    chunks, at rank 1, a perfect 1.0; dividing by all of ``|relevant|`` would make 1.0 unreachable whenever
    more ids are relevant than K slots exist. The ``min`` keeps 1.0 reachable and means "every slot that
    could hold a relevant id holds one, ranked first". 0.0 when ``relevant`` is empty.
    """
    k = _check_optional_k(k)
    labels = _hits(retrieved, relevant, k)
    n_relevant = len(set(relevant))
    denominator = n_relevant if k is None else min(n_relevant, k)
    if denominator == 0:
        return 0.0
    return _precision_sum(labels) / denominator


def mean_average_precision(
    retrieved_lists: Sequence[Sequence[str]],
    relevant_lists: Sequence[Collection[str]],
    k: int | None = None,
) -> float:
    """MAP = mean of :func:`average_precision` over queries, with its normalisation."""
    k = _check_optional_k(k)
    return _mean_over_queries(lambda ret, rel: average_precision(ret, rel, k), retrieved_lists, relevant_lists)


def _precision_sum(labels: Sequence[bool]) -> float:
    """Σ precision@i over the relevant positions i; shared so the two AP forms cannot drift apart."""
    total = 0.0
    found = 0
    for i, hit in enumerate(labels, start=1):
        if hit:
            found += 1
            total += found / i
    return total


def average_precision_from_labels(labels_in_rank_order: Sequence[bool]) -> float:
    """AP from relevance labels in rank order = Σ_{i relevant} precision@i / (number of relevant labels).

    This is the form for judging a judge: candidates for one question are ranked by the judge's score and
    labelled by humans, so the full candidate list is known and "relevant" means "labelled relevant in this
    list". 0.0 when no label is relevant. Labels must be bools (or 0/1): a graded relevance passed here by
    mistake would otherwise count as relevant whenever it is non-zero.
    """
    _check_ids(labels_in_rank_order, "labels_in_rank_order")
    labels = []
    for i, label in enumerate(labels_in_rank_order):
        if label not in (True, False) or (isinstance(label, Real) and not isinstance(label, Integral)):
            raise ValueError(f"label at position {i} is {label!r}; expected True/False (or 1/0)")
        labels.append(bool(label))
    n_relevant = sum(labels)
    return _precision_sum(labels) / n_relevant if n_relevant else 0.0


# --------------------------------------------------------------------------------------------- reference-free


def context_precision_mean(relevances: Sequence[float], k: int) -> float:
    """Context Precision@K, SLA form = (r₁ + … + r_K) / K over graded relevances in rank order.

    When fewer than K chunks were retrieved the missing ones count as 0 (the divisor stays K): a retriever
    that returns one chunk when the prompt has room for three has not delivered perfect context, and the
    SLA should not reward returning less. Empty → 0.0.
    """
    k = _check_k(k)
    values = _check_relevances(relevances)
    return sum(values[:k]) / k


def context_precision_ranked(relevances: Sequence[float], k: int, threshold: float = 0.5) -> float:
    """Context Precision@K, rank-aware (Ragas) form = Σ_{i ≤ K} precision@i · v_i / Σ_{i ≤ K} v_i.

    ``v_i = 1`` when ``r_i ≥ threshold``. Unlike the mean form it rewards putting the relevant chunks
    first, which is what matters when the LLM attends mostly to the top of its context. 0.0 when no chunk in
    the top K is relevant.
    """
    k = _check_k(k)
    threshold = _check_threshold(threshold)
    values = _check_relevances(relevances)
    return average_precision_from_labels([r >= threshold for r in values[:k]])
