"""The judge contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..sample import Sample

__all__ = ["Judge", "Verdict"]


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
