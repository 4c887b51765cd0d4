"""LangGraph agents (issue 30, item 4): ``create_react_agent`` with a retriever tool, its model a real
``ChatOpenAI`` talking to the local OpenAI-protocol server (tests/openai_stub.py), which asks for two
searches and then answers. The graph is one run: the question is the user's message (not a tool's query),
both tool-time retrievals join it, the final answer is scored in process against everything retrieved, every
model call of the loop is billed to the request, and each tool call is a GenAI ``execute_tool`` span."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, sample, stage_count, wait_for
from tests.openai_stub import OpenAIStub, tool_call_reply, usage_chat_reply
from tests.servers import require_package
from tests.test_watch import expected_cost

require_package("langchain_openai")
require_package("langgraph")
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.tools import create_retriever_tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402
from langgraph.warnings import LangGraphDeprecatedSinceV10  # noqa: E402

from ragwatch.integrations.langchain import AsyncRagwatchCallbackHandler, RagwatchCallbackHandler  # noqa: E402

pytestmark = [
    pytest.mark.usefixtures("close_openai_clients"),  # SDK clients closed after each test
    # LangGraph 1.x points to langchain.agents.create_agent (the `langchain` package); the prebuilt agent
    # is what most deployed graphs still use
    pytest.mark.filterwarnings(f"ignore::{LangGraphDeprecatedSinceV10.__module__}.LangGraphDeprecatedSinceV10"),
]

MODEL = "gpt-4o-mini"
QUESTION = "How much for hotels, and what about taxis?"
FINAL = "Hotels are reimbursed up to 600 CNY per night. Taxis are reimbursed with receipts."
POLICY = {
    "hotel": "Hotels are reimbursed up to 600 CNY per night.",
    "taxi": "Taxis are reimbursed with receipts.",
}


class Shelf(BaseRetriever):
    """Each query finds its own document, so the run shows which retrievals it gathered."""

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        topic = "hotel" if "hotel" in query else "taxi"
        return [Document(POLICY[topic], id=topic)]


def script(stub: OpenAIStub) -> None:
    """Two searches, then the answer: three model calls, whose usage the request adds up."""
    stub.script(
        tool_call_reply("search_policies", {"query": "hotel limits"}, call_id="c1", model=MODEL),
        tool_call_reply("search_policies", {"query": "taxi rules"}, call_id="c2", model=MODEL),
        usage_chat_reply(FINAL, input_tokens=300, output_tokens=20, cached_tokens=256, model=MODEL),
    )


def make_agent(stub: OpenAIStub) -> Any:
    return create_react_agent(model(stub), [create_retriever_tool(Shelf(), "search_policies", "Search the policy.")])


def model(stub: OpenAIStub) -> ChatOpenAI:
    return ChatOpenAI(model=MODEL, api_key="test", base_url=stub.url, max_retries=0)


def test_a_react_agent_is_one_run_scored_on_every_tool_retrieval(
    scoring: tuple[ragwatch.RagWatch, list[ragwatch.Run]], registry: CollectorRegistry, spans: Spans
) -> None:
    rw, runs = scoring
    handler = RagwatchCallbackHandler(rw)
    with OpenAIStub() as stub:
        script(stub)
        state = make_agent(stub).invoke({"messages": [("user", QUESTION)]}, config={"callbacks": [handler]})
    assert state["messages"][-1].content == FINAL
    (run,) = runs
    assert run.question == QUESTION  # the user's message, not the first tool query ("hotel limits")
    assert run.answer == FINAL
    assert [c.id for c in run.chunks] == ["hotel", "taxi"]  # both tool-time retrievals
    assert [(name, outcome) for name, _, outcome in run.tools or []] == [("search_policies", "ok")] * 2
    for stage, count in (("request", 1), ("retrieve", 2), ("generate", 3)):
        assert stage_count(registry, stage) == count, stage
    # the request costs its three model calls, not the last one
    assert run.usage == ragwatch.Usage(100 + 100 + 300, 10 + 10 + 20, 256)
    expected = expected_cost(MODEL, 100, 10, 0) * 2 + expected_cost(MODEL, 300, 20, 256)
    assert run.cost_usd == pytest.approx(expected)
    assert sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source="reported") == (
        pytest.approx(expected)
    )

    root = spans.named("rag svc")
    tools = sorted((s for s in spans.all() if s.name == "execute_tool search_policies"), key=lambda s: s.start_time)
    assert [s.attributes["gen_ai.tool.call.id"] for s in tools] == ["c1", "c2"]
    for span in tools:
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == "search_policies"
        assert span.attributes["ragwatch.tool.arguments_size"] > 0
        assert span.parent is not None and span.parent.span_id == root.context.span_id
    assert handler._calls == {} and handler._roots == {} and handler._tools == set()

    # scored in process: the answer's two claims are each supported by a different tool's retrieval
    wait_for(lambda: len(rw.scores()) == 1, 60)
    (record,) = rw.scores()
    assert record["question"] == QUESTION and record["answer"] == FINAL
    assert record["chunk_ids"] == ["hotel", "taxi"]
    assert record["scores"]["faithfulness"] == 1.0


@pytest.mark.parametrize("handler_class", [RagwatchCallbackHandler, AsyncRagwatchCallbackHandler])
async def test_ainvoke_and_astream_keep_the_users_question(
    rw: ragwatch.RagWatch, handler_class: Any, registry: CollectorRegistry
) -> None:
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    config: Any = {"callbacks": [handler_class(rw)]}
    with OpenAIStub() as stub:
        script(stub)
        script(stub)
        llm = model(stub)
        agent = create_react_agent(llm, [create_retriever_tool(Shelf(), "search_policies", "Search the policy.")])
        try:
            state = await agent.ainvoke({"messages": [{"role": "user", "content": QUESTION}]}, config=config)
            streamed = [s async for s in agent.astream({"messages": [("user", "And taxis?")]}, config=config)]
        finally:
            await llm.root_async_client.close()  # on this test's event loop, which is gone by teardown
    assert state["messages"][-1].content == FINAL and streamed
    assert [r.question for r in runs] == [QUESTION, "And taxis?"]
    assert all(r.answer == FINAL and [c.id for c in r.chunks] == ["hotel", "taxi"] for r in runs)
    assert stage_count(registry, "request") == 2 and stage_count(registry, "generate") == 6


def test_one_instrument_call_bills_each_model_call_once(registry: CollectorRegistry) -> None:
    """``ragwatch.instrument(rw)`` watches LangChain *and* the openai SDK ChatOpenAI calls into: each model
    call of the agent is still one generation, its tokens and cost counted once."""
    rw = ragwatch.RagWatch("svc", registry=registry, tracing=False)
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    done = ragwatch.instrument(rw)
    try:
        assert {"langchain", "openai"} <= set(done)
        with OpenAIStub() as stub:
            script(stub)
            make_agent(stub).invoke({"messages": [("user", QUESTION)]})
    finally:
        ragwatch.uninstrument(rw)
    (run,) = runs
    assert run.question == QUESTION and [c.id for c in run.chunks] == ["hotel", "taxi"]
    assert stage_count(registry, "generate") == 3
    assert run.usage == ragwatch.Usage(500, 40, 256)
    tokens = sample(registry, "ragwatch_tokens_total", service="svc", model=MODEL, kind="input", source="reported")
    assert tokens == 500
