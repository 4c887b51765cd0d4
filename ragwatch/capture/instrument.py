"""Decorator machinery: one wrapper per kind of callable, chosen once at decoration time.

The host's own call is never inside a ``try`` of ours that could change its outcome: its return value
and its exceptions pass through untouched (a stream result comes back wrapped in a transparent proxy).
Our bookkeeping runs before and after, in guarded sections: a plain or async function's wrapper calls its
:class:`~ragwatch.capture.stages.Stage` (which, with tracing on, makes a
:class:`~ragwatch.capture.calls.Call` object per call); a generator function's wrapper drives a call
object through the stream proxy.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ragwatch.capture.calls import Call
from ragwatch.capture.run import _SUPPRESS, _suppress_used
from ragwatch.capture.stages import CallStage, Stage
from ragwatch.capture.streams import AsyncStream, SyncStream
from ragwatch.guard import Guard

__all__ = ["Begin", "instrument"]

F = TypeVar("F", bound=Callable[..., Any])
_perf = time.perf_counter
#: Creates the call object from the host function's arguments.
Begin = Callable[[tuple, dict], Call]


def _open(begin: Begin, args: tuple, kwargs: dict, guard: Guard, activate: bool) -> Call | None:
    """Start a call unless capture is suppressed; None (call straight through) if starting it failed."""
    if _suppress_used[0] and _SUPPRESS.get():
        return None
    try:
        call = begin(args, kwargs)
        if activate and call.active:
            call.activate()
        return call
    except Exception as exc:
        guard.failed("capture", exc)
        return None


def instrument(fn: F, begin: Begin, guard: Guard, stage: Stage | None = None) -> F:
    """Wrap ``fn`` so each call runs inside a call object made by ``begin`` — or, for a plain or async
    function, through ``stage`` when one is given (no call object needed)."""
    if inspect.isasyncgenfunction(fn):
        wrapper: Any = _async_gen_wrapper(fn, begin, guard)
    elif inspect.isgeneratorfunction(fn):
        wrapper = _gen_wrapper(fn, begin, guard)
    elif inspect.iscoroutinefunction(fn):
        wrapper = _async_stage_wrapper(fn, stage or CallStage(begin), guard)
    else:
        wrapper = _sync_stage_wrapper(fn, stage or CallStage(begin), guard)
    return functools.wraps(fn)(wrapper)  # type: ignore[return-value]


def _sync_stage_wrapper(fn: Callable[..., Any], stage: Stage, guard: Guard) -> Callable[..., Any]:
    begin, done, fail = stage.begin, stage.done, stage.fail

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _suppress_used[0] and _SUPPRESS.get():
            return fn(*args, **kwargs)
        try:
            state = begin(args, kwargs)
        except Exception as exc:
            guard.failed("capture", exc)
            return fn(*args, **kwargs)
        start = _perf()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            fail(state, start, exc, args, kwargs)
            raise
        return done(state, start, result, args, kwargs)

    return wrapper


def _async_stage_wrapper(fn: Callable[..., Any], stage: Stage, guard: Guard) -> Callable[..., Any]:
    begin, done, fail = stage.begin, stage.done, stage.fail

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _suppress_used[0] and _SUPPRESS.get():
            return await fn(*args, **kwargs)
        try:
            state = begin(args, kwargs)
        except Exception as exc:
            guard.failed("capture", exc)
            return await fn(*args, **kwargs)
        start = _perf()
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            fail(state, start, exc, args, kwargs)
            raise
        return done(state, start, result, args, kwargs)

    return wrapper


def _gen_wrapper(fn: Callable[..., Any], begin: Begin, guard: Guard) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = _open(begin, args, kwargs, guard, False)
        if call is None:
            return (yield from fn(*args, **kwargs))
        try:
            gen = fn(*args, **kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        # `yield from` forwards send/throw/close to the proxy, which forwards them to the generator.
        return (yield from SyncStream(gen, call))

    return wrapper


def _async_gen_wrapper(fn: Callable[..., Any], begin: Begin, guard: Guard) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = _open(begin, args, kwargs, guard, False)
        if call is None:
            stream: Any = fn(*args, **kwargs)
        else:
            try:
                agen = fn(*args, **kwargs)
            except BaseException as exc:
                call.fail(exc)
                raise
            stream = AsyncStream(agen, call)
        # What `yield from` does for the sync wrapper, by hand (async generators have no `yield from`):
        # values sent with asend() and exceptions thrown in with athrow() reach the host's generator.
        try:
            item = await stream.__anext__()
            while True:
                try:
                    sent = yield item
                except GeneratorExit:
                    await stream.aclose()
                    raise
                except BaseException as exc:
                    item = await stream.athrow(exc)
                else:
                    item = await (stream.__anext__() if sent is None else stream.asend(sent))
        except StopAsyncIteration:
            return

    return wrapper
