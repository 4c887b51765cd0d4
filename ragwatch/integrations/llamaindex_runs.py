"""What the LlamaIndex handler reads off dispatcher spans to follow chat engines and agents as runs.

A query engine announces its queries with events; a chat engine turn (``chat`` / ``achat`` /
``stream_chat`` / ``astream_chat``) and an agent run (``FunctionAgent.run``, ``AgentWorkflow.run``) only
open a dispatcher span. These pure functions say which spans those are, the user's message in their
arguments, the answer in their result, and the tool an agent's ``call_tool`` step runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.chat_engine.types import BaseChatEngine

try:  # the agent workflows came with llama-index-core 0.12 (llama-index-workflows)
    from llama_index.core.agent.workflow import AgentWorkflow, BaseWorkflowAgent

    _AGENTS: tuple[type, ...] = (AgentWorkflow, BaseWorkflowAgent)
except ImportError:  # pragma: no cover - an older core: chat engines only
    _AGENTS = ()

__all__ = ["conversation_kind", "final_text", "method_of", "question_of", "tool_of"]

_CHAT_METHODS = frozenset({"chat", "achat", "stream_chat", "astream_chat"})
#: the span id's suffix: "-" and a uuid4 (``CondensePlusContextChatEngine.chat-<uuid>``)
_UUID_SUFFIX = 37
#: instance type -> "chat" / "agent" / None; the dispatcher opens a span per component call
_KINDS: dict[type, str | None] = {}


def method_of(span_id: str) -> str:
    """The method a dispatcher span is for: ``MockLLM.acomplete-<uuid4>`` -> ``acomplete``."""
    return span_id[:-_UUID_SUFFIX].rpartition(".")[2]


def conversation_kind(instance: Any, span_id: str) -> str | None:
    """The kind of conversation a span opens: "chat" (a chat engine turn), "agent" (an agent run), or None."""
    cls = type(instance)
    kind = _KINDS.get(cls, "")
    if kind == "":
        kind = "chat" if issubclass(cls, BaseChatEngine) else "agent" if _AGENTS and issubclass(cls, _AGENTS) else None
        if len(_KINDS) < 1024:
            _KINDS[cls] = kind
    if kind is None:
        return None
    method = method_of(span_id)
    if kind == "chat":
        return kind if method in _CHAT_METHODS else None
    return kind if method == "run" else None


def question_of(kind: str, bound_args: Any) -> str | None:
    """The user's message: a chat engine's ``message``; an agent's ``user_msg`` (in its start event, or a
    keyword of ``run``), else the last user message of its ``chat_history``."""
    arguments = getattr(bound_args, "arguments", None) or {}
    if kind == "chat":
        return _text(arguments.get("message"))
    start = arguments.get("start_event")
    extra = arguments.get("kwargs")
    for source in (start, extra if isinstance(extra, Mapping) else None):
        if source is None:
            continue
        text = _text(_field(source, "user_msg"))
        if text is not None:
            return text
        history = _field(source, "chat_history")
        if isinstance(history, Sequence):
            for message in reversed(history):
                if str(getattr(message, "role", "")).endswith("user"):
                    return _text(message)
    return None


def final_text(result: Any) -> str | None:
    """The answer the user reads: a chat turn's ``response``, an agent's final message (its ``StopEvent``
    carries an ``AgentOutput``). None for a stream, whose answer is still to come."""
    if isinstance(result, str):
        return result
    if hasattr(result, "chat_stream"):  # StreamingAgentChatResponse: filled in as the host reads it
        return None
    stop = getattr(result, "result", None)  # the workflow's StopEvent
    if stop is not None:
        result = stop
    response = getattr(result, "response", None)
    if isinstance(response, str):
        return response
    return _text(response)


def tool_of(span_id: str, bound_args: Any) -> tuple[str, Any, str | None] | None:
    """(name, arguments, call id) when the span is an agent's ``call_tool`` step, else None."""
    if method_of(span_id) != "call_tool":
        return None
    event = (getattr(bound_args, "arguments", None) or {}).get("ev")
    name = getattr(event, "tool_name", None)
    if not isinstance(name, str):
        return None
    call_id = getattr(event, "tool_id", None)
    return name, getattr(event, "tool_kwargs", None), call_id if isinstance(call_id, str) else None


def _field(source: Any, name: str) -> Any:
    if isinstance(source, Mapping):
        return source.get(name)
    try:
        return getattr(source, name, None)
    except Exception:  # a workflow event raising on a missing field
        return None


def _text(message: Any) -> str | None:
    """A message's text: a string, or a ``ChatMessage``'s ``content``."""
    if isinstance(message, str):
        return message or None
    content = getattr(message, "content", None)
    return content if isinstance(content, str) and content else None
