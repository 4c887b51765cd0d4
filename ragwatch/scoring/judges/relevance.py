"""Chunk relevance for the offline judge: :class:`RelevanceScorer`, and the list model kept for training.

What the judges read is :class:`RelevanceScorer`, the **graded** relevance of
:mod:`ragwatch.scoring.judges.relevance_graded`: a function of the question and one chunk alone, so
Context Precision@K against a fixed SLA means the same whatever else was retrieved. What follows describes
the *list* model that used to be the score (its calibration read the gap to the list's best chunk and the
list's length, so the mean of any list came out about the same — which a fixed SLA cannot live with). It
ranks a list well and is still fitted by ``scripts/train_relevance.py``; it no longer enters a score.

The list model always scores a *list* of chunks retrieved for one question, and everything in it uses that:

1. **Direct features** of each chunk (:data:`DIRECT_FEATURES`, all cheap): how much of the question it
   covers, weighted by a prior and by an IDF computed over the list itself (a word every chunk shares is the
   topic and separates nothing; no corpus is shipped or downloaded), in the whole chunk and in its best
   sentence, CJK characters as well as bigrams (Chinese paraphrases share characters more than bigrams);
   whether it *leads* with the question's subject; and answer-type cues — the chunk carries the kind of
   thing the question asks for: a full date for "when"/"何时" (a leading "Mar 3, 2021 ..." search-snippet
   date stamp does not count), a count for "how many"/"多少" (not a year) and better a count *of the asked
   thing* ("how many teams" → "30 teams"), a measure with a unit for "how old/tall/far", an agent for "who
   invented" ("by …", "… wrote"), an enumeration for "which countries"/"哪些", a definition for "what is X"
   (better: one that starts with X), a cause for "why", a means for "how"; and, as the one negative cue,
   mentioning only other years than the one the question asks about.
2. **Consensus** (pseudo-relevance feedback): the chunks that answer a question tend to share the answer
   ("Hideki Matsuyama", "2022年12月9日"), which chunks that are merely on topic lack. Each chunk votes, with
   a first-stage relevance computed from the direct features, for the non-question words of its
   question-bearing sentences. Leaving the chunk being scored out (it never votes for itself), a word's
   support is how far the votes of the other chunks containing it exceed their mean vote: a word all of them
   share (the topic) gets none. A chunk's consensus is the mean support (capped at one vote) of the ten
   best-supported words that it contains.
3. A **linear score** of all features, fitted to rank each question's candidates (a conditional logit,
   every weight constrained to its sensible sign), and a **calibration** to a probability of relevance from
   the score, its gap to the best score of the list (the best chunk of a list of fair chunks reads as
   relevant even though chunks of a list rarely differ by much in absolute terms, and a chunk far below the
   list's best reads low) and the log of the list's length (the more candidates, the smaller the share that
   is relevant). The intercept is a base rate, and base rates differ a lot between corpora and languages,
   so there are two: one for questions written in CJK script, one for the rest.

Words are compared as roots: the shared stemmer's output with a derivational suffix removed and cut to five
letters, so "produced", "production" and "producer" meet (the claims check keeps the stricter stems).

The weights live in ``relevance_weights.json``, fitted by ``scripts/train_relevance.py`` on the training
corpus (``train/relevance/``), only the two calibration intercepts set on the dev files; the file records
its grouped cross-validation and leave-one-dataset-out figures. Context Precision@K follows from these
relevances (:mod:`ragwatch.scoring.retrieval_metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragwatch.scoring.judges import calibration
from ragwatch.scoring.judges.calibration import sigmoid
from ragwatch.scoring.judges.relevance_cues import (
    _CJK_RE,
    _CJK_STOP,
    ANSWER_CUES,
    QuestionCues,
    _root,
    is_cjk_question,
    question_kind,
    type_match,
)
from ragwatch.scoring.judges.relevance_graded import GradedModel, graded_features
from ragwatch.scoring.judges.text import TextAnalysis, analyse_text, token_prior

__all__ = [
    "DIRECT_FEATURES",
    "RELEVANCE_FEATURES",
    "RELEVANCE_SIGNS",
    "SIMILARITY_FEATURES",
    "SIMILARITY_WEIGHTS_PATH",
    "WEIGHTS_PATH",
    "Candidates",
    "RelevanceScorer",
    "analyse_candidates",
    "consensus",
    "is_cjk_question",
    "question_kind",
    "type_match",
]


WEIGHTS_PATH = Path(__file__).with_name("relevance_weights.json")
#: The embedding judge's weights: the same model with its question–chunk cosine as one more ranking
#: feature, fitted by ``scripts/train_embedding_relevance.py``.
SIMILARITY_WEIGHTS_PATH = Path(__file__).with_name("embedding_relevance_weights.json")

#: Features computed from one chunk and the list's IDF, in the order of the weight vectors.
DIRECT_FEATURES = ("coverage", "best_sentence", "cjk_chars", "leads_with_question", *ANSWER_CUES)
#: All features: the direct ones and the consensus of the list.
RELEVANCE_FEATURES = (*DIRECT_FEATURES, "consensus")
#: Every feature is "more overlap / more fitting" except mentioning only other years than the question's.
RELEVANCE_SIGNS = tuple(-1 if name == "other_year" else 1 for name in RELEVANCE_FEATURES)
#: What a caller with a semantic similarity of question and chunk (the embedding judge's cosine) adds. Its
#: gap to the best of the list would add nothing to the ranking (a softmax over the list ignores a shift);
#: the calibration already reads the gap of the whole score.
SIMILARITY_FEATURES = ("similarity",)
#: How many best-supported words make up a list's pseudo-answer.
CONSENSUS_WORDS = 10

#: The embedding judge's raise of answer relevance by the claim–question cosine (0.5 at ``midpoint``), when
#: its weight file has none: the hand-set one that ``scripts/train_embedding_relevance.py`` measures.
_ANSWER_SIMILARITY = {"midpoint": 0.35, "slope": 12.0}

# Fallback so the judge works before (or without) a trained file: coverage-led, roughly calibrated.
_DEFAULT_WEIGHTS: dict[str, Any] = {
    "features": list(RELEVANCE_FEATURES),
    "stage1": {"coef": [1.0, 1.0, 1.0] + [0.5] * 12 + [-0.5], "intercept": -2.0},
    "coef": [1.0, 1.0, 1.0] + [0.5] * 12 + [-0.5, 1.0],
    "calibration": {"scale": 1.0, "gap": 0.0, "intercept": -2.0},
}

# -------------------------------------------------------------------------------------------- features


@dataclass(slots=True)
class Candidates:
    """The chunks retrieved for one question: their direct features and, for the consensus, the
    non-question words of each chunk's sentences that share a word with the question."""

    features: list[list[float]]
    near: list[frozenset[str]]


def analyse_candidates(
    question: str, texts: Sequence[str], analyses: Sequence[TextAnalysis] | None = None
) -> Candidates:
    """Direct features (:data:`DIRECT_FEATURES`) of every text for ``question``; IDF comes from the texts.

    ``analyses`` (from :func:`~ragwatch.scoring.judges.text.analyse_text`) may be passed when the caller has them.
    """
    if analyses is None:
        analyses = [analyse_text(t) for t in texts]
    cues = QuestionCues.of(question)
    q_set = cues.roots
    root = _root
    sents = [[set(map(root, sent)) for sent in an.tokens] for an in analyses]
    docs = [set().union(*ss) for ss in sents]
    n = len(docs)
    zero = [0.0] * len(DIRECT_FEATURES)
    if not q_set:
        return Candidates([list(zero) for _ in texts], [frozenset() for _ in texts])
    df = dict.fromkeys(q_set, 0)
    for doc in docs:
        for t in q_set.intersection(doc):
            df[t] += 1
    # prior weight × smoothed local IDF (BM25's, floored so that a word in every chunk still counts a bit)
    idf = {t: token_prior(t) * max(0.25, math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5))) for t in q_set}
    idf_total = math.fsum(idf.values())  # fsum: exact, so independent of the set's iteration order
    prior_total = sum(token_prior(t) for t in q_set)
    q_chars = {c for c in _CJK_RE.findall(question) if c not in _CJK_STOP}
    char_idf: dict[str, float] = {}
    for c in q_chars:
        cdf = sum(1 for t in texts if c in t)
        char_idf[c] = max(0.25, math.log(1.0 + (n - cdf + 0.5) / (cdf + 0.5)))
    char_total = math.fsum(char_idf.values())
    features: list[list[float]] = []
    near: list[frozenset[str]] = []
    for text, doc, ss, an in zip(texts, docs, sents, analyses, strict=True):
        if not doc:
            features.append(list(zero))
            near.append(frozenset())
            continue
        hits = q_set.intersection(doc)
        coverage = sum(token_prior(t) for t in hits) / prior_total
        best = 0.0
        around: set[str] = set()
        for sent in ss:
            shared = q_set.intersection(sent)
            if shared:
                best = max(best, math.fsum(idf[t] for t in shared) / idf_total)
                around.update(sent)
        near.append(frozenset(around - q_set))
        chars = math.fsum(w for c, w in char_idf.items() if c in text) / char_total if char_total else 0.0
        first = {root(t) for t in an.tokens[0][:3]} if an.tokens else set()
        leads = sum(token_prior(t) for t in first & q_set) / prior_total
        features.append([coverage, best, chars, leads, *cues.answer_cues(text, doc, leads)])
    return Candidates(features, near)


def consensus(near: Sequence[frozenset[str]], votes: Sequence[float], k: int = CONSENSUS_WORDS) -> list[float]:
    """Leave-one-out agreement of each candidate with the likely-relevant others (module docstring), in 0..1.

    ``near[i]`` are candidate i's words, ``votes[i]`` its first-stage relevance. Without candidate i, a word's
    support is ``sum(votes[j] - m for j != i containing it)`` with ``m`` the mean vote of the others: words
    every other candidate has (the topic) get none, words only i has get none. The ``k`` best-supported words
    form the pseudo-answer; i's consensus is the support of those it contains, each capped at 1, over ``k``.
    Absolute on purpose: when every candidate is about equally relevant (three overlapping windows around the
    answer) supports are tiny and so is every consensus, rather than an arbitrary winner taking all. Fewer
    than three candidates: no consensus (0).
    """
    n = len(near)
    out = [0.0] * n
    if n < 3:
        return out
    total_votes = math.fsum(votes)
    vote_sum: dict[str, float] = {}  # sum of the votes of the candidates containing a word
    count: dict[str, int] = {}  # how many candidates contain it
    for words, v in zip(near, votes, strict=True):
        for t in words:
            vote_sum[t] = vote_sum.get(t, 0.0) + v
            count[t] = count.get(t, 0) + 1
    # Words by how many candidates contain them, each group by vote sum: for a fixed count the order of
    # support (vote sum − count × m) does not depend on m, so each candidate reads a few heads of groups.
    # Sorted by (vote sum, word): ties broken by the word, never by set iteration order.
    groups: dict[int, list[tuple[float, str]]] = {}
    for t, c in count.items():
        groups.setdefault(c, []).append((vote_sum[t], t))
    for group in groups.values():
        group.sort(reverse=True)
    # A word only candidate i has gives i exactly 0.0 support (its vote sum is votes[i]): never positive.
    shared = frozenset(t for t, c in count.items() if c > 1)
    for i, words in enumerate(near):
        if not words:
            continue
        m = (total_votes - votes[i]) / (n - 1)
        support: list[tuple[float, bool]] = []
        for c, group in groups.items():
            taken = 0
            for vs, t in group:
                if t in words:
                    continue
                value = vs - c * m
                if value <= 0 or taken == k:
                    break
                support.append((value, False))
                taken += 1
        for t in words & shared:  # order-free: only the multiset of supports matters below
            value = vote_sum[t] - votes[i] - (count[t] - 1) * m
            if value > 0:
                support.append((value, True))
        top = sorted(support, reverse=True)[:k]
        out[i] = math.fsum(min(1.0, s) for s, mine in top if mine) / k
    return out


# ---------------------------------------------------------------------------------------------- scorer


def _logit(p: float) -> float:
    p = min(1.0 - 1e-12, max(1e-12, p))
    return math.log(p / (1.0 - p))


def load_weights(path: Path | None = None, similarity: bool = False) -> tuple[dict[str, Any], str]:
    """Weights and a short content hash; the built-in defaults (with a warning) when the file is unusable.
    ``similarity``: the embedding judge's file, whose ranking also reads :data:`SIMILARITY_FEATURES` (its
    defaults give them no weight: the offline ranking)."""
    if not similarity:
        return calibration.load_weights(path or WEIGHTS_PATH, _DEFAULT_WEIGHTS, _check_weights, "relevance")
    defaults = {
        **_DEFAULT_WEIGHTS,
        "features": [*RELEVANCE_FEATURES, *SIMILARITY_FEATURES],
        "coef": [*_DEFAULT_WEIGHTS["coef"], 0.0],
    }
    return calibration.load_weights(
        path or SIMILARITY_WEIGHTS_PATH, defaults, _check_similarity_weights, "embedding relevance"
    )


def _check_weights(weights: dict[str, Any], features: Sequence[str] = RELEVANCE_FEATURES) -> None:
    if (
        weights["features"] != list(features)
        or len(weights["coef"]) != len(features)
        or len(weights["stage1"]["coef"]) != len(DIRECT_FEATURES)
    ):
        raise ValueError("relevance features do not match this code")
    float(weights["calibration"]["scale"]), float(weights["calibration"]["gap"])
    float(weights["calibration"]["intercept"]), float(weights["calibration"].get("intercept_cjk", 0.0))
    float(weights["calibration"].get("log_size", 0.0))


def _check_similarity_weights(weights: dict[str, Any]) -> None:
    _check_weights(weights, (*RELEVANCE_FEATURES, *SIMILARITY_FEATURES))
    raise_ = weights.get("answer_similarity", _ANSWER_SIMILARITY)
    if not float(raise_["slope"]) > 0:
        raise ValueError("answer_similarity: slope must be positive")
    float(raise_["midpoint"])


class RelevanceScorer:
    """Relevance (0..1) of each chunk retrieved for a question; ``digest`` identifies the weights.

    A chunk's relevance is its **graded** relevance (:mod:`ragwatch.scoring.judges.relevance_graded`): a
    function of the question and that chunk alone — off topic ≈ 0, on topic without the answer ≈ 0.45,
    answer-bearing near 1 — so Context Precision@K read against a fixed SLA means the same whatever else was
    retrieved. Nothing of the list enters it. The list model of this module (local IDF, consensus, fitted
    to rank a list) was tried as a bounded tie-break (each chunk moved by at most 0.04 × tanh of its
    standardised list score): on the dev files it lowered MAP at every size tried (RGB 0.733 → 0.726 at
    0.01, 0.707 at 0.04), so it is not applied: :func:`analyse_candidates` and :func:`consensus` remain for
    ``scripts/train_relevance.py``, and the list weight files are read here only for their digest (part of
    the judge version) and the embedding judge's answer-relevance raise.

    ``similarity=True`` reads the embedding judge's weight file (for its digest and its answer-relevance
    raise; the graded score reads no similarity). ``offset``
    is a logit added to every graded score (``sigmoid(logit(r) + offset)``: the order of chunks never
    changes, a whole scale moves): a team whose labelled lists read another base rate sets it (the
    ``relevance_offset`` setting; ``ragwatch eval-judge --calibration`` suggests one); ``offset_cjk`` is the
    one for questions in CJK script (``None``: the same as ``offset``). A non-zero offset is part of
    ``digest``, so the scores it shifts carry another judge version.
    """

    def __init__(
        self,
        weights_path: Path | str | None = None,
        *,
        similarity: bool = False,
        offset: float = 0.0,
        offset_cjk: float | None = None,
        graded_weights_path: Path | str | None = None,
    ) -> None:
        offset_cjk = offset if offset_cjk is None else offset_cjk
        if not (math.isfinite(offset) and math.isfinite(offset_cjk)):
            raise ValueError("relevance offset must be a finite number")
        weights, digest = load_weights(Path(weights_path) if weights_path else None, similarity)
        self.offset, self.offset_cjk = float(offset), float(offset_cjk)
        self.graded = GradedModel(graded_weights_path)
        self.digest = f"{digest}g{self.graded.digest}"
        if self.offset or self.offset_cjk:
            self.digest += f"o{self.offset:g}" + (f"c{self.offset_cjk:g}" if self.offset_cjk != self.offset else "")
        #: the embedding judge's answer-relevance raise (``similarity`` weights only; read by that judge)
        self.answer_similarity: dict[str, Any] = dict(weights.get("answer_similarity", _ANSWER_SIMILARITY))

    def score(
        self,
        question: str,
        texts: Sequence[str],
        analyses: Sequence[TextAnalysis] | None = None,
    ) -> list[float]:
        """Relevance of each text to ``question``; a text that is empty (or hashed away) scores 0."""
        question = question or ""
        keep = [i for i, t in enumerate(texts) if t and t.strip()]
        out = [0.0] * len(texts)
        if not keep:
            return out
        kept_texts = [texts[i] for i in keep]
        kept_analyses = [analyses[i] for i in keep] if analyses is not None else [analyse_text(t) for t in kept_texts]
        background = self.graded.background
        cues = QuestionCues.of(question)  # once per sample, not per chunk
        grades = [
            self.graded.grade(cues, graded_features(cues, t, an, background))
            for t, an in zip(kept_texts, kept_analyses, strict=True)
        ]
        offset = self.offset_cjk if is_cjk_question(question) else self.offset
        for i, g in zip(keep, grades, strict=True):
            out[i] = sigmoid(_logit(g) + offset) if offset else g
        return out
