"""Retrieval metrics: the worked examples, computed by hand, and the conventions the module documents."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from ragwatch.errors import ConfigError
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

# ------------------------------------------------------------------------------------ reference-based examples

RETRIEVED = ["A", "B", "C", "D"]
RELEVANT = {"B", "C", "E"}

QUERIES = [["A", "B", "C"], ["D", "E", "F"], ["H", "I", "J"]]
GOLDEN = [["B", "X"], ["G"], ["I", "Y"]]


def test_precision_and_recall_worked_example() -> None:
    # top 4 = A B C D; relevant among them: B, C → 2 hits
    # precision@4 = 2 / 4 = 0.50 ; recall@4 = 2 / |{B, C, E}| = 2 / 3
    assert precision_at_k(RETRIEVED, RELEVANT, 4) == 0.5
    assert recall_at_k(RETRIEVED, RELEVANT, 4) == pytest.approx(2 / 3)
    assert round(recall_at_k(RETRIEVED, RELEVANT, 4), 4) == 0.6667


def test_hit_rate_and_mrr_worked_example() -> None:
    # query 1: B at rank 2 → hit, RR 1/2 ; query 2: G never retrieved → miss, RR 0 ; query 3: I at rank 2 → hit, RR 1/2
    # hit rate = 2 / 3 ; MRR = (1/2 + 0 + 1/2) / 3 = 1/3
    assert hit_rate(QUERIES, GOLDEN) == pytest.approx(2 / 3)
    assert round(hit_rate(QUERIES, GOLDEN), 4) == 0.6667
    assert mean_reciprocal_rank(QUERIES, GOLDEN) == pytest.approx(1 / 3)
    assert round(mean_reciprocal_rank(QUERIES, GOLDEN), 4) == 0.3333


def test_k_cuts_the_list() -> None:
    # top 1 = A: not relevant
    assert precision_at_k(RETRIEVED, RELEVANT, 1) == 0.0
    # top 2 = A B: one hit → 1/2 precision, 1/3 recall
    assert precision_at_k(RETRIEVED, RELEVANT, 2) == 0.5
    assert recall_at_k(RETRIEVED, RELEVANT, 2) == pytest.approx(1 / 3)
    # with k=1 no query hits (A, D, H are all irrelevant)
    assert hit_rate(QUERIES, GOLDEN, k=1) == 0.0
    assert mean_reciprocal_rank(QUERIES, GOLDEN, k=1) == 0.0
    # B is at rank 2, so RR is 1/2 with k ≥ 2 and 0 with k = 1
    assert reciprocal_rank(RETRIEVED, RELEVANT, k=2) == 0.5
    assert reciprocal_rank(RETRIEVED, RELEVANT, k=1) == 0.0


def test_precision_divides_by_k_when_fewer_were_retrieved() -> None:
    # one relevant chunk retrieved for top-5: 1 / 5, not 1 / 1
    assert precision_at_k(["B"], RELEVANT, 5) == pytest.approx(0.2)
    assert precision_at_k([], RELEVANT, 3) == 0.0


def test_duplicates_count_once_but_take_a_slot() -> None:
    # B B C: first B is a hit, the second B is not, C is a hit → 2 / 3
    assert precision_at_k(["B", "B", "C"], RELEVANT, 3) == pytest.approx(2 / 3)
    # recall can never exceed 1 through repeats: B B B → 1 / 3
    assert recall_at_k(["B", "B", "B"], RELEVANT, 3) == pytest.approx(1 / 3)
    # AP of B B C against {B, C, E}: hits at ranks 1 and 3 → (1/1 + 2/3) / min(3, 3)
    assert average_precision(["B", "B", "C"], RELEVANT, k=3) == pytest.approx((1 + 2 / 3) / 3)


def test_empty_relevant_set_scores_zero() -> None:
    assert precision_at_k(RETRIEVED, set(), 2) == 0.0
    assert recall_at_k(RETRIEVED, set(), 2) == 0.0
    assert reciprocal_rank(RETRIEVED, set()) == 0.0
    assert average_precision(RETRIEVED, set()) == 0.0


def test_average_precision_normalisation() -> None:
    # A B C D vs {B, C, E}: hits at ranks 2 and 3 → precision@2 = 1/2, precision@3 = 2/3
    # no k: divide by |relevant| = 3 → (1/2 + 2/3) / 3 = 7/18
    assert average_precision(RETRIEVED, RELEVANT) == pytest.approx(7 / 18)
    # k = 2: only rank 2 counts → (1/2) / min(3, 2) = 1/4
    assert average_precision(RETRIEVED, RELEVANT, k=2) == pytest.approx(0.25)
    # more relevant ids than slots: a perfect top-2 still reaches 1.0 → (1/1 + 2/2) / min(3, 2)
    assert average_precision(["B", "C", "A"], RELEVANT, k=2) == pytest.approx(1.0)
    # finding one of three relevant ids at rank 1 is not perfect: 1 / 3
    assert average_precision(["B", "A"], RELEVANT) == pytest.approx(1 / 3)


def test_mean_average_precision() -> None:
    # query 1: A B C vs {B, X}: hit at rank 2 → (1/2) / 2 = 1/4
    # query 2: no hit → 0
    # query 3: H I J vs {I, Y}: hit at rank 2 → (1/2) / 2 = 1/4
    # MAP = (1/4 + 0 + 1/4) / 3 = 1/6
    assert mean_average_precision(QUERIES, GOLDEN) == pytest.approx(1 / 6)


def test_average_precision_from_labels() -> None:
    # T F T: precision@1 = 1, precision@3 = 2/3 → (1 + 2/3) / 2 = 5/6
    assert average_precision_from_labels([True, False, True]) == pytest.approx(5 / 6)
    # F T T: precision@2 = 1/2, precision@3 = 2/3 → (1/2 + 2/3) / 2 = 7/12
    assert average_precision_from_labels([False, True, True]) == pytest.approx(7 / 12)
    assert average_precision_from_labels([True, True]) == 1.0
    assert average_precision_from_labels([False, False]) == 0.0
    assert average_precision_from_labels([]) == 0.0
    assert average_precision_from_labels([1, 0, 1]) == pytest.approx(5 / 6)


@pytest.mark.parametrize("bad", [0.7, 2, "yes", None])
def test_labels_must_be_booleans(bad: Any) -> None:
    with pytest.raises(ValueError, match="position 1"):
        average_precision_from_labels([True, bad])


def test_zero_queries_give_zero() -> None:
    assert hit_rate([], []) == 0.0
    assert mean_reciprocal_rank([], []) == 0.0
    assert mean_average_precision([], []) == 0.0


@pytest.mark.parametrize("fn", [hit_rate, mean_reciprocal_rank, mean_average_precision])
def test_unequal_query_lists_are_refused(fn: Callable[..., float]) -> None:
    with pytest.raises(ValueError, match=r"3 queries .* 2"):
        fn(QUERIES, GOLDEN[:2])


def test_a_bare_string_is_not_a_list_of_ids() -> None:
    with pytest.raises(TypeError, match="retrieved"):
        precision_at_k("ABC", {"A"}, 3)
    with pytest.raises(TypeError, match="relevant"):
        recall_at_k(["A"], "A", 1)


# ------------------------------------------------------------------------------------- reference-free examples


def test_context_precision_worked_examples() -> None:
    # [1, 0, 1]: mean = (1 + 0 + 1) / 3 = 2/3 ; ranked = (1/1·1 + 2/3·1) / 2 = 5/6
    assert context_precision_mean([1, 0, 1], 3) == pytest.approx(2 / 3)
    assert round(context_precision_mean([1, 0, 1], 3), 4) == 0.6667
    assert context_precision_ranked([1, 0, 1], 3) == pytest.approx(5 / 6)
    assert round(context_precision_ranked([1, 0, 1], 3), 4) == 0.8333
    # [0, 1, 1]: mean = 2/3 ; ranked = (1/2 + 2/3) / 2 = 7/12 — same mean, worse order
    assert context_precision_mean([0, 1, 1], 3) == pytest.approx(2 / 3)
    assert context_precision_ranked([0, 1, 1], 3) == pytest.approx(7 / 12)
    assert round(context_precision_ranked([0, 1, 1], 3), 4) == 0.5833
    # [0.9, 0.2, 0.6], threshold 0.5: mean = 1.7 / 3 ; relevant at ranks 1 and 3 → ranked = (1 + 2/3) / 2
    assert context_precision_mean([0.9, 0.2, 0.6], 3) == pytest.approx(1.7 / 3)
    assert round(context_precision_mean([0.9, 0.2, 0.6], 3), 4) == 0.5667
    assert context_precision_ranked([0.9, 0.2, 0.6], 3, threshold=0.5) == pytest.approx(5 / 6)
    assert round(context_precision_ranked([0.9, 0.2, 0.6], 3, threshold=0.5), 4) == 0.8333


def test_context_precision_only_reads_the_top_k() -> None:
    # [1, 0, 1, 1, 1] at K=2: mean = (1 + 0) / 2 ; ranked = (1/1) / 1
    assert context_precision_mean([1, 0, 1, 1, 1], 2) == 0.5
    assert context_precision_ranked([1, 0, 1, 1, 1], 2) == 1.0


def test_missing_chunks_count_as_zero_in_the_mean() -> None:
    # one perfect chunk for top-3: (1 + 0 + 0) / 3, not 1.0
    assert context_precision_mean([1.0], 3) == pytest.approx(1 / 3)
    assert context_precision_mean([], 3) == 0.0
    # the ranked form only looks at relevant positions, so one relevant chunk at rank 1 is 1.0
    assert context_precision_ranked([1.0], 3) == 1.0
    assert context_precision_ranked([], 3) == 0.0


def test_ranked_threshold_is_inclusive_and_none_relevant_is_zero() -> None:
    # 0.5 ≥ 0.5 counts as relevant: [0.5, 0.4] → (1/1) / 1
    assert context_precision_ranked([0.5, 0.4], 2) == 1.0
    assert context_precision_ranked([0.4, 0.3, 0.2], 3) == 0.0
    # a stricter threshold: [0.9, 0.7, 0.8] with 0.75 → relevant at 1 and 3 → (1 + 2/3) / 2
    assert context_precision_ranked([0.9, 0.7, 0.8], 3, threshold=0.75) == pytest.approx(5 / 6)


@pytest.mark.parametrize("fn", [context_precision_mean, context_precision_ranked])
@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, math.inf])
def test_out_of_range_relevance_names_its_position(fn: Callable[..., float], bad: float) -> None:
    with pytest.raises(ValueError, match="position 2"):
        fn([0.5, 0.5, bad], 3)


@pytest.mark.parametrize("fn", [context_precision_mean, context_precision_ranked])
def test_relevance_beyond_k_is_still_checked(fn: Callable[..., float]) -> None:
    with pytest.raises(ValueError, match="position 4"):
        fn([0.5, 0.5, 0.5, 0.5, 7.0], 3)


def test_non_numeric_relevance_is_refused() -> None:
    with pytest.raises(TypeError, match="position 0"):
        context_precision_mean(["0.5"], 3)  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, True])
def test_bad_threshold_is_a_config_error(bad: Any) -> None:
    with pytest.raises(ConfigError, match="threshold"):
        context_precision_ranked([1.0], 3, threshold=bad)


# ----------------------------------------------------------------------------------------------------------- k

K_FUNCTIONS: list[Callable[[Any], float]] = [
    lambda k: precision_at_k(RETRIEVED, RELEVANT, k),
    lambda k: recall_at_k(RETRIEVED, RELEVANT, k),
    lambda k: hit_rate(QUERIES, GOLDEN, k),
    lambda k: reciprocal_rank(RETRIEVED, RELEVANT, k),
    lambda k: mean_reciprocal_rank(QUERIES, GOLDEN, k),
    lambda k: average_precision(RETRIEVED, RELEVANT, k),
    lambda k: mean_average_precision(QUERIES, GOLDEN, k),
    lambda k: context_precision_mean([1.0], k),
    lambda k: context_precision_ranked([1.0], k),
]


@pytest.mark.parametrize("fn", K_FUNCTIONS)
@pytest.mark.parametrize("bad", [0, -1, 2.0, "3", True])
def test_k_must_be_a_positive_int(fn: Callable[[Any], float], bad: Any) -> None:
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        fn(bad)


def test_k_none_means_the_whole_list() -> None:
    # J is last in query 3's list; with no cut-off it is found at rank 3
    assert reciprocal_rank(["H", "I", "J"], {"J"}) == pytest.approx(1 / 3)
    assert hit_rate([["H", "I", "J"]], [{"J"}]) == 1.0


@pytest.mark.parametrize("fn", K_FUNCTIONS[:2] + K_FUNCTIONS[-2:])
def test_k_is_required_where_it_defines_the_metric(fn: Callable[[Any], float]) -> None:
    with pytest.raises(ConfigError):
        fn(None)


def test_results_stay_in_zero_one() -> None:
    for k in range(1, 6):
        for fn in K_FUNCTIONS:
            assert 0.0 <= fn(k) <= 1.0
