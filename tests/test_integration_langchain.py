"""``ragwatch.integrations.langchain`` with real langchain-core: a ``BaseRetriever`` subclass and
langchain-core's fake chat model in an LCEL chain (invoke, stream, async, batch), and a real ``ChatOpenAI``
against the OpenAI-protocol server (tests/openai_stub.py)."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, sample, stage_count
from tests.openai_stub import OpenAIStub, stream_reply, usage_chat_reply
from tests.servers import require_package
from tests.test_watch import expected_cost

require_package("langchain_core")
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402

from ragwatch.integrations.langchain import AsyncRagwatchCallbackHandler, RagwatchCallbackHandler  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_openai_clients")  # SDK clients closed after each test

MODEL = "gpt-4o-mini"
ANSWER = "Hotels are capped at 600 CNY per night."
DOCS = [
    Document("Hotels up to 600 CNY per night.", id="hotel", metadata={"score": 0.91, "source": "policy.pdf"}),
    Document("Taxis are reimbursed with receipts.", id="taxi", metadata={"relevance_score": 0.42}),
]


class PolicyRetriever(BaseRetriever):
    fail: bool = False

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        if self.fail:
            raise ConnectionError("vector store down")
        return list(DOCS)


def billed_message() -> AIMessage:
    return AIMessage(
        ANSWER,
        usage_metadata={
            "input_tokens": 1200,
            "output_tokens": 7,
            "total_tokens": 1207,
            "input_token_details": {"cache_read": 1024},
        },
        response_metadata={"model_name": MODEL},
    )


def make_chain(model: Any, retriever: BaseRetriever | None = None) -> Any:
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from: {context}"), ("human", "{question}")])

    def context(docs: list[Document]) -> str:
        return "\n".join(d.page_content for d in docs)

    return (
        {"context": (retriever or PolicyRetriever()) | context, "question": RunnablePassthrough()}
        | prompt
        | model
        | StrOutputParser()
    )


def test_invoke_is_one_run_with_chunks_scores_usage_and_spans(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, runs: list[ragwatch.Run]
) -> None:
    chain = make_chain(GenericFakeChatModel(messages=iter([billed_message()])))
    handler = RagwatchCallbackHandler(rw)

    assert chain.invoke("How much for hotels?", config={"callbacks": [handler]}) == ANSWER

    (run,) = runs
    assert run.question == "How much for hotels?" and run.answer == ANSWER and run.outcome == "ok"
    assert [(c.id, c.rank, c.score) for c in run.chunks] == [("hotel", 1, 0.91), ("taxi", 2, 0.42)]
    assert run.model == MODEL
    assert run.usage == ragwatch.Usage(1200, 7, 1024)
    assert run.cost_usd == pytest.approx(expected_cost(MODEL, 1200, 7, 1024))
    for stage in ("request", "retrieve", "generate"):
        assert stage_count(registry, stage) == 1
    tokens = "ragwatch_tokens_total"
    assert sample(registry, tokens, service="svc", model=MODEL, kind="cached_input", source="reported") == 1024
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source="reported")
    assert cost == pytest.approx(run.cost_usd)

    root, retrieval, chat = spans.named("rag svc"), spans.named("retrieval"), spans.named("chat")
    assert run.trace_id == format(root.context.trace_id, "032x")
    for child in (retrieval, chat):
        assert child.parent is not None and child.parent.span_id == root.context.span_id
    assert retrieval.attributes["ragwatch.retrieval.chunk_ids"] == ("hotel", "taxi")
    assert retrieval.attributes["ragwatch.retrieval.chunk_scores"] == (0.91, 0.42)
    assert chat.attributes["gen_ai.response.model"] == MODEL
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 1024
    assert handler._roots == {} and handler._calls == {}  # nothing left behind


def test_stream_records_ttft_and_the_streamed_answer(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run]
) -> None:
    chain = make_chain(GenericFakeChatModel(messages=iter([ANSWER])))
    parts = list(chain.stream("How much for hotels?", config={"callbacks": [RagwatchCallbackHandler(rw)]}))
    assert "".join(parts) == ANSWER and len(parts) > 1
    (run,) = runs
    assert run.answer == ANSWER and run.ttft is not None and run.ttft > 0
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model="unknown") == 1
    # the fake model streams no usage: the tokens are estimated, and marked so
    assert run.usage is not None and run.usage.estimated
    assert run.usage.output_tokens == ragwatch.capture.responses.estimate_tokens(ANSWER)


@pytest.mark.parametrize("handler_class", [RagwatchCallbackHandler, AsyncRagwatchCallbackHandler])
async def test_concurrent_async_invocations_keep_their_own_runs(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run], handler_class: Any
) -> None:
    handler = handler_class(rw)
    questions = [f"question {i}" for i in range(5)]
    chain = make_chain(GenericFakeChatModel(messages=iter([f"answer to {q}" for q in questions])))
    answers = await asyncio.gather(*(chain.ainvoke(q, config={"callbacks": [handler]}) for q in questions))
    assert sorted(answers) == sorted(f"answer to {q}" for q in questions)
    assert sorted(r.question for r in runs) == questions
    assert all(r.answer == f"answer to {r.question}" for r in runs)  # each run got its own generation
    assert all([c.id for c in r.chunks] == ["hotel", "taxi"] for r in runs)
    assert stage_count(registry, "request") == 5 and stage_count(registry, "generate") == 5


async def test_astream(rw: ragwatch.RagWatch, runs: list[ragwatch.Run]) -> None:
    chain = make_chain(GenericFakeChatModel(messages=iter([ANSWER])))
    parts = [p async for p in chain.astream("q", config={"callbacks": [AsyncRagwatchCallbackHandler(rw)]})]
    assert "".join(parts) == ANSWER
    (run,) = runs
    assert run.ttft is not None and run.answer == ANSWER


def test_batch_is_one_run_per_input(rw: ragwatch.RagWatch, runs: list[ragwatch.Run]) -> None:
    chain = make_chain(GenericFakeChatModel(messages=iter(["a1", "a2", "a3"])))
    chain.batch(["q1", "q2", "q3"], config={"callbacks": [RagwatchCallbackHandler(rw)]})
    assert sorted(r.question for r in runs) == ["q1", "q2", "q3"]


def test_a_failing_retriever_fails_the_run_and_the_error_reaches_the_caller(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run]
) -> None:
    chain = make_chain(GenericFakeChatModel(messages=iter([ANSWER])), PolicyRetriever(fail=True))
    with pytest.raises(ConnectionError):
        chain.invoke("q", config={"callbacks": [RagwatchCallbackHandler(rw)]})
    (run,) = runs
    assert run.outcome == "error" and run.error == "ConnectionError"
    assert stage_count(registry, "retrieve", "error") == 1 and stage_count(registry, "request", "error") == 1


def test_inside_a_watched_pipeline_the_chain_joins_its_run(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run]
) -> None:
    chain = make_chain(GenericFakeChatModel(messages=iter([billed_message()])))
    handler = RagwatchCallbackHandler(rw)

    @rw.pipeline
    def answer(question: str) -> str:
        return chain.invoke(question, config={"callbacks": [handler]})

    assert answer("How much for hotels?") == ANSWER
    (run,) = runs  # one request, not two
    assert run.usage == ragwatch.Usage(1200, 7, 1024) and [c.id for c in run.chunks] == ["hotel", "taxi"]
    assert stage_count(registry, "request") == 1


def test_unreadable_documents_are_counted_not_raised(rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    handler = RagwatchCallbackHandler(rw)
    chain_id, retriever_id = uuid4(), uuid4()
    handler.on_llm_end(object(), run_id=uuid4())  # the end of a step it never saw start: ignored
    handler.on_chain_start({}, {"question": "q"}, run_id=chain_id)
    handler.on_retriever_start({}, "q", run_id=retriever_id, parent_run_id=chain_id)
    handler.on_retriever_end([object()], run_id=retriever_id)  # no text anywhere: not a chunk
    handler.on_chain_end({"answer": "a"}, run_id=chain_id)
    assert sample(registry, "ragwatch_internal_errors_total", component="chunks") == 1
    assert stage_count(registry, "request") == 1 and stage_count(registry, "retrieve") == 1


@pytest.mark.parametrize("streaming", [False, True])
def test_real_chat_openai_usage_and_model(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    runs: list[ragwatch.Run],
    stub: OpenAIStub,
    streaming: bool,
) -> None:
    langchain_openai = require_package("langchain_openai")
    if streaming:
        stub.script(stream_reply(["600 ", "CNY."], input_tokens=1200, output_tokens=7, cached_tokens=1024, model=MODEL))
    else:
        stub.script(usage_chat_reply("600 CNY.", input_tokens=1200, output_tokens=7, cached_tokens=1024, model=MODEL))
    llm = langchain_openai.ChatOpenAI(
        model=MODEL, api_key="test", base_url=stub.url, max_retries=0, streaming=streaming, stream_usage=True
    )
    chain = make_chain(llm)
    config = {"callbacks": [RagwatchCallbackHandler(rw)]}
    result = (
        "".join(chain.stream("How much for hotels?", config=config)) if streaming else chain.invoke("q", config=config)
    )
    assert result == "600 CNY."
    (run,) = runs
    assert run.model == MODEL and run.usage == ragwatch.Usage(1200, 7, 1024)
    assert run.cost_usd == pytest.approx(expected_cost(MODEL, 1200, 7, 1024))
    assert (run.ttft is not None) == streaming
    assert (
        sample(registry, "ragwatch_tokens_total", service="svc", model=MODEL, kind="input", source="reported") == 1200
    )


def test_a_callback_that_breaks_is_counted_and_the_others_carry_on(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run]
) -> None:
    handler = RagwatchCallbackHandler(rw)
    handler.on_chain_start({}, {"question": "q"}, run_id="not a UUID")  # type: ignore[arg-type]
    handler.on_llm_new_token("x", run_id=None)  # type: ignore[arg-type]
    assert sample(registry, "ragwatch_internal_errors_total", component="capture") == 2
    chain = make_chain(GenericFakeChatModel(messages=iter([ANSWER])))
    assert chain.invoke("q", config={"callbacks": [handler]}) == ANSWER
    assert [r.answer for r in runs] == [ANSWER]
