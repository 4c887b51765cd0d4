"""Call styles of LlamaIndex a RAG team uses beyond the plain ``query``, with real llama-index-core: a
``RetrieverQueryEngine`` built by hand with a node postprocessor, called four ways; an async streamed answer
read through ``async_response_gen()`` by a task that is cancelled half way (a client disconnecting); and
``as_chat_engine(chat_mode="condense_question")``, whose turns run a query engine inside the chat engine and,
from the second turn on, an LLM call that rewrites the question; ``context`` and ``condense_plus_context`` chat
engines with a node postprocessor, on their own and inside a watched pipeline; and a streamed response returned
by a watched pipeline, read after it returned. Each is one run per request with its chunks,
answer, tokens and outcome, and the handler keeps nothing once the request is over."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import sample, stage_count, wait_for
from tests.servers import require_package

require_package("llama_index.core")
from llama_index.core import Document, VectorStoreIndex, get_response_synthesizer  # noqa: E402
from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseAsyncGen  # noqa: E402
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402
from llama_index.core.memory import ChatMemoryBuffer  # noqa: E402
from llama_index.core.postprocessor import SimilarityPostprocessor  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine, SubQuestionQueryEngine  # noqa: E402
from llama_index.core.question_gen.types import BaseQuestionGenerator, SubQuestion  # noqa: E402
from llama_index.core.retrievers import BaseRetriever, QueryFusionRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.core.tools import QueryEngineTool, ToolMetadata  # noqa: E402

from ragwatch.integrations.llamaindex import RagwatchEventHandler, instrument, uninstrument  # noqa: E402
from tests.test_integration_llamaindex import BilledLLM  # noqa: E402
from tests.test_integration_llamaindex_agents import FINAL, Shelf, agent_model, ask  # noqa: E402
from tests.test_llamaindex_abandoned_stream import kept  # noqa: E402

QUESTION = "How much for hotels?"
WORDS = ("Hotels ", "up ", "to ", "600 ", "CNY.")


@pytest.fixture
def handler(rw: ragwatch.RagWatch) -> Iterator[RagwatchEventHandler]:
    handler = instrument(rw)
    yield handler
    uninstrument(handler)


class TwoHits(BaseRetriever):
    """A close hit and a weak one: a similarity cut-off keeps only the first."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(text="Hotels up to 600 CNY per night.", id_="hotel"), score=0.9),
            NodeWithScore(node=TextNode(text="Taxis need receipts.", id_="taxi"), score=0.2),
        ]


class SlowStreamLLM(MockLLM):
    """An async streaming LLM that takes a while between tokens, as a model server does."""

    @llm_completion_callback()
    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseAsyncGen:
        async def gen() -> CompletionResponseAsyncGen:
            text = ""
            for word in WORDS:
                text += word
                yield CompletionResponse(text=text, delta=word)
                await asyncio.sleep(0.05)

        return gen()


@pytest.mark.parametrize("how", ["query", "aquery", "stream", "astream"])
async def test_a_hand_built_engine_with_a_postprocessor_is_one_run_on_the_kept_nodes(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    how: str,
) -> None:
    streaming = how.endswith("stream")
    engine = RetrieverQueryEngine(
        retriever=TwoHits(),
        response_synthesizer=get_response_synthesizer(llm=BilledLLM(), streaming=streaming),
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.5)],
    )
    if how == "query":
        answer = str(engine.query(QUESTION))
    elif how == "aquery":
        answer = str(await engine.aquery(QUESTION))
    elif how == "stream":
        answer = "".join(engine.query(QUESTION).response_gen)
    else:
        response = await engine.aquery(QUESTION)
        answer = "".join([t async for t in response.async_response_gen()])
    (run,) = runs
    assert run.question == QUESTION and run.outcome == "ok" and run.answer == answer
    assert [(c.id, c.rank, c.score) for c in run.chunks] == [("hotel", 1, 0.9)]  # what the LLM saw
    assert stage_count(registry, "rerank") == 1 and stage_count(registry, "retrieve") == 1
    assert stage_count(registry, "generate") == 1 and stage_count(registry, "request") == 1
    assert run.usage is not None
    if streaming:  # BilledLLM streams MockLLM's echo, with no usage: estimated from the prompt and deltas
        assert run.usage.estimated and run.usage.output_tokens > 0
    else:
        assert run.usage == ragwatch.Usage(1200, 7, 1024)
    assert ragwatch.current_run() is None and kept(handler) == {}


async def test_an_async_streamed_answer_whose_reader_is_cancelled_is_a_cancelled_run(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
) -> None:
    engine = RetrieverQueryEngine.from_args(Shelf(), llm=SlowStreamLLM(), streaming=True)
    shown: list[str] = []

    async def respond() -> None:  # an endpoint streaming the answer to a client
        response = await engine.aquery(QUESTION)
        async for token in response.async_response_gen():
            shown.append(token)

    task = asyncio.create_task(respond())
    await asyncio.sleep(0.08)  # two tokens in
    task.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await task
    gc.collect()
    assert shown and len(shown) < len(WORDS)
    (run,) = runs
    assert run.outcome == "cancelled" and run.error == "CancelledError"
    assert run.question == QUESTION and run.answer == "".join(shown) and [c.id for c in run.chunks] == ["hotel"]
    assert run.usage is not None and run.usage.output_tokens > 0
    assert stage_count(registry, "generate", "cancelled") == 1 and stage_count(registry, "request", "cancelled") == 1
    assert stage_count(registry, "generate") == 0 and stage_count(registry, "request") == 0
    await asyncio.sleep(0.1)  # nothing more is recorded when the LLM's generator is closed
    assert len(runs) == 1 and kept(handler) == {}


@pytest.mark.parametrize("method", ["chat", "achat", "stream_chat", "astream_chat"])
async def test_a_condense_question_chat_is_one_run_per_turn_asked_by_the_users_message(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    method: str,
) -> None:
    docs = [Document(text="Hotels up to 600 CNY per night.", id_="hotel")]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    memory = ChatMemoryBuffer.from_defaults(token_limit=2000)  # the default one never closes its database
    engine = index.as_chat_engine(chat_mode="condense_question", llm=BilledLLM(), memory=memory, similarity_top_k=1)
    questions = ["How much for hotels?", "And for taxis?"]
    answers = []
    for question in questions:
        answers.append(await ask(engine, method, question))
        wait_for(lambda: len(runs) == len(answers))  # a streamed turn ends in the thread writing the history
    # the second turn's question is the user's, not the one the LLM rewrote it into for the query engine
    assert [r.question for r in runs] == questions
    assert [r.answer for r in runs] == answers and all(r.outcome == "ok" for r in runs)
    assert all([c.id for c in r.chunks] == [index.as_retriever().retrieve("x")[0].node.node_id] for r in runs)
    # the rewrite (BilledLLM's reported usage) is the second turn's generation: three in all
    assert stage_count(registry, "generate") == 3 and stage_count(registry, "request") == 2
    first, second = (r.usage for r in runs)
    assert first is not None and second is not None
    if "stream" in method:  # BilledLLM streams MockLLM's echo, with no usage: estimated, plus the rewrite's
        assert first.cached_input_tokens == 0 and second.cached_input_tokens == 1024 and second.estimated
    else:
        assert first == ragwatch.Usage(1200, 7, 1024) and second == ragwatch.Usage(2400, 14, 2048)
    assert kept(handler) == {}


def postprocessed_chat(mode: str) -> Any:
    """A chat engine over :class:`TwoHits` whose similarity cut-off keeps only the close hit."""
    engine_class = ContextChatEngine if mode == "context" else CondensePlusContextChatEngine
    return engine_class.from_defaults(
        retriever=TwoHits(),
        llm=BilledLLM(),
        memory=ChatMemoryBuffer.from_defaults(token_limit=2000),  # the default one never closes its database
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=0.5)],
    )


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
@pytest.mark.parametrize("method", ["chat", "achat", "stream_chat", "astream_chat"])
async def test_a_chat_turns_postprocessors_are_its_rerank_and_its_chunks_what_the_llm_saw(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    mode: str,
    method: str,
) -> None:
    """A chat engine hands the nodes its postprocessors kept to its synthesizer, as a query engine does, but
    its turn is no query: the cut was not recorded, and the turn's chunks were the retriever's whole list —
    faithfulness judged against a chunk the LLM never saw, Context Precision scored before the cut."""
    answer = await ask(postprocessed_chat(mode), method, QUESTION)
    wait_for(lambda: len(runs) == 1)  # a streamed turn ends in the thread writing the history
    (run,) = runs
    assert run.question == QUESTION and run.answer == answer and run.outcome == "ok"
    assert [(c.id, c.rank, c.score) for c in run.chunks] == [("hotel", 1, 0.9)]
    assert [n.node.node_id for n in run.candidates] == ["hotel", "taxi"]  # the list the cut-off was given
    assert stage_count(registry, "retrieve") == 1 and stage_count(registry, "rerank") == 1
    assert kept(handler) == {}


@pytest.mark.parametrize("method", ["chat", "achat"])
async def test_a_chat_turn_inside_a_watched_pipeline_records_its_rerank_in_the_pipelines_run(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    method: str,
) -> None:
    """The same turn called from ``@rw.pipeline`` (a web endpoint) joins the pipeline's run: the cut is that
    run's rerank."""
    engine = postprocessed_chat("context")

    @rw.pipeline
    async def respond(question: str) -> str:
        return await ask(engine, method, question)

    await respond(QUESTION)
    (run,) = runs
    assert [c.id for c in run.chunks] == ["hotel"] and stage_count(registry, "rerank") == 1


class SlowHits(TwoHits):
    """:class:`TwoHits` from an index that takes a while to answer."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        time.sleep(SLOW)
        return super()._retrieve(query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        await asyncio.sleep(SLOW)
        return super()._retrieve(query_bundle)


class MealHits(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text="Meals up to 100 CNY a day.", id_="meal"), score=0.7)]


class NoHits(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return []


SLOW = 0.3


@pytest.mark.parametrize("how", ["query", "aquery"])
async def test_a_fusion_retriever_is_its_inner_retrievals_then_a_rerank(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    how: str,
) -> None:
    """``QueryFusionRetriever`` (hybrid search: several retrievers, their lists fused) runs its retrievers
    inside its own ``retrieve``. Each was a retrieval and so was the fusion around them: ``retrieve`` counted
    three times for two indexes, the outer one's time holding the inner ones'. Now the inner retrievals are
    ``retrieve`` and the fusion a ``rerank`` of their lists, timed from the last one's end."""
    fusion = QueryFusionRetriever(
        [SlowHits(), MealHits()],
        num_queries=1,
        mode="reciprocal_rerank",
        similarity_top_k=2,
        use_async=how == "aquery",
        llm=MockLLM(),
    )
    engine = RetrieverQueryEngine.from_args(fusion, llm=BilledLLM())
    response = engine.query(QUESTION) if how == "query" else await engine.aquery(QUESTION)
    (run,) = runs
    assert [c.id for c in run.chunks] == [n.node.node_id for n in response.source_nodes]  # what the LLM saw
    assert len(run.chunks) == 2 and {n.node.node_id for n in run.candidates} == {"hotel", "taxi", "meal"}
    assert stage_count(registry, "retrieve") == 2 and stage_count(registry, "rerank") == 1
    took = {
        stage: sample(registry, "ragwatch_stage_duration_seconds_sum", service="svc", stage=stage, outcome="ok")
        for stage in ("retrieve", "rerank")
    }
    assert took["retrieve"] >= SLOW and took["rerank"] < SLOW  # the slow index is retrieval time, not fusion's
    assert kept(handler) == {}


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
async def test_an_agents_fusion_tool_adds_its_fused_list_to_what_it_retrieved_before(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run], handler: RagwatchEventHandler
) -> None:
    """An agent's retrievals add up; a fusion retriever's inner retrievals replace the run's list as they end,
    so its fused list must be added to what the agent had retrieved before it began, not to its own parts."""
    fusion = QueryFusionRetriever(
        [Shelf(), NoHits()], num_queries=1, mode="reciprocal_rerank", use_async=False, llm=MockLLM()
    )
    engine = RetrieverQueryEngine.from_args(fusion, llm=MockLLM(max_tokens=8))
    tool = QueryEngineTool.from_defaults(engine, name="policy", description="The travel policy.")
    agent = FunctionAgent(tools=[tool], llm=MockFunctionCallingLLM(response_generator=agent_model))
    assert str(await agent.run(user_msg="How much for hotels, and what about taxis?")) == FINAL
    (run,) = runs
    assert [c.id for c in run.chunks] == ["hotel", "taxi"]  # one per tool call, both kept
    assert stage_count(registry, "retrieve") == 4 and stage_count(registry, "rerank") == 2
    assert kept(handler) == {}


class TwoSubQuestions(BaseQuestionGenerator):
    """The sub-questions an LLM would ask the ``policy`` tool for a question on hotels and taxis."""

    def generate(self, tools: Any, query: QueryBundle) -> list[SubQuestion]:
        return [SubQuestion(sub_question=q, tool_name="policy") for q in ("hotel limits?", "taxi rules?")]

    async def agenerate(self, tools: Any, query: QueryBundle) -> list[SubQuestion]:
        return self.generate(tools, query)

    def _get_prompts(self) -> dict[str, Any]:
        return {}

    def _update_prompts(self, prompts: Any) -> None:
        pass


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_sub_question_engine_is_judged_against_every_sub_questions_chunks(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    use_async: bool,
) -> None:
    """``SubQuestionQueryEngine`` runs a query per sub-question and answers from all of their answers. Each
    sub-query's retrieval replaced the last, so the answer on hotels and taxis was judged against the taxi
    chunk alone (its hotel claims unsupported). A query's queries now add their chunks up, as an agent's tool
    calls do; the sub-answers the final synthesis reads are not chunks (nothing retrieved them)."""
    inner = RetrieverQueryEngine.from_args(Shelf(), llm=MockLLM(max_tokens=8))
    tool = QueryEngineTool(query_engine=inner, metadata=ToolMetadata(name="policy", description="Travel policy."))
    engine = SubQuestionQueryEngine.from_defaults(
        query_engine_tools=[tool], question_gen=TwoSubQuestions(), llm=MockLLM(max_tokens=8), use_async=use_async
    )
    response = await engine.aquery(QUESTION) if use_async else engine.query(QUESTION)
    (run,) = runs
    assert run.question == QUESTION and run.answer == str(response) and run.outcome == "ok"
    assert [c.id for c in run.chunks] == ["hotel", "taxi"]
    assert stage_count(registry, "retrieve") == 2 and stage_count(registry, "rerank") == 0
    assert stage_count(registry, "request") == 1 and kept(handler) == {}


def test_nodes_made_after_the_retrieval_are_no_rerank(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run], handler: RagwatchEventHandler
) -> None:
    """A pipeline that hands its synthesizer nodes it wrote itself (summaries of what it retrieved) did not cut
    the retrieval: the run's chunks stay what was retrieved, and no rerank is recorded."""
    synthesizer = get_response_synthesizer(llm=BilledLLM())

    @rw.pipeline
    def respond(question: str) -> str:
        found = TwoHits().retrieve(question)
        digest = [NodeWithScore(node=TextNode(text="Hotels: 600 CNY.", id_="digest"), score=1.0)]
        assert [n.node.node_id for n in found] == ["hotel", "taxi"]
        return str(synthesizer.synthesize(question, digest))

    respond(QUESTION)
    (run,) = runs
    assert [c.id for c in run.chunks] == ["hotel", "taxi"] and stage_count(registry, "rerank") == 0


@pytest.mark.parametrize("how", ["stream", "astream", "dropped"])
async def test_a_streamed_query_returned_by_a_watched_pipeline_lands_its_answer_in_the_pipelines_run(
    rw: ragwatch.RagWatch,
    registry: CollectorRegistry,
    runs: list[ragwatch.Run],
    handler: RagwatchEventHandler,
    how: str,
) -> None:
    """``@rw.pipeline`` returning LlamaIndex's streaming response itself (an endpoint handing it to the web
    framework): the query joins the pipeline's run, and its LLM runs only as the answer is read, after the
    pipeline returned. That run waits for the answer and gets its generation, answer and tokens (before: the
    run went to the listeners with no answer, and the generation was recorded outside any run). Dropped half
    read, the run still reaches the listeners, ``cancelled`` with what was read."""
    engine = RetrieverQueryEngine.from_args(TwoHits(), llm=BilledLLM(), streaming=True)

    @rw.pipeline
    def respond(question: str) -> Any:
        return engine.query(question)

    @rw.pipeline
    async def arespond(question: str) -> Any:
        return await engine.aquery(question)

    if how == "astream":
        response = await arespond(QUESTION)
        assert runs == []  # the answer is not read yet
        answer = "".join([t async for t in response.async_response_gen()])
    else:
        response = respond(QUESTION)
        assert runs == []
        gen = response.response_gen
        if how == "stream":
            answer = "".join(gen)
        else:
            answer = next(gen)
            del response, gen
            gc.collect()
    (run,) = runs
    assert run.question == QUESTION and [c.id for c in run.chunks] == ["hotel", "taxi"]
    assert run.answer == answer and run.usage is not None and run.usage.output_tokens > 0
    assert run.outcome == "ok"  # the request itself returned; the answer's stream is its generation
    generate = "cancelled" if how == "dropped" else "ok"
    assert stage_count(registry, "generate", generate) == 1 and stage_count(registry, "request") == 1
    assert ragwatch.current_run() is None and kept(handler) == {}
