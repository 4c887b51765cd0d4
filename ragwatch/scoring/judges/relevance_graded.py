"""Graded chunk relevance: a function of (question, chunk) alone, on the three levels the SLA reads.

Context Precision@3 against a fixed SLA (0.65) only means something if a chunk's relevance does not depend
on what else was retrieved with it: the same chunk must read the same alone, beside off-topic chunks or
beside on-topic ones, and a list of off-topic chunks must read near zero. So nothing here looks at the list:
word weights come from a **background** of the training corpus (``relevance_background.json``: how many of
its ~50,000 passages contain each word root, and each CJK character), not from the retrieved chunks.

The composite relevance has the three levels of the method we follow:

* **topic** — is the chunk about the question's subject at all: IDF-weighted coverage of the question's
  words by the chunk and by its best sentence, whether the rarest question words (the core entity) are
  there, how much rare vocabulary the two share, CJK character coverage, whether the chunk leads with the
  question's words. ``topic = sigmoid(sharpness · (b + w · x))``, fitted on passages retrieved for a
  question (on topic) against passages of other questions and other corpora (off topic).
* **information** — does it carry the asked attribute: a full date for "when", a count (of the asked
  thing) for "how many", a measure, an agent for "who", an enumeration, a definition, a cause or means.
* **elements** — does it cover the core entity and the constraints: the question's year (a chunk that names
  only other years than the question's is capped at the topic level: a 2023 figure for a 2024 question is
  not the answer), its capitalised entities, the question words other than the subject.

Information and elements form the *answer* part, ``answer = sigmoid(sharpness · (b + w · x))`` on all
features, its weights fitted to rank each training question's passages (a conditional logit) and scaled to
a probability on them. The grade is::

    relevance = topic × (band + (1 − band) × answer)

so an off-topic chunk reads ≈ 0, an on-topic chunk without the answer ≈ ``band`` (0.4) and an answer-bearing
one near 1. ``band`` and the two sharpness factors are chosen by ``scripts/train_graded_relevance.py`` on the
training corpus (they maximise the smaller of the two graded gaps there); nothing is set on the dev files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Sequence
from functools import lru_cache
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
)
from ragwatch.scoring.judges.text import TextAnalysis, analyse_text, content_tokens, token_prior

__all__ = [
    "BACKGROUND_PATH",
    "GRADED_FEATURES",
    "GRADED_WEIGHTS_PATH",
    "TOPIC_FEATURES",
    "Background",
    "GradedModel",
    "answer_capped",
    "graded_features",
    "load_background",
]

_log = logging.getLogger(__name__)

BACKGROUND_PATH = Path(__file__).with_name("relevance_background.json")
GRADED_WEIGHTS_PATH = Path(__file__).with_name("relevance_graded_weights.json")

#: The topic level's features (a prefix of :data:`GRADED_FEATURES`).
TOPIC_FEATURES = ("coverage", "best_sentence", "core", "core2", "shared_rare", "cjk_chars", "leads")
#: Every feature, in the order of the answer part's weights.
GRADED_FEATURES = (*TOPIC_FEATURES, *ANSWER_CUES, "year_match", "entities", "length", "rest", "rest_best")
#: Sign of each answer weight: more overlap / more fitting raises it, only other years lower it; the
#: chunk's length may go either way.
GRADED_SIGNS = tuple(-1 if n == "other_year" else 0 if n == "length" else 1 for n in GRADED_FEATURES)
_OTHER_YEAR = GRADED_FEATURES.index("other_year")
_ANSWER_TYPE = GRADED_FEATURES.index("answer_type")
#: Question kinds whose answer is a value a text either carries or not: a chunk without a date cannot
#: answer "when", one without a number cannot answer "how many".
_MUST_CARRY = frozenset({"date", "number"})
#: How much rare vocabulary (summed weights) counts as "a lot" shared.
_SHARED_RARE_SCALE = 20.0
#: A capitalised word that does not start a sentence: a name the question is about.
_ENTITY_RE = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][a-zA-Z]+")

# A fallback so the judge works before (or without) a trained file: coverage-led and roughly graded.
_DEFAULT_WEIGHTS: dict[str, Any] = {
    "features": list(GRADED_FEATURES),
    "topic": {"coef": [3.0, 3.0, 0.0, 2.0, 2.5, 0.0, 5.0], "intercept": -1.8},
    "answer": {"coef": [1.0] * 7 + [0.5] * 11 + [-1.0, 0.5, 0.3, 0.0, 0.3, 0.5], "intercept": -2.0},
    "band": 0.4,
    "sharpness": {"topic": 3.0, "answer": 3.0},
}


class Background:
    """Document frequencies of word roots and CJK characters in the training corpus's passages.

    A word the background lacks (or saw fewer than ``min_df`` times, which the file leaves out to stay
    small) weighs as a rare one.
    """

    __slots__ = ("_cdf", "_char_unknown", "_cjk_docs", "_df", "_docs", "_unknown", "digest")

    def __init__(self, data: dict[str, Any], digest: str = "") -> None:
        self._docs = int(data["docs"])
        self._cjk_docs = int(data["cjk_docs"])
        if self._docs < 1 or self._cjk_docs < 1:
            raise ValueError("background: docs and cjk_docs must be positive")
        self._df: dict[str, int] = {str(k): int(v) for k, v in data["df"].items()}
        self._cdf: dict[str, int] = {str(k): int(v) for k, v in data["char_df"].items()}
        rare = max(1, int(data.get("min_df", 1))) / 2.0
        self._unknown = math.log((self._docs + 1) / rare)
        self._char_unknown = math.log((self._cjk_docs + 1) / rare)
        self.digest = digest

    def idf(self, root: str) -> float:
        df = self._df.get(root)
        return self._unknown if df is None else math.log((self._docs + 1) / (df + 0.5))

    def char_idf(self, char: str) -> float:
        df = self._cdf.get(char)
        return self._char_unknown if df is None else math.log((self._cjk_docs + 1) / (df + 0.5))


@lru_cache(maxsize=4)
def load_background(path: Path = BACKGROUND_PATH) -> Background:
    """The background statistics; an empty one (every word equally rare) when the file is unusable."""
    try:
        raw = path.read_bytes()
        return Background(json.loads(raw), hashlib.sha256(raw).hexdigest()[:10])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _log.warning("relevance background: cannot use %s (%s); every word weighs the same", path, exc)
        return Background({"docs": 1, "cjk_docs": 1, "df": {}, "char_df": {}}, "none")


def graded_features(
    question: str | QuestionCues,
    text: str,
    analysis: TextAnalysis | None = None,
    background: Background | None = None,
) -> list[float]:
    """:data:`GRADED_FEATURES` of one chunk for ``question`` (or its :class:`QuestionCues`, read once for all
    the chunks of a sample), from the two texts and the background alone."""
    cues = question if isinstance(question, QuestionCues) else QuestionCues.of(question)
    bg = background or load_background()
    an = analysis if analysis is not None else analyse_text(text)
    q_roots = cues.roots
    sents = [{_root(t) for t in sent} for sent in an.tokens]
    doc: set[str] = set().union(*sents) if sents else set()
    if not q_roots or not doc:
        return [0.0] * len(GRADED_FEATURES)
    weight = {t: token_prior(t) / 10.0 * bg.idf(t) for t in q_roots}
    total = math.fsum(weight.values())
    hits = q_roots & doc
    by_weight = sorted(q_roots, key=lambda t: (-weight[t], t))  # ties by the root: never by set order
    chars = 0.0
    q_chars = {c for c in _CJK_RE.findall(cues.question) if c not in _CJK_STOP}
    if q_chars:
        char_total = math.fsum(bg.char_idf(c) for c in q_chars)
        chars = math.fsum(bg.char_idf(c) for c in q_chars if c in text) / char_total
    first = {_root(t) for t in an.tokens[0][:3]} if an.tokens else set()
    leads = sum(token_prior(t) for t in first & q_roots) / sum(token_prior(t) for t in q_roots)
    entities = {_root(t) for m in _ENTITY_RE.finditer(cues.question) for t in content_tokens(m.group())}
    rest = rest_best = 0.0
    if len(by_weight) > 1:  # the question's words other than its rarest one: the asked attribute, mostly
        others = by_weight[1:]
        rest_total = math.fsum(weight[t] for t in others)
        rest = math.fsum(weight[t] for t in others if t in doc) / rest_total
        rest_best = max((math.fsum(weight[t] for t in others if t in s) / rest_total for s in sents), default=0.0)
    return [
        math.fsum(weight[t] for t in hits) / total,  # coverage
        max((math.fsum(weight[t] for t in q_roots & s) / total for s in sents), default=0.0),  # best sentence
        1.0 if by_weight[0] in doc else 0.0,  # core
        sum(1 for t in by_weight[:2] if t in doc) / min(2, len(by_weight)),  # core2
        min(1.0, math.fsum(weight[t] for t in hits) / _SHARED_RARE_SCALE),  # shared_rare
        chars,
        leads,
        *cues.answer_cues(text, doc, leads),
        cues.year_match(doc),
        len(entities & doc) / len(entities) if entities else 0.0,
        min(1.0, len(doc) / 100.0),  # length
        rest,
        rest_best,
    ]


def _check_weights(weights: dict[str, Any]) -> None:
    if weights["features"] != list(GRADED_FEATURES):
        raise ValueError("graded relevance features do not match this code")
    if len(weights["topic"]["coef"]) != len(TOPIC_FEATURES) or len(weights["answer"]["coef"]) != len(GRADED_FEATURES):
        raise ValueError("graded relevance weights do not match the feature list")
    if not 0.0 <= float(weights["band"]) < 1.0:
        raise ValueError("graded relevance: band must be in [0, 1)")
    for part in ("topic", "answer"):
        if not float(weights["sharpness"][part]) > 0:
            raise ValueError("graded relevance: sharpness must be positive")
        float(weights[part]["intercept"])
    float(weights["answer"].get("intercept_cjk", 0.0))


def answer_capped(cues: QuestionCues, features: Sequence[float]) -> bool:
    """Whether a chunk is at most on topic whatever its answer part says: two levels are read as conditions,
    not only as weights. A chunk that names only other years than the question's (elements: a 2023 figure
    is not the answer to a 2024 question), or has no date for a "when" question or no number for a "how
    many" one (information: the asked attribute is not there)."""
    return bool(features[_OTHER_YEAR]) or (not features[_ANSWER_TYPE] and cues.kind in _MUST_CARRY)


class GradedModel:
    """``relevance = topic × (band + (1 − band) × answer)`` of one chunk (module docstring)."""

    def __init__(self, weights_path: Path | str | None = None, background: Background | None = None) -> None:
        path = Path(weights_path) if weights_path else GRADED_WEIGHTS_PATH
        weights, digest = calibration.load_weights(path, _DEFAULT_WEIGHTS, _check_weights, "graded relevance")
        self.background = background or load_background()
        self.digest = f"{digest}{self.background.digest[:4]}"
        self._topic = [float(c) for c in weights["topic"]["coef"]]
        self._topic_b = float(weights["topic"]["intercept"])
        self._answer = [float(c) for c in weights["answer"]["coef"]]
        answer_b = float(weights["answer"]["intercept"])
        self._answer_b = answer_b
        self._answer_b_cjk = float(weights["answer"].get("intercept_cjk", answer_b))
        self.band = float(weights["band"])
        self._sharp_topic = float(weights["sharpness"]["topic"])
        self._sharp_answer = float(weights["sharpness"]["answer"])

    def levels(self, cues: QuestionCues, features: Sequence[float]) -> tuple[float, float]:
        """(topic, answer) of one chunk's :func:`graded_features` for the question of ``cues``."""
        n = len(self._topic)
        topic_z = self._topic_b + math.fsum(c * x for c, x in zip(self._topic, features[:n], strict=True))
        answer_b = self._answer_b_cjk if is_cjk_question(cues.question) else self._answer_b
        answer_z = answer_b + math.fsum(c * x for c, x in zip(self._answer, features, strict=True))
        return sigmoid(self._sharp_topic * topic_z), sigmoid(self._sharp_answer * answer_z)

    def grade(self, cues: QuestionCues, features: Sequence[float]) -> float:
        topic, answer = self.levels(cues, features)
        if answer_capped(cues, features):
            answer = 0.0
        return topic * (self.band + (1.0 - self.band) * answer)

    def score(self, question: str, text: str, analysis: TextAnalysis | None = None) -> float:
        """The graded relevance of ``text`` to ``question``; an empty text or question reads 0."""
        if not text or not text.strip():
            return 0.0
        cues = QuestionCues.of(question)
        return self.grade(cues, graded_features(cues, text, analysis, self.background))
