"""The demo's RAG service: a lexical retriever, an extractive "LLM" that sometimes lies, served over ASGI.

Everything is deterministic and offline so a newcomer sees ragwatch work without an API key or a model
download, and so the tests can assert on what happened. Two knobs make it misbehave on purpose:

* ``fault`` — the index is "broken": off-topic chunks from other policy areas are ranked above the right one,
  the failure Context Precision@3 (and so degraded mode) is built to catch;
* ``hallucination_rate`` — the share of answers in which the "LLM" changes a number or adds a clause the
  context never states; the service keeps a ledger (by trace id) so the demo can check ragwatch caught them.

The app is wrapped in :class:`ragwatch.RagwatchMiddleware`: ``POST /ask
{"question"}`` → ``{"answer", "chunks": [{"id", "text", "score"}], ...}`` and ``GET /metrics`` — a plain ASGI app, so it
runs without any web framework installed.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import ragwatch
from ragwatch.demo.kb import CHUNKS, Chunk

__all__ = ["DemoService", "Index", "sentences", "tokenize"]

_WORD_RE = re.compile(r"[a-z]+|\d+(?:\.\d+)?|[\u4e00-\u9fff]+", re.IGNORECASE)
_STOP_WORDS = (
    "a an the is are be of to in on for and or by at as it its do does i my me we our you your can may must "
    "what which who whom when where how much many long often far per with from that this these those than "
    "there if not no any every all more most up within after before"
)
_STOP = frozenset(_STOP_WORDS.split())
_SENT_RE = re.compile(r"[^.!?。！？]+[.!?。！？]?")
_NUM_RE = re.compile(r"\d+")


def _stem(word: str) -> str:
    """A crude English stemmer: enough that "expenses" finds "expense" and "reports" finds "report"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """English stems and numbers, Chinese character bigrams (the usual no-segmenter trick for CJK search)."""
    out: list[str] = []
    for m in _WORD_RE.finditer(text):
        tok = m.group(0).lower()
        if "\u4e00" <= tok[0] <= "\u9fff":
            out.extend(tok[i : i + 2] for i in range(len(tok) - 1)) if len(tok) > 1 else out.append(tok)
        elif tok not in _STOP:
            out.append(_stem(tok))
    return out


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT_RE.findall(text) if s.strip()]


class Index:
    """BM25 over the bundled documents (k1 = 1.2, b = 0.75)."""

    def __init__(self, documents: tuple[Chunk, ...] = CHUNKS) -> None:
        self.documents = documents
        self._tf = [Counter(tokenize(d.text)) for d in documents]
        self._len = [sum(tf.values()) for tf in self._tf]
        self._avg = sum(self._len) / len(self._len)
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        n = len(documents)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def search(self, question: str, top_k: int = 3) -> list[tuple[Chunk, float]]:
        q = set(tokenize(question))
        scored = []
        for doc, tf, length in zip(self.documents, self._tf, self._len, strict=True):
            norm = 1.2 * (1 - 0.75 + 0.75 * length / self._avg)
            s = sum(self.idf[t] * tf[t] * 2.2 / (tf[t] + norm) for t in q if t in tf)
            scored.append((doc, s))
        scored.sort(key=lambda p: (-p[1], p[0].id))
        return scored[:top_k]


@dataclass
class Falsification:
    """What the "LLM" changed in one answer (the demo's ground truth for hallucinations)."""

    question: str
    original: str
    falsified: str
    kind: str  # "number" or "clause"


@dataclass
class DemoService:
    """The watched service. ``fault`` and ``hallucination_rate`` may be changed while it serves."""

    rw: ragwatch.RagWatch
    hallucination_rate: float = 0.2
    seed: int = 7
    fault: bool = False
    index: Index = field(default_factory=Index)
    falsified: dict[str, Falsification] = field(default_factory=dict)  # by trace id
    requests: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._by_id = {d.id: d for d in self.index.documents}

    # -- the pipeline stages ----------------------------------------------------------------------------
    def retrieve(self, question: str, top_k: int = 3) -> list[dict[str, Any]]:
        """BM25 top-k; under ``fault`` two off-topic chunks (other policy areas) are ranked first."""
        hits = self.index.search(question, top_k)
        if self.fault and hits:
            best, lang, topic = hits[0], hits[0][0].lang, hits[0][0].topic
            pool = [d for d in self.index.documents if d.lang == lang and d.topic != topic]
            with self._lock:
                noise = self._rng.sample(pool, top_k - 1)
            ranked = [(d, round(best[1] * 1.1 + 0.1 * i, 3)) for i, d in enumerate(reversed(noise))]
            hits = [*reversed(ranked), best]
        return [{"id": d.id, "text": d.text, "score": round(s, 3)} for d, s in hits]

    def generate(self, question: str, chunks: list[dict[str, Any]]) -> tuple[str, Falsification | None]:
        """Extractive answer: the two sentences of the context sharing the most (IDF-weighted) question terms.

        At ``hallucination_rate`` a number of the answer is changed to one the context does not contain, or
        (no number) a clause is added — what a real model does when it "helpfully" fills a gap.
        """
        q = set(tokenize(question))
        candidates = []
        seen: set[str] = set()
        for rank, chunk in enumerate(chunks):
            for pos, sent in enumerate(sentences(chunk["text"])):
                if sent in seen:  # overlapping chunks repeat sentences
                    continue
                seen.add(sent)
                score = sum(self.index.idf.get(t, 0.0) for t in q & set(tokenize(sent)))
                candidates.append((score, -rank, -pos, sent))
        if not candidates:
            return ("I do not know." if not _is_zh(question) else "不知道。"), None
        candidates.sort(reverse=True)
        picked = [c[3] for c in candidates[:2] if c[0] > 0] or [candidates[0][3]]
        answer = ("" if _is_zh(question) else " ").join(picked)
        with self._lock:
            lie = self._rng.random() < self.hallucination_rate
            choice = self._rng.random()
        if not lie:
            return answer, None
        context = " ".join(c["text"] for c in chunks)
        falsified, kind = _falsify(answer, context, choice)
        return falsified, Falsification(question, answer, falsified, kind)


def _is_zh(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _falsify(answer: str, context: str, choice: float) -> tuple[str, str]:
    numbers = [m for m in _NUM_RE.finditer(answer)]
    present = set(_NUM_RE.findall(context))
    if numbers:
        m = numbers[int(choice * len(numbers))]
        n = int(m.group(0))
        for new in (n + 200 if n >= 100 else n * 2, n + 3, n * 3 + 1, n + 11):
            if str(new) not in present:
                return answer[: m.start()] + str(new) + answer[m.end() :], "number"
    if _is_zh(answer):
        return answer + "试用期员工和外包人员不受此规定限制。", "clause"
    return answer + " Contractors and employees on probation are exempt from this rule.", "clause"


def build_app(service: DemoService) -> Any:
    """A plain ASGI app wrapped in ragwatch's middleware.

    Plain ASGI rather than Starlette on purpose: the demo must run with nothing but ragwatch's core
    dependencies installed, and two routes do not need a framework.
    """
    rw = service.rw
    metrics_app = ragwatch.metrics_asgi_app()

    async def ask(question: str) -> tuple[int, dict[str, Any]]:
        with rw.request(question):  # joins the middleware's run: question, chunks and answer reach the sample
            with rw.retrieval(top_k=3) as r:
                chunks = r.record(service.retrieve(question, top_k=3))
            with rw.generation(model="demo-extractive") as g:
                answer, lie = service.generate(question, chunks)
                g.record(answer)
            run = ragwatch.current_run()
            trace_id = run.trace_id if run is not None else None
        service.requests += 1
        if lie is not None and trace_id:
            service.falsified[trace_id] = lie
        notice = rw.notice  # a local read; the sampled answer above stays the model's own text
        shown = f"{answer}\n\n{notice}" if notice else answer
        return 200, {
            "answer": shown,
            "chunks": chunks,
            "degraded": notice is not None,
            "notice": notice,
            "trace_id": trace_id,
        }

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope.get("path", "")
        if path.startswith("/metrics"):
            await metrics_app(scope, receive, send)
            return
        if path == "/ask" and scope.get("method") == "POST":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            try:
                question = str(json.loads(body or b"{}").get("question", "")).strip()
            except (ValueError, AttributeError):
                question = ""
            status, payload = (
                (400, {"error": "POST a JSON object with a question"}) if not question else await ask(question)
            )
        elif path in ("/health", "/healthz"):
            status, payload = 200, {"ok": True, "degraded": rw.degraded}
        else:
            status, payload = 404, {"error": "not found; POST /ask or GET /metrics"}
        data = json.dumps(payload, ensure_ascii=False).encode()
        headers = [(b"content-type", b"application/json; charset=utf-8"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    return rw.middleware(app)
