"""Proxies around streamed results: finish the stage when the stream ends, not when the call returns.

An LLM stream is consumed after the decorated function has returned, often in another thread or task
(Starlette iterates sync generators in a thread pool). The proxy therefore:

- observes each item (time to first token, text assembly) and hands it on unchanged;
- finishes the call exactly once: on exhaustion (``ok``), on an error (``error``), on ``close()`` /
  ``aclose()`` / leaving a ``with`` block early (``cancelled``) — and when it is collected before any of
  those (``cancelled`` too, its partial text kept): a host that never reads the stream, or drops it half
  read, must not leave its call open for ever, uncounted (see :class:`_Proxy` for why a finaliser);
- tells the call it is followed (``streaming()``), so the request's run, which may end first, waits for this
  stream's end before it reaches the listeners (:meth:`~ragwatch.capture.run.Run.hold_for`);
- makes the call's context current around each step only, because a context variable set in one step and
  reset in the next may belong to another thread's copy of the context;
- forwards everything else (``.response``, ``.close()``, ``send``/``throw``, ``asend``/``athrow``) to the
  wrapped object, so SDK stream objects and generators keep working.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from sys import getrefcount
from types import AsyncGeneratorType, GeneratorType
from typing import Any, Protocol

__all__ = ["AsyncStream", "StreamObserver", "SyncStream", "proxy_stream"]


class StreamObserver(Protocol):
    """What a stream proxy needs from the call it reports to (a :class:`~ragwatch.capture.calls.Call`)."""

    active: bool

    def on_item(self, item: Any) -> None: ...

    def streaming(self) -> None: ...

    def finish(self, result: Any, exc: BaseException | None) -> Any: ...

    def activate(self) -> None: ...

    def deactivate(self) -> None: ...


def proxy_stream(stream: Any, call: StreamObserver) -> Any:
    """Wrap ``stream`` (sync or async iterator, or an SDK stream manager) so ``call`` sees its items and end.

    An SDK stream object (``openai.Stream``, ``anthropic.AsyncStream``, a ``…StreamManager``) is observed in
    place instead: the host gets the very object back, so ``isinstance(s, openai.Stream)`` and every
    method of it keep working. Generators and classes that cannot take it get the transparent proxy.
    """
    cls = type(stream)
    if cls.__name__ == "LegacyAPIResponse":  # openai's with_raw_response: the body is in, its result parses now
        return _raw_response(stream, call)
    if cls not in _PROXY_ONLY:
        observed = _observe_in_place(stream, call)
        if observed is not None:
            return observed
    if hasattr(cls, "__anext__"):
        return AsyncStream(stream, call)
    if hasattr(cls, "__next__"):
        return SyncStream(stream, call)
    call.finish(None, None)  # a stream manager that cannot be observed: its latency so far, nothing else
    return stream


_PROXY_ONLY: set[type] = {GeneratorType, AsyncGeneratorType}
#: host class -> its observing subclass (None: the class cannot take one).
_OBSERVED: dict[type, type | None] = {}


def _observe_in_place(stream: Any, call: StreamObserver) -> Any:
    """Give ``stream`` an observing subclass of its own class; None when that is not possible."""
    cls = type(stream)
    try:
        sub = _OBSERVED[cls]
    except KeyError:
        sub = _observing_class(cls)
        if len(_OBSERVED) < 256:
            _OBSERVED[cls] = sub
    if sub is None:
        return None
    if sub is cls:  # handed through a second watched function (an LLM call returned by a pipeline)
        stream.__dict__[_CALL].add(call)
        call.streaming()
        return stream
    try:
        stream.__dict__[_CALL] = _Calls(call)
        stream.__class__ = sub
    except (AttributeError, TypeError):
        _PROXY_ONLY.add(cls)
        return None
    call.streaming()
    return stream


_CALL = "_ragwatch_call"
#: Set on a stream manager once ``with`` opened its stream, and on a raw response once ``.parse()`` gave a
#: stream: the stream now carries the calls, and collecting the manager or the response must not end them.
_HANDED = "_ragwatch_handed"


class _Calls:
    """The calls observing one stream object, innermost first — the order nested proxies finish in."""

    __slots__ = ("calls",)
    active = False  # a proxy around an entered stream must not switch contexts for these calls

    def __init__(self, call: StreamObserver | _Calls) -> None:
        self.calls = [call]

    def add(self, call: StreamObserver | _Calls) -> None:
        self.calls.append(call)

    def streaming(self) -> None:
        """Nothing: each of these calls said so when it was first followed."""

    def on_item(self, item: Any) -> None:
        for call in self.calls:
            call.on_item(item)

    def finish(self, result: Any, exc: BaseException | None) -> None:
        for call in self.calls:
            call.finish(result, exc)


def _observing_class(cls: type) -> type | None:
    """A subclass of ``cls`` whose iteration, close and exit also drive the call kept on the instance.

    Its methods call ``cls``'s own through closures rather than ``super()`` in a mixin: a mixin base in
    front of the SDK class changes the instance layout, and ``__class__`` assignment refuses that.
    """
    if getattr(cls, "_ragwatch_observed", False):
        return cls
    if cls.__name__ in ("APIResponse", "AsyncAPIResponse") and hasattr(cls, "parse"):
        namespace = _raw_stream_methods(cls)
    elif hasattr(cls, "__anext__"):
        namespace = _async_stream_methods(cls)
    elif hasattr(cls, "__next__"):
        namespace = _sync_stream_methods(cls)
    elif hasattr(cls, "__aenter__"):
        namespace = _async_manager_methods(cls)
    elif hasattr(cls, "__enter__"):
        namespace = _sync_manager_methods(cls)
    else:
        return None
    namespace.update(__module__=cls.__module__, __qualname__=cls.__qualname__, __slots__=(), _ragwatch_observed=True)
    namespace["__del__"] = _finaliser(getattr(cls, "__del__", None))
    try:
        return type(cls.__name__, (cls,), namespace)
    except TypeError:  # a final class
        return None


def _raw_response(response: Any, call: StreamObserver) -> Any:
    """Record what a raw response parses to (a completion, or a stream then followed), not its HTTP body.
    The SDK caches the parse, so the host's own ``.parse()`` returns the same object (an observed stream)."""
    try:
        parsed = response.parse()
    except Exception as exc:  # the host's parse will raise the same; this call's record has no result
        call.finish(None, exc)
        return response
    _hand_over(parsed, call)
    return response


def _hand_over(parsed: Any, call: StreamObserver | _Calls) -> None:
    """Finish ``call`` with a parsed result, or follow it when it is a stream."""
    cls = type(parsed)
    if hasattr(cls, "__next__") or hasattr(cls, "__anext__"):
        if _observe_in_place(parsed, call) is None:  # type: ignore[arg-type]
            call.finish(None, None)  # a stream we cannot observe in place: its latency so far
        return
    call.finish(parsed, None)


def _raw_stream_methods(cls: type) -> dict[str, Any]:
    """openai's ``with_streaming_response`` responses: the body is read when the host parses it."""
    base_parse, base_json, base_close = cls.parse, cls.json, cls.close  # type: ignore[attr-defined]
    if _is_coroutine(base_parse):

        async def aparse(self: Any, **kwargs: Any) -> Any:
            parsed = await base_parse(self, **kwargs)
            if not kwargs:
                _hand_over(parsed, self.__dict__[_CALL])
                self.__dict__[_HANDED] = True
            return parsed

        async def ajson(self: Any) -> Any:
            data = await base_json(self)
            self.__dict__[_CALL].finish(data, None)
            return data

        async def aclose(self: Any) -> Any:
            ended = _body_read(self)
            try:
                return await base_close(self)
            finally:
                _closed(self, ended)

        return {"parse": aparse, "json": ajson, "close": aclose}

    def parse(self: Any, **kwargs: Any) -> Any:
        parsed = base_parse(self, **kwargs)
        if not kwargs:
            _hand_over(parsed, self.__dict__[_CALL])
            self.__dict__[_HANDED] = True
        return parsed

    def json(self: Any) -> Any:
        data = base_json(self)
        self.__dict__[_CALL].finish(data, None)
        return data

    def close(self: Any) -> Any:
        ended = _body_read(self)
        try:
            return base_close(self)
        finally:
            _closed(self, ended)

    return {"parse": parse, "json": json, "close": close}


def _body_read(response: Any) -> bool:
    """Whether a streaming response's body was read to its end (the HTTP client closes it then) or parsed;
    asked before ``close()``, which closes it either way."""
    if response.__dict__.get(_HANDED):
        return False  # its stream ended its calls if it was read to the end; if not, closing abandons it
    try:
        return bool(response.http_response.is_closed)
    except Exception:  # not the SDK response we know: take its close as the end of a read body
        return True


def _closed(response: Any, ended: bool) -> None:
    """A streaming response closed: read some other way to its end (``iter_lines``: its latency, no usage,
    ``ok``), or closed before its body or the stream it parsed to was read to the end (``cancelled``, with
    what the stream delivered)."""
    response.__dict__[_CALL].finish(None, None if ended else GeneratorExit())


def _is_coroutine(fn: Any) -> bool:
    import inspect

    return inspect.iscoroutinefunction(fn)


def _exit_method(base_exit: Any) -> Any:
    def __exit__(self: Any, *exc_info: Any) -> Any:
        call = self.__dict__[_CALL]
        if exc_info[1] is not None:
            call.finish(None, exc_info[1])
        try:
            return base_exit(self, *exc_info)
        finally:
            call.finish(None, GeneratorExit())

    return __exit__


def _aexit_method(base_aexit: Any) -> Any:
    async def __aexit__(self: Any, *exc_info: Any) -> Any:
        call = self.__dict__[_CALL]
        if exc_info[1] is not None:
            call.finish(None, exc_info[1])
        try:
            return await base_aexit(self, *exc_info)
        finally:
            call.finish(None, GeneratorExit())

    return __aexit__


def _finaliser(base_del: Any) -> Any:
    """An observed SDK object collected unfinished ends its calls as ``close()`` would (``cancelled``; a
    no-op once they ended), then runs its class's own finaliser, if any. Never raises. Streams, and also a
    stream manager never entered (its request never sent) and a streaming response never closed: either
    would otherwise keep its call — and a pipeline that returned it, its whole run — open for ever. Not
    once they handed their calls to the stream they opened (:data:`_HANDED`): that stream ends them."""

    def __del__(self: Any) -> None:
        # no contextlib.suppress: at interpreter shutdown this module's globals may already be gone
        try:
            found = self.__dict__
            if not found.get(_HANDED):
                found[_CALL].finish(None, GeneratorExit())
        except Exception:  # finish guards itself; this is shutdown tearing its modules down
            pass
        if base_del is not None:
            base_del(self)

    return __del__


def _sync_stream_methods(cls: type) -> dict[str, Any]:
    base_next = cls.__next__  # type: ignore[attr-defined]
    base_close = getattr(cls, "close", None)
    base_exit = getattr(cls, "__exit__", None)

    def __iter__(self: Any) -> Any:
        return self  # the SDKs' own __iter__ reads their inner iterator directly, past __next__

    def __next__(self: Any) -> Any:
        call = self.__dict__[_CALL]
        try:
            item = base_next(self)
        except StopIteration:
            call.finish(None, None)
            raise
        except BaseException as exc:
            call.finish(None, exc)
            raise
        call.on_item(item)
        return item

    methods: dict[str, Any] = {"__iter__": __iter__, "__next__": __next__}
    if base_close is not None:

        def close(self: Any) -> Any:
            try:
                return base_close(self)
            finally:
                self.__dict__[_CALL].finish(None, GeneratorExit())

        methods["close"] = close
    if base_exit is not None:
        methods["__exit__"] = _exit_method(base_exit)
    return methods


def _async_stream_methods(cls: type) -> dict[str, Any]:
    base_anext = cls.__anext__  # type: ignore[attr-defined]
    base_close = getattr(cls, "close", None)
    base_aexit = getattr(cls, "__aexit__", None)

    def __aiter__(self: Any) -> Any:
        return self

    async def __anext__(self: Any) -> Any:
        call = self.__dict__[_CALL]
        try:
            item = await base_anext(self)
        except StopAsyncIteration:
            call.finish(None, None)
            raise
        except BaseException as exc:
            call.finish(None, exc)
            raise
        call.on_item(item)
        return item

    methods: dict[str, Any] = {"__aiter__": __aiter__, "__anext__": __anext__}
    if base_close is not None:

        async def close(self: Any) -> Any:
            try:
                result = base_close(self)
                return (await result) if hasattr(result, "__await__") else result
            finally:
                self.__dict__[_CALL].finish(None, GeneratorExit())

        methods["close"] = close
    if base_aexit is not None:
        methods["__aexit__"] = _aexit_method(base_aexit)
    return methods


def _enter_context(calls: _Calls) -> list[Any]:
    """Make the manager's calls current while ``with`` sends its request: a pipeline that returned the manager
    has left its run by then, and the SDK call the manager makes (itself watched) must join that run — not
    count outside it, its answer and usage missing from the run. Outermost first; once per stream."""
    entered = []
    for call in reversed(calls.calls):
        if call.active and not isinstance(call, _Calls):
            call.activate()
            entered.append(call)
    return entered


def _leave_context(entered: list[Any]) -> None:
    for call in reversed(entered):
        call.deactivate()


def _sync_manager_methods(cls: type) -> dict[str, Any]:
    """A stream manager (``client.chat.completions.stream(...)``): the stream it opens on ``with`` is
    observed by the same call."""
    base_enter = cls.__enter__  # type: ignore[attr-defined]

    def __enter__(self: Any) -> Any:
        call = self.__dict__[_CALL]
        entered = _enter_context(call)
        try:
            stream = base_enter(self)
        except BaseException as exc:
            _leave_context(entered)
            call.finish(None, exc)
            raise
        _leave_context(entered)
        self.__dict__[_HANDED] = True
        return proxy_stream(stream, call)

    return {"__enter__": __enter__, "__exit__": _exit_method(cls.__exit__)}  # type: ignore[attr-defined]


def _async_manager_methods(cls: type) -> dict[str, Any]:
    base_aenter = cls.__aenter__  # type: ignore[attr-defined]

    async def __aenter__(self: Any) -> Any:
        call = self.__dict__[_CALL]
        entered = _enter_context(call)
        try:
            stream = await base_aenter(self)
        except BaseException as exc:
            _leave_context(entered)
            call.finish(None, exc)
            raise
        _leave_context(entered)
        self.__dict__[_HANDED] = True
        return proxy_stream(stream, call)

    return {"__aenter__": __aenter__, "__aexit__": _aexit_method(cls.__aexit__)}  # type: ignore[attr-defined]


class _Proxy:
    """What both proxies share, with the finaliser that ends a stream the host dropped unfinished.

    A finaliser rather than the wrapped generator's own ``finally``: a generator never started has no frame
    to run one in, an SDK stream object has none, and an unread async generator is closed on its event loop
    later, if at all. It runs when the last reference goes, in whichever thread drops it, does what
    ``close()`` does (finish the call as ``cancelled``; a no-op for a call that already ended) and never
    raises. It costs one call per stream, nothing per item.
    """

    __slots__ = ("_call", "_stream")

    def __init__(self, stream: Any, call: StreamObserver) -> None:
        self._stream = stream
        self._call = call
        call.streaming()  # its run now waits for this stream's end (or its collection) to reach the listeners

    def __del__(self) -> None:
        # no contextlib.suppress: at interpreter shutdown this module's globals may already be gone
        try:  # noqa: SIM105
            self._abandon()
        except Exception:  # finish guards itself; the host's own close raising, or shutdown tearing down
            pass

    def _abandon(self) -> None:
        """Collected: end the call as ``close()`` would. When this proxy held the last reference to a
        generator or an inner proxy, collection is about to close that anyway: it is closed first, as
        ``close()`` closes it, so a call nested in the stream (a pipeline's generator reading an LLM stream)
        ends before this one rather than after its run went to the listeners."""
        stream = self._stream
        try:
            if getrefcount(stream) <= 3:  # this slot, the local name and the argument: nobody else holds it
                if type(stream) is GeneratorType:
                    stream.close()
                elif isinstance(stream, _Proxy):
                    stream._abandon()
        finally:
            self._call.finish(None, GeneratorExit())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __repr__(self) -> str:
        return f"<ragwatch stream proxy of {self._stream!r}>"


class SyncStream(_Proxy):
    """Iterator proxy; also a usable target of ``yield from`` (``send``/``throw`` are forwarded)."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return self._step(next)

    def send(self, value: Any) -> Any:
        return self._step(lambda s: s.send(value))

    def throw(self, *exc_info: Any) -> Any:
        return self._step(lambda s: s.throw(*exc_info))

    def _step(self, advance: Any) -> Any:
        call = self._call
        active = call.active
        if active:
            call.activate()
        try:
            item = advance(self._stream)
        except StopIteration:
            if active:
                call.deactivate()
            call.finish(None, None)
            raise
        except BaseException as exc:
            if active:
                call.deactivate()
            call.finish(None, exc)
            raise
        if active:
            call.deactivate()
        call.on_item(item)
        return item

    def close(self) -> None:
        try:
            close = getattr(self._stream, "close", None)
            if close is not None:
                close()
        finally:
            self._call.finish(None, GeneratorExit())

    def __enter__(self) -> SyncStream:
        enter = getattr(self._stream, "__enter__", None)
        if enter is not None:
            enter()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            exit_ = getattr(self._stream, "__exit__", None)
            return exit_(*exc_info) if exit_ is not None else None
        finally:
            self._call.finish(None, exc_info[1] if exc_info[1] is not None else GeneratorExit())


class AsyncStream(_Proxy):
    """Async iterator proxy; the async twin of :class:`SyncStream`."""

    __slots__ = ()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        return await self._step(self._stream.__anext__)

    async def asend(self, value: Any) -> Any:
        return await self._step(lambda: self._stream.asend(value))

    async def athrow(self, *exc_info: Any) -> Any:
        return await self._step(lambda: self._stream.athrow(*exc_info))

    async def _step(self, advance: Any) -> Any:
        call = self._call
        call.activate()
        try:
            item = await advance()
        except StopAsyncIteration:
            call.deactivate()
            call.finish(None, None)
            raise
        except BaseException as exc:
            call.deactivate()
            call.finish(None, exc)
            raise
        call.deactivate()
        call.on_item(item)
        return item

    async def aclose(self) -> None:
        try:
            aclose = getattr(self._stream, "aclose", None) or getattr(self._stream, "close", None)
            if aclose is not None:
                result = aclose()
                if hasattr(result, "__await__"):
                    await result
        finally:
            self._call.finish(None, GeneratorExit())

    async def __aenter__(self) -> AsyncStream:
        enter = getattr(self._stream, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            exit_ = getattr(self._stream, "__aexit__", None)
            return (await exit_(*exc_info)) if exit_ is not None else None
        finally:
            self._call.finish(None, exc_info[1] if exc_info[1] is not None else GeneratorExit())
