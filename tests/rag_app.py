"""A tiny but real RAG service for replay tests: a Starlette app served by uvicorn on a loopback port.

A handful of bundled documents, a lexical retriever (token overlap), an "LLM" that quotes the best chunk,
``POST /ask`` (JSON) and ``POST /ask/stream`` (server-sent events). Behaviour switches by question prefix,
so one run can mix every failure kind the prober must tell apart:

* ``fail:`` → HTTP 500;  ``bad:`` → 200 with a body that is not JSON;  ``hang:`` → sleeps past any probe
  timeout;  ``nochunks:`` → valid JSON without ``chunks``;  ``teapot:`` → HTTP 418 (a 4xx).

The app is wrapped in ragwatch's ASGI middleware with sampling at rate 1 into ``memory://replaytest``, so
tests can check that probe requests stay out of the samples.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import ragwatch
from tests.servers import free_port

DOCS: dict[str, str] = {
    "pw-reset": "To reset your password use the forgot password link on the sign in page.",
    "billing": "Invoices are sent by email on the first day of every month.",
    "refund": "Refunds are possible within thirty days of purchase through the billing page.",
    "api-keys": "API keys are created in the developer settings and can be revoked at any time.",
    "sso": "Single sign on supports SAML and OpenID Connect for enterprise plans.",
    "export": "You can export your data as CSV or JSON from the account page.",
}
HANG_SECONDS = 3.0
STREAM_DELAY = 0.02


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - {"the", "a", "to", "your", "is", "are", "how", "do", "i"}


def retrieve(question: str, top_k: int = 3) -> list[dict[str, Any]]:
    """Rank documents by token overlap with the question; only documents with some overlap come back."""
    q = _tokens(question)
    scored = [(len(q & _tokens(text)) / (len(q) or 1), doc_id, text) for doc_id, text in DOCS.items()]
    scored = [s for s in scored if s[0] > 0]
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [{"id": doc_id, "text": text, "score": round(score, 3)} for score, doc_id, text in scored[:top_k]]


def generate(question: str, chunks: list[dict[str, Any]]) -> str:
    return chunks[0]["text"] if chunks else "I do not know."


def build_app(rw: ragwatch.RagWatch) -> Any:
    async def _question(request: Request) -> str:
        body = await request.json()
        return str(body.get("question", ""))

    async def ask(request: Request) -> Response:
        question = await _question(request)
        if question.startswith("fail:"):
            return PlainTextResponse("internal error", status_code=500)
        if question.startswith("teapot:"):
            return PlainTextResponse("no", status_code=418)
        if question.startswith("hang:"):  # until the prober gives up (disconnects), at most HANG_SECONDS
            deadline = time.monotonic() + HANG_SECONDS
            while time.monotonic() < deadline and not await request.is_disconnected():
                await asyncio.sleep(0.02)
        if question.startswith("bad:"):
            return PlainTextResponse('{"answer": "trunc', media_type="application/json")
        with rw.request(question):  # joins the middleware's run: question, chunks and answer reach samples
            with rw.retrieval(top_k=3) as r:
                chunks = r.record(retrieve(question))
            with rw.generation(model="gpt-4o-mini") as g:
                answer = g.record(generate(question, chunks))
        if question.startswith("nochunks:"):
            return JSONResponse({"answer": answer})
        return JSONResponse({"answer": answer, "chunks": chunks})

    async def ask_stream(request: Request) -> Response:
        question = await _question(request)
        if question.startswith("fail:"):
            return PlainTextResponse("internal error", status_code=500)
        chunks = retrieve(question)
        answer = generate(question, chunks)

        async def events() -> AsyncIterator[bytes]:
            await asyncio.sleep(STREAM_DELAY)  # retrieval time: the first token is never instant
            yield f"event: chunks\ndata: {json.dumps({'chunks': chunks})}\n\n".encode()
            for word in answer.split(" "):
                await asyncio.sleep(STREAM_DELAY)
                yield f"data: {json.dumps({'delta': word + ' '})}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/ask", ask, methods=["POST"]), Route("/ask/stream", ask_stream, methods=["POST"])])
    return rw.middleware(app)


#: The probe secret the test app and the test prober share.
PROBE_SECRET = "replay-test-secret"


class RagApp:
    """The app on 127.0.0.1:<free port> in a background thread; ``with RagApp() as app: app.url``."""

    def __init__(self, queue_url: str = "memory://replaytest", service: str = "replaytest", **settings: Any) -> None:
        self.registry = CollectorRegistry()
        options: dict[str, Any] = {
            "sampling": True,
            "sample_rate": 1.0,
            "degraded_mode": False,
            "tracing": False,
            "flush_interval": 0.05,
            "probe_secret": PROBE_SECRET,
            "scoring": "off",  # the replay tests run their own worker against the queue
            **settings,
        }
        self.rw = ragwatch.RagWatch(service, registry=self.registry, redis_url=queue_url, **options)
        self.port = free_port()
        config = uvicorn.Config(
            build_app(self.rw),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="rag-app", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RagApp:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("rag app did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.rw.close(2)

    def __enter__(self) -> RagApp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":  # pragma: no cover - manual runs: python -m tests.rag_app
    with RagApp() as app:
        print(f"serving on {app.url} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
