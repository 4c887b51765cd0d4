"""ASGI middleware: each HTTP request is timed as one pipeline run; RAG requests become samples.

Works with any ASGI framework (Starlette, FastAPI, Litestar…) and imports none of them. The run covers the
whole response, streamed bodies included: it ends when the app returns, after the last body chunk was
sent. A 5xx response or an exception counts as an error; the exception itself propagates unchanged.

Every watched path's latency and outcome are recorded, but only a RAG request is handed to the sampler:
by default (no ``include=``) one during which the host's pipeline ran — a ``@rw.pipeline`` /
``rw.request()``, a retriever or an LLM stage was entered. A crawler's 404, a CORS preflight, a 400 from a
body the app refused or a refused ``/dashboard`` request then never reach the quality windows. With
``include=`` prefixes, every request under them is handed on, as the host said (the sampler still skips
those without context, without a question or with an error response). The response status goes with the
run (``Run.status``).

While the service is degraded, responses carry ``x-ragwatch-degraded: 1`` and the user notice in
``x-ragwatch-notice``. Requests carrying a *valid* probe header (signed by ``ragwatch replay`` over the
method, path, query and body, see :mod:`ragwatch.capture.probe`) are marked as probes so they can be kept out
of real-traffic samples; to check one, the body is read first (bounded) and handed to the app unchanged. Any
other probe header is ignored and counted, and the header is removed before the app sees the request. A
probe check that fails in any way leaves the request watched as ordinary traffic.

A service that scores its own samples (``memory://``) has no worker port, so with the ``dashboard`` setting
on *and* a gate configured (``dashboard_token``, or ``dashboard_sources`` set explicitly) the middleware
answers the live page's paths (``/dashboard``, ``.json``, ``.jsonl``) itself, from this process's scores,
to the requests its gate (:class:`ragwatch.access.DashboardGate`) admits; every other request for them,
and every one when the page is off or workers score, goes to the app's routes.

Each run also gets a client id, a keyed hash of the peer address (or of the ``client_header`` a trusted
proxy sets), so the quality window can cap one client's share of it (``sla_max_client_share``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ragwatch.capture import semconv as sc
from ragwatch.capture.calls import PipelineCall
from ragwatch.capture.probe import ProbeVerifier
from ragwatch.metrics.exposition import MetricsApp

if TYPE_CHECKING:
    from ragwatch.capture.host import CaptureHost
    from ragwatch.report.dashboard import Dashboard

__all__ = ["PROBE_HEADER", "PROBE_OUTCOMES", "RagwatchMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PROBE_HEADER = "x-ragwatch-probe"
#: ``outcome`` values of ``ragwatch_probe_headers_total``.
PROBE_OUTCOMES = ("accepted", "ignored", "replayed")
_DEFAULT_EXCLUDE = ("/metrics", "/health", "/healthz", "/livez", "/readyz")


def _with_slash(scope: Scope) -> Scope:
    scope = dict(scope)
    scope["path"] = scope["path"] + "/"
    raw = scope.get("raw_path")
    if isinstance(raw, bytes) and not raw.endswith(b"/"):
        scope["raw_path"] = raw + b"/"
    return scope


def _own_dashboard(watch: CaptureHost) -> Dashboard | None:
    """The live page over this process's own scores, or None when it does not score them in process or no
    gate was configured: the page is on only with ``dashboard_token`` or an explicit ``dashboard_sources``."""
    settings = watch.settings
    if watch.scorer is None or watch.queue is None or not settings.dashboard:
        return None
    token = settings.dashboard_token.get_secret_value() if settings.dashboard_token is not None else None
    explicit = "dashboard_sources" in settings.model_fields_set
    if not token and not explicit:
        return None
    from ragwatch.report.dashboard import Dashboard
    from ragwatch.report.ops import InProcessOperations
    from ragwatch.report.sources import QueueSource

    metrics = watch.metrics
    requests = metrics.dashboard_requests if metrics is not None else None
    sources = settings.dashboard_sources if explicit else None
    source = QueueSource(watch.queue)
    options: dict[str, Any] = {"sources": sources, "requests": requests, "counted": requests is not None}
    if metrics is not None:  # the operations panel from this process's own request histogram and cost counter
        options["operations"] = InProcessOperations([metrics.stage_duration, metrics.cost], watch.service)
        options["feedback"] = metrics.feedback  # the operator buttons' ragwatch_feedback_total, in rw's registry
    options["redact"] = watch.redactor  # operators' feedback redacted as this service's samples are
    return Dashboard.from_settings(source, settings, **options)


async def _read_body(receive: Receive, read: list[Message], limit: int) -> bytes | None:
    """The whole request body, or None when it is larger than ``limit`` or the client went away; every
    message taken from ``receive`` is appended to ``read`` (the app gets them all afterwards)."""
    size, parts = 0, []
    while True:
        message = await receive()
        read.append(message)
        if message.get("type") != "http.request":
            return None
        chunk = message.get("body", b"") or b""
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(read: list[Message], receive: Receive) -> Receive:
    """A receive that gives back the messages already read, then carries on with the client's."""
    pending = list(read)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


class HTTPServerError(Exception):
    """Stands for a 5xx response when finishing the run (the app itself raised nothing)."""


class RagwatchMiddleware:
    """``app = RagwatchMiddleware(app, watch=rw)`` or ``app.add_middleware(RagwatchMiddleware, watch=rw)``.

    ``include``: path prefixes whose every request is a run for the sampler (default: all paths are timed,
    and a request is handed to the sampler only when a pipeline, retriever or LLM stage ran during it);
    ``exclude``: path prefixes never watched (default: metrics and health endpoints, which would otherwise
    dilute latency figures).
    """

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        *,
        watch: CaptureHost,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] = _DEFAULT_EXCLUDE,
        probe_header: str = PROBE_HEADER,
    ) -> None:
        self.app = app
        self.watch = watch
        self.include = tuple(include) if include is not None else None
        self.exclude = tuple(exclude)
        self._probe = probe_header.lower().encode("latin-1")
        settings = watch.settings
        secret = settings.probe_secret
        self._verifier = ProbeVerifier(
            secret.get_secret_value() if secret is not None else None,
            settings.probe_sources,
            settings.probe_max_age_seconds,
            settings.probe_nonce_cache,
        )
        self._probe_body_limit = settings.probe_max_body_bytes
        header = settings.client_header
        self._client_header = header.lower().encode("latin-1") if header else None
        key = settings.sample_secret.get_secret_value().encode() if settings.sample_secret is not None else b""
        # Replicas sharing sample_secret give one client the same id; otherwise ids are per process.
        self._client_key = hashlib.sha256(b"ragwatch-client\0" + (key or os.urandom(32))).digest()
        metrics = watch.metrics
        self._m_probe = {o: metrics.probe_headers.labels(watch.service, o) for o in PROBE_OUTCOMES} if metrics else {}
        self._serve: Callable[[Scope, Receive, Send], Awaitable[None]] = self._watch_request
        dashboard = _own_dashboard(watch)
        if dashboard is not None:
            from ragwatch.report.dashboard import asgi_app

            # A request the gate refuses goes on to the app (its own /dashboard route, or a 404), watched.
            self._serve = asgi_app(dashboard, self._watch_request)

    def _watched(self, path: str) -> bool:
        if path.startswith(self.exclude):
            return False
        return self.include is None or path.startswith(self.include)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        await self._serve(scope, receive, send)

    async def _watch_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        probe: bytes | None = None
        headers = scope.get("headers") or ()
        for name, value in headers:
            if name == self._probe:
                probe = value
                break
        if probe is not None:  # never handed on: the app must not act on (or log) an outsider's mark
            scope = {**scope, "headers": [h for h in headers if h[0] != self._probe]}
        if not self._watched(scope.get("path", "")):
            if self._metrics_mount(scope):
                scope = _with_slash(scope)  # answered by the mounted metrics app, not by a 307
            await self.app(scope, receive, send)
            return
        call = self._begin(scope)
        if call is None:
            await self.app(scope, receive, send)
            return
        if probe is not None:
            receive = await self._mark_probe(call, scope, receive, probe)
        status = [0]

        async def send_wrapper(message: Message) -> None:
            if message.get("type") == "http.response.start":
                status[0] = message.get("status", 0)
                if self.watch.degraded:
                    message = {**message, "headers": [*message.get("headers", ()), *self._degraded_headers()]}
            await send(message)

        run = call.run if call._owner else None
        try:
            await self.app(scope, receive, send_wrapper)
        except BaseException as exc:
            call.deactivate()
            if run is not None and status[0]:
                run.status = status[0]
            call.fail(exc)
            raise
        call.deactivate()
        if run is not None and status[0]:
            run.status = status[0]
        call.finish(None, HTTPServerError(status[0]) if status[0] >= 500 else None)

    def _metrics_mount(self, scope: Scope) -> bool:
        """Whether the path names a mount of ragwatch's metrics app, asked without its trailing slash."""
        path = scope.get("path", "")
        if not path or path.endswith("/"):
            return False
        try:
            for app in (scope.get("app"), self.app):
                router = getattr(app, "router", app)
                for route in getattr(router, "routes", ()) or ():
                    if getattr(route, "path", None) != path or type(route).__name__ != "Mount":
                        continue
                    mounted = getattr(route, "_base_app", getattr(route, "app", None))
                    if isinstance(mounted, MetricsApp):
                        return True
        except Exception as exc:  # an unusual router: leave the request as it is
            self.watch.guard.failed("asgi", exc)
        return False

    def _degraded_headers(self) -> list[tuple[bytes, bytes]]:
        """Header values are Latin-1 on the wire, so the (often Chinese) notice is percent-encoded UTF-8."""
        notice = self.watch.notice or ""
        return [(b"x-ragwatch-degraded", b"1"), (b"x-ragwatch-notice", quote(notice, safe=" ,.;:!?").encode("ascii"))]

    def _begin(self, scope: Scope) -> PipelineCall | None:
        try:
            call = PipelineCall(self.watch, None, scope.get("path"))
            run = call.run
            if run is not None and call._owner:
                run.client = self._client(scope)
                if self.include is None:
                    run.rag = False  # until a stage of the host's pipeline marks it (see the module docstring)
            call.activate()
            return call
        except Exception as exc:
            self.watch.guard.failed("asgi", exc)
            return None

    async def _mark_probe(self, call: PipelineCall, scope: Scope, receive: Receive, value: bytes) -> Receive:
        """Mark the run as a probe when the header is a genuine mark; the receive the app must use next.

        The signature covers the body, so a well-formed, fresh mark makes the body be read here (up to
        ``probe_max_body_bytes``) and handed to the app unchanged afterwards. Whatever fails in checking,
        the request stays watched as ordinary traffic (counted as ``ignored``, and in the internal errors).
        """
        read: list[Message] = []
        outcome = "ignored"
        try:
            client = scope.get("client")
            peer = str(client[0]) if isinstance(client, (tuple, list)) and client else None
            if self._verifier.trusted_source(peer):
                outcome = "accepted"
            elif (mark := self._verifier.parse(value)) is not None:
                body = await _read_body(receive, read, self._probe_body_limit)
                if body is not None:
                    query = scope.get("query_string", b"")
                    method, path = scope.get("method", "GET"), scope.get("path", "")
                    outcome = self._verifier.verify(mark, method, path, query, hashlib.sha256(body).digest())
        except Exception as exc:  # a mark that breaks the check is no mark: the request is real traffic
            self.watch.guard.failed("asgi", exc)
            outcome = "ignored"
        try:
            child = self._m_probe.get(outcome)
            if child is not None:
                child.inc()
            run = call.run
            if outcome == "accepted" and run is not None:
                run.tags["probe"] = "1"
                if call.span is not None:
                    call.span.set_attribute(sc.PROBE, True)
        except Exception as exc:
            self.watch.guard.failed("asgi", exc)
        return _replay(read, receive) if read else receive

    def _client(self, scope: Scope) -> str | None:
        """The keyed hash of the client address (12 hex digits): stable per client, not reversible."""
        address: bytes | None = None
        if self._client_header is not None:
            for name, value in scope.get("headers") or ():
                if name == self._client_header:
                    address = value.rpartition(b",")[2].strip()  # the hop our own proxy appended
        if address is None:
            client = scope.get("client")
            if not client:
                return None
            address = str(client[0]).encode("utf-8", "surrogatepass")
        return hashlib.blake2b(address[:256], digest_size=6, key=self._client_key).hexdigest()
