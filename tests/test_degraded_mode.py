"""Degraded mode end to end: windows fed by workers, the shared flag, replicas that follow it, policies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import ragwatch
from ragwatch.metrics.catalog import WorkerMetrics, families
from ragwatch.mode.degrade import ModeState, Policy
from ragwatch.mode.sla import SLAEvaluator
from ragwatch.queue.contract import Queue
from ragwatch.queue.factory import open_queue
from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.base import Verdict
from ragwatch.scoring.worker import Worker
from tests.conftest import sample as metric
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent
FAST = Policy(window_seconds=600, window_samples=20, min_samples=5, margin=0.05, hold_seconds=0, min_dwell_seconds=0)


class CPJudge:
    """Reads the context precision off the question ("cp=0.2"), so tests can script a quality drop."""

    name, version = "scripted", "1"

    def score(self, sample: Sample) -> Verdict:
        value = float((sample.question or "cp=1").split("cp=")[1])
        return Verdict({"context_precision_3": value, "faithfulness": 1.0})


def feed(queue: Queue, values: list[float], prefix: str) -> None:
    now = time.time()
    queue.add(
        [
            orjson.dumps(
                Sample(
                    sample_id=f"{prefix}{i}",
                    service="kb",
                    question=f"cp={v}",
                    answer="a",
                    chunks=[SampleChunk(id="c1", rank=0, text="a")],  # a sample without context is not scored
                    created_at=now,
                )
            )
            for i, v in enumerate(values)
        ]
    )


def score_all(queue: Queue, registry: CollectorRegistry | None = None) -> ModeState:
    metrics = families(WorkerMetrics, registry) if registry is not None else None
    evaluator = SLAEvaluator(queue, FAST, {"faithfulness": 0.75}, metrics)
    Worker(queue, [CPJudge()], block_ms=20, metrics=metrics, evaluator=evaluator).work(burst=True, max_seconds=30)
    return evaluator.tick()


def test_worker_windows_drive_the_replica(registry: CollectorRegistry) -> None:
    rw = ragwatch.RagWatch("kb", registry=registry, tracing=False, sampling=False, degraded_refresh_seconds=0.05)
    changes: list[tuple[bool, bool]] = []
    rw.on_transition(lambda old, new: changes.append((old.degraded, new.degraded)))

    @rw.pipeline
    def answer(q: str) -> str:
        return "x"

    answer("start the watcher")
    queue = open_queue("memory://", "kb")
    feed(queue, [0.9] * 10, "good")
    assert not score_all(queue, registry).degraded
    feed(queue, [0.1] * 20, "bad")
    state = score_all(queue, registry)
    assert state.degraded and "context_precision_3" in state.reason
    wait_for(lambda: rw.degraded)
    assert rw.notice is not None and "检索" in rw.notice
    assert rw.mode.value is not None and rw.mode.value < 0.65
    assert changes == [(False, True)]
    assert metric(registry, "ragwatch_degraded", service="kb") == 1
    assert metric(registry, "ragwatch_degraded_transitions_total", service="kb", to="degraded") == 1
    assert metric(registry, "ragwatch_window_value", service="kb", metric="context_precision_3") == pytest.approx(0.1)
    assert metric(registry, "ragwatch_sla_threshold", service="kb", metric="context_precision_3") == 0.65
    assert metric(registry, "ragwatch_window_samples", service="kb", metric="faithfulness") == 20

    feed(queue, [0.95] * 20, "recovered")
    assert not score_all(queue, registry).degraded
    wait_for(lambda: not rw.degraded)
    assert changes == [(False, True), (True, False)]
    rw.close()


def test_worker_restart_does_not_reset_or_double_count_the_window() -> None:
    queue = open_queue("memory://restart", "kb")
    feed(queue, [0.2] * 10, "s")
    score_all(queue)
    before = queue.window("context_precision_3", 100)
    feed(queue, [0.2] * 10, "s")  # the same sample ids again: a redelivery after a crash
    score_all(queue)  # a new worker (and evaluator) on the same store
    assert queue.window("context_precision_3", 100) == before
    assert len(before) == 10
    assert queue.read_mode().degraded


def test_override_and_policies(registry: CollectorRegistry) -> None:
    reranked: list[Any] = []

    def rerank(question: str | None, chunks: Any) -> Any:
        reranked.append(question)
        return list(reversed(chunks))

    rw = ragwatch.RagWatch(
        "kb",
        registry=registry,
        tracing=False,
        sampling=False,
        degraded_refresh_seconds=0.05,
        degraded_min_chunk_score=0.5,
        degraded_top_k=2,
        rerank=rerank,
        redis_url="memory://pol",
    )
    seen_k: list[int] = []

    @rw.retriever
    def retrieve(question: str, top_k: int = 5) -> list[dict[str, Any]]:
        seen_k.append(top_k)
        return [
            {"id": "a", "text": "A", "score": 0.9},
            {"id": "b", "text": "B", "score": 0.3},
            {"id": "c", "text": "C", "score": 0.7},
        ]

    @rw.pipeline
    def answer(q: str) -> list[str]:
        return [c["id"] for c in retrieve(q, top_k=5)]

    assert answer("q") == ["a", "b", "c"]  # normal: untouched
    queue = open_queue("memory://pol", "kb")
    queue.set_override("on")
    wait_for(lambda: rw.degraded)
    assert answer("q") == ["c", "a"]  # under the 0.5 floor dropped, then the reranker reversed the rest
    assert seen_k == [5, 2] and reranked == ["q"]
    assert metric(registry, "ragwatch_degraded_override", service="kb", mode="on") == 1

    app = rw.middleware(Starlette(routes=[Route("/ask", lambda r: PlainTextResponse("ok"))]))
    with TestClient(app) as client:
        response = client.get("/ask")
    assert response.headers["x-ragwatch-degraded"] == "1"
    from urllib.parse import unquote

    assert unquote(response.headers["x-ragwatch-notice"]) == rw.settings.degraded_notice

    queue.set_override("auto")
    wait_for(lambda: not rw.degraded)
    with TestClient(app) as client:
        assert "x-ragwatch-degraded" not in client.get("/ask").headers
    rw.close()


def test_broken_reranker_fails_open(registry: CollectorRegistry) -> None:
    def rerank(question: str | None, chunks: Any) -> Any:
        raise RuntimeError("reranker down")

    rw = ragwatch.RagWatch(
        "kb",
        registry=registry,
        tracing=False,
        sampling=False,
        degraded_refresh_seconds=0.05,
        rerank=rerank,
        redis_url="memory://broken",
    )
    retrieve = rw.retriever(lambda q: ["x", "y"])
    open_queue("memory://broken", "kb").set_override("on")
    rw.pipeline(lambda q: None)("start watcher")
    wait_for(lambda: rw.degraded)
    assert retrieve("q") == ["x", "y"]
    assert metric(registry, "ragwatch_internal_errors_total", component="capture") == 1
    rw.close()


async def test_asgi_request_unaffected_when_not_degraded(registry: CollectorRegistry) -> None:
    rw = ragwatch.RagWatch("kb", registry=registry, tracing=False, sampling=False)

    async def ok(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    with TestClient(rw.middleware(Starlette(routes=[Route("/", ok)]))) as client:
        assert client.get("/").headers.get("x-ragwatch-degraded") is None
    rw.close()


SERVICE = textwrap.dedent(
    """
    import json, sys, threading, time
    import redis.connection
    import ragwatch

    calls = {"request_thread": 0}
    send = redis.connection.AbstractConnection.send_command

    def counting(self, *args, **kwargs):  # count Redis commands sent from the request (main) thread
        if threading.current_thread() is threading.main_thread():
            calls["request_thread"] += 1
        return send(self, *args, **kwargs)

    redis.connection.AbstractConnection.send_command = counting
    rw = ragwatch.RagWatch("kb", redis_url=sys.argv[1], tracing=False, sampling=False, degraded_refresh_seconds=1.0)

    @rw.pipeline
    def answer(question):
        return "answer"

    answer("warm up")
    rw.mode_watcher.refresh()  # one deliberate read from this thread proves the counter sees Redis commands
    probe, calls["request_thread"] = calls["request_thread"], 0
    print(json.dumps({"ready": True, "probe_calls": probe}), flush=True)
    seen, served, deadline = False, 0, time.time() + 60
    while time.time() < deadline:
        answer("q")
        served += 1
        if rw.degraded != seen:
            seen = rw.degraded
            print(json.dumps({"degraded": seen, "at": time.time(), "served": served,
                              "request_thread_redis_calls": calls["request_thread"]}), flush=True)
            if not seen:
                break
        time.sleep(0.0005)
    """
)


def test_two_replicas_follow_a_transition_within_5s_without_redis_on_the_request_path(redis_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    services = [
        subprocess.Popen([sys.executable, "-c", SERVICE, redis_url], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        for proc in services:
            assert proc.stdout is not None
            ready = json.loads(proc.stdout.readline())
            assert ready["ready"] and ready["probe_calls"] >= 1
        queue = open_queue(redis_url, "kb")
        feed(queue, [0.1] * 20, "bad")
        state = score_all(queue)  # one worker scores, evaluates and publishes
        decided_at = time.time()
        assert state.degraded
        for proc in services:
            assert proc.stdout is not None
            event = json.loads(proc.stdout.readline())
            assert event["degraded"] is True
            assert event["at"] - decided_at < 5.0
        time.sleep(0.5)
        queue.set_override("off")
        for proc in services:
            assert proc.stdout is not None
            event = json.loads(proc.stdout.readline())
            assert event["degraded"] is False
            assert event["served"] > 200  # they kept serving the whole time…
            assert event["request_thread_redis_calls"] == 0  # …and never called Redis while doing so
            assert proc.wait(10) == 0
    finally:
        for proc in services:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
