# requires: ragwatch[examples]  (fastapi, uvicorn; in a checkout: pip install -e '.[examples]')
"""Quality scores and degraded mode with no Redis: one process, the default ``memory://`` queue.

    pip install -e '.[examples]'   # from a checkout: fastapi and uvicorn
    python examples/quickstart.py

A FastAPI service over the handbook of ``ragwatch demo`` (BM25), watched by ragwatch, serves on a free local port. The
script drives it in three phases — a good retriever, a broken one (off-topic chunks), the good one again —
and reads ``/metrics`` over HTTP as Prometheus would: the quality gauges appear within seconds, degraded
mode switches on when Context Precision@3 falls under its SLA and off when it recovers, and the health
report comes from the scores the service computed itself. The SLA window is shortened (20 scores, a
one-second hold and dwell) so the run takes seconds instead of the default quarter of an hour, and its
line set to 0.5, between what the good and the broken retriever score here.
"""

from __future__ import annotations

import re
import socket
import sys
import threading
import time

import httpx
import uvicorn
from fastapi import FastAPI

import ragwatch
from ragwatch.demo.kb import CHUNKS, QUESTIONS  # the demo's handbook: 5 policy areas, 3 chunks each
from ragwatch.demo.service import Index  # BM25 over it

index = Index(tuple(c for c in CHUNKS if c.lang == "en"))
questions = [q.text for q in QUESTIONS if q.lang == "en"]

rw = ragwatch.RagWatch(
    service="kb-qa",
    tracing=False,
    sample_rate=1.0,  # score every request (the default samples 10 % of them)
    scoring_max_per_second=50,  # the default budget is 2 scored samples per second
    # The offline judge rates this handbook's English top-3 at about 0.91 with BM25 and 0.15 with the broken
    # index (graded relevance: off-topic chunks read ~0): any line between them works, the default 0.65 too.
    sla_threshold=0.5,
    sla_window_samples=20,
    sla_min_samples=8,
    sla_hold_seconds=1,
    sla_min_dwell_seconds=1,
    sla_evaluate_seconds=0.2,
)
broken = threading.Event()


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


@rw.retriever
def retrieve(question: str, top_k: int = 3) -> list[dict[str, object]]:
    hits = index.search(question, top_k)
    if broken.is_set():  # the index is broken: it returns chunks of another policy area
        topic = hits[0][0].topic
        hits = [(c, 1.0) for c in index.documents if c.topic != topic][:top_k]
    return [{"id": c.id, "text": c.text, "score": round(score, 3)} for c, score in hits]


@rw.llm(model="gpt-4o-mini")
def generate(question: str, chunks: list[dict[str, object]]) -> str:
    """An extractive stand-in for the LLM: the context sentence sharing most words with the question."""
    sentences = [s for c in chunks for s in re.split(r"(?<=[.!?]) ", str(c["text"]))]
    return max(sentences, key=lambda s: len(words(question) & words(s)))


app = FastAPI()
app.add_middleware(ragwatch.RagwatchMiddleware, watch=rw)
app.mount("/metrics", ragwatch.metrics_asgi_app())


@app.post("/ask")
def ask(body: dict[str, str]) -> dict[str, str | None]:
    answer = generate(body["question"], retrieve(body["question"]))
    return {"answer": answer, "notice": rw.notice}


def gauge(body: str, name: str, **labels: str) -> float | None:
    """One sample of the Prometheus text exposition (labels in any order)."""
    for line in body.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def main() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    base = f"http://127.0.0.1:{port}"
    client = httpx.Client(base_url=base, timeout=5)
    sent = 0

    def scrape() -> str:
        response = client.get("/metrics")  # answered at /metrics itself, no redirect
        response.raise_for_status()
        return response.text

    def window() -> tuple[float | None, float | None]:
        body = scrape()
        cp3 = {"service": "kb-qa", "metric": "context_precision_3"}
        return gauge(body, "ragwatch_window_value", **cp3), gauge(body, "ragwatch_window_samples", **cp3)

    def traffic(until: object, most: int) -> bool:
        nonlocal sent
        for _ in range(most):
            client.post("/ask", json={"question": questions[sent % len(questions)]}).raise_for_status()
            sent += 1
            time.sleep(0.02)
            if callable(until) and until():
                return True
        return False

    started = time.monotonic()
    print(f"serving {base}/ask and {base}/metrics — no Redis, scores computed in this process")
    traffic(None, 20)
    deadline = time.monotonic() + 10
    while (window()[1] or 0) < 8 and time.monotonic() < deadline:
        time.sleep(0.1)
    value, samples = window()
    print(
        f"[{time.monotonic() - started:4.1f}s] good retriever: ragwatch_window_value{{metric=context_precision_3}} "
        f"= {value} over {samples} scores"
    )

    broken.set()
    entered = traffic(lambda: rw.degraded, 300)
    body = scrape()
    print(
        f"[{time.monotonic() - started:4.1f}s] broken retriever: degraded={rw.degraded} "
        f"(ragwatch_degraded = {gauge(body, 'ragwatch_degraded', service='kb-qa')}), "
        f"window {window()[0]} — {rw.mode.reason}"
    )

    broken.clear()
    left = traffic(lambda: not rw.degraded, 300)
    print(
        f"[{time.monotonic() - started:4.1f}s] retriever fixed: degraded={rw.degraded}, window {window()[0]} "
        f"— {rw.mode.reason}"
    )

    report = rw.report()
    print()
    print(report.markdown())
    server.should_exit = True
    rw.close()
    ok = value is not None and entered and left and report.samples > 0
    print(f"{sent} requests; entered degraded mode: {entered}; left it: {left}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
