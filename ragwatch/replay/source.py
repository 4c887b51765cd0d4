"""Where the replay prober's questions come from, and how an answer's drift is measured.

Two sources, because they answer different questions:

* a **golden set** (JSONL, written by people) knows which chunks *should* come back, so it measures
  retrieval quality (Hit Rate@K, Recall@K, Precision@K, MRR) and, with a reference answer, answer drift;
* **recent traffic** (the score records the workers stored) has no ground truth, but it is what users really
  ask, and the answer given at the time is a baseline: a replayed question whose answer changed a lot is a
  regression candidate (new index, new prompt, new model).

Golden-set format — one JSON object per line; blank lines and lines starting with ``#`` are skipped::

    {"question": "How do I reset my password?", "relevant_ids": ["kb-12", "kb-40"],
     "reference_answer": "Use the 'Forgot password' link on the sign-in page."}

``question`` (non-empty string) and ``relevant_ids`` (list of strings; may be empty, which scores 0 on every
retrieval metric, see :mod:`ragwatch.scoring.retrieval_metrics`) are required; ``reference_answer`` (string) and
``id`` (string, used in reports) are optional; other keys are ignored so a set can carry notes. Any error
names the file and line (:class:`GoldenSetError`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ragwatch.errors import ConfigError

__all__ = [
    "GoldenSetError",
    "Question",
    "load_golden",
    "similarity",
    "tokens",
    "traffic_questions",
]


class GoldenSetError(ConfigError):
    """A golden-set file that cannot be used; the message names the file and the 1-based line."""


@dataclass(slots=True)
class Question:
    """One question to replay, with whatever ground truth or history came with it."""

    text: str
    source: str  # "golden" or "traffic"
    id: str | None = None
    relevant_ids: list[str] | None = None  # golden only: the chunk ids that should be retrieved
    reference_answer: str | None = None  # golden, optional
    historical_answer: str | None = None  # traffic: the answer given when the question was sampled
    historical_chunk_ids: list[str] = field(default_factory=list)


def load_golden(path: str | os.PathLike[str]) -> list[Question]:
    """Read and validate a golden JSONL file; every problem is reported with its line number."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise GoldenSetError(f"golden set {p}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise GoldenSetError(f"golden set {p}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    questions: list[Question] = []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"golden set {p}, line {number}"
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise GoldenSetError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
        if not isinstance(obj, dict):
            raise GoldenSetError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        question = obj.get("question")
        if not isinstance(question, str) or not question.strip():
            raise GoldenSetError(f"{where}: 'question' must be a non-empty string")
        relevant = obj.get("relevant_ids")
        if relevant is None:
            raise GoldenSetError(f"{where}: 'relevant_ids' is required (a list of chunk ids, may be empty)")
        if not isinstance(relevant, list) or not all(isinstance(i, str) and i for i in relevant):
            raise GoldenSetError(f"{where}: 'relevant_ids' must be a list of non-empty strings")
        reference = obj.get("reference_answer")
        if reference is not None and not isinstance(reference, str):
            raise GoldenSetError(f"{where}: 'reference_answer' must be a string when present")
        qid = obj.get("id")
        if qid is not None and not isinstance(qid, str):
            raise GoldenSetError(f"{where}: 'id' must be a string when present")
        questions.append(
            Question(
                text=question,
                source="golden",
                id=qid or f"line-{number}",
                relevant_ids=list(relevant),
                reference_answer=reference,
            )
        )
    if not questions:
        raise GoldenSetError(f"golden set {p}: no questions")
    return questions


def traffic_questions(records: Iterable[bytes | str | dict], limit: int) -> list[Question]:
    """Distinct questions from stored score records (newest first), with the answer and chunk ids of the time.

    Records without a question (``store_text=false`` keeps only hashes — there is nothing to replay) and
    undecodable records are skipped: the prober must keep working on a partially unreadable history.
    """
    seen: set[str] = set()
    out: list[Question] = []
    for raw in records:
        if len(out) >= limit:
            break
        try:
            rec = raw if isinstance(raw, dict) else json.loads(raw)
        except (ValueError, TypeError):
            continue
        if not isinstance(rec, dict):
            continue
        question = rec.get("question")
        if not isinstance(question, str) or not question.strip():
            continue
        key = " ".join(question.split()).casefold()
        if key in seen:
            continue
        seen.add(key)
        answer = rec.get("answer")
        ids = rec.get("chunk_ids")
        out.append(
            Question(
                text=question,
                source="traffic",
                id=rec.get("sample_id") if isinstance(rec.get("sample_id"), str) else None,
                historical_answer=answer if isinstance(answer, str) else None,
                historical_chunk_ids=[str(i) for i in ids] if isinstance(ids, list) else [],
            )
        )
    return out


# ---------------------------------------------------------------------------------------------- similarity

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # hangul syllables
)
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_]+", re.UNICODE)
_CJK_RUN = re.compile(rf"[{_CJK}]+")


def tokens(text: str) -> set[str]:
    """Case-folded word tokens; runs of CJK characters become their character bigrams.

    CJK text has no spaces, so whitespace tokens would make a whole sentence one token; bigrams are the
    usual cheap stand-in for words (a single CJK character stays a unigram).
    """
    out: set[str] = set()
    for match in _TOKEN.finditer(text.casefold()):
        tok = match.group(0)
        if _CJK_RUN.fullmatch(tok):
            if len(tok) == 1:
                out.add(tok)
            else:
                out.update(tok[i : i + 2] for i in range(len(tok) - 1))
        else:
            out.add(tok)
    return out


def similarity(a: str, b: str) -> float:
    """Token-set Jaccard |A ∩ B| / |A ∪ B| over :func:`tokens`, in 0..1; two empty texts are identical (1.0).

    Cheap and deterministic on purpose: a prober runs every few minutes over hundreds of answers, and the
    signal wanted is "did the answer change a lot", not a judgement of quality. Drift is ``1 - similarity``.
    """
    ta, tb = tokens(a), tokens(b)
    if not ta and not tb:
        return 1.0
    return len(ta & tb) / len(ta | tb)
