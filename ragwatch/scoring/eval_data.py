"""The labelled files of the evaluation commands (``eval-judge``, ``eval-alerts``): reading JSONL rows, telling
faithfulness from relevance files by their fields, checking every row before anything is judged, turning a
row into the :class:`~ragwatch.sampling.sample.Sample` a worker would see, and reading a verdict's claims.

Labels are read only to score the judge, never shown to it. A malformed line is an :class:`EvalInputError`
with its line number (the commands exit 2), not a traceback.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ragwatch.sampling.sample import Sample, SampleChunk

__all__ = [
    "FAITHFULNESS_FIELDS",
    "RELEVANCE_FIELDS",
    "EvalInputError",
    "check_faithfulness_row",
    "check_relevance_row",
    "claims_of",
    "detect_kind",
    "load_checked",
    "load_rows",
    "neutral_order_key",
    "row_to_sample",
]

FAITHFULNESS_FIELDS = ("question", "contexts", "answer", "label_hallucinated", "task_type", "language")
RELEVANCE_FIELDS = ("question", "passage", "relevant", "question_id", "language")


class EvalInputError(ValueError):
    """A line of the input cannot be evaluated; ``line`` is its 1-based number (0: the file itself)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


def load_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """JSON objects of a JSONL file (blank lines skipped); a bad line raises :class:`EvalInputError`."""
    rows: list[dict[str, Any]] = []
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise EvalInputError(0, f"cannot read {path}: {exc.strerror or exc}") from None
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if limit is not None and len(rows) >= limit:
                    break
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise EvalInputError(number, f"not valid JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise EvalInputError(number, f"expected a JSON object, got {type(row).__name__}")
                row["__line__"] = number
                rows.append(row)
        except UnicodeDecodeError:
            raise EvalInputError(len(rows) + 1, "not UTF-8 text") from None
    if not rows:
        raise EvalInputError(0, f"{path} holds no rows")
    return rows


def detect_kind(row: dict[str, Any]) -> str:
    """``"faithfulness"`` or ``"relevance"`` from the fields of a row; :class:`EvalInputError` otherwise."""
    line = int(row.get("__line__", 0))
    fields: tuple[str, ...]
    if "contexts" in row or "label_hallucinated" in row:
        kind, fields = "faithfulness", FAITHFULNESS_FIELDS
    elif "passage" in row or "relevant" in row:
        kind, fields = "relevance", RELEVANCE_FIELDS
    else:
        raise EvalInputError(line, f"unknown schema: expected the fields {FAITHFULNESS_FIELDS} or {RELEVANCE_FIELDS}")
    missing = [f for f in fields if f not in row]
    if missing:
        raise EvalInputError(line, f"{kind} row lacks {', '.join(missing)}")
    return kind


def check_faithfulness_row(row: dict[str, Any]) -> None:
    line = int(row.get("__line__", 0))
    contexts = row["contexts"]
    if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise EvalInputError(line, "contexts must be a list of strings")
    for name in ("question", "answer"):
        if row[name] is not None and not isinstance(row[name], str):
            raise EvalInputError(line, f"{name} must be a string or null")
    if not isinstance(row["label_hallucinated"], bool):
        raise EvalInputError(line, "label_hallucinated must be true or false")


def check_relevance_row(row: dict[str, Any]) -> None:
    line = int(row.get("__line__", 0))
    for name in ("question", "passage"):
        if not isinstance(row[name], str):
            raise EvalInputError(line, f"{name} must be a string")
    if not isinstance(row["relevant"], bool):
        raise EvalInputError(line, "relevant must be true or false")
    if not isinstance(row["question_id"], (str, int)):
        raise EvalInputError(line, "question_id must be a string or an integer")


def row_to_sample(row: dict[str, Any], index: int = 0) -> Sample:
    """A faithfulness row as the sample a worker would see: chunks ``c1``..``cn`` in context order."""
    chunks = [SampleChunk(id=f"c{i + 1}", rank=i, text=text) for i, text in enumerate(row["contexts"])]
    return Sample(
        sample_id=str(row.get("id", index)),
        service="eval",
        question=row.get("question"),
        answer=row.get("answer"),
        chunks=chunks,
        created_at=0.0,
    )


def claims_of(details: dict[str, Any]) -> list[dict[str, Any]]:
    """Claim records of a verdict, also when a composite judge (the cascade) nests its judges' details."""
    claims = details.get("claims")
    if isinstance(claims, list):
        return claims
    decided = details.get(str(details.get("decided_by")))
    if isinstance(decided, dict) and isinstance(decided.get("claims"), list):
        return decided["claims"]
    return []


def neutral_order_key(text: str) -> str:
    """A neutral order for equal scores: data files often list relevant passages first, and a stable sort
    would hand the judge that order for free."""
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()


def load_checked(path: Path, limit: int | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The kind and rows of a file, every row checked (its schema, no mixing of kinds) before any is judged:
    a bad line 2,000 fails in a second, not after an hour of judging."""
    rows = load_rows(path, limit)
    kind = detect_kind(rows[0])
    check = check_faithfulness_row if kind == "faithfulness" else check_relevance_row
    for row in rows:
        if detect_kind(row) != kind:
            raise EvalInputError(int(row["__line__"]), f"a {kind} file cannot mix in rows of another kind")
        check(row)
    return kind, rows
