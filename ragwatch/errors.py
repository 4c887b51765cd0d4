"""ragwatch's exception tree.

Every error ragwatch raises on purpose derives from one root, so callers can catch them all::

    RagwatchError
    ├── ConfigError        bad settings, caught at start-up (never at request time)
    ├── CaptureError       a value from the host could not be understood (a chunk, an LLM response)
    │   ├── ChunkError
    │   └── ResponseError
    ├── QueueError         Redis (or the memory backend) failed: retried and counted, never raised into the host
    │   └── QueueFullError Redis refused a write at maxmemory (noeviction): drops count as queue_full
    └── SampleDecodeError  a stream entry is not a readable sample (defined in ragwatch.sampling.sample)

Capture errors never reach the host application: the wrappers count and log them (fail open). They exist
so the pure helpers (normalisation, pricing) can say precisely what went wrong to tests and to the logs.
"""

from __future__ import annotations

__all__ = [
    "CaptureError",
    "ChunkError",
    "ConfigError",
    "QueueError",
    "QueueFullError",
    "RagwatchError",
    "ResponseError",
]


class RagwatchError(Exception):
    """Root of every error ragwatch raises on purpose."""


class ConfigError(RagwatchError, ValueError):
    """Settings that cannot work; raised at configuration time with a message naming the setting."""


class CaptureError(RagwatchError):
    """A value handed to ragwatch by the host could not be interpreted."""


class ChunkError(CaptureError, TypeError):
    """A retrieved item is of a shape ragwatch cannot read as a chunk."""


class ResponseError(CaptureError, TypeError):
    """An LLM response or stream event is of a shape ragwatch cannot read."""


class QueueError(RagwatchError):
    """The sample queue (Redis or the memory backend) could not do what was asked; Redis errors are
    translated into this at one boundary, in :mod:`ragwatch.queue.redis` (and its ``redis_connect``)."""


class QueueFullError(QueueError):
    """Redis is at ``maxmemory`` with the ``noeviction`` policy and refuses writes. Not a connectivity
    problem: retrying sooner does not help until a worker trims scored entries or an operator frees memory.

    ``results`` (from a batch of score applications) says, per item, True/False as the batch would have
    returned, or None where Redis refused that item — the others *were* applied."""

    def __init__(self, message: str, results: list[bool | None] | None = None) -> None:
        super().__init__(message)
        self.results = results
