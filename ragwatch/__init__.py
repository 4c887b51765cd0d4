"""ragwatch: watch a live RAG service — latency, tokens, cost, traces, and (with workers) answer quality.

Quick start::

    import ragwatch
    rw = ragwatch.RagWatch(service="kb-qa")

    @rw.retriever
    def retrieve(question: str, top_k: int = 5): ...

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, chunks) -> str: ...

    @rw.pipeline
    def answer(question: str) -> str:
        return generate(question, retrieve(question))
"""

from __future__ import annotations

from ragwatch._version import __version__
from ragwatch.capture.asgi import RagwatchMiddleware
from ragwatch.capture.chunks import Chunk, normalize_chunks
from ragwatch.capture.pricing import Price, PricingTable
from ragwatch.capture.responses import Usage
from ragwatch.capture.run import Run, current_run, force_sample, suppress
from ragwatch.capture.watch import RagWatch
from ragwatch.errors import CaptureError, ChunkError, ConfigError, QueueError, RagwatchError, ResponseError
from ragwatch.metrics.exposition import metrics_asgi_app, start_metrics_server
from ragwatch.settings import Settings, load_settings

__all__ = [
    "CaptureError",
    "Chunk",
    "ChunkError",
    "ConfigError",
    "Price",
    "PricingTable",
    "QueueError",
    "RagWatch",
    "RagwatchError",
    "RagwatchMiddleware",
    "ResponseError",
    "Run",
    "Settings",
    "Usage",
    "__version__",
    "current_run",
    "force_sample",
    "load_settings",
    "metrics_asgi_app",
    "normalize_chunks",
    "start_metrics_server",
    "suppress",
]
