"""The README quickstart, runnable: a toy RAG service watched by ragwatch, metrics printed at the end.

python examples/quickstart.py
"""

from __future__ import annotations

import random

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from prometheus_client import CollectorRegistry, generate_latest

import ragwatch

DOCS = {
    "exp-1": "Hotel costs are reimbursed up to 600 CNY per night in tier-1 cities.",
    "exp-2": "Taxi receipts must be submitted within 30 days of travel.",
    "leave-1": "Employees receive 15 days of paid annual leave per year.",
    "it-1": "Laptops are replaced every three years by the IT service desk.",
}

registry = CollectorRegistry()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=lambda s: f"span: {s.name}\n")))
rw = ragwatch.RagWatch(service="kb-qa", registry=registry, tracer_provider=provider)


@rw.retriever
def retrieve(question: str, top_k: int = 3) -> list[dict]:
    words = set(question.lower().split())
    scored = [
        {"id": doc_id, "text": text, "score": len(words & set(text.lower().split())) / len(words)}
        for doc_id, text in DOCS.items()
    ]
    return sorted(scored, key=lambda d: -d["score"])[:top_k]


@rw.llm(model="gpt-4o-mini")
def generate(question: str, chunks: list[dict]):
    answer = chunks[0]["text"]
    for piece in answer.split(" "):  # a stream of deltas, like an SDK with stream=True
        yield piece + " "


@rw.pipeline
def answer(question: str) -> str:
    return "".join(generate(question, retrieve(question))).strip()


def main() -> None:
    random.seed(7)
    questions = ["how much hotel per night", "when submit taxi receipts", "how many days annual leave"]
    for q in questions:
        print(f"Q: {q}\nA: {answer(q)}\n")
    print("--- ragwatch metrics (excerpt) ---")
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith(
            (
                "ragwatch_stage_duration_seconds_count",
                "ragwatch_tokens_total",
                "ragwatch_time_to_first_token_seconds_count",
                "ragwatch_retrieved_chunks_sum",
            )
        ):
            print(line)


if __name__ == "__main__":
    main()
