"""The openai call styles beyond ``create`` (issue 30, items 3 and 7), with the real SDK against the
OpenAI-protocol server: ``with_raw_response`` (its HTTP body must never become the answer),
``with_streaming_response``, ``chat.completions.parse`` and ``embeddings.create``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import sample, stage_count
from tests.openai_stub import OpenAIStub, embedding_reply, stream_reply, usage_chat_reply
from tests.servers import require_package
from tests.test_watch import expected_cost

openai = require_package("openai")
pydantic = require_package("pydantic")
from ragwatch.integrations.openai import instrument  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_openai_clients")  # SDK clients closed after each test

MODEL = "gpt-4o-mini"
MESSAGES = [{"role": "user", "content": "How much for hotels?"}]
ANSWER = "Hotels are capped at 600 CNY per night."


def billed() -> Any:
    return usage_chat_reply(ANSWER, input_tokens=1200, output_tokens=7, cached_tokens=1024, model=MODEL)


def assert_billed(registry: CollectorRegistry, run: ragwatch.Run | None = None) -> None:
    def tokens(kind: str, source: str = "reported") -> float:
        return sample(registry, "ragwatch_tokens_total", service="svc", model=MODEL, kind=kind, source=source)

    assert (tokens("input"), tokens("output"), tokens("cached_input")) == (1200, 7, 1024)
    assert tokens("output", "estimated") == 0  # the raw body was not taken for the answer and estimated
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source="reported")
    assert cost == pytest.approx(expected_cost(MODEL, 1200, 7, 1024))
    assert sum(sample(registry, "ragwatch_internal_errors_total", component=c) for c in COMPONENTS) == 0
    if run is not None:
        assert run.answer == ANSWER and run.model == MODEL and run.usage == ragwatch.Usage(1200, 7, 1024)


COMPONENTS = ("capture", "response", "stream", "tracing", "pricing")


def asked(rw: ragwatch.RagWatch, call: Any) -> Any:
    @rw.pipeline
    def answer(question: str) -> Any:
        return call()

    return answer("How much for hotels?")


def test_with_raw_response_records_the_parsed_completion_not_the_http_body(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub, runs: list[ragwatch.Run]
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(billed())
    raw = asked(rw, lambda: client.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES))
    assert raw.headers["content-type"] == "application/json"  # the host still gets the raw response
    assert raw.parse().choices[0].message.content == ANSWER
    (run,) = runs
    assert_billed(registry, run)
    assert stage_count(registry, "generate") == 1


def test_with_raw_response_of_a_stream_follows_the_parsed_stream(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(
        stream_reply(
            ["Hotels are capped ", "at 600 CNY per night."],
            input_tokens=1200,
            output_tokens=7,
            cached_tokens=1024,
            model=MODEL,
        )
    )
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    stream = raw.parse()
    assert isinstance(stream, openai.Stream)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == ANSWER
    assert_billed(registry)
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model=MODEL) == 1


async def test_async_with_raw_response(rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub) -> None:
    client = instrument(openai.AsyncOpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(billed())
    raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES)
    assert raw.parse().choices[0].message.content == ANSWER
    assert_billed(registry)
    await client.close()  # in its own loop: the fixture's asyncio.run cannot close a client of this one


@pytest.mark.parametrize("read", ["parse", "json"])
def test_with_streaming_response_records_usage_without_an_internal_error(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    stub: OpenAIStub,
    runs: list[ragwatch.Run],
    caplog: pytest.LogCaptureFixture,
    read: str,
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(billed())

    def call() -> str:
        with client.chat.completions.with_streaming_response.create(model=MODEL, messages=MESSAGES) as response:
            body = response.parse() if read == "parse" else response.json()
        return body.choices[0].message.content if read == "parse" else body["choices"][0]["message"]["content"]

    with caplog.at_level(logging.WARNING, logger="ragwatch"):
        assert asked(rw, call) == ANSWER
    (run,) = runs
    assert_billed(registry, run)
    assert not [r for r in caplog.records if r.name == "ragwatch"]


async def test_async_with_streaming_response(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    client = instrument(openai.AsyncOpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(billed())
    async with client.chat.completions.with_streaming_response.create(model=MODEL, messages=MESSAGES) as response:
        completion = await response.parse()
    assert completion.choices[0].message.content == ANSWER
    assert_billed(registry)
    await client.close()


def test_with_streaming_response_read_line_by_line_is_recorded_on_close(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(billed())
    with client.chat.completions.with_streaming_response.create(model=MODEL, messages=MESSAGES) as response:
        assert "".join(response.iter_lines())
    assert stage_count(registry, "generate") == 1  # latency kept; what the body said was not read by us
    assert sum(sample(registry, "ragwatch_internal_errors_total", component=c) for c in COMPONENTS) == 0


class Cap(pydantic.BaseModel):
    amount: int
    currency: str


def test_chat_completions_parse_records_once(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub, runs: list[ragwatch.Run]
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    body = '{"amount": 600, "currency": "CNY"}'
    stub.script(usage_chat_reply(body, input_tokens=1200, output_tokens=7, cached_tokens=1024, model=MODEL))
    completion = asked(rw, lambda: client.chat.completions.parse(model=MODEL, messages=MESSAGES, response_format=Cap))
    assert completion.choices[0].message.parsed == Cap(amount=600, currency="CNY")
    (run,) = runs
    assert run.answer == body and run.usage == ragwatch.Usage(1200, 7, 1024)
    assert stage_count(registry, "generate") == 1


def test_embeddings_are_an_embed_stage_with_priced_tokens(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub, runs: list[ragwatch.Run]
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    model = "text-embedding-3-small"
    stub.script(embedding_reply(2, input_tokens=12, model=model), embedding_reply(1, input_tokens=None, model=model))
    result = client.embeddings.create(model=model, input=["hotel policy", "taxi policy"])
    assert len(result.data) == 2
    client.embeddings.create(model=model, input="How much for hotels?")  # no usage reported: estimated

    assert stage_count(registry, "embed") == 2
    tokens = sample(registry, "ragwatch_tokens_total", service="svc", model=model, kind="input", source="reported")
    assert tokens == 12
    estimated = sample(registry, "ragwatch_tokens_total", service="svc", model=model, kind="input", source="estimated")
    assert estimated == ragwatch.capture.responses.estimate_tokens("How much for hotels?")
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model=model, source="reported")
    assert cost == pytest.approx(12 * 0.02 / 1e6)
    assert stage_count(registry, "generate") == 0 and runs == []  # an embedding is no request and no answer
