"""A LlamaIndex embedding model that calls the openai SDK (as ``llama-index-embeddings-openai``'s class does),
with both integrations on (``ragwatch.instrument``): one ``embed`` stage per embedding call, priced at the
tokens the server billed — the SDK call inside is the same call, not a second stage with a second bill.

The embedding class is a real ``BaseEmbedding`` subclass of llama-index-core; its SDK client talks to the
local OpenAI-protocol server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.integrations import instrument, uninstrument
from tests.conftest import sample, stage_count
from tests.openai_stub import OpenAIStub, embedding_reply
from tests.servers import require_package
from tests.test_watch import expected_cost

require_package("llama_index.core")
openai = require_package("openai")
from llama_index.core.embeddings import BaseEmbedding  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_openai_clients")  # SDK clients closed after each test

MODEL = "text-embedding-3-small"


class SDKEmbedding(BaseEmbedding):
    """What an OpenAI embedding class of LlamaIndex does: one ``embeddings.create`` per call."""

    base_url: str

    def _create(self, texts: list[str]) -> list[list[float]]:
        client = openai.OpenAI(api_key="test", base_url=self.base_url, max_retries=0)
        try:
            return [d.embedding for d in client.embeddings.create(model=MODEL, input=texts).data]
        finally:
            client.close()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._create([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._create([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._create(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


@pytest.fixture
def watched(rw: ragwatch.RagWatch) -> Iterator[ragwatch.RagWatch]:
    assert set(instrument(rw, only=("llamaindex", "openai"))) == {"llamaindex", "openai"}
    try:
        yield rw
    finally:
        uninstrument(rw)


def tokens(registry: CollectorRegistry, source: str) -> Any:
    return sample(registry, "ragwatch_tokens_total", service="svc", model=MODEL, kind="input", source=source)


def test_an_sdk_call_inside_a_llamaindex_embedding_is_that_call_billed_once(
    watched: ragwatch.RagWatch, registry: CollectorRegistry
) -> None:
    with OpenAIStub() as stub:
        stub.script(embedding_reply(1, input_tokens=7, model=MODEL), embedding_reply(2, input_tokens=15, model=MODEL))
        model = SDKEmbedding(base_url=stub.url, model_name=MODEL)
        query = model.get_query_embedding("How much for hotels?")
        texts = model.get_text_embedding_batch(["hotel policy", "taxi policy"])
    assert len(stub.requests) == 2 and query == [0.1, 0.2, 0.3] and len(texts) == 2
    assert stage_count(registry, "embed") == 2  # not 4: the SDK call is the LlamaIndex call
    assert tokens(registry, "reported") == 7 + 15 and tokens(registry, "estimated") == 0
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source="reported")
    assert cost == pytest.approx(expected_cost(MODEL, 7 + 15, 0))
