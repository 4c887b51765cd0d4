"""A streamed LlamaIndex answer the host never reads to its end still ends its run, with real llama-index-core.

A streamed query's ``response_gen`` dropped unread or half read, or closed half read, ends its run as
``cancelled`` (the outcome of a stream the host stopped reading early), its span ended and the run handed to
the listeners; its generation still open is ended too; and the handler's tracker keeps nothing of it. A chat
turn's stream is read by the chat engine's own history writer, whether the host reads it or not: dropped
unread, it ends ``ok``; when that writer is cancelled before it starts (an event loop shutting down), the
turn is cancelled. A streamed LLM that fails half way ends its generation as an error and is forgotten.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, stage_count
from tests.servers import require_package

require_package("llama_index.core")
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402

from ragwatch.integrations.llamaindex import RagwatchEventHandler, instrument, uninstrument  # noqa: E402
from tests.test_integration_llamaindex_agents import Shelf, chat_engine  # noqa: E402

QUESTION = "How much for hotels?"


class FailingStreamLLM(MockLLM):
    """A streaming LLM whose connection drops after the first token."""

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text="Hotels", delta="Hotels")
            raise ConnectionError("model server went away")

        return gen()


@pytest.fixture
def handler(rw: ragwatch.RagWatch) -> Iterator[RagwatchEventHandler]:
    handler = instrument(rw)
    yield handler
    uninstrument(handler)


def kept(handler: RagwatchEventHandler) -> dict[str, int]:
    """Whatever the tracker still holds, per container (it holds nothing between requests)."""
    tracker = handler._tracker
    return {name: len(v) for name, v in vars(tracker).items() if isinstance(v, (dict, set)) and v}


def streaming_engine(llm: Any = None) -> RetrieverQueryEngine:
    return RetrieverQueryEngine.from_args(Shelf(), llm=llm or MockLLM(max_tokens=8), streaming=True)


def assert_cancelled(run: ragwatch.Run, registry: CollectorRegistry, spans: Spans) -> None:
    assert run.question == QUESTION and run.outcome == "cancelled" and run.error == "GeneratorExit"
    assert [c.id for c in run.chunks] == ["hotel"]
    assert stage_count(registry, "request", "cancelled") == 1 and stage_count(registry, "request") == 0
    root = spans.named("rag svc")  # the run's span ended (a cancelled stream is no error status)
    assert root.attributes is not None and root.attributes["error.type"] == "GeneratorExit"
    assert root.status.status_code is StatusCode.UNSET


def test_a_streamed_query_dropped_unread_is_a_cancelled_run(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    spans: Spans,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
) -> None:
    response = streaming_engine().query(QUESTION)
    assert runs == []  # the answer is still to be read
    del response
    gc.collect()
    (run,) = runs
    assert_cancelled(run, registry, spans)
    assert run.answer is None and stage_count(registry, "generate") == 0  # the LLM was never called
    assert kept(handler) == {}


@pytest.mark.parametrize("how", ["dropped", "closed"])
def test_a_streamed_query_read_half_way_ends_its_generation_and_its_run(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    spans: Spans,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    how: str,
) -> None:
    response = streaming_engine().query(QUESTION)
    stream = response.response_gen
    assert next(stream) == "text "
    assert runs == [] and kept(handler) != {}  # its generation is open
    if how == "closed":
        stream.close()
    del stream, response
    gc.collect()
    (run,) = runs
    assert_cancelled(run, registry, spans)
    assert run.answer == "text "  # what the host was shown
    assert stage_count(registry, "generate", "cancelled") == 1 and stage_count(registry, "generate") == 0
    assert spans.named("chat unknown").attributes["error.type"] == "GeneratorExit"
    assert kept(handler) == {}


@pytest.mark.parametrize("read", [0, 1])
async def test_an_async_streamed_query_dropped_is_a_cancelled_run(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    spans: Spans,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    read: int,
) -> None:
    response = await streaming_engine().aquery(QUESTION)
    for _ in range(read):
        assert await response.response_gen.__anext__() == "text "
    del response
    gc.collect()
    (run,) = runs
    assert_cancelled(run, registry, spans)
    assert stage_count(registry, "generate", "cancelled") == read
    await asyncio.sleep(0.01)  # the loop closes the half-read generator of the LLM: nothing more to record
    assert len(runs) == 1 and stage_count(registry, "generate") == 0
    assert kept(handler) == {}


def test_a_streamed_chat_turn_dropped_unread_is_read_by_the_history_writer(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run], handler: RagwatchEventHandler
) -> None:
    response = chat_engine("context").stream_chat(QUESTION)
    thread = response.write_response_to_history_thread
    del response
    gc.collect()
    assert thread is not None
    thread.join(10)
    (run,) = runs  # the chat engine read the whole answer into its history: the turn was answered
    assert run.outcome == "ok" and run.answer == " ".join(["text"] * 8)
    assert stage_count(registry, "request") == 1
    assert kept(handler) == {}


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
async def test_an_async_chat_turn_whose_history_writer_never_ran_is_a_cancelled_run(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    spans: Spans,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    mode: str,
) -> None:
    engine = chat_engine(mode)

    async def turn() -> None:
        response = await engine.astream_chat(QUESTION)
        assert response.awrite_response_to_history_task is not None
        response.awrite_response_to_history_task.cancel()  # as a loop shutting down cancels its tasks

    await turn()
    await asyncio.sleep(0.01)  # the writer task takes its cancellation, before it read anything
    gc.collect()
    (run,) = runs
    assert_cancelled(run, registry, spans)
    assert run.answer is None and stage_count(registry, "generate") == 0
    assert kept(handler) == {}


def test_a_streamed_llm_failing_half_way_ends_its_generation_as_an_error(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run], handler: RagwatchEventHandler
) -> None:
    response = streaming_engine(FailingStreamLLM()).query(QUESTION)
    read: list[str] = []
    with pytest.raises(ConnectionError):
        read.extend(response.response_gen)
    assert read == ["Hotels"]
    (run,) = runs
    assert run.outcome == "error" and run.error == "ConnectionError" and run.answer == "Hotels"
    assert stage_count(registry, "generate", "error") == 1 and stage_count(registry, "request", "error") == 1
    assert kept(handler) == {}
