"""End to end with a real Prometheus: the shipped scrape config and rules against a running demo service and a
``ragwatch worker``.

Three processes besides Redis (the session's ``redis-server``): the demo service (``ragwatch.demo``'s
``DemoService`` behind ragwatch's middleware, served by uvicorn), a ``ragwatch worker`` with the offline judge
and a fast SLA policy, and the Debian ``prometheus`` binary on a loopback port with temporary storage. The
config is ``exporters/prometheus/prometheus.yml`` with the targets pointed at the two processes and 1 s
intervals; the rules are ``exporters/prometheus/rules/ragwatch.rules.yml`` with only the CP@3 alert's ``for:``
and the groups' intervals shortened — every expression is the shipped one. The test sends healthy traffic,
checks the series arrive, the window sits above its SLA line and the hallucination-rate window reads against
its ceiling, then injects the demo's retrieval fault and waits for the alert to fire.

``ragwatch demo --serve`` is not used: it serves only around its scripted run, which ends with the fault
removed, so CP@3 is low for a second or two at most — too short to be scraped reliably, and this test must
keep the fault on until Prometheus has seen it. The service script below uses the demo's own pieces and adds
one test-only route, ``POST /_fault``, to switch the demo's ``fault`` knob.

Skips locally without ``prometheus`` or ``redis-server``; fails under ``CI=true``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from ragwatch.settings import HALLUCINATION_RATE_LINE

from .servers import _log_tail, _terminate, _wait_until, free_port, require_binary

ROOT = Path(__file__).resolve().parent.parent
PROM = ROOT / "exporters" / "prometheus"
RULES = PROM / "rules" / "ragwatch.rules.yml"
SCRAPE_CONFIG = PROM / "prometheus.yml"
ALERT = "RagwatchContextPrecisionUnderSLA"
CP3 = "context_precision_3"
THRESHOLD = 0.65  # the default sla_threshold, which the worker below keeps
ALERT_FOR = "2s"

# The demo service with the fault knob reachable over HTTP. Arguments: port, queue URL, service name.
SERVICE_SCRIPT = """
import json
import sys

import uvicorn

from ragwatch.demo.run import demo_watch
from ragwatch.demo.service import DemoService, build_app

port, redis_url, name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rw = demo_watch(name, redis_url)
service = DemoService(rw, hallucination_rate=0.2, seed=7)
demo = build_app(service)


async def app(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/_fault" and scope["method"] == "POST":
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        service.fault = bool(json.loads(body or b"{}").get("on", True))
        data = json.dumps({"fault": service.fault}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})
        return
    await demo(scope, receive, send)


try:
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
finally:
    rw.close(1.0)
"""

# A fast SLA policy for the worker (the demo's: 20-score window, decisions from 8), evaluated twice a second.
WORKER_ENV = {
    "RAGWATCH_SLA_WINDOW_SAMPLES": "20",
    "RAGWATCH_SLA_MIN_SAMPLES": "8",
    "RAGWATCH_SLA_HOLD_SECONDS": "1",
    "RAGWATCH_SLA_MIN_DWELL_SECONDS": "1",
    "RAGWATCH_SLA_EVALUATE_SECONDS": "0.5",
    "RAGWATCH_WORKER_BLOCK_MS": "100",
    "RAGWATCH_WORKER_ADDR": "127.0.0.1",
}


def _env(**extra: str) -> dict[str, str]:
    """This environment without any RAGWATCH_* setting of the caller's, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return {**env, **extra}


def _up(url: str) -> bool:
    return httpx.get(url, timeout=1.0).status_code == 200


def write_prometheus_files(workdir: Path, service_port: int, worker_port: int) -> Path:
    """The shipped scrape config and rules, adapted to loopback targets, 1 s intervals and a short ``for:``."""
    rules = yaml.safe_load(RULES.read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    assert len(alerts) == 1, f"{ALERT} not found in {RULES}"
    alerts[0]["for"] = ALERT_FOR  # the expression stays the shipped one
    for group in rules["groups"]:  # recording rules at the test's pace (30 s, 1 min shipped); same expressions
        group["interval"] = "1s"
    rules_path = workdir / "ragwatch.rules.yml"
    rules_path.write_text(yaml.safe_dump(rules, sort_keys=False, allow_unicode=True))

    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    config["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(rules_path)]
    targets = {"ragwatch-services": service_port, "ragwatch-workers": worker_port}
    jobs = [j for j in config["scrape_configs"] if j["job_name"] in targets]  # no Pushgateway here
    assert {j["job_name"] for j in jobs} == set(targets), "the shipped scrape jobs were renamed"
    for job in jobs:
        for static in job["static_configs"]:
            static["targets"] = [f"127.0.0.1:{targets[job['job_name']]}"]
    config["scrape_configs"] = jobs
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return config_path


class Processes:
    """Subprocesses of one test, each logging to a file; stopped in reverse order."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def start(
        self, name: str, args: list[str], env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.workdir)
        self.procs.append((name, proc, log))
        return proc, log

    def logs(self) -> str:
        return "\n".join(f"--- {name} ---\n{_log_tail(log, 15)}" for name, _, log in self.procs)

    def stop(self) -> None:
        for _, proc, _ in reversed(self.procs):
            _terminate(proc)
        self.procs = []


class Traffic:
    """Questions from the demo's own stream, POSTed to ``/ask`` one after another on a thread."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.sent = 0
        self.degraded = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="e2e-traffic", daemon=True)

    def _run(self) -> None:
        from ragwatch.demo.traffic import QuestionStream

        questions = QuestionStream(7)
        try:
            with httpx.Client(base_url=self.base_url, timeout=5.0) as client:
                while not self._stop.is_set():
                    response = client.post("/ask", json={"question": questions.next().text})
                    response.raise_for_status()
                    self.sent += 1
                    self.degraded += bool(response.json().get("degraded"))
                    self._stop.wait(0.01)
        except BaseException as exc:  # reported by the test, not as an unhandled thread exception
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"traffic to the demo service failed: {self.error!r}")


class PromAPI:
    def __init__(self, base_url: str) -> None:
        self.client = httpx.Client(base_url=base_url, timeout=5.0)

    def get(self, path: str, **params: str) -> Any:
        response = self.client.get(path, params=params)
        response.raise_for_status()
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query", query=promql)
        assert data["resultType"] == "vector", data
        return data["result"]

    def scalar(self, promql: str) -> float | None:
        result = self.query(promql)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def alert(self, name: str, service: str) -> dict[str, Any] | None:
        alerts = self.get("/api/v1/alerts")["alerts"]
        found = [a for a in alerts if a["labels"].get("alertname") == name and a["labels"].get("service") == service]
        return found[0] if found else None


def eventually(what: str, check: Callable[[], Any], timeout: float, diagnostics: Callable[[], str]) -> Any:
    """Poll ``check()`` twice a second until it returns something truthy, and return it."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not within {timeout:.0f}s\n{diagnostics()}")
        time.sleep(0.5)


@pytest.fixture
def prometheus_binary() -> str:
    return require_binary("prometheus")  # before redis_url, so a missing prometheus skips first


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop()


def test_prometheus_scrapes_demo_and_worker_and_fires_the_cp3_alert(
    prometheus_binary: str, redis_url: str, processes: Processes, tmp_path: Path
) -> None:
    started = time.monotonic()
    service = f"kb-qa-e2e-{uuid.uuid4().hex[:6]}"
    service_port, worker_port, prom_port = free_port(), free_port(), free_port()
    service_url = f"http://127.0.0.1:{service_port}"
    prom_url = f"http://127.0.0.1:{prom_port}"

    script = tmp_path / "demo_service.py"
    script.write_text(SERVICE_SCRIPT)
    proc, log = processes.start(
        "service", [sys.executable, str(script), str(service_port), redis_url, service], env=_env()
    )
    _wait_until("demo service", lambda: _up(f"{service_url}/healthz"), log, proc, timeout=20)

    worker_args = [sys.executable, "-m", "ragwatch", "--log-level", "WARNING", "worker"]
    worker_args += ["--service", service, "--redis-url", redis_url, "--port", str(worker_port), "--concurrency", "4"]
    proc, log = processes.start("worker", worker_args, env=_env(**WORKER_ENV))
    _wait_until("ragwatch worker", lambda: _up(f"http://127.0.0.1:{worker_port}/readyz"), log, proc, timeout=20)

    config = write_prometheus_files(tmp_path, service_port, worker_port)
    (tmp_path / "tsdb").mkdir()
    prom_args = [
        prometheus_binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
        "--log.level=warn",
    ]
    proc, log = processes.start("prometheus", prom_args, env=_env())
    _wait_until("prometheus", lambda: _up(f"{prom_url}/-/ready"), log, proc, timeout=30)

    prom = PromAPI(prom_url)
    traffic = Traffic(service_url)

    def diagnostics() -> str:
        try:
            alerts = prom.get("/api/v1/alerts")["alerts"]
            window = prom.query(f'{{__name__=~"ragwatch_window_value|ragwatch_window_samples",metric="{CP3}"}}')
            targets = [
                (t["labels"]["job"], t["health"], t["lastError"]) for t in prom.get("/api/v1/targets")["activeTargets"]
            ]
        except Exception as exc:
            alerts, window, targets = [], [], [repr(exc)]
        return (
            f"sent {traffic.sent} requests ({traffic.degraded} degraded); targets {targets}; window {window}; "
            f"alerts {alerts}\n{processes.logs()}"
        )

    try:
        traffic.start()
        sel = f'service="{service}"'

        # 1. healthy traffic: both targets are scraped, the series carry the service label, CP@3 holds its SLA
        def targets_up() -> bool:
            active = prom.get("/api/v1/targets")["activeTargets"]
            return sorted(t["labels"]["job"] for t in active if t["health"] == "up") == [
                "ragwatch-services",
                "ragwatch-workers",
            ]

        eventually("both targets up", targets_up, 15, diagnostics)
        requests = eventually(
            "request counts in Prometheus",
            lambda: prom.query(f'ragwatch_stage_duration_seconds_count{{{sel},stage="request",outcome="ok"}}'),
            15,
            diagnostics,
        )
        assert requests[0]["metric"]["job"] == "ragwatch-services"
        assert float(requests[0]["value"][1]) > 0
        # the stages the demo ran (every stage's series exists from the start, the others at zero)
        ran = prom.query(f"ragwatch_stage_duration_seconds_count{{{sel}}} > 0")
        assert {s["metric"]["stage"] for s in ran} == {"request", "retrieve", "generate"}
        scored = eventually(
            "scores counted by the worker",
            lambda: prom.query(f'ragwatch_worker_entries_total{{{sel},outcome="scored"}} > 0'),
            15,
            diagnostics,
        )
        assert scored[0]["metric"]["job"] == "ragwatch-workers"
        healthy = eventually(
            "a healthy CP@3 window",
            lambda: prom.scalar(
                f'ragwatch_window_value{{{sel},metric="{CP3}"}} and on (service) '
                f'ragwatch_window_samples{{{sel},metric="{CP3}"}} >= 8'
            ),
            15,
            diagnostics,
        )
        assert healthy >= THRESHOLD, diagnostics()
        assert prom.scalar(f'ragwatch_sla_threshold{{{sel},metric="{CP3}"}}') == THRESHOLD
        alert = prom.alert(ALERT, service)
        assert alert is None or alert["state"] != "firing", alert
        traffic.check()

        # the hallucination-rate window (the demo falsifies a fifth of its answers) with its line, a ceiling:
        # the margin rule reads it the right way round, and the 7-day baseline is recorded
        rate = f'{sel},metric="hallucination_rate"'
        eventually(
            "a hallucination_rate window", lambda: prom.query(f"ragwatch_window_value{{{rate}}}"), 15, diagnostics
        )
        assert prom.scalar(f"ragwatch_sla_threshold{{{rate}}}") == HALLUCINATION_RATE_LINE
        both = f"service_metric:ragwatch_window_margin:max{{{rate}}} + on (service, metric) "
        both += "service_metric:ragwatch_window_value:max"
        line = eventually("the margin of the rate", lambda: prom.query(both), 15, diagnostics)
        assert float(line[0]["value"][1]) == pytest.approx(HALLUCINATION_RATE_LINE)  # line - window, not window - line
        eventually(
            "the rate's 7-day baseline",
            lambda: prom.query(f"service_metric:ragwatch_window_value:avg_7d{{{rate}}}"),
            15,
            diagnostics,
        )

        # 2. the demo's retrieval fault (off-topic chunks ranked first): the shipped alert goes to firing
        assert httpx.post(f"{service_url}/_fault", json={"on": True}, timeout=5).json() == {"fault": True}
        faulted = time.monotonic()

        def firing() -> dict[str, Any] | None:
            traffic.check()
            alert = prom.alert(ALERT, service)
            return alert if alert is not None and alert["state"] == "firing" else None

        alert = eventually(f"{ALERT} firing", firing, 40, diagnostics)
        fired_after = time.monotonic() - faulted
        value = prom.scalar(f'ragwatch_window_value{{{sel},metric="{CP3}"}}')
        threshold = prom.scalar(f'ragwatch_sla_threshold{{{sel},metric="{CP3}"}}')
        assert value is not None and threshold == THRESHOLD
        assert value < threshold, diagnostics()
        assert float(alert["value"]) < THRESHOLD  # the window value the rule saw
        assert alert["labels"]["severity"] == "critical"
        assert alert["annotations"]["summary"] == f"{service}: Context Precision@3 under its SLA"
        traffic.check()
        print(
            f"CP@3 healthy {healthy:.3f}; {ALERT} firing {fired_after:.1f}s after the fault (CP@3 {value:.3f}); "
            f"{traffic.sent} requests, {time.monotonic() - started:.1f}s in all"
        )
    finally:
        traffic.stop()
        prom.client.close()
