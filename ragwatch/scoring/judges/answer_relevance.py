"""Answer relevance for the offline judge: does the answer address *this* question, graded 0..1.

Why checks and not only overlap: the ways a RAG answer most often misses its question keep most of the
question's words. An answer about a neighbouring question of the same topic, one that answers "when" with a
place, or one that quotes last year's figures for a question about this year all read as on topic to a
coverage score. So a base score from coverage (the question's content words the answer repeats, weighted by
their prior; a short direct answer rarely repeats the question and is not asked to) is capped by three
checks, each a cap rather than a weight so that one failed check cannot be outvoted by overlap:

* **core entity** — the question's named things (capitalised words that do not start it, quoted titles
  《…》, Latin names inside Chinese text such as "RCEP", "Model 3") must appear in an answer long enough to
  name them; a short answer ("Wuhan", "武汉") is exempt;
* **asked attribute** — "when"/"what year"/"何时"/"哪一年" wants a date or a year, or a time said without
  one (a relative or event time: "on the first working day", "after three days", "before booking",
  "每年一月", "入职第一天") unless it asks for a calendar value ("what year", "哪一年"); "how many/much"/
  "多少"/"几个" a number: an answer without one does not answer what was asked;
* **time constraint** — a question that names a year (2024, "2024年", "2024款") is not answered by an answer
  that names only other years (2023's figures, the 2023 model).

A short answer (≤ 8 tokens) is read against its question too, not scored alike: one that carries the asked
type (a date or a relative time for "when", a number for "how many", for "who"/"where" a word at all and not
a bare number or date) or repeats some of the question's content words reads 0.95 (more with more of the
question); one that neither carries a type the question asks for nor shares a word — nothing to read it by —
keeps 0.9; one of the wrong type ("10.94‰" for "who", "June 2020" for "where", a place for "when") is capped
like a long one. So a correct short answer no longer shares the score of an unrelated one of the wrong type
or about nothing the question names. An unrelated answer of the right type (another film's director) reads
no differently from the answer alone; the retrieved chunks tell them apart: a short answer whose content
sits in a chunk's sentence on the question's topic, near its names
(:mod:`ragwatch.scoring.judges.answer_grounding`), reads 1.0. Without chunks, or when the chunks do not hold
it, its score is the one its type gave it — never lowered: whether it is true to the chunks is faithfulness's
question.

A refusal is about the question but does not answer it: it reads 0.2 (in proportion to the share of
refusal claims, :func:`refusal_share`). Only a line that declines to answer is a refusal ("Unable to answer
based on the given passages", "The passages do not say when…"). A citation ("(Passage 1)", "This is mentioned
in passage 2."), a lead-in ("Based on the provided passages, here are the steps:"), a courtesy line or a
statement about the passages ("Passage 3 provides the necessary information") is unverifiable to
faithfulness like a refusal, but it neither answers nor refuses: it is left out of the share, so a good answer
that cites its passages keeps its score. A claim unverifiable only because no single chunk holds it (pieced
together from several) still says something about the question: it counts as a claim, not a refusal.

The caps are set a priori, never fitted to dev data; ``scripts/eval_answer_relevance.py``
measures the result on a set built from the dev files by construction (`docs/accuracy.md`, "Answer relevance").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragwatch.scoring.judges.answer_grounding import grounded
from ragwatch.scoring.judges.claim_features import ClaimAnalysis
from ragwatch.scoring.judges.claims import mask_inline_code
from ragwatch.scoring.judges.evidence import PIECED
from ragwatch.scoring.judges.relevance import question_kind
from ragwatch.scoring.judges.text import TextAnalysis, content_tokens, token_prior
from ragwatch.scoring.judges.text_rules import entity_tokens
from ragwatch.scoring.judges.unverifiable import is_refusal

__all__ = ["AnswerChecks", "answer_relevance", "answer_scores", "check_answer", "refusal_share"]

#: The answer is too short to be asked to repeat the question's words or name its entity.
SHORT_TOKENS = 8
#: A short answer with nothing to read it by (an untyped question, no word shared): the score every short answer
#: had before they were read, over the health threshold — nothing says it is wrong.
SHORT_UNREAD = 0.9
#: A short answer that carries the asked type or shares the question's content words: the evidence a
#: reference-free judge has that it answers this question, so above :data:`SHORT_UNREAD`.
SHORT_READ = 0.95
#: A short answer the question's own context holds, near the question's words: the evidence that it is *the*
#: answer and not one of the right type to another question (:mod:`~ragwatch.scoring.judges.answer_grounding`).
SHORT_GROUNDED = 1.0
#: Caps (see the module docstring): below the 0.85 health threshold of ``answer_relevance``.
CAP_ENTITY = 0.6
CAP_ATTRIBUTE = 0.5
CAP_TIME = 0.3
REFUSAL_SCORE = 0.2

_YEAR_RE = re.compile(r"(?<![\d.,])(1[6-9]\d\d|20\d\d)(?![\d.,]\d)")
_DATE_RE = re.compile(
    r"(?<!\d)(?:1[6-9]|20)\d\d(?!\d)|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d"
    r"|\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)|\d{1,2}月|\d{1,2}日|[上下中]旬|世纪|century",
    re.IGNORECASE,
)
#: When, said without a calendar date: a time unit with a count or an ordinal ("on the first working day",
#: "after three days", "within 10 working days", "每年一月", "入职第一天", "3天以内"), a weekday, month or
#: season, a time of day, a frequency ("annually", "每季度"), or an event ("before booking", "upon arrival",
#: "in advance", "出发前"). Such an answer answers "when" as well as a date does.
_WHEN_RE = re.compile(
    r"\b(?:\d+(?:st|nd|rd|th)?|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty"
    r"|thirty|forty|sixty|ninety|hundred|several|few|first|second|third|fourth|fifth|last|next|previous"
    r"|following|same|every|each|per|this|that)\s+(?:\w+\s+)?(?:(?:working|business|calendar|school|week)\s+)?"
    r"(?:days?|nights?|weeks?|weekends?|months?|years?|hours?|minutes?|quarters?|decades?|centur(?:y|ies)"
    r"|mornings?|evenings?|afternoons?)\b"
    r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|june|july"
    r"|august|september|october|november|december|spring|summer|autumn|winter|weekends?|noon|midnight"
    r"|yesterday|today|tonight|tomorrow|daily|weekly|monthly|quarterly|annually|yearly|immediately|beforehand"
    r"|overnight)\b"
    r"|\b\d{1,2}(?::\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d\d\b"
    r"|\b(?:upon|prior to|in advance|as soon as|at the (?:end|start|beginning) of)\b"
    r"|\b(?:before|after|until|during|since)\s+(?:the\s+|a\s+|an\s+|your\s+|their\s+|its\s+)?\w+ing\b"
    r"|[\d零一二两三四五六七八九十百几半]+\s*(?:个)?(?:工作日|小时|分钟|星期|季度|天|日|周|月|年|晚)"
    r"|每(?:[年月周天日晚季]|个?(?:季度|星期|工作日))|第[\d一二三四五六七八九十]+(?:个)?(?:工作日|天|日|周|月|年|季度)"
    r"|(?:星期|周|礼拜)[一二三四五六日天]|[春夏秋冬](?:季|天)|(?:年|月|季)(?:初|底|末)|当天|次日|首日|当日|届时|立即"
    r"|(?:入职|出发|到达|预订|离职|出差|申请|提交|审批)(?:前|后|之前|之后|以前|以后|当天|时)",
    re.IGNORECASE,
)
#: A question for a calendar value ("what year", "哪一年"): a relative time does not answer it.
_CALENDAR_Q_RE = re.compile(
    r"\b(?:what|which) (?:year|date|month|century|decade)\b|哪[一]?年|几月|几号|日期|年份", re.IGNORECASE
)
_NUMBER_RE = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred"
    r"|thousand|million|billion|dozen|none|no)\b|[零一二两三四五六七八九十百千万亿半]",
    re.IGNORECASE,
)
#: Names the Chinese tokeniser would cut into bigrams: quoted titles and Latin words ("RCEP", "Model 3").
_ZH_NAME_RE = re.compile(r"《([^》]{1,30})》|[A-Za-z][A-Za-z0-9-]*(?: \d+)?")
_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
#: What a name ("who", "where") has and a bare number, percentage or date has not: a letter (of any script,
#: CJK included), once the date units (年月日号) and month names are taken out.
_WORD_RE = re.compile(r"[^\W\d_]")
_DATE_WORDS_RE = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?|[年月日号]|\b(?:st|nd|rd|th)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class AnswerChecks:
    """What :func:`check_answer` found; ``None`` where a check does not apply (``grounded``: a long answer,
    no chunk text, or a short answer adding nothing to the question's words)."""

    coverage: float
    short: bool
    names_entity: bool | None
    answers_attribute: bool | None
    respects_time: bool | None
    grounded: bool | None = None


def _years(text: str) -> set[str]:
    return set(_YEAR_RE.findall(text))


def _entities(question: str) -> list[set[str]]:
    """The question's named things, each as the set of tokens that name it (any one of them counts)."""
    out: list[set[str]] = []
    if _CJK_RE.search(question):
        for m in _ZH_NAME_RE.finditer(question):
            name = m.group(1) or m.group()
            toks = {t for t in content_tokens(name) if not t.startswith("#")}
            if toks:
                out.append(toks)
        return out
    ents = entity_tokens(question)
    return [{t} for t in sorted(ents)]


def check_answer(question: str, answer: str, context: Sequence[TextAnalysis] = ()) -> AnswerChecks:
    """The coverage, the three checks and, for a short answer, whether ``context`` (the sample's chunks, as
    the judge analysed them) holds it (the module docstring)."""
    q_toks = set(content_tokens(question))
    answer_toks = content_tokens(answer)  # once: the answer is the longest text here
    a_toks = set(answer_toks)
    total = sum(map(token_prior, q_toks))
    coverage = sum(map(token_prior, q_toks & a_toks)) / total if total else 0.0
    short = len(answer_toks) <= SHORT_TOKENS
    names_entity: bool | None = None
    entities = _entities(question)
    if entities and not short:
        names_entity = any(e & a_toks for e in entities)
    kind = question_kind(question)
    answers_attribute: bool | None = None
    if kind == "date":
        answers_attribute = _DATE_RE.search(answer) is not None or (
            _CALENDAR_Q_RE.search(question) is None and _WHEN_RE.search(answer) is not None
        )
    elif kind == "number":
        answers_attribute = _NUMBER_RE.search(answer) is not None
    elif kind in ("person", "place") and short:  # a long answer names much besides: not checked
        answers_attribute = _WORD_RE.search(_DATE_WORDS_RE.sub(" ", answer)) is not None
    respects_time: bool | None = None
    q_years = _years(question)
    a_years = _years(answer)
    if q_years and a_years:
        respects_time = not q_years.isdisjoint(a_years)
    in_context = grounded(q_toks, entities, a_toks, context) if short and context else None
    return AnswerChecks(coverage, short, names_entity, answers_attribute, respects_time, in_context)


def answer_scores(question: str, answer: str, context: Sequence[TextAnalysis] = ()) -> tuple[float, float]:
    """The coverage-based score (raised for a short direct answer, more when ``context`` holds it, or for one
    carrying the asked date/number) and the cap of the failed checks (1.0 when none failed), before refusals
    are counted."""
    if not question.strip():
        return 0.7, 1.0
    checks = check_answer(question, answer, context)
    base = 0.5 + 0.5 * min(1.0, checks.coverage / 0.6)
    if checks.short:  # read against the question (module docstring); a wrong type is capped below
        base = max(base, SHORT_READ if checks.answers_attribute or checks.coverage > 0 else SHORT_UNREAD)
        if checks.grounded:
            base = SHORT_GROUNDED
    elif checks.answers_attribute:
        base = max(base, 0.9)  # a long answer carrying the asked date/number
    cap = 1.0
    if checks.names_entity is False:
        cap = min(cap, CAP_ENTITY)
    if checks.answers_attribute is False:
        cap = min(cap, CAP_ATTRIBUTE)
    if checks.respects_time is False:
        cap = min(cap, CAP_TIME)
    return base, cap


def refusal_share(analyses: Sequence[ClaimAnalysis]) -> float:
    """The share of the answer's claims that decline to answer, of those that answer or decline (the module
    docstring): lead-ins, citations, courtesy lines and statements about the passages are left out, a claim
    pieced from several chunks counts as an answer. An answer of nothing else (or of no claim) asserts nothing
    about the question: 1.0, read as a refusal is."""
    refusals = claims = 0
    for a in analyses:
        if not a.unverifiable or a.rule == PIECED:
            claims += 1
        elif is_refusal(mask_inline_code(a.claim.text)):  # the text is_unverifiable read (claim_features)
            claims += 1
            refusals += 1
    return refusals / claims if claims else 1.0


def answer_relevance(
    question: str,
    answer: str,
    share_refusal: float = 0.0,
    semantic: float | None = None,
    context: Sequence[TextAnalysis] = (),
) -> float:
    """Answer relevance in 0..1: the coverage-based score capped by the failed checks, refusals low.

    ``share_refusal`` is the share of the answer's claims that are refusals (:func:`refusal_share`). ``semantic``
    (the embedding judge's claim–question similarity, 0..1) can raise the coverage-based score but not lift
    it over a failed check's cap: a paraphrase may answer without repeating the question's words, but last
    year's figures are as close to the question as this year's. ``context`` is the sample's chunks as the
    judge analysed them: a short answer they hold on the question's topic reads :data:`SHORT_GROUNDED`
    (under the same caps); without them the score is the one the answer alone gets.
    """
    if not answer.strip():
        return 0.0
    base, cap = answer_scores(question, answer, context)
    if semantic is not None:
        base = max(base, semantic)
    return round(min(1.0, (1 - share_refusal) * min(base, cap) + share_refusal * REFUSAL_SCORE), 4)
