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

from typing import Any

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


def instrument(rw: RagWatch, *, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Watch every supported framework that is installed — langchain-core (a callback handler on every
    chain, and the ``embed`` stage on every ``Embeddings`` class), llama-index-core (its root dispatcher),
    openai (every client's chat, Responses and embeddings calls) — the way ``openlit.init()`` does; ``only``
    names some of them (``"langchain"``, ``"llamaindex"``, ``"openai"``). Same as
    ``RagWatch(..., auto_instrument=True)``; calling it again adds nothing. Returns what it instrumented, by
    framework. The integrations load only when this is called, so ``import ragwatch`` stays light;
    :func:`ragwatch.integrations.instrument` has the details."""
    from ragwatch.integrations import instrument as instrument_all

    return instrument_all(rw, only=only)


def uninstrument(rw: RagWatch) -> None:
    """Undo :func:`instrument` (and ``auto_instrument=True``) for ``rw``: its hooks come off every framework."""
    from ragwatch.integrations import uninstrument as uninstrument_all

    uninstrument_all(rw)


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
    "instrument",
    "load_settings",
    "metrics_asgi_app",
    "normalize_chunks",
    "start_metrics_server",
    "suppress",
    "uninstrument",
]
