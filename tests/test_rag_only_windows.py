"""Only RAG requests enter the quality windows (issue 26).

A crawler's 404s, CORS preflights, 400s from bodies the app refused, a refused ``/dashboard`` request: none of
them ran the host's pipeline, and scored they were zeros (no chunks: context precision 0, every claim
unsupported) that dragged the window under the SLA line and switched degraded mode on for everyone. Real
uvicorn services, the real offline judge, real Redis; each test fails on the code before the change.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from prometheus_client import CollectorRegistry
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

import ragwatch
from ragwatch.metrics.catalog import WorkerMetrics, families
from ragwatch.queue.contract import Queue
from ragwatch.queue.factory import open_queue
from ragwatch.sampling.sample import Sample, SampleChunk, encode_sample
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.worker import Worker
from tests.conftest import sample, stage_count, wait_for
from tests.servers import free_port

SERVICE = "ragonly"
CP3 = "context_precision_3"
CHUNKS = [
    {"id": "travel-1", "text": "Hotels are reimbursed up to 600 CNY per night on business trips.", "score": 0.9},
    {"id": "travel-2", "text": "Business trip hotels above 600 CNY per night need a manager's approval.", "score": 0.8},
    {"id": "travel-3", "text": "Hotel invoices must name the employee and the nights of the stay.", "score": 0.7},
]
QUESTIONS = [
    "What is the hotel limit per night on business trips?",
    "Do hotels above 600 CNY per night need approval?",
    "What must a hotel invoice name?",
    "How much is reimbursed for a hotel night on a business trip?",
]


def build_app(rw: ragwatch.RagWatch, **middleware: Any) -> Any:
    """A FastAPI RAG service: ``POST /ask`` runs a watched retriever and LLM (no ``@rw.pipeline``: the
    middleware's run is marked by the stages), reads its JSON body itself and answers 400 to a bad one; CORS
    answers preflights before any route; ``POST /chat`` calls the LLM only (an agent whose retrieval is not
    watched); ``/ask?fail=1`` fails after retrieving."""

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return CHUNKS

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, chunks: list[dict[str, Any]]) -> str:
        return "Hotels are reimbursed up to 600 CNY per night on business trips."

    app = FastAPI()

    @app.post("/ask")
    async def ask(request: Request) -> Response:
        try:
            question = json.loads(await request.body())["question"]
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": 'send {"question": ...}'}, status_code=400)
        chunks = retrieve(question)
        if request.query_params.get("fail"):
            return JSONResponse({"error": "index timed out"}, status_code=503)
        return JSONResponse({"answer": generate(question, chunks)})

    @app.post("/chat")
    async def chat(request: Request) -> Response:
        question = json.loads(await request.body())["question"]
        return JSONResponse({"answer": generate(question, [])})

    app.add_middleware(CORSMiddleware, allow_origins=["https://kb.example.com"], allow_methods=["POST"])
    app.add_middleware(ragwatch.RagwatchMiddleware, watch=rw, **middleware)  # outermost: sees every request
    return app


class Served:
    """An ASGI app on 127.0.0.1:<free port> under uvicorn, in a background thread."""

    def __init__(self, app: Any) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        wait_for(lambda: self.server.started, 10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def rag(client: httpx.Client, url: str, i: int) -> None:
    response = client.post(url + "/ask", json={"question": QUESTIONS[i % len(QUESTIONS)]})
    assert response.status_code == 200


def not_rag(client: httpx.Client, url: str, i: int) -> None:
    """One of the requests that never ran the pipeline, each with the status a real service gives it."""
    kind = i % 4
    if kind == 0:
        assert client.get(url + "/wp-login.php").status_code == 404  # a crawler
    elif kind == 1:
        preflight = {"Origin": "https://kb.example.com", "Access-Control-Request-Method": "POST"}
        assert client.options(url + "/ask", headers=preflight).status_code == 200  # answered by CORS
    elif kind == 2:
        assert client.post(url + "/ask", content=b"{question: oops").status_code == 400
    else:
        assert client.get(url + "/dashboard").status_code == 404  # refused (not a dashboard_sources address)


def settled(rw: ragwatch.RagWatch, registry: CollectorRegistry) -> tuple[float, float]:
    """(window value, window samples) once everything sent was scored and the window evaluated after it."""
    assert rw.flush(10)
    queue = rw.queue
    assert queue is not None
    wait_for(lambda: queue.stats().lag == 0 and queue.stats().pending == 0)
    applied = queue.totals().get(CP3, (0, 0.0))[0]
    wait_for(lambda: sample(registry, "ragwatch_window_samples", service=SERVICE, metric=CP3) == applied)
    return sample(registry, "ragwatch_window_value", service=SERVICE, metric=CP3), float(applied)


def in_process(registry: CollectorRegistry, **settings: Any) -> ragwatch.RagWatch:
    options: dict[str, Any] = {
        "redis_url": f"memory://{SERVICE}-{uuid.uuid4().hex[:8]}",
        "tracing": False,
        "sample_rate": 1.0,
        "sample_max_per_second": 1e6,
        "scoring_max_per_second": 1e4,
        "flush_interval": 0.02,
        "dashboard_sources": ("10.0.0.0/8",),  # the test client (loopback) is refused the page
        "sla_window_samples": 200,
        "sla_min_samples": 10,
        "sla_hold_seconds": 0,
        "sla_min_dwell_seconds": 0,
        "sla_evaluate_seconds": 0.05,
    }
    return ragwatch.RagWatch(SERVICE, registry=registry, **{**options, **settings})


def test_non_rag_traffic_leaves_the_window_and_the_mode_alone_in_process() -> None:
    """The target of issue 26: 15 % non-RAG requests (404, OPTIONS preflight, 400 from a bad body, a refused
    /dashboard) among healthy RAG traffic. Before: each was a sample scored context precision 0, the window
    fell by 15 % of its value (under the SLA line set between the two) and degraded mode switched on."""
    rag_requests, other_requests = 34, 6  # 6 of 40: 15 %

    baseline_registry = CollectorRegistry()
    baseline = in_process(baseline_registry)
    try:
        with Served(build_app(baseline)) as served, httpx.Client() as client:
            for i in range(rag_requests):
                rag(client, served.url, i)
        healthy, healthy_samples = settled(baseline, baseline_registry)
    finally:
        baseline.close(1)
    assert healthy_samples == rag_requests
    assert healthy >= 0.2, healthy  # a 15 % share of zeros moves such a window by more than 0.03

    registry = CollectorRegistry()
    # The SLA line between the healthy window and the same window with 15 % zeros in it.
    rw = in_process(registry, sla_threshold=round(0.93 * healthy, 4), sla_margin=0.0)
    transitions: list[bool] = []
    rw.on_transition(lambda old, new: transitions.append(new.degraded))
    try:
        with Served(build_app(rw)) as served, httpx.Client() as client:
            others = range(3, rag_requests + other_requests, 7)  # spread through the traffic: 3, 10, …, 38
            assert len(others) == other_requests
            for i in range(rag_requests + other_requests):
                (not_rag if i in others else rag)(client, served.url, i)
        value, samples = settled(rw, registry)
        time.sleep(0.2)  # a few more evaluations of the settled window
        assert samples == rag_requests  # only the RAG requests were scored
        assert abs(value - healthy) <= 0.01, (value, healthy)
        assert not rw.degraded and not rw.mode.degraded and transitions == []
        assert sample(registry, "ragwatch_degraded", service=SERVICE) == 0
        # Every request is still timed as before (4xx are answers, not errors) …
        assert stage_count(registry, "request", "ok", SERVICE) == rag_requests + other_requests
        # … and only the RAG ones were handed to the sampler.
        decisions = sum(
            sample(registry, "ragwatch_sampling_decisions_total", service=SERVICE, decision=d, reason=r)
            for d in ("sampled", "skipped")
            for r in ("rate", "unsampled", "error_response", "no_context", "no_question")
        )
        assert decisions == rag_requests
    finally:
        rw.close(1)


def test_explicit_include_hands_every_request_on_and_the_sampler_skips_the_unscorable(
    redis_url: str, registry: CollectorRegistry
) -> None:
    """``include=`` keeps its meaning (every request under the prefixes is a run); the sampler keeps the ones
    that cannot be quality samples out of the queue, each counted by reason. Redis and a real worker."""
    rw = ragwatch.RagWatch(
        SERVICE,
        registry=registry,
        redis_url=redis_url,
        tracing=False,
        sample_rate=1.0,
        sample_max_per_second=1e6,
        flush_interval=0.02,
        degraded_mode=False,
    )
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    try:
        with Served(build_app(rw, include=["/"])) as served, httpx.Client() as client:
            for i in range(8):
                rag(client, served.url, i)
            for i in range(4):
                not_rag(client, served.url, i)  # 404, preflight (200), 400, /dashboard 404
            assert client.post(served.url + "/ask?fail=1", json={"question": QUESTIONS[0]}).status_code == 503
            assert client.post(served.url + "/chat", json={"question": "hello there"}).status_code == 200
            assert client.post(served.url + "/ask", json={"question": "   "}).status_code == 200
        assert rw.flush(10)
    finally:
        rw.close(1)
    assert len(runs) == 15  # every request under the prefix is a run, as before

    def skipped(reason: str, decision: str = "skipped") -> float:
        return sample(registry, "ragwatch_sampling_decisions_total", service=SERVICE, decision=decision, reason=reason)

    def sampled(reason: str) -> float:
        return skipped(reason, "sampled")

    assert skipped("error_response") == 4  # 404, 400, 404, and the 503 that came after retrieval
    assert skipped("no_context") == 2  # the preflight, and the chat answer no watched retriever fed
    assert skipped("no_question") == 1
    assert sampled("rate") == 8
    assert sorted(r.status for r in runs if r.status != 200) == [400, 404, 404, 503]

    queue = open_queue(redis_url, SERVICE)
    assert queue.stats().length == 8  # only the quality samples reached Redis
    worker = Worker(queue, [OfflineJudge()], block_ms=50, concurrency=2)
    assert worker.work(burst=True, max_seconds=30) == 8
    assert queue.totals()[CP3][0] == 8 and len(queue.window(CP3, 100)) == 8
    queue.close()


def test_by_default_a_request_is_a_run_for_the_sampler_only_once_a_stage_marked_it(
    registry: CollectorRegistry,
) -> None:
    """No ``include=``: a stage entered during the request (retriever, LLM, a joined ``@rw.pipeline``) or the
    host's ``force_sample()`` makes it a run for the listeners; every request is timed either way."""
    rw = ragwatch.RagWatch(SERVICE, registry=registry, tracing=False, sampling=False, degraded_mode=False)
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)

    @rw.pipeline
    def smalltalk(question: str) -> str:
        return "Hello!"

    async def page(request: Request) -> Response:
        return JSONResponse({"page": request.url.path})

    async def hello(request: Request) -> Response:
        return JSONResponse({"answer": smalltalk("hi there")})

    async def flagged(request: Request) -> Response:
        ragwatch.force_sample("user report")
        return JSONResponse({"ok": True})

    app = FastAPI()
    app.add_route("/static/app.js", page)
    app.add_route("/hello", hello)
    app.add_route("/flagged", flagged)
    with Served(build_app(rw)) as served, httpx.Client() as client:
        rag(client, served.url, 0)  # marked by its retriever and LLM
        assert client.get(served.url + "/wp-login.php").status_code == 404
    with Served(ragwatch.RagwatchMiddleware(app, watch=rw)) as served, httpx.Client() as client:
        for path in ("/static/app.js", "/hello", "/flagged"):
            assert client.get(served.url + path).status_code == 200
    assert [r.route for r in runs] == ["/ask", "/hello", "/flagged"]
    assert [r.status for r in runs] == [200, 200, 200]
    assert runs[1].question == "hi there"  # the joined pipeline gave its question to the middleware's run
    assert stage_count(registry, "request", "ok", SERVICE) == 5


# -- the worker's side ------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "redis"])
def queue(request: pytest.FixtureRequest) -> Any:
    url = f"memory://{uuid.uuid4().hex[:8]}" if request.param == "memory" else request.getfixturevalue("redis_url")
    q = open_queue(url, SERVICE)
    yield q
    q.close()


def quality_sample(sample_id: str, **fields: Any) -> bytes:
    base: dict[str, Any] = {
        "sample_id": sample_id,
        "service": SERVICE,
        "question": QUESTIONS[0],
        "answer": "Hotels are reimbursed up to 600 CNY per night on business trips.",
        "chunks": [SampleChunk(id=c["id"], rank=i, text=c["text"]) for i, c in enumerate(CHUNKS)],
        "created_at": time.time(),
        "durations": {"retrieve": 0.01, "request": 0.2},
    }
    return encode_sample(Sample(**{**base, **fields}))


def test_worker_gives_a_sample_without_context_no_score_and_counts_it(queue: Queue) -> None:
    """Samples of an older or foreign producer: one that no retriever fed gets no faithfulness, context
    precision or relevance (the offline judge called its every claim unsupported: 0), never enters a
    window, and is counted by reason and acknowledged. A retriever that ran and found nothing is a sample."""
    registry = CollectorRegistry()
    queue.add(
        [
            quality_sample("rag"),
            quality_sample("crawler-404", question=None, answer='{"detail":"Not Found"}', chunks=[], durations={}),
            quality_sample("agent-tool", chunks=[], durations={"generate": 0.4, "request": 0.5}),
            quality_sample("blank-question", question="  \n"),
            quality_sample("hashed-question", question=None, question_sha256="ab" * 32),  # store_text=false
            quality_sample("empty-retrieval", chunks=[]),  # the retriever ran ("retrieve" duration) and found none
        ]
    )
    worker = Worker(queue, [OfflineJudge()], block_ms=50, metrics=families(WorkerMetrics, registry), concurrency=0)
    assert worker.work(burst=True, max_seconds=30) == 6

    records = {orjson.loads(r)["sample_id"]: orjson.loads(r) for r in queue.recent_scores(10)}
    assert sorted(records) == ["empty-retrieval", "hashed-question", "rag"]
    assert records["empty-retrieval"]["scores"][CP3] == 0.0  # a retrieval miss still counts against the SLA
    for metric in (CP3, "faithfulness", "context_relevance"):
        assert queue.totals()[metric][0] == 3
        assert len(queue.window(metric, 100)) == 3

    def skipped(reason: str) -> float:
        return sample(registry, "ragwatch_scoring_skipped_total", service=SERVICE, reason=reason)

    assert (skipped("no_context"), skipped("no_question")) == (2, 1)
    assert sample(registry, "ragwatch_worker_entries_total", service=SERVICE, outcome="scored") == 3
    assert queue.stats().pending == 0 and queue.stats().dead == 0  # acknowledged, not failed
