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
that generator is handed back proxied, so the run is current around each step and ends when it is drained. Inside a
watched pipeline or an ASGI middleware run, queries join that run. A query that raises is seen by the
span handler (the dispatcher reports no end event then) and recorded as an error. Every step is guarded:
an error in ragwatch is counted in ``ragwatch_internal_errors_total``, and the query carries on. As with
LangChain, events cannot change results: degraded-mode retrieval policies need the retriever decorator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
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
from pydantic import PrivateAttr

from ragwatch.capture.responses import extract_model, extract_usage
from ragwatch.capture.run import _RUN
from ragwatch.capture.stages import Call, GenerateCall, PipelineCall, RetrieveCall, is_stream
from ragwatch.capture.streams import proxy_stream

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
    """A query's pipeline call; it finishes once the query has ended and no generation is still open."""

    __slots__ = ("answer", "call", "ended", "open")

    def __init__(self, call: PipelineCall) -> None:
        self.call = call
        self.open = 0
        self.ended = False
        self.answer: str | None = None


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

    def handle(self, event: Any) -> None:
        kind = type(event)
        if kind is QueryStartEvent:
            self._query_start(event)
        elif kind is QueryEndEvent:
            self._query_end(event.span_id, event.response, None)
        elif kind is RetrievalStartEvent:
            call = RetrieveCall(self.rw)
            run = call.run
            if run is not None and run.question is None:
                run.question = _query_text(event.str_or_query_bundle)
            self._calls[event.span_id] = (call, None)
        elif kind is RetrievalEndEvent:
            self._step_end(event.span_id, list(event.nodes or ()))
        elif kind is LLMChatStartEvent or kind is LLMCompletionStartEvent:
            self._llm_start(event)
        elif kind is LLMChatInProgressEvent or kind is LLMCompletionInProgressEvent:
            entry = self._calls.get(event.span_id)
            delta = getattr(event.response, "delta", None)
            if entry is not None and isinstance(delta, str) and delta:
                entry[0].on_item({"delta": delta})  # the answer from its deltas, and the time to the first
        elif kind is LLMChatEndEvent or kind is LLMCompletionEndEvent:
            self._llm_end(event)

    def dropped(self, span_id: str, err: BaseException | None) -> None:
        """A dispatcher span ended with an exception: no end event will come for it."""
        if span_id in self._queries:
            self._query_end(span_id, None, err or RuntimeError("query dropped"))
            return
        entry = self._calls.pop(span_id, None)
        if entry is not None:
            entry[0].finish(None, err)
            self._release(entry[1])

    # -- queries --------------------------------------------------------------------------------------
    def _query_start(self, event: QueryStartEvent) -> None:
        if _RUN.get() is not None:  # inside a watched pipeline, a middleware run or an outer query: join it
            self._queries[event.span_id] = None
            return
        call = PipelineCall(self.rw, question=_query_text(event.query))
        call.activate()  # the run (and its span) is current for the query's steps and the host's code
        self._queries[event.span_id] = _Query(call)

    def _query_end(self, span_id: str, response: Any, exc: BaseException | None) -> None:
        query = self._queries.pop(span_id, None)
        if query is None:
            return
        query.call.deactivate()
        query.ended = True
        if exc is not None:
            query.call.finish(None, exc)
            return
        gen = getattr(response, "response_gen", None)
        if gen is not None and is_stream(gen):
            # A streaming response: the LLM is called only as the host reads it, after the query returned.
            # Its generator, proxied, makes the run current around each step and ends the run when drained.
            response.response_gen = proxy_stream(gen, query.call)
            return
        answer = getattr(response, "response", None)
        query.answer = answer if isinstance(answer, str) else None
        if query.open == 0:
            query.call.finish(query.answer, None)

    # -- LLM calls ------------------------------------------------------------------------------------
    def _llm_start(self, event: Any) -> None:
        model_dict = getattr(event, "model_dict", None) or {}
        model = model_dict.get("model") or model_dict.get("model_name")
        prompt = getattr(event, "prompt", None)
        if prompt is None:
            prompt = [getattr(m, "content", None) for m in getattr(event, "messages", None) or ()]
        call = GenerateCall(self.rw, model if isinstance(model, str) else None, None, (prompt,), None)
        query = self._open_query(call)
        if query is not None:
            query.open += 1
        self._calls[event.span_id] = (call, query)

    def _llm_end(self, event: Any) -> None:
        entry = self._calls.pop(event.span_id, None)
        if entry is None:
            return
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

    def _release(self, query: _Query | None) -> None:
        if query is None:
            return
        query.open -= 1
        if query.ended and query.open <= 0:  # a streamed answer: the query returned before its generation
            query.call.finish(query.answer, None)

    def _step_end(self, span_id: str, result: Any) -> None:
        entry = self._calls.pop(span_id, None)
        if entry is not None:
            entry[0].finish(result, None)


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
    """The span half: only dropped spans (a query or step that raised) matter; nothing is kept open."""

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
        return None

    def prepare_to_exit_span(
        self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any
    ) -> None:
        return None

    def prepare_to_drop_span(
        self, id_: str, bound_args: Any, instance: Any = None, err: Any = None, **kwargs: Any
    ) -> None:
        try:
            self._tracker.dropped(id_, err)
        except Exception as exc:
            self._tracker.rw.guard.failed("capture", exc)
        return None
