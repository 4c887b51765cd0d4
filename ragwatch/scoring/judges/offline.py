"""The offline judge: faithfulness claim by claim and chunk relevance, with no download and no network.

Why a lexical judge at all: an LLM judge costs money and latency per sample and needs an API key in the
scoring workers; this one runs anywhere, hundreds of samples per second per core, and explains itself
(every claim comes with a verdict, the best supporting quote and the chunk it came from). It is weaker
than a good LLM judge on paraphrase, and says so in the README's measured figures.

How faithfulness is judged, for each claim of :func:`~ragwatch.scoring.judges.claims.split_claims`:

1. **Unverifiable** claims are set aside: refusals and meta statements ("the context does not say",
   "根据现有信息无法回答", "I don't know", "Passage 3 provides the necessary information"), framing lines
   ("Here is a summary:", any line ending in a colon without a number) and courtesy lines ("I hope this
   helps"). They leave the denominator of faithfulness.
2. **Alignment features** against the retrieved chunks, all in 0..1: weighted token coverage of the claim
   by the whole context, by the best sentence and by the best pair of adjacent sentences (English word
   stems, CJK character bigrams, numbers), coverage of the claim's token bigrams (phrases) in the context
   and in its best sentence, missing named entities and missing weight, whether the numbers and names
   sit in the aligned sentence or only elsewhere, how much of that sentence the claim uses, a negation
   count that differs from it. Tokens the question already contains are not asked to be supported
   (restating the question is not a hallucination), nor are words about the passages ("according to
   passage 2").
3. **Rules**, each a feature and, when the training data says it is strong evidence, a hard verdict (a
   *veto*: UNSUPPORTED whatever the model says; the weight file lists them): a number absent from the
   context and the question (12-hour times are read as a 24-hour clock, so "5 pm" matches a record's
   "17:0"; "out of 5 stars" and "seven days a week" assert no number); a unit that differs ("5 miles" vs
   "5 km"); a negation that flips between the claim and a sentence saying nearly the same thing (a
   negation governs its own clause, and a word the text also states plainly is not negated); a claim
   none of whose own words occur in the context; a value that contradicts a structured (JSON) chunk
   (``"WiFi": "no"`` vs "offers WiFi"; the claim must name the whole key, and each key is read with the
   negation that governs it, so "no WiFi, but outdoor seating" checks both). Only features, because on the
   training corpus they fire on supported claims nearly as often: a hedge dropped (the context says
   "expected", "预计", "或将", "about 30", "约1200万", the claim states it as fact — a range such as "6 to 8
   minutes" is no such fact), a named entity the context never mentions in place of one it does ("in
   Paris" where the aligned sentence says "in Rome"), a modal hedge dropped ("may" → "can").
4. A **claim-support model** (``offline_weights.json``, gradient-boosted trees evaluated in numpy by
   :mod:`ragwatch.scoring.judges.trees`, fitted by ``scripts/train_offline.py`` on the public training corpus only,
   monotone in every feature with a clear direction) turns the features into P(supported). Its classes
   were balanced in training, so its odds are a likelihood ratio, not a base rate; the judge multiplies
   them by n for an answer of n verifiable claims (``prior_spread``: the answer's chance of holding an
   invented claim is spread over its claims) and the claim is UNSUPPORTED below the threshold — the only
   number set on the dev files. ``p_supported`` in each claim's details is that adjusted probability.

**Faithfulness** is supported / (claims − unverifiable): a share an on-call engineer can read as "3 of 4
claims supported", not a confidence.

Each claim's ``evidence`` is the sentence of a chunk that best covers it — the supporting quote for a
SUPPORTED claim, the closest (insufficient) one for an UNSUPPORTED claim — always a verbatim substring of
the chunk named by ``chunk_id``. Faithfulness is compared to the context only, never to world knowledge:
an answer faithful to a wrong context is faithful.

Chunk relevance (each chunk's graded answer to the question, and Context Precision@K from it) lives in
:mod:`ragwatch.scoring.judges.relevance`: list-local IDF coverage, answer-type cues and the consensus of the
retrieved chunks, with its own weights (``relevance_weights.json``, ``scripts/train_relevance.py``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.answer_relevance import answer_relevance
from ragwatch.scoring.judges.base import (
    ANSWER_RELEVANCE,
    CONTEXT_RELEVANCE,
    FAITHFULNESS,
    Verdict,
    context_precision,
    context_precision_ranked,
)
from ragwatch.scoring.judges.calibration import load_weights, sigmoid
from ragwatch.scoring.judges.claims import Claim, mask_inline_code, split_claims
from ragwatch.scoring.judges.relevance import RelevanceScorer
from ragwatch.scoring.judges.text import (
    NumberMention,
    TextAnalysis,
    analyse_text,
    approximated_numbers,
    content_tokens,
    entity_tokens,
    json_polarity,
    negation_reach,
    negation_scopes,
    scan,
    stem,
    token_prior,
)
from ragwatch.scoring.judges.trees import TreeEnsemble
from ragwatch.scoring.retrieval_metrics import context_precision_mean
from ragwatch.scoring.retrieval_metrics import context_precision_ranked as context_precision_rank_aware

__all__ = [
    "FAITH_FEATURES",
    "FAITH_SIGNS",
    "LEGACY_FEATURES",
    "RULES",
    "SUPPORTED",
    "UNSUPPORTED",
    "UNVERIFIABLE",
    "ClaimAnalysis",
    "ClaimModel",
    "OfflineJudge",
    "claim_labels",
    "is_unverifiable",
]


SUPPORTED = "SUPPORTED"
UNSUPPORTED = "UNSUPPORTED"
UNVERIFIABLE = "UNVERIFIABLE"

WEIGHTS_PATH = Path(__file__).with_name("offline_weights.json")

#: Claim features, in the order of the model's columns. The first thirteen are the ones the 2026-11
#: logistic calibration used (kept so its figures can be reproduced by ``scripts/train_offline.py``); the
#: rest describe the alignment in more detail (see :func:`_analyse_claims`).
FAITH_FEATURES = (
    "cov_all",
    "cov_sent",
    "cov_pair",
    "cov_phrase",
    "miss_entity",
    "num_missing",
    "unit_mismatch",
    "neg_flip",
    "hedge_drop",
    "modal_drop",
    "json_conflict",
    "miss_count",
    "miss_run",
    "entity_swap",
    "num_absent",
    "phrase_sent",
    "sent_prec",
    "miss_weight",
    "neg_parity",
    "num_local",
    "ent_local",
)
#: The hard rules, in the order they are checked; a weight file's ``vetoes`` says which decide a verdict.
RULES = (
    "number_not_in_context",
    "unit_mismatch",
    "negation_flip",
    "hedge_dropped",
    "structured_value_conflict",
    "entity_not_in_context",
    "nothing_in_context",
)
#: The first thirteen features, the ones the original logistic calibration was fitted on.
LEGACY_FEATURES = FAITH_FEATURES[:13]
#: The direction each faithfulness feature may push P(supported) (0: either): fits keep these signs.
FAITH_SIGNS = (1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 0, -1, -1, 1, 1)

# Fallback weights so the judge works before (or without) a trained file; replaced by the trained ones.
_DEFAULT_WEIGHTS: dict[str, Any] = {
    "faithfulness": {
        "features": list(FAITH_FEATURES),
        "coef": [2.0, 3.0, 1.0, 2.0, -2.0, -3.0, -3.0, -3.0, -2.0, -0.5, -2.0, -1.0, -1.0] + [0.0] * 8,
        "intercept": -3.0,
        "threshold": 0.5,
    },
}

#: Words about the passages themselves ("according to the passage", "the data shows"): never need support.
_META = frozenset(
    stem(w)
    for w in """
    passage passages context contexts document documents text article articles information provided given
    mentioned mentions mention according based summary overall answer question note data source sources
    stated states describes described indicates indicated suggests suggested explains explained reviewer
    reviewers review reviews customer customers user users additionally furthermore moreover
    """.split()  # noqa: SIM905 - stemmed, so not a plain word set
)

#: Citations and enumeration labels ("(Passage 2)", "[1]", "Step 4", "Option 2"): numbers that assert nothing.
_CITATION_RE = re.compile(
    r"[(（\[]?\b(?:passages?|documents?|docs?|sources?|contexts?|chunks?|references?|articles?|steps?|options?"
    r"|methods?|tips?|ways?|points?|parts?|phases?|stages?|items?|reasons?|examples?|sections?|chapters?"
    r"|questions?|reviews?|reviewers?)\s*#?\d+(?:\s*(?:,|and|&|-|or)\s*\d+)*[)）\]]?"
    r"|\[\d+(?:\s*[,-]\s*\d+)*\]"
    r"|[(（]?(?:段落|文档|资料|来源|参考|步骤|方法)\s*\d+[)）]?"
    r"|第\s*\d+\s*(?:步|条|点|段|篇)"
    # rating scales and round-the-clock phrases: "4.5 out of 5 stars", "seven days a week", "24/7"
    r"|\bout of (?:5|10|100)(?:\.0)?\b|\b(?:seven|7) days a week\b|\b24/7\b|\b24 hours a day\b",
    re.IGNORECASE,
)

#: A unit conversion the writer added in parentheses ("58 °F (15 °C)"): arithmetic, not a claim about the
#: context, so its number is not looked for there.
_CONVERSION_RE = re.compile(
    r"(?<=[A-Za-z°%\d])\s*[(（](?:about |approx\.? |approximately |around |~|≈)?\d[\d.,]*\s*"
    r"(?:°\s?[CF]\b|degrees? (?:Celsius|Fahrenheit|C|F)\b|km\b|kilomet(?:er|re)s?\b|miles?\b|m\b|met(?:er|re)s?\b|"
    r"ft\b|feet\b|kg\b|kilograms?\b|lbs?\b|pounds?\b|cm\b|inch(?:es)?\b|in\b|ml\b|l\b|liters?\b|oz\b|"
    r"ounces?\b|g\b|grams?\b|mph\b|km/h\b|cups?\b)[^)）]{0,10}[)）]",
    re.IGNORECASE,
)

#: Unit families: a bare "degrees" is compatible with °C and °F, "miles" is not with "km".
_UNIT_FAMILY = {
    "degree": "temperature",
    "°c": "temperature",
    "°f": "temperature",
    "year": "age",  # "between 30 and 40 years old" = "between the age of 30 and 40 years"
    "year_old": "age",
}

_REFUSAL_RE = re.compile(
    r"\bI (?:do not|don't|did not|didn't) know\b|\bI(?:'m| am) not (?:sure|certain|aware)\b"
    r"|\bI (?:cannot|can't|could not|couldn't|am unable to) (?:answer|determine|find|provide|say|confirm)"
    r"|\b(?:the|these|those|this|provided|given|above) (?:provided |given |retrieved )?"
    r"(?:context|passages?|documents?|sources?|texts?|information|articles?|search results?|data|reviews?)\b"
    r"[^.;:]{0,60}?\b(?:do(?:es)? not|do(?:es)?n[’']t|did not|didn[’']t|never|fails? to) "
    r"(?:explicitly |specifically |directly |clearly )?"
    r"(?:say|mention|provide|specify|contain|include|state|give|address|discuss|offer|indicate|tell|"
    r"explain|cover|have|list|reveal|answer|define|describe|detail|clarify|elaborate on|identify|show)"
    r"|\b(?:there is|there's|there are|there was) no (?:specific |additional |further |explicit |direct |"
    r"clear |relevant |detailed )?(?:information|mention|details?|data|evidence|answer)"
    r"|\bno (?:specific |relevant )?(?:information|mention|details?) (?:is|was|are|were|has been) "
    r"(?:provided|given|available|mentioned|found)"
    r"|\bnot (?:explicitly |specifically )?(?:mentioned|specified|provided|stated|available|given|discussed)"
    r" in the (?:context|passages?|documents?|text|information|sources?|reviews?|data)"
    r"|\b(?:unable to|cannot|can't|could not|couldn't) (?:be )?(?:answered|answer|determined|determine|"
    r"confirm|confirmed|verify|verified) (?:based on|from|with|using|given)"
    r"|\b(?:insufficient|not enough) information\b"
    r"|\bnone of the (?:provided |given |above )?(?:passages|documents|sources|texts|articles|reviews|contexts)\b"
    r"[^.;:]{0,40}?\b(?:provides?|mentions?|says?|contains?|gives?|discuss(?:es)?|includes?|address(?:es)?|specif(?:y|ies)"
    r"|explains?|states?)\b"
    # a fragment whose subject (the passage) was the previous claim: "…, but does not provide instructions on X"
    r"|^(?:but |however,? |and )?(?:it |they |this |that )?(?:does|do|did)(?: not|n[’']t) "
    r"(?:provide|give|offer|include|contain|mention|discuss|specify|explain) "
    r"(?:any |specific |detailed |further |more |clear |explicit |additional )*"
    r"(?:information|details?|instructions?|specifics|data|guidance|answer|steps|explanation)\b"
    r"|\b(?:it is|it's|it’s) (?:impossible|not possible) to (?:provide|give|determine|say|answer|know|tell)\b"
    # statements about the passages themselves: "Passage 3 provides the necessary information"
    r"|\b(?:passages?|documents?|sources?|context|texts?|articles?)\b[^.;:]{0,20}?\b(?:provides?|gives?|contains?"
    r"|repeats?|offers?) (?:the |all (?:the )?)?(?:same|necessary|relevant|required|needed|similar) "
    r"(?:information|details|answer)\b"
    r"|根据(?:现有|已有|提供的|给定的|所给的?|上述)?(?:的)?(?:信息|资料|文档|文件|上下文|内容|材料)[^。]{0,12}无法"
    r"|无法(?:确定|回答|判断|得知|找到|确认|给出)|不知道|不清楚|不确定"
    r"|(?:没有|未|并未|没)(?:提及|提到|说明|给出|提供|找到|相关信息|足够的?信息|明确)|信息不足|文档中没有|资料中没有",
    re.IGNORECASE,
)
_COURTESY_RE = re.compile(
    r"^(?:I hope (?:this|that|these)|hope (?:this|that) helps|let me know|feel free|please (?:let|feel|note that "
    r"these)|if you have any (?:other|more|further)|thank you|thanks|good luck|enjoy|happy\b)"
    r"|希望(?:这|以上|对你)|如有(?:其他|任何)|祝你",
    re.IGNORECASE,
)
_FRAMING_RE = re.compile(
    r"^(?:sure|certainly|of course|okay|ok|absolutely|great question)\b[^.!?]{0,40}[.!:]?$"
    r"|^(?:here(?:'s| is| are)|below (?:is|are)|the following)\b[^.]{0,150}[:：]$"
    r"|^(?:based on|according to) the (?:given |provided |above )?(?:passages?|context|information|"
    r"documents?|data|text|sources?|reviews?)[^.]{0,150}[:：]$"
    r"|^[^.!?。！？]{1,60}[:：]\**$"
    # a line that announces what follows ("To make a graph, follow these steps:") asserts nothing itself;
    # with a number in it, it still might ("the steps for Windows 7:")
    r"|^[^\d.!?。！？]{1,200}[:：][*\"”']*$",
    re.IGNORECASE,
)


class ClaimModel:
    """P(supported) for a batch of claim feature rows, from a weight file's ``faithfulness`` section.

    A logistic part (``coef`` + ``intercept``: the fallback, and the form of older weight files) and
    optionally ``"trees"`` boosted from it (:class:`~ragwatch.scoring.judges.trees.TreeEnsemble`, the shipped
    model). The file names its feature columns; each must be one this code computes, so a weight file and
    the code cannot silently disagree about what column 5 means.
    """

    __slots__ = ("_coef", "_columns", "_intercept", "_linear", "_select", "_trees", "prior_spread")

    def __init__(self, faith: dict[str, Any]) -> None:
        names = list(faith["features"])
        unknown = [n for n in names if n not in FAITH_FEATURES]
        if unknown or not names:
            raise ValueError(f"faithfulness features do not match this code: {unknown or 'none'}")
        self._columns = np.array([FAITH_FEATURES.index(n) for n in names], dtype=np.intp)
        self._trees: TreeEnsemble | None = None
        self._intercept = float(faith.get("intercept", 0.0))
        coef = faith.get("coef")
        if coef is None and "trees" not in faith:
            raise ValueError("faithfulness weights have neither coefficients nor trees")
        self._coef = np.zeros(len(names)) if coef is None else np.asarray(coef, dtype=np.float64)
        if len(self._coef) != len(names):
            raise ValueError("faithfulness coefficients do not match the feature list")
        if "trees" in faith:
            self._trees = TreeEnsemble(faith["trees"], len(names))
        self._linear = bool(np.any(self._coef))
        self._select = names != list(FAITH_FEATURES)  # a subset or another order: pick the columns
        #: How the odds of support rise with the number of verifiable claims n of the answer: × n ** spread.
        self.prior_spread = float(faith.get("prior_spread", 0.0))

    def predict(self, rows: Sequence[Sequence[float]], offset: float = 0.0) -> list[float]:
        """P(supported) per row of full feature vectors (``FAITH_FEATURES`` order): the logistic part plus
        the trees' correction, so where the trees saw no training data the linear trend still holds.
        ``offset`` is added to every logit (the claim-count prior, see :func:`_analyse_claims`)."""
        if not rows:
            return []
        x = np.array(rows, dtype=np.float64)
        if self._select:
            x = x[:, self._columns]
        z = self._trees.margin(x) if self._trees is not None else np.zeros(len(rows))
        if self._linear:
            z += x @ self._coef
        z += self._intercept + offset
        return [sigmoid(v) for v in z.tolist()]


def _check_weights(weights: dict[str, Any]) -> None:
    ClaimModel(weights["faithfulness"])


# --------------------------------------------------------------------------------------- the context


def _merge_polarity(
    into: dict[tuple[str, ...], int], mixed: set[tuple[str, ...]], new: dict[tuple[str, ...], int]
) -> None:
    for tok, pol in new.items():
        if tok in into and into[tok] != pol:
            mixed.add(tok)
        into[tok] = pol


class _Context:
    """Everything about the retrieved chunks the claims are compared with, computed once per sample.

    Sentences are the alignment windows; an inverted index (token → sentences) lets a claim find its
    best-aligned sentences by touching only the sentences that share a token with it.
    """

    __slots__ = (
        "all_tokens",
        "bigrams",
        "chunk_ids",
        "chunk_texts",
        "free_tokens",
        "json_pol",
        "numbers",
        "postings",
        "sent_approx",
        "sent_chunk",
        "sent_modal",
        "sent_neg",
        "sent_seq",
        "sent_span",
        "sent_strong",
        "sent_tokens",
        "sent_weight",
    )

    def __init__(self, chunk_ids: list[str], chunk_texts: list[str], analyses: list[TextAnalysis]) -> None:
        self.chunk_ids = chunk_ids
        self.chunk_texts = chunk_texts
        self.sent_tokens: list[frozenset[str]] = []
        self.sent_seq: list[list[str]] = []
        self.sent_weight: list[int] = []
        self.sent_chunk: list[int] = []
        self.sent_span: list[tuple[int, int]] = []
        self.sent_neg: list[int] = []
        self.sent_strong: list[bool] = []
        self.sent_modal: list[bool] = []
        self.sent_approx: list[bool] = []
        self.postings: dict[str, list[int]] = {}
        self.bigrams: set[tuple[str, str]] = set()
        self.all_tokens: set[str] = set()
        self.numbers: dict[str, set[str | None]] = {}
        self.json_pol: dict[tuple[str, ...], int] = {}
        self.free_tokens: set[str] = set()
        mixed: set[tuple[str, ...]] = set()
        postings = self.postings
        for ci, (text, an) in enumerate(zip(chunk_texts, analyses, strict=True)):
            for mention in an.numbers:
                self.numbers.setdefault(mention.value, set()).add(mention.unit)
            pol, free_text = json_polarity(text)
            if pol:
                _merge_polarity(self.json_pol, mixed, pol)
                self.free_tokens.update(content_tokens(free_text))
            for k, toks in enumerate(an.tokens):
                if not toks:
                    continue
                si = len(self.sent_tokens)
                tokset = frozenset(toks)
                self.sent_tokens.append(tokset)
                self.sent_seq.append(toks)
                self.sent_weight.append(sum(token_prior(t) for t in tokset))
                self.sent_chunk.append(ci)
                self.sent_span.append(an.spans[k])
                self.sent_neg.append(an.negations[k])
                self.sent_strong.append(an.strong[k])
                self.sent_modal.append(an.modal[k])
                self.sent_approx.append(an.approx[k])
                self.all_tokens |= tokset
                self.bigrams.update(itertools.pairwise(toks))
                for t in tokset:
                    if t in postings:
                        postings[t].append(si)
                    else:
                        postings[t] = [si]
            if not pol:
                self.free_tokens |= self.all_tokens
        for key in mixed:
            self.json_pol.pop(key, None)
        for key in list(self.json_pol):
            if all(t in self.free_tokens for t in key):  # the free text (a review) speaks about it too
                del self.json_pol[key]

    def sentence_scores(self, claim_toks: Iterable[str], weights: dict[str, int]) -> dict[int, int]:
        """Weighted overlap of the claim with every sentence that shares at least one token with it."""
        scores: dict[int, int] = {}
        postings = self.postings
        for t in claim_toks:
            w = weights[t]
            for si in postings.get(t, ()):
                scores[si] = scores.get(si, 0) + w
        return scores

    def best_pair(self, claim_toks: set[str], weights: dict[str, int], scores: dict[int, int]) -> tuple[int, int]:
        """Best pair of adjacent sentences of one chunk, looked for around the best single sentences only."""
        best_p, best_pi = -1, -1
        top = sorted(scores, key=lambda i: (-scores[i], i))[:4]
        chunk_of = self.sent_chunk
        n = len(self.sent_tokens)
        for si in top:
            for a in (si - 1, si):
                b = a + 1
                if a < 0 or b >= n or chunk_of[a] != chunk_of[b]:
                    continue
                union = self.sent_tokens[a] | self.sent_tokens[b]
                sc = sum(weights[t] for t in claim_toks if t in union)
                if sc > best_p:
                    best_p, best_pi = sc, a
        return best_p, best_pi

    def sent_approx_numbers(self, si: int) -> set[str]:
        """Numbers one sentence approximates ("about 30"), computed on demand."""
        if not self.sent_approx[si]:
            return set()
        ci = self.sent_chunk[si]
        s, e = self.sent_span[si]
        return approximated_numbers(self.chunk_texts[ci][s:e])

    def sent_entities(self, si: int) -> set[str]:
        """Capitalised-name tokens of one sentence, computed on demand."""
        ci = self.sent_chunk[si]
        s, e = self.sent_span[si]
        return entity_tokens(self.chunk_texts[ci][s:e])

    def sent_scopes(self, si: int) -> list[set[str]]:
        """Negation scopes of one sentence, computed on demand (only twins of a claim ever need them)."""
        if not self.sent_neg[si]:
            return []
        ci = self.sent_chunk[si]
        s, e = self.sent_span[si]
        return negation_scopes(self.chunk_texts[ci][s:e])

    def evidence(self, si: int, pair: bool) -> tuple[str, str]:
        """Chunk id and the exact quote (a substring of that chunk) of a sentence or a sentence pair."""
        ci = self.sent_chunk[si]
        s, e = self.sent_span[si]
        if pair and si + 1 < len(self.sent_span) and self.sent_chunk[si + 1] == ci:
            e = self.sent_span[si + 1][1]
        return self.chunk_ids[ci], self.chunk_texts[ci][s:e]


# ------------------------------------------------------------------------------------------- claims


@dataclass(slots=True)
class ClaimAnalysis:
    """One claim with its features and verdict; ``p_supported`` is the calibrated probability."""

    claim: Claim
    unverifiable: bool
    features: list[float]
    rule: str | None
    p_supported: float
    verdict: str
    chunk_id: str | None
    evidence: str | None

    def as_detail(self) -> dict[str, Any]:
        if self.verdict == UNVERIFIABLE:
            confidence = 0.9
        elif self.verdict == SUPPORTED:
            confidence = self.p_supported
        else:
            confidence = 1.0 - self.p_supported
        detail = {
            "text": self.claim.text,
            "start": self.claim.start,
            "end": self.claim.end,
            "verdict": self.verdict,
            "chunk_id": self.chunk_id,
            "evidence": self.evidence,
            "confidence": round(confidence, 4),
        }
        if self.verdict != UNVERIFIABLE:
            detail["p_supported"] = round(self.p_supported, 4)
        if self.rule:
            detail["rule"] = self.rule
        return detail


#: Every refusal pattern contains one of these; checking them first skips the big regex for most claims.
_REFUSAL_KEYS = (
    "know", "sure", "certain", "aware", "unable", "cannot", "can't", "n't", "not", "no ", "never", "fail",
    "insufficient", "enough", "none of", "impossible", "possible", "information", "details", "answer", "无法", "不",
    "没", "未",
)  # fmt: skip
#: Only a claim with a digit (or "seven days a week") can hold a citation or a neutral number.
_HAS_DIGIT_RE = re.compile(r"\d|seven days", re.IGNORECASE)


def is_unverifiable(text: str) -> bool:
    """Refusals, meta statements about the context and framing lines assert nothing checkable."""
    stripped = text.strip().strip("*_#").strip()
    low = stripped.lower()
    return (
        (any(k in low for k in _REFUSAL_KEYS) and _REFUSAL_RE.search(stripped) is not None)
        or _FRAMING_RE.search(stripped) is not None
        or _COURTESY_RE.search(stripped) is not None
    )


def _units_compatible(unit: str, known: set[str]) -> bool:
    if unit in known:
        return True
    family = _UNIT_FAMILY.get(unit)
    return any(_UNIT_FAMILY.get(k) == family for k in known) if family else False


def _numbers_check(num_toks: set[str], mentions: list[NumberMention], ctx: _Context) -> tuple[float, float]:
    """Share of the claim's numbers absent from the context, and whether a unit contradicts one."""
    if not num_toks:
        return 0.0, 0.0
    missing = sum(1 for t in num_toks if t not in ctx.all_tokens)
    unit_bad = 0.0
    for m in mentions:
        units = ctx.numbers.get(m.value)
        if units is None or m.unit is None or m.unit in units:
            continue
        known = {u for u in units if u is not None}
        if known and not _units_compatible(m.unit, known):
            unit_bad = 1.0
    return missing / len(num_toks), unit_bad


#: A claim that says a value is not known agrees with a null one.
_UNKNOWN_RE = re.compile(
    r"\b(?:unknown|unspecified|unclear|not (?:specified|mentioned|listed|provided|stated|known|indicated))\b", re.I
)


def _json_conflict(plain: str, tokset: set[str], negations: int, json_pol: dict[tuple[str, ...], int]) -> float:
    """1 when the claim names a key of a structured chunk with the opposite polarity ("offers WiFi" against
    ``"WiFi": "no"``), or asserts a value the record leaves null; keys whose polarity the claim leaves
    unclear (the tail of a negated list) are not judged."""
    negated, unclear = negation_reach(plain) if negations else (set(), set())
    for key, pol in json_pol.items():
        if not all(t in tokset for t in key):
            continue
        neg = any(t in negated for t in key)
        if not neg and any(t in unclear for t in key):
            continue
        if pol == 0:
            if _UNKNOWN_RE.search(plain) is None:
                return 1.0
        elif (pol < 0) != neg:
            return 1.0
    return 0.0


def _longest_missing_run(toks: list[str], present: set[str], skip: set[str]) -> int:
    run = best = 0
    for t in toks:
        if t in skip:
            continue
        if t in present:
            run = 0
        else:
            run += 1
            best = max(best, run)
    return best


def _phrase_support(toks: list[str], ctx: _Context, si: int) -> float:
    """Share of the claim's token bigrams found in its best sentence and the one after it (same chunk):
    phrases supported *locally*, not scattered over the whole context."""
    bigrams = list(itertools.pairwise(toks))
    if not bigrams or si < 0:
        return 0.0
    seq = ctx.sent_seq[si]
    local = set(itertools.pairwise(seq))
    nxt = si + 1
    if nxt < len(ctx.sent_seq) and ctx.sent_chunk[nxt] == ctx.sent_chunk[si]:
        local.update(itertools.pairwise(ctx.sent_seq[nxt]))
    return sum(1 for b in bigrams if b in local) / len(bigrams)


def _analyse_claims(
    claims: list[Claim],
    question_toks: set[str],
    ctx: _Context,
    model: ClaimModel,
    threshold: float,
    vetoes: frozenset[str] = frozenset(RULES),
) -> list[ClaimAnalysis]:
    out: list[ClaimAnalysis] = []
    pending: list[tuple[int, int]] = []  # (index in out, best sentence) of the claims the model decides
    rows: list[list[float]] = []
    has_context = bool(ctx.sent_tokens)
    n_features = len(FAITH_FEATURES)
    for claim in claims:
        text = mask_inline_code(claim.text)
        if is_unverifiable(text):
            out.append(ClaimAnalysis(claim, True, [], None, 0.0, UNVERIFIABLE, None, None))
            continue
        plain = _CITATION_RE.sub(" ", text) if _HAS_DIGIT_RE.search(text) else text
        if "(" in plain:
            plain = _CONVERSION_RE.sub(" ", plain)
        sc = scan(plain)
        toks = sc.tokens
        tokset = set(toks)
        if not has_context:
            feats = [0.0] * n_features
            out.append(ClaimAnalysis(claim, False, feats, "no_context", 0.0, UNSUPPORTED, None, None))
            continue
        given = question_toks | _META
        check = {t for t in tokset if t not in given or t[0] == "#"}
        weights = {t: token_prior(t) for t in tokset}
        total = sum(weights[t] for t in check)
        full_total = sum(weights.values())
        all_tokens = ctx.all_tokens
        if total < 10:  # the claim only restates the question or talks about the passages: nothing to check
            cov_all = cov_sent = cov_pair = 1.0
            scores = ctx.sentence_scores(tokset, weights)
            check = tokset
            miss_weight = 0.0
        else:
            covered = sum(weights[t] for t in check if t in all_tokens)
            cov_all = covered / total
            miss_weight = min(1.0, (total - covered) / 100)
            scores = ctx.sentence_scores(check, weights)
            best = max(scores.values()) if scores else 0
            cov_sent = best / total
            best_p, _ = ctx.best_pair(check, weights, scores) if scores else (0, -1)
            cov_pair = max(best_p, best) / total
        si = min(scores, key=lambda i: (-scores[i], i)) if scores else -1
        bigrams = list(itertools.pairwise(toks))
        cov_phrase = sum(1 for b in bigrams if b in ctx.bigrams) / len(bigrams) if bigrams else cov_all
        ents = (entity_tokens(plain) & tokset) - given
        miss_entity = sum(1 for t in ents if t not in all_tokens) / len(ents) if ents else 0.0
        num_toks = {t for t in tokset if t[0] == "#"}
        mentions = sc.numbers
        num_missing, unit_bad = _numbers_check(num_toks, mentions, ctx)
        digits_missing = any(m.value not in all_tokens and m.value not in question_toks for m in mentions)
        neg_flip = hedge_drop = modal_drop = 0.0
        # Rules look at the whole claim, question words included: "was not approved" negates words the
        # question ("was it approved?") already contains.
        full_scores = scores if check == tokset else ctx.sentence_scores(tokset, weights)
        top = max(full_scores.values()) if full_scores else 0
        if len(tokset) >= 3 and top >= 0.6 * full_total:
            near = [i for i, v in full_scores.items() if v >= top - 0.1 * full_total and v >= 0.6 * full_total]
            # a negation flip is only read off a sentence that says nearly the same thing both ways
            twins = [i for i, v in full_scores.items() if v >= 0.8 * full_total and v >= 0.5 * ctx.sent_weight[i]]
            if twins:
                claim_scopes = negation_scopes(plain) if sc.negation_count else []
                flips = 0
                for i in twins:
                    sent_toks = ctx.sent_tokens[i]
                    mine = sum(1 for scope in claim_scopes if scope & sent_toks)
                    theirs = sum(1 for scope in ctx.sent_scopes(i) if scope & tokset)
                    flips += (mine - theirs) % 2
                if flips == len(twins):
                    neg_flip = 1.0
            if not (sc.strong or sc.modal or sc.approx or sc.ranged):
                bare = num_toks - sc.approx_numbers
                if all(ctx.sent_strong[i] or (bare and bare & ctx.sent_approx_numbers(i)) for i in near):
                    hedge_drop = 1.0
                elif all(ctx.sent_modal[i] for i in near):
                    modal_drop = 1.0
        # Entity swap: every other word of the claim sits in one sentence, which names someone or something
        # else where the claim names an entity the context never mentions ("in Paris" vs "in Rome").
        entity_swap = 0.0
        missing_ents = {t for t in ents if t not in all_tokens}
        if missing_ents and full_scores:
            rest_total = full_total - sum(weights[t] for t in missing_ents)
            best_i = min(full_scores, key=lambda i: (-full_scores[i], i))
            if rest_total >= 10 and full_scores[best_i] >= 0.8 * rest_total:
                entity_swap = 1.0 if ctx.sent_entities(best_i) - tokset else 0.0
        json_conflict = _json_conflict(plain, tokset, sc.negation_count, ctx.json_pol) if ctx.json_pol else 0.0
        strong = {t for t in check if weights[t] >= 10}
        miss_count = min(4, sum(1 for t in strong if t not in all_tokens)) / 4
        miss_run = min(3, _longest_missing_run(toks, all_tokens, given)) / 3
        if si < 0 and full_scores:  # nothing to check matched: quote the sentence closest to the whole claim
            si = min(full_scores, key=lambda i: (-full_scores[i], i))
        # The finer alignment: how local the support is (phrases, numbers and names in the best sentence
        # and the next one rather than anywhere in the context), how much of that sentence the claim uses,
        # how much weight is missing, a negation count that differs from the aligned sentence's. Features
        # saying what *kind* of claim it is (length, language, context size) were tried and dropped: they
        # let the trees learn each training set's quirks and cost leave-one-dataset-out transfer.
        local = ctx.sent_tokens[si] if si >= 0 else frozenset()
        if si >= 0 and si + 1 < len(ctx.sent_tokens) and ctx.sent_chunk[si + 1] == ctx.sent_chunk[si]:
            local = local | ctx.sent_tokens[si + 1]
        sent_prec = full_scores.get(si, 0) / ctx.sent_weight[si] if si >= 0 and ctx.sent_weight[si] else 0.0
        neg_parity = 0.0
        if si >= 0 and cov_sent >= 0.5 and (sc.negation_count - ctx.sent_neg[si]) % 2:
            neg_parity = 1.0
        feats = [
            cov_all,
            cov_sent,
            cov_pair,
            cov_phrase,
            miss_entity,
            num_missing,
            unit_bad,
            neg_flip,
            hedge_drop,
            modal_drop,
            json_conflict,
            miss_count,
            miss_run,
            entity_swap,
            1.0 if digits_missing else 0.0,
            _phrase_support(toks, ctx, si),
            min(1.0, sent_prec),
            miss_weight,
            neg_parity,
            sum(1 for t in num_toks if t in local) / len(num_toks) if num_toks else 1.0,
            sum(1 for t in ents if t in local) / len(ents) if ents else 1.0,
        ]
        rule = None
        if digits_missing:
            rule = "number_not_in_context"
        elif unit_bad:
            rule = "unit_mismatch"
        elif neg_flip:
            rule = "negation_flip"
        elif hedge_drop:
            rule = "hedge_dropped"
        elif json_conflict:
            rule = "structured_value_conflict"
        elif entity_swap:
            rule = "entity_not_in_context"
        elif total >= 10 and cov_all == 0.0:  # not one word of what the claim adds is in the context
            rule = "nothing_in_context"
        if rule not in vetoes:  # the data did not find this rule strong enough for a hard verdict
            rule = None
        chunk_id = evidence = None
        if si >= 0:
            chunk_id, evidence = ctx.evidence(si, False)
        pending.append((len(out), si))
        rows.append(feats)
        out.append(ClaimAnalysis(claim, False, feats, rule, 0.0, UNSUPPORTED, chunk_id, evidence))
    spread = model.prior_spread * math.log(len(pending)) if len(pending) > 1 else 0.0
    for (i, _), p in zip(pending, model.predict(rows, spread), strict=True):
        a = out[i]
        a.verdict = SUPPORTED if p >= threshold and a.rule is None else UNSUPPORTED
        a.p_supported = min(p, 0.25) if a.rule is not None else p
    return out


# ---------------------------------------------------------------------------------------------- judge


def faithfulness(analyses: Sequence[ClaimAnalysis]) -> tuple[float, str, set[str]]:
    """supported / (claims − unverifiable); its explanation; and the chunks the supported claims came from.

    1.0 when nothing verifiable was said (a refusal, meta statements): nothing was invented. Shared by every
    judge built on these claim analyses, so the definition cannot drift between them.
    """
    verifiable = [a for a in analyses if not a.unverifiable]
    used = {a.chunk_id for a in verifiable if a.verdict == SUPPORTED and a.chunk_id}
    if not verifiable:
        return 1.0, "no verifiable claim: the answer asserts nothing checkable (refusal or meta statements only)", used
    supported = sum(1 for a in verifiable if a.verdict == SUPPORTED)
    return supported / len(verifiable), f"{supported} of {len(verifiable)} verifiable claims supported", used


def build_verdict(
    k: int,
    chunks: Sequence[SampleChunk],
    rels: Sequence[float],
    answer: str | None,
    analyses: Sequence[ClaimAnalysis],
    answer_relevance: Callable[[], float],
) -> Verdict:
    """Scores and details from per-chunk relevances and claim analyses; shared by the judges built on
    these analyses so their records have one shape. No answer → no faithfulness; an empty one → 0 relevance."""
    scores: dict[str, float] = {
        CONTEXT_RELEVANCE: sum(rels) / len(rels) if rels else 0.0,
        context_precision(k): context_precision_mean(rels, k),
        context_precision_ranked(k): context_precision_rank_aware(rels, k),
    }
    details: dict[str, Any] = {}
    used: set[str] = set()
    if answer is not None and answer.strip():
        scores[FAITHFULNESS], details["faithfulness_basis"], used = faithfulness(analyses)
        details["claims"] = [a.as_detail() for a in analyses]
        scores[ANSWER_RELEVANCE] = answer_relevance()
    elif answer is not None:
        details["claims"] = []
        scores[ANSWER_RELEVANCE] = 0.0
        details["faithfulness_basis"] = "empty answer: no faithfulness score"
    else:
        details["faithfulness_basis"] = "no answer in the sample: no faithfulness score"
    details["chunks"] = [
        {"id": c.id, "relevance": round(r, 4), "used": c.id in used} for c, r in zip(chunks, rels, strict=True)
    ]
    return Verdict(scores=scores, details=details)


class OfflineJudge:
    """Faithfulness, chunk relevance, Context Precision@K and answer relevance, offline.

    ``k`` is the K of Context Precision@K. ``version`` carries a hash of the weights (faithfulness and
    relevance), so scores from a re-trained judge are never mixed with older ones.
    """

    name = "offline"

    def __init__(
        self,
        k: int = 3,
        weights_path: Path | str | None = None,
        relevance_weights_path: Path | str | None = None,
    ) -> None:
        if k < 1:
            raise ValueError("k must be at least 1")
        self.k = k
        self._weights, digest = load_weights(
            Path(weights_path) if weights_path else WEIGHTS_PATH, _DEFAULT_WEIGHTS, _check_weights, "offline judge"
        )
        self._relevance = RelevanceScorer(relevance_weights_path)
        self.version = f"1+{digest}+{self._relevance.digest}"
        faith = self._weights["faithfulness"]
        self._model = ClaimModel(faith)
        self.threshold = float(faith.get("threshold", 0.5))
        #: The hard rules that decide a claim whatever the model says (the rest are only features).
        self.vetoes = frozenset(faith.get("vetoes", RULES))

    # -- relevance

    def relevance(
        self, question: str, texts: Sequence[str], analyses: Sequence[TextAnalysis] | None = None
    ) -> list[float]:
        """Graded relevance (0..1) of each text to the question (:mod:`ragwatch.scoring.judges.relevance`); a chunk
        without text (hashed away, or empty) cannot be relevant."""
        return self._relevance.score(question or "", texts, analyses)

    # -- faithfulness

    def analyse(self, sample: Sample) -> list[ClaimAnalysis]:
        """Claims of the answer with their features and verdicts (used by :meth:`score` and training)."""
        _, _, ctx = self._prepare(sample)
        return self._analyse(sample, ctx)

    @staticmethod
    def _prepare(sample: Sample) -> tuple[list[SampleChunk], list[TextAnalysis], _Context]:
        """Chunks in rank order, each analysed once; the context the claims are checked against."""
        chunks = sorted(sample.chunks, key=lambda c: c.rank)
        analyses = [analyse_text(c.text or "") for c in chunks]
        keep = [i for i, c in enumerate(chunks) if c.text]
        ctx = _Context([chunks[i].id for i in keep], [chunks[i].text or "" for i in keep], [analyses[i] for i in keep])
        return chunks, analyses, ctx

    def _analyse(self, sample: Sample, ctx: _Context) -> list[ClaimAnalysis]:
        claims = split_claims(sample.answer or "")
        q_toks = set(content_tokens(sample.question or ""))
        return _analyse_claims(claims, q_toks, ctx, self._model, self.threshold, self.vetoes)

    # -- the Judge protocol

    def score(self, sample: Sample) -> Verdict:
        """Scores and evidence for one sample (see the module docstring for what each score means)."""
        chunks, text_analyses, ctx = self._prepare(sample)
        question = sample.question or ""
        rels = self.relevance(question, [c.text or "" for c in chunks], text_analyses) if chunks else []
        answer = sample.answer
        analyses = self._analyse(sample, ctx) if answer is not None and answer.strip() else []
        return build_verdict(
            self.k, chunks, rels, answer, analyses, lambda: self._answer_relevance(question, answer or "", analyses)
        )

    def _answer_relevance(self, question: str, answer: str, analyses: list[ClaimAnalysis]) -> float:
        """Does the answer address the question (:mod:`ragwatch.scoring.judges.answer_relevance`); refusals low."""
        if not analyses:
            return 0.0
        share_refusal = sum(1 for a in analyses if a.unverifiable) / len(analyses)
        return answer_relevance(question, answer, share_refusal)


def claim_labels(claims: Iterable[Claim], spans: Sequence[Sequence[int]]) -> list[bool]:
    """For training and evaluation: a claim overlapping a hallucinated span is unsupported (True)."""
    out = []
    for c in claims:
        out.append(any(s < c.end and c.start < e for s, e in spans))
    return out
