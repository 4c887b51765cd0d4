"""Three ways to expose ragwatch's metrics: a standalone HTTP server, an ASGI app, and multiprocess mode.

Pre-fork servers (gunicorn, uvicorn with ``--workers``) run one Python process per worker; each keeps its
own counters. prometheus_client's multiprocess mode has every process write to files in
``PROMETHEUS_MULTIPROC_DIR`` and merges them at scrape time. Set that variable *before* the workers start
(and empty the directory at deploy), then serve :func:`metrics_registry` from any one endpoint; in
gunicorn, call :func:`mark_process_dead` from the ``child_exit`` hook.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, make_asgi_app, multiprocess, start_http_server

__all__ = [
    "MetricsApp",
    "log_errors",
    "log_request_error",
    "mark_process_dead",
    "metrics_asgi_app",
    "metrics_registry",
    "multiprocess_enabled",
    "start_metrics_server",
]

logger = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_enabled() -> bool:
    """True when this process writes its metrics to shared files (prometheus_client multiprocess mode)."""
    return bool(os.environ.get(MULTIPROC_ENV))


def metrics_registry(registry: CollectorRegistry | None = None) -> CollectorRegistry:
    """The registry a scrape should read: the merged view of all processes in multiprocess mode."""
    if multiprocess_enabled():
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged)
        return merged
    return registry if registry is not None else REGISTRY


class MetricsApp:
    """The ASGI app of :func:`metrics_asgi_app`: prometheus_client's, under a type the middleware knows.

    Starlette serves a mount at ``/metrics/`` only and answers ``/metrics`` with a 307, which scrapers
    configured not to follow redirects read as an empty target. :class:`~ragwatch.RagwatchMiddleware`
    recognises this app behind a mount and hands it the bare path itself; as a route endpoint
    (``app.add_route("/metrics", ragwatch.metrics_asgi_app())``) it needs no help.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._app = make_asgi_app(registry)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._app(scope, receive, send)


def metrics_asgi_app(registry: CollectorRegistry | None = None) -> MetricsApp:
    """An ASGI app answering Prometheus scrapes; mount it at ``/metrics`` (or add it as a route)."""
    return MetricsApp(metrics_registry(registry))


def start_metrics_server(
    port: int = 0, addr: str = "0.0.0.0", registry: CollectorRegistry | None = None
) -> tuple[Any, Any]:
    """Serve ``/metrics`` from a daemon thread; returns ``(server, thread)``. ``port=0`` picks a free one
    (read it from ``server.server_port``). A scrape that goes away mid-reply is a debug log line, not a
    traceback on the host's stderr (:func:`log_request_error`)."""
    server, thread = start_http_server(port, addr, metrics_registry(registry))
    log_errors(server, "metrics HTTP")
    return server, thread


def log_errors(server: Any, where: str, log: logging.Logger = logger) -> None:
    """Make a ``socketserver`` server (prometheus_client's ``start_http_server`` returns one, the worker's
    endpoints are one) report its request errors through :func:`log_request_error`, on ``log``."""
    server.handle_error = lambda request, client_address: log_request_error(client_address, where, log)


def log_request_error(client_address: Any, where: str, log: logging.Logger = logger) -> None:
    """A ``socketserver`` ``handle_error`` that logs instead of printing a bare traceback on ``stderr`` (its
    default): a reader that went away mid-request (a Prometheus scrape past its timeout, a closed browser
    tab) is ordinary, a debug line; any other error is a bug in an endpoint, logged with its traceback.
    Called inside the ``except`` of the server's request thread; the server serves the next request."""
    error = sys.exc_info()[1]
    peer = client_address[0] if isinstance(client_address, tuple) and client_address else client_address
    if isinstance(error, (ConnectionError, TimeoutError)):
        log.debug("%s: %s went away mid-request (%s)", where, peer, type(error).__name__)
    else:
        log.exception("%s: a request from %s failed", where, peer)


def mark_process_dead(pid: int) -> None:
    """Drop a dead worker's live gauges in multiprocess mode (gunicorn ``child_exit`` hook)."""
    if multiprocess_enabled():
        multiprocess.mark_process_dead(pid)
