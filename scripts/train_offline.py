"""Fit the offline judge's faithfulness calibration and write ``ragwatch/judges/offline_weights.json``.

Usage (from the project root, with the shared data next to it)::

    python scripts/train_offline.py [--data ../shared/data] [--folds 5] [--dry-run]

Why a script and not hand-set weights: the judge's features (coverage, phrase overlap, rule flags) are
only useful once their relative weights and the decision threshold are fitted to real labels. Training
data, and only this:

* faithfulness: claim-level labels derived from human-labelled hallucinated spans in ``ragtruth_dev.jsonl``
  (a claim overlapping a span is unsupported) plus ``rgb_zh_en_dev.jsonl`` (short answers: the claim
  label is the response label). ``halueval_qa.jsonl`` is never trained on: its hallucinated answers are
  longer than the correct ones, and a judge fitted on it would learn length. No length feature exists.

Chunk relevance has its own model and weights, fitted by ``scripts/train_relevance.py``.

The model is an L2-regularised logistic regression fitted by Newton's method (numpy only). The claim
threshold is chosen to maximise the pooled response-level F1 ("any claim unsupported") over both
faithfulness files — one threshold for everything, never one per file or per task. Grouped k-fold
cross-validation figures (folds by source document / question) are printed and stored in the weights
file so the in-sample evaluation numbers can be read against out-of-fold ones.
"""

from __future__ import annotations

import datetime as dt
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import trainkit as kit

from ragwatch.evaluate import (
    precision_recall_f1,
    roc_auc,
    row_to_sample,
)
from ragwatch.judges.offline import (
    FAITH_FEATURES,
    FAITH_SIGNS,
    WEIGHTS_PATH,
    OfflineJudge,
    claim_labels,
)

FAITH_FILES = ("faithfulness/ragtruth_dev.jsonl", "faithfulness/rgb_zh_en_dev.jsonl")


def fit_monotone(x: np.ndarray, y: np.ndarray, w: np.ndarray, signs: tuple[int, ...]) -> tuple[float, np.ndarray]:
    """The claim model: a weighted logistic regression whose weights keep their sensible signs."""
    return kit.sign_constrained(lambda xa: kit.fit_logistic(xa, y, w), x, signs)


# ------------------------------------------------------------------------------------ faithfulness


def claim_table(data: Path) -> dict[str, Any]:
    """Features of every verifiable claim with its label, response, group, file and rule flag."""
    judge = OfflineJudge()
    feats, labels, responses, groups, files, ruled = [], [], [], [], [], []
    response_meta = []  # (file, label, group, task_type)
    for fname in FAITH_FILES:
        for row in kit.read_jsonl(data / fname):
            rid = len(response_meta)
            group = f"{fname}:{row.get('ragtruth_source_id') or row['question']}"
            response_meta.append((fname, bool(row["label_hallucinated"]), group, row["task_type"]))
            analyses = judge.analyse(row_to_sample(row))
            spans = row.get("hallucinated_spans")
            claims = [a.claim for a in analyses]
            truth = claim_labels(claims, spans) if spans is not None else [row["label_hallucinated"]] * len(claims)
            for a, bad in zip(analyses, truth, strict=True):
                if a.unverifiable:
                    continue
                feats.append(a.features)
                labels.append(0.0 if bad else 1.0)  # the model predicts P(supported)
                responses.append(rid)
                groups.append(group)
                files.append(fname)
                ruled.append(a.rule is not None)
    return {
        "x": np.array(feats, dtype=float),
        "y": np.array(labels),
        "response": np.array(responses),
        "group": np.array(groups),
        "file": np.array(files),
        "ruled": np.array(ruled),
        "responses": response_meta,
    }


def _sample_weights(table: dict[str, Any]) -> np.ndarray:
    """Each file weighs the same in total, so the 300 RGB claims are not drowned by 3,000 RAGTruth ones."""
    files = table["file"]
    w = np.ones(len(files))
    for f in set(files.tolist()):
        mask = files == f
        w[mask] = len(files) / (len(set(files.tolist())) * mask.sum())
    return w


def response_predictions(table: dict[str, Any], p: np.ndarray, threshold: float) -> tuple[list, list, list]:
    """Per response: label, flagged (any claim unsupported) and 1 − faithfulness, as the judge computes them."""
    n = len(table["responses"])
    flagged = [False] * n
    credits: list[list[float]] = [[] for _ in range(n)]
    bad = (p < threshold) | table["ruled"]
    for rid, is_bad in zip(table["response"], bad, strict=True):
        credits[rid].append(0.0 if is_bad else 1.0)
        if is_bad:
            flagged[rid] = True
    labels = [m[1] for m in table["responses"]]
    scores = [1.0 - math.fsum(c) / len(c) if c else 0.0 for c in credits]
    return labels, flagged, scores


def choose_threshold(table: dict[str, Any], p: np.ndarray) -> tuple[float, float]:
    """The claim threshold maximising the pooled response-level F1 over all faithfulness files."""
    best = (0.5, -1.0)
    for t in np.round(np.arange(0.05, 0.96, 0.01), 2):
        labels, flagged, _ = response_predictions(table, p, float(t))
        f1 = precision_recall_f1(labels, flagged)[2]
        if f1 > best[1] + 1e-12:
            best = (float(t), f1)
    return best


def report(table: dict[str, Any], p: np.ndarray, threshold: float, title: str) -> dict[str, Any]:
    labels, flagged, scores = response_predictions(table, p, threshold)
    out: dict[str, Any] = {}
    by: dict[str, list[int]] = defaultdict(list)
    for i, (fname, _, _, task) in enumerate(table["responses"]):
        by[Path(fname).stem].append(i)
        by[f"{Path(fname).stem}/{task}"].append(i)
    print(f"  {title} (claim threshold {threshold:.2f})")
    for name, idx in sorted(by.items()):
        pr, rc, f1 = precision_recall_f1([labels[i] for i in idx], [flagged[i] for i in idx])
        auc = roc_auc([labels[i] for i in idx], [scores[i] for i in idx])
        out[name] = {"precision": round(pr, 3), "recall": round(rc, 3), "f1": round(f1, 3)}
        out[name]["auc"] = None if auc is None else round(auc, 3)
        print(f"    {name:28s} P={pr:.3f} R={rc:.3f} F1={f1:.3f} AUC={auc if auc is None else round(auc, 3)}")
    return out


def train_faithfulness(data: Path, folds: int) -> dict[str, Any]:
    table = claim_table(data)
    x, y, w = table["x"], table["y"], _sample_weights(table)
    print(f"faithfulness: {len(y)} verifiable claims, {int((1 - y).sum())} unsupported")
    # grouped cross-validation: every claim of one source document lands in the same fold
    groups = sorted(set(table["group"].tolist()))
    rng = np.random.default_rng(0)
    fold_of = dict(zip(groups, rng.permutation(len(groups)) % folds, strict=True))
    fold = np.array([fold_of[g] for g in table["group"]])
    p_oof = np.zeros(len(y))
    for k in range(folds):
        train = fold != k
        p_oof[~train] = kit.predict(*fit_monotone(x[train], y[train], w[train], FAITH_SIGNS), x[~train])
    t_oof, _ = choose_threshold(table, p_oof)
    cv = report(table, p_oof, t_oof, f"{folds}-fold grouped CV (out of fold)")
    intercept, coef = fit_monotone(x, y, w, FAITH_SIGNS)
    p = kit.predict(intercept, coef, x)
    threshold, _ = choose_threshold(table, p)
    fit = report(table, p, threshold, "in-sample fit")
    print("  claim-level AUC (in-sample):", round(roc_auc((1 - y).astype(bool).tolist(), (-p).tolist()) or 0, 4))
    for name, c in zip(FAITH_FEATURES, coef, strict=True):
        print(f"    {name:14s} {c:+.3f}")
    return {
        "features": list(FAITH_FEATURES),
        "coef": [round(float(c), 5) for c in coef],
        "intercept": round(float(intercept), 5),
        "threshold": threshold,
        "cv": cv,
        "in_sample": fit,
        "claims": len(y),
    }


def main(argv: list[str] | None = None) -> int:
    args = kit.parse_args(__doc__.split("\n\n")[0], WEIGHTS_PATH, argv)
    faith = train_faithfulness(args.data, args.folds)
    weights = {
        "note": {
            "trained_by": kit.trained_by("train_offline.py", args),
            "date": dt.date.today().isoformat(),
            "data": {f: kit.file_sha(args.data / f) for f in FAITH_FILES},
            "not_trained_on": "faithfulness/halueval_qa.jsonl (length artefact; sanity check only)",
            "model": "L2 logistic regression (numpy Newton) with sign-constrained weights; claim label: supported"
            " unless it overlaps a hallucinated span (RGB: the response label)",
        },
        "faithfulness": faith,
    }
    return kit.write_weights(args, weights)


if __name__ == "__main__":
    sys.exit(main())
