"""Reading text, usage and model from LLM responses and streams, as SDK-like objects and as plain dicts.

Every payload is written once as the provider's JSON and checked twice: as the dict itself and converted
to nested SimpleNamespace objects, which is how the OpenAI / Anthropic SDK models are read (attributes).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ragwatch.capture.responses import (
    StreamAccumulator,
    Usage,
    estimate_tokens,
    extract_model,
    extract_text,
    extract_usage,
    read_response,
)
from ragwatch.errors import CaptureError, ResponseError
from tests.servers import require_package


def ns(value: Any) -> Any:
    """JSON-like dicts -> nested attribute objects, lists kept as lists (like the SDKs' pydantic models)."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: ns(v) for k, v in value.items()})
    if isinstance(value, list):
        return [ns(v) for v in value]
    return value


FORMS = [pytest.param(lambda v: v, id="dict"), pytest.param(ns, id="object")]

# ------------------------------------------------------------------------------------------ full responses

CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"},
    ],
    "usage": {
        "prompt_tokens": 1200,
        "completion_tokens": 15,
        "total_tokens": 1215,
        "prompt_tokens_details": {"cached_tokens": 1024},
    },
}
CHAT_TOOL_CALL = {
    "model": "gpt-4o",
    "choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1"}]}}],
    "usage": {"prompt_tokens": 80, "completion_tokens": 12, "prompt_tokens_details": None},
}
CHAT_PARTS = {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]}
CHAT_NO_CHOICES = {"model": "gpt-4o", "choices": []}
LEGACY = {
    "object": "text_completion",
    "model": "gpt-3.5-turbo-instruct",
    "choices": [{"text": "legacy answer", "index": 0}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
}
RESPONSES = {
    "object": "response",
    "model": "gpt-4.1-2025-04-14",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Hello, ", "annotations": []},
                {"type": "refusal", "refusal": "not this"},
                {"type": "output_text", "text": "world", "annotations": []},
            ],
        },
        {"type": "function_call", "name": "lookup", "arguments": "{}"},
    ],
    "usage": {
        "input_tokens": 500,
        "output_tokens": 20,
        "total_tokens": 520,
        "input_tokens_details": {"cached_tokens": 256},
        "output_tokens_details": {"reasoning_tokens": 0},
    },
}
RESPONSES_OUTPUT_TEXT = {"model": "gpt-4.1", "output_text": "quick path", "output": []}
ANTHROPIC = {
    "type": "message",
    "role": "assistant",
    "model": "claude-3-5-sonnet-20241022",
    "content": [
        {"type": "text", "text": "Hi"},
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}},
        {"type": "text", "text": " there"},
    ],
    "usage": {
        "input_tokens": 100,
        "output_tokens": 30,
        "cache_read_input_tokens": 2000,
        "cache_creation_input_tokens": 0,
    },
}
ANTHROPIC_CACHE_WRITE = {
    "content": [{"type": "text", "text": "x"}],
    "usage": {
        "input_tokens": 50,
        "output_tokens": 4,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 1000,
    },
}
ANTHROPIC_NO_CACHE_FIELDS = {"content": [], "usage": {"input_tokens": 9, "output_tokens": 1}}

RESPONSE_CASES: list[tuple[str, Any, str, Usage | None, str | None]] = [
    ("chat", CHAT, "Paris.", Usage(1200, 15, 1024), "gpt-4o-mini-2024-07-18"),
    ("chat-tool-call", CHAT_TOOL_CALL, "", Usage(80, 12, 0), "gpt-4o"),
    ("chat-content-parts", CHAT_PARTS, "ab", None, None),
    ("chat-no-choices", CHAT_NO_CHOICES, "", None, "gpt-4o"),
    ("legacy-completion", LEGACY, "legacy answer", Usage(5, 7, 0), "gpt-3.5-turbo-instruct"),
    ("responses-api", RESPONSES, "Hello, world", Usage(500, 20, 256), "gpt-4.1-2025-04-14"),
    ("responses-output_text", RESPONSES_OUTPUT_TEXT, "quick path", None, "gpt-4.1"),
    # Anthropic input_tokens excludes cache reads: 100 + 2000 read = 2100 input, of which 2000 cached
    ("anthropic", ANTHROPIC, "Hi there", Usage(2100, 30, 2000), "claude-3-5-sonnet-20241022"),
    # cache writes are input tokens too (billed, not cached): 50 + 1000 written = 1050, none cached
    ("anthropic-cache-write", ANTHROPIC_CACHE_WRITE, "x", Usage(1050, 4, 0), None),
    ("anthropic-no-cache-fields", ANTHROPIC_NO_CACHE_FIELDS, "", Usage(9, 1, 0), None),
    ("dict-text", {"text": "t"}, "t", None, None),
    ("dict-answer", {"answer": "a", "sources": []}, "a", None, None),
    ("dict-content", {"content": "c"}, "c", None, None),
    ("dict-output", {"output": "o"}, "o", None, None),
    ("langchain-message", {"type": "ai", "content": "lc answer", "id": "run-1"}, "lc answer", None, None),
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    ("response", "text", "usage", "model"),
    [c[1:] for c in RESPONSE_CASES],
    ids=[c[0] for c in RESPONSE_CASES],
)
def test_extract_from_responses(form: Any, response: Any, text: str, usage: Usage | None, model: str | None) -> None:
    response = form(response)
    assert extract_text(response) == text
    assert extract_usage(response) == usage
    assert extract_model(response) == model


def test_plain_string_response() -> None:
    assert extract_text("just text") == "just text"
    assert extract_usage("just text") is None
    assert extract_model("just text") is None


def test_output_text_property_wins_over_output_list() -> None:
    class Response:
        """openai.types.responses.Response exposes output_text as a property computed from output."""

        def __init__(self) -> None:
            self.output = [ns(RESPONSES["output"][1])]
            self.text = SimpleNamespace(format=SimpleNamespace(type="text"))  # the SDK's .text is a config

        @property
        def output_text(self) -> str:
            return "from property"

    assert extract_text(Response()) == "from property"


@pytest.mark.parametrize("bad", [42, None, 3.5, ["a"], {"foo": "bar"}, {"text": 5}, SimpleNamespace(x=1)])
def test_unknown_response_raises_response_error(bad: Any) -> None:
    with pytest.raises(ResponseError) as info:
        extract_text(bad)
    assert "type" in str(info.value)
    assert isinstance(info.value, CaptureError)


def test_response_error_names_type_not_content() -> None:
    with pytest.raises(ResponseError) as info:
        extract_text({"secret": "PRIVATE"})
    assert "dict" in str(info.value)
    assert "PRIVATE" not in str(info.value)


USAGE_CASES: list[tuple[str, Any, Usage | None]] = [
    ("absent", {"choices": []}, None),
    ("null", {"usage": None}, None),
    ("prompt-str", {"usage": {"prompt_tokens": "12", "completion_tokens": 3}}, None),
    ("prompt-negative", {"usage": {"prompt_tokens": -1, "completion_tokens": 3}}, None),
    ("prompt-bool", {"usage": {"prompt_tokens": True, "completion_tokens": 3}}, None),
    ("prompt-float", {"usage": {"prompt_tokens": 1.5, "completion_tokens": 3}}, None),
    ("completion-missing", {"usage": {"prompt_tokens": 12}}, None),
    ("input-bool", {"usage": {"input_tokens": 12, "output_tokens": False}}, None),
    ("input-missing", {"usage": {"output_tokens": 3}}, None),
    (
        "cached-garbage",
        {"usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": "x"}}},
        Usage(10, 2, 0),
    ),
    (
        "cached-above-input",
        {"usage": {"input_tokens": 10, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 50}}},
        Usage(10, 2, 10),
    ),
    (
        "anthropic-read-garbage",
        {"usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": -5}},
        Usage(10, 2, 0),
    ),
    ("zeros", {"usage": {"prompt_tokens": 0, "completion_tokens": 0}}, Usage(0, 0, 0)),
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("response", "usage"), [c[1:] for c in USAGE_CASES], ids=[c[0] for c in USAGE_CASES])
def test_usage_garbage_is_absent_not_a_crash(form: Any, response: Any, usage: Usage | None) -> None:
    assert extract_usage(form(response)) == usage


def test_usage_defaults() -> None:
    usage = Usage(3, 4)
    assert (usage.cached_input_tokens, usage.estimated) == (0, False)
    assert not hasattr(usage, "__dict__")


@pytest.mark.parametrize("response", [{"model": ""}, {"model": 5}, {"model": None}, None, 42])
def test_extract_model_absent(response: Any) -> None:
    assert extract_model(response) is None


# ------------------------------------------------------------------------------------------ estimates

ESTIMATES = [
    ("", 0),
    ("a", 1),  # (1+3)//4
    ("abcd", 1),
    ("abcde", 2),
    ("hello world", 3),  # 11 chars -> (11+3)//4
    ("x" * 400, 100),
    ("检索增强生成", 6),  # 6 CJK ideographs, one token each
    ("检索 RAG", 3),  # 2 CJK + " RAG" (4 chars -> 1)
    ("日本語のテキスト", 8),  # ideographs + hiragana + katakana
    ("안녕하세요", 5),  # hangul syllables
    ("café", 1),  # non-ASCII, no CJK: (4+3)//4
    ("é", 1),
    ("😀😀😀😀😀", 2),  # (5+3)//4
]


@pytest.mark.parametrize(("text", "tokens"), ESTIMATES)
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


# ------------------------------------------------------------------------------------------ streams


def feed_all(events: list[Any]) -> tuple[StreamAccumulator, list[bool]]:
    acc = StreamAccumulator()
    return acc, [acc.feed(event) for event in events]


def chat_chunk(content: str | None, *, role: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {"content": content}
    if role:
        delta["role"] = role
    return {
        "object": "chat.completion.chunk",
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": None,
    }


OPENAI_CHAT_STREAM = [
    chat_chunk("", role="assistant"),
    chat_chunk("Hel"),
    chat_chunk("lo"),
    chat_chunk(None, finish="stop"),
    {  # stream_options={"include_usage": True}: a last chunk with no choices and the usage
        "object": "chat.completion.chunk",
        "model": "gpt-4o-2024-08-06",
        "choices": [],
        "usage": {"prompt_tokens": 42, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 0}},
    },
]


@pytest.mark.parametrize("form", FORMS)
def test_openai_chat_stream(form: Any) -> None:
    acc, flags = feed_all([form(e) for e in OPENAI_CHAT_STREAM])
    assert flags == [False, True, True, False, False]
    assert acc.text == "Hello"
    assert acc.usage == Usage(42, 2, 0)
    assert acc.model == "gpt-4o-2024-08-06"


def test_openai_chat_stream_without_usage() -> None:
    acc, flags = feed_all(OPENAI_CHAT_STREAM[:-1])
    assert flags == [False, True, True, False]
    assert acc.usage is None


RESPONSES_STREAM = [
    {"type": "response.created", "response": {"model": "gpt-4.1", "usage": None}},
    {"type": "response.output_item.added", "item": {"type": "message", "content": []}},
    {"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}},
    {"type": "response.output_text.delta", "delta": "Bon"},
    {"type": "response.output_text.delta", "delta": ""},
    {"type": "response.output_text.delta", "delta": "jour"},
    {"type": "response.output_text.done", "text": "Bonjour"},  # repeats the text: must not be added again
    {"type": "response.content_part.done", "part": {"type": "output_text", "text": "Bonjour"}},
    {
        "type": "response.completed",
        "response": {
            "model": "gpt-4.1-2025-04-14",
            "output_text": "Bonjour",
            "usage": {"input_tokens": 300, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 128}},
        },
    },
]


@pytest.mark.parametrize("form", FORMS)
def test_responses_api_stream(form: Any) -> None:
    acc, flags = feed_all([form(e) for e in RESPONSES_STREAM])
    assert flags == [False, False, False, True, False, True, False, False, False]
    assert acc.text == "Bonjour"
    assert acc.usage == Usage(300, 3, 128)
    assert acc.model == "gpt-4.1-2025-04-14"


ANTHROPIC_STREAM = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "model": "claude-3-7-sonnet-20250219",
            "content": [],
            "usage": {
                "input_tokens": 25,
                "output_tokens": 1,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 0,
            },
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    # the SDK's MessageStream helper echoes each text delta as a "text" event with a snapshot
    {"type": "text", "text": "Hi", "snapshot": "Hi"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}},
    {"type": "content_block_stop", "index": 0, "content_block": {"type": "text", "text": "Hi!"}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{"}},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 12}},
    {"type": "message_stop"},
]


@pytest.mark.parametrize("form", FORMS)
def test_anthropic_stream(form: Any) -> None:
    acc, flags = feed_all([form(e) for e in ANTHROPIC_STREAM])
    assert flags == [False, False, False, True, False, True, False, False, False, False]
    assert acc.text == "Hi!"
    # input 25 + 100 cache reads = 125, of which 100 cached; output from message_delta's cumulative count
    assert acc.usage == Usage(125, 12, 100)
    assert acc.model == "claude-3-7-sonnet-20250219"


def test_anthropic_message_delta_without_start_leaves_usage_absent() -> None:
    acc = StreamAccumulator()
    acc.feed({"type": "message_delta", "usage": {"output_tokens": 12}})
    assert acc.usage is None


def test_langchain_message_chunks() -> None:
    class AIMessageChunk:
        type = "AIMessageChunk"

        def __init__(self, content: Any) -> None:
            self.content = content

        def text(self) -> str:  # langchain-core 0.3 spells .text as a method
            return "WRONG"

    acc, flags = feed_all([AIMessageChunk(""), AIMessageChunk("Hel"), AIMessageChunk([{"type": "text", "text": "lo"}])])
    assert flags == [False, True, True]
    assert acc.text == "Hello"


def test_generic_deltas() -> None:
    events = [
        "str delta ",
        "",
        {"text": "t "},
        {"delta": "d "},
        {"content": "c "},
        {"delta": "x", "text": "cumulative so far"},  # LlamaIndex: text is cumulative, delta is new
        {"choices": [{"text": "legacy"}]},  # legacy completions stream
        {"type": "content.delta", "delta": "!", "snapshot": "..."},  # openai-python stream helper
        {"type": "content.done", "content": "everything again"},
    ]
    acc, flags = feed_all(events)
    assert flags == [True, False, True, True, True, True, True, True, False]
    assert acc.text == "str delta t d c xlegacy!"


@pytest.mark.parametrize(
    "event",
    [
        None,
        42,
        b"bytes",
        object(),
        {"foo": "bar"},
        {"text": None},
        {"choices": None},
        {"choices": [{"delta": None}]},
        {"type": "response.in_progress"},
        {"type": "response.function_call_arguments.delta", "delta": '{"q"'},
        {"type": "error", "error": {"message": "overloaded"}},
        {"type": "content_block_delta", "delta": None},
        {"type": "message_start", "message": None},
        {"type": "response.completed", "response": {"usage": {"input_tokens": "x"}}},
        SimpleNamespace(type=None),
    ],
)
def test_unknown_events_are_ignored(event: Any) -> None:
    acc = StreamAccumulator()
    assert acc.feed(event) is False
    assert acc.text == ""
    assert acc.usage is None


def test_text_can_be_read_mid_stream() -> None:
    acc = StreamAccumulator()
    assert acc.text == ""
    for part in ("a", "b", "c"):
        acc.feed(part)
    assert acc.text == "abc"
    assert acc.text == "abc"
    acc.feed("d")
    assert acc.text == "abcd"


def test_accumulator_is_slotted() -> None:
    with pytest.raises(AttributeError):
        StreamAccumulator().other = 1  # type: ignore[attr-defined]


def test_langchain_message_usage_and_model() -> None:
    """AIMessage.usage_metadata (input_tokens include the cache reads) and response_metadata's model id."""
    usage = {
        "input_tokens": 1200,
        "output_tokens": 7,
        "total_tokens": 1207,
        "input_token_details": {"cache_read": 1024},
    }
    as_dict = {"content": "600 CNY.", "usage_metadata": usage, "response_metadata": {"model_name": "gpt-4o-mini"}}
    as_object = ns(as_dict)
    for message in (as_dict, as_object):
        assert read_response(message) == ("600 CNY.", Usage(1200, 7, 1024), "gpt-4o-mini")
    anthropic_style = {
        "content": "x",
        "usage_metadata": {"input_tokens": 3, "output_tokens": 1},
        "response_metadata": {"model": "claude-x"},
    }
    assert read_response(anthropic_style) == ("x", Usage(3, 1, 0), "claude-x")
    assert extract_usage({"content": "x", "usage_metadata": {"input_tokens": -1, "output_tokens": 1}}) is None


def test_openai_stream_helper_chunk_events_carry_usage() -> None:
    """openai-python's ChatCompletionStream: text in "content.delta", model and usage in "chunk" events."""
    acc = StreamAccumulator()
    events = [
        {"type": "chunk", "chunk": chat_chunk("Hi", role="assistant"), "snapshot": {}},
        {"type": "content.delta", "delta": "Hi", "snapshot": "Hi"},
        {
            "type": "chunk",
            "chunk": {"model": "m", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1}},
        },
        {"type": "content.done", "content": "Hi"},
    ]
    assert [acc.feed(e) for e in events] == [False, True, False, False]
    assert acc.text == "Hi" and acc.usage == Usage(9, 1) and acc.model == "m"


def test_pydantic_models_are_read_like_getattr_without_its_miss_path() -> None:
    """Fields, properties and extra fields of pydantic models (OpenAI SDK objects, LangChain messages)."""
    from pydantic import BaseModel, ConfigDict

    class Reply(BaseModel):
        model_config = ConfigDict(extra="allow")
        content: str
        model: str | None = None

        @property
        def output_text(self) -> str:
            return "from the property"

    reply = Reply(content="hi", usage={"prompt_tokens": 3, "completion_tokens": 1})  # usage: an extra field
    assert extract_usage(reply) == Usage(3, 1)
    assert extract_text(reply) == "from the property"  # output_text is probed before content
    assert extract_model(reply) is None
    assert extract_model(Reply(content="x", model="m")) == "m"


def test_langchain_messages_read_directly_give_what_the_general_extractors_give() -> None:
    """read_response reads langchain-core's own message classes straight from their fields; whatever the
    message, the result is what extract_text/extract_usage/extract_model say."""
    require_package("langchain_core")
    from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

    usage = {
        "input_tokens": 1200,
        "output_tokens": 7,
        "total_tokens": 1207,
        "input_token_details": {"cache_read": 1024},
    }

    class Elsewhere(AIMessage):  # a subclass outside langchain-core may change what .text means
        @property
        def text(self) -> str:  # type: ignore[override]
            return "from the subclass"

    messages = [
        AIMessage("600 CNY.", usage_metadata=usage, response_metadata={"model_name": "gpt-4o-mini"}),
        AIMessage("x", usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}),
        AIMessage("x", response_metadata={"model": "claude-x"}),
        AIMessage("x", response_metadata={"model_name": ""}),
        AIMessage([{"type": "text", "text": "block"}, {"type": "tool_use", "id": "t"}]),
        AIMessage("x", model="an-extra-field", response_metadata={"model_name": "not-this"}),
        AIMessageChunk("chunk", usage_metadata=usage),
        HumanMessage("question"),
        Elsewhere("x"),
    ]
    for message in messages:
        general = (extract_text(message), extract_usage(message), extract_model(message))
        assert read_response(message) == general, message
    assert read_response(messages[0]) == ("600 CNY.", Usage(1200, 7, 1024), "gpt-4o-mini")
    assert read_response(messages[5])[2] == "an-extra-field"
    assert read_response(messages[-1])[0] == "from the subclass"
