"""``ragwatch.integrations.otel``: runs built from spans other instrumentations emit. Spans come from the
real instrumentation packages where they install (OpenLLMetry's and the OpenTelemetry contrib OpenAI
instrumentations, OpenInference's LangChain one, all against the OpenAI-protocol server), and from spans
built with each dialect's published attribute names for what those packages cannot produce here."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.integrations.otel import RagwatchSpanProcessor
from tests.conftest import sample, stage_count
from tests.openai_stub import OpenAIStub, usage_chat_reply
from tests.servers import require_package
from tests.test_watch import expected_cost

pytestmark = pytest.mark.usefixtures("close_openai_clients")  # SDK clients closed after each test

MODEL = "gpt-4o-mini"
QUESTION = "How much for hotels?"


class Setup:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.rw = ragwatch.RagWatch("svc", registry=registry, tracing=False)
        self.runs: list[ragwatch.Run] = []
        self.rw.add_listener(self.runs.append)
        self.processor = RagwatchSpanProcessor(self.rw)
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.processor)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("app")


@pytest.fixture
def otel(registry: CollectorRegistry) -> Setup:
    return Setup(registry)


def billed_reply() -> Any:
    return usage_chat_reply("600 CNY.", input_tokens=1200, output_tokens=7, cached_tokens=1024, model=MODEL)


def root_of(otel: Setup, name: str) -> Any:
    (root,) = [s for s in otel.exporter.get_finished_spans() if s.name == name]
    return root


def assert_billed(registry: CollectorRegistry, run: ragwatch.Run, cached: int = 1024) -> None:
    assert run.model == MODEL and run.usage == ragwatch.Usage(1200, 7, cached)
    assert run.cost_usd == pytest.approx(expected_cost(MODEL, 1200, 7, cached))
    assert (
        sample(registry, "ragwatch_tokens_total", service="svc", model=MODEL, kind="input", source="reported") == 1200
    )
    cost = sample(registry, "ragwatch_cost_usd_total", service="svc", model=MODEL, source="reported")
    assert cost == pytest.approx(run.cost_usd)


def retrieval_span(otel: Setup) -> None:
    """A retrieval span with the GenAI semantic conventions' names (no package emits these yet)."""
    documents = [{"id": "hotel", "score": 0.91, "content": "Hotels up to 600 CNY."}, {"id": "taxi", "score": 0.4}]
    attributes = {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.query.text": QUESTION,
        "gen_ai.retrieval.documents": json.dumps(documents),
    }
    with otel.tracer.start_as_current_span("retrieval", attributes=attributes):
        pass


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the instrumentation's pydantic models warn on import
def test_openllmetry_openai_spans_with_a_semconv_retrieval(
    otel: Setup, registry: CollectorRegistry, stub: OpenAIStub
) -> None:
    require_package("opentelemetry.instrumentation.openai")
    openai = require_package("openai")
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    with instrumented(OpenAIInstrumentor(), otel, stub):
        client = openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0)
        with otel.tracer.start_as_current_span("rag request"):
            retrieval_span(otel)
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": QUESTION}])
            assert otel.runs == []  # the request is not over until its root span ends
    (run,) = otel.runs
    root = root_of(otel, "rag request")
    assert run.trace_id == format(root.context.trace_id, "032x")
    assert run.span_id == format(root.context.span_id, "016x")
    assert run.question == QUESTION and run.answer == "600 CNY."
    assert [(c.id, c.score, c.text) for c in run.chunks] == [
        ("hotel", 0.91, "Hotels up to 600 CNY."),
        ("taxi", 0.4, ""),
    ]
    assert_billed(registry, run)
    for stage in ("request", "retrieve", "generate"):
        assert stage_count(registry, stage) == 1


@contextmanager
def instrumented(instrumentor: Any, otel: Setup, stub: OpenAIStub) -> Iterator[None]:
    """An OpenTelemetry instrumentation on the test's provider, the local server scripted with a billed
    reply, and the instrumentation removed again whatever the test body does — with the openai SDK's own
    methods put back, because an instrumentor's ``uninstrument`` may leave its wrappers on them (OpenLLMetry's
    stream wrapper outlived it, and tests that ran later saw its object instead of the SDK's)."""
    saved = _sdk_methods()
    instrumentor.instrument(tracer_provider=otel.provider)
    try:
        stub.script(billed_reply())
        yield
    finally:
        instrumentor.uninstrument()
        for (cls, name), method in saved.items():
            if vars(cls).get(name) is not method:
                setattr(cls, name, method)


def _sdk_methods() -> dict[tuple[type, str], Any]:
    """Every method of the openai SDK's resource classes, by class and name."""
    resources = require_package("openai.resources")
    methods: dict[tuple[type, str], Any] = {}
    for info in pkgutil.walk_packages(resources.__path__, resources.__name__ + "."):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == module.__name__:
                methods.update({(cls, name): v for name, v in vars(cls).items() if callable(v)})
    return methods


def test_opentelemetry_contrib_openai_v2_spans(otel: Setup, registry: CollectorRegistry, stub: OpenAIStub) -> None:
    """The contrib instrumentation reports model and tokens on the span (text goes to log events)."""
    require_package("opentelemetry.instrumentation.openai_v2")
    openai = require_package("openai")
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    with instrumented(OpenAIInstrumentor(), otel, stub):
        client = openai.OpenAI(api_key="test", base_url=stub.url, max_retries=0)
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": QUESTION}])
    (run,) = otel.runs  # a bare LLM call is its own trace, so its own run
    assert (
        run.model == MODEL and run.usage is not None and (run.usage.input_tokens, run.usage.output_tokens) == (1200, 7)
    )
    assert stage_count(registry, "generate") == 1 and stage_count(registry, "request") == 1


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the instrumentation calls a deprecated LangChain API
def test_openinference_langchain_spans(otel: Setup, registry: CollectorRegistry, stub: OpenAIStub) -> None:
    require_package("openinference.instrumentation.langchain")
    langchain_openai = require_package("langchain_openai")
    from openinference.instrumentation.langchain import LangChainInstrumentor

    from tests.test_integration_langchain import make_chain

    with instrumented(LangChainInstrumentor(), otel, stub):
        llm = langchain_openai.ChatOpenAI(model=MODEL, api_key="test", base_url=stub.url, max_retries=0)
        assert make_chain(llm).invoke(QUESTION) == "600 CNY."
    (run,) = otel.runs
    assert run.question == QUESTION and run.answer == "600 CNY."
    # OpenInference keeps the Document metadata as JSON, where the scores are
    assert [(c.text, c.score) for c in run.chunks] == [
        ("Hotels up to 600 CNY per night.", 0.91),
        ("Taxis are reimbursed with receipts.", 0.42),
    ]
    assert_billed(registry, run)


def test_openinference_names_nested_llm_spans_count_once(otel: Setup, registry: CollectorRegistry) -> None:
    t = otel.tracer
    with t.start_as_current_span("chain", attributes={"openinference.span.kind": "CHAIN", "input.value": QUESTION}):
        retriever = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": QUESTION,
            "retrieval.documents.0.document.id": "hotel",
            "retrieval.documents.0.document.content": "Hotels up to 600 CNY.",
            "retrieval.documents.0.document.score": 0.91,
            "retrieval.documents.1.document.id": 7,
            "retrieval.documents.1.document.content": "Taxis.",
            "retrieval.documents.1.document.metadata": json.dumps({"source": "policy.pdf"}),
        }
        with t.start_as_current_span("retriever", attributes=retriever):
            pass
        llm = {
            "openinference.span.kind": "LLM",
            "llm.model_name": MODEL,
            "llm.token_count.prompt": 1200,
            "llm.token_count.completion": 7,
            "llm.token_count.prompt_details.cache_read": 1024,
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": QUESTION,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "600 CNY.",
        }
        with (
            t.start_as_current_span("framework llm", attributes=llm),
            t.start_as_current_span("sdk llm", attributes=llm),
        ):
            pass
    (run,) = otel.runs
    assert [(c.id, c.score) for c in run.chunks] == [("hotel", 0.91), ("7", None)]
    assert run.chunks[1].metadata == {"source": "policy.pdf"}
    assert run.answer == "600 CNY."
    assert_billed(registry, run)  # 1200 input tokens, not 2400
    assert stage_count(registry, "generate") == 1


def test_openllmetry_vector_store_events_and_completion_names(otel: Setup, registry: CollectorRegistry) -> None:
    t = otel.tracer
    with t.start_as_current_span("workflow", attributes={"traceloop.span.kind": "workflow"}):
        with t.start_as_current_span(
            "chroma.query", attributes={"db.system": "chroma", "db.vector.query.top_k": 2}
        ) as s:
            s.add_event(
                "db.query.result",
                {"db.query.result.id": "hotel", "db.query.result.score": 0.8, "db.query.result.document": "Hotels."},
            )
            s.add_event("db.query.result", {"db.query.result.id": "taxi", "db.query.result.document": "Taxis."})
        llm = {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": MODEL,
            "gen_ai.usage.prompt_tokens": 1200,
            "gen_ai.usage.completion_tokens": 7,
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Answer from the context.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": QUESTION,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "600 CNY.",
        }
        with t.start_as_current_span("openai.chat", attributes=llm):
            pass
    (run,) = otel.runs
    assert [(c.id, c.text, c.score) for c in run.chunks] == [("hotel", "Hotels.", 0.8), ("taxi", "Taxis.", None)]
    assert run.question == QUESTION and run.answer == "600 CNY."
    assert_billed(registry, run, cached=0)


def test_errors_non_genai_traces_and_ragwatchs_own_spans(otel: Setup, registry: CollectorRegistry) -> None:
    t = otel.tracer
    with t.start_as_current_span("health check"):
        pass
    assert otel.runs == []  # no GenAI work: not a request ragwatch watches

    with t.start_as_current_span("rag request") as root:
        with t.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}) as chat:
            chat.set_status(Status(StatusCode.ERROR, "upstream 500"))
            chat.set_attribute("error.type", "InternalServerError")
        root.set_status(Status(StatusCode.ERROR))
        root.set_attribute("error.type", "InternalServerError")
    (run,) = otel.runs
    assert run.outcome == "error" and run.error == "InternalServerError"
    assert stage_count(registry, "generate", "error") == 1 and stage_count(registry, "request", "error") == 1

    # ragwatch's own spans (a decorated pipeline traced through the same provider) are recorded once, by it
    rw = ragwatch.RagWatch("svc", registry=None, tracer_provider=otel.provider)

    @rw.llm(model=MODEL)
    def generate(q: str) -> str:
        return "x"

    @rw.pipeline
    def answer(q: str) -> str:
        return generate(q)

    answer(QUESTION)
    assert len(otel.runs) == 1


def test_open_traces_are_bounded_and_drops_counted(registry: CollectorRegistry) -> None:
    setup = Setup(registry)
    setup.processor.max_traces = 2
    t = setup.tracer
    roots = [t.start_span(f"request {i}") for i in range(3)]
    for root in roots:
        from opentelemetry import trace

        with trace.use_span(root), t.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
            pass
    assert sample(registry, "ragwatch_internal_errors_total", component="capture") == 1
    for root in roots:
        root.end()
    assert len(setup.runs) == 2  # the oldest trace was dropped; the two others ended as runs


def test_a_traces_retrievals_add_up_each_chunk_once(otel: Setup, registry: CollectorRegistry) -> None:
    """Two retrieval spans in one trace (a question expanded into two queries, or two retrievers side by
    side) feed the model both lists: the run's chunks are both, each once (each span used to replace the
    last one's documents)."""

    def retrieve(*documents: dict[str, Any]) -> None:
        attributes = {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps(documents)}
        with otel.tracer.start_as_current_span("retrieval", attributes=attributes):
            pass

    with otel.tracer.start_as_current_span("rag request"):
        retrieve({"id": "hotel", "score": 0.9}, {"id": "taxi", "score": 0.5})
        retrieve({"id": "meal", "score": 0.8}, {"id": "taxi", "score": 0.7})
    (run,) = otel.runs
    assert [c.id for c in run.chunks] == ["hotel", "taxi", "meal"]
    assert stage_count(registry, "retrieve") == 2
