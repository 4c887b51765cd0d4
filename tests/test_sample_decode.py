"""The sample decoder under fuzzing: whatever a stream entry holds, decoding either yields a sample whose
every field has the type and range a worker relies on, or raises SampleDecodeError — nothing else.

A seeded generator (reproducible: the seed is in the test id) replaces, nests and inflates every field of a
valid record with values of every JSON type.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

import orjson
import pytest

from ragwatch.sampling.sample import MAX_ID_CHARS, Limits, Sample, SampleDecodeError, decode_sample
from ragwatch.scoring.judges import TrivialJudge
from ragwatch.scoring.worker import Scoring

VALID: dict[str, Any] = {
    "sample_id": "0123456789abcdef0123456789abcdef",
    "service": "kb",
    "question": "How much is the hotel limit?",
    "answer": "600 CNY per night.",
    "chunks": [
        {"id": "exp-1", "rank": 0, "text": "Hotels up to 600 CNY.", "score": 0.9, "truncated": False, "metadata": {}},
        {"id": "exp-2", "rank": 1, "text": None, "score": None, "text_sha256": "ab" * 32, "metadata": {"p": 3}},
    ],
    "created_at": 1_780_000_000.5,
    "trace_id": "ab" * 16,
    "span_id": "cd" * 8,
    "model": "gpt-4o-mini",
    "durations": {"retrieve": 0.01, "generate": 0.4},
    "ttft": 0.1,
    "input_tokens": 120,
    "output_tokens": 30,
    "cached_input_tokens": None,
    "tokens_estimated": False,
    "cost_usd": 0.0001,
    "route": "/ask",
    "tags": {"tenant": "a"},
    "outcome": "ok",
    "error": None,
    "reason": "rate",
    "truncated": False,
    "question_sha256": None,
    "answer_sha256": None,
    "v": 1,
}
CHUNK_FIELDS = ("id", "rank", "text", "score", "text_sha256", "truncated", "metadata")


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(12 if depth < 40 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, 2**53, 2**63 - 1, -(2**63), rng.randrange(-1000, 10**12)])
    if kind == 3:
        return rng.choice([0.0, -0.5, 1e308, -1e308, 5e-324, 1e11 + 1, rng.uniform(-1e10, 1e10)])
    if kind == 4:
        return ""
    if kind == 5:
        return "x" * rng.choice([1, 255, 256, 257, 1025, 100_000])
    if kind == 6:
        return rng.choice(["1", "null", "1e9", "NaN", "\u0000", "日本語", "\ud7ff", "1780000000"])
    if kind == 7:
        return []
    if kind in (8, 9):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["id", "rank", "a", "text", ""]): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def mutate(rng: random.Random) -> bytes:
    """A valid record with one to three things broken, encoded."""
    record = orjson.loads(orjson.dumps(VALID))
    nest = ""
    for _ in range(rng.randrange(1, 4)):
        action = rng.randrange(5)
        if action == 0:  # any top-level field, any value
            record[rng.choice(list(VALID))] = random_value(rng)
        elif action == 1:  # a field removed
            record.pop(rng.choice(list(VALID)), None)
        elif action == 2 and isinstance(record.get("chunks"), list) and record["chunks"]:  # a chunk field
            chunk = record["chunks"][0]
            if isinstance(chunk, dict):
                chunk[rng.choice(CHUNK_FIELDS)] = random_value(rng)
        elif action == 3:  # deep nesting where an object or list is expected (written as text: deeper than
            depth = rng.choice([5, 100, 2000])  # orjson itself writes or Python recurses)
            nest = "".join(rng.choice(["[", '{"a":']) for _ in range(depth))
            nest += '"leaf"' + "".join("]" if c == "[" else "}" for c in reversed(nest.replace('{"a":', "{")))
            record[rng.choice(["chunks", "durations", "tags", "question"])] = "@@NEST@@"
        else:  # many entries
            record[rng.choice(["chunks", "durations", "tags"])] = (
                [dict(VALID["chunks"][0], rank=i) for i in range(500)]
                if rng.random() < 0.5
                else {f"k{i}": 0.5 for i in range(500)}
            )
    payload = orjson.dumps(record)
    return payload.replace(b'"@@NEST@@"', nest.encode()) if nest else payload


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def assert_well_typed(sample: Sample, limits: Limits) -> None:
    """What the worker, the judges and the score record rely on."""
    assert isinstance(sample.sample_id, str) and 0 < len(sample.sample_id) <= MAX_ID_CHARS
    assert isinstance(sample.service, str) and 0 < len(sample.service) <= MAX_ID_CHARS
    assert is_number(sample.created_at) and 0 <= sample.created_at <= 1e11
    for text, limit in ((sample.question, limits.max_question_chars), (sample.answer, limits.max_answer_chars)):
        assert text is None or (isinstance(text, str) and len(text) <= limit)
    assert isinstance(sample.chunks, list) and len(sample.chunks) <= limits.max_chunks
    for chunk in sample.chunks:
        assert isinstance(chunk.id, str)
        assert isinstance(chunk.rank, int) and not isinstance(chunk.rank, bool) and chunk.rank >= 0
        assert chunk.text is None or (isinstance(chunk.text, str) and len(chunk.text) <= limits.max_chunk_chars)
        assert chunk.score is None or is_number(chunk.score)
        assert isinstance(chunk.truncated, bool) and isinstance(chunk.metadata, dict)
        assert all(v is None or isinstance(v, str | bool | int | float) for v in chunk.metadata.values())
    for name in ("trace_id", "span_id", "model", "route", "error", "question_sha256", "answer_sha256"):
        value = getattr(sample, name)
        assert value is None or isinstance(value, str)
    assert isinstance(sample.outcome, str) and isinstance(sample.reason, str)
    assert all(isinstance(k, str) and is_number(v) and v >= 0 for k, v in sample.durations.items())
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in sample.tags.items())
    for name in ("ttft", "cost_usd"):
        value = getattr(sample, name)
        assert value is None or (is_number(value) and value >= 0)
    for name in ("input_tokens", "output_tokens", "cached_input_tokens"):
        value = getattr(sample, name)
        assert value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)
    assert isinstance(sample.truncated, bool) and isinstance(sample.tokens_estimated, bool)


@pytest.mark.parametrize("seed", range(8))
def test_fuzzed_entries_decode_to_well_typed_samples_or_a_decode_error(seed: int) -> None:
    rng = random.Random(seed)
    limits = Limits(max_chunks=5, max_chunk_chars=300, max_answer_chars=400, max_question_chars=200)
    worker = Scoring.__new__(Scoring)  # only the scoring step, which needs judges and thresholds
    worker.judges, worker._timers = [TrivialJudge()], {}
    from ragwatch.scoring.diagnosis import Thresholds

    worker.thresholds = Thresholds()
    decoded = refused = 0
    for _ in range(400):
        payload = mutate(rng)
        try:
            sample = decode_sample(payload, limits)
        except SampleDecodeError:
            refused += 1
            continue
        decoded += 1
        assert_well_typed(sample, limits)
        record = worker.score(sample)  # the judge, then the worker's bookkeeping on what it decoded
        orjson.dumps(record)
        assert min(record.created_at, time.time()) >= 0
    assert decoded > 40 and refused > 40  # the generator exercises both sides
    print(f"\nfuzz seed {seed}: {decoded} decoded and well typed, {refused} refused")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("created_at", None),
        ("created_at", "1780000000"),
        ("created_at", True),
        ("created_at", -5),
        ("created_at", 1e300),
        ("sample_id", ""),
        ("sample_id", "x" * (MAX_ID_CHARS + 1)),
        ("service", None),
        ("chunks", {"id": "a"}),
        ("chunks", [{"id": "a", "rank": "0"}]),
        ("chunks", [{"id": "a", "rank": True}]),
        ("chunks", [{"id": "a", "rank": -1}]),
        ("chunks", [{"id": ["a"], "rank": 0}]),
        ("durations", {"retrieve": "fast"}),
        ("durations", [1, 2]),
        ("tags", {"tenant": 5}),
        ("input_tokens", 1.5),
        ("input_tokens", -1),
        ("cost_usd", -0.1),
        ("ttft", "0.1"),
        ("truncated", "no"),
        ("question", {"text": "q"}),
        ("model", 4),
        ("v", "1"),
    ],
)
def test_each_bad_field_is_refused(field: str, value: Any) -> None:
    with pytest.raises(SampleDecodeError):
        decode_sample(orjson.dumps({**VALID, field: value}))


def test_deep_nesting_and_non_objects_are_refused() -> None:
    for payload in (b"[" * 5000 + b"]" * 5000, b"null", b"[]", b'"x"', b"1", b"{", b"\xff\xfe"):
        with pytest.raises(SampleDecodeError):
            decode_sample(payload)


def test_limits_cut_texts_and_chunks_on_the_worker_side() -> None:
    record = {
        **VALID,
        "question": "q" * 5000,
        "answer": "答" * 50_000,
        "chunks": [dict(VALID["chunks"][0], rank=i, text="t" * 9000) for i in range(30)],
    }
    sample = decode_sample(orjson.dumps(record), Limits())
    assert len(sample.question or "") == 2000 and len(sample.answer or "") == 8000
    assert len(sample.chunks) == 20 and all(len(c.text or "") == 4000 and c.truncated for c in sample.chunks)
    assert sample.truncated
    assert decode_sample(orjson.dumps(VALID), Limits()).truncated is False


def test_unknown_fields_are_ignored_and_optional_ones_default() -> None:
    sample = decode_sample(orjson.dumps({"sample_id": "s", "service": "kb", "from_the_future": {"x": [1]}}))
    assert (sample.question, sample.chunks, sample.outcome, sample.reason) == (None, [], "ok", "rate")
    assert abs(sample.created_at - time.time()) < 60
