"""LlamaIndex: an instrumentation handler on llama-index-core's dispatcher; each query becomes one run.

    from ragwatch.integrations.llamaindex import instrument
    instrument(rw)                      # the root dispatcher: every query engine in the process
    index.as_query_engine().query("...")

llama-index-core reports what its components do as events on a dispatcher: a query starts and ends, a
retriever returns ``NodeWithScore``s, an LLM chat or completion starts, streams, ends. The handler maps them
onto ragwatch's stages: the query is the request (its run sampled for scoring), the retrieval its chunks
(node ids, scores, ranks), each LLM call a generation with time to first token when it streams and the
usage the provider reported in ``response.raw`` (estimated when there is none, as with ``MockLLM``).

A query's run is made current while the query runs (so ragwatch decorators inside it join the run). A
streaming query calls its LLM only as the host reads ``response.response_gen``, after the query returned:
that generator is handed back proxied, so the run is current around each step and ends when it is drained —
or, dropped unread or half read, when the proxy is collected (a ``cancelled`` run, its open generation ended
and forgotten: :mod:`~ragwatch.integrations.llamaindex_streams`). Inside a watched pipeline or an ASGI
middleware run, queries join that run. A query that raises is seen by the span handler (the dispatcher
reports no end event then) and recorded as an error.

Chat engine turns (``chat``, ``achat``, ``stream_chat``, ``astream_chat``) and agent runs (``FunctionAgent``,
``AgentWorkflow``) send no query events: the span handler opens their run from their dispatcher span (the
question is the user's message) and maps every span below it to that run, since a workflow's steps run in
tasks of their own. An agent's answer is its final one, never a ``QueryEngineTool``'s inner answer; the
retrievals its tools make add up; each ``call_tool`` step is an ``execute_tool`` span. A ``CustomLLM``
method that runs another (``acomplete`` runs ``complete``) is one generation. Every step is guarded:
an error in ragwatch is counted in ``ragwatch_internal_errors_total``, and the query carries on. As with
LangChain, events cannot change results: degraded-mode retrieval policies need the retriever decorator.
"""

from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent, EmbeddingStartEvent
from llama_index.core.instrumentation.events.exception import ExceptionEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatInProgressEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionInProgressEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from opentelemetry import context as otel_context
from opentelemetry import trace
from pydantic import PrivateAttr

from ragwatch.capture.calls import (
    Call,
    EmbedCall,
    GenerateCall,
    PipelineCall,
    RerankCall,
    RetrieveCall,
    RunStreamCall,
    ToolCall,
)
from ragwatch.capture.record import is_stream, record_rerank, restore_retrieved
from ragwatch.capture.responses import extract_model, extract_usage
from ragwatch.capture.run import _RUN, Run, enter_framework_call
from ragwatch.integrations.llamaindex_runs import conversation_kind, final_text, method_of, question_of, tool_of
from ragwatch.integrations.llamaindex_streams import follow

if TYPE_CHECKING:
    from ragwatch.capture.watch import RagWatch

__all__ = ["RagwatchEventHandler", "RagwatchSpanHandler", "instrument", "uninstrument"]


def instrument(rw: RagWatch, dispatcher: Any = None) -> RagwatchEventHandler:
    """Add ragwatch's event and span handlers to ``dispatcher`` (default: the root one, which sees every
    LlamaIndex component in the process); returns the event handler."""
    dispatcher = dispatcher or get_dispatcher()
    tracker = _Tracker(rw)
    events = RagwatchEventHandler(tracker)
    events._span_handler = RagwatchSpanHandler(tracker)
    dispatcher.add_event_handler(events)
    dispatcher.add_span_handler(events._span_handler)
    return events


def uninstrument(handler: RagwatchEventHandler, dispatcher: Any = None) -> None:
    """Take the handlers :func:`instrument` added off ``dispatcher`` again."""
    dispatcher = dispatcher or get_dispatcher()
    if handler in dispatcher.event_handlers:
        dispatcher.event_handlers.remove(handler)
    if handler._span_handler in dispatcher.span_handlers:
        dispatcher.span_handlers.remove(handler._span_handler)


class _Query:
    """A query's, chat turn's or agent run's pipeline call; it finishes once the query (the chat engine
    method, the agent's workflow) has ended and no generation is still open."""

    __slots__ = ("answer", "call", "ended", "gathers", "open", "root", "streamed")

    def __init__(self, call: PipelineCall, root: str | None = None, gathers: bool = False) -> None:
        self.call = call
        self.open = 0
        self.ended = False
        self.answer: str | None = None
        #: a chat engine's or agent's own dispatcher span (None: a query, ended by its QueryEndEvent)
        self.root = root
        #: whether its retrievals add up (an agent's tools retrieve more than once) rather than replace
        self.gathers = gathers
        #: a chat turn whose answer streams: its proxied stream, not the chat engine's return, ends the run
        self.streamed = False


class _Reading:
    """What an LLM end event said, in the shape the generation record reads a finished stream in."""

    __slots__ = ("model", "text", "usage")

    def __init__(self, text: str | None, usage: Any, model: str | None) -> None:
        self.text = text
        self.usage = usage
        self.model = model


class _Tracker:
    def __init__(self, rw: RagWatch) -> None:
        self.rw = rw
        self._queries: dict[str | None, _Query | None] = {}  # query span id -> its query (None: joined a run)
        self._calls: dict[str, tuple[Call, _Query | None]] = {}  # step span id -> its call and query
        #: every open dispatcher span inside a chat engine call or an agent run -> that conversation: the
        #: workflow's steps run in tasks of their own, where no context variable of ours is set
        self._owners: dict[str, _Query] = {}
        self._tools: dict[str, ToolCall] = {}  # an agent's `call_tool` step span id -> its tool call
        #: LLM spans opened inside an LLM call already recorded (CustomLLM's `acomplete` calls `complete`)
        self._nested: set[str] = set()
        self._llm_spans: dict[str, tuple[int, str]] = {}  # LLM method span -> (id of its LLM, method)
        self._generating: dict[int, dict[str, str]] = {}  # id of an LLM -> its recorded calls: span -> method
        #: when each run's latest retrieval ended (perf counter): a synthesis handed other nodes is a rerank
        #: from there; weak, so a run that never synthesizes leaves nothing behind
        self._retrieved_at: weakref.WeakKeyDictionary[Run, float] = weakref.WeakKeyDictionary()
        #: how many queries each run has started (its own and the ones it joined): from the second on, the
        #: run's retrievals add up (``SubQuestionQueryEngine`` answers from every sub-question's)
        self._queried: weakref.WeakKeyDictionary[Run, int] = weakref.WeakKeyDictionary()
        #: spans opened inside an open retrieval -> that retrieval's span (the nearest one)
        self._within: dict[str, str] = {}
        #: a retrieval inside another (``QueryFusionRetriever``'s retrievers) -> the outer one's call, a rerank
        self._inner: dict[str, RerankCall] = {}

    def handle(self, event: Any) -> None:
        kind = type(event)
        if kind is QueryStartEvent:
            self._query_start(event)
        elif kind is QueryEndEvent:
            self._query_end(event.span_id, event.response, None)
        elif kind is RetrievalStartEvent:
            self._wrapped(event.span_id)
            call, owner = self._step(event.span_id, lambda: RetrieveCall(self.rw))
            run = call.run
            if run is not None and run.question is None:
                run.question = _query_text(event.str_or_query_bundle)
            self._calls[event.span_id] = (call, owner)
        elif kind is RetrievalEndEvent:
            nodes = list(event.nodes or ())
            entry = self._calls.get(event.span_id)
            run = entry[0].run if entry is not None else None
            outer = self._inner.pop(event.span_id, None)
            if outer is not None:  # inside a fusion retriever: a retrieval of its own, then part of its list
                earlier = run.retrieved if run is not None else None
                self._step_end(event.span_id, nodes)
                restore_retrieved(run, earlier)
                outer.inner_retrieved(nodes)
                return
            self._step_end(event.span_id, nodes)
            # An agent's tool calls and a query's queries (sub-questions) each retrieve: no one of those lists
            # is what a node postprocessor trims for the LLM, so none is taken for a rerank.
            gathers = (entry is not None and entry[1] is not None and entry[1].gathers) or (
                run is not None and self._queried.get(run, 0) > 1
            )
            if run is not None and not gathers:
                self._retrieved_at[run] = time.perf_counter()
        elif kind is EmbeddingStartEvent:
            model = (getattr(event, "model_dict", None) or {}).get("model_name")
            name = model if isinstance(model, str) else None
            call, _ = self._step(event.span_id, lambda: EmbedCall(self.rw, name))
            self._calls[event.span_id] = (call, None)
            # an openai SDK call the embedding class makes is this call: it adds its billed tokens, no stage
            enter_framework_call(call)
        elif kind is EmbeddingEndEvent:
            entry = self._calls.pop(event.span_id, None)
            if entry is not None and type(entry[0]) is EmbedCall:
                # no usage in the event: estimated from the texts unless an SDK call inside reported it
                entry[0].inputs = list(event.chunks or ())
                entry[0].finish(None, None)
        elif kind is LLMChatStartEvent or kind is LLMCompletionStartEvent:
            self._llm_start(event)
        elif kind is LLMChatInProgressEvent or kind is LLMCompletionInProgressEvent:
            entry = self._calls.get(event.span_id)
            delta = getattr(event.response, "delta", None)
            if entry is not None and isinstance(delta, str) and delta:
                entry[0].on_item({"delta": delta})  # the answer from its deltas, and the time to the first
        elif kind is LLMChatEndEvent or kind is LLMCompletionEndEvent:
            self._llm_end(event)
        elif kind is ExceptionEvent:
            # a streamed LLM call's generator raised or was closed (GeneratorExit): no end event will come
            self._step_failed(event.span_id, event.exception)

    def synthesizing(self, span_id: str, nodes: list[Any]) -> None:
        """A response synthesizer (span ``span_id``) was handed ``nodes`` — what the LLM will see. When node
        postprocessors (rerankers, similarity cut-offs) changed the retriever's list, that is a rerank stage:
        its time since the retrieval ended, and the kept nodes become the run's chunks. The same for a query
        engine, a chat turn (its own run, or a watched pipeline's) and nodes filtered by hand in a pipeline."""
        owner = self._owners.get(span_id)
        run = _RUN.get() or (owner.call.run if owner is not None else None)
        retrieved_at = self._retrieved_at.pop(run, None) if run is not None else None
        if run is None or retrieved_at is None or run.retrieved is None:
            return
        retrieved, kept = _node_ids(run.retrieved), _node_ids(nodes)
        if kept == retrieved or not {i for i, _ in kept} <= {i for i, _ in retrieved}:
            return  # the same list, or nodes that were not retrieved (a sub-question engine's sub-answers)
        record_rerank(self.rw, run, time.perf_counter() - retrieved_at, run.retrieved, nodes, None)

    def dropped(self, span_id: str, err: BaseException | None) -> None:
        """A dispatcher span ended with an exception: no end event will come for it."""
        self.span_ended(span_id, None, err or RuntimeError("span dropped"))
        if span_id in self._queries:
            self._query_end(span_id, None, err or RuntimeError("query dropped"))
            return
        self._step_failed(span_id, err)

    def abandoned(self, call: Call) -> None:
        """The proxy of ``call``'s streamed answer was collected: if the host dropped it before the end, its
        run ends as ``cancelled`` (``GeneratorExit``, as a stream closed early), after the generation still
        open in it, which is forgotten. A no-op for a stream read to its end. Runs in whichever thread
        dropped the answer, so it never raises."""
        try:
            run = call.run
            if run is None:
                return
            stopped = GeneratorExit()
            for span_id, (step, _) in list(self._calls.items()):
                if step.run is run:
                    self._step_failed(span_id, stopped)
            call.finish(None, stopped)
        except Exception as exc:
            self.rw.guard.failed("capture", exc)

    def _step_failed(self, span_id: str, err: BaseException | None) -> None:
        """A step ended with ``err`` instead of its end event: record it so, and forget it."""
        entry = self._calls.pop(span_id, None)
        if entry is not None:
            self._not_generating(span_id)
            entry[0].finish(None, err)
            self._release(entry[1], err)

    def _not_generating(self, span_id: str) -> None:
        for llm, calls in list(self._generating.items()):
            if calls.pop(span_id, None) is not None:
                if not calls:
                    del self._generating[llm]
                return

    # -- dispatcher spans: chat engines, agents, their tools ------------------------------------------
    def span_started(self, span_id: str, bound_args: Any, instance: Any, parent: str | None) -> None:
        """Follow a new dispatcher span: an LLM method inside an LLM call being recorded (skipped: one
        generation), a step of a chat turn or agent run (mapped to it; an agent's tool call recorded), or
        a chat engine call or agent run starting (a run of its own, unless a run is current)."""
        if isinstance(instance, BaseLLM):
            self._llm_span(span_id, instance, parent)
        if parent is not None:
            outer = parent if self._retrieving(parent) else self._within.get(parent)
            if outer is not None:
                self._within[span_id] = outer
            owner = self._owners.get(parent)
            if owner is not None:
                self._owners[span_id] = owner
                tool = tool_of(span_id, bound_args)
                if tool is not None:
                    call, _ = self._step(span_id, lambda: ToolCall(self.rw, *tool))
                    self._tools[span_id] = call
                return
        kind = conversation_kind(instance, span_id)
        if kind is None or _RUN.get() is not None:  # inside a watched pipeline or middleware run: join it
            return
        call = PipelineCall(self.rw, question=question_of(kind, bound_args))
        self._owners[span_id] = _Query(call, span_id, gathers=kind == "agent")

    def _llm_span(self, span_id: str, llm: BaseLLM, parent: str | None) -> None:
        """An LLM method's span: nested when the same LLM has a call open in the same run that delegates to
        this method (a CustomLLM's ``acomplete`` runs ``complete``, its ``astream_chat`` runs
        ``stream_chat`` while the host reads the stream), else remembered for its start event."""
        method = method_of(span_id)
        if method not in _LLM_METHODS:
            return
        open_calls = self._generating.get(id(llm))
        if open_calls:
            owner = self._owners.get(parent) if parent is not None else None
            run = _RUN.get() or (owner.call.run if owner is not None else None)
            for outer, outer_method in open_calls.items():
                entry = self._calls.get(outer)
                if method in _DELEGATES[outer_method] and entry is not None and entry[0].run is run:
                    self._nested.add(span_id)
                    return
        self._llm_spans[span_id] = (id(llm), method)

    def span_ended(self, span_id: str, result: Any, err: BaseException | None) -> None:
        self._nested.discard(span_id)
        self._within.pop(span_id, None)
        self._inner.pop(span_id, None)  # a retrieval that failed: no end event came for it
        self._llm_spans.pop(span_id, None)
        tool = self._tools.pop(span_id, None)
        if tool is not None:
            output = getattr(result, "tool_output", None)
            if err is None and getattr(output, "is_error", False):
                err = getattr(output, "exception", None) or RuntimeError("tool error")
            tool.finish(None, err)
        conversation = self._owners.pop(span_id, None)
        if conversation is None:
            return
        if conversation.root != span_id:
            if err is None and "synthesize-" in span_id and self._follow_stream(result, conversation.call):
                conversation.streamed = True
            return
        conversation.ended = True
        if err is not None:
            conversation.call.finish(None, err)
            return
        conversation.answer = final_text(result)
        if conversation.answer is None and conversation.streamed:
            return  # its proxied stream ends the run once the host has read it
        if conversation.open <= 0:
            self._finish(conversation)

    # -- queries --------------------------------------------------------------------------------------
    def _query_start(self, event: QueryStartEvent) -> None:
        owner = self._owners.get(event.span_id) if event.span_id is not None else None
        if _RUN.get() is not None or owner is not None:
            # inside a watched pipeline, a middleware run, an outer query, a chat turn or an agent's tool:
            # join it (its steps find their run through the span they start in)
            self._queries[event.span_id] = None
            joined = _RUN.get() or (owner.call.run if owner is not None else None)
            if joined is not None:
                self._queried[joined] = self._queried.get(joined, 0) + 1
            return
        call = PipelineCall(self.rw, question=_query_text(event.query))
        call.activate()  # the run (and its span) is current for the query's steps and the host's code
        self._queries[event.span_id] = _Query(call)
        if call.run is not None:
            self._queried[call.run] = 1

    def _query_end(self, span_id: str, response: Any, exc: BaseException | None) -> None:
        query = self._queries.pop(span_id, None)
        if query is None:
            self._joined_query_end(response, exc)
            return
        query.call.deactivate()
        query.ended = True
        if exc is not None:
            query.call.finish(None, exc)
            return
        gen = getattr(response, "response_gen", None)
        if gen is not None and is_stream(gen):
            # A streaming response: the LLM is called only as the host reads it, after the query returned.
            # Its generator, proxied, makes the run current around each step and ends the run when drained
            # (or, dropped before that, when collected).
            response.response_gen = follow(gen, query.call, self)
            return
        answer = getattr(response, "response", None)
        query.answer = answer if isinstance(answer, str) else None
        if query.open == 0:
            self._finish(query)

    def _joined_query_end(self, response: Any, exc: BaseException | None) -> None:
        """A query that joined the run current around it (a watched pipeline's, a middleware run's) ended.
        A streamed answer calls its LLM only as it is read, which may be after the pipeline returned it: its
        generator, proxied, keeps that run current around each step and holds the run until it ends."""
        run = _RUN.get()
        gen = getattr(response, "response_gen", None)
        if exc is None and run is not None and gen is not None and is_stream(gen):
            response.response_gen = follow(gen, RunStreamCall(self.rw, run), self)

    def _finish(self, query: _Query) -> None:
        """End a query's (chat turn's, agent run's) run with the answer the user reads: an agent's final
        answer, not the last answer a tool's query engine gave it."""
        run = query.call.run
        if query.answer is not None and run is not None:
            run.answer = query.answer
        query.call.finish(query.answer, None)

    # -- LLM calls ------------------------------------------------------------------------------------
    def _llm_start(self, event: Any) -> None:
        if event.span_id in self._nested:  # `complete` inside `acomplete`: the outer call records it
            return
        model_dict = getattr(event, "model_dict", None) or {}
        model = model_dict.get("model") or model_dict.get("model_name")
        name = model if isinstance(model, str) else None
        prompt = getattr(event, "prompt", None)
        if prompt is None:
            prompt = [getattr(m, "content", None) for m in getattr(event, "messages", None) or ()]
        call, owner = self._step(event.span_id, lambda: GenerateCall(self.rw, name, None, (prompt,), None))
        query = owner or self._open_query(call)
        if query is not None:
            query.open += 1
        self._calls[event.span_id] = (call, query)
        llm = self._llm_spans.pop(event.span_id, None)
        if llm is not None:
            self._generating.setdefault(llm[0], {})[event.span_id] = llm[1]
        enter_framework_call(call)  # an openai SDK call the LLM class makes is this generation

    def _llm_end(self, event: Any) -> None:
        self._nested.discard(event.span_id)
        entry = self._calls.pop(event.span_id, None)
        if entry is None:
            return
        self._not_generating(event.span_id)
        call, query = entry
        response = event.response
        message = getattr(response, "message", None)
        text = getattr(message, "content", None) if message is not None else getattr(response, "text", None)
        raw = getattr(response, "raw", None)
        usage = model = None
        if raw is not None:
            try:
                usage, model = extract_usage(raw), extract_model(raw)
            except Exception as exc:
                self.rw.guard.failed("response", exc)
        if type(call) is GenerateCall:
            streamed = call._acc.text if call._acc is not None else ""
            text = streamed or (text if isinstance(text, str) else None)
            call._acc = _Reading(text, usage, model)  # type: ignore[assignment]
        call.finish(None, None)
        self._release(query)

    def _open_query(self, call: Call) -> _Query | None:
        """The open query a step belongs to: the one whose run is the step's run."""
        run = call.run
        if run is None:
            return None
        for query in list(self._queries.values()):
            if query is not None and query.call.run is run:
                return query
        return None

    def _release(self, query: _Query | None, err: BaseException | None = None) -> None:
        """One generation of ``query`` is over (``err``: it failed); a streamed answer's query returned
        before its generation, so the last one to end finishes it, with the generation's error if any."""
        if query is None:
            return
        query.open -= 1
        if query.ended and query.open <= 0:
            if err is None:
                self._finish(query)
            else:
                query.call.finish(None, err)

    def _follow_stream(self, response: Any, call: PipelineCall) -> bool:
        """A streamed chat turn: its synthesizer returned a ``StreamingResponse`` whose LLM is called only as
        the answer is read — after the chat engine returned, in the thread or task writing the chat
        history, where no context of the turn is left. Its ``response_gen``, proxied before the chat engine
        wraps it, makes the run current around each step and ends the run when drained, or when collected
        unread (a history writer cancelled before it started), as a streamed query's does."""
        stream = getattr(response, "response_gen", None)
        if stream is None or not is_stream(stream):
            return False
        response.response_gen = follow(stream, call, self)
        return True

    def _step(self, span_id: str, make: Any) -> tuple[Any, _Query | None]:
        """A step's call (``make()``), in the current run; outside one, in the chat turn or agent run its
        span belongs to, its span a child of that run's."""
        owner = self._owners.get(span_id) if _RUN.get() is None else None
        if owner is None:
            return make(), None
        span = owner.call.span
        token = otel_context.attach(trace.set_span_in_context(span)) if span is not None else None
        try:
            call = make()
        finally:
            if token is not None:
                otel_context.detach(token)
        call.run = owner.call.run
        return call, owner

    def _retrieving(self, span_id: str) -> bool:
        entry = self._calls.get(span_id)
        return entry is not None and isinstance(entry[0], (RetrieveCall, RerankCall))

    def _wrapped(self, span_id: str) -> None:
        """A retrieval starts inside another one (``QueryFusionRetriever`` runs its retrievers inside its own
        ``retrieve``): the outer one becomes a rerank of what the inner ones return, as LangChain's retriever
        around a retriever does, so ``retrieve`` counts the inner retrievals once each and ``rerank`` times
        the fusion."""
        outer_span = self._within.get(span_id)
        entry = self._calls.get(outer_span) if outer_span is not None else None
        if outer_span is None or entry is None:
            return
        outer, owner = entry
        if type(outer) is RetrieveCall:
            outer = RerankCall.adopt(outer)
            self._calls[outer_span] = (outer, owner)
        if isinstance(outer, RerankCall):
            self._inner[span_id] = outer

    def _step_end(self, span_id: str, result: Any) -> None:
        entry = self._calls.pop(span_id, None)
        if entry is not None:
            entry[0].finish(result, None)


_LLM_METHODS = frozenset(
    {"chat", "stream_chat", "complete", "stream_complete", "achat", "astream_chat", "acomplete", "astream_complete"}
)
#: the methods a ``CustomLLM`` method runs inside itself (each decorated, so each reports its own events)
_DELEGATES: dict[str, frozenset[str]] = {
    "chat": frozenset({"complete"}),
    "stream_chat": frozenset({"stream_complete"}),
    "complete": frozenset(),
    "stream_complete": frozenset(),
    "achat": frozenset({"chat", "complete"}),
    "acomplete": frozenset({"complete"}),
    "astream_chat": frozenset({"stream_chat", "stream_complete"}),
    "astream_complete": frozenset({"stream_complete"}),
}


def _node_ids(nodes: Any) -> list[tuple[Any, Any]]:
    return [(getattr(getattr(n, "node", n), "node_id", None), getattr(n, "score", None)) for n in nodes]


def _query_text(query: Any) -> str | None:
    if isinstance(query, str):
        return query
    text = getattr(query, "query_str", None)
    return text if isinstance(text, str) else None


class RagwatchEventHandler(BaseEventHandler):
    """The event half: queries, retrievals and LLM calls (see :func:`instrument`)."""

    _tracker: Any = PrivateAttr()
    _span_handler: Any = PrivateAttr(default=None)

    def __init__(self, tracker: _Tracker, **data: Any) -> None:
        super().__init__(**data)
        self._tracker = tracker

    @classmethod
    def class_name(cls) -> str:
        return "RagwatchEventHandler"

    def handle(self, event: Any, **kwargs: Any) -> None:
        try:
            self._tracker.handle(event)
        except Exception as exc:
            self._tracker.rw.guard.failed("capture", exc)


class RagwatchSpanHandler(BaseSpanHandler[Any]):
    """The span half: chat engine turns and agent runs (which send no query events), their tool calls,
    nested LLM methods, synthesizer inputs (reranks), and dropped spans (a query or step that raised)."""

    _tracker: Any = PrivateAttr()

    def __init__(self, tracker: _Tracker, **data: Any) -> None:
        super().__init__(**data)
        self._tracker = tracker

    @classmethod
    def class_name(cls) -> str:
        return "RagwatchSpanHandler"

    def new_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Any = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            self._tracker.span_started(id_, bound_args, instance, parent_span_id)
            if "synthesize-" in id_ and bound_args is not None:  # `Refine.synthesize-<uuid>`, `…asynthesize-…`
                nodes = bound_args.arguments.get("nodes")
                if isinstance(nodes, list):
                    self._tracker.synthesizing(id_, nodes)
        except Exception as exc:
            self._tracker.rw.guard.failed("capture", exc)
        return None

    def prepare_to_exit_span(
        self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any
    ) -> None:
        try:
            self._tracker.span_ended(id_, result, None)
        except Exception as exc:
            self._tracker.rw.guard.failed("capture", exc)
        return None

    def prepare_to_drop_span(
        self, id_: str, bound_args: Any, instance: Any = None, err: Any = None, **kwargs: Any
    ) -> None:
        try:
            self._tracker.dropped(id_, err)
        except Exception as exc:
            self._tracker.rw.guard.failed("capture", exc)
        return None
