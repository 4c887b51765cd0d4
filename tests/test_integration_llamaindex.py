"""``ragwatch.integrations.llamaindex`` with real llama-index-core: a ``VectorStoreIndex`` over
``MockEmbedding``, queried through query engines with ``MockLLM`` (nothing is downloaded: the mock models
need no weights, and llama-index-core ships the tokenizer files it uses)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import Spans, sample, stage_count
from tests.servers import require_package
from tests.test_watch import expected_cost

require_package("llama_index.core")
from llama_index.core import Document, VectorStoreIndex  # noqa: E402
from llama_index.core.base.llms.types import CompletionResponse  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402

from ragwatch.integrations.llamaindex import instrument, uninstrument  # noqa: E402

MOCK_ANSWER = " ".join(["text"] * 8)  # what MockLLM(max_tokens=8) answers


class BilledLLM(MockLLM):
    """A MockLLM whose response carries an OpenAI-style raw payload, as the OpenAI LLM class's does."""

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        usage = {"prompt_tokens": 1200, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 1024}}
        return CompletionResponse(text="600 CNY.", raw={"model": "gpt-4o-mini", "usage": usage})


class BrokenLLM(MockLLM):
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise ConnectionError("model server down")


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    docs = [Document(text="Hotels up to 600 CNY per night.", id_="hotel"), Document(text="Taxis need receipts.")]
    return VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))


@pytest.fixture
def runs(runs: list[ragwatch.Run], rw: ragwatch.RagWatch) -> Iterator[list[ragwatch.Run]]:
    """The runs ``rw`` finishes (conftest's fixture), with LlamaIndex instrumented for the test."""
    handler = instrument(rw)
    yield runs
    uninstrument(handler)


def test_query_is_one_run_with_nodes_answer_and_spans(
    index: VectorStoreIndex, rw: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans, runs: list[Any]
) -> None:
    engine = index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=2)
    assert str(engine.query("How much for hotels?")) == MOCK_ANSWER
    (run,) = runs
    assert run.question == "How much for hotels?" and run.answer == MOCK_ANSWER and run.outcome == "ok"
    assert run.usage is not None and run.usage.estimated  # MockLLM reports no usage
    for stage in ("request", "retrieve", "generate"):
        assert stage_count(registry, stage) == 1
    root = spans.named("rag svc")
    assert run.trace_id == format(root.context.trace_id, "032x")
    children = [s for s in spans.all() if s is not root]
    assert sorted(s.name for s in children) == ["chat unknown", "embeddings unknown", "retrieval"]  # query embedded
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in children)
    nodes = index.as_retriever(similarity_top_k=2).retrieve("How much for hotels?")
    assert [(c.id, c.rank, c.score) for c in run.chunks] == [
        (n.node.node_id, i, n.score) for i, n in enumerate(nodes, 1)
    ]
    assert all(c.score is not None for c in run.chunks)


def test_reported_usage_in_the_raw_response(
    index: VectorStoreIndex, rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[Any]
) -> None:
    engine = index.as_query_engine(llm=BilledLLM(), similarity_top_k=1)
    assert str(engine.query("How much?")) == "600 CNY."
    (run,) = runs
    assert run.model == "gpt-4o-mini" and run.usage == ragwatch.Usage(1200, 7, 1024)
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model="gpt-4o-mini", source="reported")
    assert cost == pytest.approx(expected_cost("gpt-4o-mini", 1200, 7, 1024))


def test_a_streamed_answer_keeps_the_run_open_until_it_is_read(
    index: VectorStoreIndex, rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[Any]
) -> None:
    engine = index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=2, streaming=True)
    response = engine.query("How much?")
    assert runs == [] and stage_count(registry, "request") == 0  # the query returned; its answer has not
    assert "".join(response.response_gen) == MOCK_ANSWER
    (run,) = runs
    assert run.answer == MOCK_ANSWER and run.ttft is not None and run.ttft > 0
    assert sample(registry, "ragwatch_time_to_first_token_seconds_count", service="svc", model="unknown") == 1
    assert stage_count(registry, "request") == 1


async def test_concurrent_async_queries_keep_their_own_runs(
    index: VectorStoreIndex, rw: ragwatch.RagWatch, runs: list[Any]
) -> None:
    engine = index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=1)
    questions = [f"question {i}" for i in range(4)]
    await asyncio.gather(*(engine.aquery(q) for q in questions))
    assert sorted(r.question for r in runs) == questions
    assert all(r.answer == MOCK_ANSWER and len(r.chunks) == 1 for r in runs)


def test_a_failing_query_is_an_error_run_and_the_error_reaches_the_caller(
    index: VectorStoreIndex, rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[Any]
) -> None:
    engine = index.as_query_engine(llm=BrokenLLM(), similarity_top_k=1)
    with pytest.raises(ConnectionError):
        engine.query("How much?")
    (run,) = runs
    assert run.outcome == "error" and run.error == "ConnectionError"
    assert stage_count(registry, "request", "error") == 1
    assert ragwatch.current_run() is None  # the query's run is no longer current


def test_inside_a_watched_pipeline_the_query_joins_its_run(
    index: VectorStoreIndex, rw: ragwatch.RagWatch, registry: CollectorRegistry, runs: list[Any]
) -> None:
    engine = index.as_query_engine(llm=BilledLLM(), similarity_top_k=1)

    @rw.pipeline
    def answer(question: str) -> str:
        return str(engine.query(question))

    assert answer("How much?") == "600 CNY."
    (run,) = runs
    assert run.usage == ragwatch.Usage(1200, 7, 1024) and len(run.chunks) == 1
    assert stage_count(registry, "request") == 1
