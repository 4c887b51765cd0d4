"""Cascade: a cheap judge scores everything; uncertain samples (and a sampled fraction) escalate.

The offline judge is fast and free but unsure near the middle of its range; the LLM judge is slow and
costs money. Escalating only the samples whose score falls in an uncertainty band (plus a small random
fraction, to keep measuring how much the two disagree) buys most of the accuracy for a fraction of the
cost. Every record says which judge decided. If the expensive judge fails, the cheap verdict stands and
the failure is recorded, so an LLM outage degrades accuracy, not availability.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from ragwatch.errors import ConfigError
from ragwatch.sampling.sample import Sample
from ragwatch.scoring.judges.base import FAITHFULNESS, Judge, Verdict

__all__ = ["CascadeJudge"]

log = logging.getLogger("ragwatch.judges")


class CascadeJudge:
    name = "cascade"

    def __init__(
        self,
        first: Judge,
        second: Judge,
        *,
        band: tuple[float, float] = (0.3, 0.8),
        fraction: float = 0.0,
        metric: str = FAITHFULNESS,
        rng: Callable[[], float] = random.random,
    ) -> None:
        low, high = band
        if not 0 <= low <= high <= 1:
            raise ConfigError(f"cascade band must satisfy 0 ≤ low ≤ high ≤ 1, got {band}")
        if not 0 <= fraction <= 1:
            raise ConfigError(f"cascade fraction must be within 0..1, got {fraction}")
        self.first, self.second = first, second
        self.band, self.fraction, self.metric = (low, high), fraction, metric
        self._rng = rng
        self.version = f"{first.name}:{first.version}>{second.name}:{second.version}"

    def close(self) -> None:
        """Close both judges that hold resources (the LLM judge's HTTP client), so its sockets do not leak."""
        for judge in (self.first, self.second):
            close = getattr(judge, "close", None)
            if callable(close):
                close()

    def score(self, sample: Sample) -> Verdict:
        cheap = self.first.score(sample)
        value = cheap.scores.get(self.metric)
        uncertain = value is not None and self.band[0] <= value <= self.band[1]
        if not uncertain and not (self.fraction and self._rng() < self.fraction):
            return Verdict(cheap.scores, {"decided_by": self.first.name, self.first.name: cheap.details})
        reason = "uncertain" if uncertain else "sampled"
        try:
            dear = self.second.score(sample)
        except Exception as exc:
            log.warning(
                "ragwatch cascade: %s failed (%s); keeping the %s verdict", self.second.name, exc, self.first.name
            )
            return Verdict(
                cheap.scores,
                {
                    "decided_by": self.first.name,
                    "escalation": reason,
                    "escalation_error": f"{type(exc).__name__}: {exc}",
                    self.first.name: cheap.details,
                },
            )
        return Verdict(
            {**cheap.scores, **dear.scores},
            {
                "decided_by": self.second.name,
                "escalation": reason,
                self.first.name: cheap.details,
                self.second.name: dear.details,
            },
        )
