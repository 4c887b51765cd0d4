"""The cases of ``ragwatch eval-alerts``: retrievals of known quality built from a labelled relevance file.

Pure data to lists: the labels decide what each chunk is (answer-bearing, a same-topic non-answer, off
topic); no judge is called here (:mod:`ragwatch.scoring.alert_eval` scores them). Every choice is seeded per
question and case, so ``--limit`` or another case never moves a question's lists. The cases are described in
:mod:`ragwatch.scoring.alert_eval`.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ragwatch.sampling.sample import Sample
from ragwatch.scoring.evaluate import neutral_order_key, row_to_sample

__all__ = [
    "ANSWER",
    "CASES",
    "OFF_TOPIC",
    "PASSAGE_CLASSES",
    "SAME_TOPIC",
    "TOP",
    "Retrieval",
    "bm25_order",
    "bm25_tokens",
    "build_retrievals",
    "group_questions",
]

CASES = ("gold", "realistic", "one_off_topic", "off_topic", "same_topic")
ANSWER, SAME_TOPIC, OFF_TOPIC = "answer", "same_topic", "off_topic"
PASSAGE_CLASSES = (ANSWER, SAME_TOPIC, OFF_TOPIC)
TOP = 3


@dataclass
class Retrieval:
    """One case's top 3 for one question; ``classes`` are what the labels say each chunk is."""

    case: str
    question_id: str
    question: str
    language: str
    texts: list[str]
    classes: list[str]
    cp3: float | None = None
    relevances: list[float] | None = field(default=None, repr=False)

    @property
    def label_cp3(self) -> float:
        """CP@3 of a judge that agreed with the labels: the answer-bearing share of the top 3."""
        return sum(1 for c in self.classes if c == ANSWER) / TOP

    def sample(self) -> Sample:
        row = {"id": f"{self.case}/{self.question_id}", "question": self.question, "answer": None}
        return row_to_sample({**row, "contexts": self.texts})


# ---------------------------------------------------------------------------------- BM25 and cases

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKENS = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_CHAR = re.compile(rf"[{_CJK}]")


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased words; a run of CJK characters as its character bigrams (a lone character as itself)."""
    out: list[str] = []
    for m in _TOKENS.finditer(text.lower()):
        t = m.group()
        if _CJK_CHAR.match(t):
            out += [t[i : i + 2] for i in range(len(t) - 1)] if len(t) > 1 else [t]
        else:
            out.append(t)
    return out


class _BM25:
    def __init__(self, passages: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        df: Counter[str] = Counter()
        total = 0
        for p in passages:
            toks = bm25_tokens(p)
            total += len(toks)
            df.update(set(toks))
        n = max(1, len(passages))
        self.avg = total / n if total else 1.0
        self.idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def score(self, query: str, passage: str) -> float:
        toks = bm25_tokens(passage)
        tf = Counter(toks)
        norm = self.k1 * (1.0 - self.b + self.b * len(toks) / self.avg)
        return sum(
            self.idf.get(t, 0.0) * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in set(bm25_tokens(query)) if t in tf
        )


def bm25_order(question: str, passages: Sequence[str], index: _BM25 | None = None) -> list[int]:
    """Indices of ``passages`` by BM25 against ``question``, best first; ties in neutral (hash) order."""
    index = index or _BM25(passages)
    scores = [index.score(question, p) for p in passages]
    return sorted(range(len(passages)), key=lambda i: (-scores[i], neutral_order_key(passages[i])))


def group_questions(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[str(row["question_id"])].append(row)
    return grouped


def _off_topic(
    qid: str, group: list[dict[str, Any]], pool: dict[str, list[str]], grouped: dict, rng: random.Random, k: int
) -> list[str]:
    """``k`` passages of ``k`` other questions: of the same language when it has enough, never of the
    question's own document or equal to one of its passages; fewer only when the file has no more."""
    same = pool.get(str(group[0]["language"]), [])
    others = same if len(same) > 3 * k else pool[""]  # pool[""]: every question of the file
    own_texts = {r["passage"] for r in group}
    own_doc = group[0].get("document_title")
    picked: list[str] = []
    used: set[str] = set()
    for _ in range(50 * k):
        if len(picked) == k or not others:
            break
        other = rng.choice(others)
        if other == qid or other in used:
            continue
        row = rng.choice(grouped[other])
        if row["passage"] in own_texts or (own_doc is not None and row.get("document_title") == own_doc):
            continue
        used.add(other)
        picked.append(row["passage"])
    return picked


def build_retrievals(rows: Sequence[dict[str, Any]], seed: int = 0, limit: int | None = None) -> dict[str, Any]:
    """The cases' retrievals of a relevance file (checked rows); ``limit`` questions, a seeded choice.

    Returns ``{"retrievals": {case: [Retrieval]}, "questions": {"in_file", "selected"}}``."""
    grouped = group_questions(rows)
    qids = list(grouped)
    selected = qids
    if limit is not None and limit < len(qids):
        keep = set(random.Random(f"{seed}/limit").sample(qids, limit))
        selected = [q for q in qids if q in keep]
    pool: dict[str, list[str]] = defaultdict(list)  # question ids by language; "" holds them all
    for q in qids:
        pool[str(grouped[q][0]["language"])].append(q)
    pool[""] = qids
    bm25 = _BM25([r["passage"] for r in rows])
    cases: dict[str, list[Retrieval]] = {case: [] for case in CASES}
    for qid in selected:
        group = grouped[qid]
        question = str(group[0]["question"])
        lists: dict[str, tuple[list[str], list[str]]] = {}  # case -> (texts, classes)
        answers = [r["passage"] for r in group if r["relevant"]]
        non = [r["passage"] for r in group if not r["relevant"]]
        if answers and len(group) >= TOP:
            fill = random.Random(f"{seed}/{qid}/gold").sample(non, max(0, TOP - len(answers)))
            gold = (answers[:TOP] + fill)[:TOP]
            gold_classes = [ANSWER] * min(TOP, len(answers)) + [SAME_TOPIC] * len(fill)
            lists["gold"] = gold, gold_classes
            texts = [r["passage"] for r in group]
            top = bm25_order(question, texts, bm25)[:TOP]
            lists["realistic"] = [texts[i] for i in top], [ANSWER if group[i]["relevant"] else SAME_TOPIC for i in top]
            rng = random.Random(f"{seed}/{qid}/one_off_topic")
            swap = _off_topic(qid, group, pool, grouped, rng, 1)
            if swap:
                at = rng.randrange(TOP)
                lists["one_off_topic"] = (
                    [*gold[:at], swap[0], *gold[at + 1 :]],
                    [*gold_classes[:at], OFF_TOPIC, *gold_classes[at + 1 :]],
                )
            off = _off_topic(qid, group, pool, grouped, random.Random(f"{seed}/{qid}/off_topic"), TOP)
            if len(off) == TOP:
                lists["off_topic"] = off, [OFF_TOPIC] * TOP
        if len(non) >= TOP:
            lists["same_topic"] = random.Random(f"{seed}/{qid}/same_topic").sample(non, TOP), [SAME_TOPIC] * TOP
        for case, (texts, classes) in lists.items():
            cases[case].append(Retrieval(case, qid, question, str(group[0]["language"]), texts, classes))
    return {"retrievals": cases, "questions": {"in_file": len(qids), "selected": len(selected)}}
