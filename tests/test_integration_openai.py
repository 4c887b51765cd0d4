"""``ragwatch.integrations.openai`` with the real ``openai`` package against a real HTTP server speaking the
OpenAI protocol (tests/openai_stub.py): chat completions, streams, stream managers and the Responses API."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, no_internal_errors, sample, stage_count
from tests.openai_stub import (
    OpenAIStub,
    responses_reply,
    responses_stream_reply,
    status_reply,
    stream_reply,
    usage_chat_reply,
)
from tests.servers import require_package
from tests.test_watch import expected_cost

openai = require_package("openai")
from ragwatch.integrations.openai import instrument, uninstrument  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_openai_clients")  # SDK clients closed after each test

MODEL = "gpt-4o-mini"
MESSAGES = [{"role": "user", "content": "How much for hotels?"}]


def tokens(registry: CollectorRegistry, kind: str, source: str = "reported") -> float:
    return sample(registry, "ragwatch_tokens_total", service="svc", model=MODEL, kind=kind, source=source)


def cost(registry: CollectorRegistry, source: str = "reported") -> float:
    return sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source=source)


def assert_billed(registry: CollectorRegistry, inp: int, out: int, cached: int) -> None:
    assert tokens(registry, "input") == inp
    assert tokens(registry, "output") == out
    assert tokens(registry, "cached_input") == cached
    assert tokens(registry, "output", "estimated") == 0
    assert cost(registry) == pytest.approx(expected_cost(MODEL, inp, out, cached))
    assert cost(registry, "estimated") == 0


def test_chat_completion_with_cached_tokens_inside_a_pipeline(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, stub: OpenAIStub, runs: list[ragwatch.Run]
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(usage_chat_reply("600 CNY.", input_tokens=1200, output_tokens=7, cached_tokens=1024, model=MODEL))

    @rw.pipeline
    def answer(question: str) -> str:
        reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": question}])
        assert isinstance(reply, openai.types.chat.ChatCompletion)
        return reply.choices[0].message.content or ""

    assert answer("How much for hotels?") == "600 CNY."
    assert_billed(registry, 1200, 7, 1024)
    (run,) = runs
    assert run.model == MODEL and run.answer == "600 CNY." and run.question == "How much for hotels?"
    assert run.usage is not None and run.usage.cached_input_tokens == 1024
    chat = spans.named(f"chat {MODEL}")
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.parent is not None and chat.parent.span_id == spans.named("rag svc").context.span_id
    assert no_internal_errors(registry)


def test_stream_is_the_sdks_own_object_and_reports_usage_and_ttft(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(stream_reply(["600 ", "CNY", "."], input_tokens=1200, output_tokens=3, cached_tokens=1024, model=MODEL))
    stream = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    assert isinstance(stream, openai.Stream)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "600 CNY."
    assert_billed(registry, 1200, 3, 1024)
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model=MODEL) == 1
    assert stage_count(registry, "generate") == 1
    assert no_internal_errors(registry)


def test_stream_without_usage_is_estimated(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(stream_reply(["Hotels are capped ", "at 600 CNY."], model=MODEL))
    with client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True) as stream:
        assert isinstance(stream, openai.Stream)
        for _ in stream:
            pass
    assert tokens(registry, "output", "estimated") == ragwatch.capture.responses.estimate_tokens(
        "Hotels are capped at 600 CNY."
    )
    assert tokens(registry, "input", "estimated") == ragwatch.capture.responses.estimate_tokens("How much for hotels?")
    assert cost(registry, "estimated") > 0 and cost(registry) == 0


def test_stream_manager_records_tokens_without_a_traceback(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub, caplog: pytest.LogCaptureFixture
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(stream_reply(["600 ", "CNY."], input_tokens=1200, output_tokens=2, cached_tokens=1024, model=MODEL))
    with caplog.at_level(logging.WARNING, logger="ragwatch"):
        manager = client.chat.completions.stream(model=MODEL, messages=MESSAGES, stream_options={"include_usage": True})
        assert isinstance(manager, openai.lib.streaming.chat.ChatCompletionStreamManager)
        with manager as stream:
            assert isinstance(stream, openai.lib.streaming.chat.ChatCompletionStream)
            deltas = [e.delta for e in stream if e.type == "content.delta"]
            final = stream.get_final_completion()
    assert "".join(deltas) == "600 CNY." and final.choices[0].message.content == "600 CNY."
    assert_billed(registry, 1200, 2, 1024)
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model=MODEL) == 1
    assert not [r for r in caplog.records if r.name == "ragwatch"]
    assert no_internal_errors(registry)


def test_decorated_function_returning_the_sdk_stream_keeps_its_class(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    """The decorator path (no instrument()): the stream a watched function returns is the SDK's own."""
    client = openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0)
    stub.script(stream_reply(["a", "b"], input_tokens=10, output_tokens=2, model=MODEL))

    @rw.llm(model=MODEL)
    def generate() -> Any:
        return client.chat.completions.create(
            model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )

    stream = generate()
    assert isinstance(stream, openai.Stream)
    assert [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content] == ["a", "b"]
    assert tokens(registry, "input") == 10 and tokens(registry, "output") == 2


def test_closing_a_stream_early_is_cancelled(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(stream_reply(["a", "b", "c"], model=MODEL))
    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    next(iter(stream))
    stream.close()
    assert stage_count(registry, "generate", "cancelled") == 1
    assert stage_count(registry, "generate") == 0


def test_responses_api_create_and_stream(rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(
        responses_reply("600 CNY.", input_tokens=1000, output_tokens=5, cached_tokens=600, model=MODEL),
        responses_stream_reply(["600 ", "CNY."], input_tokens=200, output_tokens=2, cached_tokens=100, model=MODEL),
    )
    reply = client.responses.create(model=MODEL, input="How much for hotels?")
    assert reply.output_text == "600 CNY."
    with client.responses.stream(model=MODEL, input="How much for hotels?") as stream:
        assert isinstance(stream, openai.lib.streaming.responses.ResponseStream)
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "600 CNY."
    assert stub.requests[0].path.endswith("/responses")
    assert_billed(registry, 1200, 7, 700)
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model=MODEL) == 1
    assert no_internal_errors(registry)


async def test_async_client(rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub) -> None:
    client = instrument(openai.AsyncOpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(
        usage_chat_reply("x", input_tokens=100, output_tokens=1, cached_tokens=0, model=MODEL),
        stream_reply(["y"], input_tokens=200, output_tokens=1, cached_tokens=128, model=MODEL),
        stream_reply(["z"], input_tokens=300, output_tokens=1, model=MODEL),
    )
    reply = await client.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert reply.choices[0].message.content == "x"
    stream = await client.chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    assert isinstance(stream, openai.AsyncStream)
    assert [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content] == ["y"]
    async with client.chat.completions.stream(
        model=MODEL, messages=MESSAGES, stream_options={"include_usage": True}
    ) as events:
        assert isinstance(events, openai.lib.streaming.chat.AsyncChatCompletionStream)
        assert "".join([e.delta async for e in events if e.type == "content.delta"]) == "z"
    assert_billed(registry, 600, 3, 128)
    assert stage_count(registry, "generate") == 3
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model=MODEL) == 2
    assert no_internal_errors(registry)
    await client.close()


def test_api_errors_pass_through_and_count(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(status_reply(500, message="boom"))
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert stage_count(registry, "generate", "error") == 1


def test_instrument_twice_and_uninstrument(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    client = openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0)
    instrument(instrument(client, rw), rw)
    stub.script(usage_chat_reply("x", input_tokens=10, output_tokens=1, model=MODEL))
    client.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert stage_count(registry, "generate") == 1  # one wrapper, not two
    uninstrument(client)
    stub.script(usage_chat_reply("x", input_tokens=10, output_tokens=1, model=MODEL))
    client.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert stage_count(registry, "generate") == 1
    assert not hasattr(client.chat.completions.create, "_ragwatch_original")


def test_decorated_function_returning_a_stream_manager(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case: `@rw.llm` around `client.chat.completions.stream(...)` logged a ResponseError
    traceback and recorded no tokens; the manager is now observed in place and its stream followed."""
    client = openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0)
    stub.script(stream_reply(["600 ", "CNY."], input_tokens=1200, output_tokens=2, cached_tokens=1024, model=MODEL))

    @rw.llm(model=MODEL)
    def generate() -> Any:
        return client.chat.completions.stream(model=MODEL, messages=MESSAGES, stream_options={"include_usage": True})

    with caplog.at_level(logging.WARNING, logger="ragwatch"):
        manager = generate()
        assert isinstance(manager, openai.lib.streaming.chat.ChatCompletionStreamManager)
        with manager as stream:
            text = "".join(e.delta for e in stream if e.type == "content.delta")
    assert text == "600 CNY."
    assert_billed(registry, 1200, 2, 1024)
    assert not [r for r in caplog.records if r.name == "ragwatch"]
    assert no_internal_errors(registry)
