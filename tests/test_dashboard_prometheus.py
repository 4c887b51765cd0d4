"""A worker's operations panel read from a real Prometheus (issue 27, "operations beside quality").

A worker has no request metrics of its own: with ``prometheus_url`` set, :meth:`Dashboard.from_settings`
reads request rate, error ratio, p95 latency and cost from Prometheus. Here the Debian ``prometheus`` binary
scrapes a real ``/metrics`` server once a second; the service's request histogram and cost counter get known
observations after a first scrape of zeros, and the page's JSON must show the figures Prometheus' own
``increase`` and ``histogram_quantile`` give for them. Skips locally without ``prometheus``; fails under
``CI=true``.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry

from ragwatch.metrics.catalog import CaptureMetrics
from ragwatch.metrics.exposition import start_metrics_server
from ragwatch.queue.factory import open_queue
from ragwatch.report.dashboard import Dashboard
from ragwatch.report.sources import QueueSource
from ragwatch.settings import Settings, load_settings
from tests.servers import _log_tail, _terminate, _wait_until, free_port, require_binary

SCRAPE = """
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: service
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


@contextlib.contextmanager
def running_prometheus(workdir: Path, target_port: int, *flags: str) -> Iterator[str]:
    """The ``prometheus`` binary scraping ``127.0.0.1:target_port`` every second, with ``flags`` (e.g. a
    feature flag); yields its URL once it is ready. Skips without the binary (fails under CI)."""
    binary = require_binary("prometheus")
    config = workdir / "prometheus.yml"
    config.write_text(SCRAPE.format(port=target_port))
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
                *flags,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until("prometheus", lambda: httpx.get(f"{url}/-/ready", timeout=1).status_code == 200, log, proc, 30)
        yield url
    finally:
        _terminate(proc)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Any, CollectorRegistry]]:
    """A metrics server on a fresh registry, and a Prometheus scraping it every second: (url, metrics, registry)."""
    require_binary("prometheus")  # before the server starts: a missing binary skips first
    registry = CollectorRegistry()
    metrics = CaptureMetrics(registry)
    server, thread = start_metrics_server(0, "127.0.0.1", registry)
    try:
        with running_prometheus(tmp_path, server.server_port) as url:
            yield url, metrics, registry
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _scalar(url: str, promql: str) -> float | None:
    body = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=5).json()
    assert body["status"] == "success", body
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def dashboard_json(settings: Settings, query: str) -> tuple[Dashboard, Any]:
    """The dashboard ``settings`` describe, over an empty in-process queue, and its answer to
    ``/dashboard.json?<query>``."""
    queue = open_queue("memory://", settings.service)
    try:
        dashboard = Dashboard.from_settings(QueueSource(queue), settings, counted=False)
        return dashboard, dashboard.handle("/dashboard.json", query)
    finally:
        queue.close()


def until(what: str, check: Any, log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f}s\n{_log_tail(log)}")
        time.sleep(0.25)


def test_the_worker_page_reads_operations_from_prometheus(
    prometheus: tuple[str, Any, CollectorRegistry], tmp_path: Path
) -> None:
    url, metrics, _registry = prometheus
    service = f"ops-{uuid.uuid4().hex[:6]}"
    log = tmp_path / "prometheus.log"
    ok = metrics.stage_duration.labels(service, "request", "ok")
    error = metrics.stage_duration.labels(service, "request", "error")
    cost = metrics.cost.labels(service, "gpt-4o-mini", "reported")
    count = f'ragwatch_stage_duration_seconds_count{{service="{service}",stage="request"}}'
    # A first scrape of zeros, so Prometheus' increase() starts from 0 for every series alike.
    until("the zero scrape", lambda: _scalar(url, f"sum({count})") == 0.0, log)
    for _ in range(7):
        ok.observe(0.3)  # all ten in the (0.25, 0.5] bucket
    for _ in range(3):
        error.observe(0.3)
    cost.inc(0.5)
    until("the ten requests", lambda: _scalar(url, f"sum({count})") == 10.0, log)

    settings = load_settings(service=service, prometheus_url=url + "/", trace_url_template=None)
    _, response = dashboard_json(settings, "range=1h")
    assert response is not None and response.status == 200, response
    ops = orjson.loads(response.body)["operations"]
    assert ops["available"] is True and ops["from"] == f"Prometheus at {url}", ops
    # increase() extrapolates the last scrape towards the query time, by the same factor for every series
    # of the same scrape: the count is 10 or a little more, the ratios are exact.
    assert 10.0 <= ops["requests"] <= 15.0
    assert ops["error_ratio"] == pytest.approx(0.3)
    assert ops["cost_per_hour"] / (ops["rate_per_second"] * 3600) == pytest.approx(0.05)  # $0.5 over 10 requests
    assert ops["p95_seconds"] == pytest.approx(0.25 + 0.25 * 0.95)  # linear within the (0.25, 0.5] bucket


def test_from_settings_links_traces_and_falls_back_when_prometheus_is_away() -> None:
    """``trace_url_template`` and ``service`` reach the page; a ``prometheus_url`` nobody answers leaves the
    panel saying where to look, with the error, instead of failing the page."""
    service = "ops-away"
    template = "https://tempo.example/trace/{trace_id}"
    settings = load_settings(
        service=service, prometheus_url=f"http://127.0.0.1:{free_port()}", trace_url_template=template
    )
    dashboard, response = dashboard_json(settings, "range=15m")
    assert (dashboard.trace_url, dashboard.service) == (template, service)
    assert response is not None and response.status == 200
    data = orjson.loads(response.body)
    assert data["trace_url"] is True
    ops = data["operations"]
    assert ops["available"] is False and service in ops["note"] and "prometheus" in ops["error"]
