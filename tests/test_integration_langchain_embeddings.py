"""LangChain embedding classes are the ``embed`` stage under ``ragwatch.instrument`` (issue 30, item 7): they
send no callbacks, so their ``embed_query`` / ``embed_documents`` (and async forms) are watched — on classes
installed before ``instrument`` and defined after it — once per call (a subclass calling its parent, the
openai SDK call inside ``OpenAIEmbeddings``), their tokens priced: the count the provider billed when the
instrumented SDK call inside reports one, else estimated from the texts; ``uninstrument`` restores the
originals."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

import ragwatch
from ragwatch.capture.responses import estimate_tokens
from ragwatch.integrations import instrument, uninstrument
from tests.conftest import Spans, sample, stage_count
from tests.openai_stub import OpenAIStub, embedding_reply
from tests.servers import require_package
from tests.test_watch import expected_cost

require_package("langchain_core")
require_package("langchain_openai")
openai = require_package("openai")
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings  # noqa: E402
from langchain_openai import OpenAIEmbeddings  # noqa: E402

pytestmark = pytest.mark.usefixtures("close_openai_clients")  # SDK clients closed after each test

MODEL = "text-embedding-3-small"
#: the fake class's own methods, as installed before any test instruments it
ORIGINALS = {name: DeterministicFakeEmbedding.__dict__[name] for name in ("embed_query", "embed_documents")}


@pytest.fixture
def watched(rw: ragwatch.RagWatch) -> Iterator[ragwatch.RagWatch]:
    """``rw`` (tracing on) with LangChain and the openai SDK instrumented, process-wide."""
    assert set(instrument(rw, only=("langchain", "openai"))) == {"langchain", "openai"}
    try:
        yield rw
    finally:
        uninstrument(rw)  # global hooks: never leak into the other tests


def tokens(registry: CollectorRegistry, model: str, source: str = "estimated") -> float:
    return sample(registry, "ragwatch_tokens_total", service="svc", model=model, kind="input", source=source)


def embedding_spans(spans: Spans) -> list[Any]:
    return [s for s in spans.all() if s.name.startswith("embeddings")]


def test_an_installed_embedding_class_is_the_embed_stage(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans
) -> None:
    fake = DeterministicFakeEmbedding(size=4)
    vector = fake.embed_query("How much for hotels?")
    vectors = fake.embed_documents(["hotel policy", "taxi policy"])
    from_async = asyncio.run(fake.aembed_query("How much for hotels?"))  # the base's default: an executor

    assert vector == ORIGINALS["embed_query"](fake, "How much for hotels?")  # the host's vectors, untouched
    assert vectors == ORIGINALS["embed_documents"](fake, ["hotel policy", "taxi policy"])
    assert from_async == vector
    assert stage_count(registry, "embed") == 3  # aembed_query running embed_query in a thread: once
    assert len(embedding_spans(spans)) == 3
    expected = 2 * estimate_tokens("How much for hotels?") + estimate_tokens("hotel policy") * 2
    assert tokens(registry, "unknown") == expected  # no model on the class: counted, not priced
    assert stage_count(registry, "generate") == 0 and stage_count(registry, "retrieve") == 0


def test_a_class_defined_after_instrument_counts_once_and_is_priced(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans
) -> None:
    class Base(Embeddings):
        model = MODEL

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float(len(t)), 1.0] for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]  # a watched method calling another

    class Tuned(Base):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[x * 2 for x in v] for v in super().embed_documents(texts)]  # ... and its parent's

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.embed_documents(texts)

    text = "Hotels are reimbursed up to 600 CNY per night."
    assert Tuned().embed_query(text) == [2.0 * len(text), 2.0]
    assert asyncio.run(Tuned().aembed_documents([text, "taxi"])) == [[2.0 * len(text), 2.0], [8.0, 2.0]]

    assert stage_count(registry, "embed") == 2
    assert len(embedding_spans(spans)) == 2
    used = 2 * estimate_tokens(text) + estimate_tokens("taxi")
    assert tokens(registry, MODEL) == used
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source="estimated")
    assert cost == pytest.approx(expected_cost(MODEL, used, 0))


def test_a_model_given_as_a_pydantic_extra_is_priced(watched: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    """A pydantic embedding class that declares no ``model`` field but allows extras keeps the model in
    ``__pydantic_extra__``, not in ``__dict__``: it is still the model the call is priced as."""
    from pydantic import ConfigDict

    class Extras(Embeddings, BaseModel):
        model_config = ConfigDict(extra="allow")

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float(len(t))] for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return [float(len(text))]

    fake = Extras(model=MODEL)
    assert "model" not in vars(fake)  # where the old lookup read it
    assert fake.embed_query("taxi policy") == [11.0]
    assert stage_count(registry, "embed") == 1
    assert tokens(registry, MODEL) == estimate_tokens("taxi policy")
    assert tokens(registry, "unknown") == 0


def openai_embeddings(url: str, **options: Any) -> OpenAIEmbeddings:
    return OpenAIEmbeddings(
        model=MODEL,
        base_url=url,
        api_key="test",
        max_retries=0,
        check_embedding_ctx_length=False,  # else it tokenizes with tiktoken, which downloads its tables
        **options,
    )


def test_openai_embeddings_record_the_billed_tokens_once(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, spans: Spans
) -> None:
    """The server's ``usage.prompt_tokens`` is the count recorded and priced — not an estimate from the
    texts — and each LangChain call is one ``embed`` stage, though the instrumented SDK call runs inside it
    (before: the texts' estimate, ``reported`` 0)."""
    with OpenAIStub() as stub:
        stub.script(embedding_reply(2, input_tokens=12, model=MODEL), embedding_reply(1, input_tokens=9, model=MODEL))
        aclient = openai.AsyncOpenAI(api_key="test", base_url=stub.url, max_retries=0)
        embeddings = openai_embeddings(stub.url, async_client=aclient.embeddings)
        vectors = embeddings.embed_documents(["hotel policy", "taxi policy"])

        async def ask() -> list[float]:
            try:
                return await embeddings.aembed_query("How much for hotels?")
            finally:
                await aclient.close()  # on this event loop, which is gone by teardown

        query = asyncio.run(ask())
    assert len(stub.requests) == 2 and stub.requests[0].path.endswith("/embeddings")
    assert vectors == [[0.1, 0.2, 0.3], [pytest.approx(0.2), 0.2, 0.3]] and query == [0.1, 0.2, 0.3]

    assert stage_count(registry, "embed") == 2  # not 4: the SDK call inside is the same call
    assert sorted(s.attributes["gen_ai.usage.input_tokens"] for s in embedding_spans(spans)) == [9, 12]
    assert tokens(registry, MODEL, "reported") == 12 + 9 and tokens(registry, MODEL) == 0
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source="reported")
    assert cost == pytest.approx(expected_cost(MODEL, 12 + 9, 0))
    assert sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source="estimated") == 0


def test_texts_split_over_several_requests_are_one_call_with_their_summed_tokens(
    watched: ragwatch.RagWatch, registry: CollectorRegistry
) -> None:
    with OpenAIStub() as stub:
        stub.script(*(embedding_reply(1, input_tokens=n, model=MODEL) for n in (3, 4, 6)))
        vectors = openai_embeddings(stub.url, chunk_size=1).embed_documents(["hotel", "taxi", "meals policy"])
    assert len(stub.requests) == 3 and len(vectors) == 3
    assert stage_count(registry, "embed") == 1
    assert tokens(registry, MODEL, "reported") == 3 + 4 + 6 and tokens(registry, MODEL) == 0


def test_a_provider_that_reports_no_usage_is_estimated(watched: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    with OpenAIStub() as stub:
        stub.script(embedding_reply(2, input_tokens=None, model=MODEL))
        openai_embeddings(stub.url).embed_documents(["hotel policy", "taxi policy"])
    assert stage_count(registry, "embed") == 1
    assert tokens(registry, MODEL) == estimate_tokens("hotel policy") + estimate_tokens("taxi policy")
    assert tokens(registry, MODEL, "reported") == 0


def test_the_sdk_on_its_own_still_records_its_calls(watched: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    """Outside a LangChain call the instrumented SDK is the embed stage itself, billed from its response."""
    with OpenAIStub() as stub:
        stub.script(embedding_reply(1, input_tokens=7, model=MODEL))
        client = openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0)
        client.embeddings.create(model=MODEL, input="hotel policy")
    assert stage_count(registry, "embed") == 1
    assert tokens(registry, MODEL, "reported") == 7 and tokens(registry, MODEL) == 0


def test_an_embedding_class_ragwatch_cannot_read_still_embeds(
    watched: ragwatch.RagWatch, registry: CollectorRegistry
) -> None:
    class Odd(Embeddings):
        @property
        def model(self) -> str:
            raise RuntimeError("not configured")

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0] for _ in texts]

        def embed_query(self, text: str) -> list[float]:
            return [1.0]

    assert Odd().embed_query("q") == [1.0]  # ragwatch's failure stays ragwatch's
    assert sample(registry, "ragwatch_internal_errors_total", component="capture") == 1
    assert stage_count(registry, "embed") == 0


def test_uninstrument_restores_every_embedding_class(rw: ragwatch.RagWatch, registry: CollectorRegistry) -> None:
    instrument(rw, only=("langchain",))
    other = ragwatch.RagWatch("other", registry=CollectorRegistry(), tracing=False)
    instrument(other, only=("langchain",))  # a second RagWatch wraps nothing twice
    try:
        method = DeterministicFakeEmbedding.__dict__["embed_query"]
        assert method is not ORIGINALS["embed_query"] and method.__wrapped__ is ORIGINALS["embed_query"]

        class Later(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return [[0.0] for _ in texts]

            def embed_query(self, text: str) -> list[float]:
                return [0.0]

        own = Later.__dict__["embed_query"].__wrapped__
        Later().embed_query("q")
        assert stage_count(registry, "embed") == 1
    finally:
        uninstrument(other)
        uninstrument(rw)
    assert {name: DeterministicFakeEmbedding.__dict__[name] for name in ORIGINALS} == ORIGINALS
    assert Later.__dict__["embed_query"] is own
    assert "__init_subclass__" not in Embeddings.__dict__

    class After(Later):
        def embed_query(self, text: str) -> list[float]:
            return [2.0]

    assert not hasattr(After.__dict__["embed_query"], "__wrapped__")
    DeterministicFakeEmbedding(size=2).embed_query("q")
    After().embed_query("q")
    Later().embed_documents(["q"])
    assert stage_count(registry, "embed") == 1
