"""Decorators and context managers: spans, metrics and the run, for every kind of callable."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.capture.pricing import PricingTable
from tests.conftest import Spans, sample, stage_count

CHUNKS = [
    {"id": "a", "text": "Travel must be approved in advance.", "score": 0.91},
    {"id": "b", "text": "Hotels up to 600 CNY per night.", "score": 0.74},
    {"id": "c", "text": "Taxis are reimbursed with receipts.", "score": 0.52},
]
RESPONSE = {
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [{"message": {"content": "Hotels are capped at 600 CNY per night."}}],
    "usage": {
        "prompt_tokens": 1000,
        "completion_tokens": 100,
        "prompt_tokens_details": {"cached_tokens": 400},
    },
}


def expected_cost(model: str, inp: int, out: int, cached: int = 0) -> float:
    price = PricingTable().lookup(model)
    assert price is not None
    cached_price = price.cached_input if price.cached_input is not None else price.input
    return ((inp - cached) * price.input + cached * cached_price + out * price.output) / 1e6


@pytest.fixture(params=["tracing", "metrics-only"])
def any_rw(request: pytest.FixtureRequest, registry: CollectorRegistry, provider: Any) -> ragwatch.RagWatch:
    """Both drivers of the bookkeeping: call objects (tracing on) and stages (tracing off, plain functions)."""
    return ragwatch.RagWatch("svc", registry=registry, tracer_provider=provider, tracing=request.param == "tracing")


def make_sync(rw: ragwatch.RagWatch) -> Any:
    @rw.retriever
    def retrieve(question: str, top_k: int = 3) -> list[dict[str, Any]]:
        return CHUNKS[:top_k]

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, chunks: list[dict[str, Any]]) -> dict[str, Any]:
        return RESPONSE

    @rw.pipeline
    def answer(question: str) -> str:
        return generate(question, retrieve(question, top_k=3))["choices"][0]["message"]["content"]

    return answer


def test_sync_pipeline_spans_metrics_and_run(
    any_rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans
) -> None:
    rw = any_rw
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    answer = make_sync(rw)

    assert answer("How much for hotels?") == "Hotels are capped at 600 CNY per night."

    if rw.tracer is None:
        assert spans.all() == []
        trace_id = None
    else:
        root, ret, chat = spans.named("rag svc"), spans.named("retrieval"), spans.named("chat gpt-4o-mini")
        trace_id = format(root.context.trace_id, "032x")
        assert ret.parent is not None and ret.parent.span_id == root.context.span_id
        assert chat.parent is not None and chat.parent.span_id == root.context.span_id
        assert ret.context.trace_id == chat.context.trace_id == root.context.trace_id
        assert chat.kind == SpanKind.CLIENT
        assert ret.attributes["gen_ai.operation.name"] == "retrieval"
        assert ret.attributes["gen_ai.retrieval.top_k"] == 3
        assert ret.attributes["ragwatch.retrieval.chunk_ids"] == ("a", "b", "c")
        assert ret.attributes["ragwatch.retrieval.chunk_scores"] == (0.91, 0.74, 0.52)
        assert "ragwatch.retrieval.chunk_texts" not in ret.attributes  # text only when opted in
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "gpt-4o-mini"
        assert chat.attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 1000
        assert chat.attributes["gen_ai.usage.output_tokens"] == 100
        assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 400

    for stage in ("request", "retrieve", "generate"):
        assert stage_count(registry, stage) == 1
        assert stage_count(registry, stage, "error") == 0
    assert sample(registry, "ragwatch_retrieved_chunks_sum", service="svc") == 3
    model = "gpt-4o-mini-2024-07-18"
    tokens = "ragwatch_tokens_total"
    assert sample(registry, tokens, service="svc", model=model, kind="input", source="reported") == 1000
    assert sample(registry, tokens, service="svc", model=model, kind="cached_input", source="reported") == 400
    assert sample(registry, tokens, service="svc", model=model, kind="output", source="reported") == 100
    cost = expected_cost(model, 1000, 100, 400)
    assert sample(registry, "ragwatch_cost_usd_total", service="svc", model=model, source="reported") == pytest.approx(
        cost
    )
    assert sample(registry, "ragwatch_cost_usd_total", service="svc", model=model, source="estimated") == 0

    (run,) = runs
    assert run.question == "How much for hotels?"
    assert run.answer == "Hotels are capped at 600 CNY per night."
    assert [c.id for c in run.chunks] == ["a", "b", "c"]
    assert [c.rank for c in run.chunks] == [1, 2, 3]
    assert run.trace_id == trace_id
    assert run.cost_usd == pytest.approx(cost)
    assert set(run.durations) == {"request", "retrieve", "generate"}
    assert run.durations["request"] >= run.durations["retrieve"]


async def test_async_pipeline(any_rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans) -> None:
    rw = any_rw
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)

    @rw.retriever
    async def retrieve(question: str) -> list[dict[str, Any]]:
        await asyncio.sleep(0)
        return CHUNKS

    @rw.llm(model="gpt-4o-mini")
    async def generate(question: str, chunks: Any) -> str:
        await asyncio.sleep(0)
        return "plain text answer"

    @rw.pipeline
    async def answer(question: str) -> str:
        return await generate(question, await retrieve(question))

    results = await asyncio.gather(*(answer(f"q{i}") for i in range(5)))
    assert results == ["plain text answer"] * 5
    assert stage_count(registry, "request") == 5
    assert stage_count(registry, "generate") == 5
    # concurrent tasks keep their own runs: every run saw exactly its own question
    assert sorted(r.question for r in runs) == [f"q{i}" for i in range(5)]
    roots = [s for s in spans.all() if s.name == "rag svc"]
    assert len({s.context.trace_id for s in roots}) == (0 if rw.tracer is None else 5)
    # plain text carries no usage: tokens are estimated and marked so
    est = sample(
        registry,
        "ragwatch_tokens_total",
        service="svc",
        model="gpt-4o-mini",
        kind="output",
        source="estimated",
    )
    assert est == 5 * ragwatch.capture.responses.estimate_tokens("plain text answer")
    assert all(r.usage is not None and r.usage.estimated for r in runs)
    # ...and so is their cost: billed and guessed spend are separate series
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model="gpt-4o-mini", source="estimated")
    assert cost == pytest.approx(sum(r.cost_usd or 0.0 for r in runs)) and cost > 0
    assert sample(registry, "ragwatch_cost_usd_total", service="svc", model="gpt-4o-mini", source="reported") == 0


def openai_chunks(words: list[str]) -> list[Any]:
    events: list[Any] = [
        SimpleNamespace(model="gpt-4o-mini", choices=[SimpleNamespace(delta=SimpleNamespace(content=None))])
    ]
    events += [
        SimpleNamespace(model="gpt-4o-mini", choices=[SimpleNamespace(delta=SimpleNamespace(content=w))]) for w in words
    ]
    events.append(
        SimpleNamespace(
            model="gpt-4o-mini",
            choices=[],
            usage=SimpleNamespace(prompt_tokens=50, completion_tokens=len(words)),
        )
    )
    return events


def test_sync_generator_stream_ttft_and_usage(rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans) -> None:
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)

    @rw.llm(model="gpt-4o-mini")
    def stream(question: str) -> Any:
        yield from openai_chunks(["Hello", " ", "world"])

    @rw.pipeline
    def answer(question: str) -> str:
        return "".join(c.choices[0].delta.content or "" for c in stream(question) if c.choices)

    assert answer("hi") == "Hello world"
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model="gpt-4o-mini") == 1
    chat = spans.named("chat gpt-4o-mini")
    assert chat.attributes["gen_ai.usage.output_tokens"] == 3
    assert chat.attributes["ragwatch.time_to_first_token"] > 0
    assert runs[0].answer == "Hello world"
    assert runs[0].ttft is not None and runs[0].ttft <= runs[0].durations["generate"]


async def test_async_generator_stream(any_rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    rw = any_rw

    @rw.llm(model="gpt-4o-mini")
    async def stream(question: str) -> Any:
        for word in ["你好", "，", "世界"]:
            await asyncio.sleep(0)
            yield word

    parts = [part async for part in stream("q")]
    assert parts == ["你好", "，", "世界"]
    assert stage_count(registry, "generate") == 1
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model="gpt-4o-mini") == 1
    est = sample(
        registry,
        "ragwatch_tokens_total",
        service="svc",
        model="gpt-4o-mini",
        kind="output",
        source="estimated",
    )
    assert est == ragwatch.capture.responses.estimate_tokens("你好，世界")


class SdkStream:
    """Mimics an SDK stream object: an iterator with extra attributes and a close()."""

    def __init__(self, events: list[Any]) -> None:
        self._it = iter(events)
        self.response = "raw-http-response"
        self.closed = False

    def __iter__(self) -> SdkStream:
        return self

    def __next__(self) -> Any:
        return next(self._it)

    def close(self) -> None:
        self.closed = True


def test_returned_stream_object_is_proxied_and_finishes_on_exhaustion(
    any_rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans
) -> None:
    rw = any_rw

    @rw.llm(model="gpt-4o-mini")
    def create(**kwargs: Any) -> SdkStream:
        return SdkStream(openai_chunks(["a", "b"]))

    stream = create(stream=True)
    assert stream.response == "raw-http-response"  # attributes of the SDK object still work
    assert spans.all() == []  # the call is not over until the stream is consumed
    assert stage_count(registry, "generate") == 0
    assert len(list(stream)) == 4
    assert stage_count(registry, "generate") == 1
    reported = sample(
        registry, "ragwatch_tokens_total", service="svc", model="gpt-4o-mini", kind="output", source="reported"
    )
    assert reported == 2
    if rw.tracer is None:
        assert spans.all() == []
    else:
        assert spans.named("chat gpt-4o-mini").attributes["gen_ai.usage.output_tokens"] == 2


def test_pipeline_returning_a_stream_ends_its_run_with_the_stream(
    any_rw: ragwatch.RagWatch, registry: CollectorRegistry
) -> None:
    rw = any_rw
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    seen_runs: list[Any] = []

    @rw.retriever
    def retrieve(question: str) -> Any:
        return iter(CHUNKS[:2])  # an iterator: counted when it is drained, not when it is returned

    @rw.llm(model="gpt-4o-mini")
    def create(question: str) -> SdkStream:
        return SdkStream(openai_chunks(["a", "b"]))

    @rw.pipeline
    def answer(question: str) -> Any:
        list(retrieve(question))
        stream = create(question)
        seen_runs.append(ragwatch.current_run())
        return stream

    stream = answer("why?")
    assert ragwatch.current_run() is None  # the caller's context is restored when the function returns
    assert runs == [] and stage_count(registry, "request") == 0  # the request lasts until its stream ends
    assert stage_count(registry, "retrieve") == 1
    assert sample(registry, "ragwatch_retrieved_chunks_sum", service="svc") == 2
    events = list(stream)
    assert len(events) == 4
    assert stage_count(registry, "request") == 1 and stage_count(registry, "generate") == 1
    (run,) = runs
    assert run is seen_runs[0]
    assert run.question == "why?" and run.answer == "ab" and run.outcome == "ok"
    assert run.durations["request"] >= run.durations["generate"]


def test_stream_closed_early_counts_as_cancelled(any_rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    rw = any_rw

    @rw.llm(model="m")
    def create() -> SdkStream:
        return SdkStream(openai_chunks(["a", "b", "c"]))

    stream = create()
    next(stream)
    stream.close()
    stream.close()  # idempotent
    assert isinstance(stream, SdkStream) and stream.closed  # the SDK's own object, observed in place
    assert stage_count(registry, "generate", "cancelled") == 1
    assert stage_count(registry, "generate", "ok") == 0

    @rw.llm(model="m")
    def gen() -> Any:
        yield "x"
        yield "y"

    g = gen()
    next(g)
    g.close()
    assert stage_count(registry, "generate", "cancelled") == 2


class Boom(Exception):
    pass


def _kinds(rw: ragwatch.RagWatch, error: BaseException) -> dict[str, Any]:
    """One failing function of every kind, each wrapped as an LLM call."""

    @rw.llm(model="m")
    def sync_fn() -> str:
        raise error

    @rw.llm(model="m")
    async def async_fn() -> str:
        raise error

    @rw.llm(model="m")
    def gen_fn() -> Any:
        yield "partial"
        raise error

    @rw.llm(model="m")
    async def agen_fn() -> Any:
        yield "partial"
        raise error

    return {"sync": sync_fn, "async": async_fn, "gen": gen_fn, "agen": agen_fn}


async def _drive(kind: str, fn: Any) -> Any:
    if kind == "sync":
        return fn()
    if kind == "async":
        return await fn()
    if kind == "gen":
        return list(fn())
    return [x async for x in fn()]


@pytest.mark.parametrize("kind", ["sync", "async", "gen", "agen"])
async def test_host_exception_passes_through_unchanged(
    kind: str, any_rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans
) -> None:
    error = Boom("from the host")
    fn = _kinds(any_rw, error)[kind]
    with pytest.raises(Boom) as info:
        await _drive(kind, fn)
    assert info.value is error
    assert info.value.__context__ is None  # our bookkeeping left no trace on the host's exception
    assert stage_count(registry, "generate", "error") == 1
    if any_rw.tracer is None:
        assert spans.all() == []
    else:
        span = spans.named("chat m")
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes["error.type"] == "Boom"


class BrokenTracer:
    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer exploded")


class BrokenHistogram:
    def observe(self, value: float) -> None:
        raise OSError("multiprocess mmap file vanished")


class BrokenPricing:
    def cost(self, model: str, usage: Any) -> float:
        raise RuntimeError("pricing table corrupt")


def _ok_kinds(rw: ragwatch.RagWatch) -> dict[str, Any]:
    @rw.llm(model="m")
    def sync_fn() -> dict[str, Any]:
        return RESPONSE

    @rw.llm(model="m")
    async def async_fn() -> dict[str, Any]:
        return RESPONSE

    @rw.llm(model="m")
    def gen_fn() -> Any:
        yield "a"
        yield "b"

    @rw.llm(model="m")
    async def agen_fn() -> Any:
        yield "a"
        yield "b"

    return {"sync": sync_fn, "async": async_fn, "gen": gen_fn, "agen": agen_fn}


@pytest.mark.parametrize("kind", ["sync", "async", "gen", "agen"])
@pytest.mark.parametrize("breakage", ["tracer", "pricing", "metrics"])
async def test_internal_failures_never_reach_the_host(
    kind: str,
    breakage: str,
    any_rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rw = any_rw
    if breakage == "tracer":
        rw.tracer = BrokenTracer()  # type: ignore[assignment]
    elif breakage == "pricing":
        rw.pricing = BrokenPricing()  # type: ignore[assignment]
    else:
        rw.stage_children = {key: BrokenHistogram() for key in rw.stage_children}

    fn = _ok_kinds(rw)[kind]
    with caplog.at_level(logging.WARNING, logger="ragwatch"):
        result = await _drive(kind, fn)
    assert result == (RESPONSE if kind in ("sync", "async") else ["a", "b"])
    component = {"tracer": "capture", "pricing": "pricing", "metrics": "capture"}[breakage]
    assert sample(registry, "ragwatch_internal_errors_total", component=component) >= 1
    assert any("ragwatch" in r.getMessage() for r in caplog.records)


class BrokenModeWatcher:
    """A degraded-mode watcher whose every read fails: capture cannot even start a call."""

    @property
    def _thread(self) -> Any:
        raise RuntimeError("mode watcher broken")

    @property
    def degraded(self) -> bool:
        raise RuntimeError("mode watcher broken")


def test_capture_that_cannot_start_still_runs_the_host(any_rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    any_rw.mode_watcher = BrokenModeWatcher()  # type: ignore[assignment]
    answer = make_sync(any_rw)
    assert answer("q") == "Hotels are capped at 600 CNY per night."
    assert sample(registry, "ragwatch_internal_errors_total", component="capture") == 2  # pipeline, retriever
    assert stage_count(registry, "request") == 0 and stage_count(registry, "retrieve") == 0
    assert stage_count(registry, "generate") == 1  # the LLM call did not need the watcher


def test_bad_chunks_are_counted_not_raised(rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    @rw.retriever
    def retrieve(q: str) -> list[Any]:
        return [object(), object()]

    result = retrieve("q")
    assert len(result) == 2
    assert sample(registry, "ragwatch_internal_errors_total", component="chunks") == 1
    assert stage_count(registry, "retrieve") == 1


def test_internal_error_logging_is_rate_limited(
    any_rw: ragwatch.RagWatch, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    rw = any_rw
    rw.pricing = BrokenPricing()  # type: ignore[assignment]

    @rw.llm(model="m")
    def call() -> dict[str, Any]:
        return RESPONSE

    with caplog.at_level(logging.WARNING, logger="ragwatch"):
        for _ in range(50):
            call()
    assert sample(registry, "ragwatch_internal_errors_total", component="pricing") == 50
    assert len([r for r in caplog.records if "pricing" in r.getMessage()]) == 1


def test_suppress_switches_capture_off(any_rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans) -> None:
    rw = any_rw
    answer = make_sync(rw)
    with ragwatch.suppress():
        answer("q")
    assert stage_count(registry, "request") == 0
    assert spans.all() == []
    answer("q")
    assert stage_count(registry, "request") == 1


def test_unknown_model_counts_unpriced_and_warns_once(
    any_rw: ragwatch.RagWatch, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    rw = any_rw

    @rw.llm(model="in-house-llm-7b")
    def call() -> dict[str, Any]:
        return {
            "choices": [{"message": {"content": "x"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        }

    with caplog.at_level(logging.WARNING, logger="ragwatch"):
        for _ in range(3):
            call()
    assert sample(registry, "ragwatch_unpriced_calls_total", service="svc", model="in-house-llm-7b") == 3
    for source in ("reported", "estimated"):
        assert sample(registry, "ragwatch_cost_usd_total", service="svc", model="in-house-llm-7b", source=source) == 0
    assert len([r for r in caplog.records if "in-house-llm-7b" in r.getMessage()]) == 1


def test_pricing_override_from_settings(registry: CollectorRegistry) -> None:
    rw = ragwatch.RagWatch(
        "svc", registry=registry, tracing=False, pricing={"in-house-llm-7b": {"input": 1.0, "output": 2.0}}
    )

    @rw.llm(model="in-house-llm-7b")
    def call() -> dict[str, Any]:
        return {
            "choices": [{"message": {"content": "x"}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 500},
        }

    call()
    # 1000 * 1.0 / 1e6 + 500 * 2.0 / 1e6
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model="in-house-llm-7b", source="reported")
    assert cost == pytest.approx(0.002)


def test_context_managers(rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans) -> None:
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    with rw.request("what is the hotel cap?") as req:
        with rw.retrieval(top_k=2) as r:
            r.record(CHUNKS[:2])
        with rw.generation(model="gpt-4o-mini") as g:
            for delta in ["600 ", "CNY"]:
                g.feed(delta)
        assert req.run is ragwatch.current_run()
    assert ragwatch.current_run() is None
    assert runs[0].answer == "600 CNY"
    assert [c.id for c in runs[0].chunks] == ["a", "b"]
    assert spans.named("retrieval").parent.span_id == spans.named("rag svc").context.span_id  # type: ignore[union-attr]
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model="gpt-4o-mini") == 1

    with pytest.raises(Boom), rw.request("q"):
        raise Boom()
    assert stage_count(registry, "request", "error") == 1
    assert runs[1].outcome == "error" and runs[1].error == "Boom"


async def test_async_context_managers(rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    async with rw.request("q"), rw.generation(model="gpt-4o-mini") as g:
        g.record(RESPONSE)
    assert stage_count(registry, "request") == 1
    assert stage_count(registry, "generate") == 1


def test_nested_pipeline_joins_the_outer_run(any_rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    rw = any_rw
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    answer = make_sync(rw)
    with rw.request():
        answer("inner question")
    assert len(runs) == 1
    assert runs[0].question == "inner question"
    assert stage_count(registry, "request") == 1


def test_force_sample_marks_the_run(any_rw: ragwatch.RagWatch) -> None:
    rw = any_rw
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)

    @rw.pipeline
    def answer(q: str) -> str:
        ragwatch.force_sample("user-complaint")
        return "x"

    answer("q")
    assert runs[0].force and runs[0].tags["force_reason"] == "user-complaint"


def test_listener_errors_are_contained(any_rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    rw = any_rw

    def bad(run: ragwatch.Run) -> None:
        raise ValueError("listener bug")

    rw.add_listener(bad)
    assert make_sync(rw)("q") == RESPONSE["choices"][0]["message"]["content"]
    assert sample(registry, "ragwatch_internal_errors_total", component="listener") == 1


def test_metrics_off_and_tracing_off(registry: CollectorRegistry, spans: Spans, provider: Any) -> None:
    rw = ragwatch.RagWatch("quiet", registry=registry, tracer_provider=provider, metrics=False, tracing=False)
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    assert make_sync(rw)("q")
    assert stage_count(registry, "request", service="quiet") == 0
    assert spans.all() == []
    assert runs and runs[0].answer  # runs still flow to listeners (sampling needs them)


def test_chunk_text_on_spans_only_when_opted_in(registry: CollectorRegistry, provider: Any, spans: Spans) -> None:
    rw = ragwatch.RagWatch("svc", registry=registry, tracer_provider=provider, capture_chunk_text=True)
    make_sync(rw)("q")
    assert spans.named("retrieval").attributes["ragwatch.retrieval.chunk_texts"][0] == CHUNKS[0]["text"]


def test_many_models_fold_into_other(any_rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    rw = any_rw
    from ragwatch.metrics.catalog import MAX_MODELS

    @rw.llm
    def call(model: str) -> dict[str, Any]:
        return {
            "model": model,
            "choices": [{"message": {"content": "x"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }

    for i in range(MAX_MODELS + 10):
        call(model=f"model-{i}")
    names = {
        s.labels["model"] for metric in registry.collect() if metric.name == "ragwatch_tokens" for s in metric.samples
    }
    assert len(names) <= MAX_MODELS + 1
    assert (
        sample(registry, "ragwatch_tokens_total", service="svc", model="other", kind="input", source="reported") >= 10
    )


def test_two_services_share_one_registry(registry: CollectorRegistry) -> None:
    a = ragwatch.RagWatch("svc-a", registry=registry, tracing=False)
    b = ragwatch.RagWatch("svc-b", registry=registry, tracing=False)
    make_sync(a)("q")
    make_sync(b)("q")
    make_sync(b)("q")
    assert stage_count(registry, "request", service="svc-a") == 1
    assert stage_count(registry, "request", service="svc-b") == 2


def test_decorated_functions_keep_their_identity(any_rw: ragwatch.RagWatch) -> None:
    rw = any_rw
    import inspect

    @rw.llm(model="m")
    async def agen() -> Any:
        yield "x"

    @rw.retriever
    async def coro(q: str) -> list[str]:
        """Docstring kept."""
        return []

    assert inspect.isasyncgenfunction(agen)
    assert inspect.iscoroutinefunction(coro)
    assert coro.__name__ == "coro" and coro.__doc__ == "Docstring kept."


def test_a_requests_retrievals_add_up_each_chunk_once(rw: ragwatch.RagWatch, runs: list[ragwatch.Run]) -> None:
    """A pipeline that retrieves for several queries (a question expanded into sub-queries, retrievers side by
    side) feeds the model every list: the run's chunks are all of them, each once, in the order found (the
    second retrieval used to replace the first, and the answer was judged against one list)."""

    @rw.retriever
    def retrieve(query: str) -> list[dict[str, Any]]:
        found = {"hotels": ["hotel", "meal"], "taxis": ["taxi", "meal"]}[query]
        return [{"id": i, "text": f"{i} policy"} for i in found]

    @rw.pipeline
    def answer(question: str) -> str:
        return " ".join(c["id"] for q in ("hotels", "taxis") for c in retrieve(q))

    answer("Hotels and taxis?")
    (run,) = runs
    assert [c.id for c in run.chunks] == ["hotel", "meal", "taxi"] and [c.rank for c in run.chunks] == [1, 2, 3]
