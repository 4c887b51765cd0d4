"""Answer relevance reads only refusals as refusals: a good answer that cites its passages or opens with a lead-in
keeps its score, and "The passages do not say when…" still reads low.

Before, every UNVERIFIABLE claim counted as a refusal, so "(Passage 1)", "[1]", "Source: Passage 2" or "Based on
the provided passages, here is how…:" pulled a right answer under the health threshold. All text here is
invented (a router that does not exist), none of it from the dev files."""

from __future__ import annotations

import pytest

from ragwatch.scoring.judges.answer_relevance import REFUSAL_SCORE, refusal_share
from ragwatch.scoring.judges.base import ANSWER_RELEVANCE
from ragwatch.scoring.judges.claim_features import SUPPORTED, UNVERIFIABLE, ClaimAnalysis
from ragwatch.scoring.judges.claims import Claim
from ragwatch.scoring.judges.evidence import PIECED
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.judges.unverifiable import is_refusal, is_unverifiable
from tests.conftest import judge_sample as make

THRESHOLD = 0.85  # settings' health threshold of answer_relevance
QUESTION = "How do I reset the Kestrel X5 router?"
CHUNKS = [
    "To reset the Kestrel X5 router, hold the reset button on the back for ten seconds. The lights blink orange "
    "while the router restarts.",
    "After a reset, the Kestrel X5 router accepts the default password printed on the label under it.",
]
STEPS = [
    "Hold the reset button on the back of the Kestrel X5 router for ten seconds.",
    "The lights blink orange while the router restarts.",
    "Afterwards, log in with the default password printed on the label.",
]
PLAIN = " ".join(STEPS)
RELEASE_Q = "When was the Kestrel X5 router released?"


@pytest.fixture(scope="module")
def judge() -> OfflineJudge:
    return OfflineJudge()


def relevance(judge: OfflineJudge, question: str, answer: str) -> float:
    return judge.score(make(question, answer, CHUNKS)).scores[ANSWER_RELEVANCE]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(f"{STEPS[0]}\n(Passage 1)\n{STEPS[1]}\n(Passage 1)\n{STEPS[2]}\n(Passage 2)", id="passage-lines"),
        pytest.param(f"{STEPS[0]} [1]\n{STEPS[1]} {STEPS[2]} [2]", id="bracket-numbers"),
        pytest.param(f"{PLAIN}\nSource: Passage 1\nSource: Passage 2", id="source-lines"),
        pytest.param(f"{PLAIN} This is mentioned in passage 2.", id="mentioned-in"),
        pytest.param(f"{PLAIN} Passage 1 provides the necessary information.", id="about-the-passages"),
        pytest.param(
            f"Based on the provided passages, here is how to reset the Kestrel X5 router:\n{PLAIN}", id="lead-in"
        ),
        pytest.param(f"Sure, I can help you with that!\n{PLAIN}\nI hope this helps!", id="framing-and-courtesy"),
    ],
)
def test_citations_and_lead_ins_keep_a_good_answer_relevant(judge: OfflineJudge, answer: str) -> None:
    plain = relevance(judge, QUESTION, PLAIN)
    assert plain >= THRESHOLD
    # the same answer with lines that neither answer nor refuse: it was 0.6-0.8 when they counted as refusals
    assert relevance(judge, QUESTION, answer) == plain


@pytest.mark.parametrize(
    "answer",
    [
        "The passages do not say when the Kestrel X5 router was released.",
        "The passages do not say when the Kestrel X5 router was released.\n(Passage 1)",
        "Based on the provided passages:\nUnable to answer based on the given passages.",
    ],
)
def test_a_real_refusal_still_reads_low(judge: OfflineJudge, answer: str) -> None:
    """A citation or a lead-in next to a refusal does not dilute it: the refusal is all the answer says."""
    assert relevance(judge, RELEASE_Q, answer) == pytest.approx(REFUSAL_SCORE)


def test_a_refusal_line_still_lowers_a_good_answer(judge: OfflineJudge) -> None:
    with_refusal = relevance(judge, QUESTION, f"{PLAIN} The passages do not say how long the restart takes.")
    assert with_refusal < relevance(judge, QUESTION, PLAIN)
    # one refusal of four claims, whatever citation lines stand next to them
    cited = f"{PLAIN}\n(Passage 1)\nThe passages do not say how long the restart takes.\n(Passage 2)"
    assert relevance(judge, QUESTION, cited) == with_refusal


def test_an_answer_of_only_lead_ins_and_citations_answers_nothing(judge: OfflineJudge) -> None:
    assert relevance(judge, RELEASE_Q, "Based on the provided passages:\n(Passage 1)") == pytest.approx(REFUSAL_SCORE)


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("Unable to answer based on the given passages.", True),
        ("The passages do not say when the router was released.", True),
        ("I don't know.", True),
        ("根据提供的信息无法确定发布时间。", True),
        ("Based on the provided passages, here are the steps:", False),
        ("Sure, I can help you with that!", False),
        ("I hope this helps!", False),
        ("Passage 3 provides the necessary information to answer the question.", False),
        ("The second passage repeats the same information.", False),
    ],
)
def test_refusals_are_the_unverifiable_lines_that_decline_to_answer(text: str, refusal: bool) -> None:
    assert is_unverifiable(text)
    assert is_refusal(text) is refusal


def _analysis(text: str, verdict: str, rule: str | None = None) -> ClaimAnalysis:
    return ClaimAnalysis(Claim(text, 0, len(text)), verdict == UNVERIFIABLE, [], rule, 0.5, verdict, None, None)


def test_a_claim_pieced_from_several_chunks_counts_as_an_answer_not_a_refusal() -> None:
    """Unverifiable only because no single chunk holds it (``evidence``): it still answers the question."""
    pieced = _analysis("The router restarts in ten seconds with orange lights.", UNVERIFIABLE, PIECED)
    refusal = _analysis("The passages do not say how long the restart takes.", UNVERIFIABLE)
    citation = _analysis("(Passage 1)", UNVERIFIABLE)
    supported = _analysis("Hold the reset button for ten seconds.", SUPPORTED)
    assert refusal_share([pieced]) == 0.0
    assert refusal_share([supported, pieced, refusal, citation]) == pytest.approx(1 / 3)
    assert refusal_share([citation]) == 1.0  # nothing but a citation: nothing answered
    assert refusal_share([]) == 1.0
