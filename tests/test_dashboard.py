"""The HTML report and the live page in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

Each page must draw every chart with data (the canvases hold painted pixels, the degraded band is red where
the replayed period is), show user text as text (planted ``<script>``, ``onerror``, ``javascript:`` links and
remote images stay inert), log no console error (a CSP hash mismatch would), and fetch nothing it does not
own. Screenshots go to the test's temp dir (the path is printed with ``-s``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry

from ragwatch.mode.degrade import Policy
from ragwatch.queue.factory import open_queue
from ragwatch.report.dashboard import Dashboard
from ragwatch.report.sources import QueueSource
from ragwatch.scoring.health import serve_worker_http
from ragwatch.scoring.worker import Worker
from tests.scored import XSS_ANSWER, XSS_CHUNK, XSS_QUESTION, XSS_ROUTE, scored_records
from tests.servers import CHROMIUM_FLAGS, free_port, interrupt, lines_until, require_binary, wait_ready

ROOT = Path(__file__).resolve().parent.parent
#: Screenshots for docs/dashboard.md are written there with RAGWATCH_DOCS_SCREENSHOTS=1 (else to tmp).
DOCS = ROOT / "docs"
THRESHOLDS = {
    "faithfulness": 0.75,
    "hallucination_rate": 0.2,
    "answer_relevance": 0.85,
    "context_relevance": 0.35,
    "context_precision_3": 0.65,
}
POLICY = Policy(window_samples=20, min_samples=8, window_seconds=120, hold_seconds=10, min_dwell_seconds=10)
METRICS = ["faithfulness", "hallucination_rate", "answer_relevance", "context_relevance", "context_precision_3"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = require_binary("chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:  # launch() gives every browser a fresh temporary profile (--user-data-dir)
        b = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


class Page:
    """A page with its console messages, uncaught errors and every request it made."""

    def __init__(self, browser: Any, url: str, width: int = 1280) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": 1000})
        self.console: list[tuple[str, str]] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.console.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.console.append(("pageerror", str(e))))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(url)
        self.wait("window.ragwatch && window.ragwatch.rendered > 0")

    def wait(self, expression: str, timeout: float = 15.0) -> None:
        """Poll with evaluate (wait_for_function would eval a string, which the page's CSP rightly forbids)."""
        deadline = time.monotonic() + timeout
        while not self.page.evaluate(expression):
            assert time.monotonic() < deadline, f"timed out waiting for {expression}: {self.page.evaluate(SEEN)}"
            time.sleep(0.1)

    def js(self, expression: str, arg: Any = None) -> Any:
        return self.page.evaluate(expression, arg)

    def errors(self) -> list[tuple[str, str]]:
        return [(t, m) for t, m in self.console if t in ("error", "pageerror")]

    def shot(self, path: Path) -> Path:
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path


# what the page shows, for a timed-out wait's message
SEEN = "[window.ragwatch && window.ragwatch.error, (document.querySelector('.facts') || {}).textContent]"

PAINTED = """(name) => {
  const chart = window.ragwatch.charts.find(c => c.name === name);
  const canvas = chart.plot.root.querySelector('canvas');
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235)) painted++;
  return painted;
}"""

# the colour of the plot background halfway through the first degraded period, near the top (no series there)
BAND_PIXEL = """(name) => {
  const chart = window.ragwatch.charts.find(c => c.name === name);
  const u = chart.plot, p = window.ragwatch.data.degraded_periods[0];
  const x = Math.round(u.valToPos((p.start + p.end) / 2, 'x', true));
  const y = Math.round(u.bbox.top + 3);
  return Array.from(u.ctx.getImageData(x, y, 1, 1).data);
}"""


def assert_page_is_sound(page: Page, *, samples: int, now: bool = True) -> None:
    charts = {
        c["name"]: c["points"] for c in page.js("window.ragwatch.charts.map(c => ({name: c.name, points: c.points}))")
    }
    assert set(charts) == {*METRICS, "diagnosis_mix"}
    assert all(n > 10 for n in charts.values()), charts
    for name in charts:
        assert page.js(PAINTED, name) > 2000, f"chart {name} drew (almost) nothing"
    r, g, b, _ = page.js(BAND_PIXEL, "context_precision_3")
    assert r > g + 10 and r > b + 10, f"no red degraded band where the period is: {(r, g, b)}"
    assert page.js("document.querySelector('.facts').textContent").startswith(f"{samples} scored samples")
    assert page.js("document.querySelector('.judges').textContent").startswith("scored by offline ")
    assert page.js("document.querySelectorAll('table.metrics tbody tr').length") == 5
    assert_ceiling_is_drawn_as_a_ceiling(page)
    table = page.js("document.querySelector('table.metrics').textContent")
    assert "✅ ok" in table and ("⚠️ warn" in table or "❌ fail" in table)  # CP@3 is under its line
    cells = page.js("Array.from(document.querySelectorAll('table.heatmap td.cell')).map(td => td.className)")
    assert len(cells) >= 4 * 5 and any("fail" in c or "warn" in c for c in cells) and any(" ok" in c for c in cells)
    assert page.js("document.querySelectorAll('mark.claim.unsupported').length") > 0
    assert page.js("document.querySelectorAll('mark.claim.supported').length") > 0
    assert page.js("document.querySelectorAll('.chunks .chunk').length") > 0
    # worst samples: one card per question, its count shown
    assert page.js("document.querySelector('article.sample .count').textContent").endswith(
        "samples asked this and failed"
    )
    # the now-panel: the breaker in words, a live window per scored metric
    assert page.js("document.querySelectorAll('table.now-windows tbody tr').length") == (5 if now else 0)
    # planted markup is text, not elements, and never ran
    assert page.js("window.__xss") is None
    assert page.js("document.querySelectorAll('img, svg, iframe, object, embed').length") == 0
    assert page.js("Array.from(document.querySelectorAll('a')).filter(a => !a.closest('.trace')).length") == 0
    text = page.js("document.body.innerText")
    for payload in (XSS_QUESTION, XSS_ANSWER, XSS_ROUTE, XSS_CHUNK):
        assert payload in text, payload
    assert "s-<b>bold</b>" in text
    assert page.errors() == [], page.errors()


HEAT_COLUMN = """(metric) => {
  const t = document.querySelector('table.heatmap');
  const col = Array.from(t.querySelectorAll('thead th')).findIndex(th => th.textContent === metric);
  return Array.from(t.querySelectorAll('tbody tr'))
    .map(tr => [tr.cells[col].className, tr.cells[col].firstChild.textContent]);
}"""


def assert_ceiling_is_drawn_as_a_ceiling(page: Page) -> None:
    """hallucination_rate is held to a ceiling: 1 answer in 7 hallucinated is under its line (0.20 or so), so
    ok — held to a floor like the other scores it would read as a failure everywhere."""
    line = page.js("window.ragwatch.data.thresholds.hallucination_rate")
    assert 0.15 < line < 0.3
    rows = page.js("Array.from(document.querySelectorAll('table.metrics tbody tr')).map(tr => tr.textContent)")
    [rate] = [r for r in rows if r.startswith("hallucination_rate")]
    assert f"≤ {line:.3f}" in rate and "✅ ok" in rate, rate
    assert next(r for r in rows if r.startswith("faithfulness")).count("≥ 0.750") == 1
    legend = page.js("document.querySelector('.chart[data-metric=\"hallucination_rate\"] .u-legend').textContent")
    assert f"threshold ≤ {line:.2f}" in legend, legend
    cells = [(cls, float(text)) for cls, text in page.js(HEAT_COLUMN, "hallucination_rate") if text != "–"]
    assert cells and all(("ok" in cls) == (mean <= line) for cls, mean in cells), cells
    assert any(mean < line for _, mean in cells) and any(mean > line + 0.05 and "fail" in cls for cls, mean in cells)


def test_an_empty_source_says_so(browser: Any, tmp_path: Path) -> None:
    from ragwatch.report.dashboard import render_html
    from ragwatch.report.view import view_data

    html = tmp_path / "empty.html"
    html.write_text(render_html(view_data([], THRESHOLDS, POLICY)), encoding="utf-8")
    page = Page(browser, html.as_uri())
    assert "No scored samples" in page.js("document.body.innerText")
    assert page.js("window.ragwatch.charts.length") == 0 and page.errors() == []


def test_html_report_renders_offline_and_inert(browser: Any, tmp_path: Path) -> None:
    records = scored_records()
    # the newer half scored by another version of the judge (a version string is data: planted markup too)
    tuned = {"name": "offline", "version": "2<img src=x onerror=window.__xss=1>"}
    for r in records[len(records) // 2 :]:
        r["judges"] = [tuned]
    jsonl = tmp_path / "scores.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    html = tmp_path / "report.html"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    env |= {"RAGWATCH_SLA_WINDOW_SAMPLES": "20", "RAGWATCH_SLA_MIN_SAMPLES": "8"}
    env |= {
        "RAGWATCH_SLA_WINDOW_SECONDS": "120",
        "RAGWATCH_SLA_HOLD_SECONDS": "10",
        "RAGWATCH_SLA_MIN_DWELL_SECONDS": "10",
    }
    cmd = [sys.executable, "-m", "ragwatch", "report", "--jsonl", str(jsonl), "--html", str(html)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    page = Page(browser, html.as_uri())
    # a file has no window store: the now-panel is rebuilt from its records, as of the newest, and says so
    assert_page_is_sound(page, samples=len(records), now=True)
    assert "(from the records)" in page.js("document.querySelector('section.now h2').textContent")
    assert page.js("document.querySelector('.badge').textContent") == "mode: not in this source"
    judges = page.js("document.querySelector('.judges').textContent")
    assert f"offline 1 ({len(records) // 2})" in judges and f"offline {tuned['version']} (" in judges
    warning = page.js("document.querySelector('.mixed-judges').textContent")
    assert "offline scored this window under more than one version" in warning
    assert {u.split(":", 1)[0] for u in page.requests} == {"file"} and len(page.requests) == 1
    assert page.js("document.querySelectorAll('script').length") == 4  # config, data, uPlot, dashboard
    page.shot(tmp_path / "report.png")


@pytest.fixture
def live(redis_url: str) -> Iterator[tuple[str, Any]]:
    """A worker's HTTP server with the dashboard, over real Redis holding ten minutes of scores."""
    queue = open_queue(redis_url, "kb-qa")
    records = scored_records(start=time.time() - 700)
    queue.apply_many([(r["sample_id"], orjson.dumps(r), r["scores"], r["created_at"]) for r in records])
    dashboard = Dashboard(QueueSource(queue), THRESHOLDS, POLICY, refresh_seconds=1.0, cache_seconds=0.0)
    server = serve_worker_http(Worker(queue, []), 0, "127.0.0.1", CollectorRegistry(), dashboard=dashboard)
    try:
        yield f"http://127.0.0.1:{server.server_port}", queue
    finally:
        server.shutdown()
        server.server_close()
        queue.close()


def test_live_page_on_the_worker_port_refreshes(browser: Any, live: tuple[str, Any], tmp_path: Path) -> None:
    base, queue = live
    assert httpx.get(f"{base}/metrics").status_code == 200  # the worker's own endpoints are still there
    page = Page(browser, f"{base}/dashboard?range=15m")  # ten minutes of scores: 15 s buckets
    assert_page_is_sound(page, samples=240)
    assert page.js("document.querySelector('.badge').textContent") == "normal"
    assert {u.split("/")[2] for u in page.requests} == {base.split("/")[2]}  # same origin only
    page.shot(tmp_path / "live.png")
    more = scored_records(start=time.time() - 5, n=30, seed=9)
    for r in more:
        r["sample_id"] = "new-" + r["sample_id"]
    queue.apply_many([(r["sample_id"], orjson.dumps(r), r["scores"], r["created_at"]) for r in more])
    queue.set_override("on")
    page.wait("document.querySelector('.facts').textContent.startsWith('270 scored samples')")
    page.wait("document.querySelector('.badge').textContent.startsWith('DEGRADED')")
    assert "updated" in page.js("document.getElementById('live-status').textContent")
    assert page.errors() == []


def test_report_from_a_running_endpoint(live: tuple[str, Any], tmp_path: Path) -> None:
    base, _ = live
    data = httpx.get(f"{base}/dashboard.json").json()
    assert data["samples"] == 240 and data["degraded_periods"] and data["mode"]["degraded"] is False
    lines = httpx.get(f"{base}/dashboard.jsonl", params={"count": 5}).text.splitlines()
    assert len(lines) == 5 and all(json.loads(line)["service"] == "kb-qa" for line in lines)
    assert httpx.get(f"{base}/dashboard.json", params={"count": "x"}).status_code == 400
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    for url in (f"{base}/dashboard", base):  # the page's URL or the bare base
        cmd = [sys.executable, "-m", "ragwatch", "report", "--url", url, "--count", "50"]
        out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        assert "50 scored samples from kb-qa" in out.stdout
    cmd = [sys.executable, "-m", "ragwatch", "report", "--url", f"http://127.0.0.1:{free_port()}/dashboard"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1 and "queue error" in out.stderr


def test_demo_serve_prints_the_dashboard_url(browser: Any, tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")} | {"PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "ragwatch", "demo", "--quick", "--serve", "--port", str(port), "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        printed = lines_until(proc, "still serving")
        found = [m.group(1) for line in printed if (m := re.search(r"live quality page: (\S+)", line))]
        assert found and found[0].startswith(f"http://127.0.0.1:{port}/dashboard"), "".join(printed)
        url = found[0]  # with its ?token= when the demo's page is gated
        ask = httpx.post(f"http://127.0.0.1:{port}/ask", json={"question": "How early must travel be approved?"})
        assert ask.status_code == 200 and ask.json()["answer"]  # everything else still reaches the service
        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
        page = Page(browser, url, width=1400)
        charts = {
            c["name"]: c["points"]
            for c in page.js("window.ragwatch.charts.map(c => ({name: c.name, points: c.points}))")
        }
        assert charts["context_precision_3"] > 0 and charts["diagnosis_mix"] > 0
        assert page.js("window.ragwatch.data.degraded_periods.length") >= 1  # the demo's fault, replayed
        assert page.js("window.ragwatch.data.samples") >= 90
        # top_k = 3 = K: context relevance is CP@3 on every sample, shown once (no second chart or column)
        assert page.js("window.ragwatch.data.merged") == {"context_relevance": "context_precision_3"}
        assert "context_relevance" not in charts
        assert page.js("document.querySelector('.breaker').textContent").startswith("normal")  # recovered
        height = page.js("document.documentElement.scrollHeight")
        page.shot(tmp_path / "demo.png")
        assert height < 2500, f"the demo page is {height} px tall at 1400 px wide"
        assert page.errors() == []
        page.shot(DOCS / "dashboard-demo.png" if os.environ.get("RAGWATCH_DOCS_SCREENSHOTS") else tmp_path / "demo.png")
    finally:
        interrupt(proc)


@pytest.mark.parametrize("enabled", [True, False])
def test_ragwatch_worker_serves_the_dashboard_unless_switched_off(redis_url: str, enabled: bool) -> None:
    queue = open_queue(redis_url, "kb-qa")
    records = scored_records(n=30)
    queue.apply_many([(r["sample_id"], orjson.dumps(r), r["scores"], r["created_at"]) for r in records])
    queue.close()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    env |= {"RAGWATCH_DASHBOARD": str(enabled).lower(), "RAGWATCH_WORKER_ADDR": "127.0.0.1"}
    cmd = [sys.executable, "-m", "ragwatch", "worker", "--redis-url", redis_url, "--service", "kb-qa"]
    proc = subprocess.Popen([*cmd, "--port", str(port), "--max-seconds", "30"], env=env, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc, timeout=20)
        page = httpx.get(f"http://127.0.0.1:{port}/dashboard")
        data = httpx.get(f"http://127.0.0.1:{port}/dashboard.json")
        if enabled:
            assert page.status_code == 200 and "Content-Security-Policy" in page.text
            assert page.headers["content-type"].startswith("text/html")
            assert data.json()["samples"] == 30 and data.json()["services"] == ["kb-qa"]
        else:
            assert page.status_code == 404 and data.status_code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)


def test_an_unreachable_store_answers_503_not_a_crash() -> None:
    queue = open_queue(f"redis://127.0.0.1:{free_port()}/0", "kb-qa")
    try:
        dashboard = Dashboard(QueueSource(queue), THRESHOLDS, POLICY)
        assert dashboard.handle("/dashboard").status == 200  # the page itself needs no store
        for path in ("/dashboard.json", "/dashboard.jsonl"):
            response = dashboard.handle(path, "count=10")
            assert response is not None and response.status == 503
        assert dashboard.handle("/metrics") is None  # not the dashboard's: left to the server
    finally:
        queue.close()


# -- issue 27: now apart from history, range, filters, trace links, loading and errors -----------------------
@pytest.fixture
def windowed(redis_url: str) -> Iterator[tuple[str, Any, Any, Any]]:
    """A worker's page and /metrics over real Redis: two hours of scores, the newest 20 in the SLA window,
    the evaluator ticked (what `ragwatch worker` does every evaluation period)."""
    from ragwatch.metrics.catalog import WorkerMetrics, families
    from ragwatch.mode.sla import SLAEvaluator

    queue = open_queue(redis_url, "kb-qa")
    now = time.time()
    old = scored_records(start=now - 7200, n=40, seed=5)  # an hour and more ago
    recent = scored_records(start=now - 600, n=236, seed=3)  # the last ten minutes, ending inside the window
    for r in old:
        r["sample_id"] = "old-" + r["sample_id"]
    recent[-1]["trace_id"] = 'x"&<b>/#?y'  # a hostile trace id: the link must carry it encoded
    recent[-1]["scores"]["faithfulness"] = 0.1  # past its line: it gets a card
    records = old + recent
    queue.apply_many([(r["sample_id"], orjson.dumps(r), r["scores"], r["created_at"]) for r in records])
    registry = CollectorRegistry()
    metrics = families(WorkerMetrics, registry)
    health = {m: t for m, t in THRESHOLDS.items() if m != POLICY.metric}
    evaluator = SLAEvaluator(queue, POLICY, health, metrics)
    evaluator.tick()
    dashboard = Dashboard(
        QueueSource(queue),
        THRESHOLDS,
        POLICY,
        refresh_seconds=1.0,
        cache_seconds=0.0,
        trace_url="https://tempo.example/explore?trace={trace_id}",
    )
    server = serve_worker_http(Worker(queue, []), 0, "127.0.0.1", registry, dashboard=dashboard)
    try:
        yield f"http://127.0.0.1:{server.server_port}", queue, evaluator, records
    finally:
        server.shutdown()
        server.server_close()
        queue.close()


def scraped_window(base: str, metric: str) -> float:
    for line in httpx.get(f"{base}/metrics").text.splitlines():
        if line.startswith("ragwatch_window_value{") and f'metric="{metric}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no ragwatch_window_value for {metric}")


def test_the_now_panel_shows_the_window_value_of_metrics(browser: Any, windowed: tuple, tmp_path: Path) -> None:
    base, _, evaluator, _ = windowed
    page = Page(browser, f"{base}/dashboard")
    rows = page.js(
        "Array.from(document.querySelectorAll('table.now-windows tbody tr'))"
        ".map(tr => [tr.cells[0].firstChild.textContent, tr.cells[1].textContent])"
    )
    assert [m for m, _ in rows] == ["context_precision_3", *(m for m in METRICS if m != "context_precision_3")]
    evaluator.tick()  # within one evaluation period of the page's read
    for metric, shown in rows:
        assert float(shown) == pytest.approx(scraped_window(base, metric), abs=5e-4), metric
    words = page.js("document.querySelector('.breaker').textContent")
    assert words.startswith("normal") and "enters degraded when context_precision_3 < 0.65" in words
    assert page.errors() == []


def test_range_and_filters_redraw(browser: Any, windowed: tuple, tmp_path: Path) -> None:
    base, _, _, records = windowed
    page = Page(browser, f"{base}/dashboard")
    assert page.js("window.ragwatch.data.range.name") == "1h" and "(last 1h)" in page.js(
        "document.querySelector('.facts').textContent"
    )
    assert page.js("window.ragwatch.data.samples") == 236  # the older 40 are outside the last hour
    before = page.js("window.ragwatch.loads")
    page.page.click("button[data-range='24h']")
    page.wait(f"window.ragwatch.loads > {before} && window.ragwatch.data.range.name === '24h'")
    assert page.js("window.ragwatch.data.samples") == 276 and "range=24h" in page.page.url
    first = page.js("window.ragwatch.charts.find(c => c.name === 'faithfulness').plot.scales.x.min")
    assert first < time.time() - 7000  # the axis now reaches back to the old records
    page.page.select_option("select[name=route]", "/chat")
    page.wait("window.ragwatch.data.filters.route === '/chat'")
    assert page.js("window.ragwatch.data.samples") == sum(1 for r in records if r["route"] == "/chat")
    assert "filtered: route /chat" in page.js("document.querySelector('.filtered').textContent")
    page.page.fill("input[name=q]", records[-2]["trace_id"])
    page.page.click("button[name=apply]")
    page.wait("window.ragwatch.data.filters.text !== null")
    assert page.js("window.ragwatch.data.samples") == (1 if records[-2]["route"] == "/chat" else 0)
    page.page.click("button[name=clear]")
    page.wait("window.ragwatch.data.filters.route === null && window.ragwatch.data.samples === 276")
    page.page.select_option("select[name=diagnosis]", "noisy_retrieval")
    page.wait("window.ragwatch.data.filters.diagnosis === 'noisy_retrieval'")
    diags = page.js(
        "Array.from(document.querySelectorAll('article.sample')).map(a => a.querySelector('.diag').textContent)"
    )
    assert diags and set(diags) == {"noisy_retrieval"}
    if os.environ.get("RAGWATCH_DOCS_SCREENSHOTS"):
        page.page.set_viewport_size({"width": 1400, "height": 1000})
        time.sleep(0.5)
        page.shot(DOCS / "dashboard-filtered.png")
    assert httpx.get(f"{base}/dashboard.json", params={"range": "7d"}).status_code == 400
    assert page.errors() == []


def test_cards_link_to_their_trace_escaped_and_legends_show_on_hover(browser: Any, windowed: tuple) -> None:
    base, _, _, _records = windowed
    page = Page(browser, f"{base}/dashboard?q=" + "x%22%26")  # finds the sample with the hostile trace id
    links = page.js(
        "Array.from(document.querySelectorAll('.trace a')).map(a => [a.getAttribute('href'), a.textContent])"
    )
    assert links == [["https://tempo.example/explore?trace=x%22%26%3Cb%3E%2F%23%3Fy", 'x"&<b>/#?y']]
    assert page.js("document.querySelector('.trace a').rel") == "noopener noreferrer"
    assert page.js("document.querySelectorAll('.trace b').length") == 0
    page = Page(browser, f"{base}/dashboard")
    traced = page.js("Array.from(document.querySelectorAll('.trace a')).map(a => a.getAttribute('href'))")
    assert traced and all(h.startswith("https://tempo.example/explore?trace=") for h in traced)
    legend = "getComputedStyle(document.querySelector('.chart[data-metric=faithfulness] .u-legend')).display"
    assert page.js(legend) == "none"  # no permanent "Time: -- · mean: --" row
    page.page.hover(".chart[data-metric=faithfulness] .u-over")
    assert page.js(legend) != "none"
    axes = page.js("window.ragwatch.charts.find(c => c.name === 'faithfulness').plot.axes.map(a => a.label)")
    assert axes[1] == "mean score" and axes[2].startswith("samples / ") and axes[0].startswith("time (")
    assert page.errors() == []


class SlowOrBroken:
    """A score source that answers late, then fails: what the page shows meanwhile."""

    name = "slow"

    def __init__(self, delay: float, fail: bool) -> None:
        self.delay, self.fail = delay, fail

    def records(self, count: int) -> list[dict[str, Any]]:
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("store broken")
        return scored_records(start=time.time() - 300, n=30)

    def mode(self) -> None:
        return None


def test_a_filter_chosen_while_a_load_is_on_its_way_is_applied(browser: Any) -> None:
    """A choice made while the page is still loading (a slow score source, or a refresh under way) used to be
    dropped: the load in flight asked for the old filters, the new one was skipped, and the next refresh
    never came while the focus stayed on the controls. Now the page loads again once the first load is back."""
    from http.server import ThreadingHTTPServer

    dashboard = Dashboard(SlowOrBroken(1.5, False), THRESHOLDS, POLICY, refresh_seconds=30.0, cache_seconds=0.0)
    server = serve_worker_http(
        Worker(open_queue("memory://slowf", "kb-qa"), []), 0, "127.0.0.1", CollectorRegistry(), dashboard=dashboard
    )
    assert isinstance(server, ThreadingHTTPServer)
    try:
        page = Page(browser, f"http://127.0.0.1:{server.server_port}/dashboard")
        loads = page.js("window.ragwatch.loads")
        page.page.click("button[data-range='24h']")  # a load of 1.5 s is now on its way
        assert page.js("window.ragwatch.inflight") is True
        page.page.fill("input[name=q]", "no such question")
        page.page.click("button[name=apply]")  # the focus stays on the controls
        page.wait("window.ragwatch.data.filters.text === 'no such question'", timeout=10)
        assert page.js("window.ragwatch.loads") == loads + 2
        assert "range=24h" in page.page.url and page.js("window.ragwatch.data.range.name") == "24h"
        assert page.errors() == []
        page.page.close()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("fail", [False, True])
def test_a_slow_or_failing_json_is_shown(browser: Any, fail: bool) -> None:
    from http.server import ThreadingHTTPServer

    dashboard = Dashboard(SlowOrBroken(2.5, fail), THRESHOLDS, POLICY, refresh_seconds=30.0, cache_seconds=0.0)
    server = serve_worker_http(
        Worker(open_queue("memory://slow", "kb-qa"), []), 0, "127.0.0.1", CollectorRegistry(), dashboard=dashboard
    )
    assert isinstance(server, ThreadingHTTPServer)
    try:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{server.server_port}/dashboard")
        time.sleep(1.2)
        text = page.evaluate("document.getElementById('app').textContent")
        assert text.startswith("Loading scores from /dashboard.json") and text.endswith(" s"), text
        deadline = time.monotonic() + 10
        while page.evaluate("!window.ragwatch.rendered && !window.ragwatch.error"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        if fail:
            error = page.evaluate("document.querySelector('.load-error').textContent")
            assert error == "Could not load the scores (HTTP 503: score source unavailable); retrying every 30 s"
        else:
            assert page.evaluate("document.querySelector('.facts').textContent").startswith("30 scored samples")
        page.close()
    finally:
        server.shutdown()
        server.server_close()
