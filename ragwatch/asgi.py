"""ASGI middleware: each HTTP request becomes one pipeline run.

Works with any ASGI framework (Starlette, FastAPI, Litestar…) and imports none of them. The run covers the
whole response, streamed bodies included: it ends when the app returns, after the last body chunk was
sent. A 5xx response or an exception counts as an error; the exception itself propagates unchanged.

While the service is degraded, responses carry ``x-ragwatch-degraded: 1`` and the user notice in
``x-ragwatch-notice``. Requests carrying the probe header (sent by ``ragwatch replay``) are marked as
probes so they can be kept out of real-traffic samples.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from . import semconv as sc
from .stages import PipelineCall

if TYPE_CHECKING:
    from .watch import RagWatch

__all__ = ["PROBE_HEADER", "RagwatchMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PROBE_HEADER = "x-ragwatch-probe"
_DEFAULT_EXCLUDE = ("/metrics", "/health", "/healthz", "/livez", "/readyz")


class HTTPServerError(Exception):
    """Stands for a 5xx response when finishing the run (the app itself raised nothing)."""


class RagwatchMiddleware:
    """``app = RagwatchMiddleware(app, watch=rw)`` or ``app.add_middleware(RagwatchMiddleware, watch=rw)``.

    ``include``: path prefixes to watch (default: all); ``exclude``: path prefixes never watched
    (default: metrics and health endpoints, which would otherwise dilute latency figures).
    """

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        *,
        watch: RagWatch,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] = _DEFAULT_EXCLUDE,
        probe_header: str = PROBE_HEADER,
    ) -> None:
        self.app = app
        self.watch = watch
        self.include = tuple(include) if include is not None else None
        self.exclude = tuple(exclude)
        self._probe = probe_header.lower().encode("latin-1")

    def _watched(self, path: str) -> bool:
        if path.startswith(self.exclude):
            return False
        return self.include is None or path.startswith(self.include)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or not self._watched(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        call = self._begin(scope)
        if call is None:
            await self.app(scope, receive, send)
            return
        status = [0]

        async def send_wrapper(message: Message) -> None:
            if message.get("type") == "http.response.start":
                status[0] = message.get("status", 0)
                if self.watch.degraded:
                    message = {**message, "headers": [*message.get("headers", ()), *self._degraded_headers()]}
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except BaseException as exc:
            call.deactivate()
            call.fail(exc)
            raise
        call.deactivate()
        call.finish(None, HTTPServerError(status[0]) if status[0] >= 500 else None)

    def _degraded_headers(self) -> list[tuple[bytes, bytes]]:
        """Header values are Latin-1 on the wire, so the (often Chinese) notice is percent-encoded UTF-8."""
        notice = self.watch.notice or ""
        return [(b"x-ragwatch-degraded", b"1"), (b"x-ragwatch-notice", quote(notice, safe=" ,.;:!?").encode("ascii"))]

    def _begin(self, scope: Scope) -> PipelineCall | None:
        try:
            call = PipelineCall(self.watch, None, scope.get("path"))
            probe = any(name == self._probe for name, _ in scope.get("headers") or ())
            if probe and call.run is not None:
                call.run.tags["probe"] = "1"
                if call.span is not None:
                    call.span.set_attribute(sc.PROBE, True)
            call.activate()
            return call
        except Exception as exc:
            self.watch._guard.failed("asgi", exc)
            return None
