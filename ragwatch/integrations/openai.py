"""Watch an ``OpenAI`` / ``AsyncOpenAI`` client: every chat completion and Responses API call it makes.

``instrument(client, rw)`` replaces methods on the client's resource objects (not on the SDK's classes, so
other clients are untouched) with watched ones: ``chat.completions.create`` and ``.parse``,
``responses.create`` and ``.parse`` (LLM stages) and ``embeddings.create`` (the ``embed`` stage: input
tokens and their cost). The SDK's ``.stream()`` helpers and its ``with_raw_response`` /
``with_streaming_response`` wrappers go through them. ``instrument_sdk(rw)`` does the same on the SDK's
resource classes, for every client in the process (what :func:`ragwatch.integrations.instrument` uses).

Each call is a stage of the current run (or, outside any run, metrics only): latency, TTFT of streams,
reported usage with cached tokens, the answering model, cost. Streams and stream managers come back as the
SDK's own objects (observed in place, see :mod:`ragwatch.capture.streams`), so ``isinstance(s,
openai.Stream)`` and every SDK helper keep working. A raw response (``with_raw_response``) is read through its
own ``.parse()`` (cached by the SDK, so the host's ``.parse()`` returns the same object), never its HTTP body;
a ``with_streaming_response`` one when the host parses it (``.parse()`` / ``.json()``), else it is recorded
without usage when it closes.

Usage of a ``stream=True`` chat completion is only sent when the request asks for it
(``stream_options={"include_usage": True}``); without it ragwatch estimates the tokens, marked
``source="estimated"``. ragwatch never adds the option itself: it changes what the host receives.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

from ragwatch.capture.calls import EmbedCall, GenerateCall
from ragwatch.capture.responses import read_embedding
from ragwatch.capture.run import framework_call

if TYPE_CHECKING:
    from ragwatch.capture.watch import RagWatch

__all__ = ["instrument", "instrument_sdk", "uninstrument", "uninstrument_sdk"]

# The SDK's `.stream()` helpers open their request through `resource.create`, so watching `create` covers
# them too (watching both would count each streamed call twice); `.parse()` posts on its own.
_LLM = "llm"
_EMBED = "embed"
_METHODS = (
    ("chat.completions", "create", _LLM),
    ("chat.completions", "parse", _LLM),
    ("responses", "create", _LLM),
    ("responses", "parse", _LLM),
    ("embeddings", "create", _EMBED),
)
#: the SDK's resource classes, by module and class name, for ``instrument_sdk``
_CLASSES = (
    ("openai.resources.chat.completions.completions", "Completions", "AsyncCompletions", ("create", "parse"), _LLM),
    ("openai.resources.responses.responses", "Responses", "AsyncResponses", ("create", "parse"), _LLM),
    ("openai.resources.embeddings", "Embeddings", "AsyncEmbeddings", ("create",), _EMBED),
)
_MARK = "_ragwatch_original"


def instrument(client: Any, rw: RagWatch, *, provider: str = "openai") -> Any:
    """Watch ``client``'s calls through ``rw``; returns the client. Calling it twice is harmless.

    ``provider`` names the API on spans (``gen_ai.provider.name``): set it for OpenAI-compatible servers
    (``"vllm"``, ``"azure.openai"``...). Resources an older SDK lacks (``responses``) are skipped.
    """
    for path, name, kind in _METHODS:
        resource = _resource(client, path)
        method = getattr(resource, name, None) if resource is not None else None
        if method is None or getattr(method, _MARK, None) is not None:
            continue
        is_async = _is_async_create(resource, name)
        setattr(resource, name, _watched(rw, method, kind, provider, is_async))
    return client


def instrument_sdk(rw: RagWatch, *, provider: str = "openai") -> list[tuple[type, str]]:
    """Watch every client of the installed SDK: the same methods as :func:`instrument`, replaced on the SDK's
    resource classes. Returns what it replaced (for :func:`uninstrument_sdk`); a client instrumented on its
    own as well is not counted twice (its methods are seen as watched already)."""
    import importlib

    done: list[tuple[type, str]] = []
    for module_name, sync_name, async_name, names, kind in _CLASSES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # an SDK without this resource
            continue
        for class_name in (sync_name, async_name):
            cls = getattr(module, class_name, None)
            if not isinstance(cls, type):
                continue
            for name in names:
                method = cls.__dict__.get(name)
                if method is None or getattr(method, _MARK, None) is not None:
                    continue
                is_async = class_name == async_name or inspect.iscoroutinefunction(method)
                setattr(cls, name, _watched(rw, method, kind, provider, is_async))
                done.append((cls, name))
    return done


def uninstrument_sdk(replaced: list[tuple[type, str]]) -> None:
    """Put back the SDK's own methods :func:`instrument_sdk` replaced."""
    for cls, name in replaced:
        original = getattr(cls.__dict__.get(name), _MARK, None)
        if original is not None:
            setattr(cls, name, original)


def _watched(rw: RagWatch, method: Any, kind: str, provider: str, is_async: bool) -> Any:
    target = _awaiting(method) if is_async else method
    decorate = rw.llm(provider=provider) if kind == _LLM else rw.embedder(provider=provider)
    if kind == _LLM:
        watched = _deferring(rw, method, decorate(target), GenerateCall)
    else:
        watched = _deferring_embedding(rw, method, decorate(target), is_async)
    setattr(watched, _MARK, method)
    return watched


def _deferring(rw: RagWatch, method: Any, watched: Any, kind: type) -> Any:
    """``watched``, except inside a framework's own model or embedding call that ``rw`` records (LangChain's
    ``ChatOpenAI``, LlamaIndex's ``OpenAI`` LLM, a watched LangChain ``Embeddings``): that SDK call *is* the
    framework's call, so it goes straight through — with every integration on (``ragwatch.instrument``),
    each generation is still counted, billed and timed once."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        if framework_call(rw, kind) is not None:
            return method(*args, **kwargs)
        return watched(*args, **kwargs)

    return call


def _deferring_embedding(rw: RagWatch, method: Any, watched: Any, is_async: bool) -> Any:
    """Like :func:`_deferring`, for ``embeddings.create``: inside a framework's embedding call (a watched
    LangChain ``Embeddings``, which returns bare vectors, or a LlamaIndex embedding event, which carries no
    usage) the SDK call goes straight through, and the usage
    its response reports is added to that call — the embed stage is still recorded once, with the billed
    token count instead of an estimate (summed when the framework splits its texts over several requests)."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        outer = framework_call(rw, EmbedCall)
        if outer is None:
            return watched(*args, **kwargs)
        result = method(*args, **kwargs)
        if is_async:
            return _credit_later(rw, outer, result)
        _credit(rw, outer, result)
        return result

    return call


async def _credit_later(rw: RagWatch, outer: EmbedCall, pending: Any) -> Any:
    result = await pending
    _credit(rw, outer, result)
    return result


def _credit(rw: RagWatch, outer: EmbedCall, response: Any) -> None:
    """Add the tokens ``response`` reports (and the model that answered) to the framework's open call."""
    try:
        usage, model = read_embedding(response)
        if usage is None:
            return
        if outer.usage is None:
            outer.usage = usage
        else:
            outer.usage.input_tokens += usage.input_tokens
        if model:
            outer.model = model
    except Exception as exc:  # a response we cannot read: the framework's call keeps its estimate
        rw.guard.failed("response", exc)


def uninstrument(client: Any) -> Any:
    """Put the client's own methods back."""
    for path, name, _ in _METHODS:
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
