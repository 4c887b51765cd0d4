"""The worker's live page on its real HTTP server over a real Redis: the ``dashboard_token`` gate, the
streamed ``/dashboard.jsonl`` with its lower cap, and the bound on concurrent store reads (issue 29, item 4:
one 20k read was 33.5 MB, and 8 concurrent readers took a worker to 1,001 MiB)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry

from ragwatch.metrics.catalog import DashboardMetrics
from ragwatch.queue.factory import open_queue
from ragwatch.queue.keys import Keys
from ragwatch.report.dashboard import MAX_COUNT, RETRY_AFTER, Dashboard
from ragwatch.report.sources import QueueSource
from ragwatch.scoring.health import serve_worker_http
from ragwatch.scoring.worker import Worker
from ragwatch.settings import load_settings
from tests.conftest import sample
from tests.scored import scored_records
from tests.servers import reset_after

SERVICE = "dash-worker"
TOKEN = "worker-dashboard-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class HeldSource(QueueSource):
    """The real queue's scores, but a read waits until the test lets it go: readers stay in flight for as
    long as the test needs, with no timing involved."""

    def __init__(self, queue: Any) -> None:
        super().__init__(queue)
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    def records(self, count: int) -> list[dict[str, Any]]:
        self.entered.release()
        assert self.release.wait(30)
        return super().records(count)


@pytest.fixture
def stored(redis_url: str) -> Iterator[Any]:
    """A Redis holding MAX_COUNT + 1,000 score records of SERVICE."""
    client = redis.Redis.from_url(redis_url)
    key = Keys(SERVICE).scores
    records = scored_records(n=240)
    pipe = client.pipeline(transaction=False)
    for i in range(MAX_COUNT + 1000):
        pipe.xadd(key, {"r": orjson.dumps({**records[i % 240], "sample_id": f"s{i}"})})
    pipe.execute()
    queue = open_queue(redis_url, SERVICE)
    try:
        yield queue
    finally:
        queue.close()
        client.close()


def served(queue: Any, source: Any = None, **settings: Any) -> tuple[str, Any, CollectorRegistry]:
    registry = CollectorRegistry()
    options = load_settings(service=SERVICE, **settings)
    requests = DashboardMetrics(registry).requests
    dashboard = Dashboard.from_settings(source or QueueSource(queue), options, requests=requests)
    worker = Worker(queue, [], block_ms=100)
    server = serve_worker_http(worker, 0, "127.0.0.1", registry, dashboard=dashboard)
    return f"http://127.0.0.1:{server.server_port}", server, registry


def stop(server: Any) -> None:
    server.shutdown()
    server.server_close()


def outcome(registry: CollectorRegistry, name: str) -> float:
    return sample(registry, "ragwatch_dashboard_requests_total", service=SERVICE, outcome=name)


def test_the_token_gate_on_the_worker_port(stored: Any) -> None:
    base, server, registry = served(stored, dashboard_token=TOKEN)
    try:
        for path in ("/dashboard", "/dashboard.json", "/dashboard.jsonl"):
            missing = httpx.get(base + path)
            assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
            assert httpx.get(base + path, headers={"Authorization": "Bearer nope"}).status_code == 401
            assert httpx.get(base + path, headers=AUTH).status_code == 200
            assert httpx.get(base + path, params={"token": TOKEN, "count": 3}).status_code == 200
            forwarded = httpx.get(base + path, headers={**AUTH, "X-Forwarded-For": "127.0.0.1"})
            assert forwarded.status_code == 403  # no trusted proxy configured
        assert httpx.get(base + "/metrics").status_code == 200  # the scrape needs no token
        assert httpx.get(base + "/readyz").status_code in (200, 503)
    finally:
        stop(server)
    assert (outcome(registry, "no_token"), outcome(registry, "bad_token")) == (3, 3)
    assert (outcome(registry, "forwarded"), outcome(registry, "served")) == (3, 6)


def test_a_huge_count_is_capped_and_streamed(stored: Any) -> None:
    """count=10^9 reads at most MAX_COUNT (5,000; 20,000 before) records, and the body is streamed: no
    Content-Length, written a batch of lines at a time, never joined into one body."""
    base, server, _ = served(stored, dashboard_token=TOKEN)
    try:
        with httpx.stream("GET", base + "/dashboard.jsonl", params={"count": 10**9}, headers=AUTH) as response:
            assert response.status_code == 200
            assert "content-length" not in response.headers
            pieces = list(response.iter_raw())
        lines = b"".join(pieces).splitlines()
        assert len(lines) == MAX_COUNT
        assert [json.loads(line)["sample_id"] for line in lines[:2]] == [f"s{MAX_COUNT + 999}", f"s{MAX_COUNT + 998}"]
        view = httpx.get(base + "/dashboard.json", params={"count": 10**9}, headers=AUTH).json()
        assert view["samples"] == MAX_COUNT
    finally:
        stop(server)


def test_concurrent_readers_beyond_the_bound_get_503(stored: Any) -> None:
    """Two store reads at once (dashboard_max_readers); a third gets 503 with Retry-After while they run,
    and the slots come back when they finish."""
    source = HeldSource(stored)
    base, server, registry = served(stored, source, dashboard_token=TOKEN)
    results: list[int] = []

    def read() -> None:
        results.append(httpx.get(base + "/dashboard.jsonl", params={"count": 4000}, headers=AUTH).status_code)

    readers = [threading.Thread(target=read) for _ in range(2)]
    try:
        for thread in readers:
            thread.start()
        for _ in readers:
            assert source.entered.acquire(timeout=30)  # both are inside the store read
        for path in ("/dashboard.jsonl", "/dashboard.json"):
            busy = httpx.get(base + path, params={"count": 3000}, headers=AUTH)
            assert busy.status_code == 503 and busy.headers["retry-after"] == str(RETRY_AFTER)
        assert httpx.get(base + "/dashboard", headers=AUTH).status_code == 200  # the page needs no read
        source.release.set()
        for thread in readers:
            thread.join(30)
        assert results == [200, 200]
        again = httpx.get(base + "/dashboard.jsonl", params={"count": 10}, headers=AUTH)
        assert again.status_code == 200 and len(again.text.splitlines()) == 10
    finally:
        source.release.set()
        stop(server)
    assert outcome(registry, "busy") == 2


def test_a_reader_that_goes_away_frees_its_slot(stored: Any) -> None:
    """A client that closes the connection mid-stream must not keep a slot: with one slot, read after read
    that is abandoned after the first piece still leaves the next one served."""
    base, server, _ = served(stored, dashboard_token=TOKEN, dashboard_max_readers=1)
    params = {"count": MAX_COUNT}

    def once_free(client: httpx.Client) -> httpx.Response:
        """The server frees a slot when its next write fails (or its last line is written), which can come a
        moment after the client closed: a 503 is retried for a few seconds. A slot kept for good keeps
        answering 503 and fails the test."""
        deadline = time.monotonic() + 10
        while True:
            request = client.build_request("GET", base + "/dashboard.jsonl", params=params, headers=AUTH)
            response = client.send(request, stream=True)
            if response.status_code != 503 or time.monotonic() > deadline:
                return response
            response.close()
            time.sleep(0.05)

    try:
        with httpx.Client() as client:
            for _ in range(4):
                abandoned = once_free(client)
                try:
                    assert abandoned.status_code == 200
                    next(abandoned.iter_raw())  # one piece, then the connection is closed
                finally:
                    abandoned.close()
            complete = once_free(client)
            assert complete.status_code == 200
            assert len(complete.read().splitlines()) == MAX_COUNT
    finally:
        stop(server)


class _BrokenPage:
    """Stands in for a dashboard whose page raises: an endpoint bug, not a reader going away."""

    feedback_path = "/dashboard/feedback"

    def serve(self, *args: Any) -> None:
        raise RuntimeError("endpoint bug")


def test_readers_that_go_away_and_endpoint_errors_are_logged_not_printed(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A scrape reset mid-reply (Prometheus past its timeout) printed a bare socketserver traceback on the
    worker's stderr for every reset; it is a debug line now, and an endpoint that raises is logged with its
    traceback. Either way the server answers the next request."""
    server = serve_worker_http(Worker(open_queue(None, SERVICE), []), 0, "127.0.0.1", CollectorRegistry())
    broken = serve_worker_http(
        Worker(open_queue(None, SERVICE), []),
        0,
        "127.0.0.1",
        CollectorRegistry(),
        dashboard=_BrokenPage(),  # type: ignore[arg-type]
    )
    caplog.set_level(logging.DEBUG, logger="ragwatch.scoring.health")
    try:
        for _ in range(5):
            reset_after(server.server_port, b"GET /metr")  # reset while the server reads the request line
        with pytest.raises(httpx.RemoteProtocolError):  # the failing endpoint closes without a reply
            httpx.get(f"http://127.0.0.1:{broken.server_port}/dashboard", timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("went away" in r.getMessage() for r in caplog.records):
            time.sleep(0.05)
        assert httpx.get(f"http://127.0.0.1:{server.server_port}/livez", timeout=10).status_code == 200
    finally:
        for each in (server, broken):
            each.shutdown()
            each.server_close()
    went_away = [r for r in caplog.records if "went away" in r.getMessage()]
    assert went_away and all(r.levelno == logging.DEBUG for r in went_away)
    failed = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].levelno == logging.ERROR
    assert failed[0].exc_info is not None and "endpoint bug" in str(failed[0].exc_info[1])
    assert "Traceback" not in capfd.readouterr().err
