"""The three ways to expose metrics: standalone server, ASGI app (see test_asgi), multiprocess (gunicorn)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import ragwatch
from ragwatch.metrics.exposition import start_metrics_server
from tests.servers import reset_after

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape_value(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


def test_standalone_metrics_server(registry: CollectorRegistry) -> None:
    rw = ragwatch.RagWatch("standalone", registry=registry, tracing=False)

    @rw.pipeline
    def answer(q: str) -> str:
        return q

    for _ in range(3):
        answer("q")
    server, thread = start_metrics_server(0, "127.0.0.1", registry)
    try:
        body = httpx.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).text
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    count = "ragwatch_stage_duration_seconds_count"
    assert scrape_value(body, count, service="standalone", stage="request", outcome="ok") == 3
    assert scrape_value(body, "ragwatch_build_info", version=ragwatch.__version__) == 1


def test_a_scrape_that_goes_away_is_a_debug_line_not_a_traceback_on_the_hosts_stderr(
    registry: CollectorRegistry, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """prometheus_client's server prints a bare traceback on stderr for every scrape reset mid-request (a
    Prometheus past its timeout): in the host's own logs. ``start_metrics_server`` logs it at debug."""
    caplog.set_level(logging.DEBUG, logger="ragwatch.metrics.exposition")
    server, _ = start_metrics_server(0, "127.0.0.1", registry)
    try:
        for _ in range(5):
            reset_after(server.server_port, b"GET /metr")  # reset while the server reads the request line
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("went away" in r.getMessage() for r in caplog.records):
            time.sleep(0.05)
        assert httpx.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).status_code == 200
    finally:
        server.shutdown()
        server.server_close()
    assert any("went away" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)
    assert "Traceback" not in capfd.readouterr().err


def test_metrics_port_setting_starts_the_server(registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("RAGWATCH_METRICS_PORT", str(port))
    monkeypatch.setenv("RAGWATCH_METRICS_ADDR", "127.0.0.1")
    rw = ragwatch.RagWatch("from-env", tracing=False, registry=registry)
    server, thread = rw.start_metrics_server()  # already running: the same server comes back
    try:
        assert server.server_port == port
        # the standalone server reads the process-wide default registry
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


APP = textwrap.dedent(
    """
    import os
    from prometheus_client import make_wsgi_app
    import ragwatch
    from ragwatch.metrics.exposition import metrics_registry

    rw = ragwatch.RagWatch("prefork", tracing=False)

    @rw.pipeline
    def answer(question):
        return "answer to " + question

    scrape = make_wsgi_app(metrics_registry())

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/metrics":
            return scrape(environ, start_response)
        body = (answer("q") + " pid=" + str(os.getpid())).encode()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [body]
    """
)
CONF = textwrap.dedent(
    """
    from ragwatch.metrics.exposition import mark_process_dead

    def child_exit(server, worker):
        mark_process_dead(worker.pid)
    """
)


@pytest.mark.skipif(shutil.which("gunicorn", path=os.path.dirname(sys.executable)) is None, reason="gunicorn absent")
def test_multiprocess_mode_under_gunicorn(tmp_path: Path) -> None:
    """Two pre-forked workers share one view of the counters through PROMETHEUS_MULTIPROC_DIR."""
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "gunicorn_conf.py").write_text(CONF)
    metrics_dir = tmp_path / "prom"
    metrics_dir.mkdir()
    port = free_port()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    gunicorn = os.path.join(os.path.dirname(sys.executable), "gunicorn")
    log = tmp_path / "gunicorn.log"
    cmd = [gunicorn, "-w", "2", "-b", f"127.0.0.1:{port}", "-c", "gunicorn_conf.py", "--error-logfile", str(log)]
    proc = subprocess.Popen([*cmd, "app:app"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError(log.read_text() if log.exists() else "gunicorn did not start") from None
                time.sleep(0.2)
        pids = set()
        for _ in range(40):
            with httpx.Client() as client:  # a fresh connection each time, so either worker may answer
                text = client.get(f"http://127.0.0.1:{port}/ask", timeout=5).text
            pids.add(text.rsplit("pid=", 1)[1])
        body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        count = "ragwatch_stage_duration_seconds_count"
        # every request is counted exactly once, whichever worker served it and whichever one is scraped
        assert scrape_value(body, count, service="prefork", stage="request", outcome="ok") == 40
        assert len(list(metrics_dir.glob("*.db"))) >= 2 or len(pids) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
