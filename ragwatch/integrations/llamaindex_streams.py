"""The streamed answers the LlamaIndex handler follows, and what ends their run when nobody reads them.

A streamed query (``query_engine.query`` with ``streaming=True``) and a streamed chat turn call their LLM
only as the answer's ``response_gen`` is read, after the query engine or chat engine returned; the run ends
when that generator is drained. The host may never drain it: the client disconnected, an exception came
before the first read, the event loop cancelled the chat engine's history writer before it started. The
proxy handed back is then collected unread (or half read), and its finaliser ends the run as ``cancelled``
— the outcome of a stream the host stopped reading early — through the tracker, which first ends the run's
generation still open and forgets it, so an abandoned turn leaves nothing behind.

The finaliser is every stream proxy's (:class:`~ragwatch.capture.streams.SyncStream`): it runs when the
last reference goes, in whichever thread drops it, does only what the end of a stream does anyway (record,
end the span, hand the run to the listeners), and never raises. Only what it ends differs here: the run
and, first, the generation the tracker still holds open in it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ragwatch.capture.streams import AsyncStream, SyncStream, proxy_stream

if TYPE_CHECKING:
    from ragwatch.capture.calls import Call

__all__ = ["Abandoned", "follow"]


class Abandoned(Protocol):
    """What ends a run whose streamed answer was dropped (the handler's tracker)."""

    def abandoned(self, call: Call) -> None: ...


def follow(stream: Any, call: Call, tracker: Abandoned) -> Any:
    """``stream`` proxied for ``call``'s run: current around each step, ended when drained, closed, or
    collected unread."""
    cls = type(stream)
    if hasattr(cls, "__anext__"):
        return _AsyncAnswer(stream, call, tracker)
    if hasattr(cls, "__next__"):
        return _SyncAnswer(stream, call, tracker)
    return proxy_stream(stream, call)  # not an iterator LlamaIndex hands out: followed as any stream is


class _Finalised:
    """What both proxies do when collected (the stream proxies' own finaliser calls it, guarded): tell the
    tracker the answer is gone, which ends the run's open generation too (a no-op once the run ended)."""

    __slots__ = ()
    _call: Any  # the proxy's: the call it was made for (a query's PipelineCall, or a RunStreamCall)
    _tracker: Abandoned

    def _abandon(self) -> None:
        self._tracker.abandoned(self._call)


class _SyncAnswer(_Finalised, SyncStream):
    __slots__ = ("_tracker",)

    def __init__(self, stream: Any, call: Call, tracker: Abandoned) -> None:
        self._tracker = tracker
        SyncStream.__init__(self, stream, call)


class _AsyncAnswer(_Finalised, AsyncStream):
    __slots__ = ("_tracker",)

    def __init__(self, stream: Any, call: Call, tracker: Abandoned) -> None:
        self._tracker = tracker
        AsyncStream.__init__(self, stream, call)
