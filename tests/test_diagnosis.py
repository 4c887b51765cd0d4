"""Diagnosis: each branch, the labels a sample carries together, the first one, skipped rules, counts and the
advice ranking, and threshold validation."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from ragwatch.errors import ConfigError
from ragwatch.scoring.diagnosis import (
    ADVICE,
    DIAGNOSES,
    PROBLEMS,
    Thresholds,
    diagnose,
    diagnose_all,
    label_counts,
    ranked_problems,
    record_labels,
)
from ragwatch.scoring.judges.base import ANSWER_RELEVANCE, FAITHFULNESS, HALLUCINATION_RATE, context_precision

CP3 = context_precision(3)
GOOD = {CP3: 0.9, FAITHFULNESS: 0.9, HALLUCINATION_RATE: 0.0, ANSWER_RELEVANCE: 0.95}
GOOD_CHUNKS = [0.9, 0.8, 0.7]


def scores(**overrides: float) -> dict[str, float]:
    """The all-good scores with some replaced; keyword names map onto the real score keys."""
    keys = {"cp": CP3, "faith": FAITHFULNESS, "invented": HALLUCINATION_RATE, "ar": ANSWER_RELEVANCE}
    out = dict(GOOD)
    out.update({keys[name]: value for name, value in overrides.items()})
    return out


def without(*names: str) -> dict[str, float]:
    return {k: v for k, v in GOOD.items() if k not in names}


CASES: list[tuple[str, Mapping[str, float], Sequence[float] | None, str]] = [
    # --- each branch on its own
    ("all good", GOOD, GOOD_CHUNKS, "healthy"),
    ("no chunk reaches 0.5", GOOD, [0.4, 0.3, 0.1], "retrieval_miss"),
    ("nothing retrieved", GOOD, [], "retrieval_miss"),
    ("relevant chunk but CP@3 0.5 < 0.65", scores(cp=0.5), GOOD_CHUNKS, "noisy_retrieval"),
    ("faithfulness 0.6 < 0.75", scores(faith=0.6), GOOD_CHUNKS, "hallucination"),
    ("answer relevance 0.5 < 0.85", scores(ar=0.5), GOOD_CHUNKS, "off_topic"),
    # --- ordering: the most upstream failure wins
    ("miss beats noisy, hallucination, off-topic", scores(cp=0.1, faith=0.1, ar=0.1), [0.2], "retrieval_miss"),
    ("noisy beats hallucination", scores(cp=0.3, faith=0.2), GOOD_CHUNKS, "noisy_retrieval"),
    ("noisy beats off-topic", scores(cp=0.3, ar=0.2), GOOD_CHUNKS, "noisy_retrieval"),
    ("hallucination beats off-topic", scores(faith=0.3, ar=0.2), GOOD_CHUNKS, "hallucination"),
    # --- boundaries: equal to a threshold passes
    ("a chunk at exactly 0.5 is relevant", GOOD, [0.5, 0.0, 0.0], "healthy"),
    ("CP exactly 0.65 passes", scores(cp=0.65), GOOD_CHUNKS, "healthy"),
    ("faithfulness exactly 0.75 passes", scores(faith=0.75), GOOD_CHUNKS, "healthy"),
    ("answer relevance exactly 0.85 passes", scores(ar=0.85), GOOD_CHUNKS, "healthy"),
    ("a relevant chunk beyond the top 3 still avoids a miss", scores(cp=0.1), [0.1, 0.0, 0.2, 0.9], "noisy_retrieval"),
    # --- missing scores skip their rule
    ("no answer relevance: cannot be off-topic", without(ANSWER_RELEVANCE), GOOD_CHUNKS, "healthy"),
    ("no faithfulness: off-topic still found", {CP3: 0.9, ANSWER_RELEVANCE: 0.1}, GOOD_CHUNKS, "off_topic"),
    ("no relevances, no CP: answer rules still run", without(CP3), None, "healthy"),
    ("no relevances, no CP, unfaithful", {FAITHFULNESS: 0.2}, None, "hallucination"),
    ("one invented claim of five is a hallucination", scores(faith=0.8, invented=1.0), GOOD_CHUNKS, "hallucination"),
    ("an invented claim without faithfulness", {HALLUCINATION_RATE: 1.0}, None, "hallucination"),
    ("no relevances, CP low: reported as noisy", scores(cp=0.2), None, "noisy_retrieval"),
    ("no relevances, CP fine", {CP3: 0.7}, None, "healthy"),
    ("NaN faithfulness counts as missing", scores(faith=math.nan), GOOD_CHUNKS, "healthy"),
    # --- CP computed from the relevances when the score is absent
    # [0.9, 0.1, 0.1] → CP@3 = 1.1 / 3 ≈ 0.367 < 0.65
    ("CP from relevances, low", without(CP3), [0.9, 0.1, 0.1], "noisy_retrieval"),
    # [0.9, 0.8, 0.3] → CP@3 = 2.0 / 3 ≈ 0.667 ≥ 0.65
    ("CP from relevances, fine", without(CP3), [0.9, 0.8, 0.3], "healthy"),
    # one chunk for top 3: (0.9 + 0 + 0) / 3 = 0.3
    ("CP from relevances counts missing chunks as 0", without(CP3), [0.9], "noisy_retrieval"),
    ("recorded CP wins over relevances", scores(cp=0.9), [0.9, 0.1, 0.1], "healthy"),
    # --- only relevances known
    ("only relevances, good", {}, GOOD_CHUNKS, "healthy"),
    ("only relevances, miss", {}, [0.1], "retrieval_miss"),
    # --- nothing to check
    ("nothing at all", {}, None, "unknown"),
    ("only unrelated scores", {"trivial_grounding": 0.1}, None, "unknown"),
    (
        "only NaN scores",
        {FAITHFULNESS: math.nan, HALLUCINATION_RATE: math.nan, ANSWER_RELEVANCE: math.nan},
        None,
        "unknown",
    ),
]


@pytest.mark.parametrize(("case", "sample_scores", "relevances", "expected"), CASES, ids=[c[0] for c in CASES])
def test_diagnose(
    case: str, sample_scores: Mapping[str, float], relevances: Sequence[float] | None, expected: str
) -> None:
    assert diagnose(sample_scores, relevances) == expected


LABEL_CASES: list[tuple[str, Mapping[str, float], Sequence[float] | None, tuple[str, ...]]] = [
    ("all good", GOOD, GOOD_CHUNKS, ("healthy",)),
    (
        "noisy retrieval and an invented claim",
        scores(cp=0.3, faith=0.5, invented=1.0),
        GOOD_CHUNKS,
        ("noisy_retrieval", "hallucination"),
    ),
    (
        "noisy and 1 of 5 invented (faithfulness 0.8 passes its line)",
        scores(cp=0.3, faith=0.8, invented=1.0),
        GOOD_CHUNKS,
        ("noisy_retrieval", "hallucination"),
    ),
    (
        "a miss is not also noisy",
        scores(cp=0.1, faith=0.1, invented=1.0, ar=0.1),
        [0.2],
        ("retrieval_miss", "hallucination", "off_topic"),
    ),
    ("every answer label", scores(faith=0.3, invented=1.0, ar=0.2), GOOD_CHUNKS, ("hallucination", "off_topic")),
    ("noisy and off topic", scores(cp=0.3, ar=0.2), GOOD_CHUNKS, ("noisy_retrieval", "off_topic")),
    ("low faithfulness without hallucination_rate", {FAITHFULNESS: 0.5}, None, ("hallucination",)),
    (
        "missing rules skipped, the rest still labelled",
        {CP3: 0.2, ANSWER_RELEVANCE: 0.1},
        None,
        ("noisy_retrieval", "off_topic"),
    ),
    ("nothing at all", {}, None, ("unknown",)),
]


@pytest.mark.parametrize(
    ("case", "sample_scores", "relevances", "expected"), LABEL_CASES, ids=[c[0] for c in LABEL_CASES]
)
def test_diagnose_all_keeps_every_failing_label_in_causal_order(
    case: str, sample_scores: Mapping[str, float], relevances: Sequence[float] | None, expected: tuple[str, ...]
) -> None:
    labels = diagnose_all(sample_scores, relevances)
    assert labels == expected
    assert diagnose(sample_scores, relevances) == labels[0]  # the single field: the most upstream label


def test_one_invented_claim_of_five_is_not_healthy() -> None:
    """Faithfulness 0.8 passes the 0.75 line, but the answer holds an invented claim: it is a hallucination."""
    one_of_five = {**GOOD, FAITHFULNESS: 4 / 5, HALLUCINATION_RATE: 1.0}
    assert "healthy" not in diagnose_all(one_of_five, GOOD_CHUNKS)
    assert diagnose_all(one_of_five, GOOD_CHUNKS) == ("hallucination",)


def test_counts_count_each_label_once_per_sample() -> None:
    samples = [
        ("noisy_retrieval", "hallucination"),
        ("noisy_retrieval",),
        ("hallucination", "hallucination"),  # a repeated label is one sample
        ("healthy",),
        ("something_newer",),
    ]
    counts = label_counts(samples)
    assert list(counts)[: len(DIAGNOSES)] == list(DIAGNOSES)
    assert counts["noisy_retrieval"] == 2 and counts["hallucination"] == 2
    assert counts["healthy"] == 1 and counts["retrieval_miss"] == 0 and counts["something_newer"] == 1


def test_advice_ranks_by_the_failures_each_label_explains() -> None:
    # a retrieval fault (noisy on 3 samples) while the LLM invents on 4, 2 of them during the fault: the
    # ladder would have said noisy 3, hallucination 2; the labels say hallucination first
    samples = [
        ("noisy_retrieval", "hallucination"),
        ("noisy_retrieval", "hallucination"),
        ("noisy_retrieval",),
        ("hallucination",),
        ("hallucination",),
        ("healthy",),
        ("healthy",),
        ("unknown",),
    ]
    ranked = ranked_problems(samples)
    assert [(d, n) for d, n, _ in ranked] == [("hallucination", 4), ("noisy_retrieval", 3)]
    assert ranked[0][2] == pytest.approx(4 / 5)  # shares are of the failing samples, not of all
    assert ranked_problems([("off_topic",), ("hallucination",)])[0][0] == "hallucination"  # tie: causal order
    assert ranked_problems([("healthy",), ("unknown",)]) == []
    assert {d for d, _, _ in ranked_problems([(p,) for p in PROBLEMS])} == set(PROBLEMS)


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (
            {"diagnoses": ["noisy_retrieval", "hallucination"], "diagnosis": "noisy_retrieval"},
            ("noisy_retrieval", "hallucination"),
        ),
        ({"diagnosis": "hallucination"}, ("hallucination",)),  # a record written before labels
        ({"diagnoses": [], "diagnosis": "healthy"}, ("healthy",)),
        ({"diagnoses": "hallucination", "diagnosis": "off_topic"}, ("off_topic",)),  # malformed list ignored
        ({"diagnoses": ["off_topic", "off_topic"]}, ("off_topic",)),
        ({}, ()),
        ({"diagnosis": None}, ()),
    ],
)
def test_record_labels_reads_new_and_old_records(record: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert record_labels(record) == expected


def test_every_diagnosis_is_reachable_and_advised() -> None:
    reached = {c[3] for c in CASES}
    assert reached == set(DIAGNOSES)
    assert set(ADVICE) == set(DIAGNOSES)
    for name, line in ADVICE.items():
        assert line and "\n" not in line, name


def test_advice_is_read_only() -> None:
    with pytest.raises(TypeError):
        ADVICE["healthy"] = "x"  # type: ignore[index]


def test_custom_thresholds_and_k_pick_the_matching_score() -> None:
    th = Thresholds(relevant=0.8, context_precision=0.5, faithfulness=0.9, answer_relevance=0.5, k=5)
    cp5 = context_precision(5)
    # 0.7 is not relevant at 0.8 → miss
    assert diagnose({cp5: 0.9}, [0.7, 0.7], th) == "retrieval_miss"
    # CP@5 0.4 < 0.5; the CP@3 score is not the one consulted
    assert diagnose({cp5: 0.4, CP3: 0.99}, [0.9], th) == "noisy_retrieval"
    # only CP@3 recorded, so with k=5 CP comes from relevances: (0.9 + 0.9 + 0.9) / 5 = 0.54 ≥ 0.5
    assert diagnose({CP3: 0.1}, [0.9, 0.9, 0.9], th) == "healthy"
    # faithfulness 0.85 < 0.9 under the stricter threshold, fine under the default
    assert diagnose({cp5: 0.9, FAITHFULNESS: 0.85}, [0.9], th) == "hallucination"
    assert diagnose({CP3: 0.9, FAITHFULNESS: 0.85}, [0.9]) == "healthy"


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan])
def test_bad_relevance_is_refused_with_its_position(bad: float) -> None:
    with pytest.raises(ValueError, match="position 1"):
        diagnose(GOOD, [0.9, bad])


@pytest.mark.parametrize("bad", [1.5, -0.1, math.inf])
def test_out_of_range_score_is_refused_by_name(bad: float) -> None:
    with pytest.raises(ValueError, match=FAITHFULNESS):
        diagnose(scores(faith=bad), GOOD_CHUNKS)


def test_non_numeric_score_is_refused() -> None:
    with pytest.raises(TypeError, match=ANSWER_RELEVANCE):
        diagnose({ANSWER_RELEVANCE: "high"}, None)  # type: ignore[dict-item]


def test_default_thresholds() -> None:
    th = Thresholds()
    assert (th.relevant, th.context_precision, th.faithfulness, th.answer_relevance, th.k) == (
        0.5,
        0.65,
        0.75,
        0.85,
        3,
    )
    with pytest.raises(FrozenInstanceError):
        th.k = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"relevant": 1.5},
        {"relevant": -0.1},
        {"context_precision": 65},
        {"faithfulness": math.nan},
        {"answer_relevance": "0.85"},
        {"faithfulness": True},
        {"k": 0},
        {"k": -3},
        {"k": 2.0},
        {"k": True},
    ],
)
def test_bad_thresholds_are_config_errors(kwargs: dict[str, Any]) -> None:
    (name,) = kwargs
    with pytest.raises(ConfigError, match=f"Thresholds.{name}"):
        Thresholds(**kwargs)


def test_threshold_bounds_are_allowed() -> None:
    Thresholds(relevant=0.0, context_precision=1.0, faithfulness=0, answer_relevance=1, k=1)
