"""openai call styles that used to leave a call open, with the real SDK against the OpenAI-protocol server.

A stream manager (``chat.completions.stream``, ``responses.stream``) never entered sends nothing: made inside a
pipeline it records nothing; returned by a pipeline or a decorated LLM function and dropped, it ends that call
as ``cancelled`` (the run handed to the listeners), and entered later, the SDK call it makes joins the run. A
``with_streaming_response`` response dropped without being closed, or closed before its body (or the stream it
parsed to) was read to the end, ends ``cancelled`` with what was read; read to its end it stays ``ok``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, no_internal_errors, stage_outcomes
from tests.openai_stub import OpenAIStub, stream_reply, usage_chat_reply
from tests.servers import require_package

openai = require_package("openai")
from ragwatch.integrations.openai import instrument  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_openai_clients")

MODEL = "gpt-4o-mini"
MESSAGES = [{"role": "user", "content": "How much for hotels?"}]
CHAT = f"chat {MODEL}"


def managers(client: Any) -> dict[str, Callable[[], Any]]:
    return {
        "chat": lambda: client.chat.completions.stream(model=MODEL, messages=MESSAGES),
        "responses": lambda: client.responses.stream(model=MODEL, input="How much for hotels?"),
    }


# -- stream managers --------------------------------------------------------------------------------------


def test_managers_never_entered_inside_a_pipeline_send_and_record_nothing(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub, runs: list[ragwatch.Run]
) -> None:
    """Not a leak (it passed before the fix too): the SDK sends the request on ``with``, and the watched
    ``create`` opens the call then — so nothing is open, and the run ends normally."""
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)

    @rw.pipeline
    def answer(question: str) -> str:
        for make in managers(client).values():
            make()  # dropped at once
        gc.collect()
        return "no answer"

    assert answer("How much for hotels?") == "no answer"
    assert stub.requests == []
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 0}
    (run,) = runs
    assert run.outcome == "ok" and "generate" not in run.durations


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_a_returned_manager_dropped_unentered_ends_its_run_cancelled(
    kind: str,
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    spans: Spans,
    stub: OpenAIStub,
    runs: list[ragwatch.Run],
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)

    @rw.pipeline
    def answer(question: str) -> Any:
        return managers(client)[kind]()

    manager = answer("How much for hotels?")
    assert runs == []
    del manager
    gc.collect()
    (run,) = runs  # before the fix: never handed over, its request stage never counted, its span never ended
    assert run.outcome == "cancelled" and run.error == "GeneratorExit"
    assert stage_outcomes(registry, "request") == {"ok": 0, "error": 0, "cancelled": 1}
    assert spans.named("rag svc").end_time is not None
    assert stub.requests == [] and stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 0}
    assert no_internal_errors(registry)


def test_a_decorated_llm_returning_a_manager_dropped_unentered_is_cancelled(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, stub: OpenAIStub
) -> None:
    client = openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0)  # the decorator watches it

    @rw.llm(model=MODEL)
    def generate() -> Any:
        return client.chat.completions.stream(model=MODEL, messages=MESSAGES)

    manager = generate()
    del manager
    gc.collect()
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 1}
    assert spans.named(CHAT).attributes["error.type"] == "GeneratorExit"  # type: ignore[index]
    assert stub.requests == []


# the SDK builds the request's coroutine at .stream() and awaits it on entry: never entered, Python warns
@pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
async def test_an_async_returned_manager_dropped_unentered_ends_its_run_cancelled(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub, runs: list[ragwatch.Run]
) -> None:
    client = instrument(openai.AsyncOpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)

    @rw.pipeline
    def answer(question: str) -> Any:
        return client.chat.completions.stream(model=MODEL, messages=MESSAGES)

    manager = answer("How much for hotels?")
    del manager
    gc.collect()
    (run,) = runs
    assert run.outcome == "cancelled" and stub.requests == []
    await client.close()


def test_a_returned_manager_entered_later_records_its_generation_in_the_run(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, stub: OpenAIStub, runs: list[ragwatch.Run]
) -> None:
    """``with`` runs after the pipeline returned: the SDK call it makes still belongs to the run (before the
    fix it was counted outside any run: the run had no generate stage and no answer)."""
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(stream_reply(["600 ", "CNY", "."], model=MODEL))

    @rw.pipeline
    def answer(question: str) -> Any:
        return client.chat.completions.stream(model=MODEL, messages=MESSAGES)

    with answer("How much for hotels?") as stream:
        assert "".join(e.delta for e in stream if e.type == "content.delta") == "600 CNY."
    (run,) = runs
    assert run.outcome == "ok" and run.answer == "600 CNY." and "generate" in run.durations
    assert stage_outcomes(registry, "generate") == {"ok": 1, "error": 0, "cancelled": 0}
    assert spans.named(CHAT).parent.span_id == spans.named("rag svc").context.span_id  # type: ignore[union-attr]
    assert no_internal_errors(registry)


# -- with_streaming_response ------------------------------------------------------------------------------


def test_a_streaming_response_dropped_unclosed_is_cancelled(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, stub: OpenAIStub, runs: list[ragwatch.Run]
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(usage_chat_reply("600 CNY.", input_tokens=12, output_tokens=3, model=MODEL))

    @rw.pipeline
    def answer(question: str) -> str:
        response = client.chat.completions.with_streaming_response.create(model=MODEL, messages=MESSAGES).__enter__()
        response.http_response.close()  # the socket, not the SDK response: nothing of ours is told
        del response
        gc.collect()
        return "gave up"

    assert answer("How much for hotels?") == "gave up"
    (run,) = runs  # before the fix: the generation never ended (no count, its span open for ever)
    assert "generate" in run.durations
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 1}
    assert spans.named(CHAT).end_time is not None
    assert no_internal_errors(registry)


async def test_an_async_streaming_response_dropped_unclosed_is_cancelled(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    client = instrument(openai.AsyncOpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(usage_chat_reply("600 CNY.", input_tokens=12, output_tokens=3, model=MODEL))
    response = await client.chat.completions.with_streaming_response.create(model=MODEL, messages=MESSAGES).__aenter__()
    await response.http_response.aclose()
    del response
    gc.collect()
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 1}
    await client.close()


@pytest.mark.parametrize("stream", [False, True], ids=["body unread", "stream half read"])
def test_a_streaming_response_closed_before_it_was_read_is_cancelled(
    stream: bool, rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub, runs: list[ragwatch.Run]
) -> None:
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(
        stream_reply(["600 ", "CNY", "."], model=MODEL)
        if stream
        else usage_chat_reply("600 CNY.", input_tokens=12, output_tokens=3, model=MODEL)
    )

    @rw.pipeline
    def answer(question: str) -> str:
        create = client.chat.completions.with_streaming_response.create
        with create(model=MODEL, messages=MESSAGES, stream=stream) as response:
            if stream:
                chunks = response.parse()
                next(chunks), next(chunks)  # the role, then "600 "
        return "gave up"

    answer("How much for hotels?")
    (run,) = runs
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 1}  # before the fix: ok
    assert run.answer == ("600 " if stream else "gave up")  # what the stream delivered is kept
    assert no_internal_errors(registry)


def test_a_streaming_response_read_to_its_end_is_ok(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    """The other side of the test above: closing a body read to its end some other way (``read``,
    ``iter_lines``) or a stream read to its end is no cancellation."""
    client = instrument(openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0), rw)
    stub.script(
        usage_chat_reply("600 CNY.", input_tokens=12, output_tokens=3, model=MODEL),
        stream_reply(["600 ", "CNY", "."], model=MODEL),
    )
    with client.chat.completions.with_streaming_response.create(model=MODEL, messages=MESSAGES) as response:
        assert response.read()
    create = client.chat.completions.with_streaming_response.create
    with create(model=MODEL, messages=MESSAGES, stream=True) as response:
        assert len(list(response.parse())) == 5
    assert stage_outcomes(registry, "generate") == {"ok": 2, "error": 0, "cancelled": 0}
