"""LlamaIndex with its own OpenAI-compatible LLM class (issue 30, item 9): ``OpenAILike`` from
``llama-index-llms-openai-like`` pointed at the local OpenAI-protocol server (tests/openai_stub.py), every
framework instrumented with ``ragwatch.instrument(rw)``, every request sampled and scored in process.

That package requires ``openai<3`` while ragwatch's test extra resolves openai 3.x, so it cannot live in the
main test environment (installing it there would silently downgrade openai). ``scripts/test.sh`` builds a
second virtualenv, ``.venv-llamaindex-openai``, from the pinned set in
``scripts/constraints-llamaindex-openai.txt`` and runs this module there as a phase of its own, with
``LLAMAINDEX_OPENAI_VENV=1``: there a missing class fails the run. In the main environment the module skips.

What is checked is what a team would look at: one run per request (a query, a streamed query, a chat engine
turn), its question, the chunks the LLM saw, the answer the server sent, the tokens and cost the server
reported — counted once although both the LlamaIndex and the openai integrations see the call —, and the
in-process score: a faithful answer passes, one with a falsified number is caught.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from tests.conftest import sample, stage_count, wait_for
from tests.openai_stub import OpenAIStub, Reply, stream_reply, usage_chat_reply
from tests.test_watch import expected_cost

try:
    from llama_index.llms.openai_like import OpenAILike
except ImportError:
    if os.environ.get("LLAMAINDEX_OPENAI_VENV") == "1":  # scripts/test.sh's own phase: it must run there
        pytest.fail("llama-index-llms-openai-like is not installed in this venv", pytrace=False)
    pytest.skip(
        "llama-index-llms-openai-like needs openai<3: scripts/test.sh runs this module in .venv-llamaindex-openai",
        allow_module_level=True,
    )
import openai
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

pytestmark = pytest.mark.usefixtures("close_openai_clients")  # the LLM's SDK clients closed after each test

MODEL = "gpt-4o-mini"
QUESTION = "How much are hotels reimbursed per night?"
POLICY = {
    "hotel": "Hotels are reimbursed up to 600 CNY per night.",
    "taxi": "Taxis are reimbursed with receipts.",
}
TRUE = "Hotels are reimbursed up to 600 CNY per night."
FALSIFIED = "Hotels are reimbursed up to 900 CNY per night."  # the number the policy does not say
#: the server's usage for every answer: 1,200 prompt tokens (1,024 of them cached), 11 completion tokens
USAGE = ragwatch.Usage(1200, 11, 1024)
COST = expected_cost(MODEL, 1200, 11, 1024)


class Shelf(BaseRetriever):
    """The two policy nodes, hotel first, with fixed scores: the chunks every run must show."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(text=POLICY["hotel"], id_="hotel"), score=0.92),
            NodeWithScore(node=TextNode(text=POLICY["taxi"], id_="taxi"), score=0.41),
        ]


def make_llm(stub: OpenAIStub, aclient: openai.AsyncOpenAI, **kwargs: Any) -> OpenAILike:
    """The LLM as a team configures it for a self-hosted OpenAI-compatible server. Its async client is the
    test's, closed on the test's event loop (the sync one it makes itself, closed by ``close_openai_clients``)."""
    return OpenAILike(
        model=MODEL,
        api_base=stub.url,
        api_key="test",
        is_chat_model=True,
        context_window=8192,
        max_retries=0,
        async_openai_client=aclient,
        **kwargs,
    )


def reply(answer: str) -> Reply:
    return usage_chat_reply(
        answer,
        input_tokens=USAGE.input_tokens,
        output_tokens=USAGE.output_tokens,
        cached_tokens=USAGE.cached_input_tokens,
        model=MODEL,
    )


def streamed(answer: str) -> Reply:
    """The answer streamed a word at a time, the usage in a last chunk (``include_usage``)."""
    first, *rest = answer.split(" ")
    deltas = [first, *(" " + word for word in rest)]
    return stream_reply(
        deltas,
        input_tokens=USAGE.input_tokens,
        output_tokens=USAGE.output_tokens,
        cached_tokens=USAGE.cached_input_tokens,
        model=MODEL,
    )


@pytest.fixture
def scoring(
    scoring: tuple[ragwatch.RagWatch, list[ragwatch.Run]],
) -> Iterator[tuple[ragwatch.RagWatch, list[ragwatch.Run]]]:
    """Every request sampled and scored in process (conftest's fixture), with every installed framework
    instrumented by the one call a team makes."""
    rw = scoring[0]
    assert set(ragwatch.instrument(rw)) == {"llamaindex", "openai"}  # this venv has no langchain-core
    try:
        yield scoring
    finally:
        ragwatch.uninstrument(rw)


async def ask(kind: str, llm: OpenAILike, question: str) -> str:
    """One request the way a service makes it, through a query engine or a chat engine."""
    if kind == "query":
        return str(RetrieverQueryEngine.from_args(Shelf(), llm=llm).query(question))
    if kind == "aquery":  # the SDK's AsyncOpenAI client, as under an async web framework
        return str(await RetrieverQueryEngine.from_args(Shelf(), llm=llm).aquery(question))
    if kind == "streamed query":
        response = RetrieverQueryEngine.from_args(Shelf(), llm=llm, streaming=True).query(question)
        return "".join(response.response_gen)
    memory = ChatMemoryBuffer.from_defaults(token_limit=2000)  # the default keeps an aiosqlite db open
    return ContextChatEngine.from_defaults(retriever=Shelf(), llm=llm, memory=memory).chat(question).response


@pytest.mark.parametrize("kind", ["query", "aquery", "streamed query", "chat"])
async def test_openai_like_requests_record_the_truth_and_a_falsified_number_is_caught(
    scoring: tuple[ragwatch.RagWatch, list[ragwatch.Run]], registry: CollectorRegistry, kind: str
) -> None:
    rw, runs = scoring
    options: dict[str, Any] = {}
    with OpenAIStub() as stub:
        if kind == "streamed query":
            stub.script(streamed(TRUE), streamed(FALSIFIED))
            # without stream_options the stream carries no usage (OpenAILike does not ask for it itself)
            options["additional_kwargs"] = {"stream_options": {"include_usage": True}}
        else:
            stub.script(reply(TRUE), reply(FALSIFIED))
        async with openai.AsyncOpenAI(api_key="test", base_url=stub.url, max_retries=0) as aclient:
            llm = make_llm(stub, aclient, **options)
            answers = [await ask(kind, llm, QUESTION), await ask(kind, llm, QUESTION)]
        sent = list(stub.requests)
    assert answers == [TRUE, FALSIFIED]

    # what reached the server: one chat completion per request from the SDK client of the call style, the
    # model asked for, the chunks in the prompt
    assert [r.path for r in sent] == ["/v1/chat/completions"] * 2
    client = "AsyncOpenAI/" if kind == "aquery" else "OpenAI/"
    assert all(r.headers["user-agent"].startswith(client) for r in sent)
    assert all(r.body["model"] == MODEL and POLICY["hotel"] in str(r.body["messages"]) for r in sent)

    # one run per request, with the question, the chunks the LLM saw and the answer the server sent
    wait_for(lambda: len(runs) == 2)
    assert [r.question for r in runs] == [QUESTION, QUESTION]
    assert [r.answer for r in runs] == [TRUE, FALSIFIED]
    for run in runs:
        assert [(c.id, c.rank, c.score) for c in run.chunks] == [("hotel", 1, 0.92), ("taxi", 2, 0.41)]
        assert run.outcome == "ok" and run.model == MODEL
        # the server's usage, exactly, counted once though both the LlamaIndex and the openai wrappers saw it
        assert run.usage == USAGE
        assert run.cost_usd == pytest.approx(COST)
    for stage in ("request", "retrieve", "generate"):
        assert stage_count(registry, stage) == 2, stage
    tokens = {
        k: sample(registry, "ragwatch_tokens_total", service="svc", model=MODEL, kind=k, source="reported")
        for k in ("input", "output")
    }
    assert tokens == {"input": 2 * USAGE.input_tokens, "output": 2 * USAGE.output_tokens}
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source="reported")
    assert cost == pytest.approx(2 * COST)
    if kind == "streamed query":
        assert all(r.ttft is not None and r.ttft > 0 for r in runs)

    # both samples scored in process: the faithful answer passes, the falsified number is caught
    wait_for(lambda: len(rw.scores()) == 2, 60)
    records = {r["answer"]: r for r in rw.scores()}
    assert set(records) == {TRUE, FALSIFIED}
    assert all(r["question"] == QUESTION and r["chunk_ids"] == ["hotel", "taxi"] for r in records.values())
    assert records[TRUE]["scores"]["faithfulness"] == 1.0
    assert records[TRUE]["scores"]["hallucination_rate"] == 0.0
    assert records[FALSIFIED]["scores"]["hallucination_rate"] == 1.0
    assert records[FALSIFIED]["scores"]["faithfulness"] < 1.0
    unsupported = [c for c in records[FALSIFIED]["details"]["offline"]["claims"] if c["verdict"] == "UNSUPPORTED"]
    assert [c["text"] for c in unsupported] == [FALSIFIED]  # the claim with the number, against the 600 CNY chunk
    assert unsupported[0]["chunk_id"] == "hotel"
