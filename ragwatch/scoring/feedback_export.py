"""People's corrections joined with the stored score records: ``eval-judge`` rows and replay golden questions.

``ragwatch labels export`` reads the feedback store (:meth:`~ragwatch.queue.contract.Queue.feedback`) and the
newest score records, merges the feedback of each sample (the newest word on each point wins) and writes:

- **eval-judge** rows (the faithfulness schema of :mod:`ragwatch.scoring.eval_data`): for every sample with a
  verdict. ``label_hallucinated`` is the judge's own flag (a claim UNSUPPORTED, as ``eval-judge`` flags it)
  where a person said "right", its opposite where they said "wrong"; verdicts on single claims correct
  those claims (UNSUPPORTED ↔ SUPPORTED, an UNVERIFIABLE one marked wrong counts as unsupported) and the
  answer is hallucinated when a corrected claim is unsupported. A verdict on the whole answer wins over
  claim verdicts. ``contexts`` are the retrieved chunks' texts from ``chunk_texts`` (your knowledge base
  as JSONL, ``--chunks``) when every chunk is found there; otherwise the sentences the judge quoted from each
  chunk — a score record keeps chunk ids, not chunk texts — which ``eval-judge`` re-judges nearly, not
  exactly, as the live judge did;
- **golden** questions (the format of :mod:`ragwatch.replay.source`): every sample marked "add to golden set",
  ``relevant_ids`` the chunks a person marked relevant, else the chunks the supported claims quote, minus
  those marked not relevant; ``reference_answer`` its answer unless it is labelled hallucinated.

A sample whose record is no longer stored, or has no text (``content_off``), is skipped and counted by reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ragwatch.sampling.feedback import Feedback, decode_feedback
from ragwatch.scoring.eval_data import claims_of
from ragwatch.scoring.judges.relevance_cues import is_cjk_question

__all__ = ["Labels", "Skipped", "golden_rows", "judge_rows", "merge_feedback", "records_for"]

Skipped = Counter  # reason -> samples


@dataclass(slots=True)
class Labels:
    """Everything people said about one sample, the newest word on each point."""

    sample_id: str
    verdict: str | None = None  # about the whole answer
    claims: dict[str, str] = field(default_factory=dict)  # claim text -> "right" / "wrong"
    chunks: dict[str, bool] = field(default_factory=dict)  # chunk id -> relevant
    golden: bool = False
    notes: list[str] = field(default_factory=list)


def merge_feedback(stored: Iterable[tuple[str, bytes]], skipped: Skipped) -> dict[str, Labels]:
    """Stored (sample id, record) pairs, newest first as the store gives them, merged per sample."""
    records: list[Feedback] = []
    for _sample_id, raw in stored:
        record = decode_feedback(raw)
        if record is None:
            skipped["unreadable feedback record"] += 1
        else:
            records.append(record)
    merged: dict[str, Labels] = {}
    for record in sorted(records, key=lambda r: r.at):  # oldest first: a later word overwrites
        labels = merged.setdefault(record.sample_id, Labels(record.sample_id))
        if record.verdict is not None:
            if record.claim is None:
                labels.verdict = record.verdict
            else:
                labels.claims[record.claim] = record.verdict
        if record.chunk_id is not None and record.chunk_relevant is not None:
            labels.chunks[record.chunk_id] = record.chunk_relevant
        labels.golden = labels.golden or record.golden
        if record.note:
            labels.notes.append(record.note)
    return merged


def records_for(raws: Iterable[bytes], sample_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The newest score record of each of ``sample_ids`` among ``raws`` (newest first); only records that
    mention a wanted id are decoded, so reading many costs little."""
    wanted = {s.encode("utf-8"): s for s in sample_ids}
    found: dict[str, dict[str, Any]] = {}
    for raw in raws:
        if len(found) == len(wanted):
            break
        if not any(key in raw for key in wanted):
            continue
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        sid = record.get("sample_id") if isinstance(record, dict) else None
        if isinstance(sid, str) and sid in wanted.values() and sid not in found:
            found[sid] = record
    return found


def _claims(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The claims of the first judge that listed any."""
    details = record.get("details")
    for value in (details or {}).values() if isinstance(details, dict) else ():
        if isinstance(value, dict):
            claims = [c for c in claims_of(value) if isinstance(c, dict) and isinstance(c.get("text"), str)]
            if claims:
                return claims
    return []


def _judge_flag(record: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> bool | None:
    """Whether the judge called the answer hallucinated, as ``eval-judge`` counts it; None when unknown."""
    if claims:
        return any(c.get("verdict") == "UNSUPPORTED" for c in claims)
    rate = (record.get("scores") or {}).get("hallucination_rate")
    return None if not isinstance(rate, (int, float)) else rate >= 0.5


def hallucinated(record: Mapping[str, Any], labels: Labels) -> bool | None:
    """The corrected label of one sample (module docstring); None when the record cannot say."""
    claims = _claims(record)
    flag = _judge_flag(record, claims)
    if labels.verdict is not None:
        return None if flag is None else flag != (labels.verdict == "wrong")
    if not labels.claims or not claims:
        return None
    unsupported = False
    for claim in claims:
        judged = claim.get("verdict") == "UNSUPPORTED"
        said = labels.claims.get(claim["text"])
        unsupported |= judged if said != "wrong" else not judged
    return unsupported


def _contexts(record: Mapping[str, Any], chunk_texts: Mapping[str, str]) -> list[str]:
    ids = [str(i) for i in record.get("chunk_ids") or ()]
    if ids and all(i in chunk_texts for i in ids):
        return [chunk_texts[i] for i in ids]
    quotes: dict[str, list[str]] = {i: [] for i in ids}
    for claim in _claims(record):
        quote, chunk = claim.get("evidence"), claim.get("chunk_id")
        if isinstance(quote, str) and quote:
            sentences = quotes.setdefault(str(chunk), [])
            if quote not in sentences:
                sentences.append(quote)
    return [" ".join(sentences) for sentences in quotes.values() if sentences]


def judge_rows(
    labels: Mapping[str, Labels],
    records: Mapping[str, Mapping[str, Any]],
    skipped: Skipped,
    chunk_texts: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """``eval-judge`` faithfulness rows, one per sample with a verdict."""
    rows = []
    for sid, said in labels.items():
        if said.verdict is None and not said.claims:
            continue  # chunk labels or golden only: not a verdict on the answer
        record = records.get(sid)
        if record is None:
            skipped["score record no longer stored"] += 1
            continue
        question, answer = record.get("question"), record.get("answer")
        if not isinstance(question, str) or not isinstance(answer, str):
            skipped["no question or answer stored (content_off, store_text off)"] += 1
            continue
        label = hallucinated(record, said)
        if label is None:
            skipped["judge verdict not in the record (no claims matched)"] += 1
            continue
        contexts = _contexts(record, chunk_texts or {})
        rows.append(
            {
                "id": sid,
                "question": question,
                "contexts": contexts,
                "answer": answer,
                "label_hallucinated": label,
                "task_type": "QA",
                "language": "zh" if is_cjk_question(question + answer) else "en",
                "source": "ragwatch-feedback",
                "notes": said.notes,
            }
        )
    return rows


def golden_rows(
    labels: Mapping[str, Labels], records: Mapping[str, Mapping[str, Any]], skipped: Skipped
) -> list[dict[str, Any]]:
    """Replay golden questions, one per sample marked for the golden set (same question: the newest)."""
    rows: dict[str, dict[str, Any]] = {}
    for sid, said in labels.items():
        if not said.golden:
            continue
        record = records.get(sid)
        if record is None:
            skipped["score record no longer stored"] += 1
            continue
        question = record.get("question")
        if not isinstance(question, str) or not question.strip():
            skipped["no question stored (content_off, store_text off)"] += 1
            continue
        relevant = [c for c, yes in said.chunks.items() if yes]
        if not relevant:
            quoted = {str(c.get("chunk_id")) for c in _claims(record) if c.get("verdict") == "SUPPORTED"}
            relevant = [str(i) for i in record.get("chunk_ids") or () if str(i) in quoted]
        relevant = [c for c in relevant if said.chunks.get(c, True)]
        row: dict[str, Any] = {"id": sid, "question": question, "relevant_ids": relevant}
        answer = record.get("answer")
        label = hallucinated(record, said)
        if label is None:  # nobody judged the answer: the judge's own word
            label = _judge_flag(record, _claims(record))
        if isinstance(answer, str) and answer.strip() and label is False:
            row["reference_answer"] = answer  # a hallucinated (or unknown) answer is no reference
        rows[question] = row
    return list(rows.values())
