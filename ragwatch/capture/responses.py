"""Read the answer text, token usage and model name out of LLM responses and stream events.

ragwatch wraps whatever client the host already uses, so it meets the OpenAI SDK (Chat Completions and
Responses API), the Anthropic SDK, LangChain messages and the same payloads as plain JSON dicts. Rather than
importing any of those SDKs, every rule here is a duck-typed probe through :func:`_get`, which reads a key
from a mapping or an attribute from an object, so each shape is described once and works in both forms.

The extractors run on the request path (the stream accumulator once per streamed token), so they probe the
likely shapes first and return as soon as one matches.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragwatch.errors import ResponseError

__all__ = [
    "StreamAccumulator",
    "Usage",
    "estimate_tokens",
    "extract_model",
    "extract_text",
    "extract_usage",
    "read_embedding",
    "read_response",
]


@dataclass(slots=True)
class Usage:
    """Token counts for one LLM call, normalised across providers.

    ``input_tokens`` always counts every prompt token, cached or not, because providers disagree (OpenAI
    includes cache hits in its prompt count, Anthropic reports them separately) and pricing and dashboards
    need one convention. ``cached_input_tokens`` is the part of it served from the provider's prompt cache,
    billed at a discount. ``estimated`` marks counts ragwatch guessed from text because the provider sent
    none, so they can be told apart from billed numbers downstream.
    """

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    estimated: bool = False


def extract_text(response: Any) -> str:
    """Return the answer text of a complete (non-streamed) response.

    A recognised response that simply carries no text (a tool call, a refusal, zero choices) yields ``""``
    rather than an error: it is a real answer, just not a textual one. Only shapes ragwatch cannot read at
    all raise :class:`~ragwatch.errors.ResponseError`.
    """
    if isinstance(response, str):
        return response

    # OpenAI Chat Completions (choices[0].message.content) and legacy Completions (choices[0].text).
    choices = _get(response, "choices")
    if isinstance(choices, (list, tuple)):
        if not choices:
            return ""
        first = choices[0]
        message = _get(first, "message")
        if message is not None:
            content = _get(message, "content")
            if isinstance(content, str):
                return content
            if isinstance(content, (list, tuple)):  # OpenAI-compatible servers that send content parts
                return _join_blocks(content, "text")
            return ""  # content None: tool calls or a refusal
        text = _get(first, "text")
        if isinstance(text, str):
            return text

    # OpenAI Responses API: the SDK's output_text property (or a key of that name) is the quick path.
    text = _get(response, "output_text")
    if isinstance(text, str):
        return text

    for key in ("text", "answer"):
        text = _get(response, key)
        if isinstance(text, str):
            return text

    # Anthropic Messages: content is a list of blocks; LangChain messages and plain dicts: a string.
    content = _get(response, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return _join_blocks(content, "text")

    # Responses API without output_text (raw JSON): output[*].content[*] parts of type "output_text".
    output = _get(response, "output")
    if isinstance(output, str):
        return output
    if isinstance(output, (list, tuple)):
        parts: list[str] = []
        for item in output:
            item_content = _get(item, "content")
            if isinstance(item_content, (list, tuple)):
                text = _join_blocks(item_content, "output_text")
                if text:
                    parts.append(text)
        return "".join(parts)

    raise ResponseError(f"cannot read answer text from a response of type {_type_name(response)}")


def extract_usage(response: Any) -> Usage | None:
    """Return the provider-reported token usage, or ``None`` when it is absent or not believable.

    ``None`` (rather than zeros) lets the caller fall back to :func:`estimate_tokens` and mark the result as
    estimated, instead of recording a free call.
    """
    usage = _get(response, "usage")
    if usage is None:
        # LangChain messages: AIMessage.usage_metadata (input_tokens already count cache reads).
        return _parse_langchain_usage(_get(response, "usage_metadata"))
    return _parse_usage(usage)


def read_response(response: Any) -> tuple[str, Usage | None, str | None]:
    """Text, usage and model of a complete response in one call (the request path's entry point).

    A Chat Completions payload as a plain dict — what most OpenAI-compatible HTTP clients return — is read
    directly; every other shape goes through the general extractors.
    """
    if type(response) is dict:
        try:  # subscripts, not .get(): no method calls on the commonest path
            content = response["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if type(content) is str:
            model = response["model"] if "model" in response else None  # noqa: SIM401 (no method call)
            usage = _parse_usage(response["usage"]) if "usage" in response else None
            return content, usage, model if type(model) is str and model else None
    elif _is_langchain_message(type(response)) and not response.__pydantic_extra__:
        # A LangChain message with string content, as every chat model's generation returns it: its fields
        # read straight from ``__dict__``, what the general probes end up reading after missing on
        # choices, output_text, usage and model first (11 -> 2 µs).
        d = response.__dict__
        content = d.get("content")
        if type(content) is str:
            metadata = d.get("response_metadata")
            model = (metadata.get("model_name") or metadata.get("model")) if type(metadata) is dict else None
            usage = _parse_langchain_usage(d.get("usage_metadata"))
            return content, usage, model if isinstance(model, str) and model else None
    return extract_text(response), extract_usage(response), extract_model(response)


#: class -> is it one of langchain-core's own message classes (not a subclass defined elsewhere, which may
#: add fields or override ``text``). Bounded in case of generated classes.
_LANGCHAIN_MESSAGE: dict[type, bool] = {}


def _is_langchain_message(cls: type) -> bool:
    found = _LANGCHAIN_MESSAGE.get(cls)
    if found is None:
        fields = getattr(cls, "__pydantic_fields__", None)
        found = (
            cls.__module__.startswith("langchain_core.messages.") and isinstance(fields, dict) and "content" in fields
        )
        if len(_LANGCHAIN_MESSAGE) < _IS_MAPPING_LIMIT:
            _LANGCHAIN_MESSAGE[cls] = found
    return found


def extract_model(response: Any) -> str | None:
    """Return the model name the provider says answered; it can differ from the one requested (aliases)."""
    model = _get(response, "model")
    if model is None:
        # LangChain messages carry the provider's model id in response_metadata (model_name for OpenAI,
        # model for Anthropic and Ollama).
        metadata = _get(response, "response_metadata")
        if metadata is not None:
            model = _get(metadata, "model_name") or _get(metadata, "model")
    return model if isinstance(model, str) and model else None


def read_embedding(response: Any) -> tuple[Usage | None, str | None]:
    """Usage and model of an embeddings response (OpenAI's ``CreateEmbeddingResponse`` or its JSON): only
    input tokens are billed (``usage.prompt_tokens``, else ``input_tokens``)."""
    usage = _get(response, "usage")
    tokens = None
    if usage is not None:
        tokens = _count(_get(usage, "prompt_tokens"))
        if tokens is None:
            tokens = _count(_get(usage, "input_tokens"))
    return (Usage(tokens, 0, 0) if tokens is not None else None), extract_model(response)


# Hiragana/Katakana, CJK Extension A, CJK Unified Ideographs, Hangul syllables, CJK Compatibility Ideographs.
# A regex, because counting them is the slow part of estimate_tokens and the regex engine does it in C,
# several times faster than a per-character loop in Python on long prompts.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def estimate_tokens(text: str) -> int:
    """Guess a token count when the provider reported none; an estimate, never a billed number.

    Real tokenizers are model-specific and far too slow for the hot path. About four characters per token
    is close for English and code; CJK scripts run near one token per character, so counting them at four
    characters per token would under-count Chinese, Japanese or Korean text roughly fourfold.
    """
    if not text:
        return 0
    if text.isascii():  # O(1) for str: CPython knows its widest character
        return (len(text) + 3) // 4
    if len(text) > _ESTIMATE_PREFIX:  # a 10 MB answer: scale the prefix's estimate, in bounded time
        return max(1, round(estimate_tokens(text[:_ESTIMATE_PREFIX]) * len(text) / _ESTIMATE_PREFIX))
    cjk = sum(1 for _ in _CJK.finditer(text))
    return max(1, cjk + (len(text) - cjk + 3) // 4)


#: Characters of a non-ASCII text that :func:`estimate_tokens` reads at most (longer ones are scaled).
_ESTIMATE_PREFIX = 65_536


# Anthropic's stream event types. None of them may fall through to the generic rules: their snapshot and
# stop events repeat text that the deltas already delivered.
_ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "ping",
        "error",
    }
)
# Dotted event types (OpenAI Responses API, openai-python's stream helpers) that carry one new piece of text.
# Every other dotted type (".done" events, snapshots, refusals, tool-call arguments) is ignored.
_DOTTED_TEXT_EVENTS = frozenset({"response.output_text.delta", "content.delta"})


class StreamAccumulator:
    """Rebuild the answer, usage and model of a streamed response from its events, fed in order.

    Parts are kept in a list and joined only when ``text`` is read, so feeding stays O(1) per event.
    """

    __slots__ = ("_parts", "model", "usage")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self.usage: Usage | None = None
        self.model: str | None = None

    @property
    def text(self) -> str:
        parts = self._parts
        if not parts:
            return ""
        if len(parts) > 1:
            # Collapse so repeated reads (e.g. progress logging mid-stream) do not re-join everything.
            parts[:] = ["".join(parts)]
        return parts[0]

    def feed(self, event: Any) -> bool:
        """Consume one event; return True when it carried answer text.

        The boolean exists so the caller can stamp time-to-first-token on the first True without reading
        ``text``. Events of unknown shape return False instead of raising: streams interleave many non-text
        events (roles, tool-call fragments, keep-alives), and a monitor must never break the host's stream.
        """
        if isinstance(event, str):
            return self._add(event)

        etype = _get(event, "type")
        if isinstance(etype, str):
            if etype in _ANTHROPIC_EVENTS:
                return self._feed_anthropic(etype, event)
            if "." in etype:
                return self._feed_dotted(etype, event)
            if etype == "chunk":
                # openai-python's ChatCompletionStream repeats each raw chunk as a "chunk" event beside its
                # "content.delta": the text is counted there, the model and usage (last chunk) here.
                chunk = _get(event, "chunk")
                self._take_model(_get(chunk, "model"))
                self._take_usage(_parse_usage(_get(chunk, "usage")))
                return False
            if etype == "text" and _get(event, "snapshot") is not None:
                # Anthropic's MessageStream helper repeats every text delta as a "text" event that carries a
                # snapshot; the raw content_block_delta beside it was already counted.
                return False

        # OpenAI Chat Completions chunks; the include_usage final chunk has empty choices and the usage.
        choices = _get(event, "choices")
        if isinstance(choices, (list, tuple)):
            self._take_model(_get(event, "model"))
            usage = _get(event, "usage")
            if usage is not None:
                self._take_usage(_parse_usage(usage))
            if not choices:
                return False
            first = choices[0]
            delta = _get(first, "delta")
            if delta is not None:
                return self._add(_get(delta, "content"))
            return self._add(_get(first, "text"))  # legacy Completions stream

        # Generic deltas: LangChain AIMessageChunk (.content), LlamaIndex stream responses and plain dicts.
        # ``delta`` goes first because LlamaIndex puts the cumulative text so far in ``text``.
        for key in ("delta", "text", "content"):
            value = _get(event, key)
            if isinstance(value, str):
                return self._add(value)
            if key == "content" and isinstance(value, (list, tuple)):
                return self._add(_join_blocks(value, "text"))  # LangChain chunks carrying content blocks
        return False

    def _feed_anthropic(self, etype: str, event: Any) -> bool:
        if etype == "content_block_delta":
            return self._add(_get(_get(event, "delta"), "text"))  # thinking / tool-JSON deltas have no .text
        if etype == "message_start":
            message = _get(event, "message")
            self._take_model(_get(message, "model"))
            self._take_usage(_parse_usage(_get(message, "usage")))
        elif etype == "message_delta":
            # Anthropic reports input tokens at message_start and the cumulative output count here.
            output = _count(_get(_get(event, "usage"), "output_tokens"))
            current = self.usage
            if output is not None and current is not None:
                self.usage = Usage(current.input_tokens, output, current.cached_input_tokens)
        return False

    def _feed_dotted(self, etype: str, event: Any) -> bool:
        if etype in _DOTTED_TEXT_EVENTS:
            return self._add(_get(event, "delta"))
        if etype == "response.completed":
            response = _get(event, "response")
            self._take_model(_get(response, "model"))
            self._take_usage(_parse_usage(_get(response, "usage")))
        return False

    def _add(self, text: Any) -> bool:
        if isinstance(text, str) and text:
            self._parts.append(text)
            return True
        return False

    def _take_model(self, model: Any) -> None:
        if isinstance(model, str) and model:
            self.model = model

    def _take_usage(self, usage: Usage | None) -> None:
        if usage is not None:
            self.usage = usage


# --------------------------------------------------------------------------------------------- internals


# type -> how _get reads it: 1 a Mapping (isinstance against the ABC costs several times a dict lookup),
# 2 a pydantic v2 model, 0 anything else. _get runs a handful of times per stream event on the same few SDK
# classes. Bounded in case of generated classes.
_IS_MAPPING: dict[type, int] = {}
_IS_MAPPING_LIMIT = 256
#: (pydantic class, name) -> is ``name`` a class attribute (a property, a method)?
_CLASS_HAS: dict[tuple[type, str], bool] = {}


def _kind_of(obj: Any, cls: type) -> int:
    if isinstance(obj, Mapping):
        return 1
    fields = getattr(cls, "__pydantic_fields__", None)
    return 2 if isinstance(fields, dict) and isinstance(getattr(obj, "__dict__", None), dict) else 0


def _get_pydantic(obj: Any, cls: type, name: str) -> Any:
    """An attribute of a pydantic model without ``getattr``'s miss path: pydantic answers a missing name
    by raising from ``__getattr__``, some 10 µs per probe, and LangChain messages and OpenAI responses are
    probed for names they lack. Looks where pydantic looks: fields in ``__dict__``, properties and methods
    on the class, extra fields in ``__pydantic_extra__``."""
    d = obj.__dict__
    if name in d:
        return d[name]
    key = (cls, name)
    has = _CLASS_HAS.get(key)
    if has is None:
        has = any(name in vars(base) for base in cls.__mro__)
        if len(_CLASS_HAS) < 4096:
            _CLASS_HAS[key] = has
    if has:
        return getattr(obj, name, None)
    extra = getattr(obj, "__pydantic_extra__", None)
    return extra.get(name) if type(extra) is dict else None


def _get(obj: Any, name: str) -> Any:
    """Read ``name`` as a mapping key or an attribute, so every rule covers SDK objects and JSON dicts alike.

    Missing values (and a ``None`` ``obj``, which lets probes chain) come back as None.
    """
    cls = type(obj)
    if cls is dict:
        return obj.get(name)
    kind = _IS_MAPPING.get(cls)
    if kind is None:
        kind = _kind_of(obj, cls)
        if len(_IS_MAPPING) < _IS_MAPPING_LIMIT:
            _IS_MAPPING[cls] = kind
    if kind == 1:
        return obj.get(name)
    if kind == 2:
        return _get_pydantic(obj, cls, name)
    return getattr(obj, name, None)


def _count(value: Any) -> int | None:
    """A token count, or None for anything that is not a non-negative int (bool is an int, not a count)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return None


def _parse_usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    if type(usage) is dict and "prompt_tokens" in usage and "completion_tokens" in usage:  # the common JSON case
        prompt = usage["prompt_tokens"]
        completion = usage["completion_tokens"]
        if type(prompt) is int and type(completion) is int and prompt >= 0 and completion >= 0:
            details = usage["prompt_tokens_details"] if "prompt_tokens_details" in usage else None  # noqa: SIM401
            cached = details.get("cached_tokens") if type(details) is dict else None
            cached = cached if type(cached) is int and cached > 0 else 0
            return Usage(prompt, completion, cached if cached < prompt else prompt)

    # OpenAI Chat Completions: prompt_tokens already include cached ones.
    prompt = _get(usage, "prompt_tokens")
    if prompt is not None:
        input_tokens = _count(prompt)
        output_tokens = _count(_get(usage, "completion_tokens"))
        if input_tokens is None or output_tokens is None:
            return None
        cached = _count(_get(_get(usage, "prompt_tokens_details"), "cached_tokens")) or 0
        return Usage(input_tokens, output_tokens, min(cached, input_tokens))

    input_tokens = _count(_get(usage, "input_tokens"))
    output_tokens = _count(_get(usage, "output_tokens"))
    if input_tokens is None or output_tokens is None:
        return None

    # Anthropic: input_tokens excludes both cache reads and cache writes, which are reported beside it.
    cache_read = _get(usage, "cache_read_input_tokens")
    cache_write = _get(usage, "cache_creation_input_tokens")
    if cache_read is not None or cache_write is not None:
        read = _count(cache_read) or 0
        write = _count(cache_write) or 0
        return Usage(input_tokens + read + write, output_tokens, read)

    # OpenAI Responses API: input_tokens already include cached ones.
    cached = _count(_get(_get(usage, "input_tokens_details"), "cached_tokens")) or 0
    return Usage(input_tokens, output_tokens, min(cached, input_tokens))


def _parse_langchain_usage(usage: Any) -> Usage | None:
    """LangChain's ``UsageMetadata``: ``input_tokens`` is the whole prompt whatever the provider (LangChain
    folds Anthropic's cache reads and writes in), ``input_token_details.cache_read`` the cached part."""
    if usage is None:
        return None
    input_tokens = _count(_get(usage, "input_tokens"))
    output_tokens = _count(_get(usage, "output_tokens"))
    if input_tokens is None or output_tokens is None:
        return None
    cached = _count(_get(_get(usage, "input_token_details"), "cache_read")) or 0
    return Usage(input_tokens, output_tokens, min(cached, input_tokens))


def _join_blocks(blocks: Any, kind: str) -> str:
    """Concatenate the text of content blocks of type ``kind``; bare strings count as text too."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(block)
        elif _get(block, "type") == kind:
            text = _get(block, "text")
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)


def _type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
