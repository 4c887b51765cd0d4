"""A full Redis heals (issue 29, item 3) — on real redis-servers started with a small ``maxmemory``.

At ``maxmemory`` with ``noeviction`` the score records and the hourly sets of idempotency markers used to
hold the memory for good: workers trimmed only the sample stream, so once it was empty nothing could be
freed and every write was refused. Workers now keep both within byte budgets and halve them under
pressure; a batch refused part-way re-sends only what Redis did not take; the headroom is a metric.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry

from ragwatch.capture.run import Run
from ragwatch.errors import QueueFullError
from ragwatch.queue.keys import Keys
from ragwatch.queue.redis import RedisQueue
from tests.conftest import cap_memory, quick_producer, wait_for
from tests.conftest import sample as metric
from tests.servers import RedisServer
from tests.test_worker_faults import good, outcome, worker_for


def _by_id(run: Run, reason: str) -> bytes:  # the question carries the sample id; 20 kB of chunk text
    return good(run.question or "", chunks=[{"id": "c", "rank": 0, "text": "x" * 20_000}])


def test_a_batch_refused_part_way_resends_only_the_unsent_rest(own_redis: RedisServer) -> None:
    client = redis.Redis.from_url(own_redis.url)
    registry = CollectorRegistry()
    queue = RedisQueue(own_redis.url, "kb", socket_timeout=2.0)
    producer = quick_producer(queue, _by_id, registry, batch_size=50)
    try:
        cap_memory(client, 300_000)  # about 15 of the batch's 50 samples of 20 kB fit
        for i in range(50):
            producer.offer(Run("kb", f"s{i:02d}"), "rate")
        wait_for(lambda: producer.failures >= 1)
        went_in = client.xlen(Keys("kb").samples)
        assert 0 < went_in < 50  # refused part-way: the case that used to be re-sent whole
        assert metric(registry, "ragwatch_samples_sent_total", service="kb") == went_in
        client.config_set("maxmemory", 0)  # room again
        assert producer.flush(20)
        entries: Any = client.xrange(Keys("kb").samples)
        ids = [orjson.loads(fields[b"s"])["sample_id"] for _, fields in entries]
        assert sorted(ids) == [f"s{i:02d}" for i in range(50)]  # each exactly once, none duplicated
        assert metric(registry, "ragwatch_samples_sent_total", service="kb") == 50
    finally:
        producer.close(1)
        queue.close()
        client.close()


def test_scores_and_markers_are_kept_within_their_byte_budgets(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = Keys("kb")
    queue = RedisQueue(redis_url, "kb")
    now = time.time()
    hour = int(now // 3600)
    record = b"r" * 1000
    for h in range(30, 0, -1):  # 30 hours of markers, 100 sample ids each, then this hour's 2,000 scores
        assert all(queue.apply_many([(f"old-{h}-{i}", record, {"m": 0.5}, now - h * 3600) for i in range(100)]))
    for start in range(0, 2000, 500):
        assert all(queue.apply_many([(f"new-{i}", record, {"m": 0.5}, now) for i in range(start, start + 500)]))
    assert client.xlen(keys.scores) == 5000
    assert int(client.memory_usage(keys.scores) or 0) > 3_000_000

    def size(h: int) -> int:
        return int(client.memory_usage(keys.applied_hour(h)) or 0)

    # room for the two newest hours' markers (never dropped) and ten older hours' worth
    budget = size(hour) + size(hour - 1) + 10 * size(hour - 2)
    registry = CollectorRegistry()
    budgeted = RedisQueue(redis_url, "kb", scores_max_bytes=300_000, idempotency_max_bytes=budget)
    worker_for(budgeted, registry).work(burst=True)  # one maintenance pass, as every worker makes them

    assert int(client.memory_usage(keys.scores) or 0) <= 360_000
    trimmed = 5000 - client.xlen(keys.scores)
    assert trimmed > 4000
    assert metric(registry, "ragwatch_redis_trimmed_total", service="kb", kind="scores") == trimmed
    found: Any = client.keys(keys.applied_hour_prefix + "*")
    kept = sorted(int(k.decode().rsplit(":", 1)[1]) for k in found)
    assert kept == list(range(kept[0], hour + 1))  # the oldest hours went, the newest stayed
    assert 10 <= len(kept) <= 13
    assert sum(size(h) for h in kept) <= budget
    dropped_ids = metric(registry, "ragwatch_redis_trimmed_total", service="kb", kind="markers")
    assert dropped_ids == 100 * (31 - len(kept))
    assert not queue.apply("new-7", record, {"m": 0.5}, now)  # this hour's samples are still applied once
    assert queue.totals()["m"] == (5000, 2500.0)  # totals and windows are never trimmed
    assert registry.get_sample_value("ragwatch_redis_memory_headroom_ratio", {"service": "kb"}) is None  # no limit
    client.close()


def test_redis_full_of_scores_heals_when_a_worker_comes(own_redis: RedisServer) -> None:
    """The wedge of the issue: the sample stream is empty (every sample scored and trimmed), Redis is at
    maxmemory with score records and markers, and every new sample is refused. A worker's maintenance pass
    now sees the headroom under its floor and halves them, so the producer's samples go in again."""
    client = redis.Redis.from_url(own_redis.url)
    queue = RedisQueue(own_redis.url, "kb", socket_timeout=2.0)
    queue.ensure_group()
    cap_memory(client, 3_000_000)
    record = b"r" * 2000
    n = 0
    with pytest.raises(QueueFullError):  # fill Redis with score records until it refuses one
        while True:
            queue.apply_many([(f"old-{n + i}", record, {"m": 0.5}, time.time()) for i in range(100)])
            n += 100
    assert client.xlen(Keys("kb").samples) == 0
    registry = CollectorRegistry()
    producer = quick_producer(queue, _by_id, registry, batch_size=20)
    worker_registry = CollectorRegistry()
    worker = worker_for(
        RedisQueue(own_redis.url, "kb", socket_timeout=2.0, min_headroom_ratio=0.10), worker_registry, batch=64
    )
    worker.maintenance_seconds = 0.2
    thread = threading.Thread(target=worker.work, kwargs={"max_seconds": 60})
    try:
        for i in range(100):
            producer.offer(Run("kb", f"new-{i}"), "rate")
        wait_for(lambda: producer.failures >= 2)  # refused: full, and nothing would ever free it
        assert metric(registry, "ragwatch_samples_sent_total", service="kb") == 0

        thread.start()
        assert producer.flush(30), "the producer never got its samples into Redis again"
        assert metric(registry, "ragwatch_samples_sent_total", service="kb") == 100
        wait_for(lambda: outcome(worker_registry, "scored") == 100, timeout=30)
        assert outcome(worker_registry, "queue_full") == 0  # none shed: there was room to score them
        assert metric(worker_registry, "ragwatch_redis_trimmed_total", service="kb", kind="scores") > 0
        headroom = worker_registry.get_sample_value("ragwatch_redis_memory_headroom_ratio", {"service": "kb"})
        assert headroom is not None and 0 <= headroom <= 1
        wait_for(lambda: metric(worker_registry, "ragwatch_redis_memory_headroom_ratio", service="kb") >= 0.10)
    finally:
        worker.stop()
        if thread.is_alive():
            thread.join(30)
        producer.close(1)
        queue.close()
        client.close()
