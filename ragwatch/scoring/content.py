"""Score records without user text, for ``content_off`` (GDPR): the scores stay, every quote goes.

Whoever judges a sample's text — the in-process scorer, or with a shared queue the service itself on its
flusher thread (:class:`~ragwatch.scoring.embedded.PreScorer`) — judges it in memory; what it stores or
sends — the record the report, the ``/dashboard`` page and ``on_score`` callbacks read — must then hold
none of it: not the question or the answer, not a claim, an evidence quote, a chunk id or an LLM judge's
reasoning. Judges put text under many keys of their ``details``, so strings are dropped by default and only
the few that are labels (a verdict, a rule's name) are kept: a key added to a judge later is dropped until
it is named here.

With a shared queue the service sends each textless sample with a ``scored`` object: the scores, their
text-free evidence and diagnoses (:func:`prescored`), or why there are none (:func:`not_scored`). A worker
applies it without judging — it has no text to judge — after :func:`read_scored` checked it as strictly as
any other field of a stream entry: anyone who can write to the stream can write one, and the scores it
carries become metric labels and window values.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import TYPE_CHECKING, Any

from ragwatch.sampling.sample import SampleDecodeError
from ragwatch.scoring.diagnosis import DIAGNOSES
from ragwatch.scoring.judges.base import (
    ANSWER_RELEVANCE,
    CONTEXT_RELEVANCE,
    FAITHFULNESS,
    FULLY_SUPPORTED,
    HALLUCINATION_RATE,
)

if TYPE_CHECKING:
    from ragwatch.scoring.worker import ScoreRecord

__all__ = [
    "LABEL_KEYS",
    "SERVICE_SKIPS",
    "Judged",
    "NotScored",
    "known_metric",
    "not_scored",
    "prescored",
    "read_scored",
    "without_text",
]

#: Detail keys whose string values are labels chosen by ragwatch, never user text.
LABEL_KEYS = frozenset({"verdict", "rule", "faithfulness_basis", "skipped", "model", "tier", "decided_by", "source"})

#: Why a service may send a sample unscored, each counted by the worker as that skip reason: over the
#: service's judging budget, or not a quality sample (``scoring.worker.not_a_sample``).
SERVICE_SKIPS = ("budget", "no_context", "no_question")
#: Why a service's judging failed, and the worker outcome each is dead-lettered as.
_FAILURES = {"over_time_budget": "over_time_budget", "judge_error": "dead_lettered"}

#: Score names every judge of ``scoring.judges`` uses, plus the trivial judge's two (``judges.trivial``).
_FIXED_METRICS = frozenset(
    {FAITHFULNESS, FULLY_SUPPORTED, HALLUCINATION_RATE, CONTEXT_RELEVANCE, ANSWER_RELEVANCE}
    | {"answered", "context_returned"}
)
#: Context Precision@K in both forms (``judges.base.context_precision[_ranked]``), K from 1 to 99.
_PRECISION = re.compile(r"context_precision(?:_ranked)?_[1-9][0-9]?")
#: Bounds of a pre-scored entry: judges, scores, timings, nesting of details, characters of a label.
_MAX_JUDGES = 16
_MAX_SCORES = 64
_MAX_DEPTH = 12
_MAX_LABEL = 64
_MAX_ERROR = 300
_TIME_RANGE = (0.0, 1e11)


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if not isinstance(v, str) or k in LABEL_KEYS}
    if isinstance(value, list):
        return [_scrub(v) for v in value if not isinstance(v, str)]
    return value


def without_text(record: ScoreRecord) -> ScoreRecord:
    """``record`` with its question, answer, chunk ids, tags and every free-text detail dropped."""
    return dataclasses.replace(
        record,
        question=None,
        answer=None,
        chunk_ids=[f"#{i + 1}" for i in range(len(record.chunk_ids))],
        details=_scrub(record.details),
        tags={},
    )


def known_metric(name: object) -> bool:
    """Whether ``name`` is a score name some judge of ragwatch produces (it becomes a metric label)."""
    return isinstance(name, str) and (name in _FIXED_METRICS or _PRECISION.fullmatch(name) is not None)


# -- the service's side: what goes with a textless sample ---------------------------------------------------
def prescored(record: ScoreRecord) -> dict[str, Any]:
    """The ``scored`` object of a sample the service judged: its scores, text-free evidence and diagnoses."""
    bare = without_text(record)
    return {
        "judges": bare.judges,
        "scores": bare.scores,
        "details": bare.details,
        "timings": bare.timings,
        "diagnoses": bare.diagnoses or [bare.diagnosis],
        "scored_at": bare.scored_at,
    }


def not_scored(reason: str, error: str | None = None) -> dict[str, Any]:
    """The ``scored`` object of a sample the service did not score: ``reason`` is a skip
    (:data:`SERVICE_SKIPS`) or, with ``error`` (a type name or a budget message, never sample text), a
    failure (``over_time_budget``, ``judge_error``)."""
    return {"skipped": reason} if error is None else {"failed": reason, "error": error}


# -- the worker's side: read it back --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class Judged:
    """A validated ``scored`` object: what the service's judges said, ready to become a score record."""

    judges: list[dict[str, str]]
    scores: dict[str, float]
    details: dict[str, Any]
    timings: dict[str, float]
    diagnoses: list[str]
    scored_at: float


@dataclasses.dataclass(frozen=True, slots=True)
class NotScored:
    """A sample the service sent without scores: ``skipped`` names the worker's skip reason, else
    ``outcome`` the worker outcome it is dead-lettered as, with ``error``."""

    skipped: str | None = None
    outcome: str | None = None
    error: str = ""


def read_scored(scored: dict[str, Any]) -> Judged | NotScored:
    """Validate a sample's ``scored`` object; :class:`SampleDecodeError` for anything a worker must not apply
    (an unknown score name, a score outside 0..1 or not finite, an unknown diagnosis, nesting too deep)."""
    if "skipped" in scored:
        reason = scored["skipped"]
        if reason not in SERVICE_SKIPS:
            raise SampleDecodeError(f"scored.skipped must be one of {', '.join(SERVICE_SKIPS)}")
        return NotScored(skipped=reason)
    if "failed" in scored:
        failure, error = scored["failed"], scored.get("error")
        if failure not in _FAILURES or not isinstance(error, str):
            raise SampleDecodeError(f"scored.failed must be one of {', '.join(_FAILURES)}, with an error string")
        return NotScored(outcome=_FAILURES[failure], error=f"{failure} in the service: {error[:_MAX_ERROR]}")
    details = scored.get("details")
    if details is None:
        details = {}
    if not isinstance(details, dict) or _depth(details) > _MAX_DEPTH:
        raise SampleDecodeError(f"scored.details must be an object nested at most {_MAX_DEPTH} deep")
    return Judged(
        judges=_judges(scored.get("judges")),
        scores=_scores(scored.get("scores")),
        details=_scrub(details),
        timings=_timings(scored.get("timings")),
        diagnoses=_diagnoses(scored.get("diagnoses")),
        scored_at=_time(scored.get("scored_at")),
    )


def _label(value: Any, name: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_LABEL or not value.isprintable():
        raise SampleDecodeError(f"{name} must be a printable string of 1 to {_MAX_LABEL} characters")
    return value


def _unit(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SampleDecodeError(f"{name} must be a finite number")
    if not 0.0 <= value <= 1.0:
        raise SampleDecodeError(f"{name} must be in 0..1")
    return float(value)


def _judges(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or not 0 < len(value) <= _MAX_JUDGES or not all(isinstance(j, dict) for j in value):
        raise SampleDecodeError(f"scored.judges must be a list of 1 to {_MAX_JUDGES} objects")
    return [{"name": _label(j.get("name"), "judge"), "version": _label(j.get("version"), "version")} for j in value]


def _scores(value: Any) -> dict[str, float]:
    if not isinstance(value, dict) or not 0 < len(value) <= _MAX_SCORES:
        raise SampleDecodeError(f"scored.scores must be an object of 1 to {_MAX_SCORES} scores")
    for name in value:
        if not known_metric(name):
            raise SampleDecodeError(f"scored.scores: unknown score name {name[:_MAX_LABEL]!r}")
    return {name: _unit(score, f"score {name}") for name, score in value.items()}


def _timings(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > _MAX_JUDGES:
        raise SampleDecodeError(f"scored.timings must be an object of at most {_MAX_JUDGES} judges")
    out: dict[str, float] = {}
    for name, seconds in value.items():
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds < math.inf:
            raise SampleDecodeError("scored.timings must be non-negative finite seconds")
        out[_label(name, "timing name")] = float(seconds)
    return out


def _diagnoses(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or not all(label in DIAGNOSES for label in value):
        raise SampleDecodeError(f"scored.diagnoses must be a non-empty list of {', '.join(DIAGNOSES)}")
    return list(dict.fromkeys(value))


def _time(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not _TIME_RANGE[0] < value < _TIME_RANGE[1]:
        raise SampleDecodeError("scored.scored_at must be a unix time in seconds")
    return float(value)


def _depth(value: Any) -> int:
    """How deep ``value`` nests, counted without recursion (a hostile entry may nest a thousand deep)."""
    deepest, level = 0, [value]
    while level:
        deepest += 1
        if deepest > _MAX_DEPTH:
            return deepest
        children = (v for item in level for v in (item.values() if isinstance(item, dict) else item))
        level = [v for v in children if isinstance(v, dict | list)]
    return deepest
