"""Measure the offline judge's answer relevance on a labelled set built from the dev files by construction.

Usage (from the project root, with the shared data next to it)::

    python scripts/eval_answer_relevance.py [--data ../shared/data] [--judge offline|embedding] [--json]

Nothing is fitted here, and nothing is stored: the set is rebuilt from ``../shared/data/`` at every run.
Answer relevance has no learned weights (its caps are set a priori, :mod:`ragwatch.scoring.judges.answer_relevance`).

How the set is built (every question of the sources below, deduplicated on question and answer), each
question with the context it was asked with — the chunks the judge sees, whatever answer it is paired with:

* **sources** — the faithful answers of ``faithfulness/rgb_zh_en_dev.jsonl`` (short answers, English and
  Chinese; context: the row's retrieved snippets; an answer stored as a list of spellings is read as its
  first), the faithful QA answers of
  ``faithfulness/ragtruth_dev.jsonl`` (long English answers; context: the row's passages) and the relevant
  sentences of ``relevance/wikiqa_dev.jsonl`` (one Wikipedia sentence answering the question; context: the
  question's Wikipedia sentences in document order, one chunk);
* **demo** — the demo handbook (``ragwatch.demo.kb``): each question with the answer the demo service gives
  it with healthy retrieval and no falsification (two extracted sentences), and with the first of them
  alone (the short answer: "…on the first working day.", "超过3天的病假需要提供医院开具的证明。"); context:
  the three chunks the healthy service retrieved for it;
* **relevant** — each question with its own answer;
* **other question** (not relevant) — each question with the answer of the most similar *other* question of
  the same source and language (most shared content words) whose answer says none of this question's
  answers' sentences (a neighbour's two-sentence demo answer often holds this one's): same topic, another
  question, and *this* question's context (a wrong answer is not asked with the chunks that hold it);
* **year changed** (not relevant) — a question that names a year, with its own answer in which that year is
  replaced by the year before ("2024年" → "2023年");
* **other attribute** (not relevant) — a "when" or "how many/much" question with the answer of the most
  similar other question that is not of that kind (a place for a date, a name for a number), under the same
  condition.

Reported per construction and language: ROC-AUC of relevant vs that kind of negative, and accuracy at the
0.85 health threshold of ``answer_relevance`` (relevant ≥ 0.85, not relevant below), for the shipped
checks and, on the same rows, for the coverage heuristic they replaced. ``--judge embedding`` reports the
embedding judge (``ragwatch[embeddings]``: the checks, with the claim–question similarity raising the
coverage part under their caps) against the offline judge. Apart, for the short correct answers (the demo
set and the RGB answers, a few words each): the share at or over the threshold, and the share scoring no
higher than the median answer to another question of the same source — of all of them, and of those whose
question asks another kind of thing (``question_kind``: a date, a number, a person, a place, or none). An
answer to a question of the same kind (another film's director) is of the right type: the answer alone
does not tell it from the right one, the context does (``ragwatch.scoring.judges.answer_grounding``).

Every figure is printed for three columns on the same rows in the same run: the judge as it scores a sample
(with the chunks), ``no grounding`` (the same judge and claims, its answer relevance not reading the chunks:
what grounding moved) and the coverage heuristic (or, with ``--judge embedding``, the offline judge).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import trainkit as kit

from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.evaluate import roc_auc
from ragwatch.scoring.judges.answer_relevance import answer_relevance, refusal_share
from ragwatch.scoring.judges.base import ANSWER_RELEVANCE
from ragwatch.scoring.judges.claim_features import UNVERIFIABLE
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.judges.relevance import question_kind, type_match
from ragwatch.scoring.judges.text import content_tokens, sentence_spans, token_prior

THRESHOLD = 0.85
#: The offline judge on the same rows, its answer relevance not reading the chunks: what grounding moved.
NO_GROUNDING = "no grounding"
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


def first_spelling(answer: str) -> str:
    """RGB stores some answers as a list of the value's spellings (``"['July 21 2017', 'Jul 21, 2017', …]"``);
    an answer a service gives is one of them, so the first is the answer read here (anything else unchanged)."""
    if answer.startswith("[") and answer.endswith("]"):
        try:
            spellings = ast.literal_eval(answer)
        except (ValueError, SyntaxError):
            return answer
        if isinstance(spellings, list) and spellings and all(isinstance(x, str) for x in spellings):
            return spellings[0]
    return answer


def sources(data: Path) -> list[dict[str, Any]]:
    """(source, language, question, answer, context) of every relevant pair, deduplicated; the context is the
    list of chunk texts the question was asked with."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()

    def add(source: str, language: str, question: str, answer: str, context: list[str]) -> None:
        key = (question.strip(), answer.strip())
        if question.strip() and answer.strip() and key not in seen:
            seen.add(key)
            out.append(
                {"source": source, "language": language, "question": question, "answer": answer, "context": context}
            )

    for row in kit.read_jsonl(data / "faithfulness/rgb_zh_en_dev.jsonl"):
        if not row["label_hallucinated"]:
            add("rgb", row["language"], row["question"], first_spelling(row["answer"]), list(row["contexts"]))
    for row in kit.read_jsonl(data / "faithfulness/ragtruth_dev.jsonl"):
        if row["task_type"] == "QA" and not row["label_hallucinated"]:
            add("ragtruth", row["language"], row["question"], row["answer"], list(row["contexts"]))
    wikiqa = list(kit.read_jsonl(data / "relevance/wikiqa_dev.jsonl"))
    documents = wikiqa_documents(wikiqa)
    for row in wikiqa:
        if row["relevant"]:
            add("wikiqa", row["language"], row["question"], row["passage"], [documents[row["question_id"]]])
    for language, question, answer, context in demo_answers():
        add("demo", language, question, answer, context)
    return out


def wikiqa_documents(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each WikiQA question's candidate sentences (its Wikipedia summary) in document order, as one chunk."""
    by_question: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for row in rows:
        by_question[row["question_id"]].append((int(row["rank_in_document"]), row["passage"]))
    return {qid: " ".join(text for _, text in sorted(sents)) for qid, sents in by_question.items()}


def demo_answers() -> list[tuple[str, str, str, list[str]]]:
    """(language, question, correct answer, context) from the demo handbook: the healthy demo service's
    answer to each question, and its first sentence alone (the short answer), with the chunks it retrieved."""
    from ragwatch.demo.kb import QUESTIONS
    from ragwatch.demo.service import DemoService, sentences

    service = DemoService(rw=None, hallucination_rate=0.0)  # type: ignore[arg-type]  # retrieve/generate only
    out = []
    for q in QUESTIONS:
        chunks = service.retrieve(q.text)
        context = [c["text"] for c in chunks]
        answer, _ = service.generate(q.text, chunks)
        out.append((q.lang, q.text, answer, context))
        first = sentences(answer)[0]
        if first != answer:
            out.append((q.lang, q.text, first, context))
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


def _most_similar(i: int, pairs: list[dict[str, Any]], toks: list[set[str]], ok: Any) -> int | None:
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


def build_rows(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each (source, language, question, answer, context) pair as a relevant row, with the negatives built
    from it (the module docstring), every row keeping its question's context (none when a pair has none);
    ``scripts/train_embedding_relevance.py`` builds the same from training pairs."""
    toks = [set(content_tokens(p["question"])) for p in pairs]
    sents = [frozenset(p["answer"][a:b] for a, b in sentence_spans(p["answer"], min_chars=1)) for p in pairs]
    said: dict[str, set[str]] = defaultdict(set)  # each question's right answers, sentence by sentence
    for p, ss in zip(pairs, sents, strict=True):
        said[p["question"]].update(ss)
    index = {id(p): k for k, p in enumerate(pairs)}

    def unrelated(other: dict[str, Any], question: str) -> bool:
        """Another question's answer that says none of this question's answers' sentences (the demo's
        two-sentence answers often hold a neighbour question's answer: such an answer is no negative)."""
        return said[question].isdisjoint(sents[index[id(other)]])

    rows: list[dict[str, Any]] = []
    for i, p in enumerate(pairs):
        base = {
            "source": p["source"],
            "language": p["language"],
            "question": p["question"],
            "context": list(p.get("context", ())),
        }
        rows.append({**base, "answer": p["answer"], "relevant": True, "kind": "relevant"})
        j = _most_similar(i, pairs, toks, lambda o, q=p["question"]: unrelated(o, q))
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
            j = _most_similar(
                i, pairs, toks, lambda o, k=kind, q=p["question"]: question_kind(o["question"]) != k and unrelated(o, q)
            )
            if j is not None:
                rows.append({**base, "answer": pairs[j]["answer"], "relevant": False, "kind": "other attribute"})
    return rows


def sample(i: int, row: dict[str, Any]) -> Sample:
    """The row as the judge sees it: its question's context as chunks, in order."""
    chunks = [SampleChunk(f"c{k}", k, text) for k, text in enumerate(row["context"])]
    return Sample(str(i), "eval", row["question"], row["answer"], chunks, 0.0)


def score(rows: list[dict[str, Any]], judge_name: str = "offline") -> tuple[str, str]:
    """Each row's answer relevance by the judge and by what it is compared with (the coverage heuristic for
    the offline judge; the offline judge for the embedding judge): the two column names. Every row also gets
    :data:`NO_GROUNDING`, the offline judge's score with the same claims but the chunks left unread."""
    judge = OfflineJudge()
    for i, row in enumerate(rows):
        verdict = judge.score(sample(i, row))
        claims = verdict.details["claims"]
        refusal = sum(1 for c in claims if c["verdict"] == UNVERIFIABLE) / len(claims) if claims else 0.0
        row["offline"] = verdict.scores[ANSWER_RELEVANCE]
        share = refusal_share(judge.analyse(sample(i, row)))  # the judge's own share: citations are no refusal
        row[NO_GROUNDING] = answer_relevance(row["question"], row["answer"], share) if claims else 0.0
        row["coverage"] = legacy_answer_relevance(row["question"], row["answer"], len(claims), refusal)
    if judge_name == "offline":
        return "offline", "coverage"
    from ragwatch.scoring.judges.embedding import EmbeddingJudge

    embedding = EmbeddingJudge()
    samples = [sample(i, r) for i, r in enumerate(rows)]
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
    columns = (models[0], NO_GROUNDING, models[1])
    out["short answers"] = {model: short_answers(rows, model) for model in columns}
    for (kind, lang), negs in sorted(cells.items()):
        pos = positives[lang]
        entry: dict[str, Any] = {"relevant": len(pos), "not_relevant": len(negs)}
        for model in columns:
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
    columns = (models[0], NO_GROUNDING, models[1])
    print(f"{len(rows)} rows ({sum(r['relevant'] for r in rows)} relevant); threshold {THRESHOLD}")
    head = " | ".join(columns)
    print(f"  {'negatives/language':24s} {'pos':>5s} {'neg':>5s}  {'AUC ' + head:>34s}  {'acc ' + head:>34s}")
    shorts = result.pop("short answers")
    for name, e in result.items():
        auc = " | ".join(f"{e[c]['auc']:.3f}" for c in columns)
        acc = " | ".join(f"{e[c]['accuracy']:.3f}" for c in columns)
        print(f"  {name:24s} {e['relevant']:5d} {e['not_relevant']:5d}  {auc:>34s}  {acc:>34s}")
    print("short correct answers: share >= threshold | share <= the median unrelated answer's score (median)")
    for source in shorts[columns[0]]:
        e = shorts[columns[0]][source]
        print(
            f"  {source:8s} {e['correct']:5d} correct, {e['other_kind_unrelated'] if 'other_kind_median' in e else 0}"
            " unrelated of another kind"
        )
        for c in columns:
            o = shorts[c].get(source, {})
            below = o.get("correct_at_or_below_unrelated_median", 0)
            line = f"    {c:12s} all: {o.get('at_threshold', 0):.3f} | {below:.3f} ({o.get('unrelated_median', 0):.2f})"
            if "other_kind_median" in o:
                line += (
                    f"   another kind: {o['correct_at_or_below_other_kind_median']:.3f} ({o['other_kind_median']:.2f})"
                )
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
