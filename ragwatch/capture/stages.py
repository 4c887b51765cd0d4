"""The bookkeeping of one stage call: pipeline (a whole request), retrieve, generate.

What a finished call records — stage latency, chunk counts, tokens and cost, the run's facts — is written
once, in the ``record_*`` functions. Two kinds of object drive them:

* a **call object** (:class:`Call` and its subclasses) carries the per-call state a span or a stream needs:
  it is created just before the host function runs and finished when its result — or, for a stream, the
  last item — is in. Tracing, generator functions, returned streams, context managers and the ASGI
  middleware use these;
* a **stage** (:class:`Stage` and its subclasses) is made once per decorated plain or async function and
  is what its wrapper calls before and after the host function. With tracing off, the stage keeps a call's
  state in the wrapper's local variables: no object per call and three fewer Python calls per stage, which
  is most of the metrics-only overhead (``benchmarks/overhead.py``); a stream result hands over to a call
  object. With tracing on, :class:`CallStage` makes a call object per call.

Each public method is one guarded section: whatever goes wrong inside is counted in
``ragwatch_internal_errors_total`` and logged, and the host carries on with its own result. The wrappers in
:mod:`ragwatch.capture.instrument` and the context managers in :mod:`ragwatch.capture.watch` drive these objects;
nothing
here knows whether the host is sync or async.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ragwatch.capture import semconv as sc
from ragwatch.capture.chunks import Chunk, normalize_chunks
from ragwatch.capture.responses import StreamAccumulator, Usage, estimate_tokens, read_response
from ragwatch.capture.run import _RUN, Run
from ragwatch.labels import MAX_LABEL_CHARS, safe_label

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from ragwatch.capture.host import CaptureHost
    from ragwatch.metrics.catalog import ModelChildren

__all__ = [
    "Call",
    "CallStage",
    "DegradedRetrieveCall",
    "GenerateCall",
    "GenerateStage",
    "PipelineCall",
    "PipelineStage",
    "RetrieveCall",
    "RetrieveStage",
    "Stage",
    "is_stream",
]

_perf = time.perf_counter
_CANCELLED = (GeneratorExit, asyncio.CancelledError)


_STREAM_TYPES: dict[type, bool] = {}
_QUESTION_KEYS = ("question", "query", "q", "input", "prompt")


def question_of(args: tuple, kwargs: dict | None) -> str | None:
    """The user's question among a watched function's arguments: a keyword such as ``question=``, else
    the first string among the first two positional arguments (a method's first argument is ``self``)."""
    if not kwargs and args and type(args[0]) is str:  # the common `answer(question)` call
        return args[0]
    if kwargs:
        for key in _QUESTION_KEYS:
            value = kwargs.get(key)
            if isinstance(value, str):
                return value
    for value in args[:2]:
        if isinstance(value, str):
            return value
    return None


def is_stream(value: Any) -> bool:
    """An iterator the host will consume after the call returns (a generator, an SDK stream object or
    stream manager).

    Cached per type: this runs on every wrapped call, and two failed ``hasattr`` lookups cost more than
    a dictionary hit. Bounded, in case a host generates classes.
    """
    cls = type(value)
    try:
        found = _STREAM_TYPES.get(cls)
        if found is None:
            found = (
                hasattr(cls, "__next__")
                or hasattr(cls, "__anext__")
                # SDK stream managers (openai's `.stream()`, anthropic's): the stream opens on `with`
                or (
                    cls.__name__.endswith("StreamManager") and (hasattr(cls, "__enter__") or hasattr(cls, "__aenter__"))
                )
            )
            if len(_STREAM_TYPES) < 512:
                _STREAM_TYPES[cls] = found
    except Exception:  # a class whose metaclass raises on lookup or hashing: not a stream we can follow
        return False
    return found


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


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    return "cancelled" if isinstance(exc, _CANCELLED) else "error"


def _observe(rw: CaptureHost, run: Run | None, stage: str, elapsed: float, exc: BaseException | None) -> str:
    """A stage's latency into its histogram and the run's durations; returns the outcome."""
    outcome = "ok" if exc is None else _outcome(exc)
    children = rw.stage_children
    if children:
        children[(stage, outcome)].observe(elapsed)
    if run is not None:
        durations = run.durations
        if stage in durations:
            durations[stage] += elapsed
        else:
            durations[stage] = elapsed
    return outcome


def record_retrieval(
    rw: CaptureHost, run: Run | None, elapsed: float, result: Any, exc: BaseException | None
) -> int | None:
    """A finished retriever call; returns how many chunks came back (None: nothing countable)."""
    _observe(rw, run, "retrieve", elapsed, exc)
    if run is not None:
        run.rag = True
    if exc is not None or result is None:
        return None
    try:
        count = len(result)
    except TypeError:
        return None  # an iterator we must not consume; nothing to count
    if rw.chunks_child is not None:
        rw.chunks_child.observe(count)
    if run is not None:
        run.retrieved = result
    return count


def record_generation(
    rw: CaptureHost,
    run: Run | None,
    elapsed: float,
    result: Any,
    exc: BaseException | None,
    model: str | None,
    prompt: Any,
    acc: StreamAccumulator | None = None,
    ttft: float | None = None,
) -> tuple[str, Usage | None, float | None]:
    """A finished LLM call: tokens (reported, else estimated from ``prompt`` and the answer), cost, TTFT.

    ``acc`` holds what a stream delivered (then ``result`` is ignored). Returns (model, usage, cost) for
    the span.
    """
    _observe(rw, run, "generate", elapsed, exc)
    if run is not None:
        run.rag = True
    text: str | None = None
    usage: Usage | None = None
    answered: str | None = None
    if acc is not None:
        text, usage, answered = acc.text, acc.usage, acc.model
    elif exc is None and result is not None:
        try:
            text, usage, answered = read_response(result)
        except Exception as err:
            rw.guard.failed("response", err)
    model = answered or model or "unknown"
    if type(model) is not str or len(model) > MAX_LABEL_CHARS or not model.isprintable():
        model = safe_label(model)  # it comes from the response: a label, never a 100 KB string
    if usage is None and text is not None:
        usage = Usage(_estimate_prompt(prompt), estimate_tokens(text), 0, True)
    children: ModelChildren | None
    try:
        children = rw.models[model]
    except KeyError:
        children = rw.model_children(model)
    cost = None
    if usage is not None:
        try:
            cost = rw.pricing.cost(model, usage)
        except Exception as err:  # a broken pricing entry: counted, the call goes on without cost
            rw.guard.failed("pricing", err)
        else:
            if cost is None:
                rw.count_unpriced(model, children)
    if children is not None:
        if ttft is not None:
            children.ttft.observe(ttft)
        if usage is not None:
            if usage.estimated:
                children.add_estimated(usage.input_tokens, usage.output_tokens, cost or 0.0)
            else:
                u = usage
                children.add_reported(u.input_tokens, u.output_tokens, u.cached_input_tokens, cost or 0.0)
    if run is not None:
        if text is not None:
            run.answer = text
        run.model = model
        run.usage = usage
        run.cost_usd = cost
        if ttft is not None and run.ttft is None:
            run.ttft = ttft
    return model, usage, cost


def record_request(rw: CaptureHost, run: Run, elapsed: float, result: Any, exc: BaseException | None) -> None:
    """Close a run and hand it to the listeners (the sampler) if it is a RAG request (``run.rag``); each
    listener's errors are contained. Its latency is recorded either way."""
    run.outcome = _observe(rw, run, "request", elapsed, exc)
    if exc is not None:
        run.error = type(exc).__qualname__
    elif run.answer is None and isinstance(result, str):
        run.answer = result
    if rw.listeners and run.rag:
        rw.run_ended(run)


def open_run(rw: CaptureHost, question: str | None, route: str | None) -> Run | None:
    """A new run for a request, or None inside one already running (a middleware run or an outer
    pipeline), which the inner one joins: it marks it a RAG request, may fill in the question, and records
    nothing itself."""
    current = _RUN.get()
    if current is not None:
        current.rag = True
        if question and current.question is None:
            current.question = question
        return None
    run = Run(rw.service, question, route)
    mode = rw.mode_watcher
    if mode is not None and mode._thread is None:
        mode.start()
    scorer = rw.scorer
    if scorer is not None and scorer._thread is None:
        scorer.start()
    return run


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

    def activate(self) -> None:
        if self._owner:
            self._run_token = _RUN.set(self.run)
            if self.span is not None:
                Call.activate(self)

    def deactivate(self) -> None:
        if self._owner:
            if self._ctx_token is not None:
                Call.deactivate(self)
            token, self._run_token = self._run_token, None
            if token is not None:
                try:
                    _RUN.reset(token)  # type: ignore[arg-type]
                except Exception as exc:
                    self.rw.guard.failed("capture", exc)

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        if self.run is not None:
            record_request(self.rw, self.run, elapsed, result, exc)


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
                self._describe(span, normalize_chunks(result), count)
            except Exception as err:
                self.rw.guard.failed("chunks", err)

    def _describe(self, span: Any, chunks: list[Chunk], count: int) -> None:
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
        self.span = self._ctx_token = None
        self._ended = self.active = False
        self.model = model
        self.provider = provider
        self._prompt = (args, kwargs) if args is not None else None
        self._acc: StreamAccumulator | None = None
        self.ttft: float | None = None
        tracer = rw.tracer
        if tracer is not None:
            attributes: dict[str, Any] = {sc.OPERATION: sc.OP_CHAT}
            if model:
                attributes[sc.REQUEST_MODEL] = model
            if provider:
                attributes[sc.PROVIDER] = provider
            self.span = tracer.start_span(
                f"chat {model}" if model else "chat", kind=SpanKind.CLIENT, attributes=attributes
            )
            self.active = True
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

    def _record(self, elapsed: float, result: Any, exc: BaseException | None) -> None:
        model, usage, cost = record_generation(
            self.rw, self.run, elapsed, result, exc, self.model, self._prompt, self._acc, self.ttft
        )
        span = self.span
        if span is not None and span.is_recording():
            span.set_attribute(sc.RESPONSE_MODEL, model)
            if usage is not None:
                span.set_attribute(sc.USAGE_INPUT, usage.input_tokens)
                span.set_attribute(sc.USAGE_OUTPUT, usage.output_tokens)
                if usage.cached_input_tokens:
                    span.set_attribute(sc.USAGE_CACHED, usage.cached_input_tokens)
                if usage.estimated:
                    span.set_attribute(sc.USAGE_ESTIMATED, True)
            if cost is not None:
                span.set_attribute(sc.COST, cost)
            if self.ttft is not None:
                span.set_attribute(sc.TTFT, self.ttft)


# -- stages: what a plain or async function's wrapper calls -------------------------------------------------


class _Degraded:
    """A retriever call's state when it began in degraded mode: its result passes the degraded policies."""

    __slots__ = ("run",)

    def __init__(self, run: Run | None) -> None:
        self.run = run


def _lower_top_k(rw: CaptureHost, kwargs: dict) -> None:
    """In degraded mode, lower the retriever's ``top_k``/``k`` argument (the call receives this dict)."""
    top_k = rw.settings.degraded_top_k
    if top_k is not None:
        for key in ("top_k", "k"):
            if key in kwargs:
                kwargs[key] = top_k


class Stage:
    """One watched plain or async function's bookkeeping, made once at decoration. This base and its
    retrieve/generate/pipeline subclasses need no call object (tracing off): a call's state is what
    ``begin`` returns, kept in the wrapper's local variables.

    The wrapper calls ``state = begin(args, kwargs)`` before the host function, then ``done(state, start,
    result, args, kwargs)`` with its result (what ``done`` returns goes to the caller: the result itself, or
    a proxy when it is a stream, which a call object then follows) or ``fail(...)`` with its exception.
    ``done`` and ``fail`` never raise.
    """

    __slots__ = ("rw",)

    def __init__(self, rw: CaptureHost) -> None:
        self.rw = rw

    def begin(self, args: tuple, kwargs: dict) -> Any:
        return _RUN.get()

    def done(self, state: Any, start: float, result: Any, args: tuple, kwargs: dict) -> Any:
        if type(state) is _Degraded:  # a retrieval begun in degraded mode; checked here, not in an override of
            # RetrieveStage.done, to save every retrieval a Python call
            result = self.rw.degraded_result(state.run.question if state.run else None, result)
        elapsed = _perf() - start
        try:  # is_stream() inlined, as in Call.done
            found = _STREAM_TYPES[type(result)]
        except Exception:  # not cached yet, or a type that cannot even be hashed: is_stream never raises
            found = is_stream(result)
        try:
            if found:
                return self._follow(state, start, result, args, kwargs)
            self._record(state, elapsed, result, None, args, kwargs)
        except Exception as err:
            self.rw.guard.failed("capture", err)
        return result

    def fail(self, state: Any, start: float, exc: BaseException, args: tuple, kwargs: dict) -> None:
        try:
            self._record(state, _perf() - start, None, exc, args, kwargs)
        except Exception as err:
            self.rw.guard.failed("capture", err)

    def _record(
        self, state: Any, elapsed: float, result: Any, exc: BaseException | None, args: tuple, kwargs: dict
    ) -> None:
        raise NotImplementedError

    def _call(self, state: Any, args: tuple, kwargs: dict) -> Call:
        """The call object that takes over when the function returned a stream."""
        raise NotImplementedError

    def _follow(self, state: Any, start: float, result: Any, args: tuple, kwargs: dict) -> Any:
        from ragwatch.capture.streams import proxy_stream

        call = self._call(state, args, kwargs)
        call.start = start  # the stream's stage began when the function was called
        return proxy_stream(result, call)


class CallStage(Stage):
    """Drives a call object per call (tracing on): its span is current while the host function runs. The
    call objects hold everything, so this stage has no ``rw`` of its own."""

    __slots__ = ("_begin",)

    def __init__(self, begin: Callable[[tuple, dict], Call]) -> None:
        self._begin = begin

    def begin(self, args: tuple, kwargs: dict) -> Any:
        call = self._begin(args, kwargs)
        if call.active:
            call.activate()
        return call

    def done(self, call: Any, start: float, result: Any, args: tuple, kwargs: dict) -> Any:
        if call.active:
            call.deactivate()
        return call.done(result)

    def fail(self, call: Any, start: float, exc: BaseException, args: tuple, kwargs: dict) -> None:
        if call.active:
            call.deactivate()
        call.fail(exc)


class RetrieveStage(Stage):
    __slots__ = ("name",)

    def __init__(self, rw: CaptureHost, name: str) -> None:
        self.rw = rw
        self.name = name

    def begin(self, args: tuple, kwargs: dict) -> Any:
        """Fill in the run's question if the pipeline could not read it; in degraded mode, lower top_k."""
        run = _RUN.get()
        if run is not None and run.question is None:
            run.question = question_of(args, kwargs)
        mode = self.rw.mode_watcher
        if mode is not None and mode.degraded:
            _lower_top_k(self.rw, kwargs)
            return _Degraded(run)
        return run

    def _record(
        self, state: Any, elapsed: float, result: Any, exc: BaseException | None, args: tuple, kwargs: dict
    ) -> None:
        record_retrieval(self.rw, state.run if type(state) is _Degraded else state, elapsed, result, exc)

    def _call(self, state: Any, args: tuple, kwargs: dict) -> Call:
        return RetrieveCall(self.rw, None, self.name)


class GenerateStage(Stage):
    __slots__ = ("model", "provider")

    def __init__(self, rw: CaptureHost, model: str | None, provider: str | None) -> None:
        self.rw = rw
        self.model = model
        self.provider = provider

    def _record(
        self, state: Any, elapsed: float, result: Any, exc: BaseException | None, args: tuple, kwargs: dict
    ) -> None:
        model = kwargs["model"] if kwargs and isinstance(kwargs.get("model"), str) else self.model
        record_generation(self.rw, state, elapsed, result, exc, model, (args, kwargs))

    def _call(self, state: Any, args: tuple, kwargs: dict) -> Call:
        return GenerateCall(self.rw, self.model, self.provider, args, kwargs)


class PipelineStage(Stage):
    """A request: ``begin`` opens the run and makes it current, ``done``/``fail`` restore the context first."""

    __slots__ = ("name",)

    def __init__(self, rw: CaptureHost, name: str | None) -> None:
        self.rw = rw
        self.name = name

    def begin(self, args: tuple, kwargs: dict) -> Any:
        question = args[0] if not kwargs and args and type(args[0]) is str else question_of(args, kwargs)
        run = open_run(self.rw, question, None)
        if run is None:
            return None  # joined an outer run: nothing of its own to record
        return run, _RUN.set(run)

    def done(self, state: Any, start: float, result: Any, args: tuple, kwargs: dict) -> Any:
        if state is None:
            return result
        self._leave(state)
        return Stage.done(self, state, start, result, args, kwargs)

    def fail(self, state: Any, start: float, exc: BaseException, args: tuple, kwargs: dict) -> None:
        if state is not None:
            self._leave(state)
            Stage.fail(self, state, start, exc, args, kwargs)

    def _leave(self, state: tuple[Run, Any]) -> None:
        try:
            _RUN.reset(state[1])
        except Exception as exc:
            self.rw.guard.failed("capture", exc)

    def _record(
        self, state: Any, elapsed: float, result: Any, exc: BaseException | None, args: tuple, kwargs: dict
    ) -> None:
        record_request(self.rw, state[0], elapsed, result, exc)

    def _call(self, state: Any, args: tuple, kwargs: dict) -> Call:
        return PipelineCall(self.rw, name=self.name, run=state[0])


def _estimate_prompt(prompt: Any) -> int:
    """Rough input size when the API reported none: the string content of the call's arguments."""
    total = 0
    stack = [prompt]
    seen = 0
    while stack and seen < 256:
        item = stack.pop()
        seen += 1
        if isinstance(item, str):
            total += estimate_tokens(item)
        elif isinstance(item, Mapping):
            for key in ("content", "text", "page_content"):
                value = item.get(key)
                if isinstance(value, str):
                    total += estimate_tokens(value)
                    break
            else:
                messages = item.get("messages")
                if isinstance(messages, (list, tuple)):
                    stack.extend(messages)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            text = getattr(item, "page_content", None) or getattr(item, "text", None)
            if isinstance(text, str):
                total += estimate_tokens(text)
    return total
