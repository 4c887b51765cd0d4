"""Latency exemplars (issue 27, "the trace behind a sample"): a sampled request leaves its trace id on the
request and stage latency buckets of ``/metrics`` as an OpenMetrics exemplar; an unsampled one does not.

A real RagWatch (tracing on, an in-process queue nobody scores) serves its metrics from the real metrics
server; the scrape asks for OpenMetrics as Prometheus does. Then the Debian ``prometheus`` binary with
exemplar storage scrapes the same server and answers ``/api/v1/query_exemplars`` with the sampled trace —
what a Grafana latency panel's exemplar link reads (skips locally without ``prometheus``; fails under CI).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.metrics.exposition import start_metrics_server
from tests.test_dashboard_prometheus import running_prometheus, until

OPENMETRICS = {"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"}
CHUNKS = [{"id": "exp-1", "text": "Hotels are reimbursed up to 600 CNY per night.", "score": 0.9}]
EXEMPLAR = re.compile(
    r'^ragwatch_stage_duration_seconds_bucket\{(?P<labels>[^}]*)\} \S+ # \{trace_id="(?P<trace>[0-9a-f]+)"\} '
    r"(?P<value>\S+) \S+$"
)


class Served:
    """A watched pipeline whose /metrics a real server answers; ``ask(force)`` returns the request's trace id."""

    def __init__(self, registry: CollectorRegistry, provider: TracerProvider) -> None:
        self.rw = rw = ragwatch.RagWatch(
            "svc",
            registry=registry,
            tracer_provider=provider,
            redis_url="memory://exemplars",
            scoring="off",
            sample_rate=0.0,  # only forced requests are sampled
            sample_max_per_second=1e6,
        )
        self.runs: list[Any] = []
        rw.listeners.append(self.runs.append)  # after the sampler: sees every finished run

        @rw.retriever
        def retrieve(question: str) -> list[dict[str, Any]]:
            return CHUNKS

        @rw.llm(model="gpt-4o-mini")
        def generate(question: str, chunks: Any) -> str:
            return "Hotels are reimbursed up to 600 CNY per night."

        @rw.pipeline
        def answer(question: str, force: bool) -> str:
            if force:
                ragwatch.force_sample()
            return generate(question, retrieve(question))

        self.answer = answer
        self.server, self.thread = start_metrics_server(0, "127.0.0.1", registry)
        self.url = f"http://127.0.0.1:{self.server.server_port}/metrics"

    def ask(self, force: bool) -> str:
        self.answer("hotel limit?", force)
        trace_id = self.runs[-1].trace_id
        assert isinstance(trace_id, str) and len(trace_id) == 32
        return trace_id

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
        self.rw.close(1)


@pytest.fixture
def served(registry: CollectorRegistry, provider: TracerProvider) -> Iterator[Served]:
    s = Served(registry, provider)
    try:
        yield s
    finally:
        s.close()


def test_a_sampled_request_leaves_its_trace_on_the_latency_buckets(served: Served) -> None:
    sampled = served.ask(force=True)
    unsampled = served.ask(force=False)
    text = httpx.get(served.url, headers=OPENMETRICS, timeout=5).text
    found = [m for line in text.splitlines() if (m := EXEMPLAR.match(line))]
    assert {m["trace"] for m in found} == {sampled} and unsampled not in text
    stages = {}
    for m in found:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"]))
        stages[labels["stage"]] = labels["outcome"]
        value, le = float(m["value"]), float(labels["le"])
        assert value <= le  # each mark sits on the bucket its value fell in
    assert stages == {"request": "ok", "retrieve": "ok", "generate": "ok"}
    assert "trace_id" not in httpx.get(served.url, timeout=5).text  # the Prometheus text format: no exemplars


def test_prometheus_stores_the_exemplar_of_the_sampled_request(served: Served, tmp_path: Path) -> None:
    port = served.server.server_port
    with running_prometheus(tmp_path, port, "--enable-feature=exemplar-storage") as prom:
        sampled = served.ask(force=True)
        unsampled = served.ask(force=False)
        start = time.time() - 600

        def traces() -> set[str]:
            params = {"query": 'ragwatch_stage_duration_seconds_bucket{stage="request"}', "start": start}
            body = httpx.get(f"{prom}/api/v1/query_exemplars", params={**params, "end": time.time()}, timeout=5).json()
            assert body["status"] == "success", body
            return {e["labels"].get("trace_id") for series in body["data"] for e in series["exemplars"]}

        until("the exemplar in Prometheus", lambda: sampled in traces(), tmp_path / "prometheus.log")
        assert unsampled not in traces()
