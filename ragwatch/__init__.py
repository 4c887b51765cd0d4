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

__version__ = "0.1.0"

from .asgi import RagwatchMiddleware
from .chunks import Chunk, normalize_chunks
from .errors import CaptureError, ChunkError, ConfigError, QueueError, RagwatchError, ResponseError
from .exposition import metrics_asgi_app, start_metrics_server
from .pricing import Price, PricingTable
from .responses import Usage
from .run import Run, current_run, force_sample, suppress
from .settings import Settings, load_settings
from .watch import RagWatch

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
