"""Claim segmentation: exact claims and offsets for Chinese, English and mixed answers.

Offsets are part of the contract (a dashboard highlights ``answer[start:end]``, and the evaluation matches
claims with labelled hallucinated spans), so every case checks them, not just the texts.
"""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragwatch.scoring.judges.claims import Claim, mask_inline_code, split_claims

CASES: list[tuple[str, str, list[tuple[str, int, int]]]] = [
    (
        "decimal and year stay whole",
        "The price rose 3.5% in 2019. It fell later.",
        [("The price rose 3.5% in 2019.", 0, 28), ("It fell later.", 29, 43)],
    ),
    (
        "abbreviations and a version number",
        "Dr. Smith said prices rise, e.g. for bread. Version 2.1.3 fixed it.",
        [("Dr. Smith said prices rise, e.g. for bread.", 0, 43), ("Version 2.1.3 fixed it.", 44, 67)],
    ),
    (
        "a URL with dots is not cut",
        "See https://example.com/a.b/c?x=1. Then log in.",
        [("See https://example.com/a.b/c?x=1.", 0, 34), ("Then log in.", 35, 47)],
    ),
    (
        "initials and dotted abbreviations",
        "J. K. Rowling wrote seven books. The U.S. Army is large.",
        [("J. K. Rowling wrote seven books.", 0, 32), ("The U.S. Army is large.", 33, 56)],
    ),
    (
        "month abbreviation and saint",
        "I was born on Jan. 5, 2001 in St. Louis.",
        [("I was born on Jan. 5, 2001 in St. Louis.", 0, 40)],
    ),
    (
        "Chinese terminators, units and decimals",
        "武汉是湖北省的省会。人口约1200万！面积为8569.15平方公里；GDP很高？",
        [
            ("武汉是湖北省的省会。", 0, 10),
            ("人口约1200万！", 10, 19),
            ("面积为8569.15平方公里；", 19, 34),
            ("GDP很高？", 34, 40),
        ],
    ),
    (
        "Chinese compound on 并且, per-mille values intact",
        "2018年出生率为10.94‰，并且死亡率为7.13‰。",
        [("2018年出生率为10.94‰", 0, 15), ("死亡率为7.13‰。", 18, 28)],
    ),
    (
        "Chinese compound needs two substantial halves",
        "他来了，并且带来了三本书。",
        [("他来了，并且带来了三本书。", 0, 13)],
    ),
    (
        "mixed Chinese and English",
        "Python 3.12 发布于2023年10月。It is fast.",
        [("Python 3.12 发布于2023年10月。", 0, 24), ("It is fast.", 24, 35)],
    ),
    (
        "numbered lines and bullets lose their markers",
        "Steps:\n1. Preheat the oven to 350°F.\n2) Bake for 20 minutes.\n- Let it cool.\n* Serve warm.",
        [
            ("Steps:", 0, 6),
            ("Preheat the oven to 350°F.", 10, 36),
            ("Bake for 20 minutes.", 40, 60),
            ("Let it cool.", 63, 75),
            ("Serve warm.", 78, 89),
        ],
    ),
    (
        "Chinese numbered list",
        "（1）第一点很重要。\n（2）第二点也重要。",
        [("第一点很重要。", 3, 10), ("第二点也重要。", 14, 21)],
    ),
    (
        "fenced code is skipped, inline code never splits and alone is no claim",
        "Install it:\n\n```bash\npip install ragwatch. Then run it.\n```\nRun `ragwatch worker` to start. `only code`",
        [("Install it:", 0, 11), ("Run `ragwatch worker` to start.", 60, 91)],
    ),
    (
        "compound on ', while'",
        "Red cells carry oxygen, while white cells fight infection.",
        [("Red cells carry oxygen", 0, 22), ("white cells fight infection.", 30, 58)],
    ),
    (
        "compound on a semicolon",
        "The plant opened in 2020; it employs 300 people.",
        [("The plant opened in 2020;", 0, 25), ("it employs 300 people.", 26, 48)],
    ),
    (
        "compound on 'and also'",
        "Sales grew strongly and also profits doubled last year.",
        [("Sales grew strongly", 0, 19), ("profits doubled last year.", 29, 55)],
    ),
    (
        "compound on ', but'",
        "The museum closed early, but the gardens stayed open until nine.",
        [("The museum closed early", 0, 23), ("the gardens stayed open until nine.", 29, 64)],
    ),
    (
        "a list joined by 'and' is not a compound",
        "Apples, pears, and plums are fruit.",
        [("Apples, pears, and plums are fruit.", 0, 35)],
    ),
    (
        "a wrapped line joins the next one",
        "This sentence wraps\nonto the next line. Next one.",
        [("This sentence wraps\nonto the next line.", 0, 39), ("Next one.", 40, 49)],
    ),
    ("empty", "", []),
    ("punctuation only", "---\n***", []),
]


@pytest.mark.parametrize(("text", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_split_claims(text: str, expected: list[tuple[str, int, int]]) -> None:
    claims = split_claims(text)
    assert [(c.text, c.start, c.end) for c in claims] == expected
    for claim in claims:
        assert text[claim.start : claim.end] == claim.text


def test_claims_are_frozen_values() -> None:
    claim = split_claims("A cat sat.")[0]
    assert claim == Claim("A cat sat.", 0, 10)
    with pytest.raises(AttributeError):
        claim.start = 3  # type: ignore[misc]


def test_mask_inline_code_keeps_offsets() -> None:
    text = "Run `x = 1` now."
    masked = mask_inline_code(text)
    assert len(masked) == len(text)
    assert "x = 1" not in masked
    assert masked.startswith("Run ") and masked.endswith(" now.")


def test_offsets_survive_long_mixed_answers() -> None:
    answer = (
        "根据资料，2019年军运会在武汉举办。The event had 9,308 athletes from 109 countries; "
        "it lasted 10 days.\n\n- 比赛项目共27个大项。\n- Opening day: Oct. 18, 2019."
    )
    claims = split_claims(answer)
    assert [c.text for c in claims] == [
        "根据资料，2019年军运会在武汉举办。",
        "The event had 9,308 athletes from 109 countries;",
        "it lasted 10 days.",
        "比赛项目共27个大项。",
        "Opening day: Oct. 18, 2019.",
    ]
    assert all(answer[c.start : c.end] == c.text for c in claims)


# ------------------------------------------------------------------- long answers: linear, same claims

_PIECES = [
    "the price rose", "sales fell", "it", "they", "and", "also", "but", "while", ",", ";", "，", "。", ".", "而",
    "但是", "价格上涨", "  ", "\n", "e.g.", "U.S.", "3.5", "2024", "…", "x", "`a, but b`", "Mr.",
]  # fmt: skip


def _split_the_old_way(text: str) -> list[tuple[int, int]]:
    """The segmentation before compound splitting counted words once per sentence: each side of each
    connective recounted by regex over its slice (quadratic in a long sentence, the reference here)."""
    from ragwatch.scoring.judges import claims as c

    def substantial(piece: str) -> bool:
        return len(c._LATIN_WORD_RE.findall(piece)) + len(c._CJK_RE.findall(piece)) / 2 >= 3

    protected = c._protected(text)
    out = []
    for bstart, bend, _ in c._blocks(text):
        for sstart, send in c._sentences(text, bstart, bend, protected):
            pos = sstart
            for m in c._COMPOUND_RE.finditer(text, sstart, send):
                if c._inside(m.start(), protected):
                    continue
                if substantial(text[pos : m.start()]) and substantial(text[m.end() : send]):
                    out.append(c._trim(text, pos, m.start() + 1 if text[m.start()] == ";" else m.start()))
                    pos = m.end()
            out.append(c._trim(text, pos, send))
    return [(s, e) for s, e in out if text[s:e] and c._CONTENT_RE.search(mask_inline_code(text[s:e]))]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=60).map(" ".join))
def test_compound_split_counts_words_once_and_cuts_where_it_did(text: str) -> None:
    assert [(x.start, x.end) for x in split_claims(text)] == _split_the_old_way(text)


def test_a_sentence_of_many_connectives_splits_at_each() -> None:
    # 400 clauses joined by ", but": once quadratic (each side recounted after each), now counted once
    clause = "the price rose again"
    text = ", but ".join([clause] * 400) + "."
    got = split_claims(text)
    assert len(got) == 400
    assert all(x.text.rstrip(".") == clause and text[x.start : x.end] == x.text for x in got)


@settings(max_examples=500)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1])), max_size=12),
    st.integers(-2, 60),
)
def test_protected_ranges_are_bisected_as_their_union(spans: list[tuple[int, int]], pos: int) -> None:
    # code spans and URLs may overlap or touch; a position is protected when any of them holds it
    from ragwatch.scoring.judges.claims import _inside, _union

    merged = _union(spans)
    assert all(a[1] < b[0] for a, b in pairwise(merged))  # disjoint, in order
    assert _inside(pos, merged) == any(s <= pos < e for s, e in spans)


def test_an_answer_of_many_inline_code_spans_still_splits_at_each_sentence() -> None:
    # thousands of `x`. sentences: every terminator asked about every code span (quadratic) until bisected
    text = " ".join(["See `x` here."] * 2000)
    got = split_claims(text)
    assert len(got) == 2000 and all(c.text == "See `x` here." for c in got)
