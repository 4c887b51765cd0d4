"""Measure the offline judge's answer relevance on a labelled set built from the dev files by construction.

Usage (from the project root, with the shared data next to it)::

    python scripts/eval_answer_relevance.py [--data ../shared/data] [--judge offline|embedding] [--json]

Nothing is fitted here, and nothing is stored: the set is rebuilt from ``../shared/data/`` at every run.
Answer relevance has no learned weights (its caps are set a priori, :mod:`ragwatch.scoring.judges.answer_relevance`).

How the set is built (every question of the sources below, deduplicated on question and answer):

* **sources** — the faithful answers of ``faithfulness/rgb_zh_en_dev.jsonl`` (short answers, English and
  Chinese), the faithful QA answers of ``faithfulness/ragtruth_dev.jsonl`` (long English answers) and the
  relevant sentences of ``relevance/wikiqa_dev.jsonl`` (one Wikipedia sentence answering the question);
* **demo** — the demo handbook (``ragwatch.demo.kb``): each question with the answer the demo service gives
  it with healthy retrieval and no falsification (two extracted sentences), and with the first of them
  alone (the short answer: "…on the first working day.", "超过3天的病假需要提供医院开具的证明。");
* **relevant** — each question with its own answer;
* **other question** (not relevant) — each question with the answer of the most similar *other* question of
  the same source and language (most shared content words): same topic, another question;
* **year changed** (not relevant) — a question that names a year, with its own answer in which that year is
  replaced by the year before ("2024年" → "2023年");
* **other attribute** (not relevant) — a "when" or "how many/much" question with the answer of the most
  similar other question that is not of that kind (a place for a date, a name for a number).

Reported per construction and language: ROC-AUC of relevant vs that kind of negative, and accuracy at the
0.85 health threshold of ``answer_relevance`` (relevant ≥ 0.85, not relevant below), for the shipped
checks and, on the same rows, for the coverage heuristic they replaced. ``--judge embedding`` reports the
embedding judge (``ragwatch[embeddings]``: the checks, with the claim–question similarity raising the
coverage part under their caps) against the offline judge. Apart, for the short correct answers (the demo
set and the RGB answers, a few words each): the share at or over the threshold, and the share scoring no
higher than the median answer to another question of the same source — of all of them, and of those whose
question asks another kind of thing (``question_kind``: a date, a number, a person, a place, or none). An
answer to a question of the same kind (another film's director) is of the right type; no reference-free
judge tells it from the right one, so the second share is the one the reading of short answers can move.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import trainkit as kit

from ragwatch.sampling.sample import Sample
from ragwatch.scoring.evaluate import roc_auc
from ragwatch.scoring.judges.answer_relevance import answer_relevance
from ragwatch.scoring.judges.base import ANSWER_RELEVANCE
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.judges.relevance import question_kind, type_match
from ragwatch.scoring.judges.text import content_tokens, token_prior

THRESHOLD = 0.85
#: Samples per ``score_many`` call of the embedding judge (one bi-encoder call each).
BATCH = 64
_YEAR_RE = re.compile(r"(?<!\d)(1[6-9]\d\d|20\d\d)(?!\d)")


def legacy_answer_relevance(question: str, answer: str, n_claims: int, share_refusal: float) -> float:
    """The heuristic before the checks (coverage, an answer-type cue, short answers high), for comparison."""
    if not n_claims:
        return 0.0
    q_set = set(content_tokens(question))
    if not q_set:
        base = 0.7
    else:
        a_set = set(content_tokens(answer))
        cov = sum(token_prior(t) for t in q_set & a_set) / sum(token_prior(t) for t in q_set)
        base = 0.5 + 0.35 * min(1.0, cov / 0.6) + 0.15 * type_match(question, answer)
        if n_claims <= 2 and not share_refusal:
            base = max(base, 0.75)
    return round(min(1.0, (1 - share_refusal) * base + share_refusal * 0.2), 4)


def sources(data: Path) -> list[dict[str, str]]:
    """(source, language, question, answer) of every relevant pair, deduplicated."""
    out: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()

    def add(source: str, language: str, question: str, answer: str) -> None:
        key = (question.strip(), answer.strip())
        if question.strip() and answer.strip() and key not in seen:
            seen.add(key)
            out.append({"source": source, "language": language, "question": question, "answer": answer})

    for row in kit.read_jsonl(data / "faithfulness/rgb_zh_en_dev.jsonl"):
        if not row["label_hallucinated"]:
            add("rgb", row["language"], row["question"], row["answer"])
    for row in kit.read_jsonl(data / "faithfulness/ragtruth_dev.jsonl"):
        if row["task_type"] == "QA" and not row["label_hallucinated"]:
            add("ragtruth", row["language"], row["question"], row["answer"])
    for row in kit.read_jsonl(data / "relevance/wikiqa_dev.jsonl"):
        if row["relevant"]:
            add("wikiqa", row["language"], row["question"], row["passage"])
    for language, question, answer in demo_answers():
        add("demo", language, question, answer)
    return out


def demo_answers() -> list[tuple[str, str, str]]:
    """(language, question, correct answer) from the demo handbook: the healthy demo service's answer to each
    question, and its first sentence alone (the short answer)."""
    from ragwatch.demo.kb import QUESTIONS
    from ragwatch.demo.service import DemoService, sentences

    service = DemoService(rw=None, hallucination_rate=0.0)  # type: ignore[arg-type]  # retrieve/generate only
    out = []
    for q in QUESTIONS:
        answer, _ = service.generate(q.text, service.retrieve(q.text))
        out.append((q.lang, q.text, answer))
        first = sentences(answer)[0]
        if first != answer:
            out.append((q.lang, q.text, first))
    return out


def short_answers(rows: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """For the short correct answers (demo, RGB): how many reach the threshold, and how many score no higher
    than the median answer to another question of the same source (the unrelated-answer score)."""
    out: dict[str, Any] = {}
    for source in ("demo", "rgb"):
        pos = [r[model] for r in rows if r["source"] == source and r["relevant"]]
        unrelated = [r for r in rows if r["source"] == source and r["kind"] == "other question"]
        neg = sorted(r[model] for r in unrelated)
        other_kind = sorted(r[model] for r in unrelated if not r["same_kind"])
        if not pos or not neg:
            continue
        median = neg[len(neg) // 2]
        out[source] = {
            "correct": len(pos),
            "at_threshold": round(sum(p >= THRESHOLD for p in pos) / len(pos), 3),
            "unrelated_median": median,
            "correct_at_or_below_unrelated_median": round(sum(p <= median for p in pos) / len(pos), 3),
        }
        if other_kind:
            m = other_kind[len(other_kind) // 2]
            out[source]["other_kind_unrelated"] = len(other_kind)
            out[source]["other_kind_median"] = m
            out[source]["correct_at_or_below_other_kind_median"] = round(sum(p <= m for p in pos) / len(pos), 3)
    return out


def _most_similar(i: int, pairs: list[dict[str, str]], toks: list[set[str]], ok: Any) -> int | None:
    """The other question (same source and language, another question text) sharing most content words."""
    best, best_j = 0.0, None
    for j, other in enumerate(pairs):
        if j == i or other["question"] == pairs[i]["question"] or not ok(other):
            continue
        if other["source"] != pairs[i]["source"] or other["language"] != pairs[i]["language"]:
            continue
        shared = len(toks[i] & toks[j]) / (len(toks[i] | toks[j]) or 1)
        if shared > best:
            best, best_j = shared, j
    return best_j


def build(data: Path) -> list[dict[str, Any]]:
    """The labelled set of the module docstring, from the dev files."""
    return build_rows(sources(data))


def build_rows(pairs: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Each (source, language, question, answer) pair as a relevant row, with the negatives built from it
    (the module docstring); ``scripts/train_embedding_relevance.py`` builds the same from training pairs."""
    toks = [set(content_tokens(p["question"])) for p in pairs]
    rows: list[dict[str, Any]] = []
    for i, p in enumerate(pairs):
        base = {"source": p["source"], "language": p["language"], "question": p["question"]}
        rows.append({**base, "answer": p["answer"], "relevant": True, "kind": "relevant"})
        j = _most_similar(i, pairs, toks, lambda o: True)
        if j is not None and pairs[j]["answer"] != p["answer"]:
            same = question_kind(pairs[j]["question"]) == question_kind(p["question"])
            rows.append(
                {**base, "answer": pairs[j]["answer"], "relevant": False, "kind": "other question", "same_kind": same}
            )
        years = set(_YEAR_RE.findall(p["question"])) & set(_YEAR_RE.findall(p["answer"]))
        if years:
            changed = p["answer"]
            for y in sorted(years):
                changed = re.sub(rf"(?<!\d){y}(?!\d)", str(int(y) - 1), changed)
            rows.append({**base, "answer": changed, "relevant": False, "kind": "year changed"})
        kind = question_kind(p["question"])
        if kind in ("date", "number"):
            j = _most_similar(i, pairs, toks, lambda o, k=kind: question_kind(o["question"]) != k)
            if j is not None:
                rows.append({**base, "answer": pairs[j]["answer"], "relevant": False, "kind": "other attribute"})
    return rows


def score(rows: list[dict[str, Any]], judge_name: str = "offline") -> tuple[str, str]:
    """Each row's answer relevance by the judge and by what it is compared with (the coverage heuristic for
    the offline judge; the offline judge for the embedding judge): the two column names."""
    judge = OfflineJudge()
    for i, row in enumerate(rows):
        sample = Sample(str(i), "eval", row["question"], row["answer"], [], 0.0)
        analyses = judge.analyse(sample)
        refusal = sum(1 for a in analyses if a.unverifiable) / len(analyses) if analyses else 0.0
        row["offline"] = answer_relevance(row["question"], row["answer"], refusal) if analyses else 0.0
        row["coverage"] = legacy_answer_relevance(row["question"], row["answer"], len(analyses), refusal)
    if judge_name == "offline":
        return "offline", "coverage"
    from ragwatch.scoring.judges.embedding import EmbeddingJudge

    embedding = EmbeddingJudge()
    samples = [Sample(str(i), "eval", r["question"], r["answer"], [], 0.0) for i, r in enumerate(rows)]
    for start in range(0, len(samples), BATCH):
        verdicts = embedding.score_many(samples[start : start + BATCH])
        for row, verdict in zip(rows[start : start + BATCH], verdicts, strict=True):
            row["embedding"] = verdict.scores[ANSWER_RELEVANCE]
    return "embedding", "offline"


def report(rows: list[dict[str, Any]], models: tuple[str, str] = ("offline", "coverage")) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["kind"] != "relevant":
            for lang in (row["language"], "all"):
                cells[(row["kind"], lang)].append(row)
    positives = {
        lang: [r for r in rows if r["relevant"] and lang in (r["language"], "all")] for lang in ("en", "zh", "all")
    }
    out["short answers"] = {model: short_answers(rows, model) for model in models}
    for (kind, lang), negs in sorted(cells.items()):
        pos = positives[lang]
        entry: dict[str, Any] = {"relevant": len(pos), "not_relevant": len(negs)}
        for model in models:
            labels = [True] * len(pos) + [False] * len(negs)
            scores = [r[model] for r in pos] + [r[model] for r in negs]
            auc = roc_auc(labels, scores)
            correct = sum(1 for r in pos if r[model] >= THRESHOLD) + sum(1 for r in negs if r[model] < THRESHOLD)
            entry[model] = {"auc": None if auc is None else round(auc, 3), "accuracy": round(correct / len(labels), 3)}
        out[f"{kind}/{lang}"] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=kit.ROOT.parent / "shared" / "data")
    parser.add_argument(
        "--judge",
        choices=("offline", "embedding"),
        default="offline",
        help="embedding: the embedding judge (ragwatch[embeddings]) against the offline judge",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = build(args.data)
    models = score(rows, args.judge)
    result = report(rows, models)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
        return 0
    new, old = models
    print(f"{len(rows)} rows ({sum(r['relevant'] for r in rows)} relevant); threshold {THRESHOLD}")
    head = f"{new} | {old}"
    print(f"  {'negatives/language':24s} {'pos':>5s} {'neg':>5s}  {'AUC ' + head:>26s}  {'acc ' + head:>26s}")
    shorts = result.pop("short answers")
    for name, e in result.items():
        auc = f"{e[new]['auc']:.3f} | {e[old]['auc']:.3f}"
        acc = f"{e[new]['accuracy']:.3f} | {e[old]['accuracy']:.3f}"
        print(f"  {name:24s} {e['relevant']:5d} {e['not_relevant']:5d}  {auc:>26s}  {acc:>26s}")
    print("short correct answers: share >= threshold | share <= the median unrelated answer's score")
    for source, e in shorts[new].items():
        o = shorts[old].get(source, {})
        print(
            f"  {source:8s} {e['correct']:5d} correct  {e['at_threshold']:.3f} | "
            f"{e['correct_at_or_below_unrelated_median']:.3f} (median unrelated {e['unrelated_median']:.2f})"
            f"   {old}: {o.get('at_threshold', 0):.3f} | {o.get('correct_at_or_below_unrelated_median', 0):.3f}"
        )
        if "other_kind_median" in e:
            print(
                f"  {'':8s} {e['other_kind_unrelated']:5d} unrelated of another kind: share <= their median "
                f"{e['correct_at_or_below_other_kind_median']:.3f} (median {e['other_kind_median']:.2f})"
                f"   {old}: {o.get('correct_at_or_below_other_kind_median', 0):.3f}"
                f" (median {o.get('other_kind_median', 0):.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
