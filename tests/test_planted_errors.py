"""The shipped offline judge on planted errors of every kind, in text written for this test (not in ``train/``
nor the dev files): each kind of error that ``scripts/make_synthetic_faithfulness.py`` plants is caught, and
the faithful answer it was planted in is not flagged.

The errors were planted with the generator's own ``plant()`` in the bases below. ``OLD_MISSED`` marks the
cases the judge before the planted-error refit (commit 7d5d80d) passed as faithful — an added sentence of
another document, an added claim about the answer's subject, a dropped Chinese hedge (预计 → 已). For the
other kinds the old judge missed no case of this kind here (numbers and years: not one of the 5,146 planted
training rows either), so their rows pin that the refit did not lose them. Known misses of both judges
(dropped English hedges: "may cost" → "will cost") are in the note of issue 31, not here.
"""

from __future__ import annotations

import pytest

from ragwatch.scoring.judges.offline import OfflineJudge
from tests.conftest import judge_sample

DRILL = (
    "Northwind Tools sells the Kestrel X2 drill with a warranty of 36 months. The battery is covered for 12 months. "
    "Repairs are handled by the service centre in Leeds."
)
LINE = (
    "The Harbour Line opened in 2016 after four years of construction. It runs 14 stations between Marston and the "
    "airport. Trains run every 6 minutes at peak times."
)
LIBRARY = (
    "The Alder Library was designed by the architect Maria Lindqvist. It holds 240,000 volumes. "
    "The reading room can seat 180 people."
)
FESTIVAL = (
    "The Lantern Festival is held in Greenfield Park every October. It usually attracts about 15,000 visitors. "
    "Tickets can be bought at the gate."
)
PROBATION = "新员工的试用期为3个月。试用期内每月进行一次考核。试用期结束后由部门经理决定是否转正。"
METRO = "地铁5号线于2018年开通，全长27公里。全线共设21座车站。高峰时段每4分钟一班。"
TAXI = "员工加班到晚上10点以后可以报销出租车费用。每次报销上限为100元。报销需要在一个月内提交。"
CAMPUS = "新校区预计于2027年完工，总投资约12亿元。校区可容纳8000名学生。一期工程已经开工。"

#: (question, context, faithful answer)
BASES = {
    "drill": (
        "How long is the warranty on the Kestrel X2 drill?",
        DRILL,
        "The Kestrel X2 drill comes with a warranty of 36 months.",
    ),
    "line": (
        "When did the Harbour Line open?",
        LINE,
        "The Harbour Line opened in 2016 after four years of construction.",
    ),
    "library": (
        "Who designed the Alder Library?",
        LIBRARY,
        "The Alder Library was designed by the architect Maria Lindqvist.",
    ),
    "festival": (
        "Where is the festival held?",
        FESTIVAL,
        "The Lantern Festival is held in Greenfield Park every October.",
    ),
    "probation": ("新员工的试用期是多长？", PROBATION, "新员工的试用期为3个月。"),
    "metro": ("地铁5号线什么时候开通？", METRO, "地铁5号线于2018年开通，全长27公里。"),
    "taxi": ("公司可以报销出租车费用吗？", TAXI, "员工加班到晚上10点以后可以报销出租车费用。"),
    "campus": ("新校区预计什么时候完工？", CAMPUS, "新校区预计于2027年完工，总投资约12亿元。"),
}

#: (kind, base, answer with the planted error, the old judge missed it)
PLANTED = [
    ("number", "drill", "The Kestrel X2 drill comes with a warranty of 54 months.", False),
    ("number", "probation", "新员工的试用期为4个月。", False),
    ("year", "line", "The Harbour Line opened in 2017 after four years of construction.", False),
    ("year", "metro", "地铁5号线于2019年开通，全长27公里。", False),
    ("entity", "drill", "The Geneva X2 drill comes with a warranty of 36 months.", False),
    ("negation", "library", "The Alder Library was not designed by the architect Maria Lindqvist.", False),
    ("negation", "taxi", "员工加班到晚上10点以后不可以报销出租车费用。", False),
    ("hedge", "campus", "新校区已于2027年完工，总投资约12亿元。", True),
    (
        "added",
        "drill",
        "The Kestrel X2 drill comes with a warranty of 36 months. The museum shop sells postcards and maps.",
        True,
    ),
    (
        "added",
        "festival",
        "The Lantern Festival is held in Greenfield Park every October. "
        "Lantern Festival was later criticised by several independent experts.",
        True,
    ),
    ("added", "probation", "新员工的试用期为3个月。该项目在1996年被评为全国第一。", False),
]


@pytest.fixture(scope="module")
def judge() -> OfflineJudge:
    return OfflineJudge()


def _unsupported(judge: OfflineJudge, question: str, context: str, answer: str) -> list[str]:
    claims = judge.score(judge_sample(question, answer, [context])).details["claims"]
    return [c["text"] for c in claims if c["verdict"] == "UNSUPPORTED"]


@pytest.mark.parametrize("name", sorted(BASES))
def test_the_faithful_base_is_not_flagged(judge: OfflineJudge, name: str) -> None:
    assert _unsupported(judge, *BASES[name]) == []


@pytest.mark.parametrize(
    ("kind", "base", "answer"),
    [case[:3] for case in PLANTED],
    ids=[f"{kind}-{base}{'-old-judge-missed' if missed else ''}" for kind, base, _, missed in PLANTED],
)
def test_each_planted_kind_is_caught_in_the_claim_that_holds_it(
    judge: OfflineJudge, kind: str, base: str, answer: str
) -> None:
    question, context, faithful = BASES[base]
    flagged = _unsupported(judge, question, context, answer)
    assert flagged, f"{kind} planted in {base!r} passed as faithful"
    # the unsupported claim is the one that changed: not a faithful sentence kept beside an added one
    assert all(text.strip() not in faithful for text in flagged)
