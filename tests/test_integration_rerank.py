"""The ``rerank`` and ``embed`` stages (issue 30, items 6 and 7): ``@rw.reranker`` and ``@rw.embedder``,
LangChain's retriever-around-a-retriever (the shape of ``ContextualCompressionRetriever``), LlamaIndex node
postprocessors and embedding events. What the LLM receives — the reranked list — is the run's chunks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, sample, stage_count
from tests.servers import require_package

require_package("langchain_core")
require_package("llama_index.core")
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core import Document as LlamaDocument  # noqa: E402
from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402

from ragwatch.integrations import llamaindex  # noqa: E402
from ragwatch.integrations.langchain import RagwatchCallbackHandler  # noqa: E402
from tests.test_integration_langchain import ANSWER, PolicyRetriever, make_chain  # noqa: E402


def chunks_observed(registry: CollectorRegistry) -> tuple[float, float]:
    """(count, sum) of ``ragwatch_retrieved_chunks``: the retriever's lists only."""
    return (
        sample(registry, "ragwatch_retrieved_chunks_count", service="svc"),
        sample(registry, "ragwatch_retrieved_chunks_sum", service="svc"),
    )


def test_the_reranker_decorator_is_a_stage_and_its_list_is_what_is_scored(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, runs: list[ragwatch.Run]
) -> None:
    found = [{"id": "taxi", "text": "Taxis need receipts."}, {"id": "hotel", "text": "Hotels up to 600 CNY."}]

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return found

    @rw.reranker
    def rerank(question: str, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [c for c in chunks if "Hotel" in c["text"]]

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, context: Any) -> str:
        return "Hotels up to 600 CNY."

    @rw.pipeline
    def answer(question: str) -> str:
        return generate(question, rerank(question, retrieve(question)))

    answer("How much for hotels?")
    (run,) = runs
    assert [c.id for c in run.chunks] == ["hotel"]  # what the LLM received: context precision is scored on it
    assert [c["id"] for c in run.candidates] == ["taxi", "hotel"]
    assert stage_count(registry, "rerank") == 1 and stage_count(registry, "retrieve") == 1
    assert chunks_observed(registry) == (1, 2)  # the retriever's two, not the reranker's one as well
    span = spans.named("rerank")
    assert span.attributes["ragwatch.rerank.input_count"] == 2 and span.attributes["ragwatch.rerank.output_count"] == 1
    assert span.attributes["ragwatch.rerank.input_chunk_ids"] == ("taxi", "hotel")
    assert span.attributes["ragwatch.retrieval.chunk_ids"] == ("hotel",)


def test_the_reranker_decorator_without_tracing(registry: CollectorRegistry) -> None:
    rw = ragwatch.RagWatch("svc", registry=registry, tracing=False)
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)

    @rw.reranker
    def rerank(question: str, chunks: list[str]) -> list[str]:
        return chunks[::-1][:1]

    with rw.request("q"):
        rerank("q", chunks=["a", "b"])
    (run,) = runs
    assert run.candidates == ["a", "b"] and [c.text for c in run.chunks] == ["b"]
    assert stage_count(registry, "rerank") == 1


class CompressionRetriever(BaseRetriever):
    """What ``ContextualCompressionRetriever`` does: a base retriever's documents, compressed."""

    base_retriever: BaseRetriever

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        docs = self.base_retriever.invoke(query, config={"callbacks": run_manager.get_child()})
        return [d for d in docs if d.id == "hotel"]


def test_a_langchain_retriever_around_a_retriever_is_retrieve_then_rerank(
    rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, runs: list[ragwatch.Run]
) -> None:
    chain = make_chain(
        GenericFakeChatModel(messages=iter([ANSWER])), CompressionRetriever(base_retriever=PolicyRetriever())
    )
    handler = RagwatchCallbackHandler(rw)
    assert chain.invoke("How much for hotels?", config={"callbacks": [handler]}) == ANSWER
    (run,) = runs
    assert stage_count(registry, "retrieve") == 1 and stage_count(registry, "rerank") == 1  # not retrieve twice
    assert [c.id for c in run.chunks] == ["hotel"] and [d.id for d in run.candidates] == ["hotel", "taxi"]
    assert chunks_observed(registry) == (1, 2)
    assert spans.named("rerank").attributes["gen_ai.operation.name"] == "rerank"
    assert handler._calls == {} and handler._roots == {}


class KeepTop(BaseNodePostprocessor):
    def _postprocess_nodes(self, nodes: list[Any], query_bundle: Any = None) -> list[Any]:
        return sorted(nodes, key=lambda n: n.node.get_content())[:1]


@pytest.fixture
def instrumented(rw: ragwatch.RagWatch) -> Iterator[ragwatch.RagWatch]:
    handler = llamaindex.instrument(rw)
    yield rw
    llamaindex.uninstrument(handler)


def test_llamaindex_node_postprocessors_are_a_rerank_and_embeddings_an_embed_stage(
    instrumented: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run]
) -> None:
    docs = [LlamaDocument(text="Taxis need receipts."), LlamaDocument(text="Hotels up to 600 CNY per night.")]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    embedded_before = stage_count(registry, "embed")  # the index embedded its documents (outside any run)
    assert embedded_before >= 1
    engine = index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=2, node_postprocessors=[KeepTop()])
    engine.query("How much for hotels?")
    (run,) = [r for r in runs if r.question == "How much for hotels?"]
    assert [c.text for c in run.chunks] == ["Hotels up to 600 CNY per night."]  # what the LLM saw
    assert len(run.candidates) == 2
    assert stage_count(registry, "rerank") == 1 and stage_count(registry, "retrieve") == 1
    assert stage_count(registry, "embed") == embedded_before + 1  # the question's embedding
    assert "embed" in run.durations
    estimated = sample(
        registry, "ragwatch_tokens_total", service="svc", model="unknown", kind="input", source="estimated"
    )
    assert estimated > 0


def test_llamaindex_without_postprocessors_records_no_rerank(
    instrumented: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[ragwatch.Run]
) -> None:
    index = VectorStoreIndex.from_documents([LlamaDocument(text="Hotels.")], embed_model=MockEmbedding(embed_dim=8))
    index.as_query_engine(llm=MockLLM(max_tokens=8)).query("How much for hotels?")
    assert stage_count(registry, "rerank") == 0
    assert [r.candidates for r in runs] == [None]


def test_the_embedder_decorator(registry: CollectorRegistry) -> None:
    rw = ragwatch.RagWatch("svc", registry=registry, tracing=False)

    @rw.embedder(model="text-embedding-3-small")
    def embed(input: list[str]) -> dict[str, Any]:
        return {"data": [[0.1]] * len(input), "usage": {"prompt_tokens": 30, "total_tokens": 30}}

    embed(input=["a", "b"])
    assert stage_count(registry, "embed") == 1
    labels = {"service": "svc", "model": "text-embedding-3-small", "kind": "input", "source": "reported"}
    assert sample(registry, "ragwatch_tokens_total", **labels) == 30
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model="text-embedding-3-small", source="reported")
    assert cost == pytest.approx(30 * 0.02 / 1e6)
