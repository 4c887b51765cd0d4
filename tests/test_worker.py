"""From a live request to a scored sample: producer, queue, worker — on the memory backend and real Redis."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import httpx
import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.metrics.catalog import WorkerMetrics, families
from ragwatch.queue.contract import Queue
from ragwatch.queue.factory import open_queue
from ragwatch.queue.keys import Keys
from ragwatch.sampling.sample import Sample, SampleChunk, decode_sample
from ragwatch.scoring.judges import TrivialJudge
from ragwatch.scoring.judges.base import Verdict
from ragwatch.scoring.worker import Worker
from tests.conftest import hotel_pipeline, wait_for
from tests.conftest import sample as metric
from tests.servers import RedisServer, free_port, wait_ready

ROOT = Path(__file__).resolve().parent.parent
CHUNKS = [
    {"id": "exp-1", "text": "Hotels are reimbursed up to 600 CNY per night.", "score": 0.9},
    {"id": "exp-2", "text": "Taxi receipts within 30 days.", "score": 0.4},
]


def one_chunk() -> list[SampleChunk]:
    """What a hand-built sample needs to be a quality sample at all (the worker skips one without context)."""
    return [SampleChunk(id="c1", rank=0, text="a")]


def service_app(url: str, registry: CollectorRegistry, **settings: Any) -> tuple[ragwatch.RagWatch, Any]:
    options = {"sample_rate": 1.0, "sample_max_per_second": 1e6, "tracing": False, "flush_interval": 0.02}
    options["scoring"] = "off"  # these tests run their own worker against the queue
    rw = ragwatch.RagWatch("kb", registry=registry, redis_url=url, **{**options, **settings})

    return rw, hotel_pipeline(rw, CHUNKS)


def make_worker(
    queue: Queue, judges: list[Any] | None = None, registry: CollectorRegistry | None = None, **options: Any
) -> Worker:
    defaults = {"block_ms": 50, "claim_idle_ms": 50, "max_deliveries": 3, "concurrency": 4, "batch": 16}
    metrics = families(WorkerMetrics, registry) if registry is not None else None
    return Worker(queue, judges or [TrivialJudge()], metrics=metrics, **{**defaults, **options})


@pytest.fixture(params=["memory", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://roundtrip"
    return str(request.getfixturevalue("redis_url"))


def test_round_trip_exactly_once(url: str, registry: CollectorRegistry) -> None:
    rw, answer = service_app(url, registry)
    for i in range(60):
        answer(f"question {i}: hotel limit?")
    assert rw.flush(10)
    queue = open_queue(url, "kb")
    worker = make_worker(queue, registry=registry)
    assert worker.work(burst=True, max_seconds=30) == 60
    assert queue.totals()["answered"] == (60, 60.0)
    records = [orjson.loads(r) for r in queue.recent_scores(100)]
    assert len(records) == 60
    assert {r["question"] for r in records} == {f"question {i}: hotel limit?" for i in range(60)}
    assert records[0]["judges"] == [{"name": "trivial", "version": "2"}]
    assert records[0]["chunk_ids"] == ["exp-1", "exp-2"]
    assert metric(registry, "ragwatch_worker_entries_total", service="kb", outcome="scored") == 60
    assert metric(registry, "ragwatch_samples_sent_total", service="kb") == 60
    assert metric(registry, "ragwatch_sampling_decisions_total", service="kb", decision="sampled", reason="rate") == 60

    # A redelivered sample (same sample id) is acknowledged but never counted twice.
    entries = [
        orjson.dumps(decode_sample(orjson.dumps({**r, "chunks": [{"id": "exp-1", "rank": 0}]}))) for r in records[:10]
    ]
    queue.add(entries)
    assert make_worker(queue, registry=registry).work(burst=True, max_seconds=30) == 10
    assert queue.totals()["answered"] == (60, 60.0)
    assert metric(registry, "ragwatch_worker_entries_total", service="kb", outcome="duplicate") == 10
    assert queue.stats().pending == 0
    rw.close()


def test_sample_content_is_redacted_and_bounded(url: str, registry: CollectorRegistry) -> None:
    rw, _ = service_app(url, registry, max_answer_chars=1000, max_chunk_chars=50)

    class Weird:
        pass

    with rw.request("email me at zhang.san@example.com, phone 13812345678") as req:
        with rw.retrieval() as r:
            r.record([{"id": "c1", "text": "x" * 500, "metadata": {"obj": Weird(), "n": 3, "big": 10**30}}])
        with rw.generation(model="gpt-4o-mini") as g:
            g.record("A" * 10_000_000 + "\udcff")  # 10 MB and a lone surrogate (invalid UTF-8)
    assert req.run is not None
    assert rw.flush(10)
    queue = open_queue(url, "kb")
    queue.ensure_group()
    (entry,) = queue.read("t", 10, 100)
    assert entry.payload is not None and len(entry.payload) < 10_000
    sample = decode_sample(entry.payload)
    assert sample.question == "email me at [email], phone [phone]"
    assert sample.answer is not None and len(sample.answer) == 1000
    assert sample.truncated and sample.chunks[0].truncated
    assert sample.chunks[0].text == "x" * 50
    assert sample.chunks[0].metadata == {"n": 3}  # non-JSON values dropped, never a crash
    rw.close()


def test_hashes_instead_of_text(registry: CollectorRegistry) -> None:
    rw, answer = service_app("memory://hashes", registry, store_text=False)
    answer("a private question")
    assert rw.flush(5)
    queue = open_queue("memory://hashes", "kb")
    queue.ensure_group()
    sample = decode_sample(queue.read("t", 1, 100)[0].payload or b"")
    assert sample.question is None and sample.question_sha256 is not None and len(sample.question_sha256) == 64
    assert all(c.text is None and c.text_sha256 for c in sample.chunks)


def test_malformed_entries_are_dead_lettered_and_the_worker_goes_on(redis_url: str) -> None:
    queue = open_queue(redis_url, "kb")
    client = redis.Redis.from_url(redis_url)
    keys = Keys("kb")
    good = Sample(sample_id="good", service="kb", question="q", answer="a", chunks=one_chunk(), created_at=time.time())
    client.xadd(keys.samples, {"wrong-field": b"x"})
    client.xadd(keys.samples, {"s": b"{not json"})
    client.xadd(keys.samples, {"s": orjson.dumps({"sample_id": 5, "service": "kb"})})
    client.xadd(keys.samples, {"s": orjson.dumps({"sample_id": "x", "service": "kb", "chunks": [{"id": 1}]})})
    client.xadd(keys.samples, {"s": b"\xff\xfe not utf-8"})
    queue.add([orjson.dumps(good)])
    registry = CollectorRegistry()
    worker = make_worker(queue, registry=registry)
    assert worker.work(burst=True, max_seconds=30) == 6
    assert queue.totals()["answered"] == (1, 1.0)
    assert queue.stats().dead == 5
    assert all(d["error"].startswith("malformed") for d in queue.dead_letters(10))
    assert metric(registry, "ragwatch_worker_entries_total", service="kb", outcome="malformed") == 5
    assert queue.stats().pending == 0


class PoisonJudge:
    name = "poison"
    version = "1"

    def __init__(self) -> None:
        self.calls = 0

    def score(self, sample: Sample) -> Verdict:
        self.calls += 1
        if sample.question == "poison":
            raise RuntimeError("judge cannot handle this")
        return Verdict({"ok": 1.0})


def test_poison_sample_is_retried_then_dead_lettered(url: str) -> None:
    queue = open_queue(url, "kb")
    samples = [
        Sample(sample_id=f"s{i}", service="kb", question=q, answer="a", chunks=one_chunk(), created_at=0.0)
        for i, q in enumerate(["fine", "poison", "fine too"])
    ]
    queue.add([orjson.dumps(s) for s in samples])
    judge = PoisonJudge()
    registry = CollectorRegistry()
    make_worker(queue, [judge], registry=registry, max_deliveries=3).work(burst=True, max_seconds=30)
    assert queue.totals()["ok"] == (2, 2.0)
    (dead,) = queue.dead_letters(10)
    assert "RuntimeError: judge cannot handle this" in dead["error"]
    assert dead["deliveries"] == 3
    assert metric(registry, "ragwatch_worker_entries_total", service="kb", outcome="retry") == 2
    assert queue.stats().pending == 0


def test_scores_outside_0_1_are_rejected(url: str) -> None:
    class Broken:
        name, version = "broken", "1"

        def score(self, sample: Sample) -> Verdict:
            return Verdict({"x": 1.5})

    queue = open_queue(url, "kb")
    queue.add(
        [orjson.dumps(Sample(sample_id="s", service="kb", question="q", answer="a", chunks=one_chunk(), created_at=0))]
    )
    make_worker(queue, [Broken()], max_deliveries=1).work(burst=True, max_seconds=30)
    assert queue.totals() == {}
    assert "outside 0..1" in queue.dead_letters(1)[0]["error"]


SLOW_WORKER = textwrap.dedent(
    """
    import sys, time
    from ragwatch.scoring.judges.trivial import TrivialJudge
    from ragwatch.queue.factory import open_queue
    from ragwatch.scoring.worker import Worker

    class Slow(TrivialJudge):
        def score(self, sample):
            time.sleep(0.05)
            return super().score(sample)

    queue = open_queue(sys.argv[1], "kb")
    Worker(queue, [Slow()], name="doomed", concurrency=1, batch=20, block_ms=100).work()
    """
)


def test_worker_killed_mid_batch_loses_nothing_and_counts_nothing_twice(redis_url: str) -> None:
    queue = open_queue(redis_url, "kb")
    n = 200
    queue.add(
        [
            orjson.dumps(
                Sample(
                    sample_id=f"s{i}", service="kb", question=f"q{i}", answer="a b", chunks=one_chunk(), created_at=0.0
                )
            )
            for i in range(n)
        ]
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    doomed = subprocess.Popen([sys.executable, "-c", SLOW_WORKER, redis_url], env=env)
    try:
        deadline = time.monotonic() + 30
        while queue.totals().get("answered", (0, 0.0))[0] < 30:
            assert time.monotonic() < deadline and doomed.poll() is None, "the doomed worker never scored"
            time.sleep(0.05)
        assert queue.stats().pending > 0  # it holds a batch in flight
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
    finally:
        if doomed.poll() is None:
            doomed.kill()
    # A survivor (another consumer of the same group) drains the rest, claiming the dead worker's batch.
    rescuer = make_worker(queue, name="rescuer", claim_idle_ms=200)
    rescuer.work(burst=True, max_seconds=60)
    assert queue.totals()["answered"] == (n, float(n))
    assert len(queue.recent_scores(10 * n)) == n
    assert {orjson.loads(r)["sample_id"] for r in queue.recent_scores(10 * n)} == {f"s{i}" for i in range(n)}
    assert queue.stats().pending == 0 and queue.stats().dead == 0


def test_redis_outage_never_reaches_the_host(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    registry = CollectorRegistry()
    rw, answer = service_app(server.url, registry, buffer_size=200, batch_size=50)
    latencies: dict[str, list[float]] = {"before": [], "outage": [], "after": []}
    errors: list[BaseException] = []
    phase = ["before"]
    stop = threading.Event()

    def traffic() -> None:
        i = 0
        while not stop.is_set():
            started = time.perf_counter()
            try:
                answer(f"q{i}")
            except BaseException as exc:  # the host must never see one
                errors.append(exc)
            latencies[phase[0]].append(time.perf_counter() - started)
            i += 1
            time.sleep(0.001)

    thread = threading.Thread(target=traffic)
    thread.start()
    try:
        time.sleep(1.0)
        phase[0] = "outage"
        server.stop()
        time.sleep(3.0)
        sent_during_outage = metric(registry, "ragwatch_samples_sent_total", service="kb")
        server.start()  # same port, empty data: flow must resume with no restart of anything
        phase[0] = "after"
        deadline = time.monotonic() + 30
        while metric(registry, "ragwatch_samples_sent_total", service="kb") <= sent_during_outage + 100:
            assert time.monotonic() < deadline, "samples did not flow again after Redis came back"
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(10)
    try:
        assert errors == []
        dropped = metric(registry, "ragwatch_samples_dropped_total", service="kb", reason="buffer_full")
        assert dropped > 0  # the buffer (200) overflowed during 3 s of outage, and every drop was counted
        assert metric(registry, "ragwatch_queue_errors_total", service="kb", side="producer") > 0
        before = sorted(latencies["before"])
        outage = sorted(latencies["outage"])
        # no I/O on the request path: the outage does not move the typical request (generous bounds: CI is noisy)
        assert outage[len(outage) // 2] < max(0.005, 5 * before[len(before) // 2])
        assert max(outage) < 0.25
        assert redis.Redis.from_url(server.url).xlen(Keys("kb").samples) > 0
    finally:
        rw.close(1)
        server.stop()


def test_worker_survives_redis_outage(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    queue = open_queue(server.url, "kb", socket_timeout=0.5)
    worker = make_worker(queue, block_ms=100, maintenance_seconds=0.1)
    thread = threading.Thread(target=worker.work)
    thread.start()
    try:
        wait_for(lambda: worker.ready)
        server.stop()
        wait_for(lambda: not worker.ready)
        assert thread.is_alive()
        server.start()
        queue.add(
            [
                orjson.dumps(
                    Sample(
                        sample_id="after", service="kb", question="q", answer="a", chunks=one_chunk(), created_at=0.0
                    )
                )
            ]
        )
        deadline = time.monotonic() + 30
        while queue.totals().get("answered") != (1, 1.0):
            assert time.monotonic() < deadline, "worker did not resume after Redis came back"
            time.sleep(0.1)
    finally:
        worker.stop()
        thread.join(10)
        server.stop()


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragwatch", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def test_cli_worker_burst_and_health(redis_url: str) -> None:
    queue = open_queue(redis_url, "kb")
    assert run_cli("health", "--service", "kb", "--redis-url", redis_url).returncode == 1  # no worker yet
    queue.add(
        [
            orjson.dumps(
                Sample(sample_id=f"s{i}", service="kb", question="q", answer="a", chunks=one_chunk(), created_at=0.0)
            )
            for i in range(5)
        ]
    )
    command = ["worker", "--service", "kb", "--redis-url", redis_url, "--name", "w1", "--port", "0"]
    running = subprocess.Popen(
        [sys.executable, "-m", "ragwatch", *command],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "RAGWATCH_WORKER_ADDR": "127.0.0.1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while "w1" not in queue.live_workers(30) or queue.stats().lag or queue.stats().pending:
            assert time.monotonic() < deadline and running.poll() is None, "worker never scored the entries"
            time.sleep(0.1)
        health = run_cli("health", "--service", "kb", "--redis-url", redis_url)
        assert health.returncode == 0, health.stderr
        assert json.loads(health.stdout)["live_workers"] == ["w1"]
        running.send_signal(signal.SIGTERM)
        assert running.wait(15) == 0
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    # a clean exit removes the heartbeat: health no longer reports that worker as live
    health = run_cli("health", "--service", "kb", "--redis-url", redis_url)
    assert health.returncode == 1
    assert json.loads(health.stdout)["live_workers"] == []
    assert max(n for n, _ in queue.totals().values()) == 5  # every entry scored once
    out = run_cli("worker", "--service", "kb", "--redis-url", redis_url, "--burst")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["handled"] == 0
    assert run_cli("worker", "--judge", "no-such-judge").returncode == 2
    assert run_cli("health", "--redis-url", f"redis://127.0.0.1:{free_port()}/0").returncode == 1


def test_worker_that_never_reached_the_queue_exits_non_zero() -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    out = run_cli("worker", "--service", "kb", "--redis-url", dead, "--max-seconds", "1", "--port", "0")
    assert out.returncode == 1, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"worker": ANY, "handled": 0, "queue_reached": False}
    assert "never reached the queue" in out.stderr


def test_sigterm_stops_the_worker_gracefully_and_endpoints_answer(redis_url: str) -> None:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RAGWATCH_WORKER_PORT": str(port),
        "RAGWATCH_WORKER_ADDR": "127.0.0.1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragwatch", "worker", "--service", "kb", "--redis-url", redis_url],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        wait_ready(port, proc)
        assert httpx.get(f"http://127.0.0.1:{port}/livez", timeout=2).status_code == 200
        assert "ragwatch_worker_entries_total" in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=15)
        assert proc.returncode == 0
        assert json.loads(stdout.strip().splitlines()[-1])["handled"] == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_fork_gives_the_child_its_own_buffer_and_flusher(redis_url: str) -> None:
    registry = CollectorRegistry()
    rw, answer = service_app(redis_url, registry, flush_interval=5.0, batch_size=1000)
    for i in range(5):
        answer(f"parent-before-fork-{i}")  # buffered, not yet sent (long flush interval)
    pid = os.fork()
    if pid == 0:  # the child: a pre-fork server's worker process
        code = 1
        try:
            for i in range(3):
                answer(f"child-{i}")
            code = 0 if rw.flush(10) else 3
            if code:
                import faulthandler

                sys.stderr.write(f"producer state: {rw.producer!r} failures={rw.producer.failures}\n")
                faulthandler.dump_traceback(all_threads=True)
        except BaseException as exc:
            sys.stderr.write(f"child failed: {exc!r}\n")
            code = 4
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert rw.flush(10)
    queue = open_queue(redis_url, "kb")
    queue.ensure_group()
    questions = sorted(decode_sample(e.payload or b"").question or "" for e in queue.read("t", 100, 100))
    # the parent's buffered samples are sent once (by the parent), the child's by the child
    assert questions == sorted([f"parent-before-fork-{i}" for i in range(5)] + [f"child-{i}" for i in range(3)])
    rw.close()
