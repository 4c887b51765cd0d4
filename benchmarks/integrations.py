"""Per-request overhead of the framework integrations, against the same work without them, in one run.

Three pairs, each a baseline and the same request with ragwatch added, plus the decorator figures of
``overhead.py`` for orientation; all variants run interleaved in one process, round-robin in small
batches, each request timed on its own with ``time.perf_counter_ns``:

``LCEL chain`` / ``+ RagwatchCallbackHandler``
    A langchain-core LCEL chain — ``{"context": retriever | join, "question": passthrough} | prompt |
    GenericFakeChatModel | StrOutputParser`` with a ``BaseRetriever`` returning three scored ``Document``s
    and a fake chat model reporting usage — invoked bare, with a handler that does nothing (what LangChain's
    callback machinery costs for any handler), then with ragwatch's handler in ``config`` (metrics only,
    and tracing + metrics).
``callback events, replayed`` / ``into RagwatchCallbackHandler``
    The 18 callback events one invocation of that chain sends, recorded once, then replayed in order into
    the do-nothing handler and into ragwatch's: ragwatch's own bookkeeping per chain, without LangChain's
    machinery or its thread pool (the parallel map runs its branches on threads), whose scheduling spreads
    a chain's latency over milliseconds and hides differences of tens of microseconds.
``OTel spans`` / ``+ RagwatchSpanProcessor``
    One request as an OpenInference-instrumented service traces it — a CHAIN root, a RETRIEVER span with
    three documents and an LLM span with model, token counts and the answer — through an SDK
    ``TracerProvider`` with a ``BatchSpanProcessor`` around a dropping exporter; then the same provider
    with ``RagwatchSpanProcessor`` added ahead of it.
``agent`` / ``+ handler``
    A tool-calling loop without LangGraph (a ``RunnableLambda`` that calls a ``@tool`` twice — each call a
    retriever — then the fake chat model), bare and with ragwatch's handler: tool spans, tool-time
    retrievals attached to the run.
``compression retriever`` / ``+ handler``
    The LCEL chain with a retriever around the retriever (what ``ContextualCompressionRetriever`` does),
    bare and with ragwatch's handler: the inner call is ``retrieve``, the outer ``rerank``.
``auto-instrumented chain`` / ``embed_query``, bare / ``+ ragwatch.instrument(rw)``
    The LCEL chain with a retriever that embeds the query first (``DeterministicFakeEmbedding``), invoked
    with no ``callbacks`` at all, and one ``embed_query`` call on its own; then the same with
    ``ragwatch.instrument(rw)`` on (every installed framework: LangChain's global handler and its embedding
    classes as the ``embed`` stage, LlamaIndex, openai), and the chain with ragwatch's handler in ``config``
    instead (what ``instrument`` adds over that row is the ``embed`` stage: the hook itself costs what the
    handler in ``config`` does). The hooks are process-wide, so the instrumented variants switch them on
    before each of their batches and off after it (outside the timed calls): the other variants, their
    baselines included, never run with them.
``bare functions`` / ``decorators``
    ``overhead.py``'s request (a pipeline calling a retriever and an LLM function) bare and decorated,
    metrics only.

ragwatch runs with ``sampling=False, degraded_mode=False`` (the capture layer, as in ``overhead.py``).
``--compare DIR`` adds the LangChain, auto-instrument and decorator rows of another ragwatch checkout
(``/work/main``, say), imported as a second copy of the package, so a change is measured against its base in
the same run. (Each copy has its own ``metrics.fast`` cells, so a copy's rows are timed as it would run alone.)

Usage::

    python benchmarks/integrations.py                  # 3,000 requests per variant
    python benchmarks/integrations.py --requests 10000 --json results.json
    python benchmarks/integrations.py --compare ../main  # also the handler and decorators of ../main
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchcommon import print_table, source_fingerprint
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry

import ragwatch
import ragwatch.integrations.langchain
from ragwatch.integrations.otel import RagwatchSpanProcessor

ANSWER = "Hotels are capped at 600 CNY per night."
DOCS = [
    Document("Hotels up to 600 CNY per night.", id="hotel", metadata={"score": 0.91}),
    Document("Taxis are reimbursed with receipts.", id="taxi", metadata={"score": 0.74}),
    Document("Meals up to 100 CNY per day.", id="meals", metadata={"score": 0.52}),
]
MESSAGE = AIMessage(
    ANSWER,
    usage_metadata={"input_tokens": 1200, "output_tokens": 9, "total_tokens": 1209},
    response_metadata={"model_name": "gpt-4o-mini"},
)


class Retriever(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return DOCS


def _nothing(self: Any, *args: Any, **kwargs: Any) -> None:
    return None


class NoopHandler(BaseCallbackHandler):
    """Any handler at all: LangChain then runs its callback machinery for every step of the chain. It
    defines, as no-ops, the callbacks ragwatch's handler defines, so LangChain takes the same paths: without
    ``on_chat_model_start`` it would catch a ``NotImplementedError``, render the messages as strings and
    call ``on_llm_start`` instead."""

    run_inline = True
    raise_error = False
    on_chain_start = on_chain_end = on_chain_error = _nothing
    on_retriever_start = on_retriever_end = on_retriever_error = _nothing
    on_chat_model_start = on_llm_start = on_llm_new_token = on_llm_end = on_llm_error = _nothing


class Recorder(NoopHandler):
    """Keeps the events of one invocation, in order, with their arguments, for replaying."""

    def __init__(self) -> None:
        self.events: list[tuple[str, tuple, dict]] = []


def _recording(name: str) -> Callable[..., None]:
    def method(self: Recorder, *args: Any, **kwargs: Any) -> None:
        self.events.append((name, args, kwargs))

    return method


for _name in [n for n in vars(NoopHandler) if n.startswith("on_")]:
    setattr(Recorder, _name, _recording(_name))


class DropExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def provider(*processors: Any) -> TracerProvider:
    tp = TracerProvider()
    for p in processors:
        tp.add_span_processor(p)
    tp.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=2048))
    return tp


def watch(tracing: bool, tracer_provider: Any = None, package: ModuleType = ragwatch) -> Any:
    return package.RagWatch(
        "bench",
        registry=CollectorRegistry(),
        tracing=tracing,
        tracer_provider=tracer_provider,
        sampling=False,
        degraded_mode=False,
    )


@dataclass
class Variant:
    name: str
    group: str
    request: Callable[[], Any]
    baseline: bool = False
    samples: list[int] = field(default_factory=list)
    #: run before and after each batch of this variant, untimed (process-wide hooks on and off)
    enter: Callable[[], Any] = lambda: None
    leave: Callable[[], Any] = lambda: None


@dataclass
class Copy:
    """One ragwatch to measure: this checkout's, or another's imported beside it (``--compare``)."""

    suffix: str  # appended to the row names: "" for this checkout
    package: ModuleType
    langchain: ModuleType
    #: another checkout's ``ragwatch*`` modules (None: this checkout's, already in ``sys.modules``)
    modules: dict[str, ModuleType] | None = None

    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` with this copy's modules in ``sys.modules``, so the lazy imports of ``ragwatch.instrument``
        and ``uninstrument`` find the copy's integrations; only for untimed calls (a batch's hooks on/off)."""
        if self.modules is None:
            return fn()
        ours = {n: sys.modules.pop(n) for n in [n for n in sys.modules if n == "ragwatch" or n.startswith("ragwatch.")]}
        sys.modules.update(self.modules)
        try:
            return fn()
        finally:
            for name in [n for n in sys.modules if n == "ragwatch" or n.startswith("ragwatch.")]:
                del sys.modules[name]
            sys.modules.update(ours)


def make_chain(retriever: BaseRetriever | None = None) -> Any:
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from: {context}"), ("human", "{question}")])
    model = GenericFakeChatModel(messages=itertools.repeat(MESSAGE))
    return (
        {
            "context": (retriever or Retriever()) | (lambda docs: "\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | model
        | StrOutputParser()
    )


def chain_variants(copies: list[Copy]) -> list[Variant]:
    chain = make_chain()
    noop = {"callbacks": [NoopHandler()]}
    variants = [
        Variant("LCEL chain, bare", "langchain", lambda: chain.invoke("How much for hotels?"), baseline=True),
        Variant(
            "+ a no-op handler (LangChain's own cost)",
            "langchain",
            lambda: chain.invoke("How much for hotels?", config=noop),
        ),
    ]
    for c in copies:
        metrics_only = {"callbacks": [c.langchain.RagwatchCallbackHandler(watch(False, None, c.package))]}
        traced = {"callbacks": [c.langchain.RagwatchCallbackHandler(watch(True, provider(), c.package))]}
        variants += [
            Variant(
                f"+ handler, metrics only{c.suffix}",
                "langchain",
                lambda config=metrics_only: chain.invoke("How much for hotels?", config=config),
            ),
            Variant(
                f"+ handler, tracing + metrics{c.suffix}",
                "langchain",
                lambda config=traced: chain.invoke("How much for hotels?", config=config),
            ),
        ]
    return variants


def replay_variants(copies: list[Copy]) -> list[Variant]:
    """The events of one invocation, recorded once; every replay is one request's worth of callbacks. The
    run ids repeat from replay to replay, which is fine: each replay ends every run it starts."""
    recorder = Recorder()
    make_chain().invoke("How much for hotels?", config={"callbacks": [recorder]})
    events = recorder.events

    def replay(handler: Any) -> Callable[[], str]:
        calls = [(getattr(handler, name), args, kwargs) for name, args, kwargs in events]

        def request() -> str:
            for method, args, kwargs in calls:
                method(*args, **kwargs)
            return ANSWER

        return request

    variants = [Variant(f"{len(events)} callback events into a no-op handler", "replay", replay(NoopHandler()), True)]
    for c in copies:
        variants += [
            Variant(
                f"into RagwatchCallbackHandler, metrics only{c.suffix}",
                "replay",
                replay(c.langchain.RagwatchCallbackHandler(watch(False, None, c.package))),
            ),
            Variant(
                f"into RagwatchCallbackHandler, tracing + metrics{c.suffix}",
                "replay",
                replay(c.langchain.RagwatchCallbackHandler(watch(True, provider(), c.package))),
            ),
        ]
    return variants


def span_request(tracer: Any) -> Callable[[], str]:
    retriever: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": "How much for hotels?"}
    for i, d in enumerate(DOCS):
        retriever[f"retrieval.documents.{i}.document.id"] = d.id
        retriever[f"retrieval.documents.{i}.document.content"] = d.page_content
        retriever[f"retrieval.documents.{i}.document.score"] = d.metadata["score"]
    llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-mini",
        "llm.token_count.prompt": 1200,
        "llm.token_count.completion": 9,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": ANSWER,
    }
    root = {"openinference.span.kind": "CHAIN", "input.value": "How much for hotels?"}

    def request() -> str:
        with tracer.start_as_current_span("chain", attributes=root) as span:
            with tracer.start_as_current_span("retriever", attributes=retriever):
                pass
            with tracer.start_as_current_span("llm", attributes=llm):
                pass
            span.set_attribute("output.value", ANSWER)
        return ANSWER

    return request


def otel_variants() -> list[Variant]:
    plain = provider().get_tracer("app")
    with_processor = provider(RagwatchSpanProcessor(watch(False))).get_tracer("app")
    return [
        Variant("OTel spans, bare", "otel", span_request(plain), baseline=True),
        Variant("+ RagwatchSpanProcessor", "otel", span_request(with_processor)),
    ]


class Compressing(BaseRetriever):
    base: BaseRetriever

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return self.base.invoke(query, config={"callbacks": run_manager.get_child()})[:2]


def agent_variants(copies: list[Copy]) -> list[Variant]:
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tools import tool

    retriever = Retriever()

    @tool
    def search(query: str) -> str:
        """Search the policy."""
        return "\n".join(d.page_content for d in retriever.invoke(query))

    model = GenericFakeChatModel(messages=itertools.repeat(MESSAGE))

    def run(question: str) -> str:
        search.invoke({"query": "hotel limits"})
        search.invoke({"query": "taxi rules"})
        return model.invoke(question).content  # type: ignore[return-value]

    agent = RunnableLambda(run, name="agent")
    variants = [Variant("agent (2 tool calls), bare", "agent", lambda: agent.invoke("How much?"), baseline=True)]
    for c in copies:
        config = {"callbacks": [c.langchain.RagwatchCallbackHandler(watch(False, None, c.package))]}
        variants.append(
            Variant(
                f"+ handler, metrics only{c.suffix}", "agent", lambda cfg=config: agent.invoke("How much?", config=cfg)
            )
        )
    return variants


def rerank_variants(copies: list[Copy]) -> list[Variant]:
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from: {context}"), ("human", "{question}")])
    chain = (
        {
            "context": Compressing(base=Retriever()) | (lambda docs: "\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | GenericFakeChatModel(messages=itertools.repeat(MESSAGE))
        | StrOutputParser()
    )
    variants = [
        Variant("compression retriever chain, bare", "rerank", lambda: chain.invoke("How much?"), baseline=True)
    ]
    for c in copies:
        config = {"callbacks": [c.langchain.RagwatchCallbackHandler(watch(False, None, c.package))]}
        variants.append(
            Variant(
                f"+ handler, metrics only{c.suffix}", "rerank", lambda cfg=config: chain.invoke("How much?", config=cfg)
            )
        )
    return variants


def auto_variants(copies: list[Copy]) -> list[Variant]:
    """``ragwatch.instrument(rw)`` of each copy (another checkout's with its own modules swapped in while its
    hooks go on and off, see :meth:`Copy.call`). Each instrumented batch turns the hooks on and off again;
    the checks make sure they record while on. The handler row runs the same chain with this checkout's
    handler in ``config``: what ``instrument`` adds over it is the ``embed`` stage."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    embedder = DeterministicFakeEmbedding(size=64)

    class EmbeddingRetriever(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            embedder.embed_query(query)
            return DOCS

    chain = make_chain(EmbeddingRetriever())

    def embed() -> str:
        embedder.embed_query("How much for hotels?")
        return ANSWER

    def chain_request() -> str:
        return chain.invoke("How much for hotels?")  # type: ignore[no-any-return]

    handler = {"callbacks": [copies[0].langchain.RagwatchCallbackHandler(watch(False))]}
    chains = [
        Variant("auto-instrumented chain (embeds the query), bare", "auto", chain_request, baseline=True),
        Variant(
            "+ RagwatchCallbackHandler in config (no embed stage)",
            "auto",
            lambda: chain.invoke("How much for hotels?", config=handler),
        ),
    ]
    embeds = [Variant("embed_query, bare", "auto-embed", embed, baseline=True)]
    for c in copies:
        on, off = _switch(c)
        name = f"+ ragwatch.instrument(rw), metrics only{c.suffix}"
        chains.append(Variant(name, "auto", chain_request, enter=on, leave=off))
        embeds.append(Variant(name, "auto-embed", embed, enter=on, leave=off))
    return chains + embeds


def _switch(c: Copy) -> tuple[Callable[[], None], Callable[[], None]]:
    """Turn ``c``'s ``ragwatch.instrument`` on and off, untimed, for one ``rw`` of its own; off checks that
    the batch recorded embed stages (a variant that records nothing would look fast)."""
    registry = CollectorRegistry()
    rw = c.package.RagWatch("bench", registry=registry, tracing=False, sampling=False, degraded_mode=False)
    seen = [0.0]

    def embedded() -> float:
        labels = {"service": "bench", "stage": "embed", "outcome": "ok"}
        return registry.get_sample_value("ragwatch_stage_duration_seconds_count", labels) or 0.0

    def on() -> None:
        if "langchain" not in c.call(lambda: c.package.instrument(rw)):
            raise SystemExit(f"ragwatch.instrument(rw){c.suffix} did not instrument LangChain")
        seen[0] = embedded()

    def off() -> None:
        c.call(lambda: c.package.uninstrument(rw))
        if embedded() <= seen[0]:
            raise SystemExit(f"an instrumented batch{c.suffix} recorded no embed stage")

    return on, off


def decorator_variants(copies: list[Copy]) -> list[Variant]:
    def bare() -> Callable[[], str]:
        def retrieve(question: str, top_k: int = 3) -> list[Document]:
            return DOCS

        def generate(question: str, chunks: Any) -> AIMessage:
            return MESSAGE

        def answer(question: str) -> str:
            return generate(question, retrieve(question, top_k=3)).content  # type: ignore[return-value]

        return lambda: answer("How much for hotels?")

    def decorated(package: ModuleType) -> Callable[[], str]:
        rw = watch(False, None, package)

        @rw.retriever
        def retrieve(question: str, top_k: int = 3) -> list[Document]:
            return DOCS

        @rw.llm(model="gpt-4o-mini")
        def generate(question: str, chunks: Any) -> AIMessage:
            return MESSAGE

        @rw.pipeline
        def answer(question: str) -> str:
            return generate(question, retrieve(question, top_k=3)).content  # type: ignore[return-value]

        return lambda: answer("How much for hotels?")

    return [Variant("bare functions", "decorators", bare(), baseline=True)] + [
        Variant(f"decorators, metrics only{c.suffix}", "decorators", decorated(c.package)) for c in copies
    ]


def import_copy(checkout: Path) -> Copy:
    """The ragwatch package of another checkout as a second, independent copy: its modules are imported
    under the usual names with this checkout's moved aside, then moved out of ``sys.modules`` again (the
    copy's modules keep referring to each other). Only lazy imports the measured paths never reach (stream
    proxies, the metrics server) would find this checkout's modules."""
    ours = [name for name in sys.modules if name == "ragwatch" or name.startswith("ragwatch.")]
    saved = {name: sys.modules.pop(name) for name in ours}
    sys.path.insert(0, str(checkout.resolve()))
    try:
        package = importlib.import_module("ragwatch")
        langchain = importlib.import_module("ragwatch.integrations.langchain")
        for name in ("ragwatch.integrations.openai", "ragwatch.integrations.llamaindex"):  # what instrument() loads
            with contextlib.suppress(ImportError):  # its framework is not installed: instrument() skips it too
                importlib.import_module(name)
        if not Path(package.__file__).resolve().is_relative_to(checkout.resolve()):
            raise SystemExit(f"--compare {checkout}: imported {package.__file__} instead")
    finally:
        sys.path.remove(str(checkout.resolve()))
        modules = {}
        for name in [n for n in sys.modules if n == "ragwatch" or n.startswith("ragwatch.")]:
            modules[name] = sys.modules.pop(name)
        sys.modules.update(saved)
    return Copy(f" ({checkout.resolve().name})", package, langchain, modules)


def measure(variants: list[Variant], requests: int, batch: int, warmup: int) -> float:
    for v in variants:
        v.enter()
        for _ in range(warmup):
            v.request()
        v.leave()
    gc.collect()
    clock = time.perf_counter_ns
    rounds = -(-requests // batch)
    started = time.perf_counter()
    for r in range(rounds):
        n = min(batch, requests - r * batch)
        shift = r % len(variants)
        for v in variants[shift:] + variants[:shift]:
            append, request = v.samples.append, v.request
            v.enter()
            for _ in range(n):
                t0 = clock()
                request()
                append(clock() - t0)
            v.leave()
    return time.perf_counter() - started


def percentile(sorted_ns: Sequence[int], q: float) -> float:
    k = max(0, min(len(sorted_ns) - 1, round(q / 100 * len(sorted_ns) + 0.5) - 1))
    return float(sorted_ns[k])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="timed requests per variant")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--compare", type=Path, metavar="DIR", help="also time another checkout's ragwatch")
    args = parser.parse_args(argv)

    copies = [Copy("", ragwatch, ragwatch.integrations.langchain)]
    if args.compare:
        copies.append(import_copy(args.compare))
    variants = (
        chain_variants(copies)
        + replay_variants(copies)
        + agent_variants(copies)
        + rerank_variants(copies)
        + otel_variants()
        + decorator_variants(copies)
        + auto_variants(copies)
    )
    for v in variants:
        v.enter()
        answered = v.request()
        v.leave()
        if answered != ANSWER:  # a broken variant would otherwise look fast
            raise SystemExit(f"variant {v.name!r} did not return the answer")
    wall = measure(variants, args.requests, args.batch, args.warmup)

    rows: list[list[str]] = []
    figures: dict[str, dict[str, float]] = {}
    base_mean = base_p50 = 0.0
    group = None
    for v in variants:
        s = sorted(v.samples)
        mean = sum(s) / len(s) / 1000
        p50, p99 = percentile(s, 50) / 1000, percentile(s, 99) / 1000
        if v.group != group:
            if group is not None:
                rows.append([])
            group = v.group
        if v.baseline:
            base_mean, base_p50 = mean, p50
            versus = "baseline"
        else:
            versus = f"+{p50 - base_p50:.1f} µs ({p50 / base_p50:.2f}×) / +{mean - base_mean:.1f} µs"
        rows.append([v.name, f"{p50:.1f}", f"{p99:.1f}", f"{mean:.1f}", versus])
        figures[v.name] = {"p50_us": p50, "p99_us": p99, "mean_us": mean}
    print(f"ragwatch source: {source_fingerprint()}")
    if args.compare:
        print(f"rows marked {copies[1].suffix.strip()}: {Path(copies[1].package.__file__).parent}")
    print_table(
        f"Integration overhead, {args.requests:,} requests per variant, "
        f"interleaved in batches of {args.batch} ({wall:.1f} s)",
        ["variant", "p50 µs", "p99 µs", "mean µs", "overhead vs its baseline: p50 / mean"],
        rows,
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
