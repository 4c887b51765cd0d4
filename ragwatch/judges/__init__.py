"""Judges: pure functions of a sample that return scores in 0..1 with their evidence.

A judge knows nothing of Redis, Prometheus or threads, so it can be tested, benchmarked and evaluated on
data alone; the worker runs it and records what it says. ``make_judges(["trivial"])`` builds judges by
name for the CLI.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError
from .base import Judge, Verdict
from .trivial import TrivialJudge

__all__ = ["JUDGES", "Judge", "TrivialJudge", "Verdict", "make_judges"]

JUDGES: dict[str, type] = {"trivial": TrivialJudge}


def make_judges(names: Sequence[str]) -> list[Judge]:
    """Judges by name, in order; an unknown name is a :class:`ConfigError` listing the known ones."""
    judges = []
    for name in names:
        cls = JUDGES.get(name)
        if cls is None:
            raise ConfigError(f"unknown judge {name!r}; known: {sorted(JUDGES)}")
        judges.append(cls())
    return judges
