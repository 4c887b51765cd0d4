"""Redis memory of the idempotency markers, per applied sample: hour sets against one key per sample.

Every scored sample leaves a marker that makes a redelivery harmless; markers live ``applied_ttl`` (7 days
by default), so they are the part of Redis memory that grows with the sampled request rate (the sample
stream is trimmed to what is not scored yet, the scores stream to ``scores_maxlen`` records). This starts
a private redis-server, applies N scores both ways in the same run and prints bytes per sample from
``used_memory``, and what 7 days of markers cost per sampled request/s.

Usage::

    python benchmarks/redis_memory.py            # 200,000 samples each way
    python benchmarks/redis_memory.py --samples 50000
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragwatch.queue.keys import Keys
from ragwatch.queue.redis import RedisQueue

WEEK = 7 * 24 * 3600


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200_000)
    args = parser.parse_args()
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
            scores = int(client.memory_usage(keys.scores) or 0)  # type: ignore[no-untyped-call]
            per_set = (_used(client) - before - scores) / len(ids)
            queue.close()
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"redis {version}, {args.samples:,} samples each way (used_memory delta per sample)")
    print(f"  one key per sample (applied:<id>, EX 7 d): {per_key:6.1f} B/sample")
    print(f"  hour sets (applied-by-hour:<h>, SADD):      {per_set:6.1f} B/sample")
    for label, per in (("one key per sample", per_key), ("hour sets", per_set)):
        print(f"  7 days of markers per sampled request/s, {label}: {per * WEEK / 2**20:6.1f} MiB")


if __name__ == "__main__":
    main()
