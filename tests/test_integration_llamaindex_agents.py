"""LlamaIndex round two (issue 30, items 4 and 5) with real llama-index-core: a ``FunctionAgent`` with a
``QueryEngineTool`` is one run scored on the answer the user reads (the agent's, not the tool's inner
answer) against everything its tool retrieved; chat engines are runs whose question is the user's
message; an async query through a ``CustomLLM`` (whose ``acomplete`` calls ``complete``) is one generation,
billed once; and an openai SDK call inside a LlamaIndex LLM is that same generation."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, sample, stage_count, wait_for
from tests.openai_stub import OpenAIStub, usage_chat_reply
from tests.servers import require_package
from tests.test_integration_llamaindex import BilledLLM
from tests.test_watch import expected_cost

require_package("llama_index.core")
from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.base.llms.types import CompletionResponse, ToolCallBlock  # noqa: E402
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine  # noqa: E402
from llama_index.core.llms import ChatMessage, CustomLLM, LLMMetadata, MessageRole, MockLLM  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402
from llama_index.core.memory import ChatMemoryBuffer  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.core.tools import QueryEngineTool  # noqa: E402

from ragwatch.integrations.llamaindex import instrument, uninstrument  # noqa: E402

QUESTION = "How much for hotels, and what about taxis?"
FINAL = "Hotels are reimbursed up to 600 CNY per night. Taxis are reimbursed with receipts."
POLICY = {"hotel": "Hotels are reimbursed up to 600 CNY per night.", "taxi": "Taxis are reimbursed with receipts."}


class Shelf(BaseRetriever):
    """Each query finds its own node, so the run shows which retrievals it gathered."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        topic = "hotel" if "hotel" in query_bundle.query_str else "taxi"
        return [NodeWithScore(node=TextNode(text=POLICY[topic], id_=topic), score=0.9)]


def agent_model(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """The agent's model: search for hotels, then taxis, then answer from both results."""
    done = sum(m.role == MessageRole.TOOL for m in messages)
    if done == 2:
        return ChatMessage(role="assistant", content=FINAL)
    query = ("hotel limits", "taxi rules")[done]
    call = ToolCallBlock(tool_call_id=f"t{done + 1}", tool_name="policy", tool_kwargs={"input": query})
    return ChatMessage(role="assistant", blocks=[call])


@pytest.fixture
def scoring(
    scoring: tuple[ragwatch.RagWatch, list[ragwatch.Run]],
) -> Iterator[tuple[ragwatch.RagWatch, list[ragwatch.Run]]]:
    """Every request sampled and scored in process (conftest's fixture), with LlamaIndex instrumented."""
    handler = instrument(scoring[0])
    try:
        yield scoring
    finally:
        uninstrument(handler)


# llama-index-workflows lists an agent's steps with inspect.getmembers, which touches pydantic's deprecated
# `__fields__` / `__fields_set__` on the agent model
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
async def test_a_function_agent_is_scored_on_its_own_answer_and_every_tool_retrieval(
    scoring: tuple[ragwatch.RagWatch, list[ragwatch.Run]], registry: CollectorRegistry, spans: Spans
) -> None:
    rw, runs = scoring
    engine = RetrieverQueryEngine.from_args(Shelf(), llm=MockLLM(max_tokens=8))
    tool = QueryEngineTool.from_defaults(engine, name="policy", description="The travel policy.")
    agent = FunctionAgent(tools=[tool], llm=MockFunctionCallingLLM(response_generator=agent_model))
    assert str(await agent.run(user_msg=QUESTION)) == FINAL
    (run,) = runs
    assert run.question == QUESTION  # not the tool's query
    assert run.answer == FINAL  # not the query engine's inner answer (MockLLM's)
    assert [c.id for c in run.chunks] == ["hotel", "taxi"]
    assert [(name, outcome) for name, _, outcome in run.tools or []] == [("policy", "ok")] * 2
    # three agent steps and two inner answers; the tool's query is no request of its own
    for stage, count in (("request", 1), ("retrieve", 2), ("generate", 5)):
        assert stage_count(registry, stage) == count, stage

    root = spans.named("rag svc")
    tools = sorted((s for s in spans.all() if s.name == "execute_tool policy"), key=lambda s: s.start_time)
    assert [s.attributes["gen_ai.tool.call.id"] for s in tools] == ["t1", "t2"]
    for span in tools:
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["ragwatch.tool.arguments_size"] > 0
        assert span.parent is not None and span.parent.span_id == root.context.span_id
    retrievals = [s for s in spans.all() if s.name == "retrieval"]
    assert len(retrievals) == 2 and all(
        s.parent is not None and s.parent.trace_id == root.context.trace_id for s in retrievals
    )

    wait_for(lambda: len(rw.scores()) == 1, 60)
    (record,) = rw.scores()
    assert record["question"] == QUESTION and record["answer"] == FINAL
    assert record["chunk_ids"] == ["hotel", "taxi"]
    assert record["scores"]["faithfulness"] == 1.0


@pytest.fixture
def runs(runs: list[ragwatch.Run], rw: ragwatch.RagWatch) -> Iterator[list[ragwatch.Run]]:
    """The runs ``rw`` finishes (conftest's fixture), with LlamaIndex instrumented for the test."""
    handler = instrument(rw)
    yield runs
    uninstrument(handler)


def chat_engine(mode: str) -> Any:
    llm = MockLLM(max_tokens=8)
    # the default memory keeps its history in an aiosqlite database it never closes (a ResourceWarning)
    memory = ChatMemoryBuffer.from_defaults(token_limit=2000)
    if mode == "context":
        return ContextChatEngine.from_defaults(retriever=Shelf(), llm=llm, memory=memory)
    return CondensePlusContextChatEngine.from_defaults(retriever=Shelf(), llm=llm, memory=memory)


async def ask(engine: Any, method: str, message: str) -> str:
    """One chat turn through ``method`` (``chat``, ``achat``, ``stream_chat``, ``astream_chat``), its answer
    read to the end."""
    if method == "chat":
        return str(engine.chat(message).response)
    if method == "achat":
        return str((await engine.achat(message)).response)
    if method == "stream_chat":
        return "".join(engine.stream_chat(message).response_gen)
    return "".join([d async for d in (await engine.astream_chat(message)).async_response_gen()])


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
@pytest.mark.parametrize("method", ["chat", "stream_chat", "achat", "astream_chat"])
async def test_a_chat_engine_turn_is_a_run_asked_by_the_users_message(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[Any], mode: str, method: str
) -> None:
    engine = chat_engine(mode)
    message = "How much for hotels?"
    answer = await ask(engine, method, message)
    assert answer.strip()
    wait_for(lambda: runs)  # a stream's run ends with its generation, in the thread writing the chat history
    (run,) = runs
    assert run.question == message and run.answer is not None and run.answer.strip() == answer.strip()
    assert [c.id for c in run.chunks] == ["hotel"]
    assert stage_count(registry, "request") == 1 and stage_count(registry, "retrieve") == 1
    assert stage_count(registry, "generate") == 1  # a CustomLLM's chat calls its complete: one generation


async def test_aquery_through_a_custom_llm_counts_one_generation(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[Any]
) -> None:
    engine = RetrieverQueryEngine.from_args(Shelf(), llm=BilledLLM())  # its acomplete calls complete
    assert str(await engine.aquery("How much for hotels?")) == "600 CNY."
    (run,) = runs
    assert run.usage == ragwatch.Usage(1200, 7, 1024)
    assert stage_count(registry, "generate") == 1
    tokens = sample(
        registry, "ragwatch_tokens_total", service="svc", model="gpt-4o-mini", kind="input", source="reported"
    )
    assert tokens == 1200
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model="gpt-4o-mini", source="reported")
    assert cost == pytest.approx(expected_cost("gpt-4o-mini", 1200, 7, 1024))


class SdkLLM(CustomLLM):
    """A LlamaIndex LLM that calls the openai SDK itself, as the OpenAI(-like) LLM classes do."""

    base_url: str

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="gpt-4o-mini")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        import openai

        with openai.OpenAI(api_key="test", base_url=self.base_url, max_retries=0) as client:
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
        return CompletionResponse(text=reply.choices[0].message.content or "", raw=reply)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_an_sdk_call_inside_a_llamaindex_llm_is_one_generation(registry: CollectorRegistry) -> None:
    require_package("openai")
    rw = ragwatch.RagWatch("svc", registry=registry, tracing=False)
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    assert set(ragwatch.instrument(rw, only=("llamaindex", "openai"))) == {"llamaindex", "openai"}
    try:
        with OpenAIStub() as stub:
            stub.script(usage_chat_reply("600 CNY.", input_tokens=100, output_tokens=3, model="gpt-4o-mini"))
            engine = RetrieverQueryEngine.from_args(Shelf(), llm=SdkLLM(base_url=stub.url))
            assert str(engine.query("How much for hotels?")) == "600 CNY."
    finally:
        ragwatch.uninstrument(rw)
    (run,) = runs
    assert run.usage == ragwatch.Usage(100, 3, 0) and stage_count(registry, "generate") == 1
