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
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from ragwatch.access import DashboardGate
from ragwatch.errors import ConfigError, RagwatchError
from ragwatch.mode.degrade import Policy
from ragwatch.queue.contract import Queue
from ragwatch.report.build import METRICS
from ragwatch.report.now import now_panel, window_depth
from ragwatch.report.ops import InProcessOperations, PrometheusOperations, operations_view
from ragwatch.report.select import Filters, TimeRange, time_range
from ragwatch.report.sources import ScoreSource
from ragwatch.report.view import view_data
from ragwatch.sampling.feedback import FeedbackError, count_feedback, encode_feedback, feedback_from_json
from ragwatch.sampling.redact import Redactor

if TYPE_CHECKING:
    from prometheus_client import Counter

    from ragwatch.settings import Settings

__all__ = [
    "Dashboard",
    "Lines",
    "Response",
    "asgi_app",
    "dashboard_json",
    "dashboard_page",
    "live_panel",
    "render_html",
]

log = logging.getLogger("ragwatch.dashboard")

#: Records the live page reads by default, and at most (``?count=``), per refresh. A 20,000-record read
#: was 33.5 MB and 5-7 s of a worker (issue 29); the page draws 2,000.
DEFAULT_COUNT = 2000
MAX_COUNT = 5000
#: Store reads (a ``.json`` cache miss, a ``.jsonl`` stream) at once; the next is answered 503.
DEFAULT_MAX_READERS = 2
#: Seconds a busy reader is told to wait (``Retry-After``).
RETRY_AFTER = 5
#: Records encoded into one piece of a streamed ``.jsonl`` body.
_LINES_PER_CHUNK = 200
#: Largest ``POST <prefix>/feedback`` body read (a feedback record's texts are capped far below it).
MAX_FEEDBACK_BODY = 16 * 1024


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


def render_html(
    data: Mapping[str, Any] | None, *, live: bool = False, refresh_seconds: float = 5.0, feedback: bool = False
) -> str:
    """The page: with ``data`` the self-contained report; with ``live`` the page that fetches its JSON
    (``feedback``: and offers the operator buttons of ``POST <path>/feedback``)."""
    uplot, app = _asset("uPlot.iife.min.js"), _asset("dashboard.js")
    config = _script_json({"live": live, "refresh": refresh_seconds, "feedback": feedback and live})
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


def dashboard_page(*, refresh_seconds: float = 5.0, feedback: bool = False) -> str:
    """The live page (no data inside: it fetches ``<its path>.json`` every ``refresh_seconds``)."""
    return render_html(None, live=True, refresh_seconds=refresh_seconds, feedback=feedback)


def live_panel(
    source: ScoreSource,
    records: list[dict[str, Any]],
    thresholds: Mapping[str, float],
    policy: Policy | None,
    mode: Any,
) -> dict[str, Any] | None:
    """The now-panel for ``source``: its window store's points when it has one, else rebuilt from records."""
    if policy is None:
        return None
    names = [policy.metric, *(m for m in METRICS if m in thresholds and m != policy.metric)]
    windows = getattr(source, "windows", None)
    points = windows(names, window_depth(policy)) if callable(windows) else None
    return now_panel(thresholds, policy, mode, points=points, records=records, metrics=METRICS)


def dashboard_json(
    source: ScoreSource,
    thresholds: Mapping[str, float],
    policy: Policy | None = None,
    *,
    count: int = DEFAULT_COUNT,
    worst: int = 5,
    span: TimeRange | None = None,
    filters: Filters | None = None,
    trace_url: str | None = None,
    operations: InProcessOperations | PrometheusOperations | None = None,
    service: str = "",
) -> bytes:
    """The view data of the newest ``count`` records of ``source`` inside ``span`` that ``filters`` accept,
    with the now-panel and the operations panel, as the live page fetches it."""
    records = source.records(count)
    mode = source.mode()
    span = span or TimeRange()
    data = view_data(
        records,
        thresholds,
        policy,
        mode,
        source=source.name,
        worst=worst,
        span=span,
        filters=filters,
        live=live_panel(source, records, thresholds, policy, mode),
        trace_url=trace_url,
        operations=operations_view(operations, span, service or source.name),
    )
    return json.dumps(_clean(data), ensure_ascii=False, allow_nan=False).encode("utf-8")


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    content_type: str
    body: bytes
    #: the body in pieces, when it is streamed (no Content-Length); the server must :meth:`close` it
    chunks: Lines | None = None
    #: refused by the gate: a server with an app of its own hands the request on to it instead
    refused: bool = False
    extra_headers: tuple[tuple[str, str], ...] = ()

    @property
    def headers(self) -> list[tuple[str, str]]:
        length = [] if self.chunks is not None else [("Content-Length", str(len(self.body)))]
        return [
            ("Content-Type", self.content_type),
            *length,
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            *self.extra_headers,
        ]

    def close(self) -> None:
        if self.chunks is not None:
            self.chunks.close()


class Lines:
    """The ``.jsonl`` body, encoded a batch of records at a time and never joined into one body.

    Holds one of the dashboard's reader slots until :meth:`close` (idempotent; servers call it in ``finally``,
    so a client that goes away mid-stream frees the slot too). Records are dropped as they are written.
    """

    __slots__ = ("_closed", "_lock", "_records", "_release")

    def __init__(self, records: list[dict[str, Any]], release: Callable[[], None]) -> None:
        self._records = deque(records)
        self._release = release
        self._closed = False
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[bytes]:
        try:
            while self._records:
                batch = [self._records.popleft() for _ in range(min(_LINES_PER_CHUNK, len(self._records)))]
                yield b"".join(json.dumps(_clean(r), ensure_ascii=False).encode("utf-8") + b"\n" for r in batch)
        finally:
            self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._records.clear()
        self._release()


def _text(status: int, text: str, *headers: tuple[str, str], refused: bool = False) -> Response:
    return Response(status, "text/plain; charset=utf-8", text.encode("utf-8"), None, refused, headers)


class Dashboard:
    """What ``/dashboard``, ``/dashboard.json`` and ``/dashboard.jsonl`` answer for one score source.

    The JSON is cached for ``cache_seconds``, so ten open tabs cost the store one read per interval, not ten.
    At most ``max_readers`` store reads (a ``.json`` cache miss or a ``.jsonl`` stream, until its last line)
    run at once; one more is answered 503 with ``Retry-After``, so concurrent large reads cannot take the
    process's memory. ``gate`` (:class:`~ragwatch.access.DashboardGate`) decides who may read at all (None:
    anyone who reaches the port); ``count`` is told each request's outcome (``served``, ``busy`` or a refusal)
    for ``ragwatch_dashboard_requests_total``.

    The page and its JSON cover a range (``?range=15m|1h|6h|24h`` or ``?from=&to=``; default the last hour)
    and the filters of :class:`~ragwatch.report.select.Filters`; the JSON is cached per query string.
    ``trace_url`` is a trace viewer's URL with ``{trace_id}`` (each card links to its trace); ``operations``
    an :class:`~ragwatch.report.ops.InProcessOperations` or :class:`~ragwatch.report.ops.PrometheusOperations`
    (None: the operations panel says where to look).

    Operators correct the judge with ``POST <prefix>/feedback`` (:meth:`post`, the page's buttons): a JSON
    feedback record (:mod:`ragwatch.sampling.feedback`), stored through ``redact`` in the source's queue and
    counted in ``feedback`` (``ragwatch_feedback_total``). An operator passes the page's gate *and* brings
    the dashboard token in an ``Authorization: Bearer`` header — never ``?token=``, so no link, form or
    cross-site page can write (a header of that kind takes a CORS preflight nothing here answers). A page
    opened by address alone (no token configured) may read but never write.
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
        gate: DashboardGate | None = None,
        max_readers: int = DEFAULT_MAX_READERS,
        count: Callable[[str], None] | None = None,
        trace_url: str | None = None,
        operations: InProcessOperations | PrometheusOperations | None = None,
        service: str = "",
        feedback: Counter | None = None,
        redact: Callable[[str], str] | None = None,
        content: bool = True,
    ) -> None:
        store = getattr(source, "queue", None)
        #: where operators' feedback goes: the source's queue, when it has one and a token guards writes
        self.feedback_store: Queue | None = store if isinstance(store, Queue) and gate and gate.has_token else None
        self._feedback = feedback
        self._redact = redact if redact is not None else Redactor()  # never stored unredacted
        self._content = content  # False (content_off): stored feedback keeps no claim, note or chunk id
        self.trace_url = trace_url
        self.operations = operations
        self.service = service
        self.source = source
        self.thresholds = dict(thresholds)
        self.policy = policy
        self.prefix = prefix.rstrip("/")
        self.refresh_seconds = refresh_seconds
        self.cache_seconds = cache_seconds
        self.gate = gate
        self._count = count
        self._page = dashboard_page(refresh_seconds=refresh_seconds, feedback=self.feedback_store is not None).encode(
            "utf-8"
        )
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[float, bytes]] = {}  # per query string (count, range, filters)
        self._readers = threading.BoundedSemaphore(max(1, max_readers))

    @classmethod
    def from_settings(
        cls,
        source: ScoreSource,
        settings: Settings,
        *,
        sources: Iterable[str] | None = None,
        requests: Counter | None = None,
        counted: bool = True,
        feedback: Counter | None = None,
        redact: Callable[[str], str] | None = None,
        **options: Any,
    ) -> Dashboard:
        """The page as the settings configure it: their thresholds and SLA policy, the gate of
        ``dashboard_token`` and ``dashboard_trusted_proxies`` (plus ``sources``, an address allow-list, for a
        service's own page), at most ``dashboard_max_readers`` store reads, outcomes counted in ``requests``
        (default: ``ragwatch_dashboard_requests_total`` of the default registry; none when not ``counted``)
        under the settings' service. Cards link to ``trace_url_template``; the operations panel reads
        ``prometheus_url`` when it is set (a worker has no request metrics of its own), unless ``operations``
        is given (a service passes its own metrics)."""
        from ragwatch.report.build import default_thresholds

        if requests is None and counted:
            from ragwatch.metrics.catalog import DashboardMetrics, families

            requests = families(DashboardMetrics).requests
        if feedback is None and counted:
            from ragwatch.metrics.catalog import FeedbackMetrics, families

            feedback = families(FeedbackMetrics).feedback
        if redact is None:  # a worker has no host's redact_with: the configured built-in patterns
            redact = Redactor(settings.redact)
        token = settings.dashboard_token.get_secret_value() if settings.dashboard_token is not None else None
        gate = DashboardGate(token, sources, settings.dashboard_trusted_proxies)
        count = None
        if requests is not None:
            counter, service = requests, settings.service

            def count(outcome: str) -> None:
                counter.labels(service, outcome).inc()

        options.setdefault("trace_url", settings.trace_url_template)
        options.setdefault("service", settings.service)
        if "operations" not in options:
            url = settings.prometheus_url
            options["operations"] = PrometheusOperations(url, settings.service) if url else None
        return cls(
            source,
            default_thresholds(settings),
            settings.sla_policy(),
            gate=gate,
            max_readers=settings.dashboard_max_readers,
            count=count,
            feedback=feedback,
            redact=redact,
            content=not settings.content_off,
            **options,
        )

    def owns(self, path: str) -> bool:
        """Whether ``path`` is one of the dashboard's."""
        return path in (self.prefix, self.prefix + "/", self.prefix + ".json", self.prefix + ".jsonl")

    def serve(
        self, path: str, query: str, headers: Iterable[tuple[bytes, bytes]], client: str | None
    ) -> Response | None:
        """:meth:`handle` behind the gate: None when the path is not the dashboard's, a refusal (401 without
        the right token, 403 otherwise, ``refused`` set) when the gate says no."""
        if not self.owns(path):
            return None
        why = self.gate.refusal(headers, query, client) if self.gate is not None else None
        if why is not None:
            self._counted(why)
            if why in ("no_token", "bad_token"):
                return _text(401, "dashboard token required\n", ("WWW-Authenticate", "Bearer"), refused=True)
            return _text(403, "forbidden\n", refused=True)
        response = self.handle(path, query)
        if response is not None:
            busy = response.status == 503 and ("Retry-After", str(RETRY_AFTER)) in response.extra_headers
            self._counted("busy" if busy else "served")
        return response

    #: largest feedback body a server should read for :meth:`post` (a larger one: pass ``body=None``)
    max_feedback_body = MAX_FEEDBACK_BODY

    @property
    def feedback_path(self) -> str:
        """Where operators POST feedback."""
        return self.prefix + "/feedback"

    def post(
        self, path: str, headers: Iterable[tuple[bytes, bytes]], client: str | None, body: bytes | None
    ) -> Response | None:
        """``POST <prefix>/feedback``: None for another path; 403 unless an operator (see the class); 400 for
        a body that is no feedback (None: larger than :data:`MAX_FEEDBACK_BODY`, 413); 503 when the store
        fails; 200 with the kinds stored. Every outcome is counted; nothing here raises."""
        if path != self.feedback_path:
            return None
        service = self.service or getattr(self.feedback_store, "service", "")
        headers = list(headers)
        # the token only from the header: "" as the query string, so ?token= cannot authorise a write
        why = self.gate.refusal(headers, "", client) if self.gate is not None else "no_token"
        if why is not None or self.feedback_store is None:
            self._count_feedback(service, ["unread"], "refused")
            return _text(403, "feedback is for operators: the dashboard token in an Authorization header\n")
        if body is None:
            self._count_feedback(service, ["unread"], "invalid")
            return _text(413, f"feedback body larger than {MAX_FEEDBACK_BODY} bytes\n")
        try:
            record = feedback_from_json(body, source="dashboard")
        except FeedbackError as exc:
            self._count_feedback(service, ["unread"], "invalid")
            return _text(400, f"{exc}\n")
        try:
            stored = record.redacted(self._redact)
            if not self._content:
                stored = stored.without_text()
            self.feedback_store.add_feedback(stored.sample_id, encode_feedback(stored))
        except Exception as exc:  # the store away (QueueError), or a redactor's bug: a 503, never an error upstream
            log.warning("ragwatch dashboard: feedback not stored: %s: %s", type(exc).__name__, exc)
            self._count_feedback(service, record.kinds, "dropped")
            return _text(503, "feedback not stored: the score store is unavailable\n")
        self._count_feedback(service, record.kinds, "stored")
        body_out = json.dumps({"stored": True, "sample_id": stored.sample_id, "kinds": record.kinds})
        return Response(200, "application/json", body_out.encode("utf-8"))

    def _count_feedback(self, service: str, kinds: list[str], outcome: str) -> None:
        try:
            count_feedback(self._feedback, service, kinds, outcome)
        except Exception:  # a metric must never fail the page
            log.debug("ragwatch dashboard: counting feedback %s failed", outcome, exc_info=True)

    def _counted(self, outcome: str) -> None:
        if self._count is not None:
            try:
                self._count(outcome)
            except Exception:  # a metric must never fail the page
                log.debug("ragwatch dashboard: counting %s failed", outcome, exc_info=True)

    def handle(self, path: str, query: str = "") -> Response | None:
        """The response for ``path`` (with its query string), or None when the path is not the dashboard's.

        No gate here: servers call :meth:`serve`. A streamed ``.jsonl`` response must be closed.
        """
        if path in (self.prefix, self.prefix + "/"):
            return Response(200, "text/html; charset=utf-8", self._page)
        if path not in (self.prefix + ".json", self.prefix + ".jsonl"):
            return None
        params = parse_qs(query)
        try:
            count = int(params.get("count", [DEFAULT_COUNT])[0])
        except ValueError:
            return _text(400, "count must be an integer\n")
        count = max(1, min(MAX_COUNT, count))
        try:
            span = time_range(params, time.time())
            filters = Filters.from_query(params)
        except ConfigError as exc:
            return _text(400, f"{exc}\n")
        if path.endswith(".json"):
            cached = self._fresh(query)
            if cached is not None:
                return Response(200, "application/json", cached)
        if not self._readers.acquire(blocking=False):
            return _text(503, "dashboard busy: too many concurrent reads\n", ("Retry-After", str(RETRY_AFTER)))
        held = True
        try:
            if path.endswith(".jsonl"):
                lines = Lines(self.source.records(count), self._readers.release)
                held = False  # the stream releases it when closed
                return Response(200, "application/x-ndjson; charset=utf-8", b"", lines)
            return Response(200, "application/json", self._json(count, span, filters, query))
        except RagwatchError as exc:
            log.warning("ragwatch dashboard: score source unavailable: %s", exc)
            return _text(503, "score source unavailable\n")
        except Exception:  # a bug of ours, or a source broken another way: never an error in the host
            log.exception("ragwatch dashboard: reading the score source failed")
            return _text(503, "score source unavailable\n")
        finally:
            if held:
                self._readers.release()

    def _cached_body(self, query: str) -> bytes | None:
        """The cached view data for ``query`` while fresh (the caller holds ``_lock``)."""
        cached = self._cached.get(query)
        if cached is not None and time.monotonic() - cached[0] < self.cache_seconds:
            return cached[1]
        return None

    def _fresh(self, query: str) -> bytes | None:
        with self._lock:
            return self._cached_body(query)

    def _json(self, count: int, span: TimeRange, filters: Filters, query: str) -> bytes:
        with self._lock:
            found = self._cached_body(query)
            if found is not None:
                return found
            body = dashboard_json(
                self.source,
                self.thresholds,
                self.policy,
                count=count,
                span=span,
                filters=filters,
                trace_url=self.trace_url,
                operations=self.operations,
                service=self.service,
            )
            if len(self._cached) >= 32:  # one entry per distinct query: bounded
                self._cached.clear()
            self._cached[query] = (time.monotonic(), body)
            return body


_Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [_Message, Callable[[], Awaitable[_Message]], Callable[[_Message], Awaitable[None]]], Awaitable[None]
]


def asgi_app(dashboard: Dashboard, app: ASGIApp | None = None) -> ASGIApp:
    """An ASGI app answering the dashboard's paths and passing everything else to ``app`` (404 without one).

    The dashboard's gate decides first; a refused request goes on to ``app`` when there is one (a service's
    own routes answer it, usually 404), else it gets the 401/403. The store is read, and a ``.jsonl`` body
    encoded, on a worker thread (``asyncio.to_thread``): a Redis round trip never blocks the loop.
    ``POST <prefix>/feedback`` (the operator buttons, :meth:`Dashboard.post`) is answered here, 403 included.
    """
    import asyncio

    from ragwatch.capture.asgi import _read_body as read_body  # the middleware's bounded body reader

    async def dashboard_asgi(
        scope: _Message, receive: Callable[[], Awaitable[_Message]], send: Callable[[_Message], Awaitable[None]]
    ) -> None:
        method, path = scope.get("method"), scope.get("path", "")
        if scope.get("type") == "http" and method == "POST" and path == dashboard.feedback_path:
            body = await read_body(receive, [], MAX_FEEDBACK_BODY)
            headers = list(scope.get("headers") or ())
            response = await asyncio.to_thread(dashboard.post, path, headers, _peer(scope), body)
            if response is not None:
                await _send(response, False, send)
                return
        if scope.get("type") == "http" and scope.get("method") in ("GET", "HEAD"):
            path = scope.get("path", "")
            if dashboard.owns(path):
                query = scope.get("query_string", b"").decode("latin-1")
                headers = list(scope.get("headers") or ())
                response = await asyncio.to_thread(dashboard.serve, path, query, headers, _peer(scope))
                if response is not None and not (response.refused and app is not None):
                    await _send(response, scope["method"] == "HEAD", send)
                    return
        if app is not None:
            await app(scope, receive, send)
            return
        if scope.get("type") == "http":
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"not found\n"})

    def _peer(scope: _Message) -> str | None:
        client = scope.get("client")
        return str(client[0]) if isinstance(client, (tuple, list)) and client else None

    async def _send(response: Response, head: bool, send: Callable[[_Message], Awaitable[None]]) -> None:
        try:
            headers = [(k.lower().encode(), v.encode()) for k, v in response.headers]
            await send({"type": "http.response.start", "status": response.status, "headers": headers})
            if response.chunks is None or head:
                await send({"type": "http.response.body", "body": b"" if head else response.body})
                return
            pieces = iter(response.chunks)
            while (piece := await asyncio.to_thread(next, pieces, None)) is not None:
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            response.close()

    return dashboard_asgi
