"""Words and answer-type cues of chunk relevance, shared by the list ranking (:mod:`.relevance`) and the graded
model (:mod:`.relevance_graded`): what kind of thing a question asks for ("date", "number", "person", "place", a
measure, a list, a definition, a cause), and whether a text carries one; the coarse roots words are compared as.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache

from ragwatch.scoring.judges.text import content_tokens

__all__ = ["ANSWER_CUES", "QuestionCues", "is_cjk_question", "question_kind", "question_roots", "type_match"]

# ---------------------------------------------------------------------------------------------- words

_SUFFIXES = (
    "ization", "ation", "ition", "ution", "tion", "sion", "ment", "ness", "ity", "ance", "ence", "ive", "ical",
    "ic", "al", "er", "or", "ist", "ism", "ian", "ing", "ous", "ful",
)  # fmt: skip
#: Chinese question words ("谁", "哪个", "多少" …) are bigram-tokenised like content; no answer contains them.
_INTERROGATIVE_RE = re.compile(r"[谁哪吗呢么]|多少|几[个次年岁位名天号人]|如何|为何")
_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
#: CJK characters too common (grammar, question words) to say anything as single characters.
_CJK_STOP = frozenset(
    "的了是在和与及或也都就而且并被把对为于以之其这那些个有中上下等着过吗呢吧啊从向将会让给所谁哪什么多少几年"
)
_YEAR_RE = re.compile(r"#(?:1[6-9]|20)\d\d")


@lru_cache(maxsize=65536)
def _root(tok: str) -> str:
    """A coarse root of a token from :func:`~ragwatch.scoring.judges.text.content_tokens`: English stems lose a
    derivational suffix and are cut to five letters; numbers and CJK bigrams are left alone."""
    if len(tok) <= 5 or tok[0] == "#" or not tok.isascii():
        return tok
    for suf in _SUFFIXES:
        if tok.endswith(suf) and len(tok) - len(suf) >= 4:
            return tok[: len(tok) - len(suf)][:5]
    return tok[:5]


# ------------------------------------------------------------------------------------- answer types

_QTYPE_NUMBER_RE = re.compile(
    r"\bhow (?:many|much|long|old|far|tall|big|high|large|fast|often|deep|wide|heavy)\b|\bwhat (?:percentage|"
    r"percent|number|amount|size|age|population|temperature)\b|多少|几[个次年岁位名天号人块]|多大|多高|多长|多远|比例|人数|数量"
)
_QTYPE_DATE_RE = re.compile(
    r"\bwhen\b|\bwhat (?:year|date|day|month|time|century)\b|\bwhich year\b|\bdate\b"
    r"|什么时候|何时|哪[一]?年|哪天|几月|日期|时间"
)
_QTYPE_PERSON_RE = re.compile(r"\bwho(?:m|se)?\b|谁|哪位|什么人")
_QTYPE_PLACE_RE = re.compile(
    r"\bwhere\b|\bwhat (?:country|city|state|place)\b|\bwhich (?:country|city|state)\b"
    r"|哪里|哪儿|在哪|哪个(?:国家|城市|省|地方)|什么地方"
)
_KINDS = (
    ("date", _QTYPE_DATE_RE),
    ("number", _QTYPE_NUMBER_RE),
    ("person", _QTYPE_PERSON_RE),
    ("place", _QTYPE_PLACE_RE),
)
_TYPE_IN_TEXT = {
    "date": re.compile(
        r"\b(?:1[5-9]\d\d|20\d\d)\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d"
        r"|\d{4}年|\d{1,2}月\d{1,2}日|\d{1,2}月",
        re.IGNORECASE,
    ),
    "number": re.compile(r"\d|[一二三四五六七八九十百千万亿]+[个人次年岁名位万亿]"),
    "person": re.compile(r"(?<=[a-z,] )[A-Z][a-z]+(?: [A-Z][a-z]+)+"),
    "place": re.compile(r"\b(?:in|at|near|from) [A-Z][a-z]+|[省市县区州国城镇村]"),
}
#: A year, and what makes it part of a full date ("May 29, 2020", "29 May 2020", "2022年12月9日", "2022-12-09").
_YEAR4_RE = re.compile(r"\d{4}")
_DATE_BEFORE_RE = re.compile(
    r"(?i:(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?,? "
    r"|\b\d{1,2}(?:st|nd|rd|th)? (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*,? )$"
)
_DATE_AFTER_RE = re.compile(r"年\d{1,2}月|-\d{1,2}-\d{1,2}")
#: The publication date a search snippet starts with ("Mar 3, 2021 ...") is not an answer.
_DATE_STAMP_RE = re.compile(r"^\s*(?:[A-Z][a-z]{2} \d{1,2}, \d{4}|\d{4}-\d{2}-\d{2}(?: [\d:]+)?)\s*(?:\.\.\.|·|-)?\s*")
#: Numbers (a count unless it looks like a year), and what may follow one.
_NUMBER_RE = re.compile(r"\d[\d,.]*")
_SCALE_RE = re.compile(r"\s?(?:million|billion|thousand|hundred)\b", re.IGNORECASE)
_WORDS_AFTER_RE = re.compile(r"((?:\s+[A-Za-z-]+){1,3})")
_UNIT_AFTER_RE = re.compile(
    r"\s?-?\s?(?:years?|months?|weeks?|days?|hours?|minutes?|seconds?|feet|foot|ft|inch(?:es)?|in|miles?|mi|km"
    r"|kilomet(?:er|re)s?|met(?:er|re)s?|m|cm|mm|kg|kilograms?|pounds?|lbs?|tons?|tonnes?|mph|km/h|percent|%|acres?"
    r"|square|million|billion|thousand)\b",
    re.IGNORECASE,
)
_NUMBER_WORD_RE = re.compile(
    r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|twenty|thirty|forty"
    r"|fifty|hundred|dozen|hundreds|thousands|millions)\b"
)
_ZH_COUNT_RE = re.compile(r"[一二三四五六七八九十两百千万亿]+[个人次名位项支座块届]")
_MONEY_AGE_RE = re.compile(r"(?:[$€£] ?|\baged? )$")
_MEASURE_Q_RE = re.compile(r"\bhow (?:old|tall|long|far|much|big|high|deep|wide|heavy|fast|large)\b", re.IGNORECASE)
#: Who made or won something: "by Alexander Fleming", "Tolkien wrote".
_BY_NAME_RE = re.compile(r"by (?:[A-Z][a-z]+ ){0,2}[A-Z][a-z]+")
_NAME_DID_RE = re.compile(
    r"[A-Z][a-z]+ (?:[A-Z][a-z]+ )?(?:wrote|invented|founded|created|discovered|directed|designed|developed"
    r"|composed|built|established|won)\b"
)
_LIST_Q_RE = re.compile(
    r"哪些|有谁|都有|\b(?:what|which) (?:[a-z]+ )?[a-z]+s\b(?! (?:is|was)\b)|\bname (?:the|all)\b|\blist\b", re.I
)
#: An enumeration: "A、B、C", "Afrikaans, English, Ndebele and Zulu".
_LIST_RE = re.compile(
    r"、[^、。\n]{1,20}、|[A-Z][\w-]*(?: [A-Z][\w-]*){0,2} ?, [A-Z][\w-]*(?: [A-Z][\w-]*){0,2} ?,? (?:and |, )[A-Z]"
)
#: A chunk that says what something *is* ("X is a …", "X是一种…") near its start.
_DEFINITION_RE = re.compile(r"\b(?:is|are|was|were)\s+(?:a|an|the|one)\b|是一|是指|指的是|是由", re.IGNORECASE)
_DEFINITION_Q_RE = re.compile(
    r"^\s*(?:what|who)(?: is| are| was| were|'s)\b(?! the (?:name|number|population|capital))"
    r"|\bwhat does .* mean\b|\bdefin|是什么|指什么|是谁",
    re.IGNORECASE,
)
_WHY_Q_RE = re.compile(r"\bwhy\b|为什么|为何", re.IGNORECASE)
_WHY_A_RE = re.compile(
    r"\b(?:because|due to|since|as a result|caused by|so that|in order to)\b|因为|由于|所以|导致", re.IGNORECASE
)
_HOW_Q_RE = re.compile(
    r"\bhow\b(?! (?:many|much|long|old|far|tall|big|high|large|fast|often|deep|wide|heavy))|如何|怎么|怎样",
    re.IGNORECASE,
)
_HOW_A_RE = re.compile(r"\b(?:by|through|using|via|when|process|formed|caused|made)\b|通过|利用|方法", re.I)


def question_kind(question: str) -> str:
    """What the question asks for: "date", "number", "person", "place" or "" (anything else)."""
    q = question.lower()
    for kind, pattern in _KINDS:
        if pattern.search(q):
            return kind
    return ""


def is_cjk_question(question: str) -> bool:
    """Whether the question is written in CJK script: the calibration has one intercept for those and one
    for the rest, because base rates differ that much between the corpora (module docstring)."""
    return _CJK_RE.search(question) is not None


def type_match(question: str, text: str) -> float:
    """1 when the question asks for a date/number/person/place and the text has one; 0 otherwise."""
    kind = question_kind(question)
    return 1.0 if kind and _TYPE_IN_TEXT[kind].search(text) else 0.0


def _roots(text: str) -> list[str]:
    return [_root(t) for t in content_tokens(text)]


def _full_date(text: str) -> float:
    """1 when ``text`` has a full date: day, month and year (or year and month in Chinese)."""
    for m in _YEAR4_RE.finditer(text):
        s, e = m.span()
        if _DATE_BEFORE_RE.search(text, max(0, s - 16), s) or _DATE_AFTER_RE.match(text, e):
            return 1.0
    return 0.0


def _numbers(text: str) -> Iterator[tuple[re.Match[str], bool]]:
    """Numbers of ``text`` and whether each is a count (not a year, not a version or decimal tail)."""
    for m in _NUMBER_RE.finditer(text):
        s = m.start()
        if s and text[s - 1] in ".,":
            continue
        raw = m.group().rstrip(".,")
        yield m, not (len(raw) == 4 and (raw[:2] == "20" or "15" <= raw[:2] <= "19"))


def _counts(text: str, q_set: AbstractSet[str]) -> tuple[float, float]:
    """(a count in ``text``, a count of something the question names: "30 teams" for "how many teams")."""
    count = 0.0
    matches: list[tuple[int, bool]] = []  # (end of the number, it is a count)
    for m, is_count in _numbers(text):
        if is_count:
            count = 1.0
            end = m.end()
            scale = _SCALE_RE.match(text, end)
            matches.append((scale.end() if scale else end, True))
    low = text.lower()
    for m in _NUMBER_WORD_RE.finditer(low):
        if m.start() == 0 or not low[m.start() - 1].isalpha():
            count = 1.0
            matches.append((m.end(), True))
    if not count and _ZH_COUNT_RE.search(text):
        count = 1.0
    for end, _ in matches:
        words = _WORDS_AFTER_RE.match(text, end)
        if words and not q_set.isdisjoint(_roots(words.group(1))):
            return count, 1.0
    return count, 0.0


def _measure(text: str) -> float:
    """1 when ``text`` has a number with a unit ("25 years", "3 km", "$5", "aged 40")."""
    for m in _NUMBER_RE.finditer(text):
        s = m.start()
        if _UNIT_AFTER_RE.match(text, m.end()) or _MONEY_AGE_RE.search(text, max(0, s - 5), s):
            return 1.0
    return 0.0


# -------------------------------------------------------------------------------- cues of one chunk

#: What :meth:`QuestionCues.answer_cues` returns, in order: the answer-type cues both relevance models read.
ANSWER_CUES = (
    "answer_type",
    "full_date",
    "count",
    "count_of_asked",
    "measure",
    "agent",
    "enumeration",
    "definition",
    "definition_asked",
    "defines_subject",
    "cause_or_means",
    "other_year",
)


def question_roots(question: str) -> frozenset[str]:
    """The question's content roots, without its Chinese question words (no answer contains them)."""
    return frozenset(_root(t) for t in content_tokens(question) if not _INTERROGATIVE_RE.search(t))


def _doc_years(doc: Iterable[str]) -> set[str]:
    return {t for t in doc if t[0] == "#" and _YEAR_RE.fullmatch(t)}


@dataclass(frozen=True, slots=True)
class QuestionCues:
    """What a question asks for, read once per question; :meth:`answer_cues` reads each chunk against it."""

    question: str
    roots: frozenset[str]
    kind: str
    years: frozenset[str]
    asks_measure: bool
    asks_list: bool
    asks_definition: bool
    means: re.Pattern[str] | None

    @classmethod
    def of(cls, question: str, roots: frozenset[str] | None = None) -> QuestionCues:
        roots = question_roots(question) if roots is None else roots
        return cls(
            question,
            roots,
            question_kind(question),
            frozenset(t for t in roots if _YEAR_RE.fullmatch(t)),
            _MEASURE_Q_RE.search(question) is not None,
            _LIST_Q_RE.search(question) is not None,
            _DEFINITION_Q_RE.search(question) is not None,
            _WHY_A_RE if _WHY_Q_RE.search(question) else _HOW_A_RE if _HOW_Q_RE.search(question) else None,
        )

    def answer_cues(self, text: str, doc: set[str], leads: float) -> list[float]:
        """:data:`ANSWER_CUES` of a chunk (``doc``: its roots; ``leads``: how much it leads with the question's
        words): the kind of thing the question asks for, a definition, a cause or means, only other years."""
        kind = self.kind
        body = _DATE_STAMP_RE.sub("", text, count=1)
        full_date = count = count_of_asked = measure = agent = 0.0
        if kind == "date":
            full_date = _full_date(body)
        elif kind == "number":
            count, count_of_asked = _counts(body, self.roots)
        elif kind == "person":
            agent = 1.0 if _BY_NAME_RE.search(body) or _NAME_DID_RE.search(body) else 0.0
        if self.asks_measure:
            measure = _measure(body)
        definition = 1.0 if _DEFINITION_RE.search(text, 0, 200) else 0.0
        other_year = 0.0
        if self.years:
            years = _doc_years(doc)
            other_year = 1.0 if years and self.years.isdisjoint(years) else 0.0
        return [
            1.0 if kind and _TYPE_IN_TEXT[kind].search(text) else 0.0,
            full_date,
            count,
            count_of_asked,
            measure,
            agent,
            1.0 if self.asks_list and _LIST_RE.search(body) else 0.0,
            definition,
            definition if self.asks_definition else 0.0,
            definition * leads,
            1.0 if self.means is not None and self.means.search(text) else 0.0,
            other_year,
        ]

    def year_match(self, doc: set[str]) -> float:
        """1 when the chunk names one of the question's years."""
        return 1.0 if self.years and not self.years.isdisjoint(_doc_years(doc)) else 0.0
