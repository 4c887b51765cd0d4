"""Which queue backend a URL names: the one module that knows both backends.

The contract (:mod:`ragwatch.queue.contract`) knows no backend and each backend knows only the contract, so
the three never import each other in a circle; callers that start from a URL come here.
"""

from __future__ import annotations

from typing import Any

from ragwatch.errors import ConfigError
from ragwatch.queue.contract import DEFAULT_QUEUE_URL, Queue

__all__ = ["open_queue"]


def open_queue(url: str | None, service: str, **options: Any) -> Queue:
    """The queue backend for ``url`` (``None`` → the memory backend)."""
    url = url or DEFAULT_QUEUE_URL
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        from ragwatch.queue.memory import MemoryQueue

        return MemoryQueue.named(url, service, **options)
    if scheme in ("redis", "rediss", "unix", "redis+sentinel", "redis+cluster"):
        from ragwatch.queue.redis import RedisQueue

        return RedisQueue(url, service, **options)
    raise ConfigError(
        f"queue URL scheme {scheme!r} is not supported; use memory://, redis://, rediss://, unix://, "
        "redis+sentinel:// or redis+cluster://"
    )
