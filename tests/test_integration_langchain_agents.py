"""LangChain round two (issue 30, items 2 and 4): streamed invocations keep the user's question, and a
retriever called inside a tool belongs to the enclosing request — its chunks join the run, the final
answer is judged against everything retrieved, and each tool call is a GenAI ``execute_tool`` span."""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, sample, stage_count
from tests.servers import require_package

require_package("langchain_core")
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from ragwatch.integrations.langchain import AsyncRagwatchCallbackHandler, RagwatchCallbackHandler  # noqa: E402
from tests.test_integration_langchain import ANSWER, make_chain  # noqa: E402

QUESTION = "How much for hotels?"


def test_stream_keeps_the_question(rw: ragwatch.RagWatch, runs: list[ragwatch.Run]) -> None:
    chain = make_chain(GenericFakeChatModel(messages=iter([ANSWER])))
    assert "".join(chain.stream(QUESTION, config={"callbacks": [RagwatchCallbackHandler(rw)]})) == ANSWER
    (run,) = runs
    assert run.question == QUESTION and run.answer == ANSWER


@pytest.mark.parametrize("handler_class", [RagwatchCallbackHandler, AsyncRagwatchCallbackHandler])
async def test_astream_and_astream_events_keep_the_question(
    rw: ragwatch.RagWatch, runs: list[ragwatch.Run], handler_class: Any
) -> None:
    chain = make_chain(GenericFakeChatModel(messages=iter([ANSWER, ANSWER])))
    config: Any = {"callbacks": [handler_class(rw)]}
    assert "".join([p async for p in chain.astream(QUESTION, config=config)]) == ANSWER
    events = [e async for e in chain.astream_events("Which taxis are covered?", version="v2", config=config)]
    assert events[-1]["event"] == "on_chain_end"
    assert [r.question for r in runs] == [QUESTION, "Which taxis are covered?"]
    assert all(r.answer == ANSWER for r in runs)


class Shelf(BaseRetriever):
    """Each query finds its own document, so the run shows which retrievals it gathered."""

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        topic = "hotel" if "hotel" in query else "taxi"
        return [Document(f"Policy on {topic}s.", id=topic)]


shelf = Shelf()


@tool
def search_policies(query: str) -> str:
    """Search the travel policy."""
    return "\n".join(d.page_content for d in shelf.invoke(query))


def agent(model: Any) -> Any:
    """A tool-calling loop without LangGraph: the model asks for two searches, then answers."""

    def run(question: str) -> str:
        for query in ("hotel limits", "taxi rules"):
            search_policies.invoke({"query": query})
        return model.invoke(question).content

    return RunnableLambda(run, name="agent")


def test_retrievals_inside_tools_join_the_run_and_tools_are_spans(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, runs: list[ragwatch.Run]
) -> None:
    final = "Hotels up to 600 CNY; taxis with receipts."
    handler = RagwatchCallbackHandler(rw)
    assert (
        agent(GenericFakeChatModel(messages=iter([AIMessage(final)]))).invoke(QUESTION, config={"callbacks": [handler]})
        == final
    )
    (run,) = runs
    assert run.question == QUESTION and run.answer == final
    assert [c.id for c in run.chunks] == ["hotel", "taxi"]  # both tool-time retrievals: the answer is judged on all
    assert [(name, outcome) for name, _, outcome in run.tools or []] == [("search_policies", "ok")] * 2
    assert stage_count(registry, "retrieve") == 2 and stage_count(registry, "request") == 1
    tool_spans = [s for s in spans.all() if s.name == "execute_tool search_policies"]
    assert len(tool_spans) == 2
    root = spans.named("rag svc")
    for span in tool_spans:
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == "search_policies"
        assert span.attributes["ragwatch.tool.arguments_size"] > 0
        assert span.parent is not None and span.parent.span_id == root.context.span_id
    assert handler._calls == {} and handler._roots == {} and handler._tools == set()


SLOW = 0.3


class SlowShelf(Shelf):
    """:class:`Shelf` from an index that takes a while, with an archived document beside each hit."""

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        time.sleep(SLOW)
        return [*super()._get_relevant_documents(query, run_manager=run_manager), Document("Archive.", id="archive")]


class KeepFirst(BaseRetriever):
    """What ``ContextualCompressionRetriever`` does: its base retriever's documents, cut to the best one."""

    base: BaseRetriever

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return self.base.invoke(query, config={"callbacks": run_manager.get_child()})[:1]


compressed_shelf = KeepFirst(base=SlowShelf())


@tool
def search_compressed(query: str) -> str:
    """Search the travel policy, best document only."""
    return "\n".join(d.page_content for d in compressed_shelf.invoke(query))


@pytest.mark.parametrize("handler_class", [RagwatchCallbackHandler, AsyncRagwatchCallbackHandler])
async def test_a_tools_compression_retriever_adds_what_it_kept_to_what_the_run_had(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run], handler_class: Any
) -> None:
    """A retriever around a retriever inside a tool: its inner retrieval replaced the run's chunks when it
    ended, so the first tool call's chunks were lost and the second's counted twice (``taxi, archive, taxi``
    for ``hotel, taxi``); and its rerank's time held the inner retrieval's. Now the kept document is added to
    what the run had before the tool's retriever began, and the rerank is timed from the inner one's end."""

    def answer(question: str) -> str:
        for query in ("hotel limits", "taxi rules"):
            search_compressed.invoke({"query": query})
        return "Hotels up to 600 CNY; taxis with receipts."

    handler = handler_class(rw)
    await RunnableLambda(answer, name="agent").ainvoke(QUESTION, config={"callbacks": [handler]})
    (run,) = runs
    assert [c.id for c in run.chunks] == ["hotel", "taxi"]
    assert [d.id for d in run.candidates] == ["taxi", "archive"]  # what the last rerank was given
    assert stage_count(registry, "retrieve") == 2 and stage_count(registry, "rerank") == 2
    took = {
        stage: sample(registry, "ragwatch_stage_duration_seconds_sum", service="svc", stage=stage, outcome="ok")
        for stage in ("retrieve", "rerank")
    }
    assert took["retrieve"] >= 2 * SLOW and took["rerank"] < SLOW  # the slow index is retrieval time
    assert handler._calls == {} and handler._roots == {} and handler._inner == {}
