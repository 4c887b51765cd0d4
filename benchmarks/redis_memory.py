"""Redis memory of the idempotency markers, per applied sample: hour sets against one key per sample.

Every scored sample leaves a marker that makes a redelivery harmless; markers live ``applied_ttl`` (7 days
by default), so they are the part of Redis memory that grows with the sampled request rate (the sample
stream is trimmed to what is not scored yet, the scores stream to ``scores_maxlen`` records). This starts
a private redis-server, applies N scores both ways in the same run and prints bytes per sample from
``used_memory``, and what 7 days of markers cost per sampled request/s.

``--full`` measures instead the issue-29 setup: Redis at a small ``maxmemory`` with ``noeviction``, a
steady producer and one worker with the shipped defaults, for ``--seconds``; it prints what was offered,
sent, dropped (by reason), lost at shutdown, duplicated (entries a worker found already applied), scored and
shed, and the longest time ``sent`` stood still. Run it from a checkout of the code to compare.

Usage::

    python benchmarks/redis_memory.py            # 200,000 samples each way
    python benchmarks/redis_memory.py --samples 50000
    python benchmarks/redis_memory.py --full --seconds 60 --rate 500 --room-mb 16
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import redis
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragwatch.capture.run import Run
from ragwatch.guard import Guard
from ragwatch.metrics.catalog import ProducerMetrics, WorkerMetrics, families
from ragwatch.queue.keys import Keys
from ragwatch.queue.producer import Producer
from ragwatch.queue.redis import RedisQueue
from ragwatch.scoring.judges.trivial import TrivialJudge
from ragwatch.scoring.worker import Worker
from ragwatch.settings import Settings

WEEK = 7 * 24 * 3600


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


@contextmanager
def _redis_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found")
    port = _free_port()
    with tempfile.TemporaryDirectory() as workdir:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
            stdout=subprocess.DEVNULL,
        )
        try:
            url = f"redis://127.0.0.1:{port}/0"
            client = redis.Redis.from_url(url)
            for _ in range(100):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            client.close()
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


def _queue(url: str) -> RedisQueue:
    """A worker's queue with the shipped settings (only those this checkout of RedisQueue knows)."""
    s = Settings()
    options = {
        "maxlen": s.queue_maxlen,
        "scores_maxlen": s.scores_maxlen,
        "applied_ttl_seconds": s.idempotency_ttl_seconds,
        "scores_max_bytes": getattr(s, "scores_max_bytes", None),
        "idempotency_max_bytes": getattr(s, "idempotency_max_bytes", None),
        "min_headroom_ratio": getattr(s, "redis_min_headroom_ratio", None),
    }
    known = inspect.signature(RedisQueue).parameters
    return RedisQueue(url, "bench", **{k: v for k, v in options.items() if k in known and v is not None})


def full_redis(seconds: float, rate: float, room_mb: float) -> None:
    """The issue-29 setup: noeviction at a small maxmemory, a steady producer, one worker, shipped defaults."""
    s = Settings()
    with _redis_server() as url:
        client = redis.Redis.from_url(url)
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", used + int(room_mb * 2**20))
        registry, worker_registry = CollectorRegistry(), CollectorRegistry()
        text = "The hotel allowance is 600 CNY per night in tier-one cities. " * 33  # 2 kB each

        def build(run: Run, reason: str) -> bytes:
            chunks = [{"id": "c", "rank": 0, "text": text}]
            return orjson.dumps(
                {"sample_id": os.urandom(16).hex(), "service": "bench", "question": text, "answer": "a"}
                | {"created_at": time.time(), "chunks": chunks}
            )

        producer = Producer(
            RedisQueue(url, "bench"),
            build,
            metrics=families(ProducerMetrics, registry),
            guard=Guard(None),
            buffer_size=s.buffer_size,
            batch_size=s.batch_size,
            flush_interval=s.flush_interval,
            close_timeout=s.close_timeout,
        )
        worker = Worker(
            _queue(url),
            [TrivialJudge()],
            concurrency=s.worker_concurrency,
            batch=s.worker_batch,
            block_ms=s.worker_block_ms,
            metrics=families(WorkerMetrics, worker_registry),
            maintenance_seconds=min(5.0, s.sla_evaluate_seconds),
        )
        thread = threading.Thread(target=worker.work, kwargs={"max_seconds": seconds + 30}, daemon=True)
        thread.start()

        def value(reg: CollectorRegistry, name: str, **labels: str) -> float:
            return reg.get_sample_value(name, {"service": "bench", **labels}) or 0.0

        offered = 0
        started = last_change = time.monotonic()
        last_sent, stall = 0.0, 0.0
        while (now := time.monotonic()) - started < seconds:
            due = int((now - started) * rate)
            while offered < due:
                producer.offer(Run("bench", "q"), "rate")
                offered += 1
            sent = value(registry, "ragwatch_samples_sent_total")
            if sent != last_sent:
                last_sent, last_change = sent, now
            stall = max(stall, now - last_change)
            time.sleep(0.02)
        producer.close()
        time.sleep(min(15.0, 3 * worker.maintenance_seconds))  # let the worker score what got in
        worker.stop()
        thread.join(60)
        dropped = {
            r: value(registry, "ragwatch_samples_dropped_total", reason=r)
            for r in ("queue_full", "buffer_full", "shutdown")
        }
        outcomes = {
            o: value(worker_registry, "ragwatch_worker_entries_total", outcome=o)
            for o in ("scored", "duplicate", "queue_full")
        }
        info = client.info("memory")
        client.close()
    print(
        f"full Redis, {seconds:.0f} s at {rate:.0f} samples/s (4 kB each), maxmemory = used + {room_mb:g} MiB, "
        f"noeviction, shipped defaults"
    )
    print(f"  offered {offered:,}, sent {value(registry, 'ragwatch_samples_sent_total'):,.0f}")
    print(
        f"  dropped queue_full {dropped['queue_full']:,.0f}, buffer_full {dropped['buffer_full']:,.0f}; "
        f"lost at shutdown {dropped['shutdown']:,.0f}"
    )
    print(
        f"  worker: scored {outcomes['scored']:,.0f}, duplicates {outcomes['duplicate']:,.0f}, "
        f"shed (queue_full) {outcomes['queue_full']:,.0f}"
    )
    trimmed = [value(worker_registry, "ragwatch_redis_trimmed_total", kind=k) for k in ("scores", "markers")]
    print(f"  trimmed: {trimmed[0]:,.0f} score records, {trimmed[1]:,.0f} markers")
    print(f"  longest stall of sent: {stall:.1f} s; used_memory at the end {int(info['used_memory']) / 2**20:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--full", action="store_true", help="measure the full-Redis setup instead")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=500.0, help="samples per second offered")
    parser.add_argument("--room-mb", type=float, default=16.0, help="maxmemory above what Redis uses at start")
    args = parser.parse_args()
    if args.full:
        full_redis(args.seconds, args.rate, args.room_mb)
        return
    with _redis_server() as url:
        client = redis.Redis.from_url(url)
        version = client.info("server")["redis_version"]
        ids = [os.urandom(16).hex() for _ in range(args.samples)]  # as the producer makes them

        # one key per sample, with a TTL: the marker of earlier releases
        before = _used(client)
        pipe = client.pipeline(transaction=False)
        keys = Keys("bench")
        for i, sample_id in enumerate(ids):
            pipe.set(keys.applied(sample_id), "1", nx=True, ex=WEEK)
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()
        per_key = (_used(client) - before) / len(ids)
        client.flushall()

        # hour sets, through the real apply script (scores stream trimmed to 100 to measure markers only)
        queue = RedisQueue(url, "bench", scores_maxlen=100)
        now = time.time()
        before = _used(client)
        for start in range(0, len(ids), 1000):
            queue.apply_many([(i, b"r", {}, now) for i in ids[start : start + 1000]])
        scores = int(client.memory_usage(keys.scores) or 0)
        per_set = (_used(client) - before - scores) / len(ids)
        queue.close()
        client.close()
    print(f"redis {version}, {args.samples:,} samples each way (used_memory delta per sample)")
    print(f"  one key per sample (applied:<id>, EX 7 d): {per_key:6.1f} B/sample")
    print(f"  hour sets (applied-by-hour:<h>, SADD):      {per_set:6.1f} B/sample")
    for label, per in (("one key per sample", per_key), ("hour sets", per_set)):
        print(f"  7 days of markers per sampled request/s, {label}: {per * WEEK / 2**20:6.1f} MiB")


if __name__ == "__main__":
    main()
