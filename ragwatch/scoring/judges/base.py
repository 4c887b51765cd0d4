"""The judge contract, and the names of the scores judges produce."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ragwatch.sampling.sample import Sample

__all__ = [
    "ANSWER_RELEVANCE",
    "CONTEXT_RELEVANCE",
    "FAITHFULNESS",
    "FULLY_SUPPORTED",
    "HALLUCINATION_RATE",
    "Judge",
    "Verdict",
    "claim_scores",
    "context_precision",
    "context_precision_ranked",
]

#: supported / (claims - unverifiable), 0..1
FAITHFULNESS = "faithfulness"
#: P(every verifiable claim is supported) = the product of the claims' P(supported), 0..1. A ranking
#: score: it falls with each doubtful claim, where ``faithfulness`` (a share of hard verdicts) ties most
#: answers at 1.0, so it is what orders answers by how likely they hold an invented claim.
FULLY_SUPPORTED = "fully_supported"
#: 1.0 when at least one verifiable claim of the answer is UNSUPPORTED, else 0.0 — present exactly when
#: ``faithfulness`` is. Its window mean is the share of answers holding an invented claim: it moves with the
#: share of hallucinated answers, where the mean of ``faithfulness`` (an answer with one invented number
#: among four true claims scores 0.8) hardly does. Higher is worse (``mode.degrade.HIGHER_IS_WORSE``).
HALLUCINATION_RATE = "hallucination_rate"
#: mean graded relevance (0..1) of all retrieved chunks to the question
CONTEXT_RELEVANCE = "context_relevance"
#: does the answer address the question, 0..1
ANSWER_RELEVANCE = "answer_relevance"


def claim_scores(supported: int, unsupported: int) -> dict[str, float]:
    """``faithfulness`` and ``hallucination_rate`` of one answer from its verifiable claims' verdicts.

    Every judge that splits an answer into claims scores it through this, so the two definitions cannot drift
    apart between judges. Nothing verifiable (no claims, or only refusals): faithfulness 1.0 and no
    hallucination — nothing was invented.
    """
    verifiable = supported + unsupported
    return {
        FAITHFULNESS: supported / verifiable if verifiable else 1.0,
        HALLUCINATION_RATE: 1.0 if unsupported else 0.0,
    }


def context_precision(k: int) -> str:
    """Score name of Context Precision@K, SLA form: mean graded relevance of the top K chunks."""
    return f"context_precision_{k}"


def context_precision_ranked(k: int) -> str:
    """Score name of the rank-aware (Ragas) form of Context Precision@K."""
    return f"context_precision_ranked_{k}"


@dataclass(slots=True)
class Verdict:
    """What one judge said about one sample: metric values in 0..1 and the evidence behind them."""

    scores: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)


class Judge(Protocol):
    """``name`` and ``version`` are recorded with every score, so a changed judge never silently mixes
    its numbers with an older one's."""

    name: str
    version: str

    def score(self, sample: Sample) -> Verdict: ...
