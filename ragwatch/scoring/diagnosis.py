"""Diagnoses of one scored sample: every stage that failed, most upstream first — where to look.

A dashboard of five scores says *that* quality dropped; an on-call engineer needs to know *which stage* to
open. A sample carries every label whose rule fails, not only the first: a retrieval fault and an LLM that
keeps inventing are two problems, and a ladder that stops at the first would hide the second (during a
retrieval fault every invented answer read ``noisy_retrieval``). The labels, in the pipeline's causal order:

1. ``retrieval_miss`` — no chunk reaches the ``relevant`` grade (or nothing was retrieved at all);
2. ``noisy_retrieval`` — a relevant chunk exists, but Context Precision@K (SLA form) is under its threshold
   (not added to a miss, which already explains a low precision);
3. ``hallucination`` — an answer claim is unsupported (``hallucination_rate`` 1, when the judge reports it:
   one invented claim of five is an invented claim, although faithfulness 0.8 passes its 0.75 line), or
   faithfulness under its threshold;
4. ``off_topic`` — answer relevance under its threshold;
5. ``healthy`` — every rule that could be checked passed (alone);
6. ``unknown`` — no rule could be checked at all (alone).

:func:`diagnose_all` returns the labels in that order; :func:`diagnose` the first, the most upstream
failure (the record's single ``diagnosis`` field, kept for readers of older records). A report counts each
label once per sample (:func:`label_counts`) and ranks the advice by how many failing samples each label
covers (:func:`ranked_problems`), so the label that explains most failures is read first.

A rule whose input is missing is skipped rather than assumed to pass or fail: samples are scored by
whichever judges are configured, and "no answer-relevance judge" must not read as "on topic" *and* must not
block the other rules. ``healthy`` therefore means "nothing that was measured is wrong". A score recorded as
NaN (a judge that could not decide, e.g. faithfulness of an answer with no checkable claim) counts as missing.

The module is pure — no I/O, no judge calls — so the worker, the health report and offline evaluation all
reach the same verdict from the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from numbers import Real
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ragwatch.errors import ConfigError
from ragwatch.scoring.judges.base import ANSWER_RELEVANCE, FAITHFULNESS, HALLUCINATION_RATE, context_precision
from ragwatch.scoring.retrieval_metrics import _check_relevances, context_precision_mean

if TYPE_CHECKING:
    from ragwatch.settings import Settings

__all__ = [
    "ADVICE",
    "DIAGNOSES",
    "PROBLEMS",
    "Thresholds",
    "diagnose",
    "diagnose_all",
    "label_counts",
    "ranked_problems",
    "record_labels",
]

DIAGNOSES = ("retrieval_miss", "noisy_retrieval", "hallucination", "off_topic", "healthy", "unknown")
#: The labels that name a problem (the others say nothing failed, or nothing could be checked).
PROBLEMS = DIAGNOSES[:4]
_NOT_PROBLEMS = frozenset(DIAGNOSES[4:])


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The SLA lines a sample is held to. Frozen so one shared default cannot be changed by a caller.

    Defaults: a chunk graded 0.5 or more is relevant; CP@3 should reach 0.65; answers should be 0.75
    faithful and 0.85 relevant. A score *under* its threshold fails; equal passes.
    """

    relevant: float = 0.5
    context_precision: float = 0.65
    faithfulness: float = 0.75
    answer_relevance: float = 0.85
    k: int = 3

    @classmethod
    def of(cls, settings: Settings) -> Thresholds:
        """The lines ``settings`` set: the SLA line and the health thresholds (every scorer reads them so)."""
        return cls(
            context_precision=settings.sla_threshold,
            faithfulness=settings.health_thresholds.get("faithfulness", 0.75),
            answer_relevance=settings.health_thresholds.get("answer_relevance", 0.85),
        )

    def __post_init__(self) -> None:
        # Thresholds come from configuration; a typo such as 75 for 0.75 would silently flag every sample,
        # so it is refused where it is set, not discovered in the health report.
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "k":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ConfigError(f"Thresholds.k must be an integer >= 1, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= float(value) <= 1.0:
                raise ConfigError(f"Thresholds.{f.name} must be a number in [0, 1], got {value!r}")


ADVICE: Mapping[str, str] = MappingProxyType(
    {
        "retrieval_miss": (
            "Nothing relevant was retrieved: check recall first — is the document indexed and fresh, does the "
            "chunking split the answer, does the embedding model (or a keyword/hybrid search) match the "
            "question's wording, is top_k or a metadata filter too tight."
        ),
        "noisy_retrieval": (
            "The right chunk is there but buried in irrelevant ones: add or tune a reranker, lower top_k or add "
            "a similarity cut-off, and check metadata filters and near-duplicate chunks."
        ),
        "hallucination": (
            "The answer states things the retrieved context does not support: check the prompt (answer only "
            "from the context, say when it is missing), temperature, a recent model change, and whether the "
            "context was truncated before it reached the model."
        ),
        "off_topic": (
            "The answer does not address the question: check query rewriting or routing, "
            "conversation history leaking into the prompt, the prompt template, and answers cut off by a "
            "token limit."
        ),
        "healthy": "Every measured score met its threshold; look at trends across samples, not at this one.",
        "unknown": (
            "No score needed for a diagnosis was present: check that the judges ran on this sample (worker "
            "logs, dead letters) and that they produce faithfulness, answer relevance or context precision."
        ),
    }
)


def _score(scores: Mapping[str, float], name: str) -> float | None:
    """The score, or None when it is absent or NaN; a value outside 0..1 means a broken judge and is refused."""
    value = scores.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"score {name!r} is {value!r}; expected a number in [0, 1]")
    x = float(value)
    if math.isnan(x):
        return None
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"score {name!r} is {value!r}; expected a number in [0, 1]")
    return x


def diagnose_all(
    scores: Mapping[str, float],
    chunk_relevances: Sequence[float] | None,
    thresholds: Thresholds = Thresholds(),
) -> tuple[str, ...]:
    """Every failing stage of one sample, in the causal order of :data:`DIAGNOSES`; ``("healthy",)`` when
    every rule that could be checked passed, ``("unknown",)`` when none could.

    ``chunk_relevances`` are the judge's graded relevances (0..1) of the retrieved chunks in rank order;
    ``[]`` means nothing was retrieved (a miss), ``None`` means relevance was not judged (the miss rule is
    skipped). Context precision is read from ``scores[context_precision(thresholds.k)]``; when that score is
    absent but relevances are known it is computed from them with
    :func:`~ragwatch.scoring.retrieval_metrics.context_precision_mean`, the same SLA formula the judge uses. Without
    relevances a low context precision is reported as ``noisy_retrieval``: whether a relevant chunk exists
    cannot be told, and low precision is the fact that was measured.
    """
    labels: list[str] = []
    checked = False

    relevances = None if chunk_relevances is None else _check_relevances(chunk_relevances)
    if relevances is not None:
        checked = True
        if not any(r >= thresholds.relevant for r in relevances):
            labels.append("retrieval_miss")

    cp = _score(scores, context_precision(thresholds.k))
    if cp is None and relevances is not None:
        cp = context_precision_mean(relevances, thresholds.k)
    if cp is not None:
        checked = True
        if cp < thresholds.context_precision and not labels:  # a miss already explains the low precision
            labels.append("noisy_retrieval")

    faithfulness = _score(scores, FAITHFULNESS)
    invented = _score(scores, HALLUCINATION_RATE)
    if faithfulness is not None or invented is not None:
        checked = True
        if (faithfulness is not None and faithfulness < thresholds.faithfulness) or (
            invented is not None and invented >= 0.5
        ):
            labels.append("hallucination")

    answer_relevance = _score(scores, ANSWER_RELEVANCE)
    if answer_relevance is not None:
        checked = True
        if answer_relevance < thresholds.answer_relevance:
            labels.append("off_topic")

    if labels:
        return tuple(labels)
    return ("healthy",) if checked else ("unknown",)


def diagnose(
    scores: Mapping[str, float],
    chunk_relevances: Sequence[float] | None,
    thresholds: Thresholds = Thresholds(),
) -> str:
    """The first (most upstream) label of :func:`diagnose_all`: one of :data:`DIAGNOSES`."""
    return diagnose_all(scores, chunk_relevances, thresholds)[0]


def record_labels(record: Mapping[str, Any]) -> tuple[str, ...]:
    """The labels of a stored score record: its ``diagnoses`` list, or — for a record written before labels
    — its single ``diagnosis``; ``()`` when it has neither. Labels this version does not know are kept: a
    newer worker may write them, and a reader decides what to do with them (no advice, usually)."""
    labels = record.get("diagnoses")
    if isinstance(labels, (list, tuple)) and labels and all(isinstance(x, str) for x in labels):
        return tuple(dict.fromkeys(labels))  # a sample counts once per label, even in a malformed record
    single = record.get("diagnosis")
    return (single,) if isinstance(single, str) and single else ()


def label_counts(samples: Iterable[Sequence[str]]) -> dict[str, int]:
    """How many samples carry each label (a sample with two labels counts once under each); every label of
    :data:`DIAGNOSES` is present, then any unknown ones, in first-seen order."""
    counts = dict.fromkeys(DIAGNOSES, 0)
    for labels in samples:
        for label in dict.fromkeys(labels):
            counts[label] = counts.get(label, 0) + 1
    return counts


def ranked_problems(samples: Iterable[Sequence[str]]) -> list[tuple[str, int, float]]:
    """The problem labels (not ``healthy``/``unknown``) by how many failing samples each explains, most
    first, ties in causal order: ``(label, samples, share of the failing samples)``. Labels with no sample
    are left out, so an empty list means nothing failed. Where to look first is the head of the list."""
    samples = [tuple(s) for s in samples]
    failing = [s for s in samples if any(label not in _NOT_PROBLEMS for label in s)]
    counts = label_counts(failing)
    order = {d: i for i, d in enumerate(DIAGNOSES)}
    problems = [(d, n) for d, n in counts.items() if d not in _NOT_PROBLEMS and n > 0]
    problems.sort(key=lambda dn: (-dn[1], order.get(dn[0], len(order))))
    return [(d, n, n / len(failing)) for d, n in problems]
