"""Hostile callers against a real service: uvicorn serving a Starlette app behind ragwatch, real Redis, a
real worker. Each test is one hole an adversarial review found (issue 14) and fails on the code before it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import redis
import uvicorn
from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import ragwatch
from ragwatch.capture.asgi import PROBE_HEADER
from ragwatch.capture.probe import sign_probe
from ragwatch.mode.degrade import ModeState, Policy, window_value
from ragwatch.mode.sla import SLAEvaluator
from ragwatch.mode.watcher import ModeWatcher
from ragwatch.queue.factory import open_queue
from ragwatch.sampling.sample import Sample
from ragwatch.scoring.judges.base import Verdict
from ragwatch.scoring.worker import Worker
from tests.conftest import sample
from tests.servers import free_port

SERVICE = "hardened"


class Propagate:
    """W3C trace-context extraction, as OpenTelemetry's ASGI instrumentation does it in front of an app: the
    caller's ``traceparent`` becomes the parent of everything the request does."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        token = otel_context.attach(propagate.extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            otel_context.detach(token)


def build_app(rw: ragwatch.RagWatch, seen: list[dict[str, str]]) -> Any:
    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return [{"id": "kb-1", "text": "Annual leave is 15 days.", "score": 0.9}]

    @rw.retriever
    def retrieve_these(question: str, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return chunks  # the question is read off the arguments: without one a run is not a quality sample

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, model: str) -> dict[str, Any]:
        return {
            "model": model,
            "choices": [{"message": {"content": f"Annual leave is 15 days. ({question[-90:]})"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 8},
        }

    async def ask(request: Request) -> JSONResponse:
        seen.append(dict(request.headers))
        body = await request.json()
        question = body["question"]
        if body.get("force"):
            ragwatch.force_sample(body["force"])
        if body.get("fail"):  # after retrieving: a RAG request that failed (sampled with sample_errors)
            retrieve(question)
            raise ValueError(f"no account for {question}")
        if body.get("chunks"):
            retrieve_these(question, body["chunks"])
        else:
            retrieve(question)
        return JSONResponse({"answer": generate(question, body.get("model", "gpt-4o-mini"))})

    app = Starlette(routes=[Route("/ask", ask, methods=["POST"]), Route("/u/{rest:path}", ask, methods=["POST"])])
    return Propagate(rw.middleware(app))


class Served:
    """An ASGI app on 127.0.0.1:<free port> under uvicorn, in a background thread."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def watch(redis_url: str, spans: InMemorySpanExporter | None = None, **settings: Any) -> ragwatch.RagWatch:
    provider = TracerProvider()
    if spans is not None:
        provider.add_span_processor(SimpleSpanProcessor(spans))
    options: dict[str, Any] = {
        "registry": CollectorRegistry(),
        "tracer_provider": provider,
        "redis_url": redis_url,
        "sample_rate": 1.0,
        "degraded_mode": False,
        "flush_interval": 0.05,
        **settings,
    }
    rw = ragwatch.RagWatch(SERVICE, **options)
    rw._test_registry = options["registry"]  # type: ignore[attr-defined]
    return rw


def stream_samples(redis_url: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        return [fields[b"s"] for _, fields in client.xrange(f"ragwatch:{{{SERVICE}}}:samples")]
    finally:
        client.close()


# -- probes ------------------------------------------------------------------------------------------------


BODY = b'{"question": "q", "fail": true}'  # a failing request: an attacker's favourite thing to hide


def post(url: str, mark: str | bytes | None, body: bytes = BODY, path: str = "/ask") -> httpx.Response:
    headers: dict[str, str | bytes] = {"content-type": "application/json"}
    if mark is not None:
        headers[PROBE_HEADER] = mark
    return httpx.post(url + path, content=body, headers=headers)


def probes(rw: ragwatch.RagWatch, outcome: str) -> float:
    return sample(rw_registry(rw), "ragwatch_probe_headers_total", service=SERVICE, outcome=outcome)


def test_probe_marks_are_authenticated_counted_and_never_reach_the_app(redis_url: str) -> None:
    rw = watch(redis_url, probe_secret="k8s-secret", tracing=False, sample_errors=True)
    seen: list[dict[str, str]] = []
    with Served(build_app(rw, seen)) as served:
        signed = sign_probe("k8s-secret", "POST", "/ask", body=BODY)
        stale = sign_probe("k8s-secret", "POST", "/ask", body=BODY, now=time.time() - 3600)
        other_path = sign_probe("k8s-secret", "POST", "/other", body=BODY)
        for mark in (signed, "1", "replay", stale, other_path, sign_probe("guess", "POST", "/ask", body=BODY)):
            post(served.url, mark)
        rw.flush(5)
    rw.close(2)
    assert all(PROBE_HEADER not in headers for headers in seen)  # stripped before the app saw the request
    reg = rw_registry(rw)
    assert probes(rw, "accepted") == 1
    assert probes(rw, "ignored") == 5
    assert sample(reg, "ragwatch_sampling_decisions_total", service=SERVICE, decision="skipped", reason="probe") == 1
    assert sample(reg, "ragwatch_sampling_decisions_total", service=SERVICE, decision="sampled", reason="error") == 5
    assert len(stream_samples(redis_url)) == 5  # the five forged probes were scored like any failing request


def test_a_captured_mark_cannot_be_replayed_or_moved(redis_url: str) -> None:
    """Issue 29 item 5: one captured mark was accepted 300/300 times in 60 s with any body and query, within
    ±300 s. Now the mark binds the method, path, query and body, its nonce is spent on first use, and it is
    good for probe_max_age_seconds (60) either side. Each refused mark leaves its request sampled."""
    rw = watch(redis_url, probe_secret="k8s-secret", tracing=False, sample_errors=True)
    seen: list[dict[str, str]] = []
    with Served(build_app(rw, seen)) as served:
        mark = sign_probe("k8s-secret", "POST", "/ask", body=BODY)
        assert post(served.url, mark).status_code == 500  # the genuine probe (its request fails)
        for _ in range(5):
            post(served.url, mark)  # the same mark again, as captured
        other_body = b'{"question": "another", "fail": true}'
        post(served.url, mark.replace(mark.split(",")[1], "n=" + "0" * 32), other_body)  # a fresh nonce, unsigned
        post(served.url, sign_probe("k8s-secret", "POST", "/ask", body=BODY), other_body)  # signed for BODY
        query = sign_probe("k8s-secret", "POST", "/ask", query=b"a=1", body=BODY)
        post(served.url, query, path="/ask?a=2")  # signed for another query
        two_minutes = sign_probe("k8s-secret", "POST", "/ask", body=BODY, now=time.time() - 120)
        post(served.url, two_minutes)  # accepted by the old ±300 s window
        legacy = f"t={int(time.time())},sig={'0' * 64}"  # the version-1 format (no nonce)
        post(served.url, legacy)
        rw.flush(5)
    rw.close(2)
    assert probes(rw, "accepted") == 1
    assert probes(rw, "replayed") == 5
    assert probes(rw, "ignored") == 5
    assert len(stream_samples(redis_url)) == 10  # every refused mark's request was sampled as an error
    assert len(seen) == 11 and all(PROBE_HEADER not in h for h in seen)


def test_the_app_reads_a_checked_body_unchanged(redis_url: str) -> None:
    """To check a mark the middleware reads the body first; the app must get it whole, in one piece or many,
    and a body over probe_max_body_bytes is not hashed (not a probe) yet reaches the app intact."""
    rw = watch(redis_url, probe_secret="k8s-secret", tracing=False, probe_max_body_bytes=4096)
    bodies: list[bytes] = []

    async def echo(request: Request) -> JSONResponse:
        bodies.append(await request.body())
        return JSONResponse({"n": len(bodies[-1])})

    app = rw.middleware(Starlette(routes=[Route("/ask", echo, methods=["POST"])]))
    small = b'{"question": "' + b"x" * 1000 + b'"}'
    large = b'{"question": "' + b"y" * 100_000 + b'"}'

    def pieces(data: bytes) -> Any:
        for i in range(0, len(data), 3000):
            yield data[i : i + 3000]

    with Served(app) as served, httpx.Client() as client:
        for body in (small, large):
            mark = sign_probe("k8s-secret", "POST", "/ask", body=body)
            headers = {PROBE_HEADER: mark, "content-type": "application/json"}
            assert client.post(served.url + "/ask", content=body, headers=headers).json() == {"n": len(body)}
            mark = sign_probe("k8s-secret", "POST", "/ask", body=body)
            response = client.post(served.url + "/ask", content=pieces(body), headers={PROBE_HEADER: mark})
            assert response.json() == {"n": len(body)}  # chunked upload, read in several messages
    rw.close(2)
    assert bodies == [small, small, large, large]
    assert probes(rw, "accepted") == 2 and probes(rw, "ignored") == 2  # the large body is over the limit


def test_probe_sources_allow_list(redis_url: str) -> None:
    rw = watch(redis_url, probe_sources=("10.0.0.0/8",), tracing=False)
    with Served(build_app(rw, [])) as served:
        httpx.post(served.url + "/ask", json={"question": "q"}, headers={PROBE_HEADER: "1"})  # from 127.0.0.1
    rw.close(2)
    assert sample(rw_registry(rw), "ragwatch_probe_headers_total", service=SERVICE, outcome="ignored") == 1
    rw = watch(redis_url, probe_sources=("127.0.0.1",), tracing=False)
    with Served(build_app(rw, [])) as served:
        httpx.post(served.url + "/ask", json={"question": "q"}, headers={PROBE_HEADER: "1"})
    rw.close(2)
    assert sample(rw_registry(rw), "ragwatch_probe_headers_total", service=SERVICE, outcome="accepted") == 1


def rw_registry(rw: ragwatch.RagWatch) -> CollectorRegistry:
    return rw._test_registry  # type: ignore[attr-defined,no-any-return]


# -- sampling cannot be steered by traceparent -----------------------------------------------------------


def test_crafted_traceparents_sample_at_the_configured_rate(redis_url: str) -> None:
    """A trace id whose low 64 bits are 0 is sampled at any rate by the unkeyed (OpenTelemetry) rule; with the
    keyed hash, 300 such crafted requests must be sampled like any others: binomial(300, 0.1), whose 5-sigma
    range is 30 ± 26. Before the fix all 300 were sampled."""
    rw = watch(redis_url, sample_rate=0.1, sample_secret="deployment-key", sample_max_per_second=100_000)
    n = 300
    with Served(build_app(rw, [])) as served, httpx.Client() as client:
        for i in range(n):
            trace_id = f"{i:016x}" + "0" * 16
            client.post(
                served.url + "/ask", json={"question": "q"}, headers={"traceparent": f"00-{trace_id}-{i + 1:016x}-01"}
            )
        rw.flush(5)
    rw.close(2)
    sampled = sample(
        rw_registry(rw), "ragwatch_sampling_decisions_total", service=SERVICE, decision="sampled", reason="rate"
    )
    assert 4 <= sampled <= 56, sampled


def test_replicas_sharing_the_secret_agree_and_others_do_not() -> None:
    from ragwatch.capture.run import Run
    from ragwatch.sampling.sampler import Sampler

    a, b = Sampler(0.3, secret=b"shared"), Sampler(0.3, secret=b"shared")
    c = Sampler(0.3, secret=b"another deployment")
    runs = []
    for i in range(2000):
        run = Run("svc", "q")
        run.retrieved = []  # a RAG run (the sampler skips one without context before hashing anything)
        run.trace_id = f"{i:032x}"
        runs.append(run)
    da = [a.decide(r).sampled for r in runs]
    assert da == [b.decide(r).sampled for r in runs]
    assert da != [c.decide(r).sampled for r in runs]
    assert 500 <= sum(da) <= 700  # 0.3 of 2000 = 600, sd 20


# -- one client cannot flip degraded mode ----------------------------------------------------------------


class TopicJudge:
    """Scores context precision from the question: the attacker's off-topic questions get 0."""

    name = "topic"
    version = "1"

    def score(self, s: Sample) -> Verdict:
        return Verdict(scores={"context_precision_3": 0.0 if "off-topic" in (s.question or "") else 0.9})


def test_one_client_cannot_switch_degraded_mode_for_everyone(redis_url: str) -> None:
    """70 users send 2 questions each; one client sends 30 % of all traffic, every question off-topic. The
    uncapped window mean is 0.63 (< 0.65: degraded for everyone); capped at 5 % per client it stays 0.84."""
    rw = watch(redis_url, tracing=False, client_header="x-forwarded-for", sample_max_per_second=100_000)
    with Served(build_app(rw, [])) as served, httpx.Client() as client:
        for round_ in range(2):
            for user in range(70):
                ip = f"203.0.113.{user + 1}"
                headers = {"x-forwarded-for": f"1.2.3.4, {ip}"}  # a forged first hop, then our proxy's
                client.post(served.url + "/ask", json={"question": f"leave {round_}"}, headers=headers)
            for _ in range(30):
                headers = {"x-forwarded-for": "198.51.100.66"}
                client.post(served.url + "/ask", json={"question": "off-topic spam"}, headers=headers)
        assert rw.flush(10)
    rw.close(2)
    settings = ragwatch.settings.load_settings(service=SERVICE, sla_min_dwell_seconds=0, sla_hold_seconds=0)
    queue = open_queue(redis_url, SERVICE)
    assert Worker(queue, [TopicJudge()], concurrency=2, batch=100, block_ms=100).work(burst=True, max_seconds=60) == 200
    points = queue.window_clients("context_precision_3", 1000)
    assert len(points) == 200
    assert len({c for _, _, c in points}) == 71
    assert all(re.fullmatch(r"[0-9a-f]{12}", c) for _, _, c in points)  # hashed: no address in Redis
    policy = settings.sla_policy()
    assert policy.max_client_share == 0.05
    uncapped, _ = window_value(points, Policy(**{**_fields(policy), "max_client_share": 1.0}), time.time())
    assert uncapped is not None and uncapped < policy.threshold  # what the window said before the cap
    state = SLAEvaluator(queue, policy).tick()
    assert not state.degraded, state
    assert state is not None and queue.read_mode().degraded is False
    value, n = window_value(points, policy, time.time())
    assert value is not None and value > 0.8 and n == 150  # 140 users' scores + the attacker's 10
    queue.close()


def _fields(policy: Policy) -> dict[str, Any]:
    return {name: getattr(policy, name) for name in Policy.__dataclass_fields__}


# -- the operator override survives an empty Redis ----------------------------------------------------------


def test_override_is_reasserted_after_redis_comes_back_empty(redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    from ragwatch.guard import Guard

    queue = open_queue(redis_url, SERVICE)
    queue.set_override("on")
    watcher = ModeWatcher(queue, guard=Guard(None))
    evaluator = SLAEvaluator(queue, Policy(min_dwell_seconds=0, hold_seconds=0))
    assert watcher.refresh().override == "on" and watcher.degraded
    evaluator.tick()
    client = redis.Redis.from_url(redis_url)
    client.flushall()  # what a Redis restart without persistence leaves
    with caplog.at_level(logging.WARNING):
        assert evaluator.tick().override == "on"  # the worker noticed first
    assert queue.read_mode().override == "on"
    assert "re-asserted the operator override 'on'" in caplog.text
    client.flushall()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        watcher.refresh()
    assert watcher.degraded and queue.read_mode().override == "on"  # the service noticed too
    assert "re-asserted the operator override 'on'" in caplog.text
    queue.set_override("auto")  # an operator's explicit "auto", once seen, is not undone
    watcher.refresh()
    evaluator.tick()
    client.flushall()
    watcher.refresh()
    evaluator.tick()
    assert queue.read_mode().override == "auto"
    client.close()
    queue.close()


def test_stored_reason_is_capped_and_cleaned(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    hostile = "ok\n2026-01-01 CRITICAL forged log line\x1b[31m" + "A" * 100_000
    client.hset(f"ragwatch:{{{SERVICE}}}:mode", mapping={"degraded": "1", "reason": hostile, "version": "3"})
    client.close()
    queue = open_queue(redis_url, SERVICE)
    reason = queue.read_mode().reason
    queue.close()
    assert len(reason) <= 300
    assert "\n" not in reason and "\x1b" not in reason
    assert reason.startswith("ok?2026-01-01")


def test_mode_state_from_fields_sanitizes() -> None:
    state = ModeState.from_fields({"reason": "\u202eevil\r\n" * 100})
    assert state.reason.isprintable() and len(state.reason) <= 300


# -- labels and logs stay bounded ------------------------------------------------------------------------


def test_huge_model_ids_do_not_blow_up_metrics_or_logs(redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    rw = watch(redis_url, tracing=False)
    with caplog.at_level(logging.WARNING), Served(build_app(rw, [])) as served, httpx.Client() as client:
        for i in range(80):
            model = f"m{i}-" + "x" * 100_000 + "\n"
            client.post(served.url + "/ask", json={"question": "q", "model": model})
        rw.flush(5)
    rw.close(2)
    page = generate_latest(rw_registry(rw))
    assert len(page) < 1_000_000, len(page)  # 64 models of at most 128 characters; was 199 MB with 100 KB ids
    labels = re.findall(rb'model="([^"]*)"', page)
    assert labels and max(len(v) for v in labels) <= 130 * 3  # 128 characters (UTF-8 "…" is 3 bytes)
    assert all(len(record.getMessage()) < 2000 for record in caplog.records)
    assert all(len(s) < 100_000 for s in stream_samples(redis_url))


# -- nothing of a planted secret leaves the process ------------------------------------------------------

PLANTED = {
    "email": "zhang.san.planted@example.com",
    "api_key": "sk-proj-PLANTEDplantedPLANTED0123",
    "aws": "AKIAPLANTED0EXAMPLE7",
    "phone_at_the_cut": "13987654321",
    "ssn": "219-09-9999",
    "password": "hunter2planted",
    "owner": "lisi.planted@example.org",
    "error": "wangwu.planted@example.net",
    "route_card": "4111111111111111",
}
FRAGMENTS = [
    "planted",
    "PLANTED",
    "1398765432",  # what survived when the cut came before redaction
    "219-09-9999",
    "AKIA",
    "sk-proj",
    "4111111111111111",
]


class PoorJudge:
    """Scores every sample under the thresholds, so the report lists each one among the worst samples."""

    name = "poor"
    version = "1"

    def score(self, s: Sample) -> Verdict:
        return Verdict(scores={"faithfulness": 0.1, "context_precision_3": 0.1})


def everything_in_redis(url: str) -> bytes:
    client = redis.Redis.from_url(url)
    dump = []
    for key in client.scan_iter("*"):
        kind = client.type(key)
        dump.append(key)
        if kind == b"stream":
            dump += [repr(entry).encode() for entry in client.xrange(key)]
        elif kind == b"hash":
            dump.append(repr(client.hgetall(key)).encode())
        elif kind == b"list":
            dump += client.lrange(key, 0, -1)
        elif kind == b"string":
            dump.append(client.get(key) or b"")
        elif kind == b"set":
            dump += list(client.smembers(key))
        elif kind == b"zset":
            dump += [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
    client.close()
    return b"\n".join(dump)


def test_planted_secrets_survive_nowhere(
    redis_url: str, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture, tmp_path: Any, capsys: Any
) -> None:
    from ragwatch.cli import main as cli

    rw = watch(redis_url, spans, capture_chunk_text=True, max_question_chars=2000, sample_errors=True)
    question = "x" * 1990 + PLANTED["phone_at_the_cut"] + f" mail {PLANTED['email']} key {PLANTED['api_key']}"
    chunks = [
        {
            "id": f"profile-{PLANTED['email']}",
            "text": f"aws {PLANTED['aws']} password: {PLANTED['password']}",
            "score": 0.9,
            "metadata": {f"owner {PLANTED['owner']}": f"ssn {PLANTED['ssn']}", "source": "crm"},
        }
    ]
    with caplog.at_level(logging.DEBUG, logger="ragwatch"), Served(build_app(rw, [])) as served:
        with httpx.Client() as client:
            ok = client.post(
                served.url + f"/u/{PLANTED['owner']}/{PLANTED['route_card']}",
                json={"question": question, "chunks": chunks, "force": f"user {PLANTED['email']} complained"},
            )
            assert ok.status_code == 200
            failed = client.post(served.url + "/ask", json={"question": f"login {PLANTED['error']}", "fail": True})
            assert failed.status_code == 500
        assert rw.flush(5)
        page = generate_latest(rw_registry(rw)).decode()
    rw.close(2)
    before_scoring = everything_in_redis(redis_url).decode("utf-8", "replace")  # the samples, before the
    # worker deletes the scored entries
    queue = open_queue(redis_url, SERVICE)
    assert Worker(queue, [PoorJudge()], block_ms=100).work(burst=True, max_seconds=30) == 2
    queue.close()
    assert cli(["report", "--redis-url", redis_url, "--service", SERVICE, "--no-state"]) == 0
    report = capsys.readouterr().out
    plain = report.replace("\\", "")  # the report escapes Markdown: "\\[email\\]"
    assert "[email]" in plain and "[api_key]" in plain, report  # the report did list the (redacted) samples

    stored = before_scoring + "\n" + everything_in_redis(redis_url).decode("utf-8", "replace")
    assert "[email]" in stored and "[api_key]" in stored and "[password]" in stored  # the samples are there
    exported = [
        repr(dict(span.attributes or {})) + repr([(e.name, dict(e.attributes or {})) for e in span.events])
        for span in spans.get_finished_spans()
    ]
    assert any("exception" in e for e in exported)  # the failure was recorded on a span
    logs = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("ragwatch"))
    for where, text in {
        "redis": stored,
        "spans": "\n".join(exported),
        "logs": logs,
        "report": plain,
        "metrics": page,
    }.items():
        for fragment in FRAGMENTS:
            assert fragment not in text, (where, fragment)


# -- one byte cannot hide a request -------------------------------------------------------------------------


def test_a_mark_that_breaks_the_check_leaves_the_request_watched(redis_url: str) -> None:
    """Issue 29 item 1, in the README's FastAPI shape: ``t=\\xb2`` (superscript two, one Latin-1 byte) passed
    ``str.isdigit()`` and broke ``int()``; the request then ran unwatched: 0/20 sampled, 0/20 request metrics,
    its 5xx invisible. A mark that cannot be checked is no mark: every request is watched, sampled, counted."""
    from fastapi import FastAPI, HTTPException

    rw = watch(redis_url, probe_secret="k8s-secret", tracing=False, sample_errors=True)

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return [{"id": "kb-1", "text": "Annual leave is 15 days.", "score": 0.9}]

    @rw.llm(model="gpt-4o-mini")
    async def generate(question: str, chunks: Any) -> str:
        if "fail" in question:
            raise RuntimeError("the model is down")
        return "Annual leave is 15 days."

    app = FastAPI()
    app.add_middleware(ragwatch.RagwatchMiddleware, watch=rw)
    app.mount("/metrics", ragwatch.metrics_asgi_app(rw_registry(rw)))

    @app.post("/ask")
    async def ask(body: dict[str, str]) -> dict[str, str]:
        try:
            return {"answer": await generate(body["question"], retrieve(body["question"]))}
        except RuntimeError:
            raise HTTPException(503, "try again") from None

    marks = [b"t=\xb2,n=" + b"a" * 32 + b",sig=" + b"0" * 64, b"t=\xb2,sig=" + b"0" * 64]
    with Served(app) as served, httpx.Client() as client:
        for i in range(20):
            question = f"leave {i}" if i % 2 else f"fail {i}"
            headers = {PROBE_HEADER: marks[i % 2]}
            response = client.post(served.url + "/ask", json={"question": question}, headers=headers)
            assert response.status_code == (200 if i % 2 else 503)
        rw.flush(5)
        exposition = client.get(served.url + "/metrics").text
    rw.close(2)
    reg = rw_registry(rw)
    assert len(stream_samples(redis_url)) == 20
    assert probes(rw, "ignored") == 20 and probes(rw, "accepted") == 0
    for outcome in ("ok", "error"):
        labels = {"service": SERVICE, "stage": "request", "outcome": outcome}
        assert sample(reg, "ragwatch_stage_duration_seconds_count", **labels) == 10, outcome
    assert sample(reg, "ragwatch_internal_errors_total", component="asgi") == 0
    assert 'ragwatch_probe_headers_total{outcome="ignored",service="hardened"} 20.0' in exposition
