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
claims supported", not a confidence. **hallucination_rate** is 1.0 when any verifiable claim is
UNSUPPORTED (else 0.0), so its window is the share of answers holding an invented claim.
**fully_supported** is the confidence: the product of the verifiable claims' P(supported), the judge's
probability that nothing in the answer was invented. Most answers
have faithfulness 1.0, so only this score can rank them (response AUC on RAGTruth dev 0.85 against 0.77 for
1 − faithfulness; on the training corpus it ranks better on every set too).

Each claim's ``evidence`` is the sentence of a chunk that best covers it — the supporting quote for a
SUPPORTED claim, the closest (insufficient) one for an UNSUPPORTED claim — always a verbatim substring of
the chunk named by ``chunk_id``. Faithfulness is compared to the context only, never to world knowledge:
an answer faithful to a wrong context is faithful.

Each chunk's text analysis (sentences, tokens, cues: about a third of the judge's time) is kept in a
bounded LRU cache keyed by the chunk's text, because a retriever returns the same chunks again and again;
the result is the same either way (``chunk_cache_size=0`` turns it off), and a chunk whose text changed
under the same id is read afresh.

Chunk relevance (each chunk's graded answer to the question, and Context Precision@K from it) lives in
:mod:`ragwatch.scoring.judges.relevance`: list-local IDF coverage, answer-type cues and the consensus of the
retrieved chunks, with its own weights (``relevance_weights.json``, ``scripts/train_relevance.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.answer_relevance import answer_relevance, refusal_share
from ragwatch.scoring.judges.base import (
    ANSWER_RELEVANCE,
    CONTEXT_RELEVANCE,
    FAITHFULNESS,
    FULLY_SUPPORTED,
    HALLUCINATION_RATE,
    Verdict,
    claim_scores,
    context_precision,
    context_precision_ranked,
)
from ragwatch.scoring.judges.calibration import load_weights, sigmoid
from ragwatch.scoring.judges.claim_context import ClaimContext
from ragwatch.scoring.judges.claim_features import FAITH_FEATURES, RULES, SUPPORTED, ClaimAnalysis, analyse_claims
from ragwatch.scoring.judges.claims import Claim, split_claims
from ragwatch.scoring.judges.evidence import settle_evidence
from ragwatch.scoring.judges.lru import LRUCache
from ragwatch.scoring.judges.relevance import RelevanceScorer
from ragwatch.scoring.judges.text import TextAnalysis, analyse_text, content_tokens
from ragwatch.scoring.judges.trees import TreeEnsemble
from ragwatch.scoring.retrieval_metrics import context_precision_mean
from ragwatch.scoring.retrieval_metrics import context_precision_ranked as context_precision_rank_aware

__all__ = [
    "WEIGHTS_PATH",
    "ClaimModel",
    "OfflineJudge",
    "build_verdict",
    "claim_labels",
    "faithfulness",
    "fully_supported",
    "hallucinated",
]


WEIGHTS_PATH = Path(__file__).with_name("offline_weights.json")

# Fallback weights so the judge works before (or without) a trained file; replaced by the trained ones.
_DEFAULT_WEIGHTS: dict[str, Any] = {
    "faithfulness": {
        "features": list(FAITH_FEATURES),
        "coef": [2.0, 3.0, 1.0, 2.0, -2.0, -3.0, -3.0, -3.0, -2.0, -0.5, -2.0, -1.0, -1.0] + [0.0] * 8,
        "intercept": -3.0,
        "threshold": 0.5,
    },
}


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
        ``offset`` is added to every logit (the claim-count prior, see
        :func:`~ragwatch.scoring.judges.claim_features.analyse_claims`)."""
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


# ---------------------------------------------------------------------------------------------- judge


def faithfulness(analyses: Sequence[ClaimAnalysis]) -> tuple[float, str, set[str]]:
    """supported / (claims − unverifiable); its explanation; and the chunks the supported claims came from.

    1.0 when nothing verifiable was said (a refusal, meta statements): nothing was invented. Shared by every
    judge built on these claim analyses, so the definition cannot drift between them.
    """
    verifiable = [a for a in analyses if not a.unverifiable]
    used = {a.chunk_id for a in verifiable if a.verdict == SUPPORTED and a.chunk_id}
    supported = sum(1 for a in verifiable if a.verdict == SUPPORTED)
    score = claim_scores(supported, len(verifiable) - supported)[FAITHFULNESS]
    if not verifiable:
        return (
            score,
            "no verifiable claim: the answer asserts nothing checkable (refusal or meta statements only)",
            used,
        )
    return score, f"{supported} of {len(verifiable)} verifiable claims supported", used


def hallucinated(analyses: Sequence[ClaimAnalysis]) -> float:
    """``hallucination_rate`` of one answer: 1.0 when a verifiable claim is UNSUPPORTED, else 0.0."""
    verifiable = [a for a in analyses if not a.unverifiable]
    supported = sum(1 for a in verifiable if a.verdict == SUPPORTED)
    return claim_scores(supported, len(verifiable) - supported)[HALLUCINATION_RATE]


def fully_supported(analyses: Sequence[ClaimAnalysis]) -> float:
    """P(every verifiable claim is supported), the claims taken as independent; 1.0 with none to check.

    Vetoed claims count with their capped P (at most ``VETO_CAP``, 0.25), so an answer with one veto still ranks below
    one whose claims are merely doubtful.
    """
    p = 1.0
    for a in analyses:
        if not a.unverifiable:
            p *= a.p_supported
    return p


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
        scores[HALLUCINATION_RATE] = hallucinated(analyses)
        scores[FULLY_SUPPORTED] = fully_supported(analyses)
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


#: the scoring scheme, the first part of :attr:`OfflineJudge.version`; it moves when the scoring code changes
#: what a score means with the same weights, once per release (2: short answers grounded in the chunks read
#: answer relevance 1.0, and only refusals — not citations or lead-ins — lower it)
SCHEME = 2


class OfflineJudge:
    """Faithfulness, chunk relevance, Context Precision@K and answer relevance, offline.

    ``k`` is the K of Context Precision@K. ``version`` carries a hash of the weights (faithfulness and
    relevance), so scores from a re-trained judge are never mixed with older ones. ``chunk_cache_size``
    bounds the cache of chunk analyses (about 6 kB each with its key for a 150-word chunk, so
    the default 2048 hold about 12 MB; 0 keeps none). ``threshold`` replaces the weight file's claim
    threshold and ``relevance_offset`` shifts the relevance calibration (a logit; ``relevance_offset_cjk``
    for questions in CJK script, unset: the same): the numbers that carry a base rate, which a team may set
    for its own traffic (``ragwatch eval-judge --thresholds`` and ``--calibration`` suggest them from
    labelled files).
    """

    name = "offline"

    def __init__(
        self,
        k: int = 3,
        weights_path: Path | str | None = None,
        relevance_weights_path: Path | str | None = None,
        *,
        chunk_cache_size: int = 2048,
        threshold: float | None = None,
        relevance_offset: float = 0.0,
        relevance_offset_cjk: float | None = None,
    ) -> None:
        if k < 1:
            raise ValueError("k must be at least 1")
        if threshold is not None and not 0.0 < threshold < 1.0:
            raise ValueError("threshold must be between 0 and 1")
        self.k = k
        self._chunks = LRUCache(chunk_cache_size)
        self._weights, digest = load_weights(
            Path(weights_path) if weights_path else WEIGHTS_PATH, _DEFAULT_WEIGHTS, _check_weights, "offline judge"
        )
        self._relevance = RelevanceScorer(
            relevance_weights_path, offset=relevance_offset, offset_cjk=relevance_offset_cjk
        )
        faith = self._weights["faithfulness"]
        self._model = ClaimModel(faith)
        self.threshold = float(faith.get("threshold", 0.5)) if threshold is None else float(threshold)
        # a threshold of the team's own changes verdicts, so it is part of the version their scores carry; the
        # scheme in front lets the report see scores of two scoring codes mixed
        self.version = f"{SCHEME}+{digest}+{self._relevance.digest}" + ("" if threshold is None else f"+t{threshold:g}")
        #: The hard rules that decide a claim whatever the model says (the rest are only features).
        self.vetoes = frozenset(faith.get("vetoes", RULES))

    # -- relevance

    def relevance(
        self, question: str, texts: Sequence[str], analyses: Sequence[TextAnalysis] | None = None
    ) -> list[float]:
        """Graded relevance (0..1) of each text to the question (:mod:`ragwatch.scoring.judges.relevance`); a chunk
        without text (hashed away, or empty) cannot be relevant."""
        if analyses is None:
            analyses = [self._chunk_analysis(t or "") for t in texts]
        return self._relevance.score(question or "", texts, analyses)

    # -- faithfulness

    def analyse(self, sample: Sample) -> list[ClaimAnalysis]:
        """Claims of the answer with their features and verdicts (used by :meth:`score` and training)."""
        _, _, ctx = self._prepare(sample)
        return self._analyse(sample, ctx)

    def _chunk_analysis(self, text: str) -> TextAnalysis:
        """:func:`analyse_text` of a chunk, from the cache when the same text was read before (callers never
        mutate an analysis, so one object can serve every sample that retrieves the chunk)."""
        found = self._chunks.get(text)
        if found is None:
            found = analyse_text(text)
            self._chunks.put(text, found)
        return found

    def _prepare(self, sample: Sample) -> tuple[list[SampleChunk], list[TextAnalysis], ClaimContext]:
        """Chunks in rank order, each analysed once; the context the claims are checked against."""
        chunks = sorted(sample.chunks, key=lambda c: c.rank)
        analyses = [self._chunk_analysis(c.text or "") for c in chunks]
        keep = [i for i, c in enumerate(chunks) if c.text]
        ctx = ClaimContext(
            [chunks[i].id for i in keep], [chunks[i].text or "" for i in keep], [analyses[i] for i in keep]
        )
        return chunks, analyses, ctx

    def _analyse(self, sample: Sample, ctx: ClaimContext) -> list[ClaimAnalysis]:
        """The claims' verdicts against the context, then each SUPPORTED claim's quote settled on one chunk
        that supports it alone (:mod:`ragwatch.scoring.judges.evidence`)."""
        claims = split_claims(sample.answer or "")
        q_toks = set(content_tokens(sample.question or ""))
        analyses = analyse_claims(claims, q_toks, ctx, self._model, self.threshold, self.vetoes)

        def alone(ci: int) -> list[ClaimAnalysis]:
            text = ctx.chunk_texts[ci]
            one = ClaimContext([ctx.chunk_ids[ci]], [text], [self._chunk_analysis(text)])
            return analyse_claims(claims, q_toks, one, self._model, self.threshold, self.vetoes)

        settle_evidence(analyses, ctx, q_toks, alone)
        return analyses

    # -- the Judge protocol

    def score(self, sample: Sample) -> Verdict:
        """Scores and evidence for one sample (see the module docstring for what each score means)."""
        chunks, text_analyses, ctx = self._prepare(sample)
        question = sample.question or ""
        rels = self.relevance(question, [c.text or "" for c in chunks], text_analyses) if chunks else []
        answer = sample.answer
        analyses = self._analyse(sample, ctx) if answer is not None and answer.strip() else []
        return build_verdict(
            self.k,
            chunks,
            rels,
            answer,
            analyses,
            lambda: self._answer_relevance(question, answer or "", analyses, context=text_analyses),
        )

    def _answer_relevance(
        self,
        question: str,
        answer: str,
        analyses: list[ClaimAnalysis],
        semantic: float | None = None,
        context: Sequence[TextAnalysis] = (),
    ) -> float:
        """Does the answer address the question (:mod:`ragwatch.scoring.judges.answer_relevance`); refusals low.
        ``semantic``: the embedding judge's claim–question similarity, which may raise it under the caps;
        ``context``: the chunks' analyses, which may show a short answer is this question's."""
        if not analyses:
            return 0.0
        return answer_relevance(question, answer, refusal_share(analyses), semantic, context)


def claim_labels(claims: Iterable[Claim], spans: Sequence[Sequence[int]]) -> list[bool]:
    """For training and evaluation: a claim overlapping a hallucinated span is unsupported (True)."""
    out = []
    for c in claims:
        out.append(any(s < c.end and c.start < e for s, e in spans))
    return out
