"""The producer's bookkeeping on a real Redis: every offered sample is sent or counted as dropped, never both."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry

from ragwatch.capture.run import Run
from ragwatch.errors import QueueError
from ragwatch.queue.keys import Keys
from ragwatch.queue.producer import Producer
from ragwatch.queue.redis import RedisQueue
from tests.conftest import quick_producer
from tests.conftest import sample as metric
from tests.servers import RedisServer


def _producer(url: str, registry: CollectorRegistry, **options: float) -> Producer:
    queue = RedisQueue(url, "prod", maxlen=1_000_000, socket_timeout=0.5)
    return quick_producer(
        queue,
        lambda run, reason: (run.question or "").encode(),
        registry,
        **{"buffer_size": 300, "batch_size": 40, **options},
    )


def _counted(registry: CollectorRegistry, reason: str) -> float:
    return metric(registry, "ragwatch_samples_dropped_total", service="prod", reason=reason)


def test_outage_keeps_one_built_batch_and_accounts_for_every_sample(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    registry = CollectorRegistry()
    producer = _producer(server.url, registry)
    offered = 0
    try:
        for _ in range(100):
            producer.offer(Run("prod", f"q{offered}"), "rate")
            offered += 1
        assert producer.flush(10)
        server.stop()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # Redis down: the buffer overflows, one built batch waits
            producer.offer(Run("prod", f"q{offered}"), "rate")
            offered += 1
            assert producer.pending() <= 300 + 40
            time.sleep(0.0005)
        assert _counted(registry, "buffer_full") > 0
        assert producer.failures > 0
        server.start()  # same port, empty: everything still held must arrive
        assert producer.flush(20)
        sent = metric(registry, "ragwatch_samples_sent_total", service="prod")
        in_redis = redis.Redis.from_url(server.url).xlen(Keys("prod").samples)
        assert sent - 100 == in_redis  # what the flush reported is what Redis holds, nothing twice
        assert sent + _counted(registry, "buffer_full") == offered  # and every other sample was counted lost
    finally:
        producer.close(1)
        server.stop()


def test_packed_xadds_arrive_in_order_byte_exact_and_trimmed(redis_url: str) -> None:
    queue = RedisQueue(redis_url, "big", maxlen=1_000)
    payloads = [f"p{i}".encode() + bytes(range(256)) + "中文\r\n".encode() for i in range(1_207)]
    queue.add(payloads[:7])
    queue.add(payloads[7:])
    client = redis.Redis.from_url(redis_url)
    entries = client.xrange(Keys("big").samples)
    assert len(entries) < len(payloads)  # MAXLEN ~ trimmed whole nodes away
    assert [fields[b"s"] for _, fields in entries] == payloads[-len(entries) :]
    queue.add([b"after"])  # the connection went back to the pool in a clean state
    assert client.xrevrange(Keys("big").samples, count=1)[0][1][b"s"] == b"after"


def test_a_refused_write_raises_queue_error_and_leaves_no_half_read_reply(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.set(Keys("wrong").samples, "not a stream")
    queue = RedisQueue(redis_url, "wrong", maxlen=1_000)
    with pytest.raises(QueueError, match="XADD"):
        queue.add([b"a", b"b", b"c"])
    client.delete(Keys("wrong").samples)
    queue.add([b"d"])
    assert [f[b"s"] for _, f in client.xrange(Keys("wrong").samples)] == [b"d"]
