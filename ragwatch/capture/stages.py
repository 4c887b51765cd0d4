"""Stages: the bookkeeping a watched plain or async function's wrapper calls before and after it.

A **stage** (:class:`Stage` and its subclasses) is made once per decorated function. With tracing off it
keeps a call's state in the wrapper's local variables: no object per call and three fewer Python calls per
stage, which is most of the metrics-only overhead (``benchmarks/overhead.py``); a stream result hands over
to a call object (:mod:`ragwatch.capture.calls`). With tracing on, :class:`CallStage` makes a call object per
call. Both end in the same ``record_*`` functions (:mod:`ragwatch.capture.record`).

Each public method is one guarded section: whatever goes wrong inside is counted in
``ragwatch_internal_errors_total`` and logged, and the host carries on with its own result. The wrappers in
:mod:`ragwatch.capture.instrument` drive the stages; nothing here knows whether the host is sync or async.
The call objects and the record functions have one import path each, in
:mod:`~ragwatch.capture.calls` and :mod:`~ragwatch.capture.record`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragwatch.capture.calls import (
    Call,
    EmbedCall,
    GenerateCall,
    PipelineCall,
    RerankCall,
    RetrieveCall,
    embed_inputs,
)
from ragwatch.capture.record import (
    _STREAM_TYPES,
    candidates_of,
    is_stream,
    open_run,
    question_of,
    record_embedding,
    record_generation,
    record_request,
    record_rerank,
    record_retrieval,
)
from ragwatch.capture.run import _RUN, Run

if TYPE_CHECKING:
    from ragwatch.capture.host import CaptureHost

__all__ = [
    "CallStage",
    "EmbedStage",
    "GenerateStage",
    "PipelineStage",
    "RerankStage",
    "RetrieveStage",
    "Stage",
]

_perf = time.perf_counter


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


class _ModelStage(Stage):
    """A stage that calls a model (an LLM, an embedder): the model and provider it was declared with. A
    keyword ``model=`` in a call overrides the model for that call."""

    __slots__ = ("model", "provider")

    def __init__(self, rw: CaptureHost, model: str | None, provider: str | None) -> None:
        self.rw = rw
        self.model = model
        self.provider = provider


class GenerateStage(_ModelStage):
    __slots__ = ()

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


class RerankStage(Stage):
    """A watched reranker: the list it was given (its ``chunks=`` or first list argument) and the one it
    returns, which the LLM then receives."""

    __slots__ = ("name",)

    def __init__(self, rw: CaptureHost, name: str) -> None:
        self.rw = rw
        self.name = name

    def _record(
        self, state: Any, elapsed: float, result: Any, exc: BaseException | None, args: tuple, kwargs: dict
    ) -> None:
        record_rerank(self.rw, state, elapsed, candidates_of(args, kwargs), result, exc)

    def _call(self, state: Any, args: tuple, kwargs: dict) -> Call:
        return RerankCall(self.rw, self.name, args, kwargs)


class EmbedStage(_ModelStage):
    """A watched embedding call: its own latency and the input tokens it billed."""

    __slots__ = ()

    def _record(
        self, state: Any, elapsed: float, result: Any, exc: BaseException | None, args: tuple, kwargs: dict
    ) -> None:
        model = kwargs["model"] if kwargs and isinstance(kwargs.get("model"), str) else self.model
        record_embedding(self.rw, state, elapsed, result, exc, model, embed_inputs(args, kwargs))

    def _call(self, state: Any, args: tuple, kwargs: dict) -> Call:
        return EmbedCall(self.rw, self.model, self.provider, args, kwargs)
