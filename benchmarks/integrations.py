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
``OTel spans`` / ``+ RagwatchSpanProcessor``
    One request as an OpenInference-instrumented service traces it — a CHAIN root, a RETRIEVER span with
    three documents and an LLM span with model, token counts and the answer — through an SDK
    ``TracerProvider`` with a ``BatchSpanProcessor`` around a dropping exporter; then the same provider
    with ``RagwatchSpanProcessor`` added ahead of it.
``bare functions`` / ``decorators``
    ``overhead.py``'s request (a pipeline calling a retriever and an LLM function) bare and decorated,
    metrics only.

ragwatch runs with ``sampling=False, degraded_mode=False`` (the capture layer, as in ``overhead.py``).

Usage::

    python benchmarks/integrations.py                  # 3,000 requests per variant
    python benchmarks/integrations.py --requests 10000 --json results.json
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
from ragwatch.integrations.langchain import RagwatchCallbackHandler
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


class NoopHandler(BaseCallbackHandler):
    """Any handler at all: LangChain then runs its callback machinery for every step of the chain."""

    run_inline = True


class DropExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def provider(*processors: Any) -> TracerProvider:
    tp = TracerProvider()
    for p in processors:
        tp.add_span_processor(p)
    tp.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=2048))
    return tp


def watch(tracing: bool, tracer_provider: Any = None) -> ragwatch.RagWatch:
    return ragwatch.RagWatch(
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


def chain_variants() -> list[Variant]:
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from: {context}"), ("human", "{question}")])
    model = GenericFakeChatModel(messages=itertools.repeat(MESSAGE))
    chain = (
        {
            "context": Retriever() | (lambda docs: "\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | model
        | StrOutputParser()
    )
    noop = {"callbacks": [NoopHandler()]}
    metrics_only = {"callbacks": [RagwatchCallbackHandler(watch(False))]}
    traced = {"callbacks": [RagwatchCallbackHandler(watch(True, provider()))]}
    return [
        Variant("LCEL chain, bare", "langchain", lambda: chain.invoke("How much for hotels?"), baseline=True),
        Variant(
            "+ a no-op handler (LangChain's own cost)",
            "langchain",
            lambda: chain.invoke("How much for hotels?", config=noop),
        ),
        Variant(
            "+ handler, metrics only", "langchain", lambda: chain.invoke("How much for hotels?", config=metrics_only)
        ),
        Variant(
            "+ handler, tracing + metrics", "langchain", lambda: chain.invoke("How much for hotels?", config=traced)
        ),
    ]


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


def decorator_variants() -> list[Variant]:
    def bare() -> Callable[[], str]:
        def retrieve(question: str, top_k: int = 3) -> list[Document]:
            return DOCS

        def generate(question: str, chunks: Any) -> AIMessage:
            return MESSAGE

        def answer(question: str) -> str:
            return generate(question, retrieve(question, top_k=3)).content  # type: ignore[return-value]

        return lambda: answer("How much for hotels?")

    rw = watch(False)

    @rw.retriever
    def retrieve(question: str, top_k: int = 3) -> list[Document]:
        return DOCS

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, chunks: Any) -> AIMessage:
        return MESSAGE

    @rw.pipeline
    def answer(question: str) -> str:
        return generate(question, retrieve(question, top_k=3)).content  # type: ignore[return-value]

    return [
        Variant("bare functions", "decorators", bare(), baseline=True),
        Variant("decorators, metrics only", "decorators", lambda: answer("How much for hotels?")),
    ]


def measure(variants: list[Variant], requests: int, batch: int, warmup: int) -> float:
    for v in variants:
        for _ in range(warmup):
            v.request()
    gc.collect()
    clock = time.perf_counter_ns
    rounds = -(-requests // batch)
    started = time.perf_counter()
    for r in range(rounds):
        n = min(batch, requests - r * batch)
        shift = r % len(variants)
        for v in variants[shift:] + variants[:shift]:
            append, request = v.samples.append, v.request
            for _ in range(n):
                t0 = clock()
                request()
                append(clock() - t0)
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
    args = parser.parse_args(argv)

    variants = chain_variants() + otel_variants() + decorator_variants()
    for v in variants:
        if v.request() != ANSWER:  # a broken variant would otherwise look fast
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
