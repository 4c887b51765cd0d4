"""One call instruments what is installed (issue 30, item 8): ``RagWatch(..., auto_instrument=True)`` finds
langchain-core, llama-index-core and openai and watches every chain, query engine and client of the
process — none of them given a handler or instrumented on its own — and ``uninstrument`` takes it back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.integrations import FRAMEWORKS, instrument, uninstrument
from tests.conftest import stage_count
from tests.openai_stub import OpenAIStub, usage_chat_reply
from tests.servers import require_package

openai = require_package("openai")
require_package("langchain_core")
require_package("llama_index.core")
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from llama_index.core import Document, VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402

from tests.test_integration_langchain import ANSWER, make_chain  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_openai_clients")  # SDK clients closed after each test


@pytest.fixture
def auto(registry: CollectorRegistry) -> Iterator[tuple[ragwatch.RagWatch, list[ragwatch.Run]]]:
    rw = ragwatch.RagWatch("svc", registry=registry, tracing=False, auto_instrument=True)
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    try:
        yield rw, runs
    finally:
        uninstrument(rw)  # global hooks: never leak into the other tests


def test_auto_instrument_finds_every_installed_framework(auto: tuple[ragwatch.RagWatch, list[ragwatch.Run]]) -> None:
    rw, _ = auto
    assert set(rw.instrumented) == set(FRAMEWORKS)
    assert instrument(rw) == {}  # a second call adds nothing


def test_a_langchain_chain_without_callbacks_is_a_run(
    auto: tuple[ragwatch.RagWatch, list[ragwatch.Run]], registry: CollectorRegistry
) -> None:
    _, runs = auto
    assert make_chain(GenericFakeChatModel(messages=iter([ANSWER]))).invoke("How much for hotels?") == ANSWER
    (run,) = runs
    assert run.question == "How much for hotels?" and run.answer == ANSWER
    assert [c.id for c in run.chunks] == ["hotel", "taxi"]
    assert stage_count(registry, "retrieve") == 1 and stage_count(registry, "generate") == 1


def test_a_llamaindex_query_is_a_run(auto: tuple[ragwatch.RagWatch, list[ragwatch.Run]]) -> None:
    _, runs = auto
    docs = [Document(text="Hotels up to 600 CNY per night.", id_="hotel")]
    index = VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))
    index.as_query_engine(llm=MockLLM(max_tokens=8)).query("How much for hotels?")
    queries = [r for r in runs if r.question == "How much for hotels?"]
    assert len(queries) == 1 and queries[0].chunks[0].text == "Hotels up to 600 CNY per night."


def test_an_openai_client_made_afterwards_is_watched(
    auto: tuple[ragwatch.RagWatch, list[ragwatch.Run]], registry: CollectorRegistry
) -> None:
    rw, runs = auto
    with OpenAIStub() as stub:
        stub.script(usage_chat_reply("600 CNY.", input_tokens=100, output_tokens=3, model="gpt-4o-mini"))
        client = openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0)

        @rw.pipeline
        def answer(question: str) -> Any:
            return client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": question}])

        assert answer("How much for hotels?").choices[0].message.content == "600 CNY."
    (run,) = runs
    assert run.answer == "600 CNY." and run.usage == ragwatch.Usage(100, 3, 0)
    assert stage_count(registry, "generate") == 1


def test_uninstrument_takes_every_hook_back(registry: CollectorRegistry) -> None:
    rw = ragwatch.RagWatch("svc", registry=registry, tracing=False, auto_instrument=True)
    uninstrument(rw)
    assert rw.instrumented == {}
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    make_chain(GenericFakeChatModel(messages=iter([ANSWER]))).invoke("q")
    assert runs == [] and stage_count(registry, "request") == 0
    assert getattr(openai.resources.chat.completions.Completions.create, "_ragwatch_original", None) is None
