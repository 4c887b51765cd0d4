"""Synthetic retrieval lists of news passages on one event, where only some carry the asked value.

Why: the graded relevance model's *information* level must tell a passage that carries the asked value (the
date for "when", the count for "how many", the name for "who") from passages on the same event that do not.
Retrieval over news gives exactly such lists, and ``train/relevance/`` has none: SelQA and Factcheck-GPT
candidates are single sentences or claims, DuReader's lists are non-factoid. So this builds them from the
news and encyclopaedia contexts of ``train/faithfulness/`` (permissive sets only, the ones the offline judge
fits on: XSumFaith and WiCE in English, UHGEval in Chinese), with a seed:

1. A context is cut into sentences and the sentences into passages of about a retrieved chunk
   (:data:`CHUNK_CHARS`).
2. An *answer sentence* is one holding a value of a kind questions ask for: a date or year ("when"), a count
   of something ("how many" + the counted noun), a person's name ("who"). At most :data:`PER_CONTEXT` per
   context, of different kinds.
3. The *question* is the asking words for that kind plus the sentence's content words nearest the value
   (up to :data:`QUESTION_WORDS`), the value itself left out: a short keyword question, as the lexical
   features read it (they see word roots and the asked kind, not grammar).
4. The *list*: the passage holding the answer sentence (answer-bearing); the same passage with the answer
   sentence taken out (on the same event, without the value); the context's other passages. A passage that
   still holds the value is left out of the list (it may answer too). Lists without a same-topic passage
   are dropped.

Rows look like ``train/relevance/`` rows (``question``, ``passage``, ``relevant``, ``question_id``, ``group``
= the source context, so grouped folds keep a context's questions together). Nothing here reads the dev files.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import trainkit as kit

from ragwatch.scoring.judges.text import content_tokens

#: The contexts the lists are built from, with the language they are read as.
SOURCES = (
    ("train/faithfulness/xsumfaith.jsonl", "en"),
    ("train/faithfulness/wice.jsonl", "en"),
    ("train/faithfulness/uhgeval.jsonl", "zh"),
)
SEED = 0
#: A passage's length in characters (English, Chinese): about what a retriever returns.
CHUNK_CHARS = {"en": 600, "zh": 250}
PER_CONTEXT = 2
QUESTION_WORDS = 5
#: of which the words right beside the value (the rest: words the story repeats elsewhere)
NEAR = 2
MAX_CONTEXT_CHARS = 6000

_SENT_EN = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z\"'(\[])")
_SENT_ZH = re.compile(r"(?<=[。！？；])")
_MONTHS = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
#: value patterns per kind and language; group 0 is the value taken out of the question
_VALUE = {
    ("date", "en"): re.compile(
        rf"\b(?:\d{{1,2}} {_MONTHS}(?: \d{{4}})?|{_MONTHS} \d{{1,2}}(?:, \d{{4}})?|{_MONTHS} \d{{4}}"
        r"|(?:in|since) (?:1[89]|20)\d\d)\b"
    ),
    ("number", "en"): re.compile(
        r"\b(?<![\d.,$£€])(?:\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?: (?:million|billion|thousand))? (?P<noun>[a-z]{3,}s)\b"
    ),
    ("person", "en"): re.compile(r"(?<=[a-z,] )(?:[A-Z][a-z]+ ){1,2}[A-Z][a-z]+(?=[ ,.])"),
    ("date", "zh"): re.compile(r"(?:\d{4}年)?\d{1,2}月\d{1,2}日|\d{4}年\d{1,2}月|\d{4}年"),
    ("number", "zh"): re.compile(r"\d+(?:\.\d+)?(?:万|亿)?(?P<noun>[名人个家辆套起项只次吨元亩户]|万元|亿元)"),
}
_ASK = {
    ("date", "en"): "When",
    ("number", "en"): "How many {noun}",
    ("person", "en"): "Who",
    ("date", "zh"): "什么时候",
    ("number", "zh"): "多少{noun}",
}
_NOT_NAMES = frozenset(("The", "This", "That", "But", "And", "It", "He", "She", "They", "In", "On", "At", "Mr", "Mrs"))


def sentences(text: str, language: str) -> list[str]:
    """Sentences of ``text`` (a line break always ends one: headlines, datelines)."""
    splitter = _SENT_ZH if language == "zh" else _SENT_EN
    parts = [s for line in text.split("\n") for s in splitter.split(" ".join(line.split()))]
    return [s.strip() for s in parts if len(s.strip()) >= 15]


def passages(sents: list[str], language: str) -> list[list[int]]:
    """Consecutive sentence indices joined up to :data:`CHUNK_CHARS`."""
    out: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for i, s in enumerate(sents):
        if cur and size + len(s) > CHUNK_CHARS[language]:
            out.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += len(s) + 1
    if cur:
        out.append(cur)
    return out


def _join(sents: list[str], idx: list[int], language: str) -> str:
    return ("" if language == "zh" else " ").join(sents[i] for i in idx)


_WORD_EN = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|\d+")
_CLAUSE_ZH = re.compile(r"[，,、：:（）()“”\"]")
#: a wire-service dateline ("新华社北京3月5日电"): its date is when the story was filed, not an answer
_DATELINE_ZH = re.compile(r"^\s*(?:新华社|中新网|人民网|记者|本报)")


def question_for(
    sentence: str, match: re.Match[str], kind: str, language: str, shared: frozenset[str] = frozenset()
) -> str | None:
    """The asking words of ``kind`` and the sentence's words nearest the value (value excluded)."""
    noun = match.groupdict().get("noun") or ""
    ask = _ASK[(kind, language)].format(noun=noun)
    if language == "zh":
        if kind == "date" and (_DATELINE_ZH.search(sentence) or sentence[match.end() : match.end() + 1] in "电讯"):
            return None
        # the clause holding the value, with the value asked for: "造成全国1.2万人受灾" -> "造成全国多少人受灾"
        start = max((m.end() for m in _CLAUSE_ZH.finditer(sentence, 0, match.start())), default=0)
        end = next((m.start() for m in _CLAUSE_ZH.finditer(sentence, match.end())), len(sentence))
        clause = sentence[start : match.start()] + ask + sentence[match.end() : end]
        clause = clause.rstrip("。！？；")
        return clause + "？" if len(clause) - len(ask) >= 6 else None
    if kind == "person" and match.group().split()[0] in _NOT_NAMES:
        return None
    value = {w.lower() for w in _WORD_EN.findall(match.group())}
    before = [m for m in _WORD_EN.finditer(sentence, 0, match.start()) if content_tokens(m.group())]
    after = [m for m in _WORD_EN.finditer(sentence, match.end()) if content_tokens(m.group())]
    picked: dict[int, str] = {}
    # outwards from the value: the predicate sits next to it (NEAR words), then the words the story repeats
    # in other sentences (its subject), as a reader's question names the event and asks for one detail
    for wanted in (NEAR, QUESTION_WORDS):
        for step in range(max(len(before), len(after))):
            for side in (before[::-1], after):
                if step < len(side) and len(picked) < wanted:
                    m = side[step]
                    word = m.group()
                    if word.lower() in value or word.isdigit() or m.start() in picked:
                        continue
                    if wanted == NEAR or word.lower() in shared:
                        picked[m.start()] = word
    if len(picked) < 3:
        return None
    return f"{ask} {' '.join(picked[k] for k in sorted(picked))}?"


def lists_of(context: str, language: str, cid: str, rng: random.Random) -> list[dict[str, Any]]:
    sents = sentences(context[:MAX_CONTEXT_CHARS], language)
    chunks = passages(sents, language)
    if len(sents) < 4 or len(chunks) < 2:
        return []
    chunk_of = {i: k for k, idx in enumerate(chunks) for i in idx}
    in_sents = Counter(w for s in sents for w in {m.group().lower() for m in _WORD_EN.finditer(s)})
    candidates = []
    for i, s in enumerate(sents):
        for kind in ("date", "number", "person"):
            pattern = _VALUE.get((kind, language))
            m = pattern.search(s) if pattern else None
            if m:
                candidates.append((i, kind, m))
    rng.shuffle(candidates)
    rows: list[dict[str, Any]] = []
    kinds: set[str] = set()
    for i, kind, m in candidates:
        if kind in kinds or len(kinds) >= PER_CONTEXT:
            continue
        own = {w.group().lower() for w in _WORD_EN.finditer(sents[i])}
        shared = frozenset(w for w in own if in_sents[w] >= 3)  # in two other sentences at least
        question = question_for(sents[i], m, kind, language, shared)
        if question is None:
            continue
        value = m.group()
        k = chunk_of[i]
        listed = [(_join(sents, chunks[k], language), True)]
        rest = [j for j in chunks[k] if j != i]
        if rest:
            listed.append((_join(sents, rest, language), False))
        # the same passage with only the value taken out: every word of the question, not what it asks
        blanked = [*sents[:i], sents[i][: m.start()] + sents[i][m.end() :], *sents[i + 1 :]]
        listed.append((_join(blanked, chunks[k], language), False))
        listed += [(_join(sents, idx, language), False) for n, idx in enumerate(chunks) if n != k]
        listed = [(text, rel) for text, rel in listed if rel or value not in text]
        if not any(not rel for _, rel in listed):
            continue
        kinds.add(kind)
        qid = f"{cid}-{kind}"
        rows += [
            {
                "question": question,
                "passage": text,
                "relevant": rel,
                "question_id": qid,
                "group": cid,
                "language": language,
                "kind": kind,
            }
            for text, rel in listed
        ]
    return rows


def news_lists(data: Path) -> list[dict[str, Any]]:
    """Every synthetic list of :data:`SOURCES`, in file order (module docstring)."""
    rng = random.Random(SEED)
    out: list[dict[str, Any]] = []
    for fname, language in SOURCES:
        seen: set[str] = set()
        for row in kit.read_jsonl(data / fname):
            for ctx in row["contexts"]:
                if ctx in seen:
                    continue
                seen.add(ctx)
                cid = f"news:{Path(fname).stem}:{hashlib.sha256(ctx.encode()).hexdigest()[:12]}"
                out += lists_of(ctx, language, cid, rng)
    return out


if __name__ == "__main__":
    import collections
    import sys

    rows = news_lists(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data"))
    qs = {r["question_id"]: r for r in rows}
    print(len(rows), "rows", len(qs), "questions")
    print(collections.Counter((r["language"], r["kind"]) for r in qs.values()))
    for r in list(qs.values())[:: max(1, len(qs) // 12)]:
        print(r["question"])
