"""One probe request over HTTP, and what it saw: an answer with its chunks, or the kind of failure.

The only replay module that speaks HTTP. Each failure is classified into one of :data:`ERROR_KINDS` so the
summary can tell a timeout from a broken body from a missing field; retries are off unless configured.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from ragwatch.capture.asgi import PROBE_HEADER
from ragwatch.capture.probe import sign_probe
from ragwatch.replay.mapping import MissingField, build_body, extract
from ragwatch.replay.options import ReplayOptions
from ragwatch.replay.source import Question

__all__ = ["ERROR_KINDS", "ProbeResult", "probe_all"]

ERROR_KINDS: tuple[str, ...] = (
    "timeout",
    "connect",
    "transport",
    "http_5xx",
    "http_4xx",
    "bad_json",
    "missing_field",
)


@dataclass(slots=True)
class ProbeResult:
    """What one probe request saw."""

    question: Question
    outcome: str  # "ok" or one of ERROR_KINDS
    latency: float | None = None
    ttft: float | None = None
    status: int | None = None
    answer: str | None = None
    chunk_ids: list[str] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    attempts: int = 1
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


class _Failure(Exception):
    def __init__(self, kind: str, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.status = status


def _map_response(options: ReplayOptions, data: Any) -> tuple[str, list[str], list[str]]:
    try:
        answer = extract(data, options.answer_path)
        ids = extract(data, options.chunk_ids_path) if options.chunk_ids_path else []
        texts = extract(data, options.chunk_texts_path) if options.chunk_texts_path else []
    except MissingField as exc:
        raise _Failure("missing_field", f"response has no {exc.args[0]!r}") from None
    if not isinstance(answer, str):
        raise _Failure("missing_field", f"{options.answer_path!r} is not a string")
    ids = ids if isinstance(ids, list) else [ids]
    texts = texts if isinstance(texts, list) else [texts]
    return answer, [str(i) for i in ids], [str(t) for t in texts]


async def _read_stream(
    options: ReplayOptions, response: httpx.Response, started: float
) -> tuple[str, list[str], list[str], float | None]:
    """Read an SSE body: JSON events carrying ``stream_text_path`` add text, one carrying the chunk path sets
    the chunks, one carrying ``answer_path`` sets the full answer; non-JSON data is text; ``[DONE]`` ends.
    TTFT is stamped at the first non-empty text."""
    deltas: list[str] = []
    answer: str | None = None
    ids: list[str] | None = None
    texts: list[str] = []
    ttft: float | None = None
    data_lines: list[str] = []

    def dispatch(data: str) -> bool:
        nonlocal answer, ids, texts, ttft
        if data.strip() == "[DONE]":
            return True
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            event = None
        text: str | None = None
        if isinstance(event, (dict, list)):
            for path, setter in ((options.chunk_ids_path, "ids"), (options.chunk_texts_path, "texts")):
                if path:
                    try:
                        found = extract(event, path)
                    except MissingField:
                        continue
                    values = [str(v) for v in (found if isinstance(found, list) else [found])]
                    if setter == "ids":
                        ids = values
                    else:
                        texts = values
            try:
                full = extract(event, options.answer_path)
                if isinstance(full, str):
                    answer = full
            except MissingField:
                pass
            try:
                delta = extract(event, options.stream_text_path)
                text = delta if isinstance(delta, str) else None
            except MissingField:
                text = None
        elif event is None or isinstance(event, str):
            text = data if event is None else event
        if text:
            if ttft is None:
                ttft = time.perf_counter() - started
            deltas.append(text)
        return False

    done = False
    async for line in response.aiter_lines():
        if line == "":
            if data_lines:
                done = dispatch("\n".join(data_lines))
                data_lines = []
                if done:
                    break
            continue
        if line.startswith("data:"):
            data_lines.append(line[5:].removeprefix(" "))
    if data_lines and not done:
        dispatch("\n".join(data_lines))
    if answer is None:
        if not deltas:
            raise _Failure("missing_field", "stream carried no text")
        answer = "".join(deltas)
    if options.chunk_ids_path and ids is None:
        raise _Failure("missing_field", f"stream has no {options.chunk_ids_path!r}")
    return answer, ids or [], texts, ttft


def _mark(secret: str | None, request: httpx.Request) -> str:
    """The probe header of this exact request: signed over its method, path, query and body, with a fresh
    nonce (so each attempt, retries included, carries its own); "1" without a secret (the service counts it
    as real traffic unless the prober's address is in its probe_sources)."""
    if not secret:
        return "1"
    return sign_probe(secret, request.method, request.url.path, request.url.query, request.content)


async def _attempt(client: httpx.AsyncClient, options: ReplayOptions, question: Question) -> ProbeResult:
    body = build_body(options, question.text)
    started = time.perf_counter()
    request = client.build_request(options.method, options.url, headers=options.headers, json=body)
    request.headers[PROBE_HEADER] = _mark(options.probe_secret, request)
    try:
        response = await client.send(request, stream=True)
    except httpx.ConnectTimeout as exc:
        raise _Failure("connect", f"connect timeout: {exc}") from None
    except httpx.TimeoutException as exc:
        raise _Failure("timeout", f"timeout: {type(exc).__name__}") from None
    except httpx.ConnectError as exc:
        raise _Failure("connect", str(exc) or type(exc).__name__) from None
    except httpx.TransportError as exc:
        raise _Failure("transport", f"{type(exc).__name__}: {exc}") from None
    try:
        status = response.status_code
        if status >= 500:
            raise _Failure("http_5xx", f"HTTP {status}", status)
        if status >= 400:
            raise _Failure("http_4xx", f"HTTP {status}", status)
        ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
        ttft: float | None = None
        try:
            if ctype == "text/event-stream":
                answer, ids, texts, ttft = await _read_stream(options, response, started)
            else:
                raw = await response.aread()
                try:
                    data = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    detail = f"body is not JSON ({len(raw)} bytes, {ctype or 'no type'})"
                    raise _Failure("bad_json", detail, status) from None
                answer, ids, texts = _map_response(options, data)
        except httpx.TimeoutException:
            raise _Failure("timeout", "timeout while reading the body", status) from None
        except httpx.TransportError as exc:
            raise _Failure("transport", f"{type(exc).__name__} while reading the body", status) from None
        latency = time.perf_counter() - started
        return ProbeResult(question, "ok", latency, ttft, status, answer, ids, texts)
    finally:
        await response.aclose()


async def _probe(client: httpx.AsyncClient, options: ReplayOptions, question: Question) -> ProbeResult:
    """One question, with the overall deadline enforced here: httpx's timeouts are per read, so a server that
    trickles bytes would otherwise never time out."""
    attempts = 0
    while True:
        attempts += 1
        try:
            result = await asyncio.wait_for(_attempt(client, options, question), options.timeout)
            result.attempts = attempts
            return result
        except asyncio.TimeoutError:
            failure = _Failure("timeout", f"no complete response within {options.timeout:g}s")
        except _Failure as exc:
            failure = exc
        retryable = failure.kind in ("timeout", "connect", "transport", "http_5xx")
        if not retryable or attempts > options.retries:
            return ProbeResult(question, failure.kind, status=failure.status, attempts=attempts, error=str(failure))
        await asyncio.sleep(min(2.0, 0.1 * 2 ** (attempts - 1)))


async def probe_all(
    options: ReplayOptions, questions: Sequence[Question], on_done: Callable[[ProbeResult], None] | None = None
) -> list[ProbeResult]:
    """Probe every question with at most ``concurrency`` requests in flight; results in question order."""
    semaphore = asyncio.Semaphore(options.concurrency)
    limits = httpx.Limits(max_connections=options.concurrency, max_keepalive_connections=options.concurrency)
    async with httpx.AsyncClient(timeout=options.timeout, limits=limits, trust_env=False) as client:

        async def one(q: Question) -> ProbeResult:
            async with semaphore:
                result = await _probe(client, options, q)
            if on_done is not None:
                on_done(result)
            return result

        return list(await asyncio.gather(*(one(q) for q in questions)))
