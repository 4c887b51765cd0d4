"""Where score records come from: a queue's store (Redis, or the in-process memory queue), a JSONL export,
or a running worker's or service's HTTP endpoint (``/dashboard.jsonl``).

The report and the live page only need "the newest N score records" and, when there is one, the shared
degraded-mode state; a :class:`ScoreSource` is exactly that, so an in-process scorer, a worker and a file
all feed the same report. Records that do not decode are skipped and counted (``skipped``), never fatal:
one bad entry must not hide the good ones.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import orjson

from ragwatch.errors import ConfigError, QueueError

if TYPE_CHECKING:
    from ragwatch.mode.degrade import ModeState
    from ragwatch.queue.contract import Queue

__all__ = ["EndpointSource", "JsonlSource", "QueueSource", "ScoreSource", "decode_records"]

log = logging.getLogger("ragwatch.sources")


@runtime_checkable
class ScoreSource(Protocol):
    #: Where the records come from, for people ("redis://…/kb-qa", "scores.jsonl").
    name: str

    def records(self, count: int) -> list[dict[str, Any]]:
        """The newest ``count`` score records, newest first."""

    def mode(self) -> ModeState | None:
        """The shared degraded-mode state, or None when the source has none (a file)."""

    # Optional: ``windows(metrics, depth)`` — the live window points per metric (newest first), for a
    # source that has a window store (:class:`QueueSource`); the others' now-panel is rebuilt from records.


def decode_records(raws: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    """Decoded records and how many raw entries were not a JSON object (skipped)."""
    out, skipped = [], 0
    for raw in raws:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(value, dict):
            out.append(value)
        else:
            skipped += 1
    return out, skipped


def _created_at(record: dict[str, Any]) -> float:
    """A record's sort key: its ``created_at``, 0 when that is missing or not a number."""
    value = record.get("created_at")
    return value if isinstance(value, (int, float)) else 0


class QueueSource:
    """The scores a queue backend stores: Redis for workers, the memory queue for in-process scoring."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.name = f"{queue.url.split('@')[-1]} ({queue.service})"
        self.skipped = 0

    def records(self, count: int) -> list[dict[str, Any]]:
        records, skipped = decode_records(self.queue.recent_scores(count))
        if skipped:
            self.skipped += skipped
            log.warning("ragwatch: %d stored score records are not JSON objects; skipped", skipped)
        return records

    def mode(self) -> ModeState | None:
        return self.queue.read_mode()

    def windows(self, metrics: list[str], depth: int) -> dict[str, list[tuple[float, float, str]]]:
        """The newest ``depth`` window points per metric, newest first: what the SLA evaluator reads, so
        the page's now-panel shows the value the breaker decides on (``ragwatch_window_value``)."""
        return {m: self.queue.window_clients(m, depth) for m in metrics}


class JsonlSource:
    """A JSONL export (one record a line, any order); a line that is not JSON names its number."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.name = self.path

    def records(self, count: int) -> list[dict[str, Any]]:
        from ragwatch.report.build import load_records_jsonl

        try:
            records = [r for r in load_records_jsonl(self.path) if isinstance(r, dict)]
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--jsonl: {exc}") from None
        records.sort(key=_created_at)
        return records[::-1][:count]

    def mode(self) -> ModeState | None:
        return None


class EndpointSource:
    """A running worker's or service's dashboard: ``URL`` is its page (``http://host:9465/dashboard``) or
    its base (``http://host:9465``); records come from ``<page>.jsonl``, the mode from ``<page>.json``.
    ``token`` (the ``dashboard_token`` setting) is sent as ``Authorization: Bearer``."""

    def __init__(self, url: str, *, timeout: float = 10.0, token: str | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"--url must be an http(s) URL such as http://worker:9465/dashboard, got {url!r}")
        path = parts.path.rstrip("/")
        if not path.endswith("/dashboard"):
            path += "/dashboard"
        self.page = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        self.name = self.page
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._mode: dict[str, Any] | None = None

    def _get(self, url: str, **params: Any) -> bytes:
        import httpx

        try:
            response = httpx.get(url, params=params, headers=self._headers, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise QueueError(f"{url}: {exc}") from None
        if response.status_code == 404:
            raise ConfigError(f"{url}: 404 — not a ragwatch dashboard (is the dashboard enabled there?)")
        if response.status_code in (401, 403):
            raise ConfigError(f"{url}: HTTP {response.status_code} — set RAGWATCH_DASHBOARD_TOKEN to its token")
        if response.status_code != 200:
            raise QueueError(f"{url}: HTTP {response.status_code}")
        return response.content

    def records(self, count: int) -> list[dict[str, Any]]:
        body = self._get(self.page + ".jsonl", count=count)
        records, skipped = decode_records([line for line in body.splitlines() if line.strip()])
        if skipped:
            log.warning("ragwatch: %d lines from %s are not JSON objects; skipped", skipped, self.page)
        return records

    def mode(self) -> ModeState | None:
        from ragwatch.mode.degrade import ModeState, parse_override_log

        try:
            data = json.loads(self._get(self.page + ".json", count=1))
        except (QueueError, ConfigError, ValueError):
            return None
        m = data.get("mode") if isinstance(data, dict) else None
        if not isinstance(m, dict):
            return None
        override = str(m["override"]) if m.get("override") in ("auto", "on", "off") else "auto"
        since = float(m["since"]) if isinstance(m.get("since"), (int, float)) else 0.0
        degraded = bool(m.get("degraded")) if override == "auto" else False
        return ModeState(
            degraded=degraded,
            since=since,
            reason=str(m.get("reason") or ""),
            override=override,
            override_log=parse_override_log(m.get("override_log")),
        )
