"""A real OpenAI-compatible chat-completions server for tests, on a free loopback port.

The LLM judge's retry, timeout and concurrency logic lives in how it talks HTTP, so it is tested against a
real socket rather than a mocked client: a test scripts the replies (content, usage, status codes, broken
bodies, slow answers) and afterwards reads what the server received (method, path, headers, parsed body)
and how many requests were in flight at once.

    with OpenAIStub() as stub:
        stub.script(status_reply(429, headers={"Retry-After": "0"}), chat_reply({"claims": []}))
        ...  # point the client at stub.url ("http://127.0.0.1:<port>/v1")
        assert len(stub.requests) == 2

A request that arrives when the script is empty gets ``stub.default`` if set, else HTTP 418, which the
judge treats as a configuration error: an unscripted request fails loudly instead of being retried.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

__all__ = [
    "OpenAIStub",
    "Recorded",
    "Reply",
    "chat_reply",
    "embedding_reply",
    "raw_reply",
    "responses_reply",
    "responses_stream_reply",
    "status_reply",
    "stream_reply",
    "tool_call_reply",
    "usage_chat_reply",
]


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP response, sent after ``delay`` seconds."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it; ``body`` is the parsed JSON (or the raw bytes if not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def chat_reply(
    content: Any,
    *,
    input_tokens: int | None = 100,
    output_tokens: int | None = 20,
    delay: float = 0.0,
    model: str = "stub-model",
    finish_reason: str = "stop",
) -> Reply:
    """A 200 chat completion whose ``choices[0].message.content`` is ``content`` (JSON-encoded unless a
    string); ``input_tokens=None`` leaves ``usage`` out, as some servers do."""
    text = content if isinstance(content, str) else orjson.dumps(content).decode()
    payload: dict[str, Any] = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
    }
    if input_tokens is not None:
        out = output_tokens or 0
        payload["usage"] = {"prompt_tokens": input_tokens, "completion_tokens": out, "total_tokens": input_tokens + out}
    return Reply(200, orjson.dumps(payload), {"Content-Type": "application/json"}, delay)


def tool_call_reply(
    name: str,
    arguments: Mapping[str, Any],
    *,
    call_id: str = "call-1",
    input_tokens: int = 100,
    output_tokens: int = 10,
    model: str = "stub-model",
) -> Reply:
    """A chat completion that asks for one tool call (``finish_reason: tool_calls``, no content), as a
    tool-calling agent's model answers before it has what it needs."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }
    payload = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": _usage(input_tokens, output_tokens, 0),
    }
    return Reply(200, orjson.dumps(payload), _JSON)


def _usage(input_tokens: int, output_tokens: int, cached_tokens: int) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }
    if cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return usage


def usage_chat_reply(
    content: str, *, input_tokens: int, output_tokens: int, cached_tokens: int = 0, model: str = "stub-model"
) -> Reply:
    """A chat completion whose usage reports ``cached_tokens`` of the prompt served from the cache."""
    payload = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": _usage(input_tokens, output_tokens, cached_tokens),
    }
    return Reply(200, orjson.dumps(payload), {"Content-Type": "application/json"})


def embedding_reply(count: int, *, input_tokens: int | None, model: str = "text-embedding-3-small") -> Reply:
    """An embeddings response with ``count`` small vectors; ``input_tokens=None`` leaves ``usage`` out."""
    payload: dict[str, Any] = {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3]} for i in range(count)],
    }
    if input_tokens is not None:
        payload["usage"] = {"prompt_tokens": input_tokens, "total_tokens": input_tokens}
    return Reply(200, orjson.dumps(payload), {"Content-Type": "application/json"})


def stream_reply(
    deltas: list[str],
    *,
    input_tokens: int | None = None,
    output_tokens: int = 0,
    cached_tokens: int = 0,
    model: str = "stub-model",
) -> Reply:
    """A streamed chat completion (server-sent events), one chunk per delta; with ``input_tokens`` a final
    chunk with empty choices carries the usage, as OpenAI sends for ``stream_options.include_usage``."""
    base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0, "model": model}
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    ]
    chunks += [{**base, "choices": [{"index": 0, "delta": {"content": d}, "finish_reason": None}]} for d in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if input_tokens is not None:
        chunks.append({**base, "choices": [], "usage": _usage(input_tokens, output_tokens, cached_tokens)})
    return _sse([orjson.dumps(c) for c in chunks] + [b"[DONE]"])


def responses_reply(
    text: str, *, input_tokens: int, output_tokens: int, cached_tokens: int = 0, model: str = "stub-model"
) -> Reply:
    """A Responses API (``POST /responses``) reply with one output message."""
    return Reply(200, orjson.dumps(_response(text, input_tokens, output_tokens, cached_tokens, model)), _JSON)


def responses_stream_reply(
    deltas: list[str], *, input_tokens: int, output_tokens: int, cached_tokens: int = 0, model: str = "stub-model"
) -> Reply:
    """A streamed Responses API reply: created, the output item and part opening, one
    ``response.output_text.delta`` per delta, completed."""
    done = _response("".join(deltas), input_tokens, output_tokens, cached_tokens, model)
    created = {**done, "status": "in_progress", "output": [], "usage": None}
    item = {"type": "message", "id": "msg-stub", "status": "in_progress", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": created},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.content_part.added",
            "item_id": "msg-stub",
            "output_index": 0,
            "content_index": 0,
            "part": part,
        },
    ]
    for d in deltas:
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": "msg-stub",
                "output_index": 0,
                "content_index": 0,
                "delta": d,
                "logprobs": [],
            }
        )
    events.append({"type": "response.completed", "response": done})
    for i, event in enumerate(events):
        event["sequence_number"] = i
    return _sse([orjson.dumps(e) for e in events], named=[e["type"] for e in events])


_JSON = {"Content-Type": "application/json"}


def _response(text: str, input_tokens: int, output_tokens: int, cached_tokens: int, model: str) -> dict[str, Any]:
    return {
        "id": "resp-stub",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "message",
                "id": "msg-stub",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def _sse(payloads: list[bytes], named: list[str] | None = None) -> Reply:
    lines = []
    for i, data in enumerate(payloads):
        event = f"event: {named[i]}\n".encode() if named and i < len(named) else b""
        lines.append(event + b"data: " + data + b"\n\n")
    return Reply(200, b"".join(lines), {"Content-Type": "text/event-stream"})


def status_reply(
    status: int, *, message: str = "stub error", headers: Mapping[str, str] | None = None, delay: float = 0.0
) -> Reply:
    """An error in OpenAI's shape (``{"error": {"message": ...}}``) with the given status."""
    body = orjson.dumps({"error": {"message": message, "type": "stub", "code": status}})
    return Reply(status, body, {"Content-Type": "application/json", **(headers or {})}, delay)


def raw_reply(body: bytes, *, status: int = 200, content_type: str = "text/html", delay: float = 0.0) -> Reply:
    """Arbitrary bytes, e.g. a proxy's HTML error page where JSON was expected."""
    return Reply(status, body, {"Content-Type": content_type}, delay)


_UNSCRIPTED = status_reply(418, message="openai stub: no scripted reply for this request")


class _StubServer(ThreadingHTTPServer):
    """Keep-alive, as real servers are: a client closing an idle kept-alive connection with a reset is
    ordinary there, not an error to print (the suite's output showed a socketserver traceback for it)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class OpenAIStub:
    """A ``ThreadingHTTPServer`` in a daemon thread answering ``POST …/chat/completions`` (and
    ``…/responses``) from a script."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.default: Reply | None = None
        self.in_flight = 0
        self.max_in_flight = 0
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL a client should be given (``…/v1``)."""
        if self._server is None:
            raise RuntimeError("stub not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request takes the next one."""
        with self._lock:
            self._script.extend(replies)

    def start(self) -> None:
        handler = type("Handler", (_Handler,), {"stub": self})
        self._server = _StubServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-stub", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()  # wakes handlers still "thinking" on a slow reply
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._server = None

    def __enter__(self) -> OpenAIStub:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self._script:
                return self._script.popleft()
            return self.default or _UNSCRIPTED

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1


class _Handler(BaseHTTPRequestHandler):
    stub: OpenAIStub
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do, so connection reuse is exercised
    timeout = 10  # an idle kept-alive connection ends its thread eventually
    disable_nagle_algorithm = True  # headers and body go out in two writes; no 40 ms delayed-ACK stall

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = raw
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply = self.stub._next(Recorded("POST", self.path, headers, body))
        try:
            if reply.delay:
                self.stub._stop.wait(reply.delay)
        finally:
            # Leave the in-flight count *before* answering: once the client has the response it may send the
            # next request, which must never overlap this one in the count.
            self.stub._done()
        if not self.path.endswith(("/chat/completions", "/responses", "/embeddings")):
            reply = status_reply(404, message=f"no route {self.path}")
        with contextlib.suppress(OSError):  # the client gave up (timeout) and closed the socket
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows stderr on failure only
        pass
