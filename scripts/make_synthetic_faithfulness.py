"""Planted-error faithfulness data: RAG-style answers with hallucinations whose spans are known.

Usage (from the project root, with the shared data next to it)::

    python scripts/make_synthetic_faithfulness.py [--data ../shared/data] [--out build/synthetic_faithfulness.jsonl]
    python scripts/make_synthetic_faithfulness.py --check   # rebuild in memory, compare with the manifest

Small hallucination detectors that read well on RAGTruth were trained on answers with *planted* errors. This
builds such rows from what the training corpus already holds (never from the dev files), in the schema of
``train/faithfulness/``:

* **Faithful bases** (permissive licences only, so weights fitted on them can ship): the answer-bearing
  sentence of a SelQA list (English QA, the list's other passages as further contexts), one or two sentences
  of an answer-bearing DuReader passage (Chinese QA), a sentence of a UHGEval news article (Chinese, the
  article as context), the consistent summaries of SummEdits and XSumFaith, the supported claims of
  Factcheck-GPT, and the demo handbook's sentences (our own text).
* **Planted errors**, one per base, the kind drawn (seeded) among those that apply to the answer: a
  ``number`` changed (one the context states), a ``year`` moved by one to three (a time constraint), an
  ``entity`` swapped for a name from another document, a ``negation`` flipped, a ``hedge`` dropped ("may"
  → "will", 预计 → 已), an ``added`` sentence: a claim about the answer's subject that no context states
  (RAGTruth's commonest error, "evident baseless information"), or a sentence of another document of the
  same source. The span is exactly the changed text.

A base that is not already a row of the corpus (SelQA, DuReader, UHGEval, the handbook) also enters as its
faithful self; the corpus's own faithful rows are not repeated. Each row keeps its source's ``group``
(``<set>:<group>``, the set of the real corpus it came from), so grouped cross-validation never puts a
document's planted variants in one fold and the document in another. Deterministic (``SEED``): the same data
give the same file byte for byte, and ``--check`` compares the rebuild with the committed manifest
(``scripts/synthetic_faithfulness.manifest.json``: the file's SHA-256 and the rows per kind, language and
source), never with data copied into the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ragwatch.demo.kb import DOCUMENTS  # noqa: E402 - after the path fix, to run from a checkout

SEED = 0
MANIFEST = Path(__file__).with_name("synthetic_faithfulness.manifest.json")
#: Bases per source, at most (whole questions/documents, in a seeded order).
CAPS = {"selqa": 900, "dureader": 330, "uhgeval": 700, "summedits": 600, "xsumfaith": 245, "factcheck": 600}
KINDS = ("number", "year", "entity", "negation", "hedge", "added")

#: A number not inside a longer token of ASCII letters or digits (CJK characters may touch it: 共有120个).
_NUMBER_RE = re.compile(
    r"(?<![0-9A-Za-z_.])\d{1,3}(?:,\d{3})+(?![0-9A-Za-z_,])|(?<![0-9A-Za-z_.])\d+(?:\.\d+)?(?![0-9A-Za-z_.])"
)
_YEAR_RE = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")
_ENTITY_RE = re.compile(r"(?<=[a-z,] )[A-Z][a-z]+(?: [A-Z][a-z]+)*")
_EN_NEG = re.compile(r"\b(is|are|was|were|can|will|has|have|does|did|should|must|could)\b(?! not| no\b|n't)")
_ZH_NEG = re.compile(r"(?<![不没未无])(可以|能够|已经|是|会|能|有)")
_EN_HEDGE = (
    (re.compile(r"\b(may|might|could)\b"), "will"),
    (re.compile(r"\bis expected to\b"), "will"),
    (re.compile(r"\b(likely|probably|possibly)\b"), "certainly"),
    (re.compile(r"\b(about|approximately|around|nearly|almost)(?= \d)"), "exactly"),
)
_ZH_HEDGE = (
    (re.compile(r"预计"), "已"),
    (re.compile(r"可能"), "一定"),
    (re.compile(r"或将"), "已经"),
    (re.compile(r"约"), "整整"),
)
_EN_ADDED = (
    "{s} was also ranked first in a national survey in {y}.",
    "{s} has since been expanded to {n} more locations.",
    "According to officials, {s} cost about {n} million dollars.",
    "{s} was later criticised by several independent experts.",
)
_ZH_ADDED = (
    "此外，{s}还计划在{y}年扩大规模。",
    "据悉，{s}共投入约{n}亿元。",
    "{s}随后受到多位专家的批评。",
    "{s}在{y}年被评为全国第一。",
)
_SENT_RE = re.compile(r"[^.!?。！？]+[.!?。！？]")
_ZH_SENT_RE = re.compile(r"[^。！？\n]+[。！？]")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def sentences(text: str, zh: bool = False) -> list[str]:
    """Whole sentences of 12–300 characters (Chinese ones end at 。！？ only: a "." there is a decimal point)."""
    return [s.strip() for s in (_ZH_SENT_RE if zh else _SENT_RE).findall(text) if 12 <= len(s.strip()) <= 300]


# --------------------------------------------------------------------------------------------- bases


def _base(question: str, contexts: list[str], answer: str, lang: str, task: str, src: dict[str, str]) -> dict:
    return {"question": question, "contexts": contexts, "answer": answer, "language": lang, "task_type": task, **src}


def bases(data: Path, rng: random.Random) -> Iterator[tuple[dict[str, Any], bool]]:
    """(faithful base, whether it is new to the corpus), source by source, each source in a seeded order."""
    rel = data / "train" / "relevance"
    faith = data / "train" / "faithfulness"
    lists: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in read_jsonl(rel / "selqa.jsonl"):
        lists[row["question_id"]].append(row)
    keys = sorted(q for q, rows in lists.items() if any(r["relevant"] for r in rows))
    rng.shuffle(keys)
    for qid in keys[: CAPS["selqa"]]:
        rows = lists[qid]
        gold = next(r for r in rows if r["relevant"])
        others = [r["passage"] for r in rows if not r["relevant"]][:3]
        contexts = [gold["passage"], *others]
        rng.shuffle(contexts)
        src = {"source": "SelQA", "licence": gold["licence"], "group": f"selqa:{gold['group']}"}
        yield _base(gold["question"], contexts, gold["passage"].strip(), "en", "QA", src), True
    dureader = [r for r in read_jsonl(rel / "dureader.jsonl") if r["relevant"]]
    rng.shuffle(dureader)
    for row in dureader[: CAPS["dureader"]]:
        sents = sentences(row["passage"], zh=True)
        if not sents:
            continue
        q_chars = set(row["question"])
        best = max(range(len(sents)), key=lambda i: (len(q_chars & set(sents[i])), -i))
        answer = "".join(sents[best : best + 2])
        src = {"source": "DuReader", "licence": row["licence"], "group": f"dureader:{row['group']}"}
        yield _base(row["question"], [row["passage"]], answer, "zh", "QA", src), True
    articles: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(faith / "uhgeval.jsonl"):
        articles.setdefault(row["contexts"][0], row)
    docs = sorted(articles)
    rng.shuffle(docs)
    for doc in docs[: CAPS["uhgeval"]]:
        row = articles[doc]
        sents = sentences(doc.split("\n", 1)[-1], zh=True)
        if len(sents) < 3:
            continue
        answer = sents[rng.randrange(1, len(sents))]
        src = {"source": "UHGEval", "licence": row["licence"], "group": f"uhgeval:{row['group']}"}
        yield _base("", [doc], answer, "zh", "Summary", src), True
    for name, cap_key, task in (
        ("summedits", "summedits", "Summary"),
        ("xsumfaith", "xsumfaith", "Summary"),
        ("factcheck_gpt", "factcheck", "Claim"),
    ):
        rows = [r for r in read_jsonl(faith / f"{name}.jsonl") if not r["label_hallucinated"]]
        rng.shuffle(rows)
        for row in rows[: CAPS[cap_key]]:
            src = {"source": row["source"], "licence": row["licence"], "group": f"{name}:{row['group']}"}
            yield _base(row["question"], list(row["contexts"]), row["answer"], "en", task, src), False
    for doc in DOCUMENTS:
        for i, sent in enumerate(sentences(doc.text, zh=doc.lang == "zh")):
            src = {"source": "ragwatch demo handbook", "licence": "Apache-2.0", "group": f"handbook:{doc.id}"}
            yield _base("", [doc.text], sent, doc.lang, "Summary", src), i % 2 == 0


# ------------------------------------------------------------------------------------------- planting


def _replace(answer: str, start: int, end: int, new: str) -> tuple[str, list[list[int]]]:
    return answer[:start] + new + answer[end:], [[start, start + len(new)]]


def plant(kind: str, base: dict[str, Any], rng: random.Random, pool: dict[str, list[str]]):
    """``base``'s answer with one error of ``kind`` and its span, or None when the kind does not apply."""
    answer, context = base["answer"], "\n".join(base["contexts"])
    zh = base["language"] == "zh"
    if kind == "year":
        found = [m for m in _YEAR_RE.finditer(answer) if m.group() in context]
        if not found:
            return None
        m = rng.choice(found)
        for _ in range(6):
            year = str(int(m.group()) + rng.choice((-3, -2, -1, 1, 2, 3)))
            if year not in context:
                return _replace(answer, m.start(), m.end(), year)
        return None
    if kind == "number":
        found = [m for m in _NUMBER_RE.finditer(answer) if m.group() in context and not _YEAR_RE.fullmatch(m.group())]
        if not found:
            return None
        m = rng.choice(found)
        text = m.group().replace(",", "")
        value = float(text)
        for _ in range(8):
            factor = rng.choice((0.5, 0.7, 1.3, 1.5, 2.0, 3.0))
            new = value * factor if value > 3 else value + rng.choice((1, 2, 3, 5))
            new_text = f"{new:.{len(text.split('.')[1])}f}" if "." in text else str(round(new))
            if "," in m.group():
                new_text = f"{round(new):,}"
            if new_text != m.group() and new_text not in context:
                return _replace(answer, m.start(), m.end(), new_text)
        return None
    if kind == "entity":
        if zh:
            return None
        found = [m for m in _ENTITY_RE.finditer(answer) if m.group() in context]
        names = [n for n in pool["entities"] if n not in context]
        if not found or not names:
            return None
        m = rng.choice(found)
        return _replace(answer, m.start(), m.end(), rng.choice(names))
    if kind == "negation":
        m = (_ZH_NEG if zh else _EN_NEG).search(answer)
        if m is None:
            return None
        word = m.group()
        if zh:
            new = "没有" if word == "有" else "不" + word
        else:
            new = {"can": "cannot", "will": "will not"}.get(word, f"{word} not")
        return _replace(answer, m.start(), m.end(), new)
    if kind == "hedge":
        for pattern, new in _ZH_HEDGE if zh else _EN_HEDGE:
            m = pattern.search(answer)
            if m is not None:
                return _replace(answer, m.start(), m.end(), new)
        return None
    if kind == "added":
        if rng.random() < 0.5:  # a sentence of another document of the same language
            foreign = pool["zh" if zh else "en"]
            added = rng.choice(foreign)
            if added in context:
                return None
        else:  # a claim about the answer's subject that nothing states
            names = [] if zh else _ENTITY_RE.findall(answer)
            subject = "该项目" if zh else names[0] if names else "It"
            template = rng.choice(_ZH_ADDED if zh else _EN_ADDED)
            added = template.format(s=subject, y=rng.randrange(1995, 2026), n=rng.randrange(3, 90))
        sep = "" if zh else " "
        start = len(answer) + len(sep)
        return answer + sep + added, [[start, start + len(added)]]
    raise ValueError(f"unknown kind {kind}")


def build_rows(data: Path) -> list[dict[str, Any]]:
    """Every synthetic row, in a deterministic order."""
    rng = random.Random(SEED)
    base_list = list(bases(data, rng))
    pool: dict[str, list[str]] = {"en": [], "zh": [], "entities": []}
    for base, _ in base_list:
        for ctx in base["contexts"][:1]:
            pool[base["language"]].extend(sentences(ctx, zh=base["language"] == "zh")[:2])
            if base["language"] == "en":
                pool["entities"].extend(m.group() for m in _ENTITY_RE.finditer(ctx[:600]))
    pool["entities"] = sorted(set(pool["entities"]))
    rows: list[dict[str, Any]] = []
    planted_so_far: Counter[str] = Counter()
    for n, (base, new) in enumerate(base_list):
        if new:
            rows.append(_row(base, n, "faithful", base["answer"], []))
        # the rarest kind so far among those that apply to this answer: the kinds stay as even as the data allow
        for kind in sorted(KINDS, key=lambda k: (planted_so_far[k], KINDS.index(k))):
            planted = plant(kind, base, rng, pool)
            if planted is not None:
                rows.append(_row(base, n, kind, *planted))
                planted_so_far[kind] += 1
                break
    return rows


def _row(base: dict[str, Any], n: int, kind: str, answer: str, spans: list[list[int]]) -> dict[str, Any]:
    return {
        "id": f"synthetic-{n}-{kind}",
        "question": base["question"],
        "contexts": base["contexts"],
        "answer": answer,
        "label_hallucinated": bool(spans),
        "hallucinated_spans": spans,
        "task_type": base["task_type"],
        "split": "synthetic",
        "language": base["language"],
        "source": f"synthetic/{base['source']}",
        "licence": base["licence"],
        "group": base["group"],
        "label_raw": kind,
    }


def encode(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode("utf-8")


def manifest(rows: list[dict[str, Any]], blob: bytes) -> dict[str, Any]:
    return {
        "built_by": "python scripts/make_synthetic_faithfulness.py",
        "sha256": hashlib.sha256(blob).hexdigest(),
        "rows": len(rows),
        "by_kind": dict(sorted(Counter(r["label_raw"] for r in rows).items())),
        "by_language": dict(sorted(Counter(f"{r['language']} {r['label_raw']}" for r in rows).items())),
        "by_source": dict(sorted(Counter(r["source"] for r in rows).items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "synthetic_faithfulness.jsonl")
    parser.add_argument("--check", action="store_true", help="rebuild in memory and compare with the manifest")
    args = parser.parse_args(argv)
    rows = build_rows(args.data)
    blob = encode(rows)
    made = manifest(rows, blob)
    print(f"{made['rows']} rows: " + ", ".join(f"{k} {v}" for k, v in made["by_kind"].items()))
    if args.check:
        same = MANIFEST.exists() and json.loads(MANIFEST.read_text(encoding="utf-8")) == made
        print(f"{MANIFEST}: {'rebuilds byte-identically' if same else 'DIFFERS from the rebuild'}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(blob)
    MANIFEST.write_text(json.dumps(made, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out} and {MANIFEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
