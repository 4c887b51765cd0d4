"""Score records without user text, for ``content_off`` (GDPR): the scores stay, every quote goes.

The in-process scorer judges a sample's text in memory; what it stores — the record the report, the
``/dashboard`` page and ``on_score`` callbacks read — must then hold none of it: not the question or the
answer, not a claim, an evidence quote, a chunk id or an LLM judge's reasoning. Judges put text under many
keys of their ``details``, so strings are dropped by default and only the few that are labels (a verdict, a
rule's name) are kept: a key added to a judge later is dropped until it is named here.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragwatch.scoring.worker import ScoreRecord

__all__ = ["LABEL_KEYS", "without_text"]

#: Detail keys whose string values are labels chosen by ragwatch, never user text.
LABEL_KEYS = frozenset({"verdict", "rule", "faithfulness_basis", "skipped", "model", "tier", "decided_by", "source"})


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if not isinstance(v, str) or k in LABEL_KEYS}
    if isinstance(value, list):
        return [_scrub(v) for v in value if not isinstance(v, str)]
    return value


def without_text(record: ScoreRecord) -> ScoreRecord:
    """``record`` with its question, answer, chunk ids, tags and every free-text detail dropped."""
    return dataclasses.replace(
        record,
        question=None,
        answer=None,
        chunk_ids=[f"#{i + 1}" for i in range(len(record.chunk_ids))],
        details=_scrub(record.details),
        tags={},
    )
