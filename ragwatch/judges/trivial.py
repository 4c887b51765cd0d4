"""A placeholder judge that measures queue plumbing, not quality.

It scores what can be read off a sample without any model: whether an answer exists, and how much of the
answer's vocabulary appears in the retrieved chunks (a crude lexical grounding ratio, with CJK characters
counted one by one). It exists so the worker, the queue and the dashboards can be built and benchmarked
before the real judges; do not alert on it.
"""

from __future__ import annotations

import re

from ..sample import Sample
from .base import Verdict

__all__ = ["TrivialJudge"]

_TOKENS = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]|[A-Za-z0-9]+")


def _vocabulary(text: str) -> set[str]:
    return {t.lower() for t in _TOKENS.findall(text)}


class TrivialJudge:
    name = "trivial"
    version = "1"

    def score(self, sample: Sample) -> Verdict:
        answer = sample.answer or ""
        words = _vocabulary(answer)
        context: set[str] = set()
        for chunk in sample.chunks:
            if chunk.text:
                context |= _vocabulary(chunk.text)
        overlap = len(words & context) / len(words) if words else 0.0
        return Verdict(
            scores={"answered": 1.0 if answer.strip() else 0.0, "lexical_overlap": overlap},
            details={"answer_terms": len(words), "context_terms": len(context)},
        )
