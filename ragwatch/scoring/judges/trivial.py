"""A placeholder judge that measures queue plumbing, not quality.

It reads off a sample only what costs nothing to read: whether an answer exists and whether any chunk came
back. It exists so the worker, the queue and the dashboards can be tested and benchmarked without the cost
of a real judge (the worker benchmark's "queue overhead only" row); do not alert on it.
"""

from __future__ import annotations

from ragwatch.sampling.sample import Sample
from ragwatch.scoring.judges.base import Verdict

__all__ = ["TrivialJudge"]


class TrivialJudge:
    name = "trivial"
    version = "2"

    def score(self, sample: Sample) -> Verdict:
        answered = bool(sample.answer and sample.answer.strip())
        return Verdict(
            scores={"answered": 1.0 if answered else 0.0, "context_returned": 1.0 if sample.chunks else 0.0},
            details={"chunk_count": len(sample.chunks)},
        )
