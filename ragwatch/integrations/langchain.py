"""A LangChain callback handler: one chain invocation becomes one ragwatch run, nothing else changed.

    handler = RagwatchCallbackHandler(rw)
    chain.invoke(question, config={"callbacks": [handler]})

LangChain reports every step of a chain to its callback handlers; this one maps them onto ragwatch's
stages. The outermost chain is the request (the pipeline stage, its run sampled for scoring); a retriever
is the retrieval stage, with its ``Document``s as the run's chunks (ids, ranks, and the scores vector stores
and rerankers put in ``metadata``); a chat model or LLM is the generation stage, with time to first token
when it streams, the tokens it reported in ``usage_metadata`` (cached ones included) and the model id in
``response_metadata``. Inside an ASGI middleware run or a watched pipeline the chain joins that run.
Embedding classes send no callbacks: :func:`instrument` watches their methods instead
(:mod:`ragwatch.integrations.langchain_embeddings`).

The handler is driven by LangChain's events, not by wrapping calls, so it cannot change what a step
returns: degraded-mode retrieval policies (score floor, reranker, lower ``top_k``) need the decorator on
the retriever instead. Every method is guarded: an error here is counted in
``ragwatch_internal_errors_total`` and the chain carries on. The handler keeps per-step state only between
a step's start and end events (keyed by LangChain's run ids), so one handler serves concurrent chains.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.runnables.config import var_child_runnable_config
from opentelemetry import context as otel_context
from opentelemetry import trace

from ragwatch.capture.calls import Call, GenerateCall, PipelineCall, RerankCall, RetrieveCall, ToolCall
from ragwatch.capture.record import restore_retrieved
from ragwatch.capture.run import enter_framework_call
from ragwatch.integrations import langchain_embeddings
from ragwatch.integrations.langchain_embeddings import EmbeddingsPatch

if TYPE_CHECKING:
    from ragwatch.capture.watch import RagWatch

__all__ = ["AsyncRagwatchCallbackHandler", "Instrumented", "RagwatchCallbackHandler", "instrument", "uninstrument"]

_perf = time.perf_counter
_QUESTION_KEYS = ("question", "query", "input", "q", "prompt")
_ANSWER_KEYS = ("answer", "output", "result", "text", "content")


class _Root:
    """The outermost chain of one invocation: its pipeline call (which may have joined an outer run), the
    key of its own run id, which tells its end from the end of a chain inside it, and whether its start
    event carried the question (streamed invocations start with ``{'input': ''}``)."""

    __slots__ = ("asked", "call", "key")

    def __init__(self, call: PipelineCall, key: int, asked: bool) -> None:
        self.call = call
        self.key = key
        self.asked = asked


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
    _roots: dict[int, _Root]  # every chain's (and tool's) run id (as int) -> the root chain it belongs to
    _calls: dict[int, Call]  # retriever, model and tool run ids (as int) -> their stage call
    _tools: set[int]  # run ids of the tools running now
    _inner: dict[int, RerankCall]  # a retriever's run id -> the retriever around it (adopted as a rerank)

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        try:
            parent = parent_run_id.int if parent_run_id is not None else _context_parent()
            if parent is not None:
                root = self._roots.get(parent)
                if root is not None:
                    self._roots[run_id.int] = root
                    return
                if parent_run_id is not None:  # a chain inside a step we do not follow (a tool, a model)
                    return
            key = run_id.int
            question = _question(inputs)
            self._roots[key] = _Root(PipelineCall(self._rw, question=question), key, question is not None)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        try:
            key = run_id.int
            root = self._roots.pop(key, None)
            if root is not None and root.key == key:
                if not root.asked:  # a stream's input arrives with its end: the user's question, not a rewrite
                    _ask(root.call.run, _question(kwargs.get("inputs")), root.call.owner)
                    if self._hold_for_steps(root):  # closed by its consumer: LangChain reports an end
                        root.call.finish(_answer(outputs), GeneratorExit())
                        return
                root.call.finish(_answer(outputs), None)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        try:
            key = run_id.int
            root = self._roots.pop(key, None)
            if root is not None and root.key == key:
                self._hold_for_steps(root)
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
            parent = parent_run_id.int if parent_run_id is not None else _context_parent()
            root = self._roots.get(parent) if parent is not None else None
            outer = self._calls.get(parent) if parent is not None and root is None else None
            if type(outer) is RetrieveCall:  # a retriever around a retriever (ContextualCompressionRetriever):
                outer = self._calls[parent] = RerankCall.adopt(outer)  # type: ignore[index]  # the outer reranks
            span = root.call.span if root is not None else (outer.span if outer is not None else None)
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
            elif outer is not None:
                call.run = outer.run
            _ask(call.run, query if isinstance(query, str) and query else None, False)
            self._calls[run_id.int] = call
            if isinstance(outer, RerankCall):
                self._inner[run_id.int] = outer
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        try:
            key = run_id.int
            call = self._calls.pop(key, None)
            if call is None:
                return
            run = call.run
            earlier = run.retrieved if run is not None else None
            call.finish(list(documents), None)
            outer = self._inner.pop(key, None)
            if outer is not None:  # an inner retrieval: part of the list the retriever around it reranks
                restore_retrieved(run, earlier)
                outer.inner_retrieved(list(documents))
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_tool_start(
        self,
        serialized: Any,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> None:
        try:
            parent = parent_run_id.int if parent_run_id is not None else _context_parent()
            root = self._roots.get(parent) if parent is not None else None
            if root is None:
                return
            key = run_id.int
            self._roots[key] = root  # chains and retrievers inside the tool belong to the request
            name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
            span = root.call.span
            token = otel_context.attach(trace.set_span_in_context(span)) if span is not None else None
            try:
                call = ToolCall(self._rw, str(name), input_str, kwargs.get("tool_call_id"))
            finally:
                if token is not None:
                    otel_context.detach(token)
            call.run = root.call.run
            self._calls[key] = call
            self._tools.add(key)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_done(run_id, None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_done(run_id, error)

    def _tool_done(self, run_id: UUID, error: BaseException | None) -> None:
        try:
            key = run_id.int
            self._roots.pop(key, None)
            self._tools.discard(key)
            call = self._calls.pop(key, None)
            if call is not None:
                call.finish(None, error)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._inner.pop(run_id.int, None)
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
            if token and type(call) is GenerateCall:  # TTFT, and the text so far if the call is cut short
                call.on_item(token)
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        try:
            call = self._calls.pop(run_id.int, None)
            if type(call) is GenerateCall:  # a model's run id: always its GenerateCall (_model_start)
                call.end_with(_generation(response))
        except Exception as exc:
            self._rw.guard.failed("capture", exc)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._step_error(error, run_id)

    # -- shared by the above ------------------------------------------------------------------------
    def _model_start(
        self, prompt: list[str], run_id: UUID, parent_run_id: UUID | None, metadata: Any, params: Any
    ) -> None:
        parent = parent_run_id.int if parent_run_id is not None else _context_parent()
        root = self._roots.get(parent) if parent is not None else None
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
        enter_framework_call(call)  # the openai SDK call the model makes is this generation

    def _hold_for_steps(self, root: _Root) -> bool:
        """True when steps of ``root`` are still running as it ends. At a stream's end only a consumer that
        stopped reading causes it: LangChain swallows the ``GeneratorExit`` of a sync stream, reports the
        chain's end, then drains the model's stream for its trace. At an error: an async stream closed early
        (the chain's error comes before its model's), a parallel branch still running when another failed.
        The running steps' calls then hold the run's hand-over (:meth:`Call.streaming`), so the listeners
        get it with the generation's model, tokens and cost, not before them. Only a stream's end and an
        error pay for the look (the calls running now, then the chains)."""
        if not root.call.owner:  # joined an outer run: its owner ends it
            return False
        run = root.call.run
        open_steps = False
        for call in list(self._calls.values()):  # copied in C: other threads' steps may end meanwhile
            if call.run is run:
                call.streaming()
                open_steps = True
        return open_steps or root in list(self._roots.values())  # one of its chains (by identity, in C)

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
        self._tools = set()
        self._inner = {}


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
        self._tools: set[int] = set()
        self._inner: dict[int, RerankCall] = {}

    _model_start = _Callbacks._model_start
    _hold_for_steps = _Callbacks._hold_for_steps
    _step_error = _Callbacks._step_error
    _tool_done = _Callbacks._tool_done
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
    on_tool_start = _async("on_tool_start")
    on_tool_end = _async("on_tool_end")
    on_tool_error = _async("on_tool_error")


class Instrumented(NamedTuple):
    """What :func:`instrument` installed: the global handler, and the watched embedding classes (None when
    they could not be watched)."""

    handler: RagwatchCallbackHandler
    embeddings: EmbeddingsPatch | None


def instrument(rw: RagWatch) -> Instrumented:
    """Add a handler to every LangChain run in the process, as if each ``invoke`` passed it in ``callbacks``
    (LangChain's configure hook: a context variable whose default is the handler, so threads and tasks
    started later see it too), and watch every ``Embeddings`` class as the ``embed`` stage (they send no
    callbacks: :mod:`ragwatch.integrations.langchain_embeddings`). Returns both, for :func:`uninstrument`.
    Do not also pass a handler of your own for the same ``rw``: each would record the request."""
    from langchain_core.tracers.context import register_configure_hook

    handler = RagwatchCallbackHandler(rw)
    register_configure_hook(ContextVar(f"ragwatch_langchain_{id(handler)}", default=handler), inheritable=True)
    try:
        embeddings: EmbeddingsPatch | None = langchain_embeddings.watch(rw)
    except Exception as exc:  # chains are still watched without it
        rw.guard.failed("capture", exc, f"could not watch LangChain embeddings: {type(exc).__name__}")
        embeddings = None
    return Instrumented(handler, embeddings)


def uninstrument(installed: Instrumented) -> None:
    """Stop adding the handler (from :func:`instrument`) to LangChain runs; unwatch the embedding classes."""
    from langchain_core.tracers.context import _configure_hooks

    for hook in list(_configure_hooks):
        if hook[0].get() is installed.handler:
            _configure_hooks.remove(hook)
    if installed.embeddings is not None:
        langchain_embeddings.unwatch(installed.embeddings)


# --------------------------------------------------------------------------------------------- internals


def _context_parent() -> int | None:
    """The run id (as int) of the step a callback without a parent runs in, from LangChain's context.

    A step invoked with the caller's own ``config={"callbacks": [...]}`` starts without a parent run:
    each attempt of ``with_fallbacks``'s ``invoke``/``ainvoke`` (LangChain passes the caller's config on),
    a retriever invoked with the handler inside a ``RunnableLambda``. LangChain still sets the step's
    child config in a context variable, whose callback manager names the step it runs in."""
    config = var_child_runnable_config.get()
    if not config:
        return None
    parent = getattr(config.get("callbacks"), "parent_run_id", None)
    return parent.int if isinstance(parent, UUID) else None


def _question(inputs: Any) -> str | None:
    """The question in a chain's input; None for an empty one (a stream's start event: ``{'input': ''}``).
    A LangGraph agent's input is its state, ``{"messages": [...]}``: the question is the last user message
    (else a tool's query would become the run's question)."""
    if isinstance(inputs, str):
        return inputs or None
    if isinstance(inputs, Mapping):
        for key in _QUESTION_KEYS:
            value = inputs.get(key)
            if isinstance(value, str) and value:
                return value
        messages = inputs.get("messages")
        if isinstance(messages, (list, tuple)):
            return _user_message(messages)
    return None


_USER_ROLES = ("human", "user")


def _user_message(messages: Sequence[Any]) -> str | None:
    """The text of the last user message among a chat's messages, in the forms LangChain accepts: message
    objects (``type == "human"``), ``(role, text)`` pairs and ``{"role", "content"}`` dicts."""
    for message in reversed(messages[-64:]):
        if isinstance(message, tuple) and len(message) == 2:
            role, content = message
        elif isinstance(message, Mapping):
            role, content = message.get("role"), message.get("content")
        else:
            role, content = getattr(message, "type", None), getattr(message, "content", None)
        if role in _USER_ROLES:
            return _text(content)
    return None


def _text(content: Any) -> str | None:
    """A message's text: a string, or the text parts of a multimodal content list."""
    if isinstance(content, str):
        return content or None
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, Mapping) else p for p in content]
        text = " ".join(p for p in parts if isinstance(p, str) and p)
        return text or None
    return None


def _ask(run: Any, question: str | None, overwrite: bool) -> None:
    """Give ``run`` its question: when it has none yet, or (``overwrite``) over a retriever's query."""
    if run is not None and question is not None and (overwrite or not run.question):
        run.question = question


def _answer(outputs: Any) -> str | None:
    """The chain's final answer text, when its output is text (a string, a message, a dict of one)."""
    if isinstance(outputs, str):
        return outputs
    content = getattr(outputs, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(outputs, Mapping):
        messages = outputs.get("messages")
        if isinstance(messages, list) and messages:  # a LangGraph agent's state: its last message answers
            content = getattr(messages[-1], "content", None)
            if isinstance(content, str) and content:
                return content
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
