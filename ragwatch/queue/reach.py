"""Open a queue and make sure it answers: what a command does at start-up, before it prints or serves anything.

A service never calls this (it must start while Redis is down, and fail open). A command that cannot work
without the queue — ``ragwatch worker --burst``, ``demo``, ``report``, ``health``, ``degrade`` — calls it, so an
unreachable Redis is one line naming the URL (password masked) and the cause, within the connect timeout,
instead of a stream of retries and tracebacks.
"""

from __future__ import annotations

from typing import Any

from ragwatch.errors import QueueError
from ragwatch.queue.contract import Queue
from ragwatch.queue.factory import open_queue

__all__ = ["open_reached_queue", "unreachable"]


def open_reached_queue(url: str | None, service: str, **options: Any) -> Queue:
    """:func:`~ragwatch.queue.factory.open_queue`, then one read of the mode state (cheap, read-only, on
    every backend); :class:`QueueError` from :func:`unreachable` when it fails (the queue is closed)."""
    queue = open_queue(url, service, **options)
    try:
        queue.read_mode()
    except QueueError as exc:
        queue.close()
        raise unreachable(queue.url, exc) from None
    return queue


def unreachable(url: str, exc: QueueError) -> QueueError:
    """One line: the (masked) URL and the underlying cause, without the command that happened to fail."""
    cause = exc.__cause__
    reason = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
    return QueueError(f"cannot reach the queue at {url}: {reason}")
