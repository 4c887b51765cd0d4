"""Answer relevance of the offline judge: the core-entity, asked-attribute and time-constraint checks, in
English and Chinese, each with a right answer that must stay relevant (the 0.85 health threshold)."""

from __future__ import annotations

import pytest

from ragwatch.scoring.judges.answer_relevance import answer_relevance, check_answer
from ragwatch.scoring.judges.offline import OfflineJudge
from tests.conftest import judge_sample as make

THRESHOLD = 0.85  # settings' health threshold of answer_relevance


@pytest.fixture(scope="module")
def judge() -> OfflineJudge:
    return OfflineJudge()


def scored(judge: OfflineJudge, question: str, answer: str) -> float:
    return judge.score(make(question, answer, ["Some retrieved context."])).scores["answer_relevance"]


CASES = [
    # (question, right answer, wrong answer): the wrong one fails exactly one check
    pytest.param(
        "What was Tesla's revenue in 2024?",
        "Tesla's revenue in 2024 was $97.7 billion.",
        "Tesla's revenue in 2023 was $96.8 billion.",
        id="time-en",
    ),
    pytest.param(
        "2024款特斯拉Model 3的续航是多少？",
        "2024款特斯拉Model 3的续航为606公里。",
        "2023款特斯拉Model 3的续航为556公里。",
        id="time-zh-model-year",
    ),
    pytest.param(
        "When was the Eiffel Tower completed?",
        "The Eiffel Tower was completed in March 1889.",
        "The Eiffel Tower was completed by the engineering company of Gustave Eiffel.",
        id="attribute-date-en",
    ),
    pytest.param(
        "How many employees does the Springfield plant have?",
        "The Springfield plant has 1,200 employees.",
        "The Springfield plant employs workers from the whole region around the river.",
        id="attribute-number-en",
    ),
    pytest.param(
        "长城有多长？", "长城全长约21196千米。", "长城位于中国北方，是古代的军事防御工程。", id="attribute-number-zh"
    ),
    pytest.param(
        "What does the warranty of the Aurora X2 headphones cover?",
        "The Aurora X2 warranty covers manufacturing defects for two years, but not water damage.",
        "The Borealis Pro warranty covers manufacturing defects for two years, but not water damage.",
        id="entity-en",
    ),
    pytest.param(
        "《三体》的作者获得过哪些奖项？",
        "《三体》的作者刘慈欣获得过雨果奖和银河奖。",
        "《流浪地球》的作者获得过多项科幻文学奖项和银河奖。",
        id="entity-zh-title",
    ),
]


@pytest.mark.parametrize(("question", "right", "wrong"), CASES)
def test_a_failed_check_reads_not_relevant_and_the_right_answer_stays(
    judge: OfflineJudge, question: str, right: str, wrong: str
) -> None:
    assert scored(judge, question, right) >= THRESHOLD
    assert scored(judge, question, wrong) < THRESHOLD


def test_checks_report_what_applies() -> None:
    checks = check_answer("When was the Eiffel Tower completed?", "Paris.")
    assert checks.short and checks.names_entity is None  # a short answer is not asked to name the entity
    assert checks.answers_attribute is False and checks.respects_time is None
    long_answer = "According to the statistics office, the GDP of France in 2024 was about 2.9 trillion euros."
    checks = check_answer("What was the GDP of France in 2024?", long_answer)
    assert checks.names_entity and checks.respects_time and checks.answers_attribute is None
    # a year in the question and none in the answer: no time check (the answer may simply not repeat it)
    assert check_answer("2019年军运会在哪个城市举办", "武汉").respects_time is None


def test_refusals_and_empty_answers_read_low(judge: OfflineJudge) -> None:
    assert answer_relevance("Who wrote Hamlet?", "") == 0.0
    assert answer_relevance("Who wrote Hamlet?", "William Shakespeare.", share_refusal=1.0) == pytest.approx(0.2)
    assert scored(judge, "Who wrote Hamlet?", "I don't know.") < THRESHOLD
    assert scored(judge, "Who wrote Hamlet?", "William Shakespeare wrote Hamlet.") >= THRESHOLD


def test_labelled_set_is_built_by_construction() -> None:
    """scripts/eval_answer_relevance.py's set (the dev measurement, and the training set that
    train_embedding_relevance.py measures the embedding judge's raise on): each pair's negatives."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    import eval_answer_relevance as ear

    pairs = [
        {"source": "s", "language": "en", "question": "When did the Acme bridge open?", "answer": "It opened in 1932."},
        {"source": "s", "language": "en", "question": "Where is the Acme bridge?", "answer": "It is in Springfield."},
        {
            "source": "s",
            "language": "en",
            "question": "What was Acme's revenue in 2024?",
            "answer": "Acme's revenue in 2024 was $7 million.",
        },
        {"source": "t", "language": "en", "question": "Where is the Acme tower?", "answer": "It is in Shelbyville."},
    ]
    rows = ear.build_rows(pairs)
    by_kind = {(r["question"], r["kind"]): r["answer"] for r in rows}
    assert sum(r["relevant"] for r in rows) == 4 and all(r["relevant"] == (r["kind"] == "relevant") for r in rows)
    # the most similar other question of the same source, never another source's
    assert by_kind[("Where is the Acme bridge?", "other question")] == "It opened in 1932."
    assert ("Where is the Acme tower?", "other question") not in by_kind
    # a "when" question gets the answer of the most similar question of another kind
    assert by_kind[("When did the Acme bridge open?", "other attribute")] == "It is in Springfield."
    # the question's year, named by its answer, moved back by one
    assert by_kind[("What was Acme's revenue in 2024?", "year changed")] == "Acme's revenue in 2023 was $7 million."
    models = ear.score(rows)
    assert models == ("offline", "coverage")
    report = ear.report(rows, models)
    assert report["year changed/en"]["offline"]["auc"] == 1.0  # the time check caps the changed answer


# --------------------------------------------------------------------------- times said without a date

DEMO_WHEN = [
    # issue 27: both read 0.50 and `off_topic`, the score of an unrelated answer
    (
        "When do new employees receive a company laptop?",
        "Every new employee receives a company laptop on the first working day.",
    ),
    ("病假什么时候需要医院证明？", "每年3天以内的病假不需要医院证明。超过3天的病假需要提供医院开具的证明。"),
    ("新员工在哪天领取公司笔记本电脑？", "新员工在入职第一天领取公司笔记本电脑。"),
    (
        "When does finance pay approved expense reports?",
        "Finance pays approved expense reports within 10 working days.",
    ),
    ("When is the annual bonus paid?", "The annual bonus is paid after three days of review."),
    ("年终奖什么时候发放？", "年终奖每年一月发放。"),
    ("When must the travel request be approved?", "The travel request must be approved before booking."),
]


@pytest.mark.parametrize(("question", "answer"), DEMO_WHEN, ids=[q for q, _ in DEMO_WHEN])
def test_relative_and_event_times_answer_when(judge: OfflineJudge, question: str, answer: str) -> None:
    from ragwatch.scoring.diagnosis import diagnose_all

    verdict = judge.score(make(question, answer, [answer]))
    assert verdict.scores["answer_relevance"] >= THRESHOLD
    assert "off_topic" not in diagnose_all(verdict.scores, None)
    assert check_answer(question, answer).answers_attribute is True


def test_an_unrelated_answer_does_not_share_the_correct_answers_score(judge: OfflineJudge) -> None:
    question, right = DEMO_WHEN[0]
    unrelated = "Passwords must be at least 12 characters long and are changed regularly by the IT team."
    assert scored(judge, question, unrelated) < THRESHOLD <= scored(judge, question, right)
    assert check_answer(question, unrelated).answers_attribute is False


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What year is the museum scheduled to open?", "The museum expects about five million visitors per year."),
        ("博物馆哪一年开放？", "博物馆每年接待约五百万游客。"),
    ],
)
def test_a_calendar_question_is_not_answered_by_a_relative_time(question: str, answer: str) -> None:
    assert check_answer(question, answer).answers_attribute is False
    assert answer_relevance(question, answer) < THRESHOLD


# -- issue 27: a short answer reads its question; a correct one no longer shares an unrelated one's score ---------

SHORT_CASES = [
    # (question, a correct short answer, an unrelated short answer of the wrong type)
    pytest.param("Who directed the movie Avatar?", "James Cameron", "10.94%", id="who-number-en"),
    pytest.param("2018年谁当选台北市市长", "柯文哲", "4月14日", id="who-date-zh"),
    pytest.param("Where were the 2019 Military World Games held?", "Wuhan", "June 12", id="where-date-en"),
    pytest.param("Which country won the most medals?", "U.S.", "12.3", id="which-country-abbreviation"),
    pytest.param("When do new employees receive a company laptop?", "On the first working day.", "Room 4B.", id="when"),
]


@pytest.mark.parametrize(("question", "right", "wrong"), SHORT_CASES)
def test_a_short_answer_of_the_wrong_type_reads_below_the_right_one(
    judge: OfflineJudge, question: str, right: str, wrong: str
) -> None:
    right_score, wrong_score = scored(judge, question, right), scored(judge, question, wrong)
    assert right_score >= THRESHOLD > wrong_score


def test_a_short_answer_with_evidence_reads_above_one_with_none(judge: OfflineJudge) -> None:
    """Carrying the asked type, or sharing the question's words, is evidence a short answer answers *this*
    question; an answer to an untyped question sharing nothing is not read down, but not up either."""
    typed = scored(judge, "Who directed the movie Avatar?", "James Cameron")
    shared = scored(judge, "What kind of game is Minecraft?", "A sandbox game.")
    unread = scored(judge, "What kind of game is Minecraft?", "Diving.")
    assert typed > unread and shared > unread >= THRESHOLD
    assert check_answer("Who directed the movie Avatar?", "James Cameron").answers_attribute is True
    assert check_answer("Who directed the movie Avatar?", "10.94%").answers_attribute is False
    # a long answer to "who" names much besides the person: not checked
    long_answer = (
        "The science fiction movie was directed by a Canadian filmmaker who also wrote and produced Titanic, "
        "released by Twentieth Century Fox in December 1997."
    )
    assert check_answer("Who directed the movie Avatar?", long_answer).answers_attribute is None
