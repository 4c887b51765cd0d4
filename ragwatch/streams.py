"""Proxies around streamed results: finish the stage when the stream ends, not when the call returns.

An LLM stream is consumed after the decorated function has returned, often in another thread or task
(Starlette iterates sync generators in a thread pool). The proxy therefore:

- observes each item (time to first token, text assembly) and hands it on unchanged;
- finishes the call exactly once: on exhaustion (``ok``), on an error (``error``), on ``close()`` /
  ``aclose()`` / leaving a ``with`` block early (``cancelled``);
- makes the call's context current around each step only, because a context variable set in one step and
  reset in the next may belong to another thread's copy of the context;
- forwards everything else (``.response``, ``.close()``, ``send``/``throw``, ``asend``/``athrow``) to the
  wrapped object, so SDK stream objects and generators keep working.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .stages import Call

__all__ = ["AsyncStream", "SyncStream", "proxy_stream"]


def proxy_stream(stream: Any, call: Call) -> Any:
    """Wrap ``stream`` (sync or async iterator) so ``call`` sees its items and its end."""
    if hasattr(type(stream), "__anext__"):
        return AsyncStream(stream, call)
    return SyncStream(stream, call)


class _Proxy:
    __slots__ = ("_call", "_stream")

    def __init__(self, stream: Any, call: Call) -> None:
        self._stream = stream
        self._call = call

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
