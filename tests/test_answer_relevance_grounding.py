"""Issue 27: a correct short answer must not share the score of an unrelated answer of the right type.

The answer alone cannot tell "On the first working day." from another question's "Within 10 working days."
(both answer "when"); the chunks can. Cases come from the demo handbook (``ragwatch.demo.kb``) and from
invented text, none from the dev files."""

from __future__ import annotations

import os

import pytest

from ragwatch.demo.kb import DOCUMENTS
from ragwatch.scoring.judges import make_judges
from ragwatch.scoring.judges.answer_relevance import SHORT_READ, answer_relevance, check_answer
from ragwatch.scoring.judges.base import ANSWER_RELEVANCE, Judge
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.judges.text import analyse_text
from tests.conftest import judge_sample as make

THRESHOLD = 0.85  # settings' health threshold of answer_relevance
DOC = {d.id: d.text for d in DOCUMENTS}
LAPTOP_Q = "When do new employees receive a company laptop?"
LAPTOP_ZH_Q = "新员工在哪天领取公司笔记本电脑？"

#: Invented: two bridges, each chunk about one of them.
BRIDGE_Q = "Who designed the Halvorsen Bridge?"
HALVORSEN = (
    "The Halvorsen Bridge crosses the Vell river south of the old town. It was designed by Ingrid Maal and "
    "opened in 1931. Its main span is 212 metres long."
)
TELLBY = "The Tellby Bridge carries the railway over the Vell. The Tellby Bridge was designed by Oskar Brenn."


@pytest.fixture(scope="module")
def judge() -> OfflineJudge:
    return OfflineJudge()


def relevance(judge: Judge, question: str, answer: str, chunks: list[str]) -> float:
    return judge.score(make(question, answer, chunks)).scores[ANSWER_RELEVANCE]


@pytest.mark.parametrize(
    ("question", "right", "unrelated", "chunks"),
    [
        # the finance question's answer is a "when" too: of the right type, read alike without the chunks
        pytest.param(
            LAPTOP_Q,
            "On the first working day.",
            "Within 10 working days.",
            [DOC["it-laptop-en"], DOC["it-password-en"], DOC["it-software-en"]],
            id="demo-en",
        ),
        pytest.param(
            LAPTOP_ZH_Q,
            "入职第一天",
            "10个工作日内",
            [DOC["it-laptop-zh"], DOC["it-password-zh"], DOC["it-software-zh"]],
            id="demo-zh",
        ),
        pytest.param(BRIDGE_Q, "Ingrid Maal", "Piet Lund", [HALVORSEN, TELLBY], id="invented-who"),
    ],
)
def test_a_correct_short_answer_in_the_on_topic_chunk_beats_an_unrelated_one_of_the_right_type(
    judge: OfflineJudge, question: str, right: str, unrelated: str, chunks: list[str]
) -> None:
    assert check_answer(question, unrelated).answers_attribute is not False  # the right type: not capped
    right_score = relevance(judge, question, right, chunks)
    unrelated_score = relevance(judge, question, unrelated, chunks)
    assert right_score > unrelated_score >= THRESHOLD
    assert unrelated_score == relevance(judge, question, unrelated, [])  # not lowered: faithfulness's job


def test_without_chunks_a_short_answer_keeps_the_score_of_the_answer_alone(judge: OfflineJudge) -> None:
    right = "On the first working day."
    alone = answer_relevance(LAPTOP_Q, right)
    assert alone == SHORT_READ
    assert check_answer(LAPTOP_Q, right).grounded is None
    # no chunks, or chunks whose text was hashed away: nothing to read, the score of the answer alone
    assert relevance(judge, LAPTOP_Q, right, []) == alone
    assert judge.score(make(LAPTOP_Q, right, [""])).scores[ANSWER_RELEVANCE] == alone
    # ...which the chunk that holds it raises
    assert relevance(judge, LAPTOP_Q, right, [DOC["it-laptop-en"]]) > alone


def test_a_short_answer_found_only_in_an_off_topic_chunk_is_not_lifted(judge: OfflineJudge) -> None:
    answer = "Within 2 working days."  # what the software section says, about software requests
    software = DOC["it-software-en"]
    on_topic = relevance(judge, "How quickly are requests for other software answered?", answer, [software])
    off_topic = relevance(judge, LAPTOP_Q, answer, [software])
    assert on_topic > off_topic == relevance(judge, LAPTOP_Q, answer, [])
    assert check_answer(LAPTOP_Q, answer, [analyse_text(software)]).grounded is False
    # a bridge designer named in the other bridge's chunk: the topic words are there, the question's name is not
    assert relevance(judge, BRIDGE_Q, "Oskar Brenn", [HALVORSEN, TELLBY]) < relevance(
        judge, BRIDGE_Q, "Ingrid Maal", [HALVORSEN, TELLBY]
    )
    assert check_answer(BRIDGE_Q, "Oskar Brenn", [analyse_text(TELLBY)]).grounded is False


def test_the_answer_must_sit_near_the_questions_words(judge: OfflineJudge) -> None:
    """The laptop chunk's last sentence (the helpdesk's 24 hours) is on laptops but not on when they arrive:
    the window around it does not hold the question."""
    chunk = [DOC["it-laptop-en"]]
    assert relevance(judge, LAPTOP_Q, "Within 24 hours.", chunk) < relevance(
        judge, LAPTOP_Q, "On the first working day.", chunk
    )
    assert check_answer(LAPTOP_Q, "Within 24 hours.", [analyse_text(chunk[0])]).grounded is False


def test_a_falsified_number_is_not_lifted(judge: OfflineJudge) -> None:
    """The demo falsifies by changing a number: the changed one is in no chunk, so it keeps the answer-alone
    score while the true one rises (faithfulness flags it; answer relevance does not read it down)."""
    question = "When does finance pay approved expense reports?"
    chunk = [DOC["exp-claims-en"]]
    true, falsified = "Within 10 working days.", "Within 20 working days."
    assert relevance(judge, question, true, chunk) > relevance(judge, question, falsified, chunk)
    verdict = judge.score(make(question, falsified, chunk))
    assert verdict.scores["hallucination_rate"] == 1.0
    assert verdict.scores[ANSWER_RELEVANCE] == answer_relevance(question, falsified)


def test_a_wrong_type_stays_capped_even_when_the_chunk_holds_it(judge: OfflineJudge) -> None:
    """Grounding raises the answer-alone score, never over a failed check's cap."""
    assert relevance(judge, LAPTOP_Q, "IT helpdesk", [DOC["it-laptop-en"]]) < THRESHOLD


@pytest.mark.parametrize(("name", "extra"), [("semantic", "transformers"), ("embedding", "sentence_transformers")])
def test_the_judges_built_on_the_offline_analyses_read_the_chunks_too(name: str, extra: str) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip(extra)
    from ragwatch.errors import ConfigError

    try:
        (tier,) = make_judges([name])
    except ConfigError as exc:  # the weights package is absent: skipped locally, as the tier's own tests do
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    chunks = [DOC["it-laptop-en"], DOC["it-software-en"]]
    right = relevance(tier, LAPTOP_Q, "On the first working day.", chunks)
    assert right > relevance(tier, LAPTOP_Q, "Within 2 working days.", chunks)
    assert right > relevance(tier, LAPTOP_Q, "On the first working day.", [])


def test_the_labelled_set_keeps_each_questions_context() -> None:
    """scripts/eval_answer_relevance.py: another question's answer is asked with *this* question's chunks, and
    an answer that says this question's answer (a neighbour's two-sentence demo answer) is no negative."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    import eval_answer_relevance as ear

    laptop, replaced = (
        "Every new employee receives a company laptop on the first working day.",
        "Laptops are replaced every 4 years.",
    )
    pairs = [
        {"source": "s", "language": "en", "question": LAPTOP_Q, "answer": laptop, "context": ["laptop chunk"]},
        {
            "source": "s",
            "language": "en",
            "question": "How often are new company laptops replaced?",
            "answer": f"{replaced} {laptop}",  # holds the first question's answer
            "context": ["replacement chunk"],
        },
        {
            "source": "s",
            "language": "en",
            "question": "When do new employees get a badge?",
            "answer": "On the first day.",
            "context": ["badge chunk"],
        },
    ]
    rows = ear.build_rows(pairs)
    other = {r["question"]: r for r in rows if r["kind"] == "other question"}
    assert other[LAPTOP_Q]["answer"] == "On the first day."  # not the neighbour that holds its answer
    assert other[LAPTOP_Q]["context"] == ["laptop chunk"]
    assert all(r["context"] == next(p["context"] for p in pairs if p["question"] == r["question"]) for r in rows)
    assert ear.sample(0, other[LAPTOP_Q]).chunks[0].text == "laptop chunk"
