"""One diagnosis per scored sample: where to look first when an answer went wrong.

A dashboard of five scores says *that* quality dropped; an on-call engineer needs to know *which stage* to
open. The rules follow the pipeline's causal order — an LLM cannot be faithful to chunks that were never
retrieved, and an unfaithful answer is a worse problem than an off-topic one — so the first failing stage
upstream is reported and everything downstream of it is treated as a likely consequence:

1. ``retrieval_miss`` — no chunk reaches the ``relevant`` grade (or nothing was retrieved at all);
2. ``noisy_retrieval`` — a relevant chunk exists, but Context Precision@K (SLA form) is under its threshold;
3. ``hallucination`` — faithfulness under its threshold;
4. ``off_topic`` — answer relevance under its threshold;
5. ``healthy`` — every rule that could be checked passed;
6. ``unknown`` — no rule could be checked at all.

A rule whose input is missing is skipped rather than assumed to pass or fail: samples are scored by
whichever judges are configured, and "no answer-relevance judge" must not read as "on topic" *and* must not
block the other rules. ``healthy`` therefore means "nothing that was measured is wrong". A score recorded as
NaN (a judge that could not decide, e.g. faithfulness of an answer with no checkable claim) counts as missing.

The module is pure — no I/O, no judge calls — so the worker, the health report and offline evaluation all
reach the same verdict from the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from numbers import Real
from types import MappingProxyType

from ragwatch.errors import ConfigError
from ragwatch.scoring.judges.base import ANSWER_RELEVANCE, FAITHFULNESS, context_precision
from ragwatch.scoring.retrieval_metrics import _check_relevances, context_precision_mean

__all__ = ["ADVICE", "DIAGNOSES", "Thresholds", "diagnose"]

DIAGNOSES = ("retrieval_miss", "noisy_retrieval", "hallucination", "off_topic", "healthy", "unknown")


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
            "The context was usable but the answer states things it does not support: check the prompt "
            "(answer only from the context, say when it is missing), temperature, a recent model change, and "
            "whether the context was truncated before it reached the model."
        ),
        "off_topic": (
            "The answer is grounded but does not address the question: check query rewriting or routing, "
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


def diagnose(
    scores: Mapping[str, float],
    chunk_relevances: Sequence[float] | None,
    thresholds: Thresholds = Thresholds(),
) -> str:
    """The first failing stage of one sample, as one of :data:`DIAGNOSES`.

    ``chunk_relevances`` are the judge's graded relevances (0..1) of the retrieved chunks in rank order;
    ``[]`` means nothing was retrieved (a miss), ``None`` means relevance was not judged (the miss rule is
    skipped). Context precision is read from ``scores[context_precision(thresholds.k)]``; when that score is
    absent but relevances are known it is computed from them with
    :func:`~ragwatch.scoring.retrieval_metrics.context_precision_mean`, the same SLA formula the judge uses. Without
    relevances a low context precision is reported as ``noisy_retrieval``: whether a relevant chunk exists
    cannot be told, and low precision is the fact that was measured.
    """
    checked = False

    relevances = None if chunk_relevances is None else _check_relevances(chunk_relevances)
    if relevances is not None:
        checked = True
        if not any(r >= thresholds.relevant for r in relevances):
            return "retrieval_miss"

    cp = _score(scores, context_precision(thresholds.k))
    if cp is None and relevances is not None:
        cp = context_precision_mean(relevances, thresholds.k)
    if cp is not None:
        checked = True
        if cp < thresholds.context_precision:
            return "noisy_retrieval"

    faithfulness = _score(scores, FAITHFULNESS)
    if faithfulness is not None:
        checked = True
        if faithfulness < thresholds.faithfulness:
            return "hallucination"

    answer_relevance = _score(scores, ANSWER_RELEVANCE)
    if answer_relevance is not None:
        checked = True
        if answer_relevance < thresholds.answer_relevance:
            return "off_topic"

    return "healthy" if checked else "unknown"
