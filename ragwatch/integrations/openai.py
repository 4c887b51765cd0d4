"""Watch an ``OpenAI`` / ``AsyncOpenAI`` client: every chat completion and Responses API call it makes.

``instrument(client, rw)`` replaces two methods on the client's resource objects (not on the SDK's
classes, so other clients are untouched) with watched ones: ``chat.completions.create`` and
``responses.create``; the SDK's ``.stream()`` helpers go through them. Each call is an LLM stage of the
current run (or, outside any run, metrics only): latency, TTFT of streams, reported usage with cached
tokens, the answering model, cost.
Streams and stream managers come back as the SDK's own objects (observed in place, see
:mod:`ragwatch.capture.streams`), so ``isinstance(s, openai.Stream)`` and every SDK helper keep working.

Usage of a ``stream=True`` chat completion is only sent when the request asks for it
(``stream_options={"include_usage": True}``); without it ragwatch estimates the tokens, marked
``source="estimated"``. ragwatch never adds the option itself: it changes what the host receives.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragwatch.capture.watch import RagWatch

__all__ = ["instrument", "uninstrument"]

# The SDK's `.stream()` helpers open their request through `resource.create`, so watching `create` covers
# them too (watching both would count each streamed call twice).
_METHODS = (("chat.completions", "create"), ("responses", "create"))
_MARK = "_ragwatch_original"


def instrument(client: Any, rw: RagWatch, *, provider: str = "openai") -> Any:
    """Watch ``client``'s calls through ``rw``; returns the client. Calling it twice is harmless.

    ``provider`` names the API on spans (``gen_ai.provider.name``): set it for OpenAI-compatible servers
    (``"vllm"``, ``"azure.openai"``...). Resources an older SDK lacks (``responses``) are skipped.
    """
    for path, name in _METHODS:
        resource = _resource(client, path)
        method = getattr(resource, name, None) if resource is not None else None
        if method is None or getattr(method, _MARK, None) is not None:
            continue
        target = _awaiting(method) if _is_async_create(resource, name) else method
        watched = rw.llm(provider=provider)(target)
        setattr(watched, _MARK, method)
        setattr(resource, name, watched)
    return client


def uninstrument(client: Any) -> Any:
    """Put the client's own methods back."""
    for path, name in _METHODS:
        resource = _resource(client, path)
        original = getattr(getattr(resource, name, None), _MARK, None)
        if original is not None:
            delattr(resource, name)  # the instance attribute goes; the class's bound method shows again
            if getattr(resource, name, None) != original:
                setattr(resource, name, original)
    return client


def _awaiting(method: Any) -> Any:
    """An ``async def`` around an async ``create``: the SDK hides its coroutine behind a sync
    argument-checking wrapper, which would make ragwatch time the coroutine's creation, not the request."""

    @functools.wraps(method)
    async def create(*args: Any, **kwargs: Any) -> Any:
        return await method(*args, **kwargs)

    return create


def _resource(client: Any, path: str) -> Any:
    obj = client
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _is_async_create(resource: Any, name: str) -> bool:
    """An async resource's ``create``: an ``async def`` or the SDK's sync wrapper around one (its class
    name starts with ``Async``)."""
    return inspect.iscoroutinefunction(getattr(resource, name)) or type(resource).__name__.startswith("Async")
