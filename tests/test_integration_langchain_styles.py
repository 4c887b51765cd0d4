"""LangChain call styles beyond plain ``invoke``/``stream`` that RAG services use, with the explicit handler,
real langchain-core and a real ``ChatOpenAI`` against the OpenAI-protocol server (tests/openai_stub.py).

Each is one run per input, with its chunks, answer, tokens and outcome, handed to the listeners once, with
nothing left open in the handler:

- ``chain.with_fallbacks([backup])`` with the callbacks in ``config``: LangChain's ``invoke``/``ainvoke``
  of a fallback pass the caller's config on, so each attempt starts as a chain without a parent; only
  LangChain's context (``var_child_runnable_config``) says it runs inside the fallback.
- a retriever invoked with its own ``config={"callbacks": [handler]}`` inside a ``RunnableLambda``: the same.
- several retrievals in one chain (``retriever.map()`` over expanded queries, a ``RunnableParallel`` of
  retrievers): each replaced the last; the model read them all.
- a streamed chain whose consumer stops after the first chunk. Sync, LangChain swallows the
  ``GeneratorExit`` and reports the chain *ended*, then drains the model's stream for its trace; async,
  it reports the chain's error before the model's. Either way the request ended before its generation did.

Styles tried that were already right (abatch, batch/abatch with ``return_exceptions=True``,
``astream_events``, ``astream_log``, ``with_retry``, a model ``with_fallbacks``, a bare retriever in
``RunnableParallel``, a lambda calling a retriever without a config, ``with_config(run_name=, tags=)``)
are not repeated here.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import stage_count, stage_outcomes
from tests.openai_stub import OpenAIStub, status_reply, stream_reply, usage_chat_reply
from tests.servers import require_package

require_package("langchain_openai")
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

from ragwatch.integrations.langchain import AsyncRagwatchCallbackHandler, RagwatchCallbackHandler  # noqa: E402
from tests.test_integration_langchain import PolicyRetriever, make_chain  # noqa: E402
from tests.test_integration_langchain_agents import Shelf  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_openai_clients")  # SDK clients closed after each test

MODEL = "gpt-4o-mini"
QUESTION = "How much for hotels?"
ANSWER = "600 CNY per night."


@dataclass(frozen=True)
class Seen:
    """A run as the listeners got it: the sampler builds its sample from the run later, on its own thread,
    so what the run holds at hand-over is what gets scored — not what is written into it afterwards."""

    question: str | None
    answer: str | None
    chunks: list[str]
    usage: ragwatch.Usage | None
    model: str | None
    outcome: str
    error: str | None


@pytest.fixture
def seen(rw: ragwatch.RagWatch) -> list[Seen]:
    found: list[Seen] = []
    rw.add_listener(
        lambda r: found.append(
            Seen(r.question, r.answer, [c.id for c in r.chunks], r.usage, r.model, r.outcome, r.error)
        )
    )
    return found


def chat(stub: OpenAIStub, model: str = MODEL, streaming: bool = False) -> ChatOpenAI:
    return ChatOpenAI(
        model=model, api_key="test", base_url=stub.url, max_retries=0, streaming=streaming, stream_usage=True
    )


def empty(handler: Any) -> bool:
    """Nothing of a finished invocation is left in the handler."""
    return handler._roots == {} and handler._calls == {} and handler._tools == set()


async def close_async(*models: ChatOpenAI) -> None:
    """Close the models' async SDK clients on the test's event loop, which is gone by teardown."""
    for model in models:
        await model.root_async_client.close()


def fallback_chain(stub: OpenAIStub, failing: ChatOpenAI, answering: ChatOpenAI) -> Any:
    """A RAG chain whose model fails (HTTP 500), with the same chain on a model that answers as fallback."""
    stub.script(status_reply(500), usage_chat_reply(ANSWER, input_tokens=1200, output_tokens=7, model=MODEL))
    return make_chain(failing).with_fallbacks([make_chain(answering)])


def assert_answered_by_the_fallback(registry: CollectorRegistry, seen: list[Seen], handler: Any) -> None:
    # one request, answered: not a failed one, a good one and an empty one
    assert seen == [Seen(QUESTION, ANSWER, ["hotel", "taxi"], ragwatch.Usage(1200, 7, 0), MODEL, "ok", None)]
    assert stage_outcomes(registry, "request") == {"ok": 1, "error": 0, "cancelled": 0}
    assert stage_outcomes(registry, "generate") == {"ok": 1, "error": 1, "cancelled": 0}  # the first attempt
    assert empty(handler)


def test_a_chain_with_fallbacks_is_one_run_answered_by_the_fallback(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[Seen], stub: OpenAIStub
) -> None:
    handler = RagwatchCallbackHandler(rw)
    chain = fallback_chain(stub, chat(stub, "gpt-4o"), chat(stub))
    assert chain.invoke(QUESTION, config={"callbacks": [handler]}) == ANSWER
    assert_answered_by_the_fallback(registry, seen, handler)


async def test_a_chain_with_fallbacks_is_one_run_answered_by_the_fallback_async(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[Seen], stub: OpenAIStub
) -> None:
    handler = AsyncRagwatchCallbackHandler(rw)
    failing, answering = chat(stub, "gpt-4o"), chat(stub)
    try:
        assert (
            await fallback_chain(stub, failing, answering).ainvoke(QUESTION, config={"callbacks": [handler]}) == ANSWER
        )
    finally:
        await close_async(failing, answering)
    assert_answered_by_the_fallback(registry, seen, handler)


def test_a_retriever_given_the_handler_inside_a_lambda_joins_the_run(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[Seen], stub: OpenAIStub
) -> None:
    stub.script(usage_chat_reply(ANSWER, input_tokens=1200, output_tokens=7, model=MODEL))
    handler = RagwatchCallbackHandler(rw)
    retriever = PolicyRetriever()
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from: {context}"), ("human", "{question}")])

    def context(question: str) -> dict[str, str]:
        docs: list[Document] = retriever.invoke(question, config={"callbacks": [handler]})
        return {"context": "\n".join(d.page_content for d in docs), "question": question}

    chain = RunnableLambda(context) | prompt | chat(stub) | StrOutputParser()
    assert chain.invoke(QUESTION, config={"callbacks": [handler]}) == ANSWER
    assert seen == [Seen(QUESTION, ANSWER, ["hotel", "taxi"], ragwatch.Usage(1200, 7, 0), MODEL, "ok", None)]
    assert stage_count(registry, "retrieve") == 1 and stage_count(registry, "request") == 1
    assert empty(handler)


def test_a_stream_closed_after_its_first_chunk_is_cancelled_with_its_billed_generation(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[Seen], stub: OpenAIStub
) -> None:
    stub.script(stream_reply(["600 ", "CNY ", "per ", "night."], input_tokens=1200, output_tokens=7, model=MODEL))
    handler = RagwatchCallbackHandler(rw)
    stream = make_chain(chat(stub, streaming=True)).stream(QUESTION, config={"callbacks": [handler]})
    assert next(part for part in stream if part) == "600 "  # the first chunk with text (the role's is empty)
    stream.close()
    # LangChain read the model's whole stream for its trace after the close: the tokens were billed, and
    # the run reaches the listeners with them — once, cancelled, after the generation ended
    assert seen == [
        Seen(QUESTION, ANSWER, ["hotel", "taxi"], ragwatch.Usage(1200, 7, 0), MODEL, "cancelled", "GeneratorExit")
    ]
    assert stage_outcomes(registry, "request") == {"ok": 0, "error": 0, "cancelled": 1}
    assert stage_count(registry, "generate") == 1
    assert empty(handler)


@pytest.mark.parametrize("handler_class", [RagwatchCallbackHandler, AsyncRagwatchCallbackHandler])
async def test_an_async_stream_closed_after_its_first_chunk_waits_for_its_generation(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[Seen], stub: OpenAIStub, handler_class: Any
) -> None:
    stub.script(stream_reply(["600 ", "CNY ", "per ", "night."], input_tokens=1200, output_tokens=7, model=MODEL))
    handler = handler_class(rw)
    model = chat(stub, streaming=True)
    try:
        stream = make_chain(model).astream(QUESTION, config={"callbacks": [handler]})
        async for part in stream:
            if part:  # the first chunk with text (the role's is empty)
                assert part == "600 "
                break
        await stream.aclose()
        for _ in range(200):  # LangChain ends the chain and the model a few loop steps after aclose()
            if seen and empty(handler):
                break
            await asyncio.sleep(0.005)
    finally:
        await close_async(model)
    # the request ended before the model's stream did: the listeners get the run once that ended too, with
    # what the model had streamed when it was cut short (LangChain's error event carries no text or usage:
    # the deltas seen on the way are the answer, billed as estimated tokens)
    (run,) = seen
    assert dataclasses.replace(run, usage=None) == Seen(
        QUESTION, "600 ", ["hotel", "taxi"], None, MODEL, "cancelled", "GeneratorExit"
    )
    assert run.usage is not None and run.usage.estimated and run.usage.input_tokens > 0
    assert run.usage.output_tokens == 1
    assert stage_outcomes(registry, "request") == {"ok": 0, "error": 0, "cancelled": 1}
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 1}
    assert empty(handler)


def unique_union(lists: list[list[Document]]) -> list[Document]:
    """LangChain's multi-query recipe: every query's documents, each once."""
    seen: dict[str | None, Document] = {}
    for docs in lists:
        for doc in docs:
            seen.setdefault(doc.id, doc)
    return list(seen.values())


@pytest.mark.parametrize("style", ["map", "parallel"])
def test_several_retrievals_in_one_chain_are_all_its_chunks(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[Seen], style: str
) -> None:
    """A question expanded into several queries (``retriever.map()``, the multi-query recipe) or retrievers
    side by side (``RunnableParallel``, hybrid search) feed the model every list. Each retrieval replaced the
    last, so the answer was judged against one query's documents alone. Now they add up, each once."""
    shelf = Shelf()
    if style == "map":
        queries = RunnableLambda(lambda q: [f"{q} hotel", f"{q} taxi", f"{q} hotel rates"])
        context: Any = queries | shelf.map() | RunnableLambda(unique_union)
    else:
        both = RunnableParallel(hotel=RunnableLambda(lambda q: f"{q} hotel") | shelf, taxi=shelf)
        context = both | RunnableLambda(lambda found: unique_union([found["hotel"], found["taxi"]]))
    prompt = ChatPromptTemplate.from_template("{context}\n{question}")
    model = GenericFakeChatModel(messages=iter([AIMessage("Hotels 600 CNY; taxis with receipts.")]))
    chain = {"context": context, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()
    handler = RagwatchCallbackHandler(rw)
    chain.invoke("Which limits?", config={"callbacks": [handler]})
    (run,) = seen
    assert run.question == "Which limits?" and sorted(run.chunks) == ["hotel", "taxi"]  # what the model read
    assert stage_count(registry, "retrieve") == (3 if style == "map" else 2)
    assert empty(handler)
