"""The replay prober against a real RAG service on loopback (tests/rag_app.py), real Pushgateway stand-in,
real /metrics scrapes — no mocked HTTP."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from ragwatch.capture.asgi import PROBE_HEADER
from ragwatch.cli import main
from ragwatch.errors import ConfigError
from ragwatch.metrics.catalog import METRIC_NAMES
from ragwatch.queue.factory import open_queue
from ragwatch.queue.memory import MemoryQueue
from ragwatch.replay.client import ProbeResult
from ragwatch.replay.mapping import extract
from ragwatch.replay.options import ReplayOptions, parse_duration
from ragwatch.replay.prober import run
from ragwatch.replay.source import GoldenSetError, Question, load_golden, similarity, tokens, traffic_questions
from ragwatch.replay.summary import summarize
from ragwatch.scoring.worker import Worker
from tests.conftest import sample, wait_for
from tests.rag_app import DOCS, PROBE_SECRET, RagApp, retrieve
from tests.servers import free_port

HEALTHY = [
    {
        "question": "How do I reset my password?",
        "relevant_ids": ["pw-reset"],
        "reference_answer": "To reset your password use the forgot password link on the sign in page.",
    },
    {"question": "When are invoices sent by email?", "relevant_ids": ["billing"]},
    {"question": "refund within thirty days", "relevant_ids": ["refund"]},
    {"question": "How do I revoke API keys?", "relevant_ids": ["api-keys"]},
]
FAILING = [
    {"question": "fail: please", "relevant_ids": ["x"]},
    {"question": "hang: forever", "relevant_ids": ["x"]},
    {"question": "bad: body", "relevant_ids": ["x"]},
    {"question": "nochunks: password", "relevant_ids": ["x"]},
    {"question": "teapot: hello", "relevant_ids": ["x"]},
]


def write_golden(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def app() -> Iterator[RagApp]:
    MemoryQueue.reset_all()
    with RagApp() as served:
        yield served
    MemoryQueue.reset_all()


def options(app: RagApp, golden: str | None = None, **kw: Any) -> ReplayOptions:
    kw.setdefault("probe_secret", PROBE_SECRET)
    return ReplayOptions(url=app.url + "/ask", service="replaytest", golden=golden, progress=False, **kw)


def quiet_run(opts: ReplayOptions, capsys: pytest.CaptureFixture[str]) -> Any:
    report = run(opts)
    capsys.readouterr()
    return report


# ---------------------------------------------------------------------------------------------- pure parts


def test_golden_set_errors_name_the_line(tmp_path: Path) -> None:
    good = json.dumps(HEALTHY[0])
    cases = {
        "not json": "line 2: invalid JSON",
        "[1, 2]": "line 2: expected a JSON object",
        '{"relevant_ids": []}': "line 2: 'question' must be a non-empty string",
        '{"question": "q"}': "line 2: 'relevant_ids' is required",
        '{"question": "q", "relevant_ids": "a"}': "line 2: 'relevant_ids' must be a list",
        '{"question": "q", "relevant_ids": [], "reference_answer": 3}': "line 2: 'reference_answer'",
    }
    for bad, message in cases.items():
        path = tmp_path / "g.jsonl"
        path.write_text(f"{good}\n{bad}\n")
        with pytest.raises(GoldenSetError, match=message):
            load_golden(path)
    (tmp_path / "ok.jsonl").write_text(f"# comment\n\n{good}\n")
    [q] = load_golden(tmp_path / "ok.jsonl")
    assert (q.id, q.relevant_ids, q.source) == ("line-3", ["pw-reset"], "golden")
    assert issubclass(GoldenSetError, ConfigError)


def test_cli_exits_2_on_a_bad_golden_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text('{"question": "q", "relevant_ids": ["a"]}\n{"question": ""}\n')
    assert main(["replay", "--url", "http://127.0.0.1:9/ask", "--golden", str(path)]) == 2
    assert "line 2" in capsys.readouterr().err


def test_response_paths_and_durations() -> None:
    data = {"answer": "a", "chunks": [{"id": "A"}, {"id": "B"}], "data": {"items": [[1, 2], [3]]}}
    assert extract(data, "answer") == "a"
    assert extract(data, "chunks[].id") == ["A", "B"]
    assert extract(data, "chunks[1].id") == "B"
    assert extract(data, "data.items[][]") == [1, 2, 3]
    assert extract({"chunks": []}, "chunks[].id") == []
    assert (parse_duration("5m"), parse_duration("0.5s"), parse_duration("250ms"), parse_duration("2")) == (
        300,
        0.5,
        0.25,
        2,
    )
    with pytest.raises(ConfigError):
        parse_duration("soon")


def test_similarity_is_token_jaccard_with_cjk_bigrams() -> None:
    assert tokens("Reset the Password!") == {"reset", "the", "password"}
    assert tokens("重置密码") == {"重置", "置密", "密码"}
    assert similarity("a b c", "b c d") == pytest.approx(2 / 4)
    # {重置,置密,密码} vs {重置,置账,账号,号密,密码}: 2 shared of 6 distinct
    assert similarity("重置密码", "重置账号密码") == pytest.approx(2 / 6)
    assert similarity("", "") == 1.0
    assert similarity("x", "") == 0.0


def test_golden_metrics_match_hand_computed_values() -> None:
    """K=3. q1: retrieved [A,B,C], relevant {B} → hit, P=1/3, R=1, RR=1/2.
    q2: retrieved [D,E], relevant {A,F} → miss, 0 everywhere. q3: retrieved [A,B,C,D], relevant {A,D} → hit,
    P@3=1/3 (D is 4th), R@3=1/2, RR=1. q4 failed (timeout): counted by availability, not retrieval."""
    golden = [
        Question("q1", "golden", relevant_ids=["B"], reference_answer="the cat sat"),
        Question("q2", "golden", relevant_ids=["A", "F"]),
        Question("q3", "golden", relevant_ids=["A", "D"]),
        Question("q4", "golden", relevant_ids=["A"]),
    ]
    results = [
        ProbeResult(golden[0], "ok", 0.1, answer="the cat ran", chunk_ids=["A", "B", "C"]),
        ProbeResult(golden[1], "ok", 0.2, answer="x", chunk_ids=["D", "E"]),
        ProbeResult(golden[2], "ok", 0.3, answer="y", chunk_ids=["A", "B", "C", "D"]),
        ProbeResult(golden[3], "timeout"),
    ]
    s = summarize(ReplayOptions(url="http://x", golden="g", k=3, min_hit_rate=0.7), results, 0.0, 1.0)
    assert s.golden_answered == 3
    assert s.retrieval == pytest.approx(
        {
            "hit_rate": 2 / 3,
            "precision": (1 / 3 + 0 + 1 / 3) / 3,
            "recall": (1 + 0 + 1 / 2) / 3,
            "mrr": (1 / 2 + 0 + 1) / 3,
        }
    )
    assert s.availability == 0.75 and s.errors["timeout"] == 1
    assert s.drift["reference"] == pytest.approx(1 - 2 / 4)  # {the,cat,sat} vs {the,cat,ran}
    assert s.latency["p50"] == pytest.approx(0.2) and s.latency["count"] == 3
    assert not s.passed and s.failures == ["hit rate 0.667 < 0.7"]


def test_replay_metric_names_are_registered() -> None:
    assert {"ragwatch_replay_requests_total", "ragwatch_replay_availability"} <= METRIC_NAMES


# ------------------------------------------------------------------------------------------ against the app


def test_healthy_run(app: RagApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = write_golden(tmp_path / "g.jsonl", HEALTHY)
    report = quiet_run(options(app, golden, k=3), capsys)
    [s] = report.runs
    assert (s.requests, s.ok, s.availability, s.passed) == (4, 4, 1.0, True)
    assert not any(s.errors.values())
    # every healthy question's top chunk is its relevant document (the lexical retriever, computed directly)
    assert all(retrieve(row["question"])[0]["id"] == row["relevant_ids"][0] for row in HEALTHY)
    assert s.retrieval is not None
    assert s.retrieval["hit_rate"] == 1.0 and s.retrieval["mrr"] == 1.0 and s.retrieval["recall"] == 1.0
    expected_p = sum(1 / 3 for _ in HEALTHY) / len(HEALTHY)  # one relevant id per question, K=3
    assert s.retrieval["precision"] == pytest.approx(expected_p)
    assert s.drift["reference"] == 0.0  # the app answers with the document text, which is the reference
    assert s.latency["count"] == 4 and 0 < s.latency["p50"] <= s.latency["p99"]
    assert s.ttft["count"] == 0  # JSON responses: no TTFT


def test_mixed_run_counts_each_failure_kind(app: RagApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = write_golden(tmp_path / "g.jsonl", HEALTHY + FAILING)
    started = time.monotonic()
    [s] = quiet_run(options(app, golden, timeout=0.5, concurrency=9), capsys).runs
    assert time.monotonic() - started < 2.5  # the hanging request was cut at the timeout
    assert s.requests == 9 and s.ok == 4
    assert s.availability == pytest.approx(4 / 9)
    assert s.errors == {
        "timeout": 1,
        "connect": 0,
        "transport": 0,
        "http_5xx": 1,
        "http_4xx": 1,
        "bad_json": 1,
        "missing_field": 1,
    }
    assert s.golden_answered == 4 and s.retrieval is not None and s.retrieval["hit_rate"] == 1.0
    assert {e["outcome"] for e in s.examples} == {"timeout", "http_5xx", "http_4xx", "bad_json", "missing_field"}


def test_connection_refused_is_connect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = write_golden(tmp_path / "g.jsonl", HEALTHY[:2])
    opts = ReplayOptions(url=f"http://127.0.0.1:{free_port()}/ask", golden=golden, progress=False)
    [s] = quiet_run(opts, capsys).runs
    assert s.errors["connect"] == 2 and s.availability == 0.0 and s.retrieval is None


def test_retries_are_off_by_default_and_counted_when_on(app: RagApp, tmp_path: Path) -> None:
    import asyncio

    from ragwatch.replay.client import probe_all

    q = [Question("fail: x", "golden", relevant_ids=["x"])]
    [once] = asyncio.run(probe_all(options(app), q))
    [thrice] = asyncio.run(probe_all(options(app, retries=2), q))
    assert (once.attempts, thrice.attempts, thrice.outcome) == (1, 3, "http_5xx")


def test_sse_stream_measures_ttft(app: RagApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = write_golden(tmp_path / "g.jsonl", HEALTHY)
    opts = ReplayOptions(url=app.url + "/ask/stream", golden=golden, progress=False, k=3, concurrency=4)
    report = run(opts)
    capsys.readouterr()
    [s] = report.runs
    assert s.ok == 4 and s.ttft["count"] == 4
    assert 0 < s.ttft["p50"] < s.latency["p50"]
    assert s.retrieval is not None and s.retrieval["hit_rate"] == 1.0  # chunks came in the first event
    assert s.drift["reference"] == 0.0  # deltas re-assembled into the same answer


def test_probe_header_keeps_probes_out_of_samples(app: RagApp, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    golden = write_golden(tmp_path / "g.jsonl", HEALTHY)
    quiet_run(options(app, golden), capsys)
    reg = app.registry

    def decisions(decision: str, reason: str) -> float:
        return sample(reg, "ragwatch_sampling_decisions_total", service="replaytest", decision=decision, reason=reason)

    # the decision is counted once the reply is sent: await it rather than read it right after the reply
    wait_for(lambda: decisions("skipped", "probe") >= 4, 10)
    assert decisions("skipped", "probe") == 4
    assert decisions("sampled", "rate") == 0
    # the same question without the header is a user request: sampled at rate 1; so is one whose probe mark
    # anybody could have written (unsigned), and one a prober without the right secret signed
    httpx.post(app.url + "/ask", json={"question": HEALTHY[0]["question"]}, timeout=5)
    httpx.post(app.url + "/ask", json={"question": "x"}, headers={PROBE_HEADER: "1"}, timeout=5)
    quiet_run(options(app, golden, probe_secret="not-the-secret"), capsys)
    wait_for(lambda: decisions("sampled", "rate") >= 6, 10)
    assert decisions("sampled", "rate") == 6
    assert decisions("skipped", "probe") == 4
    queue = open_queue("memory://replaytest", "replaytest")
    deadline = time.monotonic() + 5
    while queue.stats().length < 6 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    assert queue.stats().length == 6  # only the signed probes stayed out of the sample stream


def test_traffic_questions_replayed_with_historical_drift(
    app: RagApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """User traffic → samples → a real worker stores score records → replay reads them back."""
    questions = ["How do I reset my password?", "export data as CSV", "How do I reset my password?"]
    for q in questions:
        httpx.post(app.url + "/ask", json={"question": q}, timeout=5)
    queue = open_queue("memory://replaytest", "replaytest")
    deadline = time.monotonic() + 5
    while queue.stats().length < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    from ragwatch.scoring.judges.trivial import TrivialJudge

    assert Worker(queue, [TrivialJudge()], block_ms=50).work(burst=True, max_seconds=10) == 3
    picked = traffic_questions(queue.recent_scores(10), 10)
    assert sorted(q.text for q in picked) == sorted(set(questions))  # distinct
    assert all(q.historical_answer in DOCS.values() and q.historical_chunk_ids for q in picked)

    opts = ReplayOptions(
        url=app.url + "/ask",
        service="replaytest",
        traffic=5,
        redis_url="memory://replaytest",
        progress=False,
        output_format="json",
    )
    [s] = run(opts).runs
    out = json.loads(capsys.readouterr().out)
    assert s.sources == {"traffic": 2} and out["sources"] == {"traffic": 2}
    assert s.drift["historical"] == 0.0 and s.drift_counts["historical"] == 2  # same service, same answers
    assert s.retrieval is None  # traffic has no ground truth


def test_exit_code_follows_floors(app: RagApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    healthy = write_golden(tmp_path / "h.jsonl", HEALTHY)
    mixed = write_golden(tmp_path / "m.jsonl", HEALTHY + FAILING[:1])
    # nothing here hangs: a generous timeout, so a pause of the loaded test process (the app is served from a
    # thread of it) is not read as four timeouts (seen once in CI with 0.5 s)
    base = ["replay", "--url", app.url + "/ask", "--no-progress", "--timeout", "5"]
    assert main([*base, "--golden", healthy, "--min-availability", "0.99", "--min-hit-rate", "0.8"]) == 0
    assert main([*base, "--golden", mixed, "--min-availability", "0.99"]) == 1
    assert main([*base, "--golden", mixed, "--min-availability", "0.8"]) == 0  # 4/5
    assert main([*base, "--golden", healthy, "--k", "1", "--min-hit-rate", "1.0"]) == 0
    misses = write_golden(tmp_path / "x.jsonl", [{"question": "reset password", "relevant_ids": ["sso"]}])
    assert main([*base, "--golden", misses, "--min-hit-rate", "0.8"]) == 1
    assert "floor not met: hit rate 0.000 < 0.8" in capsys.readouterr().out


def test_json_summary_shape(app: RagApp, tmp_path: Path) -> None:
    golden = write_golden(tmp_path / "g.jsonl", HEALTHY + FAILING[:1])
    out = tmp_path / "summary.json"
    rc = main(["replay", "--url", app.url + "/ask", "--golden", golden, "--json", "--output", str(out), "--k", "3"])
    assert rc == 0
    data = json.loads(out.read_text())
    assert set(data) >= {
        "service",
        "requests",
        "ok",
        "availability",
        "errors",
        "latency",
        "ttft",
        "k",
        "retrieval",
        "drift",
        "passed",
        "failures",
        "sources",
        "examples",
    }
    assert data["requests"] == 5 and data["ok"] == 4 and data["availability"] == 0.8
    assert set(data["latency"]) == {"p50", "p95", "p99", "mean", "count"}
    assert set(data["retrieval"]) == {"hit_rate", "recall", "precision", "mrr"}
    assert data["errors"]["http_5xx"] == 1 and data["k"] == 3


class _Recorder(BaseHTTPRequestHandler):
    bodies: ClassVar[list[tuple[str, str, bytes]]] = []

    def _record(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.bodies.append((self.command, self.path, self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    do_PUT = do_POST = _record

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_pushgateway_receives_replay_metrics(app: RagApp, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _Recorder.bodies = []
    gateway = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=gateway.serve_forever, daemon=True)
    thread.start()
    try:
        golden = write_golden(tmp_path / "g.jsonl", HEALTHY)
        url = f"http://127.0.0.1:{gateway.server_port}"
        assert main(["replay", "--url", app.url + "/ask", "--golden", golden, "--pushgateway", url]) == 0
    finally:
        gateway.shutdown()
        gateway.server_close()
    capsys.readouterr()
    [(method, path, body)] = _Recorder.bodies
    assert method == "PUT" and path == "/metrics/job/ragwatch_replay/service/default"
    text = body.decode()
    assert 'ragwatch_replay_requests_total{outcome="ok",service="default"} 4.0' in text
    assert 'ragwatch_replay_availability{service="default"} 1.0' in text
    assert 'ragwatch_replay_retrieval{k="5",metric="hit_rate",service="default"} 1.0' in text
    assert "ragwatch_stage_duration_seconds" not in text  # only the prober's own series are pushed


def test_schedule_mode_serves_metrics(app: RagApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = write_golden(tmp_path / "g.jsonl", HEALTHY)
    port = free_port()
    argv = ["replay", "--url", app.url + "/ask", "--golden", golden, "--every", "0.5s", "--max-runs", "2"]
    argv += ["--metrics-port", str(port), "--metrics-addr", "127.0.0.1", "--json"]
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(main(argv)))
    started = time.monotonic()
    thread.start()
    scraped = ""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and 'ragwatch_replay_runs_total{result="pass"' not in scraped:
        try:
            scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1).text
        except httpx.TransportError:
            time.sleep(0.02)
    thread.join(timeout=15)
    assert result == [0]
    assert time.monotonic() - started >= 0.5  # the second run waited for its slot
    assert 'ragwatch_replay_availability{service="default"} 1.0' in scraped
    assert "ragwatch_replay_duration_seconds_bucket" in scraped
    runs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(runs) == 2 and all(r["passed"] for r in runs)
    with pytest.raises(httpx.TransportError):  # the server stops with the prober
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1)


def test_progress_bar_path_runs(app: RagApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """progress=True forces the rich bar (normally only when stderr is a terminal); it must not disturb the run."""
    pytest.importorskip("rich")
    golden = write_golden(tmp_path / "g.jsonl", HEALTHY)
    opts = ReplayOptions(url=app.url + "/ask", golden=golden, progress=True)
    [s] = run(opts).runs
    assert s.ok == 4
    assert "ragwatch replay" in capsys.readouterr().out


def test_scheduled_prober_stops_on_sigterm(tmp_path: Path) -> None:
    import signal
    import subprocess

    golden = tmp_path / "golden.jsonl"
    golden.write_text('{"question": "q", "relevant_ids": ["a"]}\n')
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragwatch",
            "replay",
            "--url",
            f"http://127.0.0.1:{free_port()}/ask",
            "--golden",
            str(golden),
            "--every",
            "0.2s",
            "--timeout",
            "0.2",
            "--json",
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # The first run's JSON line means the signal handlers are in place (they are installed before the first
        # run); a fixed sleep raced the interpreter's start-up on a loaded machine (1.2-2.9 s at load 9).
        assert proc.stdout is not None and proc.stdout.readline().startswith(b"{")
        time.sleep(0.5)
        assert proc.poll() is None  # still probing on its schedule
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err  # stopped between runs, not killed by the signal
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
