"""Which records a report or the page covers: a time range and the filters of "find things".

The person on call asks about *now* and about *a stretch of time*, and then narrows: only hallucinations,
only ``/chat``, only this model, only answers mentioning "laptop". Both questions are answered here, once,
for the live page's query string (``?range=6h``, ``?from=…&to=…``, ``?diagnosis=…&q=…``) and for the report
function's ``since``/``until``; everything is pure, so the page, the report and the tests select the same
records.

Times are epoch seconds, ISO 8601 (``2026-05-01T14:00``, local time when no zone is given) or a duration
back from now (``15m``, ``2h``, ``1d``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from ragwatch.errors import ConfigError

__all__ = [
    "DEFAULT_RANGE",
    "RANGES",
    "Filters",
    "TimeRange",
    "diagnoses_of",
    "parse_time",
    "record_time",
    "select",
    "time_range",
]

#: The ranges the page offers, by name, in seconds back from now.
RANGES = {"15m": 900.0, "1h": 3600.0, "6h": 21600.0, "24h": 86400.0}
#: What the live page covers when the query names no range.
DEFAULT_RANGE = "1h"
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
#: Longest filter value kept (a query string is user input).
_MAX_FILTER_CHARS = 200


def record_time(record: Mapping[str, Any]) -> float | None:
    """When the request behind a record happened (``created_at``; ``scored_at`` when that is missing)."""
    for key in ("created_at", "scored_at"):
        t = record.get(key)
        if not isinstance(t, bool) and isinstance(t, (int, float)) and math.isfinite(t):
            return float(t)
    return None


def diagnoses_of(record: Mapping[str, Any]) -> list[str]:
    """A record's diagnosis labels: its ``diagnoses`` list when it has one (a sample can be both
    ``noisy_retrieval`` and ``hallucination``), else its single ``diagnosis`` (records of older workers)."""
    labels = record.get("diagnoses")
    if isinstance(labels, list):
        return [d for d in labels if isinstance(d, str)]
    one = record.get("diagnosis")
    return [one] if isinstance(one, str) else []


def parse_time(text: str | float, now: float) -> float:
    """Epoch seconds from epoch seconds, ISO 8601 (naive: local time) or a duration ago (``90m``)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip()
        duration = _DURATION.match(s)
        if duration:
            return now - float(duration.group(1)) * _UNITS[duration.group(2)]
        try:
            value = float(s)
        except ValueError:
            try:
                value = datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
            except ValueError:
                raise ConfigError(
                    f"not a time: {s[:40]!r} (epoch seconds, ISO 8601 like 2026-05-01T14:00, or 15m/2h/1d ago)"
                ) from None
    if not math.isfinite(value):
        raise ConfigError(f"not a time: {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class TimeRange:
    """``[start, end]`` in epoch seconds (None: open on that side) and how the page names it."""

    start: float | None = None
    end: float | None = None
    #: "15m" | "1h" | "6h" | "24h" | "custom" | "all"
    name: str = "all"

    def contains(self, t: float) -> bool:
        return (self.start is None or t >= self.start) and (self.end is None or t <= self.end)

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "name": self.name}


def time_range(
    query: Mapping[str, Sequence[str]] | None = None,
    now: float = 0.0,
    *,
    since: str | float | None = None,
    until: str | float | None = None,
    default: str | None = DEFAULT_RANGE,
) -> TimeRange:
    """The range a query asks for: ``from``/``to`` (or ``since``/``until``), else ``range=15m|1h|6h|24h``,
    else ``default`` back from ``now`` (None: everything); a named range has no end (up to now, and a
    record dated a little ahead by a skewed clock still counts). A bad value is a :class:`ConfigError`."""
    q = query or {}
    since = _first(q, "from") if since is None else since
    until = _first(q, "to") if until is None else until
    if since is not None or until is not None:
        start = parse_time(since, now) if since not in (None, "") else None
        end = parse_time(until, now) if until not in (None, "") else None
        if start is not None and end is not None and end < start:
            raise ConfigError("the range ends before it starts (from/since after to/until)")
        return TimeRange(start, end, "custom")
    name = _first(q, "range") or default
    if name is None or name == "all":
        return TimeRange()
    if name not in RANGES:
        raise ConfigError(f"range must be one of {', '.join(RANGES)} or all, got {name[:20]!r}")
    return TimeRange(now - RANGES[name], None, name)  # open-ended: a record a skewed clock dated ahead counts


def _first(query: Mapping[str, Sequence[str]], key: str) -> str | None:
    values = query.get(key)
    if not values:
        return None
    value = str(values[0]).strip()
    return value[:_MAX_FILTER_CHARS] if value else None


@dataclass(frozen=True, slots=True)
class Filters:
    """What "find things" narrows to; an empty field filters nothing. ``metric`` with ``low``/``high``:
    records whose score of that metric lies within [low, high]; ``tag`` is ``key=value``; ``text`` is a
    case-insensitive substring of the question, answer, sample id or trace id."""

    diagnosis: str | None = None
    metric: str | None = None
    low: float | None = None
    high: float | None = None
    route: str | None = None
    model: str | None = None
    tag: str | None = None
    text: str | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, Sequence[str]]) -> Filters:
        """From the page's query string (``diagnosis``, ``metric``, ``min``, ``max``, ``route``, ``model``,
        ``tag``, ``q``); a bound that is not a number is a :class:`ConfigError`."""

        def bound(key: str) -> float | None:
            value = _first(query, key)
            if value is None:
                return None
            try:
                number = float(value)
            except ValueError:
                raise ConfigError(f"{key} must be a number, got {value[:20]!r}") from None
            if not math.isfinite(number):
                raise ConfigError(f"{key} must be a finite number")
            return number

        return cls(
            diagnosis=_first(query, "diagnosis"),
            metric=_first(query, "metric"),
            low=bound("min"),
            high=bound("max"),
            route=_first(query, "route"),
            model=_first(query, "model"),
            tag=_first(query, "tag"),
            text=_first(query, "q"),
        )

    def active(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def accepts(self, record: Mapping[str, Any]) -> bool:
        if self.diagnosis is not None and self.diagnosis not in diagnoses_of(record):
            return False
        if self.route is not None and record.get("route") != self.route:
            return False
        if self.model is not None and record.get("model") != self.model:
            return False
        if self.tag is not None:
            key, _, value = self.tag.partition("=")
            tags = record.get("tags")
            if not isinstance(tags, Mapping) or str(tags.get(key)) != value:
                return False
        if self.metric is not None and (self.low is not None or self.high is not None):
            scores = record.get("scores")
            v = scores.get(self.metric) if isinstance(scores, Mapping) else None
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                return False
            if (self.low is not None and v < self.low) or (self.high is not None and v > self.high):
                return False
        if self.text is not None:
            needle = self.text.casefold()
            fields_ = (record.get(k) for k in ("question", "answer", "sample_id", "trace_id"))
            if not any(isinstance(f, str) and needle in f.casefold() for f in fields_):
                return False
        return True


def select(
    records: Iterable[Mapping[str, Any]], span: TimeRange | None = None, filters: Filters | None = None
) -> list[Mapping[str, Any]]:
    """The records inside ``span`` (a record without a time is outside any bounded range) that
    ``filters`` accepts, in their order."""
    out = []
    bounded = span is not None and (span.start is not None or span.end is not None)
    for r in records:
        if not isinstance(r, Mapping):
            continue
        if bounded:
            t = record_time(r)
            if t is None or not span.contains(t):  # type: ignore[union-attr]
                continue
        if filters is not None and not filters.accepts(r):
            continue
        out.append(r)
    return out
