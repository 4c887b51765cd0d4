"""Faults that must not stop scoring, and must heal by themselves — on a real redis-server.

One bad or oversized entry is dead-lettered alone; a Redis full at ``maxmemory`` (noeviction) recovers
without an operator; idempotency markers stay bounded; a wrong password is said plainly by every thread;
the producer's accounting is exact under concurrency and its buffer gauge current; /livez is honest about
slow and stuck judges.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry

from ragwatch.capture.run import Run
from ragwatch.errors import QueueError
from ragwatch.guard import Guard
from ragwatch.metrics.catalog import ProducerMetrics, WorkerMetrics, families
from ragwatch.queue.factory import open_queue
from ragwatch.queue.keys import Keys
from ragwatch.queue.producer import Producer
from ragwatch.queue.redis import RedisQueue
from ragwatch.sampling.sample import Limits, Sample
from ragwatch.scoring.health import serve_worker_http
from ragwatch.scoring.judges import TrivialJudge
from ragwatch.scoring.judges.base import Verdict
from ragwatch.scoring.worker import Worker
from tests.conftest import cap_memory, quick_producer
from tests.conftest import sample as metric
from tests.servers import RedisServer, free_port

ROOT = Path(__file__).resolve().parent.parent


def good(sample_id: str, **fields: Any) -> bytes:
    record = {"sample_id": sample_id, "service": "kb", "question": "q", "answer": "a", "created_at": time.time()}
    record["chunks"] = [{"id": "c", "rank": 0, "text": "t"}]  # without context a sample is skipped, not scored
    return orjson.dumps({**record, **fields})


def worker_for(queue: Any, registry: CollectorRegistry | None = None, judges: Any = None, **options: Any) -> Worker:
    defaults = {"block_ms": 50, "claim_idle_ms": 50, "max_deliveries": 3, "concurrency": 4, "batch": 32}
    metrics = families(WorkerMetrics, registry) if registry is not None else None
    return Worker(queue, judges or [TrivialJudge()], metrics=metrics, **{**defaults, **options})


def outcome(registry: CollectorRegistry, name: str, service: str = "kb") -> float:
    return metric(registry, "ragwatch_worker_entries_total", service=service, outcome=name)


# -- one entry never takes its batch with it ------------------------------------------------------------------


def test_bad_and_oversized_entries_are_dead_lettered_alone(redis_url: str) -> None:
    queue = open_queue(redis_url, "kb")
    client = redis.Redis.from_url(redis_url)
    stream = Keys("kb").samples
    entries = [
        good("g1"),
        good("null-time", created_at=None),  # crashed the batch bookkeeping with a TypeError
        good("g2"),
        good("string-time", created_at="2026-12-01"),
        good("g3"),
        good("string-rank", chunks=[{"id": "c", "rank": "0", "text": "t"}]),
        good("huge", answer="答" * 600_000),  # 1.8 MB of UTF-8: over the hard byte cap
        good("g4"),
    ]
    for payload in entries:
        client.xadd(stream, {"s": payload})
    registry = CollectorRegistry()
    worker = worker_for(queue, registry, max_sample_bytes=1_000_000)
    assert worker.work(burst=True, max_seconds=30) == len(entries)  # one batch, and no exception out of it
    assert queue.totals()["answered"] == (4, 4.0)  # every good entry of the batch was scored
    dead = {orjson.loads(d["payload"])["sample_id"]: d["error"] for d in queue.dead_letters(10)}
    assert sorted(dead) == ["huge", "null-time", "string-rank", "string-time"]
    assert dead["huge"].startswith("oversized")
    assert all(dead[k].startswith("malformed") for k in ("null-time", "string-rank", "string-time"))
    assert outcome(registry, "malformed") == 3 and outcome(registry, "oversized") == 1
    assert outcome(registry, "scored") == 4
    assert queue.stats().pending == 0


class Recording:
    name = "recording"
    version = "1"

    def __init__(self, delay: float = 0.0, hang_on: str | None = None, hang: float = 0.0) -> None:
        self.seen: list[Sample] = []
        self.delay, self.hang_on, self.hang = delay, hang_on, hang

    def score(self, sample: Sample) -> Verdict:
        self.seen.append(sample)
        time.sleep(self.hang if sample.question == self.hang_on else self.delay)
        return Verdict({"ok": 1.0})


def test_worker_applies_the_size_limits_before_judging(redis_url: str) -> None:
    queue = open_queue(redis_url, "kb")
    chunks = [{"id": f"c{i}", "rank": i, "text": "x" * 9000} for i in range(40)]
    queue.add([good("big", question="q" * 9000, answer="a" * 90_000, chunks=chunks)])  # 0.55 MB: under the cap
    judge = Recording()
    limits = Limits(max_chunks=5, max_chunk_chars=100, max_answer_chars=200, max_question_chars=50)
    worker_for(queue, judges=[judge], limits=limits).work(burst=True, max_seconds=30)
    (seen,) = judge.seen
    assert (len(seen.question or ""), len(seen.answer or ""), len(seen.chunks)) == (50, 200, 5)
    assert all(len(c.text or "") == 100 for c in seen.chunks) and seen.truncated


def test_livez_stays_up_while_samples_finish_and_fails_when_a_judge_hangs(redis_url: str) -> None:
    queue = open_queue(redis_url, "kb")
    queue.add([good(f"s{i}", question=f"q{i}") for i in range(8)] + [good("stuck", question="hang")])
    judge = Recording(delay=0.3, hang_on="hang", hang=3.0)
    worker = worker_for(queue, judges=[judge], concurrency=1, batch=16, stall_seconds=1.0)
    server = serve_worker_http(worker, 0, "127.0.0.1", registry=CollectorRegistry())
    statuses: list[tuple[str | None, int]] = []
    thread = threading.Thread(target=worker.work, kwargs={"burst": True, "max_seconds": 30})
    thread.start()
    try:
        with httpx.Client(timeout=2) as http:
            while thread.is_alive():
                status = http.get(f"http://127.0.0.1:{server.server_port}/livez").status_code
                current = judge.seen[-1].question if judge.seen else None
                statuses.append((current, status))
                time.sleep(0.05)
    finally:
        thread.join(30)
        server.shutdown()
        server.server_close()
    slow = [s for q, s in statuses if q not in (None, "hang")]
    stuck = [s for q, s in statuses if q == "hang"]
    assert len(slow) > 4 and set(slow) == {200}  # 8 × 0.3 s in one batch: longer than the stall limit, alive
    assert 503 in stuck  # 3 s on one sample with no progress: not alive
    assert len(judge.seen) == 9


# -- Redis at maxmemory with noeviction ------------------------------------------------------------------------


def _builder(run: Run, reason: str) -> bytes:  # 2 KB of chunk text: big samples, small score records
    return good(os.urandom(16).hex(), chunks=[{"id": "c", "rank": 0, "text": run.question}])


def test_full_redis_counts_queue_full_and_heals_without_an_operator(own_redis: RedisServer) -> None:
    server = own_redis
    client = redis.Redis.from_url(server.url)
    registry = CollectorRegistry()
    queue = RedisQueue(server.url, "kb", socket_timeout=1.0)
    queue.ensure_group()
    producer = quick_producer(queue, _builder, registry, buffer_size=300, batch_size=50)
    offered = 0

    def offer(n: int) -> None:
        nonlocal offered
        for _ in range(n):
            producer.offer(Run("kb", "q" * 2000), "rate")
            offered += 1
            time.sleep(0.0002)

    def dropped(reason: str) -> float:
        return metric(registry, "ragwatch_samples_dropped_total", service="kb", reason=reason)

    worker_registry = CollectorRegistry()
    worker = worker_for(RedisQueue(server.url, "kb", socket_timeout=1.0), worker_registry, batch=64)
    worker.maintenance_seconds = 0.2
    thread = threading.Thread(target=worker.work, kwargs={"max_seconds": 120})
    try:
        cap_memory(client, 2_000_000)
        offer(3000)  # 6 MB of samples into 2 MB of room, no worker running yet
        deadline = time.monotonic() + 10
        while dropped("queue_full") == 0:
            assert time.monotonic() < deadline, "a full Redis was never counted as queue_full"
            offer(10)
        assert dropped("buffer_full") == 0
        health = subprocess.run(
            [sys.executable, "-m", "ragwatch", "health", "--service", "kb", "--redis-url", server.url],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert health.returncode == 1
        assert "maxmemory" in orjson.loads(health.stdout)["queue_full"]  # names the operator action

        thread.start()  # a worker comes: it scores, trims scored entries, sheds what Redis refuses
        assert producer.flush(30), "the producer never got its samples into Redis again"
        sent_before = metric(registry, "ragwatch_samples_sent_total", service="kb")
        offer(200)  # new traffic flows again, with no restart and no operator
        assert producer.flush(30)
        assert metric(registry, "ragwatch_samples_sent_total", service="kb") == sent_before + 200
        deadline = time.monotonic() + 30
        while queue.stats().lag or queue.stats().pending or client.xlen(Keys("kb").samples):
            assert time.monotonic() < deadline, "the worker did not catch up and trim what it scored"
            time.sleep(0.1)
        worker.stop()
        thread.join(30)
        scored, shed = outcome(worker_registry, "scored"), outcome(worker_registry, "queue_full")
        assert scored >= 200
        sent = metric(registry, "ragwatch_samples_sent_total", service="kb")
        assert sent + dropped("queue_full") + dropped("buffer_full") == offered  # each sent or counted, once
        assert scored + shed == sent  # and each sent one scored, or counted as shed by the worker
        print(  # the counts quoted in README's "Failure behaviour"
            f"\nfull Redis: offered {offered}, sent {sent:.0f}, dropped queue_full {dropped('queue_full'):.0f} "
            f"buffer_full {dropped('buffer_full'):.0f}; worker scored {scored:.0f}, shed {shed:.0f}"
        )
    finally:
        worker.stop()
        if thread.is_alive():
            thread.join(30)
        producer.close(1)
        queue.close()


# -- idempotency markers -----------------------------------------------------------------------------------------


def test_idempotency_markers_are_one_set_per_hour_and_expire_whole(redis_url: str) -> None:
    queue = RedisQueue(redis_url, "kb", applied_ttl_seconds=3600)
    client = redis.Redis.from_url(redis_url)
    now = time.time()
    items = [(f"s{i}", b"{}", {"m": 0.5}, now) for i in range(1000)]
    assert all(queue.apply_many(items))
    assert not any(queue.apply_many(items))  # still exactly once
    assert queue.totals()["m"] == (1000, 500.0)
    markers = [k.decode() for k in client.keys("ragwatch:{kb}:applied*")]
    assert markers == [Keys("kb").applied_hour(int(now // 3600))]  # one key, not one per sample
    ttl = client.ttl(markers[0])
    assert 3600 < ttl <= 7200  # dropped whole, an hour after the hour of its last write ends
    old = time.time() - 10 * 3600  # a sample stamped long ago is still applied once
    assert queue.apply("late", b"{}", {"m": 1.0}, at=old) and not queue.apply("late", b"{}", {"m": 1.0}, at=old)


def test_markers_written_by_the_previous_release_are_still_honoured(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.set(Keys("kb").applied("old-sample"), "1", ex=60)
    assert not RedisQueue(redis_url, "kb").apply("old-sample", b"{}", {"m": 1.0})


# -- a wrong password ------------------------------------------------------------------------------------------


def test_wrong_password_is_logged_by_each_thread_as_authentication_failed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import ragwatch

    server = RedisServer(tmp_path, password="right")
    server.start()
    url = f"redis://:wrong@127.0.0.1:{server.port}/0"
    rw = ragwatch.RagWatch(
        "kb", registry=CollectorRegistry(), redis_url=url, sample_rate=1.0, tracing=False, flush_interval=0.02
    )

    @rw.retriever
    def retrieve(question: str) -> list[str]:
        return ["context"]

    @rw.pipeline
    def answer(question: str) -> str:
        retrieve(question)  # a RAG run: sampled, so the flusher has something to write
        return "a"

    try:
        with caplog.at_level(logging.WARNING, logger="ragwatch"):
            deadline = time.monotonic() + 15
            while True:
                answer("q")
                lines = [r.getMessage() for r in caplog.records if "authentication failed" in r.getMessage()]
                flusher = [m for m in lines if "queue write failed" in m]
                watcher = [m for m in lines if "degraded-mode state" in m]
                if flusher and watcher:
                    break
                assert time.monotonic() < deadline, f"not both said authentication failed: {lines}"
                time.sleep(0.05)
        assert "wrong" not in " ".join(lines)  # the password itself is never logged
    finally:
        rw.close(1)
        server.stop()


# -- the producer ------------------------------------------------------------------------------------------------


def test_sent_plus_dropped_equals_offered_exactly_under_concurrency(redis_url: str) -> None:
    registry = CollectorRegistry()
    producer = Producer(
        RedisQueue(redis_url, "race", maxlen=10_000_000),
        lambda run, reason: b"x",
        metrics=families(ProducerMetrics, registry),
        guard=Guard(None),
        buffer_size=64,
        batch_size=16,
        flush_interval=0.001,
    )
    per_thread, threads = 40_000, 4
    run = Run("race", "q")

    def offer() -> None:
        for _ in range(per_thread):
            producer.offer(run, "rate")

    workers = [threading.Thread(target=offer) for _ in range(threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads switch at arbitrary bytecodes, often: between a check and an act
    try:
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert producer.flush(30)
    producer.close(1)
    sent = metric(registry, "ragwatch_samples_sent_total", service="race")
    dropped = metric(registry, "ragwatch_samples_dropped_total", service="race", reason="buffer_full")
    assert dropped > 0 and sent > 0  # the buffer overflowed while the flusher drained: the racy case
    assert sent + dropped == per_thread * threads
    print(f"\nproducer race: offered {per_thread * threads}, sent {sent:.0f}, dropped {dropped:.0f}")
    assert redis.Redis.from_url(redis_url).xlen(Keys("race").samples) == sent


def test_buffer_gauge_is_current_during_an_outage(registry: CollectorRegistry) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    producer = quick_producer(
        RedisQueue(dead, "gauge", socket_timeout=0.2),
        lambda run, reason: b"x",
        registry,
        buffer_size=10_000,
        batch_size=10_000,
        flush_interval=0.05,
        max_backoff=30.0,
    )
    try:
        for _ in range(200):
            producer.offer(Run("gauge", "q"), "rate")
        time.sleep(6)  # the flusher's backoff has grown to seconds
        for _ in range(350):
            producer.offer(Run("gauge", "q"), "rate")
        time.sleep(0.4)
        assert metric(registry, "ragwatch_sample_buffer", service="gauge") == producer.pending() == 550
    finally:
        producer.close(0.1)


def test_password_from_its_own_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chart hands the password over as RAGWATCH_REDIS_PASSWORD (from a Secret), the URL without it."""
    server = RedisServer(tmp_path, password="s3cr/t@:x")  # characters a URL would have to escape
    server.start()
    url = f"redis://127.0.0.1:{server.port}/0"
    try:
        with pytest.raises(QueueError, match="authentication failed"):
            RedisQueue(url, "kb").stats()
        monkeypatch.setenv("RAGWATCH_REDIS_PASSWORD", "s3cr/t@:x")
        queue = RedisQueue(url, "kb")
        queue.add([good("p1")])
        assert queue.stats().length == 1
        queue.close()
    finally:
        server.stop()
