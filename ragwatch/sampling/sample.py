"""The sample record: what leaves the service process for scoring, and its codec.

A sample is built from a finished :class:`~ragwatch.capture.run.Run` *off* the request thread (by the producer's
flusher, as a plain record dict that it encodes directly), so normalising chunks, redacting and encoding
never cost the user a microsecond. Building applies, in order: redaction, size limits (with ``truncated``
flags), optional hashing instead of text. Redaction comes first so a phone number or an e-mail cut at the
length limit cannot escape the patterns half-written; it reads a bounded prefix (the limit plus
:data:`REDACT_MARGIN`), so a 5 MB answer still costs only a little more than its kept part. Every
free-text field is redacted, not only question, answer and chunk text: chunk ids, the route, tag keys and
values (``force_sample`` reasons), metadata keys and values. The record is versioned (``v``); decoding ignores unknown
fields, so an older worker reads a newer producer's samples.

Under ``content_off`` with a shared queue the record carries no text but a ``scored`` object: the service's
own verdict on the text it kept (``ragwatch.scoring.embedded.PreScorer``). This codec only checks that it is
an object; the scoring side validates what is in it.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, overload

import orjson

from ragwatch.capture.run import Run
from ragwatch.errors import RagwatchError
from ragwatch.labels import safe_label

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

#: Characters past a length limit that are still read when redacting, so that a secret straddling the
#: limit is recognised whole (and masked) before the text is cut.
REDACT_MARGIN = 1024
#: Bounds of the short fields (ids, route, tags, model): they are labels, not documents.
MAX_ID_CHARS = 256
MAX_TAGS = 16


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
    client: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    outcome: str = "ok"
    error: str | None = None
    reason: str = "rate"
    truncated: bool = False
    question_sha256: str | None = None
    answer_sha256: str | None = None
    v: int = SCHEMA_VERSION
    #: the ``service_version`` setting of the producer (None: unset, or a record of an older producer)
    service_version: str | None = None
    #: ``content_off`` on a shared queue: what the service's own judges said about this textless sample
    #: (scores, or why there are none), for the worker to apply without judging; read and validated on the
    #: scoring side (``ragwatch.scoring.content``). None: an ordinary sample, judged by the worker.
    scored: dict[str, Any] | None = None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@overload
def _cut(text: str, limit: int, redact: Callable[[str], str] = ...) -> tuple[str, bool]: ...
@overload
def _cut(text: str | None, limit: int, redact: Callable[[str], str] = ...) -> tuple[str | None, bool]: ...
def _cut(text: str | None, limit: int, redact: Callable[[str], str] = str) -> tuple[str | None, bool]:
    """Redact, then cut to ``limit`` characters; the flag says whether anything was cut."""
    if text is None:
        return None, False
    if len(text) <= limit:
        return redact(text), False
    return redact(text[: limit + REDACT_MARGIN])[:limit], True


def _redacted_short(text: object, redact: Callable[[str], str]) -> object:
    """An id, route or tag: redacted then capped (non-strings pass through for the decoder to judge)."""
    if not isinstance(text, str):
        return text
    return _cut(text, MAX_ID_CHARS, redact)[0]


def _redacted_tags(tags: Mapping[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tags.items():
        if len(out) >= MAX_TAGS:
            break
        out[_redacted_short(key, redact)] = _redacted_short(value, redact)  # type: ignore[index]
    return out


def _metadata(meta: Mapping[str, Any], limits: Limits, redact: Callable[[str], str]) -> dict[str, Any]:
    """Keep only JSON scalars: arbitrary user objects must never break encoding or leak big reprs."""
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if len(out) >= limits.max_metadata_keys:
            break
        if not isinstance(key, str):
            continue
        key = _cut(key, limits.max_metadata_chars, redact)[0]
        if isinstance(value, str):
            out[key] = _cut(value, limits.max_metadata_chars, redact)[0]
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
    content: bool = True,
    service_version: str | None = None,
) -> dict[str, Any]:
    """Turn a finished run into the bounded, redacted sample record (plain JSON types). May raise on
    unreadable chunks.

    ``service_version`` (the setting) is recorded only when set, so a deploy can be marked on the charts
    and a service without one writes the records it always wrote.

    ``content=False`` (the ``content_off`` setting) keeps no text at all: no question, answer or chunk text
    and no hash of them (a hash of a short question is as good as the question to anyone who guesses it),
    chunk ids replaced by their rank, no metadata, no tags — only latency, tokens, cost, model, route and
    outcome (:func:`without_content`).

    The flusher encodes this dict directly: building it costs a fraction of building the :class:`Sample`
    dataclasses, and orjson encodes a dict several times faster than a slotted dataclass. ``redact_chunk``
    (default ``redact``) is applied to chunk texts: the same knowledge-base chunks come back request after
    request, so callers pass a memoised redactor there.
    """
    redact_chunk = redact_chunk or redact
    if not content:
        return _versioned(without_content(run, reason=reason, redact=redact_chunk), service_version)
    truncated = False
    chunks: list[dict[str, Any]] = []
    all_chunks = run.chunks if run.retrieved is not None else []
    if len(all_chunks) > limits.max_chunks:
        truncated = True
    max_chars = limits.max_chunk_chars
    for chunk in all_chunks[: limits.max_chunks]:
        text, cut = _cut(chunk.text, max_chars, redact_chunk)
        truncated = truncated or cut
        chunks.append(
            {
                "id": _redacted_short(chunk.id, redact_chunk),  # ids repeat like texts: the memoised redactor
                "rank": chunk.rank,
                "text": text if keep_text else None,
                "score": chunk.score,
                "text_sha256": None if keep_text or text is None else _sha(text),
                "truncated": cut,
                "metadata": _metadata(chunk.metadata, limits, redact) if chunk.metadata else {},
            }
        )
    question, cut_q = _cut(run.question, limits.max_question_chars, redact)
    answer, cut_a = _cut(run.answer, limits.max_answer_chars, redact)
    record = {
        "sample_id": os.urandom(16).hex(),  # 128 random bits as 32 hex digits; uuid4() costs 5x as much
        "service": run.service,
        "question": question if keep_text else None,
        "answer": answer if keep_text else None,
        "chunks": chunks,
        **_measured(run),
        "route": _redacted_short(run.route, redact_chunk),  # routes repeat too
        "client": run.client,  # a keyed hash (see ragwatch.capture.asgi), never the address
        "tags": _redacted_tags(run.tags, redact),
        "outcome": run.outcome,
        "error": safe_label(run.error) if isinstance(run.error, str) else run.error,
        "reason": reason,
        "truncated": truncated or cut_q or cut_a,
        "question_sha256": None if keep_text or question is None else _sha(question),
        "answer_sha256": None if keep_text or answer is None else _sha(answer),
        "v": SCHEMA_VERSION,
    }
    return _versioned(record, service_version)


def _measured(run: Run) -> dict[str, Any]:
    """What the capture measured about ``run`` — when, its trace, model, stage durations, TTFT, tokens and
    cost: the fields a sample record carries with its text on or off, in the record's order."""
    usage = run.usage
    model = run.model
    return {
        "created_at": run.started_at,
        "trace_id": run.trace_id,
        "span_id": run.span_id,
        "model": safe_label(model) if isinstance(model, str) else model,
        "durations": dict(run.durations),
        "ttft": run.ttft,
        "input_tokens": usage.input_tokens if usage else None,
        "output_tokens": usage.output_tokens if usage else None,
        "cached_input_tokens": usage.cached_input_tokens if usage else None,
        "tokens_estimated": bool(usage and usage.estimated),
        "cost_usd": run.cost_usd,
    }


def _versioned(record: dict[str, Any], service_version: str | None) -> dict[str, Any]:
    if service_version:
        record["service_version"] = safe_label(service_version)
    return record


def without_content(run: Run, *, reason: str = "rate", redact: Callable[[str], str] = str) -> dict[str, Any]:
    """The sample record of ``run`` with every text field dropped (see :func:`build_record`); the route, a
    label, is redacted like in the full record."""
    ranks = [chunk.rank for chunk in (run.chunks if run.retrieved is not None else [])]
    return {
        "sample_id": os.urandom(16).hex(),
        "service": run.service,
        "question": None,
        "answer": None,
        "chunks": [{"id": f"#{rank}", "rank": rank} for rank in ranks],
        **_measured(run),
        "route": _redacted_short(run.route, redact),
        "client": run.client,
        "outcome": run.outcome,
        "error": safe_label(run.error) if isinstance(run.error, str) else run.error,
        "reason": reason,
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

#: Identity fields longer than this are refused: they become Redis keys and labels, never text to cut.
MAX_ID_CHARS = 256
#: Short descriptive fields (model, route, outcome, reason, hashes, error) are cut to this many characters.
MAX_FIELD_CHARS = 1024
#: Entries of the ``durations`` and ``tags`` maps kept (the producer writes a handful).
MAX_MAP_ENTRIES = 64
#: ``created_at`` must fall in this range of unix seconds (up to the year 5138): anything else is not a time.
_TIME_RANGE = (0.0, 1e11)
_INT_LIMIT = 2**53


def decode_sample(payload: bytes | str, limits: Limits | None = None) -> Sample:
    """Parse and validate a sample; raise :class:`SampleDecodeError` for anything a worker cannot use.

    Why validate every field here: a worker trusts what this returns, and one entry with a ``null``
    timestamp or a string rank must be dead-lettered alone, not crash the batch bookkeeping that holds its
    good neighbours. Unknown fields are ignored (a newer producer's samples stay readable). ``limits``
    re-applies the producer's size bounds (texts cut, ``truncated`` set), so a sample written by a
    misconfigured or foreign producer costs a judge no more than a well-formed one.
    """
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise SampleDecodeError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SampleDecodeError(f"expected a JSON object, got {type(data).__name__}")
    return _validated(data, limits or _NO_LIMITS)


_NO_LIMITS = Limits(
    max_chunks=10**9,
    max_chunk_chars=10**12,
    max_answer_chars=10**12,
    max_question_chars=10**12,
    max_metadata_keys=10**9,
    max_metadata_chars=10**12,
)


def _validated(data: dict[str, Any], limits: Limits) -> Sample:
    cut = _Cutter()
    sample_id = _ident(data, "sample_id")
    service = _ident(data, "service")
    raw_chunks = data.get("chunks")
    if raw_chunks is None:
        raw_chunks = []
    if not isinstance(raw_chunks, list) or not all(isinstance(c, dict) for c in raw_chunks):
        raise SampleDecodeError("chunks must be a list of objects")
    if len(raw_chunks) > limits.max_chunks:
        raw_chunks = raw_chunks[: limits.max_chunks]
        cut.any = True
    chunks = [_chunk(c, limits, cut) for c in raw_chunks]
    created_at = data.get("created_at", _MISSING)
    if created_at is _MISSING:
        created_at = time.time()  # samples of the first schema drafts had none
    created_at = _number(created_at, "created_at")
    if created_at is None or not _TIME_RANGE[0] <= created_at <= _TIME_RANGE[1]:
        raise SampleDecodeError("created_at must be a unix time in seconds")
    return Sample(
        sample_id=sample_id,
        service=service,
        question=cut.text(_opt_str(data, "question"), limits.max_question_chars),
        answer=cut.text(_opt_str(data, "answer"), limits.max_answer_chars),
        chunks=chunks,
        created_at=created_at,
        trace_id=_short(data, "trace_id"),
        span_id=_short(data, "span_id"),
        model=_short(data, "model"),
        durations=_durations(data.get("durations")),
        ttft=_nonneg(data.get("ttft"), "ttft"),
        input_tokens=_count_field(data.get("input_tokens"), "input_tokens"),
        output_tokens=_count_field(data.get("output_tokens"), "output_tokens"),
        cached_input_tokens=_count_field(data.get("cached_input_tokens"), "cached_input_tokens"),
        tokens_estimated=_flag(data.get("tokens_estimated", False), "tokens_estimated"),
        cost_usd=_nonneg(data.get("cost_usd"), "cost_usd"),
        route=_short(data, "route"),
        client=_short(data, "client"),
        tags=_tags(data.get("tags")),
        outcome=_short(data, "outcome") or "ok",
        error=_short(data, "error"),
        reason=_short(data, "reason") or "rate",
        truncated=_flag(data.get("truncated", False), "truncated") or cut.any,
        question_sha256=_short(data, "question_sha256"),
        answer_sha256=_short(data, "answer_sha256"),
        v=_count_field(data.get("v", SCHEMA_VERSION), "v") or SCHEMA_VERSION,
        # absent in older records; a cosmetic field of another type is dropped, not the sample with it
        service_version=_short(data, "service_version") if isinstance(data.get("service_version"), str) else None,
        scored=_object(data.get("scored"), "scored"),
    )


_MISSING = object()


class _Cutter:
    """Cuts texts to their limits and remembers whether anything was cut."""

    __slots__ = ("any",)

    def __init__(self) -> None:
        self.any = False

    def text(self, value: str | None, limit: int) -> str | None:
        if value is not None and len(value) > limit:
            self.any = True
            return value[:limit]
        return value


def _ident(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise SampleDecodeError(f"{name} must be a non-empty string of at most {MAX_ID_CHARS} characters")
    return value


def _opt_str(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise SampleDecodeError(f"{name} must be a string or null, got {type(value).__name__}")
    return value


def _short(data: Mapping[str, Any], name: str) -> str | None:
    value = _opt_str(data, name)
    return value[:MAX_FIELD_CHARS] if value is not None else None


def _number(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SampleDecodeError(f"{name} must be a number or null, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise SampleDecodeError(f"{name} must be finite")
    return number


def _nonneg(value: Any, name: str) -> float | None:
    number = _number(value, name)
    if number is not None and number < 0:
        raise SampleDecodeError(f"{name} must not be negative")
    return number


def _count_field(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _INT_LIMIT:
        raise SampleDecodeError(f"{name} must be a non-negative integer or null")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise SampleDecodeError(f"{name} must be true or false")
    return value


def _object(value: Any, name: str) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise SampleDecodeError(f"{name} must be an object or null, got {type(value).__name__}")
    return value


def _durations(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SampleDecodeError("durations must be an object of stage: seconds")
    out: dict[str, float] = {}
    for key, seconds in list(value.items())[:MAX_MAP_ENTRIES]:
        number = _nonneg(seconds, "durations value")
        if number is not None:
            out[key[:MAX_FIELD_CHARS]] = number
    return out


def _tags(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise SampleDecodeError("tags must be an object of string values")
    return {k[:MAX_FIELD_CHARS]: v[:MAX_FIELD_CHARS] for k, v in list(value.items())[:MAX_MAP_ENTRIES]}


def _chunk(data: dict[str, Any], limits: Limits, cut: _Cutter) -> SampleChunk:
    chunk_id = data.get("id")
    if not isinstance(chunk_id, str) or len(chunk_id) > MAX_FIELD_CHARS:
        raise SampleDecodeError(f"each chunk needs a string id of at most {MAX_FIELD_CHARS} characters")
    rank = data.get("rank")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < _INT_LIMIT:
        raise SampleDecodeError("each chunk needs a non-negative integer rank")
    text = data.get("text")
    if text is not None and not isinstance(text, str):
        raise SampleDecodeError("chunk text must be a string or null")
    chunk_cut = text is not None and len(text) > limits.max_chunk_chars
    text = cut.text(text, limits.max_chunk_chars)
    meta = data.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise SampleDecodeError("chunk metadata must be an object")
    metadata: dict[str, Any] = {}
    for key, value in list(meta.items())[: limits.max_metadata_keys]:
        if isinstance(value, str):
            metadata[key] = value[: limits.max_metadata_chars]
        elif value is None or isinstance(value, bool | float) or (isinstance(value, int) and abs(value) < _INT_LIMIT):
            metadata[key] = value  # nested objects and huge integers are dropped, as when building
    return SampleChunk(
        id=chunk_id,
        rank=rank,
        text=text,
        score=_number(data.get("score"), "chunk score"),
        text_sha256=_short(data, "text_sha256"),
        truncated=_flag(data.get("truncated", False), "chunk truncated") or chunk_cut,
        metadata=metadata,
    )


def _from_record(data: Mapping[str, Any]) -> Sample:
    """A Sample from a record this process just built (trusted: no validation)."""
    chunks = [SampleChunk(**{k: v for k, v in c.items() if k in _CHUNK_FIELDS}) for c in data.get("chunks") or ()]
    known = {k: v for k, v in data.items() if k in _SAMPLE_FIELDS and k != "chunks"}
    known.setdefault("question", None)
    known.setdefault("answer", None)
    known.setdefault("created_at", time.time())
    return Sample(chunks=chunks, **known)
