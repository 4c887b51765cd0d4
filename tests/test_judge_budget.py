"""The judge time budget (``judge_time_budget_s``): over it a sample is dead-lettered with the reason and counted.

A tiny budget makes the path certain without timing anything: the offline judge checks it before each claim,
so a budget already spent stops it at the first one. Runs on a real redis-server.
"""

from __future__ import annotations

import time

import orjson
import pytest
from prometheus_client import CollectorRegistry

from ragwatch.metrics.catalog import WorkerMetrics, families
from ragwatch.queue.factory import open_queue
from ragwatch.scoring.judges.budget import JudgeTimeExceeded, check, time_budget
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.worker import Worker
from ragwatch.settings import JUDGE_TIME_BUDGET_S, Settings
from tests.conftest import sample as metric


def payload(sample_id: str) -> bytes:
    return orjson.dumps(
        {
            "sample_id": sample_id,
            "service": "kb",
            "question": "How long is the bridge?",
            "answer": "The bridge is 120 meters long. It opened in 1932.",
            "chunks": [{"id": "c1", "rank": 1, "text": "The stone bridge is 120 meters long. It opened in 1932."}],
            "created_at": time.time(),
        }
    )


def worker(queue: object, registry: CollectorRegistry, budget: float | None) -> Worker:
    return Worker(
        queue,  # type: ignore[arg-type]
        [OfflineJudge()],
        metrics=families(WorkerMetrics, registry),
        block_ms=50,
        claim_idle_ms=50,
        concurrency=2,
        judge_time_budget_s=budget,
    )


def outcome(registry: CollectorRegistry, name: str) -> float:
    return metric(registry, "ragwatch_worker_entries_total", service="kb", outcome=name)


def test_a_sample_over_the_judge_time_budget_is_dead_lettered_with_its_reason_and_counted(redis_url: str) -> None:
    queue = open_queue(redis_url, "kb")
    queue.add([payload("slow")])
    registry = CollectorRegistry()
    assert worker(queue, registry, budget=1e-9).work(burst=True, max_seconds=30) == 1
    (dead,) = queue.dead_letters(10)
    assert orjson.loads(dead["payload"])["sample_id"] == "slow"
    assert "over the judge time budget of 1e-09 s after 0 of 2 claims" in dead["error"]
    assert outcome(registry, "over_time_budget") == 1
    assert outcome(registry, "scored") == outcome(registry, "retry") == 0  # never retried: it would be as slow
    assert queue.stats().pending == 0 and "answered" not in queue.totals()  # acknowledged, in no window


def test_within_the_budget_the_same_sample_is_scored(redis_url: str) -> None:
    queue = open_queue(redis_url, "kb")
    queue.add([payload("ok")])
    registry = CollectorRegistry()
    worker(queue, registry, budget=JUDGE_TIME_BUDGET_S).work(burst=True, max_seconds=30)
    assert outcome(registry, "scored") == 1 and outcome(registry, "over_time_budget") == 0
    assert queue.dead_letters(10) == []


def test_the_budget_is_open_only_inside_its_block() -> None:
    with time_budget(1e-9):
        time.sleep(0.001)
        with pytest.raises(JudgeTimeExceeded, match="after 3 of 7 claims"):
            check(3, 7, "claims")
    check(3, 7, "claims")  # closed again: a judge called outside a worker is never cut short
    with time_budget(0):
        check(3, 7, "claims")  # 0 turns it off
    assert Settings().judge_time_budget_s == JUDGE_TIME_BUDGET_S
    assert Settings(judge_time_budget_s=0).judge_time_budget_s == 0
