"""The worker's own HTTP endpoints: ``/metrics`` for Prometheus, ``/livez`` and ``/readyz`` for Kubernetes,
and (when given one) the live quality page of :class:`~ragwatch.report.dashboard.Dashboard` at ``/dashboard``,
behind its gate (the dashboard token), its ``.jsonl`` streamed (HTTP/1.0: the body ends when the connection
closes), at most two store reads at once.

``/livez`` fails when the work loop has made no progress for a while (stuck, not merely idle or slow: an
idle loop still turns once per blocking read, and a busy one marks progress each time a sample finishes);
``/readyz`` fails while the queue is unreachable. The stall limit must exceed the slowest legitimate sample
— with an LLM judge, its timeout × attempts plus backoff — or Kubernetes would restart a healthy worker
again and again (see :func:`stall_seconds`).
"""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ragwatch.metrics.exposition import log_errors, metrics_registry

if TYPE_CHECKING:
    from ragwatch.report.dashboard import Dashboard
    from ragwatch.scoring.worker import Worker

__all__ = ["llm_worst_case_seconds", "serve_worker_http", "stall_seconds"]

#: Judges that call an LLM endpoint (their worst case bounds a sample's scoring time).
_LLM_JUDGES = ("llm", "cascade")
#: The LLM judge's default backoff cap (seconds between retries at most).
_BACKOFF_CAP = 20.0

logger = logging.getLogger(__name__)


def llm_worst_case_seconds(timeout: float, max_retries: int, backoff_cap: float = _BACKOFF_CAP) -> float:
    """The longest one LLM judge call can legitimately take: every attempt times out, every backoff is
    the longest; twice, because malformed output is retried once with the same request."""
    return 2 * ((max_retries + 1) * timeout + max_retries * backoff_cap)


def default_stall_seconds(worker: Worker) -> float:
    """Idle loops turn once per blocking read plus maintenance; three missed turns mean stuck."""
    return 3 * (worker.block_ms / 1000 + worker.maintenance_seconds) + 5


def stall_seconds(worker: Worker, settings: Any, judges: Any = ()) -> float:
    """The /livez stall limit: the setting, else the idle bound raised to the LLM judge's worst case."""
    if settings.worker_stall_seconds is not None:
        return float(settings.worker_stall_seconds)
    limit = default_stall_seconds(worker)
    if any(getattr(j, "name", "") in _LLM_JUDGES for j in judges):
        limit = max(limit, llm_worst_case_seconds(settings.judge_timeout, settings.judge_max_retries) + 10)
    return limit


def serve_worker_http(
    worker: Worker,
    port: int,
    addr: str = "0.0.0.0",
    registry: CollectorRegistry | None = None,
    dashboard: Dashboard | None = None,
) -> ThreadingHTTPServer:
    """Start the endpoints on a daemon thread; ``port=0`` picks a free port (``server.server_port``)."""
    scrape = metrics_registry(registry)
    stale_after = worker.stall_seconds or default_stall_seconds(worker)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            page = None
            if dashboard is not None:
                headers = [
                    (k.lower().encode("latin-1"), v.encode("latin-1", "replace")) for k, v in self.headers.items()
                ]
                page = dashboard.serve(path, query, headers, self.client_address[0])
            if page is not None:
                try:
                    self._reply(page.status, page.body, page.content_type, page.headers)
                    for piece in page.chunks or ():  # streamed: the connection closes after the last piece
                        self.wfile.write(piece)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the reader went away; its slot is freed below
                finally:
                    page.close()
            elif path == "/metrics":
                self._reply(200, generate_latest(scrape), CONTENT_TYPE_LATEST)
            elif path == "/livez":
                alive = worker.last_loop == 0 or time.monotonic() - worker.last_loop < stale_after
                self._reply(200 if alive else 503, b"ok\n" if alive else b"work loop stalled\n")
            elif path == "/readyz":
                self._reply(200 if worker.ready else 503, b"ok\n" if worker.ready else b"queue unavailable\n")
            else:
                self._reply(404, b"not found\n")

        def do_POST(self) -> None:
            """The page's operator buttons (``/dashboard/feedback``); every other POST is a 404."""
            path = self.path.partition("?")[0]
            if dashboard is None or path != dashboard.feedback_path:
                self._reply(404, b"not found\n")
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            body = self.rfile.read(length) if 0 <= length <= dashboard.max_feedback_body else None
            if body is None:
                self.close_connection = True  # the unread body must not be taken for the next request
            headers = [(k.lower().encode("latin-1"), v.encode("latin-1", "replace")) for k, v in self.headers.items()]
            page = dashboard.post(path, headers, self.client_address[0], body)
            if page is not None:
                self._reply(page.status, page.body, page.content_type, page.headers)

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
    log_errors(server, "worker HTTP", logger)  # a reader gone mid-reply: a debug line, not a stderr traceback
    threading.Thread(target=server.serve_forever, name="ragwatch-worker-http", daemon=True).start()
    return server
