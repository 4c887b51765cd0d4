"""The sampling path end to end: enqueue cost on the request thread, flusher and worker throughput on Redis.

Starts its own ``redis-server`` on a free loopback port (no persistence, in a temporary directory) and
stops it when done, also on Ctrl-C or an error. One command runs three measurements and prints one table
plus a verdict line per target:

1. **Enqueue cost on the request thread** (target p50 ≤ 3 µs). What ``RagWatch._setup_sampling``'s
   listener does for a *sampled* request, capture excluded: ``sampler.decide`` + the decision counter +
   ``producer.offer``. The listener is taken from a real ``RagWatch`` (``rw.listeners[0]``) configured with
   ``sample_rate=1``, no effective ceiling and a buffer big enough never to drop, and is called on
   pre-built finished runs while its flusher writes to Redis in the background. Each call is timed on its
   own with ``time.perf_counter_ns``. In-run floors, interleaved with it in batches: a bare
   ``deque.append((run, reason))``, one prometheus ``Counter.inc()``, and an empty timed region.
2. **Flusher throughput** (target ≥ 20,000 samples/s). A burst of runs (5 chunks of ~150 English words
   each) offered as fast as possible to a ``RagWatch``'s own producer, so its own build function (normalise,
   truncate, redact, encode) runs; samples/s = runs / (first offer → ``flush()`` returned). Once with the
   default redaction patterns, once with ``redact=()``, once with redaction and a distinct text for every
   chunk of every run (no chunk is redacted from the cache: the worst case for a service whose chunks never
   repeat), plus ``queue.add`` of pre-encoded samples alone (the Redis write without the build). And once
   with ``content_off`` on Redis, where the service also judges every run with the default offline judge
   (50x fewer runs) on its judging threads, the flusher handing each run over: its CPU per sampled request
   (all threads of the process), as a ratio to the plain build's. The runs are offered in chunks the judging
   queue holds, each followed by ``flush()`` (which waits for the judgements), so every one is judged — a
   larger burst would send its overflow unscored — and the row checks in Redis that none went unscored.
3. **Worker throughput** (target ≥ 5,000 samples/s per core). The stream is pre-filled with encoded samples,
   then ``Worker(queue, [judge], concurrency=1, batch=256, block_ms=50).work(burst=True)`` runs in this
   process until the stream is drained. Judges: ``TrivialJudge``; a no-op judge (the queue overhead alone:
   read, decode, thread hand-off, apply script, ack); ``TrivialJudge`` with ``WorkerMetrics`` as the CLI runs
   it; and the default ``OfflineJudge`` on a 25x smaller stream, for scale. The worker is one mostly
   single-threaded Python process: its samples/s is per core (the table shows the CPU it used, and Redis's,
   in cores).

Usage::

    python benchmarks/sampling_queue.py                 # the full run, about two minutes
    python benchmarks/sampling_queue.py --quick         # 10x smaller counts, about 20 s
    python benchmarks/sampling_queue.py --json /tmp/queue.json
"""

# ruff: noqa: E402 - the checkout's package must be importable before ragwatch is imported
from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent  # run from a checkout without installing
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import argparse
import contextlib
import datetime as dt
import gc
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from benchcommon import dist_version, print_table, source_fingerprint, usable_cpus
from prometheus_client import CollectorRegistry, Counter

import ragwatch
from ragwatch import RagWatch, Run, Settings, Usage
from ragwatch.metrics.catalog import SAMPLES_DROPPED, SAMPLES_SENT, SAMPLING_DECISIONS, WorkerMetrics, families
from ragwatch.queue.contract import Queue
from ragwatch.queue.factory import open_queue
from ragwatch.queue.keys import Keys
from ragwatch.queue.redis import FIELD
from ragwatch.sampling.redact import Redactor
from ragwatch.sampling.sample import Limits, Sample, build_sample, encode_sample
from ragwatch.scoring.judges import TrivialJudge, Verdict
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.worker import Worker

TARGET_ENQUEUE_NS = 3_000
TARGET_FLUSH_PER_S = 20_000
TARGET_WORKER_PER_S = 5_000

TOP_K = 5
LISTENER = "listener, sampled request"
EMPTY = "  floor: empty timed region"
INC = "  floor: Counter.inc()"
WORKER_ADD_BATCH = 500  # the producer's default batch_size, so the XADD-only row writes like the flusher
CONTENT_OFF = "content_off: judged in the service (offline judge)"

# ------------------------------------------------------------------------------------------- workload

# English prose with the numbers real documentation carries (versions, ports, codes, durations), so the
# digit-led redaction patterns find candidates to reject, as they would in production text.
_PROSE = (
    "the ingestion service reads product manuals support tickets and release notes for version 2.4 and "
    "splits them into passages of about 300 tokens each passage is embedded with a 768 dimension model and "
    "stored in the vector index on port 6333 when a user asks why requests fail with error 401 after the "
    "api key rotation the retriever returns the five closest passages ranked by cosine similarity the "
    "cache keeps old keys for up to 10 minutes so clients see failures until the ttl of 600 seconds expires "
    "operators can restart the worker pool or lower the ttl in the settings file released on 2024-03-18"
)
_WORDS = _PROSE.split(" ")
# ~150 words per chunk (~900 characters), a different rotation per chunk.
_TEXTS = tuple(" ".join(_WORDS[(i * 17 + j) % len(_WORDS)] for j in range(150)) for i in range(TOP_K))
_SCORES = tuple(round(0.92 - 0.07 * i, 2) for i in range(TOP_K))
_QUESTION = "Why do requests fail with 401 right after I rotate the API key?"
_ANSWER = (
    "Restart the ingestion worker after rotating the API key; the old key is cached for up to ten "
    "minutes, which is why the first requests after rotation fail with 401."
)
_MODEL = "gpt-4o-mini-2024-07-18"


def make_run(rng: random.Random, i: int, service: str, distinct: bool = False) -> Run:
    """A finished run as the pipeline wrapper leaves it: ids, 5 chunk dicts, answer, usage, timings.

    ``distinct`` gives every chunk of every run its own text (a unique tail), so no chunk is ever redacted
    from the cache: a service whose chunks never repeat.
    """
    run = Run(service, question=_QUESTION, route="/ask")
    run.trace_id = f"{rng.getrandbits(128):032x}"
    run.span_id = f"{rng.getrandbits(64):016x}"
    # A fresh list of fresh dicts per run, as a vector store client returns (the texts are shared).
    run.retrieved = [
        {
            "id": f"doc-{(i * TOP_K + k) % 10_000}",
            "text": f"{_TEXTS[k]} (passage {i}.{k})" if distinct else _TEXTS[k],
            "score": _SCORES[k],
        }
        for k in range(TOP_K)
    ]
    run.answer = _ANSWER
    run.model = _MODEL
    run.usage = Usage(input_tokens=1_250, output_tokens=42)
    run.cost_usd = 0.00021
    run.ttft = 0.21
    run.durations = {"request": 0.83, "retrieve": 0.05, "generate": 0.77}
    return run


def make_runs(n: int, service: str, seed: int, distinct: bool = False) -> list[Run]:
    rng = random.Random(seed)
    return [make_run(rng, i, service, distinct) for i in range(n)]


class NoopJudge:
    """Scores nothing: what remains is the queue's own cost per sample."""

    name = "noop"
    version = "1"

    def score(self, sample: Sample) -> Verdict:
        return Verdict({"x": 1.0})


# ------------------------------------------------------------------------------------------- redis-server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if the benchmark dies without running its ``finally``."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class RedisServer:
    """A throw-away ``redis-server`` on 127.0.0.1: no RDB, no AOF, its files in a temporary directory."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir: str | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="ragwatch-bench-redis-")
        self.port = free_port()
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")]
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Started before any thread of ours exists, so a preexec_fn is safe here.
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        deadline = time.monotonic() + 10
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1, socket_connect_timeout=0.2)
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self.proc.returncode}; see {self.dir}/redis.log")
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server did not answer on port {self.port}") from None
                    time.sleep(0.02)
        finally:
            client.close()

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server so far (Linux ``/proc``; NaN elsewhere)."""
        if self.proc is None:
            return float("nan")
        try:
            with open(f"/proc/{self.proc.pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return float("nan")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


@dataclass
class Spent:
    """Wall time and CPU (this process, all threads; and redis-server) over one measured interval."""

    wall: float = 0.0
    cpu: float = 0.0
    redis_cpu: float = 0.0

    def cores(self) -> str:
        return f"{self.cpu / self.wall:.2f} / {self.redis_cpu / self.wall:.2f}" if self.wall > 0 else "—"


@contextlib.contextmanager
def measured(server: RedisServer) -> Iterator[Spent]:
    usage = Spent()
    cpu0, redis0, t0 = time.process_time(), server.cpu_seconds(), time.perf_counter()
    try:
        yield usage
    finally:
        usage.wall = time.perf_counter() - t0
        usage.cpu = time.process_time() - cpu0
        usage.redis_cpu = server.cpu_seconds() - redis0


# ------------------------------------------------------------------------------------------- helpers


def percentile(sorted_ns: Sequence[int], q: float) -> float:
    """Nearest-rank percentile of sorted samples."""
    if not sorted_ns:
        return float("nan")
    k = max(0, min(len(sorted_ns) - 1, round(q / 100 * len(sorted_ns) + 0.5) - 1))
    return float(sorted_ns[k])


def metric(registry: CollectorRegistry, name: str, **labels: str) -> int:
    value = registry.get_sample_value(name, labels)
    return int(value or 0)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def watching(url: str, service: str, n: int, **settings: Any) -> Iterator[tuple[RagWatch, CollectorRegistry]]:
    """A RagWatch that samples every request, with no effective ceiling and a buffer that never drops.

    On the way out (also on Ctrl-C or an error) whatever is still buffered is discarded — cleared by hand so
    that ``close()`` neither waits to send it nor counts it as lost — and the flusher is stopped while Redis
    is still up.
    """
    registry = CollectorRegistry()
    if "degraded_mode" in Settings.model_fields:  # its flag-polling thread is not part of what is measured
        settings.setdefault("degraded_mode", False)
    rw = RagWatch(
        service=service,
        registry=registry,
        tracing=False,
        redis_url=url,
        sample_rate=1.0,
        sample_max_per_second=1e9,
        buffer_size=max(1_000_000, 2 * n),
        queue_maxlen=max(100_000, 2 * n),
        **settings,
    )
    try:
        yield rw, registry
    finally:
        if rw.producer is not None:
            rw.producer._buffer.clear()
        rw.close(timeout=10)


# ------------------------------------------------------------------------------------------- 1. enqueue


@dataclass
class Timed:
    name: str
    op: Callable[[list[Run], list[int]], None]
    samples: list[int] = field(default_factory=list)


def enqueue_cost(server: RedisServer, calls: int, batch: int, warmup: int) -> dict[str, Any]:
    service = "bench-enqueue"
    with watching(server.url, service, calls + warmup) as (rw, registry):
        result = _enqueue_cost(server, rw, registry, calls, batch, warmup)
    redis_call(server, lambda client: client.flushdb())
    return result


def _enqueue_cost(
    server: RedisServer, rw: RagWatch, registry: CollectorRegistry, calls: int, batch: int, warmup: int
) -> dict[str, Any]:
    service = rw.service
    listener = rw.listeners[0]
    if getattr(listener, "__qualname__", "") != "RagWatch._setup_sampling.<locals>.sample":
        raise SystemExit(f"rw.listeners[0] is {listener!r}, not the sampling listener: update this benchmark")
    progress(f"[enqueue] building {calls + warmup:,} runs")
    runs = make_runs(calls + warmup, service, seed=1)
    clock = time.perf_counter_ns

    def call_listener(batch_runs: list[Run], out: list[int]) -> None:
        append = out.append
        for run in batch_runs:
            t0 = clock()
            listener(run)
            append(clock() - t0)

    floor_deque: deque[tuple[Run, str]] = deque(maxlen=max(1_000_000, 2 * (calls + warmup)))

    def deque_append(batch_runs: list[Run], out: list[int]) -> None:
        append, push = out.append, floor_deque.append
        for run in batch_runs:
            t0 = clock()
            push((run, "rate"))
            append(clock() - t0)

    inc = Counter("bench_floor", "A floor.", ["service", "decision", "reason"], registry=CollectorRegistry())
    inc = inc.labels(service, "sampled", "rate").inc

    def counter_inc(batch_runs: list[Run], out: list[int]) -> None:
        append = out.append
        for _run in batch_runs:
            t0 = clock()
            inc()
            append(clock() - t0)

    def empty(batch_runs: list[Run], out: list[int]) -> None:
        append = out.append
        for _run in batch_runs:
            t0 = clock()
            append(clock() - t0)

    rows = [
        Timed(LISTENER, call_listener),
        Timed("  floor: deque.append((run, reason))", deque_append),
        Timed(INC, counter_inc),
        Timed(EMPTY, empty),
    ]
    producer = rw.producer
    assert producer is not None
    scratch: list[int] = []
    for row in rows:  # warm-up; the first listener call starts the flusher
        row.op(runs[:warmup], scratch)
    if not producer.flush(timeout=120):  # connected and writing before the clock starts
        raise SystemExit("enqueue: the warm-up samples did not reach Redis")
    timed = runs[warmup:]
    gc.collect()
    gc.freeze()  # the pre-built runs are the benchmark's, not the host's: keep them out of GC passes
    progress(f"[enqueue] timing {calls:,} calls per row, interleaved in batches of {batch:,}")
    try:
        with measured(server) as during:
            for r, start in enumerate(range(0, calls, batch)):
                chunk = timed[start : start + batch]
                shift = r % len(rows)
                for row in rows[shift:] + rows[:shift]:
                    row.op(chunk, row.samples)
    finally:
        gc.unfreeze()
    # What is still buffered is discarded (by `watching`), not drained: draining would take minutes and
    # measure again what the flusher measurement measures.
    sent = metric(registry, SAMPLES_SENT + "_total", service=service) - warmup
    backlog = producer.pending()
    lost = {
        reason: metric(registry, SAMPLES_DROPPED + "_total", service=service, reason=reason)
        for reason in ("buffer_full", "encode_error")
    }
    decided = metric(registry, SAMPLING_DECISIONS + "_total", service=service, decision="sampled", reason="rate")
    total = calls + warmup
    if decided != total or any(lost.values()):
        raise SystemExit(f"enqueue: expected {total:,} sampled and none dropped; got {decided:,} and {lost}")
    stats: dict[str, Any] = {}
    for row in rows:
        s = sorted(row.samples)
        stats[row.name.strip()] = {
            "n": len(s),
            "p50_ns": percentile(s, 50),
            "p99_ns": percentile(s, 99),
            "p999_ns": percentile(s, 99.9),
            "mean_ns": sum(s) / len(s),
        }
    return {
        "calls": calls,
        "batch": batch,
        "warmup": warmup,
        "rows": [row.name for row in rows],
        "stats": stats,
        "timing_seconds": during.wall,
        "sent_while_timing": sent,
        "backlog_after_timing": backlog,
        "process_cores_while_timing": during.cpu / during.wall,
        "samples_ns": {row.name.strip(): row.samples for row in rows},
    }


# ------------------------------------------------------------------------------------------- 2. flusher


def flusher_throughput(
    server: RedisServer, n: int, redact: bool, distinct: bool = False, judged: bool = False
) -> dict[str, Any]:
    """``judged``: ``content_off`` on Redis, where the service also judges each run with the default offline
    judge before sending it textless with its scores (``scoring.embedded.PreScorer``: the flusher hands the
    run to its judging threads), budget lifted; offered in chunks its judging queue holds, so all are judged."""
    name = "redaction on" if redact else "redaction off (redact=())"
    service = "bench-flush-redact" if redact else "bench-flush-plain"
    if distinct:
        name += ", every chunk text distinct"
        service += "-distinct"
    options: dict[str, Any] = {} if redact else {"redact": ()}
    if judged:
        name = CONTENT_OFF
        service += "-content-off"
        options |= {"content_off": True, "scoring_max_per_second": 1e9}
    with watching(server.url, service, n, **options) as (rw, registry):
        producer = rw.producer
        assert producer is not None
        build = producer._build  # the function RagWatch built: build_sample + encode_sample, redactor on or off
        # judged: the build hands the run to the judging threads, the payload is read back from Redis below
        sizes = [] if judged else [len(build(run, "rate")) for run in make_runs(200, service, seed=2)]
        stage = rw._prescorer.stage if judged and rw._prescorer is not None else None
        chunk = stage.size if stage is not None else n  # no more than the judging queue holds: none unscored
        warm = make_runs(50 if judged else 1_000, service, seed=3)
        for run in warm:  # starts the flusher thread and opens the connection
            producer.offer(run, "rate")
        if not producer.flush(timeout=60):
            raise SystemExit("flusher: warm-up did not drain")
        runs = make_runs(n, service, seed=4, distinct=distinct)
        gc.collect()
        progress(f"[flusher] {name}: offering {n:,} runs, then flush()")
        offer = producer.offer
        with measured(server) as used:
            done = True
            for start in range(0, n, chunk):
                for run in runs[start : start + chunk]:
                    offer(run, "rate")
                done = producer.flush(timeout=600) and done
        sent = metric(registry, SAMPLES_SENT + "_total", service=service) - len(warm)
    length = redis_call(server, lambda client: client.xlen(Keys(service).samples))
    if judged:
        timed = [fields[FIELD.encode()] for _, fields in redis_call(server, lambda c: c.xrange(Keys(service).samples))]
        timed = timed[-n:]
        unscored = sum("scores" not in json.loads(payload)["scored"] for payload in timed)
        if unscored:
            raise SystemExit(f"flusher: {unscored:,} of {n:,} content_off samples went unscored")
        sizes = [len(payload) for payload in timed]
    redis_call(server, lambda client: client.flushdb())
    if not done or sent != n or length != n + len(warm):
        raise SystemExit(f"flusher: expected {n:,} samples in the stream; sent={sent:,} stream={length:,} ok={done}")
    return {
        "name": name,
        "n": n,
        "seconds": used.wall,
        "per_s": n / used.wall,
        "bytes_per_sample": sum(sizes) / len(sizes),
        "cpu_seconds": used.cpu,
        "redis_cpu_seconds": used.redis_cpu,
        "cores": used.cores(),
    }


def redis_call(server: RedisServer, call: Callable[[Any], Any]) -> Any:
    """One command on a short-lived connection of our own (checks and clean-up, never timed)."""
    client = redis.Redis.from_url(server.url)
    try:
        return call(client)
    finally:
        client.close()


def encoded_samples(n: int, service: str) -> Iterator[bytes]:
    """``n`` distinct encoded samples (own sample ids) built the way the flusher builds them."""
    sample = build_sample(make_runs(1, service, seed=5)[0], reason="rate", limits=Limits(), redact=Redactor())
    for _ in range(n):
        sample.sample_id = uuid.uuid4().hex
        yield encode_sample(sample)


def prefill(server: RedisServer, queue: Queue, n: int) -> tuple[Spent, float]:
    """Write ``n`` pre-encoded samples with ``queue.add`` in batches: (what the writes took, mean bytes)."""
    payloads = list(encoded_samples(n, queue.service))
    with measured(server) as used:
        for start in range(0, n, WORKER_ADD_BATCH):
            queue.add(payloads[start : start + WORKER_ADD_BATCH])
    return used, sum(map(len, payloads)) / n


# ------------------------------------------------------------------------------------------- 3. worker


def worker_throughput(server: RedisServer, n: int, judge: Any, with_metrics: bool, name: str) -> dict[str, Any]:
    service = f"bench-worker-{judge.name}{'-metrics' if with_metrics else ''}"
    queue = open_queue(server.url, service, maxlen=max(100_000, 2 * n), scores_maxlen=max(100_000, 2 * n))
    try:
        progress(f"[worker] {name}: pre-filling the stream with {n:,} samples")
        write, size = prefill(server, queue, n)
        metrics = families(WorkerMetrics, CollectorRegistry()) if with_metrics else None
        worker = Worker(queue, [judge], concurrency=1, batch=256, block_ms=50, metrics=metrics)
        gc.collect()
        progress(f"[worker] {name}: work(burst=True)")
        with measured(server) as used:
            processed = worker.work(burst=True)
        if worker._stop.is_set():
            raise KeyboardInterrupt  # Ctrl-C reached the worker's own handler: the run was cut short
        stats = queue.stats()
        totals = queue.totals()
        scored = min(count for count, _sum in totals.values()) if totals else 0
        if processed != n or scored != n or stats.lag or stats.pending or stats.dead:
            raise SystemExit(f"worker: expected {n:,} scored; processed={processed:,} scored={scored:,} {stats}")
    finally:
        queue.close()
        redis_call(server, lambda client: client.flushdb())
    return {
        "name": name,
        "n": n,
        "seconds": used.wall,
        "per_s": n / used.wall,
        "cpu_seconds": used.cpu,
        "redis_cpu_seconds": used.redis_cpu,
        "cores": used.cores(),
        "prefill_seconds": write.wall,
        "prefill_per_s": n / write.wall,
        "prefill_cores": write.cores(),
        "prefill_bytes_per_sample": size,
    }


# ------------------------------------------------------------------------------------------- output


def header_lines(redis_binary: str) -> list[str]:
    affinity = usable_cpus()
    version = dist_version

    try:
        server = subprocess.run([redis_binary, "--version"], capture_output=True, text=True, timeout=10).stdout
        server_version = next((w.split("=", 1)[1] for w in server.split() if w.startswith("v=")), server.strip())
    except (OSError, subprocess.SubprocessError):
        server_version = "?"
    cpu_model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        cpu_model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    now = dt.datetime.now(dt.timezone.utc).astimezone()
    return [
        f"date:    {now.isoformat(timespec='seconds')}",
        f"python:  {platform.python_implementation()} {sys.version.split()[0]} on {platform.platform()}",
        f"cpus:    {os.cpu_count()} × {cpu_model} (usable by this process: {affinity})",
        f"ragwatch {ragwatch.__version__}, redis-server {server_version} (local, loopback TCP), "
        f"redis-py {version('redis')}, orjson {version('orjson')}, prometheus-client {version('prometheus-client')}",
        f"ragwatch source: {source_fingerprint()}",
        f"load:    {load_average()} (1/5/15-min load average at start; other busy processes skew every row)",
    ]


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(
    enqueue: dict[str, Any], flush: list[dict[str, Any]], xadd: dict[str, Any], work: list[dict[str, Any]]
) -> None:
    dash = "—"
    rows: list[list[str]] = []
    for name in enqueue["rows"]:
        st = enqueue["stats"][name.strip()]
        target = f"p50 ≤ {TARGET_ENQUEUE_NS:,} ns" if not name.startswith(" ") else dash
        rows.append(
            [
                f"1 {name}" if not name.startswith(" ") else name,
                f"{st['n']:,}",
                f"{st['p50_ns']:,.0f}",
                f"{st['p99_ns']:,.0f}",
                f"{st['p999_ns']:,.0f}",
                dash,
                dash,
                dash,
                target,
            ]
        )
    rows.append([])
    for r in flush:
        rows.append(
            [
                f"2 flusher, {r['name']}",
                f"{r['n']:,}",
                dash,
                dash,
                dash,
                f"{r['per_s']:,.0f}",
                f"{r['bytes_per_sample']:,.0f}",
                r["cores"],
                f"≥ {TARGET_FLUSH_PER_S:,}/s" if r["name"] == "redaction on" else dash,
            ]
        )
    rows.append(
        [
            f"  queue.add only (pre-encoded, {WORKER_ADD_BATCH}/call)",
            f"{xadd['n']:,}",
            dash,
            dash,
            dash,
            f"{xadd['per_s']:,.0f}",
            f"{xadd['bytes_per_sample']:,.0f}",
            xadd["cores"],
            dash,
        ]
    )
    rows.append([])
    for r in work:
        rows.append(
            [
                f"3 worker, {r['name']}",
                f"{r['n']:,}",
                dash,
                dash,
                dash,
                f"{r['per_s']:,.0f}",
                dash,
                r["cores"],
                f"≥ {TARGET_WORKER_PER_S:,}/s/core" if r["name"] == "trivial judge" else dash,
            ]
        )
    print_table(
        "ragwatch sampling path: request thread → in-process buffer → flusher → Redis Stream → worker",
        [
            "measurement",
            "n",
            "p50 ns",
            "p99 ns",
            "p99.9 ns",
            "samples/s",
            "bytes/sample",
            "cores: bench/redis",
            "target",
        ],
        rows,
    )

    st = enqueue["stats"]
    listener = st[LISTENER.strip()]["p50_ns"]
    floor = st[EMPTY.strip()]["p50_ns"]
    inc = st[INC.strip()]["p50_ns"]
    print(
        f"enqueue cost p50 = {listener:,.0f} ns ({listener - floor:,.0f} ns net of the empty timed region; "
        f"{listener / inc:.1f}× the Counter.inc timed alongside), target ≤ {TARGET_ENQUEUE_NS:,} ns: "
        f"{verdict(listener <= TARGET_ENQUEUE_NS)}"
    )
    on = flush[0]
    print(
        f"flusher throughput, redaction on = {on['per_s']:,.0f} samples/s, target ≥ {TARGET_FLUSH_PER_S:,}/s: "
        f"{verdict(on['per_s'] >= TARGET_FLUSH_PER_S)}"
    )
    trivial = work[0]
    print(
        f"worker throughput, trivial judge = {trivial['per_s']:,.0f} samples/s on one process (one core), "
        f"target ≥ {TARGET_WORKER_PER_S:,}/s/core: {verdict(trivial['per_s'] >= TARGET_WORKER_PER_S)}"
    )
    if len(flush) > 1:
        off = flush[1]
        share = 1 - (1 / off["per_s"]) / (1 / on["per_s"])
        print(
            f"(redaction is {share:.0%} of the flusher's time per sample: "
            f"{1e6 / on['per_s']:.1f} µs with it, {1e6 / off['per_s']:.1f} µs without)"
        )
    if len(flush) > 2:
        print(f"(flusher with every chunk text distinct, redaction on: {flush[2]['per_s']:,.0f} samples/s)")
    judged = next((r for r in flush if r["name"] == CONTENT_OFF), None)
    if judged is not None:
        per, plain = judged["cpu_seconds"] / judged["n"], on["cpu_seconds"] / on["n"]
        print(
            f"(content_off on Redis: the service spends {per * 1e3:.1f} ms of CPU per sampled request "
            f"judging it on its judging threads, {per / plain:,.0f}× the plain build's {plain * 1e6:.0f} µs; the "
            "flusher only hands the run over, and the request thread's part is the same producer.offer as row 1)"
        )
    noop = next((r for r in work if r["name"].startswith("no-op")), None)
    if noop is not None:
        print(
            f"(worker: {1e6 / noop['per_s']:.0f} µs per sample is the queue itself (no-op judge), "
            f"{1e6 / trivial['per_s'] - 1e6 / noop['per_s']:.0f} µs the trivial judge)"
        )
    offline = next((r for r in work if r["name"].startswith("offline")), None)
    if offline is not None:
        print(f"(worker with the default offline judge: {offline['per_s']:,.0f} samples/s on one process)")
    print(
        f"(while the enqueue rows were timed ({enqueue['timing_seconds']:.1f} s) the flusher wrote "
        f"{enqueue['sent_while_timing']:,} samples to Redis and the process used "
        f"{enqueue['process_cores_while_timing']:.2f} cores; {enqueue['backlog_after_timing']:,} were left "
        "buffered, none dropped, and were discarded)"
    )


# ------------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller counts, for a fast check")
    parser.add_argument("--calls", type=int, help="timed listener calls (default 200,000; --quick 20,000)")
    parser.add_argument("--burst", type=int, help="runs offered to the flusher (default 50,000; --quick 5,000)")
    parser.add_argument("--samples", type=int, help="samples per worker run (default 50,000; --quick 5,000)")
    parser.add_argument("--batch", type=int, default=1_000, help="enqueue calls per row per round")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    parser.add_argument("--json", metavar="PATH", help="write raw results (enqueue samples in ns) here")
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    calls = args.calls or 200_000 // scale
    burst = args.burst or 50_000 // scale
    samples = args.samples or 50_000 // scale
    warmup = max(1_000, calls // 100)

    if not os.path.exists(args.redis_server):
        raise SystemExit(f"redis-server not found at {args.redis_server} (use --redis-server PATH)")
    header = header_lines(args.redis_server)
    for line in header:
        print(line)
    server = RedisServer(args.redis_server)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # run `finally`
    try:
        server.start()
        progress(f"redis-server on port {server.port} (pid {server.proc.pid if server.proc else '?'})")
        enqueue = enqueue_cost(server, calls, args.batch, warmup)
        flush = [
            flusher_throughput(server, burst, redact=True),
            flusher_throughput(server, burst, redact=False),
            flusher_throughput(server, burst, redact=True, distinct=True),
            # The offline judge takes milliseconds per sample: fewer runs, compared per sample.
            flusher_throughput(server, max(100, burst // 50), redact=True, judged=True),
        ]
        work = [
            worker_throughput(server, samples, TrivialJudge(), False, "trivial judge"),
            worker_throughput(server, samples, NoopJudge(), False, "no-op judge"),
            worker_throughput(server, samples, TrivialJudge(), True, "trivial + WorkerMetrics"),
            # The default judge does real work per sample (a few ms): fewer samples, reported for scale.
            worker_throughput(server, max(500, samples // 25), OfflineJudge(), False, "offline judge (default)"),
        ]
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
    first = work[0]
    xadd = {
        "n": samples,
        "per_s": first["prefill_per_s"],
        "cores": first["prefill_cores"],
        "bytes_per_sample": first["prefill_bytes_per_sample"],
    }
    print()
    report(enqueue, flush, xadd, work)
    print(f"(load average at the end: {load_average()})")
    if args.json:
        payload = {"header": header, "enqueue": enqueue, "flusher": flush, "queue_add": xadd, "worker": work}
        Path(args.json).write_text(json.dumps(payload))
        print(f"raw results written to {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; redis-server stopped", file=sys.stderr)
        sys.exit(130)
