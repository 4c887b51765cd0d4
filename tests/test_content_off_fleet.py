"""``content_off`` with a Redis queue: the service judges its own samples, workers apply the scores.

Before (issue 29, item 7): samples reached Redis without text, so ``ragwatch worker`` acknowledged them
unscored — no scores, no windows, no degraded mode for a fleet under GDPR. Now the service judges each
sampled run and sends the textless sample with its scores; the worker validates and applies them without
judging. Real ``redis-server`` (tests/conftest.py), the real ``ragwatch worker`` command, the real offline
judge.

Judging happens on judging threads of the service's own, never on the producer's flusher thread: a slow
judge (the LLM judge: seconds per call) used to hold back every other sample's send behind each judgement.
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

import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.metrics.catalog import WorkerMetrics, families
from ragwatch.queue.contract import Queue
from ragwatch.queue.factory import open_queue
from ragwatch.queue.keys import Keys
from ragwatch.queue.producer import RELEASE_GRACE_S
from ragwatch.queue.redis import FIELD
from ragwatch.sampling.sample import Sample
from ragwatch.scoring.embedded import BACKLOG_PER_THREAD
from ragwatch.scoring.judges.base import Verdict
from ragwatch.scoring.worker import Worker
from tests.conftest import sample as metric
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent
SERVICE = "kb-gdpr"
QUESTION = "How long does a refund take after I return an order, Zhang Wei?"
ANSWER = "Refunds are issued within 14 days of the return reaching the warehouse."
GOOD = [
    "Refunds are issued within 14 days of the return reaching our warehouse in Leeds.",
    "To request a refund, open the order page and choose Return items; a prepaid label is emailed to you.",
    "Refunds go back to the original payment method; store credit is offered for gift orders.",
]
BAD = [
    "The office canteen serves vegetarian lasagne every Thursday at noon.",
    "Parking permits for the north car park are renewed each January by facilities.",
    "The quarterly all-hands meeting moved to the Birch auditorium on the second floor.",
]
#: What no Redis key may hold: words of the question, the answer, every chunk, and the chunk ids.
TEXTS = ("Zhang", "refund", "Refund", "warehouse", "Leeds", "lasagne", "Parking", "Birch", "handbook/")
#: The SLA both sides use: offline CP@3 is 0.63 on GOOD and 0.0 on BAD, so 0.3 separates them.
SLA = {
    "sla_threshold": 0.3,
    "sla_min_samples": 5,
    "sla_window_samples": 10,
    "sla_hold_seconds": 0,
    "sla_min_dwell_seconds": 0,
}


def watch(redis_url: str, registry: CollectorRegistry, **options: Any) -> ragwatch.RagWatch:
    settings: dict[str, Any] = {
        "registry": registry,
        "redis_url": redis_url,
        "tracing": False,
        "content_off": True,
        "sample_rate": 1.0,
        "sample_max_per_second": 1e6,
        "scoring_max_per_second": 1e6,
        "flush_interval": 0.02,
        "degraded_refresh_seconds": 0.1,
        **SLA,
    }
    return ragwatch.RagWatch(SERVICE, **{**settings, **options})


def pipeline(rw: ragwatch.RagWatch, broken: threading.Event | None = None) -> Any:
    """The README's shape: a retriever (bad chunks once ``broken`` is set), an LLM, and the pipeline."""
    broken = broken or threading.Event()

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        texts = BAD if broken.is_set() else GOOD
        return [{"id": f"handbook/{i}.md", "text": t, "metadata": {"owner": "Zhang Wei"}} for i, t in enumerate(texts)]

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str) -> dict[str, Any]:
        return {"choices": [{"message": {"content": ANSWER}}], "usage": {"prompt_tokens": 9, "completion_tokens": 9}}

    @rw.pipeline
    def answer(question: str) -> str:
        retrieve(question)
        return str(generate(question)["choices"][0]["message"]["content"])

    return answer


def worker_command(redis_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """``ragwatch worker --burst`` as an operator runs it, configured by the same variables as the service."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    env |= {
        "RAGWATCH_REDIS_URL": redis_url,
        "RAGWATCH_SERVICE": SERVICE,
        "RAGWATCH_CONTENT_OFF": "true",
        **{f"RAGWATCH_{k.upper()}": str(v) for k, v in SLA.items()},
    }
    out = subprocess.run(
        [sys.executable, "-m", "ragwatch", "worker", "--burst", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def every_value(redis_url: str) -> bytes:
    """Every byte Redis holds, key by key, whatever the type (what an auditor would scan)."""
    client = redis.Redis.from_url(redis_url)
    found: list[bytes] = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        found.append(key)
        if kind == b"string":
            found.append(client.get(key) or b"")
        elif kind == b"hash":
            found += [b for kv in client.hgetall(key).items() for b in kv]
        elif kind == b"list":
            found += client.lrange(key, 0, -1)
        elif kind == b"set":
            found += list(client.smembers(key))
        elif kind == b"zset":
            found += [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        elif kind == b"stream":
            found += [b for _, fields in client.xrange(key) for kv in fields.items() for b in kv]
    client.close()
    return b"\n".join(found)


def drain(redis_url: str) -> tuple[Queue, CollectorRegistry]:
    """The service's samples, read once by a worker whose judge refuses to run (pre-scored entries apply
    without one): the queue and the worker's metrics."""
    queue = open_queue(redis_url, SERVICE)
    registry = CollectorRegistry()
    Worker(queue, [Refusing()], concurrency=0, metrics=families(WorkerMetrics, registry)).work(
        burst=True, max_seconds=30
    )
    return queue, registry


def test_a_content_off_fleet_gets_scores_windows_and_degraded_mode_with_no_text_in_redis(
    redis_url: str, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ragwatch"):
        rw = watch(redis_url, registry)
    warned = [r.getMessage() for r in caplog.records]
    broken = threading.Event()
    answer = pipeline(rw, broken)
    try:
        for i in range(10):
            answer(f"{QUESTION} #{i}")
        assert rw.flush(30)
        # The worker judges nothing itself: told to use the trivial judge, it would store "answered" scores.
        worker_command(redis_url, "--judge", "trivial")
        queue = open_queue(redis_url, SERVICE)
        good = queue.window("context_precision_3", 100)
        assert len(good) == 10 and all(0.5 < value <= 1.0 for _, value in good)  # the service's offline verdicts
        records = rw.scores(100)
        assert len(records) == 10
        assert all(r["judges"] == [{"name": "offline", "version": r["judges"][0]["version"]}] for r in records)
        assert all("answered" not in r["scores"] and "retrieval_miss" not in r["diagnoses"] for r in records)
        assert not queue.read_mode().degraded

        broken.set()  # the knowledge base breaks: a burst of bad retrievals
        for i in range(10):
            answer(f"{QUESTION} broken #{i}")
        assert rw.flush(30)
        client = redis.Redis.from_url(redis_url)
        sent = [fields[FIELD.encode()] for _, fields in client.xrange(Keys(SERVICE).samples)]
        client.close()
        assert len(sent) == 10
        worker_command(redis_url)
        window = queue.window("context_precision_3", 100)
        assert len(window) == 20 and sum(v < 0.05 for _, v in window) == 10
        assert queue.read_mode().degraded
        wait_for(lambda: rw.degraded)  # every replica reads the shared mode
        assert {r["diagnosis"] for r in rw.scores(10)} == {"retrieval_miss"}

        # Apply once per sample id: the same samples delivered again change no window.
        queue.add(sent[:5])
        out = worker_command(redis_url)
        assert orjson.loads(out.stdout.splitlines()[-1])["handled"] == 5
        assert len(queue.window("context_precision_3", 100)) == 20
        queue.close()

        raw = every_value(redis_url)
        assert b'"context_precision_3"' in raw  # the scores are there…
        for text in TEXTS:
            assert text.encode() not in raw, text  # …and none of the text
        assert warned == []  # no "workers acknowledge them unscored" at start-up: it is no longer true
    finally:
        rw.close(2)


class Refusing:
    """A worker-side judge that fails the test if a worker ever judges a sample the service scored."""

    name = "refusing"
    version = "1"
    calls = 0

    def score(self, sample: Sample) -> Verdict:
        Refusing.calls += 1
        raise AssertionError("a pre-scored sample was judged again")


def test_the_service_judges_on_its_judging_threads_with_its_own_judges_and_the_worker_never_judges(
    redis_url: str, registry: CollectorRegistry
) -> None:
    rw = watch(redis_url, registry, judges=("trivial",))
    assert rw._prescorer is not None
    seen: list[str] = []
    judge = rw._prescorer.judges[0]
    original = judge.score

    def recording(sample: Sample) -> Verdict:
        seen.append(threading.current_thread().name)
        return original(sample)

    judge.score = recording  # type: ignore[method-assign]
    answer = pipeline(rw)
    try:
        request_thread = threading.current_thread().name
        for i in range(4):
            answer(f"{QUESTION} #{i}")
        assert seen == []  # nothing judged on the request thread, during the request
        assert rw.flush(30)
        assert len(seen) == 4 and all(name.startswith("ragwatch-judge-") for name in seen)  # not the flusher
        assert request_thread not in seen
    finally:
        rw.close(2)
    queue = open_queue(redis_url, SERVICE)
    worker_registry = CollectorRegistry()
    metrics = families(WorkerMetrics, worker_registry)
    Refusing.calls = 0
    assert Worker(queue, [Refusing()], concurrency=0, metrics=metrics).work(burst=True, max_seconds=30) == 4
    assert Refusing.calls == 0
    records = [orjson.loads(r) for r in queue.recent_scores(10)]
    assert [r["judges"][0]["name"] for r in records] == ["trivial"] * 4  # the service's settings chose it
    assert all(r["scores"] == {"answered": 1.0, "context_returned": 1.0} for r in records)
    assert all(r["question"] is None and r["answer"] is None and r["chunk_ids"] == ["#1", "#2", "#3"] for r in records)
    assert metric(worker_registry, "ragwatch_worker_entries_total", service=SERVICE, outcome="scored") == 4
    queue.close()


def test_over_the_services_budget_samples_go_unscored_and_counted(redis_url: str, registry: CollectorRegistry) -> None:
    rw = watch(redis_url, registry, scoring_max_per_second=0.001, judges=("trivial",))  # one token, then none
    answer = pipeline(rw)
    try:
        for i in range(5):
            answer(f"{QUESTION} #{i}")
        assert rw.flush(30)
    finally:
        rw.close(2)
    queue, worker_registry = drain(redis_url)
    assert len(queue.recent_scores(10)) == 1
    assert metric(worker_registry, "ragwatch_scoring_skipped_total", service=SERVICE, reason="budget") == 4
    assert queue.stats().pending == 0  # acknowledged, not left for another worker to judge
    queue.close()


def test_a_sample_over_the_judge_time_budget_in_the_service_is_dead_lettered_with_the_reason(
    redis_url: str, registry: CollectorRegistry
) -> None:
    rw = watch(redis_url, registry, judge_time_budget_s=1e-9)  # the offline judge checks it after a claim
    answer = pipeline(rw)
    try:
        answer(QUESTION)
        assert rw.flush(30)
    finally:
        rw.close(2)
    queue, worker_registry = drain(redis_url)
    assert metric(worker_registry, "ragwatch_worker_entries_total", service=SERVICE, outcome="over_time_budget") == 1
    (dead,) = queue.dead_letters(10)
    assert "over the judge time budget" in str(dead) and "Zhang" not in str(dead)
    assert queue.recent_scores(10) == []
    queue.close()


def _hostile(good: dict[str, Any]) -> list[bytes]:
    """Entries a foreign or compromised producer could write, each a copy of a good one with its ``scored``
    object broken in one way (and its own sample id), plus two the JSON decoder itself refuses."""

    def variant(i: int, **scored: Any) -> bytes:
        return orjson.dumps({**good, "sample_id": f"hostile-{i}", "scored": {**good["scored"], **scored}})

    scores = good["scored"]["scores"]
    deep: Any = {}
    for _ in range(200):  # what orjson still writes and reads; past the 12 levels a judge's details need
        deep = {"d": deep}
    cases = [
        {"scores": {**scores, "evil\nname": 0.5}},
        {"scores": {**scores, "answered": 1.5}},
        {"scores": {**scores, "answered": -0.1}},
        {"scores": {**scores, "answered": "0.9"}},
        {"scores": {**scores, "answered": True}},
        {"scores": {}},
        {"diagnoses": ["pwned"]},
        {"diagnoses": []},
        {"details": deep},
        {"judges": None},
        {"judges": [{"name": "x" * 500, "version": "1"}]},
        {"scored_at": "yesterday"},
        {"timings": {"trivial": -1}},
        {"skipped": "whatever"},
        {"failed": "over_time_budget", "error": 123},
    ]
    payloads = [variant(i, **case) for i, case in enumerate(cases)]
    payloads.append(orjson.dumps({**good, "sample_id": "hostile-array", "scored": []}))
    infinite = orjson.dumps({**good, "sample_id": "hostile-inf"})  # a score time of 1e400: JSON, not a float
    payloads.append(infinite.replace(b'"scored_at":', b'"scored_at":1e400,"x":'))
    return payloads


def test_hostile_prescored_entries_are_dead_lettered_and_counted_while_the_good_ones_of_the_batch_apply(
    redis_url: str, registry: CollectorRegistry
) -> None:
    rw = watch(redis_url, registry, judges=("trivial",))
    answer = pipeline(rw)
    try:
        for i in range(3):
            answer(f"{QUESTION} #{i}")
        assert rw.flush(30)
    finally:
        rw.close(2)
    client = redis.Redis.from_url(redis_url)
    good = [orjson.loads(fields[FIELD.encode()]) for _, fields in client.xrange(Keys(SERVICE).samples)]
    client.close()
    assert len(good) == 3 and all(g["scored"]["scores"] == {"answered": 1.0, "context_returned": 1.0} for g in good)
    hostile = _hostile(good[0])
    # A foreign producer's text in the details is applied without it: the scores are valid, the quote goes.
    quoting = {**good[0], "sample_id": "quoting", "scored": {**good[0]["scored"], "details": {"x": {"q": "Zhang"}}}}
    queue = open_queue(redis_url, SERVICE)
    queue.add([*hostile[:8], orjson.dumps(quoting), *hostile[8:]])  # after the service's three: one batch
    worker_registry = CollectorRegistry()
    worker = Worker(queue, [Refusing()], concurrency=2, batch=64, metrics=families(WorkerMetrics, worker_registry))
    assert worker.work(burst=True, max_seconds=30) == 3 + 1 + len(hostile)
    assert Refusing.calls == 0
    outcome = {
        o: metric(worker_registry, "ragwatch_worker_entries_total", service=SERVICE, outcome=o)
        for o in ("scored", "malformed", "dead_lettered", "retry")
    }
    assert outcome == {"scored": 4, "malformed": len(hostile), "dead_lettered": 0, "retry": 0}
    assert len(queue.window("answered", 100)) == 4  # the three good ones and the quoting one, nothing else
    assert len(queue.dead_letters(100)) == len(hostile)
    assert queue.stats().pending == 0
    stored = b"".join(queue.recent_scores(100))
    assert b"Zhang" not in stored and b"evil" not in stored
    exposed = "".join(str(m.samples) for m in worker_registry.collect())
    assert "evil" not in exposed and "pwned" not in exposed  # no hostile label reached the metrics
    queue.close()


def test_the_in_process_scorer_reading_redis_applies_the_services_scores(
    redis_url: str, registry: CollectorRegistry
) -> None:
    """``scoring: in_process`` on Redis: the same process judges before sending and applies after reading."""
    rw = watch(redis_url, registry, scoring="in_process", judges=("trivial",), scoring_max_per_second=0.001)
    assert rw.scorer is not None and rw._prescorer is not None
    assert rw.scorer.judges is rw._prescorer.judges  # loaded once
    assert rw.scorer.worker.admit is None  # the budget was spent judging; applying is not judged again
    answer = pipeline(rw)
    try:
        for i in range(3):
            answer(f"{QUESTION} #{i}")
        assert rw.flush(30)
        wait_for(lambda: len(rw.scores(10)) == 1)  # one token of judging budget: one scored, two skipped
        wait_for(lambda: metric(registry, "ragwatch_scoring_skipped_total", service=SERVICE, reason="budget") == 2)
        assert rw.scores(10)[0]["question"] is None
    finally:
        rw.close(2)


def test_a_judge_failing_in_the_service_dead_letters_the_sample_by_type_name_only(
    redis_url: str, registry: CollectorRegistry
) -> None:
    rw = watch(redis_url, registry, judges=("trivial",))
    assert rw._prescorer is not None

    def failing(sample: Sample) -> Verdict:
        raise ValueError(f"cannot parse {sample.question}")  # an error that quotes the text

    rw._prescorer.judges[0].score = failing  # type: ignore[method-assign]
    answer = pipeline(rw)
    try:
        assert answer(QUESTION) == ANSWER  # the host never sees the judge's failure
        assert rw.flush(30)
    finally:
        rw.close(2)
    queue, worker_registry = drain(redis_url)
    assert metric(worker_registry, "ragwatch_worker_entries_total", service=SERVICE, outcome="dead_lettered") == 1
    (dead,) = queue.dead_letters(10)
    assert "judge_error in the service: ValueError" in str(dead) and "Zhang" not in every_value(redis_url).decode()
    queue.close()


# -- a slow judge: judging never holds back sending --------------------------------------------------------
#: What one held judgement takes unless the test lets it finish sooner: a slow LLM judge's call.
DELAY = 3.0


class Held:
    """The service's judge, slowed: each call waits for :attr:`gate` (at most ``delay`` seconds), then
    judges. :meth:`wait_entered` waits until a call is in flight; :attr:`returned` counts finished calls."""

    def __init__(self, rw: ragwatch.RagWatch, delay: float = DELAY) -> None:
        assert rw._prescorer is not None
        judge = rw._prescorer.judges[0]
        self.original = judge.score
        self.delay = delay
        self.gate = threading.Event()
        self.returned = 0
        self._entered = threading.Semaphore(0)
        judge.score = self  # type: ignore[method-assign]

    def __call__(self, sample: Sample) -> Verdict:
        self._entered.release()
        self.gate.wait(self.delay)
        try:
            return self.original(sample)
        finally:
            self.returned += 1

    def wait_entered(self) -> None:
        assert self._entered.acquire(timeout=15), "no judgement started"


def stream_length(redis_url: str) -> int:
    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.xlen(Keys(SERVICE).samples))
    finally:
        client.close()


def apply_all(redis_url: str) -> CollectorRegistry:
    """A worker that never judges applies everything sent; its registry holds what it counted."""
    queue, worker_registry = drain(redis_url)
    assert queue.stats().pending == 0
    queue.close()
    return worker_registry


def outcome(worker_registry: CollectorRegistry, name: str) -> float:
    return metric(worker_registry, "ragwatch_worker_entries_total", service=SERVICE, outcome=name)


def budget_skips(worker_registry: CollectorRegistry) -> float:
    return metric(worker_registry, "ragwatch_scoring_skipped_total", service=SERVICE, reason="budget")


def test_a_sample_is_sent_promptly_while_a_slow_judgement_is_in_flight(
    redis_url: str, registry: CollectorRegistry
) -> None:
    """Before: the flusher judged, so the unscored sample waited the whole judgement (DELAY) behind it."""
    rw = watch(redis_url, registry, judges=("trivial",), worker_concurrency=1, scoring_max_per_second=0.001)
    held = Held(rw)
    answer = pipeline(rw)
    try:
        answer(f"{QUESTION} #0")  # the one token of judging budget: judged, slowly
        held.wait_entered()
        answer(f"{QUESTION} #1")  # over the budget: unscored by design, its latency and cost still go
        waited = wait_for(lambda: stream_length(redis_url) == 1, timeout=DELAY / 2)
        assert waited < DELAY / 4 and held.returned == 0  # sent while the judgement was still in flight
        held.gate.set()
        assert rw.flush(30)
        assert stream_length(redis_url) == 2 and held.returned == 1
    finally:
        held.gate.set()
        rw.close(2)
    worker_registry = apply_all(redis_url)
    assert outcome(worker_registry, "scored") == 1 and budget_skips(worker_registry) == 1


def test_a_full_judging_queue_sends_its_overflow_unscored_at_once_marked_budget(
    redis_url: str, registry: CollectorRegistry
) -> None:
    """Before: no judging queue; every sample was judged in turn on the flusher, none sent meanwhile."""
    rw = watch(redis_url, registry, judges=("trivial",), worker_concurrency=1)
    assert rw._prescorer is not None
    stage = rw._prescorer.stage
    backlog = BACKLOG_PER_THREAD * 1
    assert (stage.threads, stage.size) == (1, backlog)  # one thread: worker_concurrency
    held = Held(rw)
    answer = pipeline(rw)
    try:
        answer(f"{QUESTION} #0")
        held.wait_entered()  # in flight: the queue behind it is empty
        for i in range(1, 1 + backlog + 3):
            answer(f"{QUESTION} #{i}")
        waited = wait_for(lambda: stream_length(redis_url) == 3, timeout=DELAY / 2)  # the overflow, unscored
        assert waited < DELAY / 4 and held.returned == 0
        assert stage.pending() == 1 + backlog  # the text-bearing runs held: the one judged and the queue
        held.gate.set()
        assert rw.flush(30)
        assert stream_length(redis_url) == 1 + backlog + 3
    finally:
        held.gate.set()
        rw.close(2)
    assert stage.pending() == 0
    worker_registry = apply_all(redis_url)
    assert outcome(worker_registry, "scored") == 1 + backlog
    assert budget_skips(worker_registry) == 3  # counted exactly as a sample over the judging budget


def test_close_gives_judging_its_timeout_then_sends_the_rest_unscored_and_never_twice(
    redis_url: str, registry: CollectorRegistry
) -> None:
    """Before: close() found the flusher stuck in the judge; the runs behind it were dropped (``shutdown``)."""
    rw = watch(redis_url, registry, judges=("trivial",), worker_concurrency=1)
    assert rw._prescorer is not None and rw.producer is not None
    stage = rw._prescorer.stage
    held = Held(rw, delay=60)  # a judgement that will not finish in time
    answer = pipeline(rw)
    try:
        answer(f"{QUESTION} #0")
        held.wait_entered()
        answer(f"{QUESTION} #1")
        answer(f"{QUESTION} #2")
        wait_for(lambda: stage.pending() == 3)  # one in flight, two queued: all handed over by the flusher
        started = time.monotonic()
        rw.close(0.5)
        assert time.monotonic() - started < 0.5 + RELEASE_GRACE_S + 1.0  # not the judge's 60 s
        assert stream_length(redis_url) == 3  # every run went, unscored
        assert rw.producer.pending() == 0 and stage.pending() == 0
        dropped = metric(registry, "ragwatch_samples_dropped_total", service=SERVICE, reason="shutdown")
        assert dropped == 0
        held.gate.set()  # the judgement in flight finishes after the release: thrown away, not sent twice
        wait_for(lambda: held.returned == 1 and not any(t.is_alive() for t in stage._workers))
        assert stream_length(redis_url) == 3
    finally:
        held.gate.set()
        rw.close(2)
    worker_registry = apply_all(redis_url)
    assert outcome(worker_registry, "scored") == 0 and budget_skips(worker_registry) == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_judges_on_judging_threads_of_its_own(redis_url: str, tmp_path: Path) -> None:
    """A judgement in flight in the parent at fork time: the child starts an empty judging stage, judges its
    own samples on its own threads, and its flush waits for none of the parent's."""
    script = tmp_path / "fork.py"
    script.write_text(
        f"""
import os, sys
sys.path.insert(0, {str(ROOT)!r})
from prometheus_client import CollectorRegistry
from tests.test_content_off_fleet import Held, QUESTION, pipeline, watch
from tests.conftest import wait_for
rw = watch({redis_url!r}, CollectorRegistry(), judges=("trivial",), worker_concurrency=1)
held = Held(rw, delay=60)
answer = pipeline(rw)
answer(QUESTION + " parent")
held.wait_entered()  # the parent's judgement is in flight across the fork
pid = os.fork()
if pid == 0:
    held.gate.set()  # the child's judge runs at once (the parent's judgement has no thread here)
    assert rw._prescorer.stage.pending() == 0 and rw.producer.pending() == 0
    answer(QUESTION + " child")
    ok = rw.flush(20)
    names = {{t.name for t in __import__("threading").enumerate()}}
    os._exit(0 if ok and held.returned == 1 and "ragwatch-judge-0" in names else 1)
_, status = os.waitpid(pid, 0)
held.gate.set()
assert rw.flush(20)
rw.close(2)
print("child exit", os.waitstatus_to_exitcode(status))
""",
        encoding="utf-8",
    )
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "child exit 0" in out.stdout
    assert stream_length(redis_url) == 2  # the parent's sample and the child's, each once
    worker_registry = apply_all(redis_url)
    assert outcome(worker_registry, "scored") == 2
