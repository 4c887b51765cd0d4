"""A proxied stream the host never reads, or drops half read without closing it, still ends its call.

Dropped (``del stream`` then a collection) it ends as ``cancelled`` — the outcome of a stream closed early —
with the text it delivered kept: the stage counted, the span ended, a pipeline's run handed to the listeners.
A stream read to its end or closed is recorded once, and collecting it afterwards records nothing more.
Sync and async, with the real openai SDK against the local OpenAI-protocol server (its stream objects are
observed in place) and with decorated generators (wrapped in the proxies).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, no_internal_errors, stage_count
from tests.openai_stub import OpenAIStub, stream_reply
from tests.servers import require_package

openai = require_package("openai")
from ragwatch.integrations.openai import instrument  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_openai_clients")

MODEL = "gpt-4o-mini"
QUESTION = "How much for hotels?"
CHAT = f"chat {MODEL}"


def assert_one(registry: CollectorRegistry, spans: Spans, stage: str, outcome: str, span: str) -> None:
    """``stage`` counted once, as ``outcome`` only, and its span ended once (``cancelled``: no error status)."""
    counts = {o: stage_count(registry, stage, o) for o in ("ok", "error", "cancelled")}
    assert counts == {o: (1 if o == outcome else 0) for o in counts}
    ended = spans.named(span)
    assert ended.status.status_code is StatusCode.UNSET
    if outcome == "cancelled":
        assert ended.attributes is not None and ended.attributes["error.type"] == "GeneratorExit"


def assert_cancelled_run(run: ragwatch.Run, answer: str | None) -> None:
    assert run.question == QUESTION and run.outcome == "cancelled" and run.error == "GeneratorExit"
    assert run.answer == answer


@pytest.fixture
def answered(rw: ragwatch.RagWatch) -> list[str | None]:
    """Each run's answer as it was when the run reached the listeners (not as later filled in)."""
    found: list[str | None] = []
    rw.add_listener(lambda run: found.append(run.answer))
    return found


def dropped() -> None:
    gc.collect()  # the proxies hold no cycle: the last reference going ends them; this is for good measure


# -- the openai SDK's own stream objects, observed in place ----------------------------------------------


@pytest.mark.parametrize("read", [0, 2], ids=["unread", "half read"])
def test_a_dropped_openai_stream_in_a_pipeline_is_cancelled(
    read: int,
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    spans: Spans,
    stub: OpenAIStub,
    runs: list[ragwatch.Run],
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(stream_reply(["600 ", "CNY", "."], model=MODEL))

    @rw.pipeline
    def answer(question: str) -> object:
        return client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": question}], stream=True
        )

    stream = answer(QUESTION)
    assert isinstance(stream, openai.Stream)
    for _ in range(read):
        next(stream)
    assert runs == [] and stage_count(registry, "generate", "cancelled") == 0
    del stream
    dropped()
    assert_one(registry, spans, "generate", "cancelled", CHAT)
    assert_one(registry, spans, "request", "cancelled", "rag svc")
    (run,) = runs
    assert_cancelled_run(run, "600 " if read else None)  # the first chunk carries the role, no text
    assert no_internal_errors(registry)


@pytest.mark.parametrize("read", [0, 2], ids=["unread", "half read"])
def test_a_dropped_async_openai_stream_is_cancelled(
    read: int, rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, stub: OpenAIStub
) -> None:
    stub.script(stream_reply(["600 ", "CNY", "."], model=MODEL))

    async def main() -> None:
        async with openai.AsyncOpenAI(api_key="test", base_url=stub.url, max_retries=0) as raw:
            client = instrument(raw, rw)
            stream = await client.chat.completions.create(model=MODEL, messages=[], stream=True)
            assert isinstance(stream, openai.AsyncStream)
            for _ in range(read):
                await stream.__anext__()
            assert stage_count(registry, "generate", "cancelled") == 0
            del stream
            dropped()
            assert_one(registry, spans, "generate", "cancelled", CHAT)

    asyncio.run(main())
    assert no_internal_errors(registry)


def test_an_openai_stream_read_or_closed_is_recorded_once(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, stub: OpenAIStub
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(stream_reply(["a", "b"], model=MODEL), stream_reply(["a", "b"], model=MODEL))
    stream = client.chat.completions.create(model=MODEL, messages=[], stream=True)
    assert len(list(stream)) >= 2
    del stream
    dropped()
    assert_one(registry, spans, "generate", "ok", CHAT)
    spans.exporter.clear()
    stream = client.chat.completions.create(model=MODEL, messages=[], stream=True)
    next(stream)
    stream.close()
    del stream
    dropped()
    assert stage_count(registry, "generate", "cancelled") == 1 and stage_count(registry, "generate") == 1
    assert len(spans.all()) == 1


# -- decorated functions returning generators, wrapped in the proxies ------------------------------------
# (A decorated generator *function* opens its call on the first read, and its own wrapper generator closes
# the proxy when collected; a function *returning* a stream opens the call at once and hands the proxy out.)


@pytest.mark.parametrize("read", [0, 2], ids=["unread", "half read"])
def test_a_dropped_generator_ends_its_generation_then_its_run(
    read: int,
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    spans: Spans,
    runs: list[ragwatch.Run],
    answered: list[str | None],
) -> None:
    """A pipeline handing an LLM's stream through (a proxy around a proxy): the generation ends first, so the
    cancelled run handed to the listeners carries the partial answer; the host's generator is closed."""
    closed: list[str] = []

    def deltas() -> Iterator[str]:
        try:
            yield from ("600 ", "CNY", ".")
        finally:
            closed.append("llm")

    @rw.llm(model=MODEL)
    def generate(question: str) -> Iterator[str]:
        return deltas()

    @rw.pipeline
    def answer(question: str) -> Iterator[str]:
        return generate(question)

    stream = answer(QUESTION)
    got = [next(stream) for _ in range(read)]
    assert runs == [] and spans.all() == []
    del stream
    dropped()
    assert_one(registry, spans, "generate", "cancelled", CHAT)
    assert_one(registry, spans, "request", "cancelled", "rag svc")
    (run,) = runs
    assert_cancelled_run(run, "".join(got) or None)
    assert answered == ["".join(got) or None]
    assert closed == (["llm"] if read else [])  # its finally ran (a generator never started has none)
    assert no_internal_errors(registry)


@pytest.mark.parametrize("read", [0, 2], ids=["unread", "half read"])
def test_a_dropped_async_generator_ends_its_generation_then_its_run(
    read: int,
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    spans: Spans,
    runs: list[ragwatch.Run],
    answered: list[str | None],
) -> None:
    async def deltas() -> AsyncIterator[str]:
        for delta in ("600 ", "CNY", "."):
            yield delta

    @rw.llm(model=MODEL)
    def generate(question: str) -> AsyncIterator[str]:
        return deltas()

    @rw.pipeline
    def answer(question: str) -> AsyncIterator[str]:
        return generate(question)

    async def main() -> None:
        stream = answer(QUESTION)
        got = [await stream.__anext__() for _ in range(read)]
        del stream
        dropped()
        assert_one(registry, spans, "generate", "cancelled", CHAT)
        assert_one(registry, spans, "request", "cancelled", "rag svc")
        (run,) = runs
        assert_cancelled_run(run, "".join(got) or None)
        assert answered == ["".join(got) or None]

    asyncio.run(main())
    assert no_internal_errors(registry)


def test_a_generator_read_or_closed_is_recorded_once(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans
) -> None:
    async def adeltas() -> AsyncIterator[str]:
        yield "a"
        yield "b"

    @rw.llm(model=MODEL)
    def generate() -> Any:  # what the host gets back is the proxy, closable like the generator it wraps
        return iter(["a", "b"])

    @rw.llm(model=MODEL)
    def agenerate() -> Any:
        return adeltas()

    stream = generate()
    assert list(stream) == ["a", "b"]
    del stream
    stream = generate()
    next(stream)
    stream.close()
    del stream

    async def main() -> None:
        astream = agenerate()
        assert [x async for x in astream] == ["a", "b"]
        del astream
        astream = agenerate()
        await astream.__anext__()
        await astream.aclose()
        del astream
        dropped()

    asyncio.run(main())
    dropped()
    assert stage_count(registry, "generate") == 2 and stage_count(registry, "generate", "cancelled") == 2
    assert len([s for s in spans.all() if s.name == CHAT]) == 4


def test_a_generator_someone_else_still_holds_is_not_closed(rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    """The finaliser closes only what collection was about to close: a generator the host keeps elsewhere
    goes on working after the proxy around it is gone."""
    shared = iter(g for g in ("a", "b", "c"))

    @rw.llm(model=MODEL)
    def generate() -> Iterator[str]:
        return shared

    stream = generate()
    assert next(stream) == "a"
    del stream
    dropped()
    assert stage_count(registry, "generate", "cancelled") == 1
    assert list(shared) == ["b", "c"]
