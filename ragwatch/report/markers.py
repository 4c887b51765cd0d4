"""Markers for the charts: the moments something other than traffic changed.

A score that moves right after a deploy, a judge upgrade or an operator's override is read differently
from one that moves on its own. The marks come from what the records and the mode already say: the
replayed mode switches, the first record scored by a new judge version, and the
first record of a new service version (a record's ``service_version``, which services set with the
``service_version`` setting), and the operator's overrides (``ragwatch degrade on|off|auto``) logged with
their time in the shared mode state. An override set before that log existed has no known time and is not
marked (the now-panel still says it in words).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragwatch.mode.degrade import ModeState
from ragwatch.report.select import record_time

__all__ = ["MAX_MARKERS", "markers"]

#: Marks drawn at most (the newest kept): a chart with a line every pixel shows nothing.
MAX_MARKERS = 40
_MAX_LABEL = 60


def _short(text: Any) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= _MAX_LABEL else s[: _MAX_LABEL - 1] + "…"


def _firsts(timed: Sequence[tuple[float, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """A mark where a judge version or a service version is seen for the first time after the first record."""
    out: list[dict[str, Any]] = []
    seen_judges: dict[str, set[str]] = {}
    seen_versions: set[str] = set()
    for t, r in timed:
        judges = r.get("judges")
        for j in judges if isinstance(judges, list) else ():
            if not isinstance(j, Mapping) or not isinstance(j.get("name"), str):
                continue
            name, version = j["name"], str(j.get("version", "?"))
            versions = seen_judges.setdefault(name, set())
            if versions and version not in versions:
                out.append({"t": t, "kind": "judge", "label": _short(f"judge {name} {version}")})
            versions.add(version)
        service_version = r.get("service_version")
        if isinstance(service_version, str) and service_version:
            if seen_versions and service_version not in seen_versions:
                out.append({"t": t, "kind": "version", "label": _short(f"service {service_version}")})
            seen_versions.add(service_version)
    return out


def markers(
    records: Sequence[Mapping[str, Any]], periods: Sequence[Mapping[str, Any]], mode: ModeState | None = None
) -> list[dict[str, Any]]:
    """``[{"t", "kind", "label"}]``, oldest first; kinds: ``mode`` (degraded / normal), ``override``
    ("operator: on"), ``judge``, ``version``."""
    timed = sorted(((t, r) for r in records if (t := record_time(r)) is not None), key=lambda p: p[0])
    out = _firsts(timed)
    for p in periods:
        out.append({"t": p["start"], "kind": "mode", "label": "degraded"})
        if not p.get("open") and p.get("end") is not None:
            out.append({"t": p["end"], "kind": "mode", "label": "normal"})
    for command, at in mode.override_log if mode is not None else ():
        out.append({"t": at, "kind": "override", "label": f"operator: {command}"})
    out.sort(key=lambda m: m["t"])
    return out[-MAX_MARKERS:]
