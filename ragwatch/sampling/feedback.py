"""A person's correction of the judge: one feedback record, how it is checked, redacted and encoded.

Both sides make them — the host through ``rw.feedback(...)`` and an operator through the live page's buttons
(``POST /dashboard/feedback``) — and ``ragwatch labels export`` reads them back, so the record and its checks
live here, once, beside the sample codec. A record says about one scored sample (its ``sample_id``):

- ``verdict``: the judge's verdict was ``"right"`` or ``"wrong"`` — about the whole answer, or with ``claim``
  (the claim's text as the page shows it) about that claim alone;
- ``chunk_id`` + ``chunk_relevant``: a retrieved chunk was relevant to the question, or not;
- ``golden``: put the question in the replay golden set;
- ``note``: free text for the person reviewing the labels.

Bad arguments are a :class:`FeedbackError` (a ``ValueError``) at once: they are a programming error of the
caller, the same every time, not runtime input. Every text is capped (:data:`MAX_CLAIM_CHARS`,
:data:`MAX_NOTE_CHARS`, :data:`MAX_ID_CHARS`), so an encoded record is a few KB at most and a store bounded by
a count is bounded in bytes too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from ragwatch.errors import RagwatchError

__all__ = [
    "KINDS",
    "MAX_CLAIM_CHARS",
    "MAX_NOTE_CHARS",
    "OUTCOMES",
    "VERDICTS",
    "Feedback",
    "FeedbackError",
    "count_feedback",
    "decode_feedback",
    "encode_feedback",
    "feedback_from_json",
    "make_feedback",
]

VERDICTS = ("right", "wrong")
#: The ``kind`` values of ``ragwatch_feedback_total``: what a record says (one record may say several);
#: ``unread`` for a request refused before its body was read.
KINDS = ("verdict_right", "verdict_wrong", "chunk_relevant", "chunk_irrelevant", "golden", "note", "unread")
#: The ``outcome`` values: stored; dropped (the store failed or the buffer overflowed); refused (not an
#: operator); invalid (a body or arguments that are no feedback).
OUTCOMES = ("stored", "dropped", "refused", "invalid")
#: Where a record came from.
SOURCES = ("api", "dashboard")

MAX_ID_CHARS = 256
MAX_CLAIM_CHARS = 4000
MAX_NOTE_CHARS = 1000
_CHUNK_POSITION = re.compile(r"#\d{1,4}")


class FeedbackError(RagwatchError, ValueError):
    """Arguments (or a POSTed body) that are no feedback; the message names the field."""


@dataclass(frozen=True, slots=True)
class Feedback:
    sample_id: str
    verdict: str | None = None
    claim: str | None = None
    chunk_id: str | None = None
    chunk_relevant: bool | None = None
    golden: bool = False
    note: str | None = None
    at: float = 0.0
    source: str = "api"

    @property
    def kinds(self) -> list[str]:
        """What this record says, as ``kind`` label values."""
        out = [] if self.verdict is None else [f"verdict_{self.verdict}"]
        if self.chunk_relevant is not None:
            out.append("chunk_relevant" if self.chunk_relevant else "chunk_irrelevant")
        if self.golden:
            out.append("golden")
        if self.note:
            out.append("note")
        return out

    def redacted(self, redact: Callable[[str], str]) -> Feedback:
        """The record with its texts (claim, chunk id, note) through ``redact``: what may be stored."""
        return replace(
            self,
            claim=None if self.claim is None else redact(self.claim),
            chunk_id=None if self.chunk_id is None else redact(self.chunk_id),
            note=None if self.note is None else redact(self.note),
        )

    def without_text(self) -> Feedback:
        """For ``content_off``: no claim or note, and a chunk named only by its position (``#2``), as the
        score records of that mode name them."""
        position = self.chunk_id is not None and _CHUNK_POSITION.fullmatch(self.chunk_id) is not None
        return replace(
            self,
            claim=None,
            note=None,
            chunk_id=self.chunk_id if position else None,
            chunk_relevant=self.chunk_relevant if position else None,
        )


def _text(name: str, value: Any, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FeedbackError(f"{name} must be a string or None, got {type(value).__name__}")
    if not value.strip():
        raise FeedbackError(f"{name} must not be empty")
    if len(value) > limit:
        raise FeedbackError(f"{name} is longer than {limit} characters")
    return value


def make_feedback(
    sample_id: Any,
    *,
    verdict: Any = None,
    claim: Any = None,
    chunk_id: Any = None,
    chunk_relevant: Any = None,
    golden: Any = False,
    note: Any = None,
    source: str = "api",
    at: float | None = None,
) -> Feedback:
    """A checked record; :class:`FeedbackError` naming the first argument that is wrong."""
    sid = _text("sample_id", sample_id, MAX_ID_CHARS)
    if sid is None:
        raise FeedbackError("sample_id is required (the sample_id of a score record)")
    if verdict is not None and verdict not in VERDICTS:
        raise FeedbackError(f"verdict must be 'right', 'wrong' or None, got {verdict!r}")
    claim = _text("claim", claim, MAX_CLAIM_CHARS)
    if claim is not None and verdict is None:
        raise FeedbackError("claim needs a verdict: say whether the judge was right or wrong about it")
    chunk_id = _text("chunk_id", chunk_id, MAX_ID_CHARS)
    if chunk_relevant is not None and not isinstance(chunk_relevant, bool):
        raise FeedbackError(f"chunk_relevant must be true, false or None, got {chunk_relevant!r}")
    if (chunk_id is None) != (chunk_relevant is None):
        raise FeedbackError("chunk_id and chunk_relevant go together: which chunk, and whether it was relevant")
    if not isinstance(golden, bool):
        raise FeedbackError(f"golden must be true or false, got {golden!r}")
    note = _text("note", note, MAX_NOTE_CHARS)
    if verdict is None and chunk_relevant is None and not golden and note is None:
        raise FeedbackError("nothing to record: give a verdict, a chunk's relevance, golden=True or a note")
    if source not in SOURCES:
        raise FeedbackError(f"source must be one of {SOURCES}, got {source!r}")
    return Feedback(
        sid, verdict, claim, chunk_id, chunk_relevant, golden, note, time.time() if at is None else at, source
    )


def count_feedback(counter: Any, service: str, kinds: Iterable[str], outcome: str) -> None:
    """Add one to ``ragwatch_feedback_total`` (``counter``; None: not counted) per kind, under ``outcome``."""
    if counter is not None:
        for kind in kinds:
            counter.labels(service, kind, outcome).inc()


_FIELDS = ("sample_id", "verdict", "claim", "chunk_id", "chunk_relevant", "golden", "note")


def feedback_from_json(body: bytes, source: str = "dashboard") -> Feedback:
    """A record from a POSTed JSON object with the fields of :func:`make_feedback`; unknown fields are an
    error (a typo must not silently drop a label)."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise FeedbackError("the body is not JSON") from None
    if not isinstance(obj, dict):
        raise FeedbackError("the body must be a JSON object")
    unknown = sorted(str(k) for k in obj if k not in _FIELDS)
    if unknown:
        raise FeedbackError(f"unknown fields {', '.join(unknown)[:200]}; known: {', '.join(_FIELDS)}")
    given = {k: v for k, v in obj.items() if k != "sample_id"}
    if given.get("golden") is None:
        given.pop("golden", None)
    return make_feedback(obj.get("sample_id"), source=source, **given)


def encode_feedback(feedback: Feedback) -> bytes:
    record: dict[str, Any] = {"sample_id": feedback.sample_id, "at": feedback.at, "source": feedback.source}
    for name in ("verdict", "claim", "chunk_id", "chunk_relevant", "note"):
        value = getattr(feedback, name)
        if value is not None:
            record[name] = value
    if feedback.golden:
        record["golden"] = True
    return orjson.dumps(record)


def decode_feedback(raw: bytes | str | Mapping[str, Any]) -> Feedback | None:
    """A stored record, or None when it is not one (a reader skips and counts it, never fails on it)."""
    try:
        obj = raw if isinstance(raw, Mapping) else orjson.loads(raw)
        if not isinstance(obj, Mapping):
            return None
        at = obj.get("at")
        return make_feedback(
            obj.get("sample_id"),
            verdict=obj.get("verdict"),
            claim=obj.get("claim"),
            chunk_id=obj.get("chunk_id"),
            chunk_relevant=obj.get("chunk_relevant"),
            golden=obj.get("golden", False),
            note=obj.get("note"),
            source=str(obj.get("source", "api")),
            at=float(at) if isinstance(at, (int, float)) else 0.0,
        )
    except (orjson.JSONDecodeError, FeedbackError, TypeError, ValueError):
        return None
