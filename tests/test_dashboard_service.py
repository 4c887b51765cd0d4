"""The live page of a service that scores in process: a real uvicorn service on ``memory://`` (no Redis, no
worker) answers ``/dashboard``, ``.json`` and ``.jsonl`` from its own scores through ``RagwatchMiddleware``,
behind its gate (``dashboard_token``, forwarding headers, ``dashboard_sources``); ``ragwatch report --url``
reads them; headless Chromium draws them with planted markup inert."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from prometheus_client import CollectorRegistry

import ragwatch
from tests.scored import XSS_ANSWER, XSS_QUESTION
from tests.servers import free_port
from tests.test_dashboard import PAINTED, Page, browser  # noqa: F401  (browser: the Chromium fixture)

TOKEN = "s3cret-dashboard-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

CHUNKS = [
    {"id": "travel-1", "text": "Hotels are reimbursed up to 600 CNY per night on business trips.", "score": 0.9},
    {"id": "travel-2", "text": "Business trip hotels above 600 CNY per night need approval.", "score": 0.8},
]


def service(**settings: Any) -> tuple[FastAPI, ragwatch.RagWatch]:
    """A RAG service watched by ragwatch on its own memory:// queue, with a /dashboard route of its own."""
    options: dict[str, Any] = {
        "redis_url": f"memory://dash-{uuid.uuid4().hex[:8]}",
        "sample_rate": 1.0,
        "sample_max_per_second": 1e6,
        "scoring_max_per_second": 1000.0,
        "tracing": False,
        "flush_interval": 0.02,
    }
    registry = settings.pop("registry", None)
    rw = ragwatch.RagWatch("svc", registry=registry, **{**options, **settings})
    rw._test_registry = registry  # type: ignore[attr-defined]

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return CHUNKS

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, chunks: Any) -> str:
        return "Hotels are reimbursed up to 600 CNY per night. " + XSS_ANSWER

    app = FastAPI()
    app.add_middleware(ragwatch.RagwatchMiddleware, watch=rw)

    @app.post("/ask")
    def ask(body: dict[str, str]) -> dict[str, str]:
        return {"answer": generate(body["question"], retrieve(body["question"]))}

    @app.get("/dashboard")
    def own_dashboard() -> PlainTextResponse:
        return PlainTextResponse("the app's own dashboard")

    return app, rw


def serve(app: FastAPI, **config: Any) -> tuple[str, uvicorn.Server]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **config))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    return f"http://127.0.0.1:{port}", server


def traffic(base: str, rw: ragwatch.RagWatch, n: int) -> None:
    with httpx.Client(base_url=base, timeout=5) as client:
        for i in range(n):
            client.post("/ask", json={"question": f"{XSS_QUESTION} hotel limit {i}?"}).raise_for_status()
            time.sleep(0.05)
    deadline = time.monotonic() + 20
    while len(rw.scores()) < n:
        assert time.monotonic() < deadline, f"only {len(rw.scores())} of {n} samples scored"
        time.sleep(0.05)


@contextlib.contextmanager
def served(n: int, **settings: Any) -> Iterator[tuple[str, ragwatch.RagWatch]]:
    """:func:`service` with ``settings``, served by uvicorn, after ``n`` requests it scored itself:
    (its base URL, its RagWatch); stopped and closed on exit."""
    app, rw = service(**settings)
    base, server = serve(app)
    try:
        traffic(base, rw, n)
        yield base, rw
    finally:
        server.should_exit = True
        rw.close(1)


@pytest.fixture(scope="module")
def scored() -> Iterator[tuple[str, ragwatch.RagWatch]]:
    """A service that served 30 requests and scored them all itself; its page asks for TOKEN."""
    with served(30, dashboard_token=TOKEN) as found:
        yield found


def report(url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    env["RAGWATCH_DASHBOARD_TOKEN"] = TOKEN
    cmd = [sys.executable, "-m", "ragwatch", "report", "--url", url]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60, env=env)


def test_the_service_serves_its_own_scores_at_dashboard(scored: tuple[str, ragwatch.RagWatch]) -> None:
    base, rw = scored
    page = httpx.get(f"{base}/dashboard", headers=AUTH)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Content-Security-Policy" in page.text and "the app's own" not in page.text
    data = httpx.get(f"{base}/dashboard.json", params={"token": TOKEN}).json()
    assert data["samples"] == 30 and data["services"] == ["svc"]
    means = {row["metric"]: row["mean"] for row in data["metrics"]}
    records = rw.scores()
    cp3 = sum(r["scores"]["context_precision_3"] for r in records) / len(records)
    assert means["context_precision_3"] == pytest.approx(cp3)  # the in-process scores, not something else
    lines = httpx.get(f"{base}/dashboard.jsonl", params={"count": 5}, headers=AUTH).text.splitlines()
    assert [json.loads(line)["sample_id"] for line in lines] == [r["sample_id"] for r in records[:5]]


def test_the_service_page_shows_operations_from_its_own_metrics() -> None:
    """The operations panel of the service's own page reads its request histogram and cost counter: the
    requests it served in the range, none failed, a p95 and a cost — no Prometheus needed."""
    with served(4, dashboard_token=TOKEN, registry=CollectorRegistry()) as (base, _):  # own families: from 0
        ops = httpx.get(f"{base}/dashboard.json", params={"range": "15m"}, headers=AUTH).json()["operations"]
    assert ops["available"] is True and ops["from"] == "this process's metrics", ops
    assert ops["requests"] == 4 and ops["error_ratio"] == 0.0
    assert ops["p95_seconds"] is not None and ops["p95_seconds"] > 0 and ops["cost_per_hour"] > 0


def test_report_url_reads_a_running_service(scored: tuple[str, ragwatch.RagWatch], tmp_path: Path) -> None:
    base, _ = scored
    for url in (base, f"{base}/dashboard"):
        out = report(url, tmp_path)
        assert out.returncode == 0, out.stderr
        assert "30 scored samples from svc" in out.stdout and "context_precision_3" in out.stdout
    assert list(tmp_path.iterdir()) == []  # no Δ state file written unasked

    app, rw = service(dashboard_token=TOKEN)  # scores in process, but nothing was asked yet
    empty, server = serve(app)
    try:
        out = report(empty, tmp_path)
        assert out.returncode == 1 and "no score records in" in out.stderr and out.stdout == ""
    finally:
        server.should_exit = True
        rw.close(1)


@pytest.mark.parametrize(
    "settings",
    [
        {"dashboard": False, "dashboard_token": TOKEN},
        {"scoring": "off", "dashboard_token": TOKEN},
        {"dashboard_sources": ["10.99.0.0/16"]},
        {},
        {"dashboard_sources": ["10.99.0.0/16"], "dashboard_token": TOKEN},
    ],
    ids=["switched-off", "not-scoring", "client-not-in-dashboard-sources", "no-gate-configured", "token-and-sources"],
)
def test_the_app_keeps_dashboard_when_switched_off_or_not_scoring(settings: dict[str, Any]) -> None:
    """Off, scored elsewhere, no gate configured (neither a token nor explicit dashboard_sources: the default
    loopback list no longer opens the page, since behind a same-host proxy everyone is loopback), or asked by
    a client outside dashboard_sources: the app's own route answers, even with the right token."""
    app, rw = service(**settings)
    base, server = serve(app)
    try:
        assert httpx.get(f"{base}/dashboard", headers=AUTH).text == "the app's own dashboard"
        assert httpx.get(f"{base}/dashboard.json", headers=AUTH).status_code == 404  # the app has no such route
    finally:
        server.should_exit = True
        rw.close(1)


def refused(rw: ragwatch.RagWatch, outcome: str) -> float:
    value = rw_registry(rw).get_sample_value(
        "ragwatch_dashboard_requests_total", {"service": "svc", "outcome": outcome}
    )
    return value or 0.0


def rw_registry(rw: ragwatch.RagWatch) -> CollectorRegistry:
    return rw._test_registry  # type: ignore[attr-defined,no-any-return]


def test_the_token_opens_the_page_and_nothing_else_does() -> None:
    """Issue 29 item 2: behind a same-host proxy, an L4 proxy or a mesh sidecar every caller is 127.0.0.x,
    and the default loopback allow-list opened the page to all of them. With a token, only a caller that
    presents it gets the page and its JSON; the others reach the app's own route, and each refusal is counted."""
    app, rw = service(dashboard_token=TOKEN, registry=CollectorRegistry())
    base, server = serve(app)
    wrong = TOKEN[:-1] + "x"
    try:
        for path in ("/dashboard", "/dashboard.json", "/dashboard.jsonl"):
            apps = "the app's own dashboard" if path == "/dashboard" else '{"detail":"Not Found"}'
            assert httpx.get(base + path).text == apps
            assert httpx.get(base + path, headers={"Authorization": f"Bearer {wrong}"}).text == apps
            assert httpx.get(base + path, params={"token": wrong}).text == apps
            assert httpx.get(base + path, headers={"Authorization": f"Basic {TOKEN}"}).text == apps
            for opened in (httpx.get(base + path, headers=AUTH), httpx.get(base + path, params={"token": TOKEN})):
                assert opened.status_code == 200 and opened.text != apps
        assert httpx.post(f"{base}/ask", json={"question": "hotel?"}).status_code == 200  # the service goes on
    finally:
        server.should_exit = True
        rw.close(1)
    assert (refused(rw, "no_token"), refused(rw, "bad_token"), refused(rw, "served")) == (6, 6, 6)


@pytest.mark.parametrize("header", ["X-Forwarded-For", "X-Real-IP", "Forwarded"])
def test_forwarded_requests_are_refused_unless_a_trusted_proxy_brings_the_token(header: str) -> None:
    """Issue 29 item 2: with uvicorn's ``forwarded_allow_ips='*'`` (the usual container setting) a spoofed
    ``X-Forwarded-For: 127.0.0.1`` made the caller loopback, and dashboard_sources let it in. A request that
    carries a forwarding header is refused unless its peer is one of dashboard_trusted_proxies and it brings
    the token; an address list alone never opens the page to a forwarded request."""
    value = "for=127.0.0.1" if header == "Forwarded" else "127.0.0.1"
    spoofed = {header: value}
    app, rw = service(dashboard_sources=["127.0.0.1"], registry=CollectorRegistry())
    base, server = serve(app, proxy_headers=True, forwarded_allow_ips="*")
    try:
        assert httpx.get(f"{base}/dashboard").status_code == 200  # a direct loopback viewer (explicit list)
        assert httpx.get(f"{base}/dashboard", headers=spoofed).text == "the app's own dashboard"
    finally:
        server.should_exit = True
        rw.close(1)
    assert refused(rw, "forwarded") == 1

    app, rw = service(dashboard_token=TOKEN, dashboard_trusted_proxies=["10.0.0.0/8"])
    base, server = serve(app)
    try:  # the peer (127.0.0.1) is not a trusted proxy: even the token does not open it
        assert httpx.get(f"{base}/dashboard", headers={**spoofed, **AUTH}).text == "the app's own dashboard"
    finally:
        server.should_exit = True
        rw.close(1)

    app, rw = service(dashboard_token=TOKEN, dashboard_trusted_proxies=["127.0.0.1"])
    base, server = serve(app)
    try:  # our own proxy forwards, and the viewer brought the token
        assert httpx.get(f"{base}/dashboard", headers=spoofed).text == "the app's own dashboard"
        assert httpx.get(f"{base}/dashboard", headers={**spoofed, **AUTH}).status_code == 200
    finally:
        server.should_exit = True
        rw.close(1)


def test_a_bad_dashboard_source_is_a_config_error() -> None:
    app, rw = service(dashboard_sources=["not-an-address"])
    try:
        with pytest.raises(ragwatch.ConfigError, match="dashboard_sources"):
            ragwatch.RagwatchMiddleware(app, watch=rw)
    finally:
        rw.close(1)


def test_a_broken_source_answers_503_and_the_service_goes_on() -> None:
    app, rw = service(dashboard_token=TOKEN)
    base, server = serve(app)
    try:

        def broken(count: int) -> list[bytes]:
            raise RuntimeError("a bug in the store")

        rw.queue.recent_scores = broken  # type: ignore[union-attr,method-assign]
        assert httpx.get(f"{base}/dashboard", headers=AUTH).status_code == 200  # the page itself needs no store
        for path in ("/dashboard.json", "/dashboard.jsonl"):
            response = httpx.get(base + path, headers=AUTH)
            assert response.status_code == 503 and response.text == "score source unavailable\n"
        assert httpx.post(f"{base}/ask", json={"question": "hotel?"}).status_code == 200
    finally:
        server.should_exit = True
        rw.close(1)


def test_live_page_of_the_service_in_chromium(
    browser: Any,  # noqa: F811
    scored: tuple[str, ragwatch.RagWatch],
    tmp_path: Path,
) -> None:
    base, rw = scored
    page = Page(browser, f"{base}/dashboard?token={TOKEN}")  # the page passes the token on to its JSON
    charts = {
        c["name"]: c["points"] for c in page.js("window.ragwatch.charts.map(c => ({name: c.name, points: c.points}))")
    }
    assert {"context_precision_3", "faithfulness", "diagnosis_mix"} <= set(charts), charts
    assert all(n > 0 for n in charts.values()), charts
    for name in charts:
        assert page.js(PAINTED, name) > 2000, f"chart {name} drew (almost) nothing"
    assert page.js("document.querySelector('.facts').textContent").startswith("30 scored samples")
    badge = page.js("document.querySelector('.badge').textContent")  # the mode this process decided
    assert badge.startswith("DEGRADED") if rw.degraded else badge == "normal", badge
    assert page.js("document.querySelectorAll('table.metrics tbody tr').length") >= 2
    # planted markup in the questions and answers is text, never elements, and never ran
    assert page.js("window.__xss") is None
    assert page.js("document.querySelectorAll('a, img, svg, iframe, object, embed').length") == 0
    text = page.js("document.body.innerText")
    assert "<script>window.__xss='question'</script>" in text and "javascript:window.__xss='link'" in text
    assert {u.split("/")[2] for u in page.requests} == {base.split("/")[2]}  # same origin only
    page.wait("document.getElementById('live-status').textContent.includes('updated')")
    assert page.errors() == [], page.errors()
    page.shot(tmp_path / "service-live.png")
