"""Correcting the judge (issue 27): ``rw.feedback`` stores a redacted, counted record beside the scores on
``memory://`` and on a real Redis (off the calling thread, failing open), both stores stay bounded, and
``ragwatch labels export`` turns the feedback joined with real judged records into a file ``ragwatch eval-judge
--thresholds`` reads and a golden set ``replay`` loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.queue.factory import open_queue
from ragwatch.replay.source import load_golden
from ragwatch.sampling.feedback import FeedbackError, decode_feedback
from ragwatch.scoring.judges import make_judges
from ragwatch.scoring.worker import Worker
from tests.conftest import sample, wait_for
from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
CHUNKS = [
    {
        "id": "travel-1",
        "text": "Travel is booked centrally. Hotels are reimbursed up to 600 CNY per night.",
        "score": 0.9,
    },
    {"id": "it-2", "text": "New employees receive their laptop on the first working day.", "score": 0.5},
]
#: (answer, what a person says the truth is: hallucinated?)
ANSWERS = [
    ("Hotels are reimbursed up to 600 CNY per night.", False),
    ("Hotels are reimbursed up to 900 CNY per night.", True),
    ("New employees receive their laptop on the first working day.", False),
    ("New employees receive their laptop after three months.", True),
    ("Travel is booked centrally.", False),
    ("Travel is booked centrally and taxis are free on weekends.", True),
]


def watched(**settings: Any) -> tuple[ragwatch.RagWatch, Any, CollectorRegistry]:
    """A RagWatch whose pipeline answers ANSWERS in turn; returns it, its ask function and its registry."""
    registry = CollectorRegistry()
    options: dict[str, Any] = {
        "sample_rate": 1.0,
        "sample_max_per_second": 1e6,
        "tracing": False,
        "flush_interval": 0.02,
        "degraded_mode": False,
    }
    rw = ragwatch.RagWatch("kb", registry=registry, **{**options, **settings})
    turn = [0]

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return CHUNKS

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, found: Any) -> str:
        return ANSWERS[turn[0] % len(ANSWERS)][0]

    @rw.pipeline
    def ask(question: str) -> str:
        return generate(question, retrieve(question))

    def ask_all() -> None:
        for i in range(len(ANSWERS)):
            turn[0] = i
            ask(f"What does the handbook say, part {i}?")

    return rw, ask_all, registry


def counted(registry: CollectorRegistry, kind: str, outcome: str) -> float:
    return sample(registry, "ragwatch_feedback_total", service="kb", kind=kind, outcome=outcome)


def stored(queue: Any) -> list[Any]:
    return [decode_feedback(raw) for _sid, raw in queue.feedback(100)]


def test_feedback_on_memory_is_stored_redacted_and_counted() -> None:
    rw, ask_all, registry = watched(redis_url="memory://feedback", scoring_max_per_second=1000.0)
    try:
        ask_all()
        wait_for(lambda: len(rw.scores()) == len(ANSWERS))
        sid = rw.scores()[0]["sample_id"]
        assert rw.feedback(sid, verdict="wrong", claim="Call bob@example.com.", note="ticket from +1 415 555 0100")
        assert rw.feedback(sid, chunk_id="travel-1", chunk_relevant=False, golden=True)
        first, second = stored(rw.queue)[::-1]  # newest first in the store
        assert (first.sample_id, first.verdict, first.claim) == (sid, "wrong", "Call [email].")
        assert first.note is not None and "415" not in first.note and first.source == "api"
        assert (second.chunk_id, second.chunk_relevant, second.golden) == ("travel-1", False, True)
        assert [counted(registry, k, "stored") for k in ("verdict_wrong", "note", "chunk_irrelevant", "golden")] == [
            1,
            1,
            1,
            1,
        ]
    finally:
        rw.close(1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"verdict": "maybe"}, "verdict must be"),
        ({"claim": "Hotels are cheap."}, "claim needs a verdict"),
        ({"chunk_id": "travel-1"}, "go together"),
        ({"chunk_relevant": "yes", "chunk_id": "c"}, "chunk_relevant must be"),
        ({}, "nothing to record"),
        ({"note": "x" * 5000}, "longer than"),
    ],
)
def test_bad_arguments_are_an_error_at_call_time(args: dict[str, Any], message: str) -> None:
    """A programming error of the caller, the same every time: raised at once, nothing stored."""
    rw, _ask_all, _registry = watched(redis_url="memory://feedback-bad")
    try:
        with pytest.raises(FeedbackError, match=message):
            rw.feedback("s1", **args)
        with pytest.raises(ValueError):  # what a caller that knows no ragwatch class catches
            rw.feedback("", verdict="right")
        assert rw.queue is not None and rw.queue.feedback(10) == []
    finally:
        rw.close(1)


def test_feedback_on_redis_is_written_by_a_background_thread(redis_url: str) -> None:
    rw, _ask_all, registry = watched(redis_url=redis_url)
    try:
        assert rw.feedback("s-42", verdict="right", note="mail alice@example.com")
        reader = open_queue(redis_url, "kb")
        wait_for(lambda: reader.feedback(10))
        (record,) = stored(reader)
        assert (record.sample_id, record.verdict, record.note) == ("s-42", "right", "mail [email]")
        wait_for(lambda: counted(registry, "verdict_right", "stored") == 1)
        reader.close()
    finally:
        rw.close(1)


def test_feedback_with_redis_away_never_blocks_or_raises_and_counts_the_loss() -> None:
    """Fail open: Redis is down, rw.feedback returns at once (buffered), and what could not be written before
    close is counted as dropped."""
    rw, _ask_all, registry = watched(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    try:
        started = time.monotonic()
        assert rw.feedback("s-1", verdict="wrong") is True
        assert time.monotonic() - started < 0.5  # no connection attempt on the calling thread
    finally:
        rw.close(0.3)
    wait_for(lambda: counted(registry, "verdict_wrong", "dropped") == 1)
    assert counted(registry, "verdict_wrong", "stored") == 0


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_the_feedback_store_is_bounded_and_newest_first(backend: str, request: pytest.FixtureRequest) -> None:
    url = "memory://bounded" if backend == "memory" else request.getfixturevalue("redis_url")
    queue = open_queue(url, "kb", feedback_maxlen=50)
    try:
        for i in range(600):
            queue.add_feedback(f"s{i}", b'{"sample_id":"s%d","verdict":"right"}' % i)
        kept = queue.feedback(10_000)
        assert kept[0][0] == "s599" and kept[1][0] == "s598"
        assert 50 <= len(kept) <= 150  # Redis trims MAXLEN ~ by whole nodes of 100 entries
        if backend == "redis":
            import redis

            client = redis.Redis.from_url(url)
            assert client.memory_usage("ragwatch:{kb}:feedback") < 64 * 1024
            client.close()
    finally:
        queue.close()


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragwatch", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_labels_export_round_trips_into_eval_judge_and_replay(redis_url: str, tmp_path: Path) -> None:
    """Real judged records (the offline judge in a worker), a person's verdicts on each (right where the judge
    was right, wrong where it was wrong), exported and read back by eval-judge --thresholds and load_golden."""
    rw, ask_all, _registry = watched(redis_url=redis_url)
    queue = open_queue(redis_url, "kb")
    try:
        ask_all()
        assert rw.flush(10)
        Worker(queue, make_judges(["offline"]), block_ms=100).work(burst=True)
        records = {r["answer"]: r for r in rw.scores()}
        assert len(records) == len(ANSWERS)
        truth = dict(ANSWERS)
        for answer, record in records.items():
            judged = record["scores"]["hallucination_rate"] >= 0.5
            rw.feedback(record["sample_id"], verdict="right" if judged == truth[answer] else "wrong")
        golden = records[ANSWERS[2][0]]
        rw.feedback(golden["sample_id"], golden=True, chunk_id="it-2", chunk_relevant=True)
        rw.feedback(golden["sample_id"], chunk_id="travel-1", chunk_relevant=False)
        assert rw._feedback_writer is not None and rw._feedback_writer.flush(10)
    finally:
        rw.close(1)
        queue.close()

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    env.update(RAGWATCH_REDIS_URL=redis_url, RAGWATCH_SERVICE="kb")
    chunks = tmp_path / "kb.jsonl"
    chunks.write_text("".join(json.dumps({"id": c["id"], "text": c["text"]}) + "\n" for c in CHUNKS))
    out = tmp_path / "labels.jsonl"
    done = _cli("labels", "export", "--out", str(out), "--chunks", str(chunks), env=env)
    assert done.returncode == 0, done.stderr
    assert "6 eval-judge rows from feedback on 6 samples" in done.stderr
    rows = [orjson.loads(line) for line in out.read_text().splitlines()]
    assert {r["answer"]: r["label_hallucinated"] for r in rows} == dict(ANSWERS)  # the person's word, not the judge's
    assert all(r["contexts"] == [c["text"] for c in CHUNKS] for r in rows)

    judged = _cli("eval-judge", str(out), "--thresholds", "--json", env=env)
    assert judged.returncode == 0, judged.stderr
    result = json.loads(judged.stdout)
    assert result["overall"]["n"] == len(ANSWERS)
    assert result["thresholds"]["hallucinated_share"] == pytest.approx(0.5)
    assert 0 < result["thresholds"]["best"]["threshold"] < 1

    golden_file = tmp_path / "golden.jsonl"
    done = _cli("labels", "export", "--format", "golden", "--out", str(golden_file), env=env)
    assert done.returncode == 0, done.stderr
    (question,) = load_golden(golden_file)
    assert question.relevant_ids == ["it-2"]  # the person's chunk labels, travel-1 marked not relevant
    assert question.reference_answer == ANSWERS[2][0]


def test_labels_export_without_contexts_quotes_the_judge_and_says_what_it_skipped(
    redis_url: str, tmp_path: Path
) -> None:
    queue = open_queue(redis_url, "kb")
    try:
        record = {
            "sample_id": "s1",
            "question": "How much for hotels?",
            "answer": "Hotels: 900 CNY. Taxis are free.",
            "chunk_ids": ["travel-1", "it-2"],
            "scores": {"hallucination_rate": 1.0},
            "details": {
                "offline": {
                    "claims": [
                        {
                            "text": "Hotels: 900 CNY.",
                            "verdict": "UNSUPPORTED",
                            "chunk_id": "travel-1",
                            "evidence": "Hotels: 600 CNY.",
                        },
                        {
                            "text": "Taxis are free.",
                            "verdict": "SUPPORTED",
                            "chunk_id": "it-2",
                            "evidence": "Taxis are free.",
                        },
                    ]
                }
            },
        }
        queue.apply("s1", orjson.dumps(record), {"faithfulness": 0.5})
        # the judge called "Hotels: 900 CNY." unsupported, a person says wrongly (the contract changed): with
        # "Taxis are free." rightly supported, the answer is not hallucinated. s-gone's record is gone.
        queue.add_feedback("s1", b'{"sample_id":"s1","verdict":"right","claim":"Hotels: 900 CNY.","at":1}')
        queue.add_feedback("s1", b'{"sample_id":"s1","verdict":"wrong","claim":"Hotels: 900 CNY.","at":2}')
        queue.add_feedback("s1", b'{"sample_id":"s1","verdict":"right","claim":"Taxis are free.","at":3}')
        queue.add_feedback("s-gone", b'{"sample_id":"s-gone","verdict":"wrong","at":3}')
        queue.add_feedback("s-bad", b"not json")
    finally:
        queue.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")}
    env.update(RAGWATCH_REDIS_URL=redis_url, RAGWATCH_SERVICE="kb")
    done = _cli("labels", "export", env=env)
    assert done.returncode == 0, done.stderr
    (row,) = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert row["label_hallucinated"] is False and row["contexts"] == ["Hotels: 600 CNY.", "Taxis are free."]
    assert "1 score record no longer stored" in done.stderr and "1 unreadable feedback record" in done.stderr
