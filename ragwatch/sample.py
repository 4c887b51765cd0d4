"""The sample record: what leaves the service process for scoring, and its codec.

A sample is built from a finished :class:`~ragwatch.run.Run` *off* the request thread (by the producer's
flusher, as a plain record dict that it encodes directly), so normalising chunks, redacting and encoding
never cost the user a microsecond. Building applies, in order: size limits (with ``truncated`` flags),
redaction, optional hashing instead of text. The record is versioned (``v``); decoding ignores unknown
fields, so an older worker reads a newer producer's samples.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from .errors import RagwatchError
from .run import Run

__all__ = [
    "SCHEMA_VERSION",
    "Limits",
    "Sample",
    "SampleChunk",
    "SampleDecodeError",
    "build_record",
    "build_sample",
    "decode_sample",
    "encode_record",
    "encode_sample",
]

SCHEMA_VERSION = 1


class SampleDecodeError(RagwatchError, ValueError):
    """A stream entry is not a sample this version can read (malformed JSON, wrong types, missing ids)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one sample may carry; anything cut is flagged ``truncated``."""

    max_chunks: int = 20
    max_chunk_chars: int = 4000
    max_answer_chars: int = 8000
    max_question_chars: int = 2000
    max_metadata_keys: int = 16
    max_metadata_chars: int = 256


@dataclass(slots=True)
class SampleChunk:
    id: str
    rank: int
    text: str | None = None
    score: float | None = None
    text_sha256: str | None = None
    truncated: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Sample:
    sample_id: str
    service: str
    question: str | None
    answer: str | None
    chunks: list[SampleChunk]
    created_at: float
    trace_id: str | None = None
    span_id: str | None = None
    model: str | None = None
    durations: dict[str, float] = field(default_factory=dict)
    ttft: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    tokens_estimated: bool = False
    cost_usd: float | None = None
    route: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    outcome: str = "ok"
    error: str | None = None
    reason: str = "rate"
    truncated: bool = False
    question_sha256: str | None = None
    answer_sha256: str | None = None
    v: int = SCHEMA_VERSION


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _cut(text: str | None, limit: int) -> tuple[str | None, bool]:
    if text is None or len(text) <= limit:
        return text, False
    return text[:limit], True


def _metadata(meta: Mapping[str, Any], limits: Limits, redact: Callable[[str], str]) -> dict[str, Any]:
    """Keep only JSON scalars: arbitrary user objects must never break encoding or leak big reprs."""
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if len(out) >= limits.max_metadata_keys:
            break
        if not isinstance(key, str):
            continue
        if isinstance(value, str):
            out[key] = redact(value[: limits.max_metadata_chars])
        elif (
            isinstance(value, bool)
            or value is None
            or (isinstance(value, int) and abs(value) < 2**53)
            or (isinstance(value, float) and math.isfinite(value))
        ):
            out[key] = value
    return out


def build_record(
    run: Run,
    *,
    reason: str = "rate",
    limits: Limits = Limits(),
    redact: Callable[[str], str] = str,
    redact_chunk: Callable[[str], str] | None = None,
    keep_text: bool = True,
) -> dict[str, Any]:
    """Turn a finished run into the bounded, redacted sample record (plain JSON types). May raise on
    unreadable chunks.

    The flusher encodes this dict directly: building it costs a fraction of building the :class:`Sample`
    dataclasses, and orjson encodes a dict several times faster than a slotted dataclass. ``redact_chunk``
    (default ``redact``) is applied to chunk texts: the same knowledge-base chunks come back request after
    request, so callers pass a memoised redactor there.
    """
    redact_chunk = redact_chunk or redact
    truncated = False
    chunks: list[dict[str, Any]] = []
    all_chunks = run.chunks if run.retrieved is not None else []
    if len(all_chunks) > limits.max_chunks:
        truncated = True
    max_chars = limits.max_chunk_chars
    for chunk in all_chunks[: limits.max_chunks]:
        text = chunk.text
        cut = text is not None and len(text) > max_chars
        if cut:
            text = text[:max_chars]
            truncated = True
        if text is not None:
            text = redact_chunk(text)
        chunks.append(
            {
                "id": chunk.id,
                "rank": chunk.rank,
                "text": text if keep_text else None,
                "score": chunk.score,
                "text_sha256": None if keep_text or text is None else _sha(text),
                "truncated": cut,
                "metadata": _metadata(chunk.metadata, limits, redact) if chunk.metadata else {},
            }
        )
    question, cut_q = _cut(run.question, limits.max_question_chars)
    answer, cut_a = _cut(run.answer, limits.max_answer_chars)
    question = redact(question) if question is not None else None
    answer = redact(answer) if answer is not None else None
    usage = run.usage
    return {
        "sample_id": os.urandom(16).hex(),  # 128 random bits as 32 hex digits; uuid4() costs 5x as much
        "service": run.service,
        "question": question if keep_text else None,
        "answer": answer if keep_text else None,
        "chunks": chunks,
        "created_at": run.started_at,
        "trace_id": run.trace_id,
        "span_id": run.span_id,
        "model": run.model,
        "durations": dict(run.durations),
        "ttft": run.ttft,
        "input_tokens": usage.input_tokens if usage else None,
        "output_tokens": usage.output_tokens if usage else None,
        "cached_input_tokens": usage.cached_input_tokens if usage else None,
        "tokens_estimated": bool(usage and usage.estimated),
        "cost_usd": run.cost_usd,
        "route": run.route,
        "tags": dict(run.tags),
        "outcome": run.outcome,
        "error": run.error,
        "reason": reason,
        "truncated": truncated or cut_q or cut_a,
        "question_sha256": None if keep_text or question is None else _sha(question),
        "answer_sha256": None if keep_text or answer is None else _sha(answer),
        "v": SCHEMA_VERSION,
    }


def build_sample(run: Run, **options: Any) -> Sample:
    """:func:`build_record` as a :class:`Sample` (for scoring in process); same options."""
    return _from_record(build_record(run, **options))


def encode_record(record: Mapping[str, Any]) -> bytes:
    """JSON bytes of a record; text that is not valid UTF-8 (lone surrogates) is replaced, not refused."""
    try:
        return orjson.dumps(record)
    except TypeError:
        return orjson.dumps(_scrub(dict(record)))


def encode_sample(sample: Sample) -> bytes:
    """JSON bytes of a :class:`Sample`, the same record :func:`encode_record` writes."""
    return encode_record(asdict(sample))


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


_SAMPLE_FIELDS = frozenset(Sample.__dataclass_fields__)
_CHUNK_FIELDS = frozenset(SampleChunk.__dataclass_fields__)


def decode_sample(payload: bytes | str) -> Sample:
    """Parse a sample, ignoring fields this version does not know; raise :class:`SampleDecodeError`."""
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise SampleDecodeError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SampleDecodeError(f"expected a JSON object, got {type(data).__name__}")
    if not isinstance(data.get("sample_id"), str) or not isinstance(data.get("service"), str):
        raise SampleDecodeError("sample_id and service must be strings")
    raw_chunks = data.get("chunks") or []
    if not isinstance(raw_chunks, list) or not all(isinstance(c, dict) for c in raw_chunks):
        raise SampleDecodeError("chunks must be a list of objects")
    try:
        sample = _from_record(data)
    except TypeError as exc:
        raise SampleDecodeError(f"missing or unexpected fields: {exc}") from None
    _check_types(sample)
    return sample


def _from_record(data: Mapping[str, Any]) -> Sample:
    """A Sample from a record, ignoring fields this version does not know (may raise TypeError)."""
    chunks = [SampleChunk(**{k: v for k, v in c.items() if k in _CHUNK_FIELDS}) for c in data.get("chunks") or ()]
    known = {k: v for k, v in data.items() if k in _SAMPLE_FIELDS and k != "chunks"}
    known.setdefault("question", None)
    known.setdefault("answer", None)
    known.setdefault("created_at", time.time())
    return Sample(chunks=chunks, **known)


def _check_types(sample: Sample) -> None:
    for name in ("question", "answer"):
        value = getattr(sample, name)
        if value is not None and not isinstance(value, str):
            raise SampleDecodeError(f"{name} must be a string or null")
    for chunk in sample.chunks:
        if not isinstance(chunk.id, str) or not isinstance(chunk.rank, int):
            raise SampleDecodeError("each chunk needs a string id and an integer rank")
        if chunk.text is not None and not isinstance(chunk.text, str):
            raise SampleDecodeError("chunk text must be a string or null")
