"""The embedded default: a service on memory:// scores its own samples, decides its own degraded mode, and
stays bounded in memory whether or not anything consumes its queue."""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest

import ragwatch
from ragwatch.queue.factory import open_queue
from ragwatch.queue.memory import MemoryQueue
from ragwatch.scoring.embedded import Budget, scores_in_process
from ragwatch.scoring.judges.trivial import TrivialJudge
from ragwatch.scoring.worker import ScoreRecord, Worker
from ragwatch.settings import load_settings
from tests.conftest import hotel_pipeline, sample, wait_for

ROOT = Path(__file__).resolve().parent.parent
CHUNKS = [
    {"id": "travel-1", "text": "Hotels are reimbursed up to 600 CNY per night on business trips.", "score": 0.9},
    {"id": "travel-2", "text": "Business trip hotels above 600 CNY per night need approval.", "score": 0.8},
]


def memory_url() -> str:
    """A queue of this test alone (memory queues are shared by name within the process)."""
    return f"memory://t-{uuid.uuid4().hex[:8]}"


def watched(registry: CollectorRegistry | None, **settings: Any) -> tuple[ragwatch.RagWatch, Any]:
    options: dict[str, Any] = {
        "redis_url": memory_url(),
        "sample_rate": 1.0,
        "sample_max_per_second": 1e6,
        "tracing": False,
        "flush_interval": 0.02,
        "scoring_max_per_second": 1000.0,
    }
    rw = ragwatch.RagWatch("emb", registry=registry, **{**options, **settings})

    return rw, hotel_pipeline(rw, CHUNKS)


def test_memory_service_scores_its_own_samples_with_the_worker_families(registry: CollectorRegistry) -> None:
    rw, answer = watched(registry)
    try:
        for i in range(12):
            answer(f"hotel limit {i}?")
        wait_for(lambda: sample(registry, "ragwatch_worker_entries_total", service="emb", outcome="scored") == 12)
        cp3 = {"service": "emb", "metric": "context_precision_3"}
        wait_for(lambda: sample(registry, "ragwatch_window_samples", **cp3) == 12)
        assert sample(registry, "ragwatch_score_count", **cp3) == 12
        assert 0 < sample(registry, "ragwatch_window_value", **cp3) <= 1
        assert sample(registry, "ragwatch_sla_threshold", **cp3) == 0.65
        assert sample(registry, "ragwatch_sla_threshold", service="emb", metric="faithfulness") == 0.75
        body = generate_latest(registry).decode()
        assert 'ragwatch_diagnoses_total{diagnosis="' in body
        records = rw.scores()
        assert len(records) == 12
        assert set(records[0]) == set(ScoreRecord.__slots__)  # the record the Redis worker stores
        assert records[0]["service"] == "emb" and records[0]["judges"][0]["name"] == "offline"
        report = rw.report()
        assert report.samples == 12
        assert {r.metric: r.samples for r in report.rows}["context_precision_3"] == 12
    finally:
        rw.close(1)


def test_scoring_setting_decides_who_scores() -> None:
    def who(**options: Any) -> bool:
        return scores_in_process(load_settings(None, **options))

    assert who() is True  # auto on memory://
    assert who(redis_url="memory://x") is True
    assert who(redis_url="redis://127.0.0.1:1/0") is False  # auto on Redis: the workers score
    assert who(redis_url="redis://127.0.0.1:1/0", scoring="in_process") is True
    assert who(scoring="off") is False
    assert who(sampling=False) is False
    with pytest.raises(ragwatch.ConfigError, match="scoring"):
        load_settings(None, scoring="sometimes")
    rw = ragwatch.RagWatch("emb-off", registry=None, redis_url=memory_url(), scoring="off")
    assert rw.scorer is None


def test_env_name_of_the_scoring_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGWATCH_SCORING", "off")
    monkeypatch.setenv("RAGWATCH_SCORING_MAX_PER_SECOND", "0.5")
    settings = load_settings(None)
    assert settings.scoring == "off" and settings.scoring_max_per_second == 0.5


def test_budget_is_a_token_bucket() -> None:
    now = [100.0]
    budget = Budget(2.0, clock=lambda: now[0])
    assert [budget() for _ in range(3)] == [True, True, False]  # a burst of at most `rate`
    now[0] += 0.5
    assert [budget(), budget()] == [True, False]  # one token per half second at 2/s
    now[0] += 100
    assert sum(budget() for _ in range(10)) == 2  # idle time does not bank more than the burst


def test_samples_over_the_budget_are_skipped_and_counted(registry: CollectorRegistry) -> None:
    rw, answer = watched(registry, scoring_max_per_second=1.0)
    try:
        for i in range(40):
            answer(f"q{i}")
        assert rw.flush(5)

        def handled() -> float:
            scored = sample(registry, "ragwatch_worker_entries_total", service="emb", outcome="scored")
            skipped = sample(registry, "ragwatch_scoring_skipped_total", service="emb", reason="budget")
            return scored + skipped

        wait_for(lambda: handled() == 40)
        scored = sample(registry, "ragwatch_worker_entries_total", service="emb", outcome="scored")
        assert 1 <= scored <= 5  # a burst of one, then one a second
        assert sample(registry, "ragwatch_scoring_skipped_total", service="emb", reason="budget") == 40 - scored
    finally:
        rw.close(1)


def test_degraded_is_right_from_construction_and_mode_agrees(registry: CollectorRegistry) -> None:
    url = memory_url()
    open_queue(url, "emb").set_override("on")
    rw = ragwatch.RagWatch("emb", registry=registry, redis_url=url, tracing=False)
    try:
        assert rw.degraded is True  # before any request, before any thread
        assert rw.mode.degraded is True and rw.mode.override == "on"
        assert rw.notice is not None
        assert sample(registry, "ragwatch_degraded", service="emb") == 1
    finally:
        rw.close(1)


def test_degraded_is_right_from_the_first_read_on_redis(redis_url: str) -> None:
    open_queue(redis_url, "emb").set_override("on")
    rw = ragwatch.RagWatch("emb", registry=None, redis_url=redis_url, tracing=False)
    try:
        wait_for(lambda: rw.degraded)  # read off the start-up path (issue 29), before any request or thread
        assert rw.mode.degraded is True
        assert rw.scorer is None  # auto on Redis: workers score
    finally:
        rw.close(1)


def test_in_process_scoring_on_redis_joins_the_workers_store(redis_url: str, registry: CollectorRegistry) -> None:
    rw, answer = watched(registry, redis_url=redis_url, scoring="in_process")
    try:
        for i in range(5):
            answer(f"hotel {i}")
        queue = open_queue(redis_url, "emb")
        wait_for(lambda: queue.totals().get("context_precision_3", (0, 0.0))[0] == 5)
        assert len(rw.scores()) == 5  # read back from Redis, as `ragwatch report` would
        assert queue.live_workers(30)  # the in-process scorer heartbeats like any worker
    finally:
        rw.close(1)


def test_in_process_scores_drive_degraded_mode(registry: CollectorRegistry) -> None:
    rw, answer = watched(
        registry, sla_threshold=0.99, sla_margin=0.0, sla_window_samples=10, sla_min_samples=5,
        sla_hold_seconds=0, sla_min_dwell_seconds=0, sla_evaluate_seconds=0.05,
    )  # fmt: skip
    seen: list[bool] = []
    rw.on_transition(lambda old, new: seen.append(new.degraded))
    try:
        for i in range(8):
            answer(f"hotel {i}")
        wait_for(lambda: rw.degraded)
        assert seen == [True]
        assert rw.mode.degraded is True and "context_precision_3" in rw.mode.reason
        assert sample(registry, "ragwatch_degraded_transitions_total", service="emb", to="degraded") == 1
    finally:
        rw.close(1)


def test_on_score_hook_sees_each_record_once_and_its_errors_are_contained() -> None:
    queue = open_queue(memory_url(), "emb")
    seen: list[str] = []

    def boom(record: ScoreRecord) -> None:
        raise RuntimeError("listener bug")

    worker = Worker(
        queue, [TrivialJudge()], concurrency=0, block_ms=20, on_score=[boom, lambda r: seen.append(r.sample_id)]
    )
    from ragwatch.sampling.sample import Sample, SampleChunk, encode_sample

    def payload(i: int) -> bytes:
        return encode_sample(Sample(f"s{i}", "emb", "q", "a", [SampleChunk("c", 1, "a")], created_at=time.time()))

    queue.add([payload(i) for i in range(3)] + [payload(0)])  # s0 twice: applied once
    assert worker.work(burst=True, max_seconds=10) == 4
    assert sorted(seen) == ["s0", "s1", "s2"]


def test_memory_queue_stays_bounded_with_no_consumer_after_200k_samples() -> None:
    queue = MemoryQueue("bounded", url="memory://bounded")
    record = orjson.dumps({"question": "q" * 200, "chunks": [{"id": "c", "text": "t" * 2000}]})

    def fill(start: int, stop: int) -> None:
        for i in range(start, stop, 500):
            queue.add([orjson.dumps({"i": j, "question": "q" * 200, "text": "t" * 2000}) for j in range(i, i + 500)])
            for j in range(i, i + 500, 5):  # scores applied too (a consumer that stores but never trims)
                queue.apply(f"s{j}", record, {"m": 0.5})

    tracemalloc.start()
    fill(0, 110_000)  # past every cap (entries, scores, remembered ids) once
    gc.collect()
    steady, _ = tracemalloc.get_traced_memory()
    objects_before = len(gc.get_objects())
    fill(110_000, 200_000)
    gc.collect()
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    objects_after = len(gc.get_objects())
    stats = queue.stats()
    assert stats.length == MemoryQueue.MAX_ENTRIES
    assert stats.lag == MemoryQueue.MAX_ENTRIES  # the undelivered ids are bounded with their entries
    assert len(queue._undelivered) == MemoryQueue.MAX_ENTRIES
    assert sum(len(ids) for ids, _ in queue._applied.values()) == MemoryQueue.MAX_APPLIED
    assert len(queue._scores) == MemoryQueue.MAX_SCORES
    assert queue.trimmed == 200_000 - MemoryQueue.MAX_ENTRIES
    assert objects_after - objects_before < 1000  # 90k more samples retained no more objects
    assert after - steady < 200_000  # …nor more bytes
    assert after < 16_000_000  # 2,000 entries of ~2.2 KB, 1,000 records, 20,000 ids: not 4 KB orjson buffers each
    stored = sum(sys.getsizeof(p) for p in queue._entries.values() if p is not None)
    assert stored < MemoryQueue.MAX_ENTRIES * 2400


def test_service_memory_is_bounded_whether_or_not_anything_scores(registry: CollectorRegistry) -> None:
    for scoring in ("off", "auto"):
        rw, answer = watched(CollectorRegistry(), scoring=scoring, scoring_max_per_second=2.0)
        try:
            for i in range(6_000):
                answer(f"q{i}")
            assert rw.flush(20)
            queue = rw.queue
            assert isinstance(queue, MemoryQueue)
            if scoring == "auto":
                wait_for(lambda q=queue: q.stats().lag == 0)
            assert queue.stats().length <= MemoryQueue.MAX_ENTRIES
            assert len(queue._undelivered) <= MemoryQueue.MAX_ENTRIES
        finally:
            rw.close(1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_scores_in_its_own_window_and_says_so_once(tmp_path: Path) -> None:
    """A pre-fork server on memory://: the parent never scored; each child scores into its own window."""
    script = tmp_path / "fork.py"
    script.write_text(
        f"""
import logging, os, sys, time
sys.path.insert(0, {str(ROOT)!r})
from tests.test_embedded import watched, wait_for
from prometheus_client import CollectorRegistry
logging.basicConfig(level=logging.WARNING, format="%(name)s %(message)s")
registry = CollectorRegistry()
rw, answer = watched(registry)
assert rw.scorer._thread is None  # the master serves nothing: no scorer thread before the fork
pid = os.fork()
if pid == 0:
    for i in range(5):
        answer(f"child {{i}}")
    wait_for(lambda: len(rw.scores()) == 5, 20)
    answer("child again")
    wait_for(lambda: len(rw.scores()) == 6, 20)
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert rw.scores() == [], "the parent's window must not hold the child's scores"
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
    assert out.returncode == 0, out.stderr
    assert "child exit 0" in out.stdout
    warnings = [line for line in out.stderr.splitlines() if "its own, not shared" in line]
    assert len(warnings) == 1, out.stderr  # logged once, by the child, not by the master
    assert "forked" in warnings[0]


def test_the_quickstart_example_runs_with_no_redis() -> None:
    """The README's quickstart: a real uvicorn service, no Redis; gauges on /metrics, degraded mode in and
    out, and a health report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=240,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    good = next(line for line in lines if "good retriever" in line)
    assert "ragwatch_window_value{metric=context_precision_3} = 0." in good
    assert any("broken retriever: degraded=True (ragwatch_degraded = 1.0)" in line for line in lines)
    assert any("retriever fixed: degraded=False" in line for line in lines)
    assert "# ragwatch health report" in out.stdout and "Look first at `retrieval_miss`" in out.stdout
    assert "entered degraded mode: True; left it: True" in out.stdout


def test_logs_nothing_about_processes_in_a_single_process(caplog: pytest.LogCaptureFixture) -> None:
    rw, answer = watched(None)
    try:
        with caplog.at_level(logging.WARNING, logger="ragwatch.scoring.embedded"):
            answer("q")
            wait_for(lambda: len(rw.scores()) == 1)
        assert not [r for r in caplog.records if "not shared" in r.getMessage()]
    finally:
        rw.close(1)
