"""Small host-safety gaps: what a wrapped function does must reach its caller unchanged, and nothing about
a result (its size, its class) may cost the request thread much or raise into the host."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.capture.record import is_stream
from ragwatch.capture.responses import estimate_tokens
from tests.conftest import sample, stage_count


@pytest.fixture(params=["tracing", "metrics-only"])
def any_rw(request: pytest.FixtureRequest, registry: CollectorRegistry, provider: Any) -> ragwatch.RagWatch:
    tracing = request.param == "tracing"
    return ragwatch.RagWatch("svc", registry=registry, tracer_provider=provider, tracing=tracing)


async def test_async_generator_receives_asend_values_and_athrow_exceptions(
    any_rw: ragwatch.RagWatch, registry: CollectorRegistry
) -> None:
    received: list[Any] = []

    @any_rw.llm(model="m")
    async def echo(question: str) -> Any:
        value = yield "ready"
        while True:
            try:
                received.append(value)
                value = yield f"got {value}"
            except KeyError as exc:  # thrown in by the consumer: handled, the stream goes on
                value = yield f"handled {exc.args[0]}"

    stream = echo("q")
    assert await stream.asend(None) == "ready"
    assert await stream.asend(1) == "got 1"
    assert await stream.asend("two") == "got two"
    assert await stream.athrow(KeyError("k")) == "handled k"
    assert await stream.asend(3) == "got 3"
    assert received == [1, "two", 3]
    with pytest.raises(ValueError, match="unhandled"):  # not handled by the generator: propagates, once
        await stream.athrow(ValueError("unhandled"))
    assert stage_count(registry, "generate", outcome="error") == 1
    await stream.aclose()


async def test_athrow_that_ends_the_generator_stops_iteration_and_finishes_the_call(
    any_rw: ragwatch.RagWatch, registry: CollectorRegistry
) -> None:
    @any_rw.llm(model="m")
    async def stream(question: str) -> Any:
        try:
            yield "a"
            yield "b"
        except KeyError:
            return

    agen = stream("q")
    assert await agen.__anext__() == "a"
    with pytest.raises(StopAsyncIteration):
        await agen.athrow(KeyError("stop"))
    assert stage_count(registry, "generate") == 1


async def test_suppressed_async_generator_passes_asend_through(any_rw: ragwatch.RagWatch) -> None:
    @any_rw.llm(model="m")
    async def echo(question: str) -> Any:
        value = yield "ready"
        while True:
            value = yield f"got {value}"

    with ragwatch.suppress():
        stream = echo("q")
        assert await stream.asend(None) == "ready"
        assert await stream.asend(5) == "got 5"
        await stream.aclose()


def test_estimate_tokens_of_a_huge_cjk_answer_reads_a_bounded_prefix() -> None:
    answer = "根据报销制度，酒店每晚上限为六百元。" * 600_000  # 10.8 M characters
    exact = 16 * 600_000 + (2 * 600_000 + 3) // 4  # the full-scan rule: 16 CJK characters a copy, 2 others
    tracemalloc.start()
    try:
        estimate = estimate_tokens(answer)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # the full scan built a list of every CJK character: hundreds of MB
    assert abs(estimate - exact) / exact < 0.001  # and the estimate is as good as the full scan's
    assert estimate_tokens("你好，世界") == 5 and estimate_tokens("hello world") == 3  # short texts: exact rule


class Hostile(type):
    """A metaclass whose attribute lookups and hashing raise (a proxy object gone wrong)."""

    def __getattr__(cls, name: str) -> Any:
        raise RuntimeError(f"no {name} for you")

    def __hash__(cls) -> int:
        raise RuntimeError("unhashable class")


class Weird(metaclass=Hostile):
    pass


def test_a_result_whose_class_raises_on_lookup_never_reaches_the_host(
    any_rw: ragwatch.RagWatch, registry: CollectorRegistry
) -> None:
    weird = Weird()
    assert is_stream(weird) is False

    @any_rw.retriever
    def retrieve(question: str) -> Any:
        return weird

    @any_rw.llm(model="m")
    def generate(question: str) -> Any:
        return weird

    @any_rw.pipeline
    def answer(question: str) -> Any:
        retrieve(question)
        return generate(question)

    assert answer("q") is weird  # returned untouched, nothing raised into the host
    assert stage_count(registry, "request") == 1
    assert sample(registry, "ragwatch_internal_errors_total", service="svc", component="chunks") >= 0
