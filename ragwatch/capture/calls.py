"""Call objects: the per-call state a span, a stream or a context manager needs.

A call is created just before the host function runs (or when a framework reports a step starting) and
finished once, when its result — or, for a stream, its last item — is in; it records through the
``record_*`` functions of :mod:`ragwatch.capture.record`, as the span-free stages do. Tracing, generator
functions, returned streams, context managers, the ASGI middleware and the framework integrations use them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ragwatch.capture import semconv as sc
from ragwatch.capture.chunks import Chunk, normalize_chunks
from ragwatch.capture.record import (
    _STREAM_TYPES,
    _outcome,
    candidates_of,
    gather_retrieved,
    hand_over_held,
    is_stream,
    open_run,
    question_of,
    record_embedding,
    record_generation,
    record_request,
    record_rerank,
    record_retrieval,
)
from ragwatch.capture.responses import StreamAccumulator
from ragwatch.capture.run import _RUN, Run

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from ragwatch.capture.host import CaptureHost
    from ragwatch.capture.responses import Usage

__all__ = [
    "Call",
    "DegradedRetrieveCall",
    "EmbedCall",
    "GenerateCall",
    "PipelineCall",
    "RerankCall",
    "RetrieveCall",
    "RunStreamCall",
    "ToolCall",
]

_perf = time.perf_counter


def _exception_attributes(rw: CaptureHost, exc: BaseException) -> dict[str, str]:
    """The message and stack trace the span's exception event carries, redacted and capped: the host's
    exception message may quote user input ("no account for zhang@example.com"). Only on the error path."""
    import traceback

    redact = rw.redactor
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {
        "exception.message": redact(str(exc)[: _MAX_EXC_CHARS + 1024])[:_MAX_EXC_CHARS],
        "exception.stacktrace": redact(stack[-8 * _MAX_EXC_CHARS :]),
    }


_MAX_EXC_CHARS = 2000


def _model_span(rw: CaptureHost, operation: str, model: str | None, provider: str | None) -> Span | None:
    """Open the CLIENT span of a call to a model (``chat gpt-4o``, ``embeddings``), with the GenAI
    attributes known before it runs; None with tracing off."""
    tracer = rw.tracer
    if tracer is None:
        return None
    attributes: dict[str, Any] = {sc.OPERATION: operation}
    if model:
        attributes[sc.REQUEST_MODEL] = model
    if provider:
        attributes[sc.PROVIDER] = provider
    return tracer.start_span(
        f"{operation} {model}" if model else operation, kind=SpanKind.CLIENT, attributes=attributes
    )


def _billed_attributes(span: Span, model: str, usage: Usage | None, cost: float | None, *, output: bool) -> None:
    """What a finished model call billed, on its span: the answering model, the tokens (``output``: a
    generation's output and cached tokens too; an embedding has neither) and the cost."""
    span.set_attribute(sc.RESPONSE_MODEL, model)
    if usage is not None:
        span.set_attribute(sc.USAGE_INPUT, usage.input_tokens)
        if output:
            span.set_attribute(sc.USAGE_OUTPUT, usage.output_tokens)
            if usage.cached_input_tokens:
                span.set_attribute(sc.USAGE_CACHED, usage.cached_input_tokens)
        if usage.estimated:
            span.set_attribute(sc.USAGE_ESTIMATED, True)
    if cost is not None:
        span.set_attribute(sc.COST, cost)


class Call:
    """Shared life cycle: start a span and a timer, optionally make them current, finish exactly once.

    Subclasses set the shared fields in their own ``__init__`` (rw, run, span, _ctx_token, _ended, active,
    then start last) rather than through ``super().__init__``, which costs a call per stage.
    """

    __slots__ = ("_ctx_token", "_ended", "active", "run", "rw", "span", "start")
    rw: CaptureHost
    run: Run | None
    span: Span | None
    start: float
    #: whether the call makes its span current while the host function runs
    active: bool
    _ended: bool
    _ctx_token: Token[Context] | None

    # -- context ------------------------------------------------------------------------------------
    def activate(self) -> None:
        """Make our span current so spans the host opens inside the call become its children."""
        if self.span is not None:
            try:
                self._ctx_token = otel_context.attach(trace.set_span_in_context(self.span))
            except Exception as exc:
                self.rw.guard.failed("tracing", exc)

    def deactivate(self) -> None:
        token, self._ctx_token = self._ctx_token, None
        if token is not None:
            try:
                otel_context.detach(token)
            except Exception as exc:
                self.rw.guard.failed("tracing", exc)

    # -- results ------------------------------------------------------------------------------------
    def done(self, result: Any) -> Any:
        """Called with the host's return value; returns what the host's caller should receive."""
        try:  # is_stream() inlined: this runs on every call
            found = _STREAM_TYPES[type(result)]
        except Exception:  # not cached yet, or a type that cannot even be hashed: is_stream never raises
            found = is_stream(result)
        if found:  # a stream result is proxied and finished on exhaustion rather than on return
            try:
                from ragwatch.capture.streams import proxy_stream

                return proxy_stream(result, self)
            except Exception as exc:
                self.rw.guard.failed("stream", exc)
        self.finish(result, None)
        return result

    def fail(self, exc: BaseException) -> None:
        self.finish(None, exc)

    def on_item(self, item: Any) -> None:
        """One item of a stream result went by."""

    def streaming(self) -> None:
        """This call is now followed as a stream (:mod:`ragwatch.capture.streams`): it may end after its run
        does, so the run waits for it before reaching the listeners (:meth:`Run.hold_for`). Once per stream,
        never raises."""
        run = self.run
        if run is not None and not self._ended:
            try:
                run.hold_for(self)
            except Exception as err:
                self.rw.guard.failed("capture", err)

    def finish(self, result: Any, exc: BaseException | None) -> None:
        """Record the call once; later calls (a stream closed twice) are ignored."""
        if self._ended:
            return
        self._ended = True
        try:
            self._record(_perf() - self.start, result, exc)
        except Exception as err:
            self.rw.guard.failed("capture", err)
        span = self.span
        if span is not None:
            try:
                if exc is not None and span.is_recording():
                    span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)
                    if _outcome(exc) == "error":
                        span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
                        span.record_exception(exc, attributes=_exception_attributes(self.rw, exc))
                span.end()
            except Exception as err:
                self.rw.guard.failed("tracing", err)
        run = self.run
        if run is not None and run._streams:  # a stream of its run's: the last to end after the run hands it over
            try:
                if run.release(self):
                    hand_over_held(self.rw, run)
            except Exception as err:
                self.rw.guard.failed("capture", err)

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        """Record the finished call through its stage's ``record_*`` function, and describe the span."""


class PipelineCall(Call):
    """A whole user request; owns the :class:`Run` unless one is already active (then it joins)."""

    __slots__ = ("_owner", "_run_token")

    def __init__(
        self,
        rw: CaptureHost,
        question: str | None = None,
        route: str | None = None,
        name: str | None = None,
        args: tuple | None = None,
        kwargs: dict | None = None,
        run: Run | None = None,
    ) -> None:
        """``args``/``kwargs`` are the watched function's (the decorator's case): the question is read there.
        ``run`` adopts a run a :class:`PipelineStage` opened (its function returned a stream)."""
        if args is not None and question is None:
            question = args[0] if not kwargs and args and type(args[0]) is str else question_of(args, kwargs)
        self.rw = rw  # Call's fields set here, not by super().__init__: a call fewer on the request path
        self.span = self._ctx_token = None
        self._run_token: object | None = None
        if run is None:
            run = open_run(rw, question, route)
        self._owner = run is not None
        if run is None:  # nested inside a middleware run or another pipeline: joined it, records nothing
            self.run = _RUN.get()
            self._ended = True
            self.active = False
            self.start = _perf()
            return
        self.run = run
        self._ended = False
        self.active = True
        tracer = rw.tracer
        if tracer is not None:
            self.span = span = tracer.start_span(
                name or f"rag {rw.service}",
                kind=SpanKind.INTERNAL,
                attributes={sc.OPERATION: sc.OP_WORKFLOW, sc.SERVICE: rw.service},
            )
            ctx = span.get_span_context()
            if ctx.is_valid:
                run.trace_id = format(ctx.trace_id, "032x")
                run.span_id = format(ctx.span_id, "016x")
        self.start = _perf()

    @property
    def owner(self) -> bool:
        """Whether this call opened its run (False: it joined an outer one, whose facts it only fills in)."""
        return self._owner

    def streaming(self) -> None:
        """Nothing to wait for: a pipeline's stream ending is its run's end."""

    def activate(self) -> None:
        if self._owner:
            self._run_token = _RUN.set(self.run)
            if self.span is not None:
                Call.activate(self)

    def deactivate(self) -> None:
        if self._owner:
            if self._ctx_token is not None:
                Call.deactivate(self)
            _leave_run(self)

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        if self.run is not None:
            record_request(self.rw, self.run, elapsed, result, exc)


class RunStreamCall(Call):
    """A stream that belongs to a run without being a stage of its own: a framework's answer whose LLM is
    called only as it is read (LlamaIndex's streamed query inside a watched pipeline, which returns it).

    Followed as a stream, it makes its run current around each step, so the calls the stream makes join
    the run even when it is read after the pipeline returned, and the run waits for its end before it
    reaches the listeners (:meth:`Call.streaming`). It records nothing itself: its steps do."""

    __slots__ = ("_run_token",)

    def __init__(self, rw: CaptureHost, run: Run) -> None:
        self.rw = rw
        self.run = run
        self.span = self._ctx_token = None
        self._run_token: object | None = None
        self._ended = False
        self.active = True
        self.start = _perf()

    def activate(self) -> None:
        self._run_token = _RUN.set(self.run)

    def deactivate(self) -> None:
        _leave_run(self)

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        """Nothing: the stream's generation was recorded by its own call."""


def _leave_run(call: PipelineCall | RunStreamCall) -> None:
    """Undo ``call``'s ``_RUN.set`` of :meth:`activate` (guarded: a stream moved to another task or thread
    resets in another context than it set in)."""
    token, call._run_token = call._run_token, None
    if token is not None:
        try:
            _RUN.reset(token)  # type: ignore[arg-type]
        except Exception as exc:
            call.rw.guard.failed("capture", exc)


class RetrieveCall(Call):
    """A retriever call: latency, how many chunks came back, and their ids and scores on the span."""

    __slots__ = ("_items",)

    def __init__(self, rw: CaptureHost, top_k: int | None = None, name: str = "retrieval") -> None:
        self.rw = rw  # Call's fields set here, not by super().__init__: a call fewer on the request path
        self.run = _RUN.get()
        self.span = self._ctx_token = None
        self._ended = self.active = False
        self._items: list[Any] | None = None
        tracer = rw.tracer
        if tracer is not None:
            attributes: dict[str, Any] = {sc.OPERATION: sc.OP_RETRIEVAL}
            if top_k is not None:
                attributes[sc.RETRIEVAL_TOP_K] = top_k
            self.span = tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
            self.active = True
        self.start = _perf()

    def on_item(self, item: Any) -> None:
        if self._items is None:
            self._items = []
        self._items.append(item)

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        if result is None:
            result = self._items  # a retriever that yields its chunks one by one (or None)
        count = record_retrieval(self.rw, self.run, elapsed, result, exc)
        span = self.span
        if count is not None and span is not None and span.is_recording():
            try:
                self._describe(span, normalize_chunks(result, self.rw.settings.max_chunk_chars), count)
            except Exception as err:
                self.rw.guard.failed("chunks", err)

    def _describe(self, span: Any, chunks: list[Chunk], count: int) -> None:
        if self.rw.settings.content_off:  # no chunk id or text leaves the process, only the count
            span.set_attribute(sc.RETRIEVAL_COUNT, count)
            return
        limit = self.rw.settings.max_span_chunks
        shown = chunks[:limit]
        # Ids can carry personal data (a user's e-mail as a document id): redacted like the text, through the
        # memoised redactor since the same chunks come back request after request.
        redact = self.rw.redact_cached
        ids = [redact(c.id) for c in shown]
        span.set_attribute(sc.RETRIEVAL_COUNT, count)
        span.set_attribute(sc.RETRIEVAL_IDS, ids)
        scores = [c.score for c in shown]
        if all(s is not None for s in scores):
            span.set_attribute(sc.RETRIEVAL_SCORES, scores)
        span.set_attribute(sc.RETRIEVAL_DOCUMENTS, sc.documents_json(shown, ids))
        if self.rw.settings.capture_chunk_text:
            span.set_attribute(sc.RETRIEVAL_TEXTS, [redact(c.text) for c in shown])


class DegradedRetrieveCall(RetrieveCall):
    """A retriever call that began while the service was degraded: its result passes the degraded-mode
    retrieval policies (score floor, reranker). A class of its own so normal calls pay nothing for it."""

    __slots__ = ()

    def done(self, result: Any) -> Any:
        result = self.rw.degraded_result(self.run.question if self.run else None, result)
        return Call.done(self, result)


class GenerateCall(Call):
    """An LLM call: latency, TTFT for streams, tokens (reported or estimated) and cost."""

    __slots__ = ("_acc", "_prompt", "model", "provider", "ttft")

    def __init__(
        self,
        rw: CaptureHost,
        model: str | None,
        provider: str | None = None,
        args: tuple | None = None,
        kwargs: dict | None = None,
    ) -> None:
        """``args``/``kwargs`` are the watched function's: a keyword ``model=`` there overrides ``model``,
        and they are the prompt whose size is estimated when the API reports no usage."""
        if kwargs and "model" in kwargs and isinstance(kwargs["model"], str):
            model = kwargs["model"]
        self.rw = rw  # Call's fields set here, not by super().__init__: a call fewer on the request path
        self.run = _RUN.get()
        self._ctx_token = None
        self._ended = False
        self.model = model
        self.provider = provider
        self._prompt = (args, kwargs) if args is not None else None
        self._acc: StreamAccumulator | None = None
        self.ttft: float | None = None
        self.span = span = _model_span(rw, sc.OP_CHAT, model, provider)
        self.active = span is not None
        self.start = _perf()

    def on_item(self, item: Any) -> None:
        acc = self._acc
        if acc is None:
            acc = self._acc = StreamAccumulator()
        try:
            carried_text = acc.feed(item)
        except Exception as exc:
            self.rw.guard.failed("response", exc)
            return
        if carried_text and self.ttft is None:
            self.ttft = _perf() - self.start

    def end_with(self, result: Any) -> None:
        """A framework reported the call's whole result (its end event): that result is recorded, not the
        deltas :meth:`on_item` saw on the way. The deltas count only when the call fails or is cut short:
        they are then what the model produced, billed as estimated tokens."""
        self._acc = None
        self.finish(result, None)

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        model, usage, cost = record_generation(
            self.rw, self.run, elapsed, result, exc, self.model, self._prompt, self._acc, self.ttft
        )
        span = self.span
        if span is not None and span.is_recording():
            _billed_attributes(span, model, usage, cost, output=True)
            if self.ttft is not None:
                span.set_attribute(sc.TTFT, self.ttft)


class RerankCall(Call):
    """A reranker (or any step that filters or reorders chunks before the LLM): latency, the list before
    and after on the span; what it kept becomes the run's chunks (:func:`~ragwatch.capture.record.record_rerank`)."""

    __slots__ = ("_fused", "before")

    def __init__(
        self, rw: CaptureHost, name: str = "rerank", args: tuple | None = None, kwargs: dict | None = None
    ) -> None:
        self.rw = rw
        self.run = _RUN.get()
        self.span = self._ctx_token = None
        self._ended = self.active = False
        self.before: Any = candidates_of(args, kwargs) if args is not None else None
        self._fused = False  # whether ``before`` is what retrievals inside it returned (inner_retrieved)
        tracer = rw.tracer
        if tracer is not None:
            self.span = tracer.start_span(name, kind=SpanKind.INTERNAL, attributes={sc.OPERATION: sc.OP_RERANK})
            self.active = True
        self.start = _perf()

    @classmethod
    def adopt(cls, call: RetrieveCall) -> RerankCall:
        """A retriever call found to wrap another retriever (LangChain's ``ContextualCompressionRetriever``):
        the same timer, run and span, recorded as a rerank of what the inner retriever returned."""
        new = cls.__new__(cls)
        new.rw, new.run, new.span, new._ctx_token = call.rw, call.run, call.span, call._ctx_token
        new._ended, new.active, new.start, new.before = call._ended, call.active, call.start, None
        new._fused = False
        call._ended = True  # the retrieval it replaces records nothing
        if new.span is not None:
            try:
                new.span.update_name("rerank")
                new.span.set_attribute(sc.OPERATION, sc.OP_RERANK)
            except Exception as exc:
                call.rw.guard.failed("tracing", exc)
        return new

    def inner_retrieved(self, chunks: Any) -> None:
        """A retrieval inside this adopted call ended with ``chunks``: they join the list it reranks (a fusion
        retriever has several inner retrievers), and its own time starts again, so the rerank stage is the
        fusing or compressing, not the retrievals already counted as ``retrieve``."""
        if isinstance(chunks, list):
            self.before = [*(self.before or ()), *chunks]
            self._fused = True
        self.start = _perf()

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        run = self.run
        before = self.before if self.before is not None else (run.retrieved if run is not None else None)
        # a retriever around retrievers reranks only what they returned: the request's other retrievals stay
        others = run.retrieved if self._fused and run is not None else None
        count = record_rerank(self.rw, run, elapsed, before, result, exc)
        if count is not None and others is not None:
            gather_retrieved(run, others)
        span = self.span
        if count is not None and span is not None and span.is_recording():
            try:
                span.set_attribute(sc.RERANK_OUTPUT_COUNT, count)
                chars = self.rw.settings.max_chunk_chars  # bytes chunks decode no further than this
                span.set_attribute(
                    sc.RETRIEVAL_IDS, [self.rw.redact_cached(c.id) for c in normalize_chunks(result, chars)]
                )
                if before is not None:
                    shown = normalize_chunks(before, chars)[: self.rw.settings.max_span_chunks]
                    span.set_attribute(sc.RERANK_INPUT_COUNT, len(before))
                    span.set_attribute(sc.RERANK_INPUT_IDS, [self.rw.redact_cached(c.id) for c in shown])
            except Exception as err:
                self.rw.guard.failed("chunks", err)


def embed_inputs(args: tuple | None, kwargs: dict | None) -> Any:
    """What an embedding call embeds: ``input=`` (OpenAI), ``texts=`` / ``text=``, else its arguments."""
    if kwargs:
        for key in ("input", "texts", "text"):
            if key in kwargs:
                return kwargs[key]
    return args


class EmbedCall(Call):
    """An embedding call: its latency (the ``embed`` stage) and the input tokens it billed, priced."""

    __slots__ = ("inputs", "model", "usage")

    def __init__(
        self,
        rw: CaptureHost,
        model: str | None,
        provider: str | None = None,
        args: tuple | None = None,
        kwargs: dict | None = None,
    ) -> None:
        if kwargs and isinstance(kwargs.get("model"), str):
            model = kwargs["model"]
        self.rw = rw
        self.run = _RUN.get()
        self._ctx_token = None
        self._ended = False
        self.model = model
        self.inputs = embed_inputs(args, kwargs)
        self.usage: Any = None  # set by an integration that learned the usage from an event
        self.span = span = _model_span(rw, sc.OP_EMBEDDINGS, model, provider)
        self.active = span is not None
        self.start = _perf()

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        model, usage, cost = record_embedding(
            self.rw, self.run, elapsed, result, exc, self.model, self.inputs, self.usage
        )
        span = self.span
        if span is not None and span.is_recording():
            _billed_attributes(span, model, usage, cost, output=False)


class ToolCall(Call):
    """A tool an agent called (GenAI ``execute_tool``): its name, the size of its arguments and its duration on
    a span, and ``(name, seconds, outcome)`` in the run's ``tools``. Retrievals inside it join the run."""

    __slots__ = ("name",)

    def __init__(self, rw: CaptureHost, name: str, arguments: Any = None, call_id: str | None = None) -> None:
        self.rw = rw
        self.run = _RUN.get()
        self.span = self._ctx_token = None
        self._ended = self.active = False
        self.name = name
        tracer = rw.tracer
        if tracer is not None:
            attributes: dict[str, Any] = {sc.OPERATION: sc.OP_TOOL, sc.TOOL_NAME: name}
            if arguments is not None:
                attributes[sc.TOOL_ARGUMENTS_SIZE] = len(arguments if isinstance(arguments, str) else str(arguments))
            if call_id:
                attributes[sc.TOOL_CALL_ID] = call_id
            self.span = tracer.start_span(f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes)
            self.active = True
        self.start = _perf()

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        run = self.run
        outcome = _outcome(exc)
        if run is not None:
            if run.tools is None:
                run.tools = []
            if len(run.tools) < 64:
                run.tools.append((self.name, elapsed, outcome))
