"""Shared fixtures: a fresh Prometheus registry and an in-memory span exporter per test."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.capture.run import Run
from ragwatch.guard import Guard
from ragwatch.metrics.catalog import ProducerMetrics, families
from ragwatch.queue.contract import Queue
from ragwatch.queue.producer import Producer
from ragwatch.sampling.sample import Sample, SampleChunk
from tests.openai_stub import OpenAIStub
from tests.servers import RedisServer

# LlamaIndex's OpenAILike class needs openai<3: its module runs in a venv of its own (scripts/test.sh, phase
# "openai-like test", which sets LLAMAINDEX_OPENAI_VENV=1), never in this one — not collected, not skipped
if os.environ.get("LLAMAINDEX_OPENAI_VENV") != "1":
    collect_ignore = ["test_llamaindex_openai_like.py"]


class Spans:
    """Finished spans of one test, looked up by name."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> ReadableSpan:
        found = [s for s in self.all() if s.name == name]
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.all()]}"
        return found[0]


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def spans() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    yield Spans(exporter)
    exporter.clear()


@pytest.fixture
def provider(spans: Spans) -> TracerProvider:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans.exporter))
    return tp


@pytest.fixture
def rw(registry: CollectorRegistry, provider: TracerProvider) -> ragwatch.RagWatch:
    return ragwatch.RagWatch("svc", registry=registry, tracer_provider=provider)


@pytest.fixture
def runs(rw: ragwatch.RagWatch) -> list[ragwatch.Run]:
    """Every run ``rw`` finishes during the test, in order."""
    found: list[ragwatch.Run] = []
    rw.add_listener(found.append)
    return found


@pytest.fixture
def scoring(
    registry: CollectorRegistry, provider: TracerProvider
) -> Iterator[tuple[ragwatch.RagWatch, list[ragwatch.Run]]]:
    """A service that samples every request and scores it in process (a memory:// queue of its own), with
    tracing; and the runs it finished."""
    rw = ragwatch.RagWatch(
        "svc",
        registry=registry,
        tracer_provider=provider,
        redis_url=f"memory://scoring-{uuid.uuid4().hex[:8]}",
        sample_rate=1.0,
        flush_interval=0.02,
        scoring_max_per_second=1000.0,
    )
    found: list[ragwatch.Run] = []
    rw.add_listener(found.append)
    try:
        yield rw, found
    finally:
        rw.close(1)


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    """A real HTTP server speaking the OpenAI protocol (:mod:`tests.openai_stub`)."""
    with OpenAIStub() as server:
        yield server


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A sample's value, 0.0 when the series does not exist (yet)."""
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0) -> float:
    """Seconds until ``predicate()`` held; fails after ``timeout``. What a background thread (the flusher,
    the in-process scorer, the mode watcher, a counter bumped after the reply was sent) does is awaited,
    never assumed done when the request returns."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "condition not reached in time"
        time.sleep(0.01)
    return time.monotonic() - started


def stage_count(registry: CollectorRegistry, stage: str, outcome: str = "ok", service: str = "svc") -> float:
    return sample(registry, "ragwatch_stage_duration_seconds_count", service=service, stage=stage, outcome=outcome)


def stage_outcomes(registry: CollectorRegistry, stage: str) -> dict[str, float]:
    """How many calls of ``stage`` ended ``ok``, ``error`` and ``cancelled``."""
    return {o: stage_count(registry, stage, o) for o in ("ok", "error", "cancelled")}


def no_internal_errors(registry: CollectorRegistry) -> bool:
    """No capture, response, stream or tracing error of ragwatch's own was counted."""
    return all(
        sample(registry, "ragwatch_internal_errors_total", component=c) == 0
        for c in ("capture", "response", "stream", "tracing")
    )


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of the test's own, for a test that fills, reconfigures or stops it (the session's
    ``redis_server`` is shared)."""
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


def cap_memory(client: Any, extra: int) -> None:
    """``maxmemory`` = what Redis uses now + ``extra`` bytes, with ``noeviction``: a Redis that fills up."""
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", used + extra)


def quick_producer(
    queue: Queue, build: Callable[[Run, str], bytes], registry: CollectorRegistry, **options: Any
) -> Producer:
    """A producer counting into ``registry`` whose flusher a test need not wait for: a flush every 10 ms
    and a retry backoff capped at 0.2 s unless ``options`` say otherwise."""
    return Producer(
        queue,
        build,
        metrics=families(ProducerMetrics, registry),
        guard=Guard(None),
        **{"flush_interval": 0.01, "max_backoff": 0.2, **options},
    )


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture(autouse=True)
def _fresh_memory_queues() -> Iterator[None]:
    from ragwatch.queue.memory import MemoryQueue

    MemoryQueue.reset_all()
    yield
    MemoryQueue.reset_all()


def judge_sample(question: str | None, answer: str | None, chunks: list[str]) -> Sample:
    """A sample for judge tests: chunk ids c1, c2, … in the given order."""
    return Sample(
        sample_id="s1",
        service="test",
        question=question,
        answer=answer,
        chunks=[SampleChunk(id=f"c{i + 1}", rank=i, text=text) for i, text in enumerate(chunks)],
        created_at=0.0,
    )


def hotel_pipeline(rw: ragwatch.RagWatch, chunks: list[dict[str, Any]]) -> Callable[[str], str]:
    """A watched retriever (returning ``chunks``), LLM and pipeline: the smallest run that gets sampled."""

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return chunks

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, found: Any) -> str:
        return "Hotels are reimbursed up to 600 CNY per night."

    @rw.pipeline
    def answer(question: str) -> str:
        return generate(question, retrieve(question))

    return answer


@pytest.fixture
def close_openai_clients() -> Iterator[None]:
    """Close every OpenAI SDK client the test built (directly or inside LangChain's ChatOpenAI).

    The tests talk to the local OpenAI-protocol server through real SDK clients; left open, a client's pooled
    socket is closed by the garbage collector at some later moment, and the ResourceWarning (an error under
    ``filterwarnings = error``) fails whichever test happens to be running then.
    """
    import asyncio

    openai = pytest.importorskip("openai")
    made: list[Any] = []
    originals = {cls: cls.__init__ for cls in (openai.OpenAI, openai.AsyncOpenAI)}

    def tracking(cls: type) -> Callable[..., None]:
        original = originals[cls]

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            made.append(self)

        return __init__

    for cls in originals:
        cls.__init__ = tracking(cls)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.__init__ = original  # type: ignore[method-assign]
        for client in made:
            if isinstance(client, openai.AsyncOpenAI):
                asyncio.run(client.close())
            else:
                client.close()


#: Four facts about a bridge and a faithful five-claim answer from them: tests of one invented number among
#: true claims (the per-answer hallucination_rate against mean faithfulness).
BRIDGE_FACTS = [
    "The old stone bridge over the river Ems is 120 meters long and was built in 1990.",
    "The bridge carries four lanes of traffic and a bike path on its south side.",
    "It was designed by the engineer Anna Berg and cost 30 million euros.",
    "About 18,000 vehicles cross the bridge every day.",
]
BRIDGE_ANSWER = (
    "The stone bridge over the Ems is 120 meters long. It was built in 1990. The bridge carries four lanes of "
    "traffic. It was designed by Anna Berg. About 18,000 vehicles cross it every day."
)
