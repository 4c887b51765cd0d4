"""A LangChain callback handler: one chain invocation becomes one ragwatch run, nothing else changed.

    handler = RagwatchCallbackHandler(rw)
    chain.invoke(question, config={"callbacks": [handler]})

LangChain reports every step of a chain to its callback handlers; this one maps them onto ragwatch's
stages. The outermost chain is the request (the pipeline stage, its run sampled for scoring); a retriever
is the retrieval stage, with its ``Document``s as the run's chunks (ids, ranks, and the scores vector stores
and rerankers put in ``metadata``); a chat model or LLM is the generation stage, with time to first token
when it streams, the tokens it reported in ``usage_metadata`` (cached ones included) and the model id in
``response_metadata``. Inside an ASGI middleware run or a watched pipeline the chain joins that run.

The handler is driven by LangChain's events, not by wrapping calls, so it cannot change what a step
returns: degraded-mode retrieval policies (score floor, reranker, lower ``top_k``) need the decorator on
the retriever instead. Every method is guarded: an error here is counted in
``ragwatch_internal_errors_total`` and the chain carries on. The handler keeps per-step state only between
a step's start and end events (keyed by LangChain's run ids), so one handler serves concurrent chains.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from opentelemetry import context as otel_context
from opentelemetry import trace

from ragwatch.capture.stages import Call, GenerateCall, PipelineCall, RetrieveCall

if TYPE_CHECKING:
    from ragwatch.capture.watch import RagWatch

__all__ = ["AsyncRagwatchCallbackHandler", "RagwatchCallbackHandler"]

_perf = time.perf_counter
_QUESTION_KEYS = ("question", "query", "input", "q", "prompt")
_ANSWER_KEYS = ("answer", "output", "result", "text", "content")


class _Root:
    """The outermost chain of one invocation: its pipeline call (which may have joined an outer run), and
    the key of its own run id, which tells its end from the end of a chain inside it."""

    __slots__ = ("call", "key")

    def __init__(self, call: PipelineCall, key: int) -> None:
        self.call = call
        self.key = key


class _Callbacks:
    """The callback methods, written once; the two handler classes differ only in how LangChain calls
    them (``run_inline``: in the chain's own thread or event loop, never in an executor).

    LangChain reports every runnable of a chain, so a small RAG chain sends some 18 events per invocation,
    14 of them for chains (the sequence, each step, each branch of a parallel map) that only need mapping
    to their root. Every method is therefore one flat function: its own ``try`` (an error is counted, never
    raised into the chain) rather than a guarding wrapper, and state keyed by ``UUID.int``, which Python
    hashes and compares in C where a ``UUID`` key runs ``UUID.__hash__`` and ``__eq__`` in Python.
    """

    _rw: RagWatch
    _roots: dict[int, _Root]  # every chain's run id (as int) -> the root chain it belongs to
    _calls: dict[int, Call]  # retriever and model run ids (as int) -> their stage call

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        try:
            if parent_run_id is not None:
                root = self._roots.get(parent_run_id.int)
                if root is not None:  # else a chain inside a step we do not follow (a tool, a model)
                    self._roots[run_id.int] = root
                return
            key = run_id.int
            self._roots[key] = _Root(PipelineCall(self._rw, question=_question(inputs)), key)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        try:
            key = run_id.int
            root = self._roots.pop(key, None)
            if root is not None and root.key == key:
                root.call.finish(_answer(outputs), None)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        try:
            key = run_id.int
            root = self._roots.pop(key, None)
            if root is not None and root.key == key:
                root.call.finish(None, error)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_retriever_start(
        self,
        serialized: Any,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            root = self._roots.get(parent_run_id.int) if parent_run_id is not None else None
            span = root.call.span if root is not None else None
            if span is None:
                call = RetrieveCall(self._rw)
            else:  # LangChain's steps run in contexts of their own, where the pipeline span is not current
                token = otel_context.attach(trace.set_span_in_context(span))
                try:
                    call = RetrieveCall(self._rw)
                finally:
                    otel_context.detach(token)
            if root is not None:
                call.run = root.call.run
            run = call.run
            if run is not None and run.question is None and isinstance(query, str):
                run.question = query
            self._calls[run_id.int] = call
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        try:
            call = self._calls.pop(run_id.int, None)
            if call is not None:
                call.finish(list(documents), None)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._step_error(error, run_id)

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            prompt = [m.content for batch in messages for m in batch if isinstance(getattr(m, "content", None), str)]
            self._model_start(prompt, run_id, parent_run_id, metadata, invocation_params)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_llm_start(
        self,
        serialized: Any,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            self._model_start(list(prompts), run_id, parent_run_id, metadata, invocation_params)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_llm_new_token(self, token: str | list[str | dict[str, Any]], *, run_id: UUID, **kwargs: Any) -> None:
        try:
            call = self._calls.get(run_id.int)
            if call is not None and token and type(call) is GenerateCall and call.ttft is None:
                call.ttft = _perf() - call.start
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        try:
            call = self._calls.pop(run_id.int, None)
            if call is not None:
                call.finish(_generation(response), None)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._step_error(error, run_id)

    # -- shared by the above ------------------------------------------------------------------------
    def _model_start(
        self, prompt: list[str], run_id: UUID, parent_run_id: UUID | None, metadata: Any, params: Any
    ) -> None:
        root = self._roots.get(parent_run_id.int) if parent_run_id is not None else None
        model, provider = _model_of(metadata, params)
        span = root.call.span if root is not None else None
        if span is None:
            call = GenerateCall(self._rw, model, provider, (prompt,), None)
        else:
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                call = GenerateCall(self._rw, model, provider, (prompt,), None)
            finally:
                otel_context.detach(token)
        if root is not None:
            call.run = root.call.run
        self._calls[run_id.int] = call

    def _step_error(self, error: BaseException, run_id: UUID) -> None:
        try:
            call = self._calls.pop(run_id.int, None)
            if call is not None:
                call.finish(None, error)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)


class RagwatchCallbackHandler(_Callbacks, BaseCallbackHandler):
    """Pass in ``config={"callbacks": [RagwatchCallbackHandler(rw)]}``; works for ``invoke``, ``stream``,
    ``batch`` and their async forms (it runs inline: its work is a few dictionary operations, no I/O)."""

    run_inline = True
    raise_error = False

    def __init__(self, rw: RagWatch) -> None:
        self._rw = rw
        self._roots = {}
        self._calls = {}


def _async(name: str) -> Any:
    sync = getattr(_Callbacks, name)

    async def method(self: Any, *args: Any, **kwargs: Any) -> None:
        sync(self, *args, **kwargs)

    method.__name__ = name
    return method


class AsyncRagwatchCallbackHandler(AsyncCallbackHandler):
    """The same handler for code that wants an :class:`AsyncCallbackHandler` (async-only callback lists)."""

    run_inline = True
    raise_error = False

    def __init__(self, rw: RagWatch) -> None:
        self._rw = rw
        self._roots: dict[int, _Root] = {}
        self._calls: dict[int, Call] = {}

    _model_start = _Callbacks._model_start
    _step_error = _Callbacks._step_error
    on_chain_start = _async("on_chain_start")
    on_chain_end = _async("on_chain_end")
    on_chain_error = _async("on_chain_error")
    on_retriever_start = _async("on_retriever_start")
    on_retriever_end = _async("on_retriever_end")
    on_retriever_error = _async("on_retriever_error")
    on_chat_model_start = _async("on_chat_model_start")
    on_llm_start = _async("on_llm_start")
    on_llm_new_token = _async("on_llm_new_token")
    on_llm_end = _async("on_llm_end")
    on_llm_error = _async("on_llm_error")


# --------------------------------------------------------------------------------------------- internals


def _question(inputs: Any) -> str | None:
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, Mapping):
        for key in _QUESTION_KEYS:
            value = inputs.get(key)
            if isinstance(value, str):
                return value
    return None


def _answer(outputs: Any) -> str | None:
    """The chain's final answer text, when its output is text (a string, a message, a dict of one)."""
    if isinstance(outputs, str):
        return outputs
    content = getattr(outputs, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(outputs, Mapping):
        for key in _ANSWER_KEYS:
            value = outputs.get(key)
            if isinstance(value, str):
                return value
            content = getattr(value, "content", None)
            if isinstance(content, str):
                return content
    return None


def _model_of(metadata: Any, params: Any) -> tuple[str | None, str | None]:
    """The requested model and provider, from LangChain's tracing metadata (``ls_model_name``,
    ``ls_provider``) or the invocation parameters."""
    model = provider = None
    if isinstance(metadata, Mapping):
        model = metadata.get("ls_model_name")
        provider = metadata.get("ls_provider")
    if not isinstance(model, str) and isinstance(params, Mapping):
        model = params.get("model") or params.get("model_name")
    return (model if isinstance(model, str) and model else None, provider if isinstance(provider, str) else None)


def _generation(response: Any) -> Any:
    """What the generation stage reads from an ``LLMResult``: the chat message itself (text, its
    ``usage_metadata`` and ``response_metadata``), or for a text LLM its text and the ``llm_output``."""
    generations = getattr(response, "generations", None)
    first = generations[0][0] if generations and generations[0] else None
    if first is None:
        return None
    message = getattr(first, "message", None)
    if message is not None:
        return message
    output = getattr(response, "llm_output", None) or {}
    return {"text": first.text, "usage": output.get("token_usage"), "model": output.get("model_name")}
