"""Fit the offline judge's chunk-relevance model and write ``ragwatch/judges/relevance_weights.json``.

Usage (from the project root, with the shared data next to it)::

    python scripts/train_relevance.py [--data ../shared/data] [--folds 5] [--dry-run]

Training data, and only this: the (question, passage, relevant) pairs of ``relevance/wikiqa_dev.jsonl``
(English Wikipedia sentences: does the sentence answer the question) and ``relevance/rgb_relevance_dev.jsonl``
(mostly Chinese news/web passages: does the passage contain the answer), grouped by ``question_id`` into
candidate lists. Only the question and passage texts are used — never a row's id, document title, position
in its document or anything a retrieved chunk would not carry. Each file weighs the same in every fit.

The model (see :mod:`ragwatch.judges.relevance`), fitted in three steps with numpy only:

1. **stage 1**: an L2 logistic regression (Newton's method, each class and file weighing the same, every
   weight constrained to its sign) of "relevant" on the direct features; its probabilities are the votes of
   the consensus feature;
2. **ranking**: a conditional logit (softmax over each question's candidates, the likelihood of its relevant
   ones) on the direct features plus the consensus, sign-constrained — the weights that best *rank* a list;
3. **calibration**: a logistic regression of "relevant" on that score and its gap to the best score of the
   same question (three numbers, both slopes non-negative, so the ranking is kept) so 0.5 is the boundary.

Grouped k-fold cross-validation (every passage of one question in the same fold; all three steps refitted
on the training folds) is printed and stored in the weights file next to the in-sample figures, so the
evaluation command's numbers (in-sample) can be read against out-of-fold ones.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import trainkit as kit

from ragwatch.evaluate import neutral_order_key, roc_auc
from ragwatch.judges.relevance import (
    DIRECT_FEATURES,
    RELEVANCE_FEATURES,
    RELEVANCE_SIGNS,
    WEIGHTS_PATH,
    analyse_candidates,
    consensus,
)
from ragwatch.retrieval_metrics import average_precision_from_labels

FILES = ("relevance/wikiqa_dev.jsonl", "relevance/rgb_relevance_dev.jsonl")
DIRECT_SIGNS = RELEVANCE_SIGNS[: len(DIRECT_FEATURES)]


# ------------------------------------------------------------------------------------------ fitting


def fit_listwise(
    x: np.ndarray, y: np.ndarray, lists: list[np.ndarray], weights: list[float], l2: float = kit.L2
) -> np.ndarray:
    """Conditional logit: maximise, per list, the mean log-softmax of its relevant candidates (Newton)."""
    d = x.shape[1]
    beta = np.zeros(d)
    for _ in range(100):
        grad = l2 * beta
        hess = l2 * np.eye(d)
        for idx, wt in zip(lists, weights, strict=True):
            xs = x[idx]
            z = xs @ beta
            e = np.exp(z - z.max())
            p = e / e.sum()
            mu = p @ xs
            pos = y[idx] > 0
            grad = grad + wt * (mu - xs[pos].mean(axis=0))
            hess = hess + wt * ((xs * p[:, None]).T @ xs - np.outer(mu, mu))
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def load_table(data: Path) -> dict[str, Any]:
    """Direct features of every pair, grouped by question (each question's rows contiguous)."""
    feats: list[list[float]] = []
    labels, files, langs, passages, near = [], [], [], [], []
    questions: list[tuple[str, np.ndarray]] = []  # (file, row indices)
    for fname in FILES:
        grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in kit.read_jsonl(data / fname):
            grouped[str(row["question_id"])].append(row)
        for rows in grouped.values():
            cands = analyse_candidates(rows[0]["question"], [r["passage"] for r in rows])
            start = len(labels)
            for row, fs, words in zip(rows, cands.features, cands.near, strict=True):
                feats.append(fs)
                labels.append(1.0 if row["relevant"] else 0.0)
                files.append(fname)
                langs.append(str(row["language"]))
                passages.append(row["passage"])
                near.append(words)
            questions.append((fname, np.arange(start, len(labels))))
    return {
        "x": np.array(feats, dtype=float),
        "y": np.array(labels),
        "file": np.array(files),
        "lang": np.array(langs),
        "passages": passages,
        "near": near,
        "questions": questions,
    }


# ------------------------------------------------------------------------------------------- model


def _balanced_weights(table: dict[str, Any], rows: np.ndarray) -> np.ndarray:
    """Each file and, within it, each class weighs the same: 0.5 should be the boundary between relevant
    and not, not WikiQA's 5 % base rate."""
    y, files = table["y"][rows], table["file"][rows]
    w = np.zeros(len(rows))
    for f in FILES:
        for cls in (0.0, 1.0):
            mask = (files == f) & (y == cls)
            if mask.any():
                w[mask] = len(rows) / (2 * len(FILES) * mask.sum())
    return w


def _with_consensus(table: dict[str, Any], stage1: tuple[float, np.ndarray]) -> np.ndarray:
    votes = kit.predict(*stage1, table["x"])
    agree = np.zeros(len(votes))
    for _, idx in table["questions"]:
        agree[idx] = consensus([table["near"][i] for i in idx], votes[idx].tolist())
    return np.hstack([table["x"], agree[:, None]])


def fit_model(table: dict[str, Any], train: np.ndarray) -> dict[str, Any]:
    """The three steps of the module docstring, on the rows where ``train`` is true."""
    rows = np.nonzero(train)[0]
    x, y = table["x"], table["y"]
    w = _balanced_weights(table, rows)
    intercept1, coef1 = kit.sign_constrained(lambda xa: kit.fit_logistic(xa, y[rows], w), x[rows], DIRECT_SIGNS)
    x2 = _with_consensus(table, (intercept1, coef1))
    lists = [idx for _, idx in table["questions"] if train[idx[0]] and 0 < y[idx].sum() < len(idx)]
    per_file = defaultdict(int)
    for f, idx in table["questions"]:
        if train[idx[0]] and 0 < y[idx].sum() < len(idx):
            per_file[f] += 1
    list_w = [len(lists) / (len(per_file) * per_file[table["file"][idx[0]]]) for idx in lists]
    _, coef = kit.sign_constrained(lambda xa: (0.0, fit_listwise(xa, y, lists, list_w)), x2, RELEVANCE_SIGNS)
    cal_x = _calibration_inputs(table, x2 @ coef)[rows]
    cal_intercept, cal = kit.sign_constrained(lambda xa: kit.fit_logistic(xa, y[rows], w, l2=1e-3), cal_x, (1, 1))
    return {
        "stage1": (intercept1, coef1),
        "coef": coef,
        "calibration": (cal_intercept, float(cal[0]), float(cal[1])),
    }


def _calibration_inputs(table: dict[str, Any], score: np.ndarray) -> np.ndarray:
    """The ranking score and its gap to the best score of the same question (0 for the best chunk)."""
    gap = np.zeros(len(score))
    for _, idx in table["questions"]:
        gap[idx] = score[idx] - score[idx].max()
    return np.stack([score, gap], axis=1)


def predict_model(table: dict[str, Any], model: dict[str, Any]) -> np.ndarray:
    x2 = _with_consensus(table, model["stage1"])
    intercept, scale, gap = model["calibration"]
    return kit.predict(intercept, np.array([scale, gap]), _calibration_inputs(table, x2 @ model["coef"]))


# ------------------------------------------------------------------------------------------ figures


def figures(table: dict[str, Any], p: np.ndarray) -> dict[str, dict[str, float]]:
    """MAP, MRR (questions with at least one relevant passage) and AUC per file and per file/language,
    ranked and tie-broken as ``ragwatch eval-judge`` does."""
    groups: dict[str, list[np.ndarray]] = defaultdict(list)
    for fname, idx in table["questions"]:
        stem = Path(fname).stem
        groups[stem].append(idx)
        langs = set(table["lang"][idx].tolist())
        if len(langs) == 1:
            groups[f"{stem}/{langs.pop()}"].append(idx)
    out: dict[str, dict[str, float]] = {}
    for name, lists in sorted(groups.items()):
        if "/" in name and sum(1 for n in groups if n.startswith(name.split("/")[0] + "/")) < 2:
            continue  # a single-language file: the per-language line would repeat the file's
        aps, rrs = [], []
        for idx in lists:
            order = sorted(idx, key=lambda i: (-p[i], neutral_order_key(table["passages"][i])))
            ranked = [bool(table["y"][i]) for i in order]
            if any(ranked):
                aps.append(average_precision_from_labels(ranked))
                rrs.append(1.0 / (ranked.index(True) + 1))
        rows = np.concatenate(lists)
        auc = roc_auc(table["y"][rows].astype(bool).tolist(), p[rows].tolist())
        out[name] = {
            "map": round(float(np.mean(aps)), 3),
            "mrr": round(float(np.mean(rrs)), 3),
            "auc": round(float(auc or 0.0), 3),
        }
    return out


def _print(title: str, figs: dict[str, dict[str, float]]) -> None:
    print(f"  {title}")
    for name, f in figs.items():
        print(f"    {name:24s} MAP={f['map']:.3f} MRR={f['mrr']:.3f} AUC={f['auc']:.3f}")


def train(data: Path, folds: int) -> dict[str, Any]:
    table = load_table(data)
    y = table["y"]
    print(f"relevance: {len(y)} pairs, {int(y.sum())} relevant, {len(table['questions'])} questions")
    rng = np.random.default_rng(0)
    fold_of = rng.permutation(len(table["questions"])) % folds
    fold = np.zeros(len(y), dtype=int)
    for k, (_, idx) in zip(fold_of, table["questions"], strict=True):
        fold[idx] = k
    p_oof = np.zeros(len(y))
    for k in range(folds):
        model = fit_model(table, fold != k)
        p_oof[fold == k] = predict_model(table, model)[fold == k]
    cv = figures(table, p_oof)
    _print(f"{folds}-fold grouped CV (out of fold)", cv)
    model = fit_model(table, np.ones(len(y), dtype=bool))
    fit = figures(table, predict_model(table, model))
    _print("in-sample fit", fit)
    intercept1, coef1 = model["stage1"]
    print(f"    {'feature':22s} {'stage 1':>8s} {'ranking':>8s}")
    for i, name in enumerate(RELEVANCE_FEATURES):
        s1 = f"{coef1[i]:+8.3f}" if i < len(coef1) else " " * 8
        print(f"    {name:22s} {s1} {model['coef'][i]:+8.3f}")
    print(
        f"    stage-1 intercept {intercept1:+.3f}; calibration {model['calibration'][1]:.3f} × score"
        f" + {model['calibration'][2]:.3f} × (score − best score of the list) {model['calibration'][0]:+.3f}"
    )
    return {
        "features": list(RELEVANCE_FEATURES),
        "stage1": {"coef": [round(float(c), 5) for c in coef1], "intercept": round(intercept1, 5)},
        "coef": [round(float(c), 5) for c in model["coef"]],
        "calibration": {
            "scale": round(model["calibration"][1], 5),
            "gap": round(model["calibration"][2], 5),
            "intercept": round(model["calibration"][0], 5),
        },
        "cv": cv,
        "in_sample": fit,
        "pairs": len(y),
    }


def main(argv: list[str] | None = None) -> int:
    args = kit.parse_args(__doc__.split("\n\n")[0], WEIGHTS_PATH, argv)
    weights = {
        "note": {
            "trained_by": kit.trained_by("train_relevance.py", args),
            "date": dt.date.today().isoformat(),
            "data": {f: kit.file_sha(args.data / f) for f in FILES},
            "model": "stage 1: sign-constrained L2 logistic regression on the direct features (consensus votes);"
            " ranking: sign-constrained conditional logit per question on all features; calibration: logistic"
            " on the ranking score and its gap to the list's best. Each file weighs the same.",
        },
        **train(args.data, args.folds),
    }
    return kit.write_weights(args, weights)


if __name__ == "__main__":
    sys.exit(main())
