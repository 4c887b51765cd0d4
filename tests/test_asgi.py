"""The ASGI middleware and the ASGI /metrics app against real Starlette and FastAPI apps."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

import ragwatch
from ragwatch.capture.asgi import PROBE_HEADER, RagwatchMiddleware
from ragwatch.capture.probe import sign_probe
from tests.conftest import Spans, sample, stage_count


def build_fastapi(rw: ragwatch.RagWatch) -> FastAPI:
    app = FastAPI()

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return [{"id": "leave-1", "text": "Annual leave is 15 days.", "score": 0.8}]

    @rw.llm(model="gpt-4o-mini")
    async def generate(question: str, chunks: list[dict[str, Any]]) -> str:
        return f"According to {chunks[0]['id']}: {chunks[0]['text']}"

    @rw.llm(model="gpt-4o-mini")
    def stream_answer(question: str) -> Iterator[str]:
        yield "Annual "
        yield "leave "
        yield "is 15 days."

    @app.post("/ask")
    async def ask(body: dict[str, str]) -> dict[str, str]:
        question = body["question"]
        return {"answer": await generate(question, retrieve(question))}

    @app.post("/ask/stream")
    def ask_stream(body: dict[str, str]) -> StreamingResponse:
        retrieve(body["question"])
        return StreamingResponse(stream_answer(body["question"]), media_type="text/plain")

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("handler bug")

    @app.get("/unavailable")
    def unavailable() -> JSONResponse:
        return JSONResponse({"error": "index offline"}, status_code=503)

    app.mount("/metrics", ragwatch.metrics_asgi_app(rw_registry(rw)))
    app.add_middleware(RagwatchMiddleware, watch=rw)
    return app


def rw_registry(rw: ragwatch.RagWatch) -> CollectorRegistry:
    return rw._registry_for_tests  # type: ignore[attr-defined,no-any-return]


@pytest.fixture
def watched(registry: CollectorRegistry, rw: ragwatch.RagWatch) -> ragwatch.RagWatch:
    rw._registry_for_tests = registry  # type: ignore[attr-defined]
    return rw


def test_fastapi_request_is_one_run(watched: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans) -> None:
    runs: list[ragwatch.Run] = []
    watched.add_listener(runs.append)
    with TestClient(build_fastapi(watched)) as client:
        response = client.post("/ask", json={"question": "How long is annual leave?"})
    assert response.status_code == 200
    assert response.json() == {"answer": "According to leave-1: Annual leave is 15 days."}
    assert stage_count(registry, "request") == 1
    assert stage_count(registry, "retrieve") == 1
    assert stage_count(registry, "generate") == 1
    (run,) = runs
    assert run.question == "How long is annual leave?"  # learnt from the retriever's argument
    assert run.route == "/ask"
    assert run.answer == "According to leave-1: Annual leave is 15 days."
    root = spans.named("rag svc")
    assert spans.named("retrieval").parent.span_id == root.context.span_id  # type: ignore[union-attr]


def test_streaming_response_ends_the_run_after_the_last_chunk(
    watched: ragwatch.RagWatch, registry: CollectorRegistry
) -> None:
    runs: list[ragwatch.Run] = []
    watched.add_listener(runs.append)
    with TestClient(build_fastapi(watched)) as client:
        response = client.post("/ask/stream", json={"question": "leave?"})
    assert response.text == "Annual leave is 15 days."
    assert stage_count(registry, "request") == 1
    assert stage_count(registry, "generate") == 1
    ttft = "ragwatch_time_to_first_token_seconds_count"
    assert sample(registry, ttft, service="svc", model="gpt-4o-mini") == 1
    assert runs[0].answer == "Annual leave is 15 days."
    assert runs[0].durations["request"] >= runs[0].durations["generate"]


def test_errors_and_5xx_count_as_errors(watched: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    with TestClient(build_fastapi(watched), raise_server_exceptions=False) as client:
        assert client.get("/boom").status_code == 500
        assert client.get("/unavailable").status_code == 503
    assert stage_count(registry, "request", "error") == 2
    assert stage_count(registry, "request", "ok") == 0


def test_exception_propagates_unchanged(watched: ragwatch.RagWatch) -> None:
    with TestClient(build_fastapi(watched)) as client, pytest.raises(RuntimeError, match="handler bug"):
        client.get("/boom")


def test_metrics_endpoint_is_served_and_not_watched(watched: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    with TestClient(build_fastapi(watched)) as client:
        client.post("/ask", json={"question": "q"})
        body = client.get("/metrics/").text
    assert 'ragwatch_stage_duration_seconds_count{outcome="ok",service="svc",stage="request"} 1.0' in body
    assert stage_count(registry, "request") == 1  # the scrape itself is excluded


def test_mounted_metrics_answer_the_bare_path_without_a_redirect(
    watched: ragwatch.RagWatch, registry: CollectorRegistry
) -> None:
    with TestClient(build_fastapi(watched)) as client:
        client.post("/ask", json={"question": "q"})
        response = client.get("/metrics", follow_redirects=False)
        with_slash = client.get("/metrics/", follow_redirects=False)
    assert response.status_code == 200  # not Starlette's 307 to /metrics/
    assert 'ragwatch_stage_duration_seconds_count{outcome="ok",service="svc",stage="request"} 1.0' in response.text
    assert with_slash.status_code == 200
    assert stage_count(registry, "request") == 1


def test_metrics_app_as_a_route_needs_no_middleware(registry: CollectorRegistry, rw: ragwatch.RagWatch) -> None:
    app = FastAPI()
    app.add_route("/metrics", ragwatch.metrics_asgi_app(registry))
    with TestClient(app) as client:
        response = client.get("/metrics", follow_redirects=False)
    assert response.status_code == 200 and "ragwatch_build_info" in response.text


def test_signed_probe_header_marks_the_run(registry: CollectorRegistry, provider: Any, spans: Spans) -> None:
    watched = ragwatch.RagWatch(
        "svc", registry=registry, tracer_provider=provider, sampling=False, degraded_mode=False, probe_secret="s3"
    )
    watched._registry_for_tests = registry  # type: ignore[attr-defined]
    runs: list[ragwatch.Run] = []
    watched.add_listener(runs.append)
    with TestClient(build_fastapi(watched)) as client:
        body = b'{"question": "q"}'  # the signature covers the exact body sent
        for mark in (
            sign_probe("s3", "POST", "/ask", body=body),
            "replay",  # unsigned: ignored
            sign_probe("wrong", "POST", "/ask", body=body),
            sign_probe("s3", "GET", "/ask", body=body),
        ):
            client.post("/ask", content=body, headers={"content-type": "application/json", PROBE_HEADER: mark})
        client.post("/ask", json={"question": "q"})
    assert [r.tags.get("probe") for r in runs] == ["1", None, None, None, None]
    roots = [s for s in spans.all() if s.name == "rag svc"]
    assert [s.attributes.get("ragwatch.capture.probe") for s in roots] == [True, None, None, None, None]
    assert sample(registry, "ragwatch_probe_headers_total", service="svc", outcome="accepted") == 1
    assert sample(registry, "ragwatch_probe_headers_total", service="svc", outcome="ignored") == 3


def test_plain_starlette_with_include_filter(registry: CollectorRegistry, rw: ragwatch.RagWatch) -> None:
    async def ask(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def other(request: Request) -> PlainTextResponse:
        return PlainTextResponse("other")

    app = Starlette(
        routes=[
            Route("/api/ask", ask),
            Route("/static/x", other),
            Mount("/metrics", ragwatch.metrics_asgi_app(registry)),
        ]
    )
    wrapped = rw.middleware(app, include=["/api/"])
    with TestClient(wrapped) as client:
        assert client.get("/api/ask").text == "ok"
        assert client.get("/static/x").text == "other"
    assert stage_count(registry, "request") == 1


def test_middleware_fails_open_when_ragwatch_breaks(registry: CollectorRegistry, rw: ragwatch.RagWatch) -> None:
    class Exploding:
        def start_span(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError("tracer down")

    rw.tracer = Exploding()  # type: ignore[assignment]

    async def ask(request: Request) -> PlainTextResponse:
        return PlainTextResponse("still serving")

    with TestClient(rw.middleware(Starlette(routes=[Route("/ask", ask)]))) as client:
        assert client.get("/ask").text == "still serving"
    assert sample(registry, "ragwatch_internal_errors_total", component="asgi") == 1
