"""The HTML health report and the live page at ``/dashboard``: one self-contained page, two ways to feed it.

The page is static HTML plus three files shipped in ``ragwatch/report/web/`` — uPlot (MIT, vendored with its
licence: a 50 KB time-series chart library), ``dashboard.js`` (draws :func:`ragwatch.report.view.view_data`) and
``dashboard.css`` — all inlined, so the report opens from a file with no network and the live page needs
nothing but its own JSON. Why a client-side library rather than server-side SVG: the live page re-draws from
JSON every few seconds, and time axes, bars, hover legends and resizing come for free with uPlot, while SVG
written by hand would need its own axis ticks, time formatting and hover code here.

Safety: user text travels only inside JSON (with ``<``, ``>`` and ``&`` escaped, so no ``</script>`` can
close the data block) and reaches the page as text nodes; a Content-Security-Policy allows only the page's
own two scripts by hash, no other script, no remote image or frame, and (report) no connection at all — a
planted ``<script>`` or ``javascript:`` link is inert twice over.

:class:`Dashboard` answers ``/dashboard``, ``/dashboard.json`` (the view data) and ``/dashboard.jsonl``
(the newest score records, what ``ragwatch report --url`` reads) for any :class:`~ragwatch.report.sources.ScoreSource`;
it knows no web framework, so the worker's http.server, an ASGI service (:func:`asgi_app`) or anything else
can mount it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from ragwatch.errors import RagwatchError
from ragwatch.mode.degrade import Policy
from ragwatch.report.sources import ScoreSource
from ragwatch.report.view import view_data

__all__ = ["Dashboard", "Response", "asgi_app", "dashboard_json", "dashboard_page", "render_html"]

log = logging.getLogger("ragwatch.dashboard")

#: Records the live page reads by default, and at most (``?count=``), per refresh.
DEFAULT_COUNT = 2000
MAX_COUNT = 20_000


@cache
def _asset(name: str) -> str:
    return (resources.files("ragwatch.report") / "web" / name).read_text(encoding="utf-8")


def _script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element: nothing in it can end the element or start a comment."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _clean(value: Any) -> Any:
    """NaN and infinities (a judge that could not decide) as null: JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def render_html(data: Mapping[str, Any] | None, *, live: bool = False, refresh_seconds: float = 5.0) -> str:
    """The page: with ``data`` the self-contained report; with ``live`` the page that fetches its JSON."""
    uplot, app = _asset("uPlot.iife.min.js"), _asset("dashboard.js")
    config = _script_json({"live": live, "refresh": refresh_seconds})
    connect = "'self'" if live else "'none'"
    csp = (
        f"default-src 'none'; script-src {_sha256(uplot)} {_sha256(app)}; style-src 'unsafe-inline'; "
        f"img-src data:; connect-src {connect}; base-uri 'none'; form-action 'none'"
    )
    body = [
        f'<script type="application/json" id="rw-config">{config}</script>',
    ]
    if data is not None:
        body.append(f'<script type="application/json" id="rw-data">{_script_json(_clean(data))}</script>')
    title = "ragwatch live quality" if live else "ragwatch health report"
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="referrer" content="no-referrer">',
            f"<title>{title}</title>",
            f"<style>{_asset('uPlot.min.css')}\n{_asset('dashboard.css')}</style>",
            "</head><body>",
            '<div id="live-status"></div>' if live else "",
            '<main id="app"><p>Loading…</p><noscript>This page draws with JavaScript.</noscript></main>',
            *body,
            f"<script>{uplot}</script>",
            f"<script>{app}</script>",
            "</body></html>",
            "",
        ]
    )


def dashboard_page(*, refresh_seconds: float = 5.0) -> str:
    """The live page (no data inside: it fetches ``<its path>.json`` every ``refresh_seconds``)."""
    return render_html(None, live=True, refresh_seconds=refresh_seconds)


def dashboard_json(
    source: ScoreSource,
    thresholds: Mapping[str, float],
    policy: Policy | None = None,
    *,
    count: int = DEFAULT_COUNT,
    worst: int = 5,
) -> bytes:
    """The view data of the newest ``count`` records of ``source``, as the live page fetches it."""
    data = view_data(source.records(count), thresholds, policy, source.mode(), source=source.name, worst=worst)
    return json.dumps(_clean(data), ensure_ascii=False, allow_nan=False).encode("utf-8")


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    content_type: str
    body: bytes

    @property
    def headers(self) -> list[tuple[str, str]]:
        return [
            ("Content-Type", self.content_type),
            ("Content-Length", str(len(self.body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
        ]


class Dashboard:
    """What ``/dashboard``, ``/dashboard.json`` and ``/dashboard.jsonl`` answer for one score source.

    The JSON is cached for ``cache_seconds``, so ten open tabs cost the store one read per interval, not ten.
    """

    def __init__(
        self,
        source: ScoreSource,
        thresholds: Mapping[str, float],
        policy: Policy | None = None,
        *,
        prefix: str = "/dashboard",
        refresh_seconds: float = 5.0,
        cache_seconds: float = 2.0,
    ) -> None:
        self.source = source
        self.thresholds = dict(thresholds)
        self.policy = policy
        self.prefix = prefix.rstrip("/")
        self.refresh_seconds = refresh_seconds
        self.cache_seconds = cache_seconds
        self._page = dashboard_page(refresh_seconds=refresh_seconds).encode("utf-8")
        self._lock = threading.Lock()
        self._cached: tuple[float, int, bytes] | None = None

    def handle(self, path: str, query: str = "") -> Response | None:
        """The response for ``path`` (with its query string), or None when the path is not the dashboard's."""
        if path in (self.prefix, self.prefix + "/"):
            return Response(200, "text/html; charset=utf-8", self._page)
        if path not in (self.prefix + ".json", self.prefix + ".jsonl"):
            return None
        try:
            count = int(parse_qs(query).get("count", [DEFAULT_COUNT])[0])
        except ValueError:
            return Response(400, "text/plain; charset=utf-8", b"count must be an integer\n")
        count = max(1, min(MAX_COUNT, count))
        try:
            if path.endswith(".jsonl"):
                records = self.source.records(count)
                body = b"".join(json.dumps(_clean(r), ensure_ascii=False).encode("utf-8") + b"\n" for r in records)
                return Response(200, "application/x-ndjson; charset=utf-8", body)
            return Response(200, "application/json", self._json(count))
        except RagwatchError as exc:
            log.warning("ragwatch dashboard: score source unavailable: %s", exc)
            return Response(503, "text/plain; charset=utf-8", b"score source unavailable\n")
        except Exception:  # a bug of ours, or a source broken another way: never an error in the host
            log.exception("ragwatch dashboard: reading the score source failed")
            return Response(503, "text/plain; charset=utf-8", b"score source unavailable\n")

    def _json(self, count: int) -> bytes:
        with self._lock:
            cached = self._cached
            if cached is not None and cached[1] == count and time.monotonic() - cached[0] < self.cache_seconds:
                return cached[2]
            body = dashboard_json(self.source, self.thresholds, self.policy, count=count)
            self._cached = (time.monotonic(), count, body)
            return body


_Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [_Message, Callable[[], Awaitable[_Message]], Callable[[_Message], Awaitable[None]]], Awaitable[None]
]


def asgi_app(dashboard: Dashboard, app: ASGIApp | None = None) -> ASGIApp:
    """An ASGI app answering the dashboard's paths and passing everything else to ``app`` (404 without one).

    The store is read on a worker thread (``asyncio.to_thread``): a Redis round trip never blocks the loop.
    """
    import asyncio

    async def dashboard_asgi(
        scope: _Message, receive: Callable[[], Awaitable[_Message]], send: Callable[[_Message], Awaitable[None]]
    ) -> None:
        if scope.get("type") == "http" and scope.get("method") in ("GET", "HEAD"):
            path = scope.get("path", "")
            if path.startswith(dashboard.prefix):
                query = scope.get("query_string", b"").decode("latin-1")
                response = await asyncio.to_thread(dashboard.handle, path, query)
                if response is not None:
                    headers = [(k.lower().encode(), v.encode()) for k, v in response.headers]
                    await send({"type": "http.response.start", "status": response.status, "headers": headers})
                    body = b"" if scope["method"] == "HEAD" else response.body
                    await send({"type": "http.response.body", "body": body})
                    return
        if app is not None:
            await app(scope, receive, send)
            return
        if scope.get("type") == "http":
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"not found\n"})

    return dashboard_asgi
