"""Adapters for the stacks RAG teams already run: each turns that stack's own hooks into ragwatch runs.

Every module here imports its framework, so each is an optional extra (``pip install ragwatch[langchain]``
and so on) and none is imported by ``import ragwatch``:

- :mod:`ragwatch.integrations.langchain` — a callback handler for LangChain chains, retrievers, chat models
  (and :mod:`~ragwatch.integrations.langchain_embeddings`: its ``Embeddings`` classes, which send no callbacks);
- :mod:`ragwatch.integrations.llamaindex` — an event handler for llama-index-core's instrumentation dispatcher
  (with :mod:`~ragwatch.integrations.llamaindex_runs`, chat turns and agent runs, and
  :mod:`~ragwatch.integrations.llamaindex_streams`, streamed answers dropped unread);
- :mod:`ragwatch.integrations.openai` — ``instrument(client, rw)`` for ``OpenAI`` / ``AsyncOpenAI`` clients;
- :mod:`ragwatch.integrations.otel` — a span processor reading spans other instrumentations already emit.

:func:`instrument` does the process-wide form of the first three for whichever of them is installed, the
way ``openlit.init()`` or Phoenix's ``register(auto_instrument=True)`` do; ``RagWatch(...,
auto_instrument=True)`` calls it. The explicit per-framework calls stay for code that wants one of them only.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragwatch.capture.watch import RagWatch

__all__ = ["FRAMEWORKS", "instrument", "uninstrument"]

#: what :func:`instrument` looks for: our name -> the package's import name
FRAMEWORKS = {"langchain": "langchain_core", "llamaindex": "llama_index.core", "openai": "openai"}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module without a spec
        return False


def instrument(rw: RagWatch, *, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Instrument every supported framework that is installed (``only``: those of them named), for every
    client and chain in the process: LangChain through a global callback handler and its watched
    ``Embeddings`` classes, LlamaIndex through its root dispatcher, openai through its resource classes.
    Calling it again for the same ``rw`` adds nothing. Returns what was instrumented, by framework (also in
    ``rw.instrumented``); a framework that fails to instrument is counted in
    ``ragwatch_internal_errors_total`` and skipped."""
    unknown = set(only or ()) - set(FRAMEWORKS)
    if unknown:
        from ragwatch.errors import ConfigError

        raise ConfigError(f"unknown frameworks {sorted(unknown)}; known: {sorted(FRAMEWORKS)}")
    done: dict[str, Any] = {}
    for name, module in FRAMEWORKS.items():
        if (only is not None and name not in only) or name in rw.instrumented or not _installed(module):
            continue
        try:
            done[name] = _instrument_one(rw, name)
        except Exception as exc:  # an incompatible framework version: ragwatch carries on without it
            rw.guard.failed("capture", exc, f"could not instrument {name}: {type(exc).__name__}")
    rw.instrumented.update(done)
    return done


def _instrument_one(rw: RagWatch, name: str) -> Any:
    if name == "langchain":
        from ragwatch.integrations import langchain

        return langchain.instrument(rw)
    if name == "llamaindex":
        from ragwatch.integrations import llamaindex

        return llamaindex.instrument(rw)
    from ragwatch.integrations import openai

    return openai.instrument_sdk(rw)


def uninstrument(rw: RagWatch) -> None:
    """Undo :func:`instrument` for ``rw``."""
    for name, handle in list(rw.instrumented.items()):
        if name == "langchain":
            from ragwatch.integrations import langchain

            langchain.uninstrument(handle)
        elif name == "llamaindex":
            from ragwatch.integrations import llamaindex

            llamaindex.uninstrument(handle)
        elif name == "openai":
            from ragwatch.integrations import openai

            openai.uninstrument_sdk(handle)
        del rw.instrumented[name]
