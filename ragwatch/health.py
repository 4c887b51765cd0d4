"""The worker's own HTTP endpoints: ``/metrics`` for Prometheus, ``/livez`` and ``/readyz`` for Kubernetes,
and (when given one) the live quality page of :class:`~ragwatch.dashboard.Dashboard` at ``/dashboard``.

``/livez`` fails when the work loop has not turned for a while (stuck, not merely idle: an idle loop still
turns once per blocking read); ``/readyz`` fails while the queue is unreachable.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .exposition import metrics_registry

if TYPE_CHECKING:
    from .dashboard import Dashboard
    from .worker import Worker

__all__ = ["serve_worker_http"]


def serve_worker_http(
    worker: Worker,
    port: int,
    addr: str = "0.0.0.0",
    registry: CollectorRegistry | None = None,
    dashboard: Dashboard | None = None,
) -> ThreadingHTTPServer:
    """Start the endpoints on a daemon thread; ``port=0`` picks a free port (``server.server_port``)."""
    scrape = metrics_registry(registry)
    stale_after = 3 * (worker.block_ms / 1000 + worker.maintenance_seconds) + 5

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            page = dashboard.handle(path, query) if dashboard is not None else None
            if page is not None:
                self._reply(page.status, page.body, page.content_type, page.headers)
            elif path == "/metrics":
                self._reply(200, generate_latest(scrape), CONTENT_TYPE_LATEST)
            elif path == "/livez":
                alive = worker.last_loop == 0 or time.monotonic() - worker.last_loop < stale_after
                self._reply(200 if alive else 503, b"ok\n" if alive else b"work loop stalled\n")
            elif path == "/readyz":
                self._reply(200 if worker.ready else 503, b"ok\n" if worker.ready else b"queue unavailable\n")
            else:
                self._reply(404, b"not found\n")

        def _reply(
            self,
            status: int,
            body: bytes,
            content_type: str = "text/plain; charset=utf-8",
            headers: list[tuple[str, str]] | None = None,
        ) -> None:
            self.send_response(status)
            for name, value in headers or [("Content-Type", content_type), ("Content-Length", str(len(body)))]:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: probes hit these every few seconds
            pass

    server = ThreadingHTTPServer((addr, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="ragwatch-worker-http", daemon=True).start()
    return server
