"""Fit the offline judge's chunk-relevance model and write ``ragwatch/scoring/judges/relevance_weights.json``.

Usage (from the project root, with the shared data next to it)::

    python scripts/train_relevance.py [--data ../shared/data] [--folds 5] [--dry-run | --check]

``--check`` rebuilds the weights in memory and exits 1 unless they equal the shipped file byte for byte.

**Fitted on** the training corpus only (``train/relevance/``, see its README): Factcheck-GPT claim–evidence
pairs (is the evidence about the claim), SelQA answer-sentence selection (English Wikipedia) and DuReader
search documents (Chinese), grouped by ``question_id`` into candidate lists. Only the question and passage
texts are used — never an id, a title or a position in a document. Each file weighs the same in every fit.

**Set on dev**, and nothing else: the calibration's intercepts, one for questions written in CJK script and
one for the rest, on ``relevance/wikiqa_dev.jsonl`` and ``relevance/rgb_relevance_dev.jsonl`` (a base rate,
which differs between corpora and in production: WikiQA lists are 5 % relevant, RGB's 35 %). The slopes of
the calibration and every feature weight come from the corpus.

The model (see :mod:`ragwatch.scoring.judges.relevance`), fitted in three steps with numpy only:

1. **stage 1**: an L2 logistic regression (Newton's method, each class and file weighing the same, every
   weight constrained to its sign) of "relevant" on the direct features; its probabilities are the votes of
   the consensus feature;
2. **ranking**: a conditional logit (softmax over each question's candidates, the likelihood of its relevant
   ones) on the direct features plus the consensus, sign-constrained — the weights that best *rank* a list;
3. **calibration**: a logistic regression of "relevant" on that score and its gap to the best score of the
   same question (both slopes non-negative, so the ranking is kept), one intercept per script (CJK or not).

Printed (and stored in the weights file): grouped k-fold cross-validation (folds by the corpus' ``group``, the
source document, so paraphrased questions about one article never straddle folds; all three steps
refitted on the training folds) and leave-one-dataset-out, each next to the figures of the previously
shipped weights (``scripts/baselines/``, fitted on the dev files in November 2026) on the same rows; then
the dev files, read with the intercepts set there. The script refuses to write a model whose
cross-validated MAP is below the baseline's on any training file by more than twice the standard error of
the paired per-question difference.
"""

from __future__ import annotations

import hashlib
import pickle
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import trainkit as kit

from ragwatch.scoring.evaluate import expected_calibration_error, neutral_order_key, roc_auc
from ragwatch.scoring.judges.relevance import (
    DIRECT_FEATURES,
    RELEVANCE_FEATURES,
    RELEVANCE_SIGNS,
    WEIGHTS_PATH,
    analyse_candidates,
    consensus,
    is_cjk_question,
)
from ragwatch.scoring.retrieval_metrics import average_precision_from_labels

TRAIN_FILES = ("train/relevance/factcheck_gpt.jsonl", "train/relevance/selqa.jsonl", "train/relevance/dureader.jsonl")
DEV_FILES = ("relevance/wikiqa_dev.jsonl", "relevance/rgb_relevance_dev.jsonl")
BASELINE = kit.ROOT / "scripts" / "baselines" / "relevance_weights_2026-11-30.json"
DIRECT_SIGNS = RELEVANCE_SIGNS[: len(DIRECT_FEATURES)]
#: Cached feature tables (only while iterating; the cache key covers the data and the feature code).
CACHE = Path("/tmp/ragwatch-relevance-features")


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


def fit_offset(z: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> float:
    """The intercept b maximising the (weighted) likelihood of ``y`` under sigmoid(b + z), slopes kept."""
    b = 0.0
    w = np.ones(len(y)) if w is None else w
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(b + z, -30, 30)))
        step = float((w * (p - y)).sum()) / max(float((w * p * (1 - p)).sum()), 1e-9)
        b -= step
        if abs(step) < 1e-10:
            break
    return b


def _feature_code_digest() -> str:
    judges = kit.ROOT / "ragwatch" / "scoring" / "judges"
    files = ("relevance.py", "text.py", "text_scan.py", "text_lexicon.py")
    return hashlib.sha256(b"".join((judges / f).read_bytes() for f in files)).hexdigest()[:12]


def load_table(data: Path, files: tuple[str, ...], use_cache: bool = False) -> dict[str, Any]:
    """Direct features of every pair, grouped by question (each question's rows contiguous)."""
    key = hashlib.sha256(("|".join(kit.file_sha(data / f) for f in files) + _feature_code_digest()).encode())
    cached = CACHE / f"{key.hexdigest()[:16]}.pkl"
    if use_cache and cached.exists():
        return pickle.loads(cached.read_bytes())
    feats: list[list[float]] = []
    labels, file_of, groups, cjk, passages, near = [], [], [], [], [], []
    questions: list[tuple[str, np.ndarray]] = []  # (file, row indices)
    for fname in files:
        grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in kit.read_jsonl(data / fname):
            grouped[str(row["question_id"])].append(row)
        for rows in grouped.values():
            question = rows[0]["question"]
            cands = analyse_candidates(question, [r["passage"] for r in rows])
            start = len(labels)
            for row, fs, words in zip(rows, cands.features, cands.near, strict=True):
                feats.append(fs)
                labels.append(1.0 if row["relevant"] else 0.0)
                file_of.append(fname)
                groups.append(str(row.get("group", row["question_id"])))
                cjk.append(is_cjk_question(question))
                passages.append(row["passage"])
                near.append(words)
            questions.append((fname, np.arange(start, len(labels))))
    table = {
        "files": files,
        "x": np.array(feats, dtype=float),
        "y": np.array(labels),
        "file": np.array(file_of),
        "group": np.array(groups),
        "cjk": np.array(cjk, dtype=bool),
        "passages": passages,
        "near": near,
        "questions": questions,
    }
    if use_cache:
        CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(pickle.dumps(table))
    return table


# ------------------------------------------------------------------------------------------- model


def _file_weights(table: dict[str, Any], rows: np.ndarray, balance_classes: bool) -> np.ndarray:
    """Each file (and, if asked, each class within it) weighs the same: SelQA's 10,000 rows must not
    drown DuReader's 900, the only Chinese ones."""
    y, files = table["y"][rows], table["file"][rows]
    present = sorted(set(files.tolist()))
    w = np.zeros(len(rows))
    for f in present:
        for cls in (0.0, 1.0) if balance_classes else (None,):
            mask = (files == f) if cls is None else (files == f) & (y == cls)
            if mask.any():
                w[mask] = len(rows) / ((2 if balance_classes else 1) * len(present) * mask.sum())
    return w


def _with_consensus(table: dict[str, Any], stage1: tuple[float, np.ndarray]) -> np.ndarray:
    """The ranking features: the direct ones, the consensus and, in a table that has them (the embedding
    judge's, ``scripts/train_embedding_relevance.py``), its ``extra`` columns."""
    votes = kit.predict(*stage1, table["x"])
    agree = np.zeros(len(votes))
    for _, idx in table["questions"]:
        agree[idx] = consensus([table["near"][i] for i in idx], votes[idx].tolist())
    columns = [table["x"], agree[:, None]]
    if "extra" in table:
        columns.append(table["extra"])
    return np.hstack(columns)


def ranking_signs(table: dict[str, Any]) -> tuple[int, ...]:
    """Sign constraints of the ranking weights: the extra columns (similarities) may only raise a chunk."""
    return (*RELEVANCE_SIGNS, *(1,) * (table["extra"].shape[1] if "extra" in table else 0))


def _calibration_inputs(table: dict[str, Any], score: np.ndarray) -> np.ndarray:
    """The ranking score, its gap to the best score of the same question (0 for the best chunk) and the log
    of the list's length (the more candidates, the smaller the share of them that is relevant)."""
    gap = np.zeros(len(score))
    size = np.zeros(len(score))
    for _, idx in table["questions"]:
        gap[idx] = score[idx] - score[idx].max()
        size[idx] = np.log(len(idx))
    return np.stack([score, gap, size], axis=1)


def fit_model(table: dict[str, Any], train: np.ndarray) -> dict[str, Any]:
    """The three steps of the module docstring, on the rows where ``train`` is true."""
    rows = np.nonzero(train)[0]
    x, y = table["x"], table["y"]
    w = _file_weights(table, rows, balance_classes=True)
    intercept1, coef1 = kit.sign_constrained(lambda xa: kit.fit_logistic(xa, y[rows], w), x[rows], DIRECT_SIGNS)
    x2 = _with_consensus(table, (intercept1, coef1))
    lists = [idx for _, idx in table["questions"] if train[idx[0]] and 0 < y[idx].sum() < len(idx)]
    per_file: dict[str, int] = defaultdict(int)
    for idx in lists:
        per_file[table["file"][idx[0]]] += 1
    list_w = [len(lists) / (len(per_file) * per_file[table["file"][idx[0]]]) for idx in lists]
    _, coef = kit.sign_constrained(lambda xa: (0.0, fit_listwise(xa, y, lists, list_w)), x2, ranking_signs(table))
    cal_x = _calibration_inputs(table, x2 @ coef)[rows]
    w_cal = _file_weights(table, rows, balance_classes=False)
    _, cal = kit.sign_constrained(lambda xa: kit.fit_logistic(xa, y[rows], w_cal, l2=1e-3), cal_x, (1, 1, -1))
    model = {
        "stage1": (intercept1, coef1),
        "coef": coef,
        "scale": float(cal[0]),
        "gap": float(cal[1]),
        "log_size": float(cal[2]),
    }
    return set_intercepts(table, train, model)


def _calibration_logit(table: dict[str, Any], model: dict[str, Any]) -> np.ndarray:
    x2 = _with_consensus(table, model["stage1"])
    slopes = np.array([model["scale"], model["gap"], model["log_size"]])
    return _calibration_inputs(table, x2 @ model["coef"]) @ slopes


def set_intercepts(
    table: dict[str, Any], rows: np.ndarray, model: dict[str, Any], equal_files: bool = True
) -> dict[str, Any]:
    """The calibration's intercepts (CJK questions, the rest) on the rows where ``rows`` is true, each file
    weighing the same (WikiQA's 23,000 English rows must not set the intercept for RGB's English questions
    alone; ``equal_files=False`` pools the rows instead), the slopes kept; a script without rows there keeps
    the other's intercept."""
    z = _calibration_logit(table, model)
    out = dict(model)
    missing = []
    for key, mask in (("intercept", ~table["cjk"]), ("intercept_cjk", table["cjk"])):
        sel = rows & mask
        if sel.any():
            idx = np.nonzero(sel)[0]
            w = _file_weights(table, idx, balance_classes=False) if equal_files else None
            out[key] = fit_offset(z[idx], table["y"][idx], w)
        else:
            missing.append(key)
    if len(missing) == 1:  # a script without rows takes the other's intercept
        out[missing[0]] = out["intercept_cjk" if missing[0] == "intercept" else "intercept"]
    return out


def predict_model(table: dict[str, Any], model: dict[str, Any]) -> np.ndarray:
    intercept = np.where(table["cjk"], model["intercept_cjk"], model["intercept"])
    return 1.0 / (1.0 + np.exp(-np.clip(intercept + _calibration_logit(table, model), -30, 30)))


def model_from_weights(weights: dict[str, Any]) -> dict[str, Any]:
    """A weight file (the shipped format, or the baseline's, which has one intercept) as a model."""
    cal = weights["calibration"]
    return {
        "stage1": (float(weights["stage1"]["intercept"]), np.array(weights["stage1"]["coef"], dtype=float)),
        "coef": np.array(weights["coef"], dtype=float),
        "scale": float(cal["scale"]),
        "gap": float(cal["gap"]),
        "log_size": float(cal.get("log_size", 0.0)),
        "intercept": float(cal["intercept"]),
        "intercept_cjk": float(cal.get("intercept_cjk", cal["intercept"])),
    }


# ------------------------------------------------------------------------------------------ figures


def average_precisions(table: dict[str, Any], p: np.ndarray) -> dict[str, np.ndarray]:
    """AP of every question with a relevant passage, per file, in a fixed order (for paired comparisons)."""
    out: dict[str, list[float]] = defaultdict(list)
    for fname, idx in table["questions"]:
        order = sorted(idx, key=lambda i: (-p[i], neutral_order_key(table["passages"][i])))
        ranked = [bool(table["y"][i]) for i in order]
        if any(ranked):
            out[Path(fname).stem].append(average_precision_from_labels(ranked))
    return {name: np.array(aps) for name, aps in out.items()}


def worse_files(table: dict[str, Any], p_new: np.ndarray, p_base: np.ndarray) -> dict[str, dict[str, float]]:
    """Files where the new model's MAP is below the baseline's by more than twice the standard error of the
    paired per-question difference (a tie within noise is not "worse"); the difference and its error."""
    new, base = average_precisions(table, p_new), average_precisions(table, p_base)
    out = {}
    for name in sorted(new):
        diff = new[name] - base[name]
        se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
        out[name] = {"map_diff": round(float(diff.mean()), 4), "se": round(se, 4)}
    return out


def figures(table: dict[str, Any], p: np.ndarray, rows: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """MAP, MRR (questions with at least one relevant passage), AUC and ECE (10 bins) per file, over the
    questions whose rows are selected; ranked and tie-broken as ``ragwatch eval-judge`` does."""
    by_file: dict[str, list[np.ndarray]] = defaultdict(list)
    for fname, idx in table["questions"]:
        if rows is None or rows[idx[0]]:
            by_file[Path(fname).stem].append(idx)
    out: dict[str, dict[str, float]] = {}
    for name, lists in sorted(by_file.items()):
        aps, rrs = [], []
        for idx in lists:
            order = sorted(idx, key=lambda i: (-p[i], neutral_order_key(table["passages"][i])))
            ranked = [bool(table["y"][i]) for i in order]
            if any(ranked):
                aps.append(average_precision_from_labels(ranked))
                rrs.append(1.0 / (ranked.index(True) + 1))
        sel = np.concatenate(lists)
        labels = table["y"][sel].astype(bool).tolist()
        auc = roc_auc(labels, p[sel].tolist())
        out[name] = {
            "map": round(float(np.mean(aps)), 3),
            "mrr": round(float(np.mean(rrs)), 3),
            "auc": round(float(auc or 0.0), 3),
            "ece": round(float(expected_calibration_error(labels, p[sel].tolist()) or 0.0), 3),
        }
    return out


def _print(title: str, figs: dict[str, dict[str, float]], base: dict[str, dict[str, float]]) -> None:
    print(f"  {title}  (new | shipped baseline, same rows)")
    print(f"    {'file':16s} {'MAP':>13s} {'MRR':>13s} {'AUC':>13s} {'ECE':>13s}")
    for name, f in figs.items():
        b = base[name]
        cells = " ".join(f"{f[m]:.3f} | {b[m]:.3f}" for m in ("map", "mrr", "auc", "ece"))
        print(f"    {name:16s} {cells}")


def grouped_folds(table: dict[str, Any], folds: int) -> np.ndarray:
    """Fold of every row: each file's groups (source documents) shuffled with a fixed seed, dealt round."""
    fold = np.zeros(len(table["y"]), dtype=int)
    rng = np.random.default_rng(0)
    for fname in table["files"]:
        in_file = table["file"] == fname
        groups = sorted(set(table["group"][in_file].tolist()))
        of = {g: int(k) for g, k in zip(groups, rng.permutation(len(groups)) % folds, strict=True)}
        fold[in_file] = [of[g] for g in table["group"][in_file]]
    return fold


def cross_validate(table: dict[str, Any], baseline: np.ndarray, folds: int) -> dict[str, Any]:
    """Grouped k-fold and leave-one-dataset-out figures of the recipe, each next to the baseline's."""
    fold = grouped_folds(table, folds)
    p_oof = np.zeros(len(table["y"]))
    per_fold = []
    for k in range(folds):
        test = fold == k
        p_oof[test] = predict_model(table, fit_model(table, ~test))[test]
        per_fold.append({"new": figures(table, p_oof, test), "baseline": figures(table, baseline, test)})
    cv = figures(table, p_oof)
    cv_base = figures(table, baseline)
    print(f"  {folds}-fold grouped CV, per fold MAP (new | baseline):")
    for k, f in enumerate(per_fold):
        cells = (f"{n} {v['map']:.3f} | {f['baseline'][n]['map']:.3f}" for n, v in f["new"].items())
        print("    fold", k, "  ".join(cells))
    _print(f"{folds}-fold grouped CV (out of fold)", cv, cv_base)
    paired = worse_files(table, p_oof, baseline)
    print("  CV MAP, new − baseline per question (± standard error):")
    for name, d in paired.items():
        print(f"    {name:16s} {d['map_diff']:+.4f} ± {d['se']:.4f}")
    lodo: dict[str, dict[str, float]] = {}
    for fname in table["files"]:
        held = table["file"] == fname
        p = predict_model(table, fit_model(table, ~held))
        lodo.update(figures(table, p, held))
    _print("leave one dataset out (fitted on the other two)", lodo, cv_base)
    return {"cv": cv, "cv_baseline": cv_base, "cv_map_diff": paired, "lodo": lodo}


Extend = Callable[[dict[str, Any], str], None]
Baseline = Callable[[dict[str, Any]], np.ndarray]
Keep = Callable[[dict[str, Any]], np.ndarray]


def subset(table: dict[str, Any], keep: np.ndarray) -> dict[str, Any]:
    """The table of the questions whose rows ``keep`` selects (it must select whole questions), its
    ``files`` narrowed to those that still have rows."""
    new_of = np.cumsum(keep) - 1
    questions = [(f, new_of[idx]) for f, idx in table["questions"] if keep[idx].all()]
    if sum(len(idx) for _, idx in questions) != int(keep.sum()):
        raise ValueError("subset: keep must select whole questions")
    rows = np.nonzero(keep)[0]
    out = {
        key: (value[rows] if isinstance(value, np.ndarray) else [value[i] for i in rows])
        for key, value in table.items()
        if key not in ("files", "questions")
    }
    present = set(out["file"].tolist())
    out["files"] = tuple(f for f in table["files"] if f in present)
    out["questions"] = questions
    return out


def _shipped_baseline(table: dict[str, Any]) -> np.ndarray:
    return predict_model(table, model_from_weights(kit.read_json(BASELINE)))


def train(
    data: Path,
    folds: int,
    use_cache: bool,
    extend: Extend | None = None,
    baseline: Baseline = _shipped_baseline,
    features: tuple[str, ...] = RELEVANCE_FEATURES,
    keep: Keep | None = None,
) -> dict[str, Any]:
    """Fit, cross-validate against ``baseline`` (the previously shipped model's scores) and read the dev
    files. ``extend(table, "train" | "dev")`` adds a table's ``extra`` ranking columns (the embedding
    judge's similarities), named at the end of ``features``; ``keep(table)`` selects the questions the
    model is for (the rest are neither fitted nor reported)."""
    table = load_table(data, TRAIN_FILES, use_cache)
    dev = load_table(data, DEV_FILES, use_cache)
    if extend is not None:
        extend(table, "train")
        extend(dev, "dev")
    if keep is not None:
        table, dev = subset(table, keep(table)), subset(dev, keep(dev))
    y = table["y"]
    print(f"training: {len(y)} pairs, {int(y.sum())} relevant, {len(table['questions'])} questions")
    report = cross_validate(table, baseline(table), folds)
    worse = [n for n, d in report["cv_map_diff"].items() if d["map_diff"] < -2 * d["se"]]
    model = fit_model(table, np.ones(len(y), dtype=bool))
    everything = np.ones(len(dev["y"]), dtype=bool)
    pooled = set_intercepts(dev, everything, model, equal_files=False)
    model = set_intercepts(dev, everything, model)
    dev_figs = figures(dev, predict_model(dev, model))
    _print("dev files (intercepts set here; nothing else)", dev_figs, figures(dev, baseline(dev)))
    pooled_figs = figures(dev, predict_model(dev, pooled))
    print(
        "  not shipped, for comparison: intercepts on the pooled dev rows (WikiQA sets the English one):",
        ", ".join(f"{n} ECE {f['ece']:.3f}" for n, f in pooled_figs.items()),
        f"(intercept {pooled['intercept']:+.3f}, CJK {pooled['intercept_cjk']:+.3f})",
    )
    intercept1, coef1 = model["stage1"]
    print(f"    {'feature':22s} {'stage 1':>8s} {'ranking':>8s}")
    for i, name in enumerate(features):
        s1 = f"{coef1[i]:+8.3f}" if i < len(coef1) else " " * 8
        print(f"    {name:22s} {s1} {model['coef'][i]:+8.3f}")
    print(
        f"    stage-1 intercept {intercept1:+.3f}; calibration {model['scale']:.3f} × score + {model['gap']:.3f}"
        f" × (score − best of the list) {model['log_size']:+.3f} × ln(list length) + intercept"
        f" {model['intercept']:+.3f} ({model['intercept_cjk']:+.3f} CJK)"
    )
    return {
        "worse_than_baseline": worse,
        "train_files": table["files"],
        "dev_files": dev["files"],
        "weights": {
            "features": list(features),
            "stage1": {"coef": [round(float(c), 5) for c in coef1], "intercept": round(intercept1, 5)},
            "coef": [round(float(c), 5) for c in model["coef"]],
            "calibration": {
                "scale": round(model["scale"], 5),
                "gap": round(model["gap"], 5),
                "log_size": round(model["log_size"], 5),
                "intercept": round(model["intercept"], 5),
                # a model for non-CJK questions only has no CJK intercept to set
                **({"intercept_cjk": round(model["intercept_cjk"], 5)} if dev["cjk"].any() else {}),
            },
            **report,
            "dev": dev_figs,
            "pairs": len(y),
        },
    }


def write(args: Any, fitted: dict[str, Any], script: str, model: str, baseline: str, **more: Any) -> int:
    """The weight file (or ``--check`` against it) with its note, unless the gate refused the model; the
    note's ``more`` entries go before ``baseline``. The scripts' exit code."""
    if fitted["worse_than_baseline"] and not args.check:
        print(f"refusing to write: cross-validated MAP below the baseline on {fitted['worse_than_baseline']}")
        return 1
    note = {
        "trained_by": kit.trained_by(script, args),
        "fitted_on": {f: kit.file_sha(args.data / f) for f in fitted["train_files"]},
        "intercept_set_on": {f: kit.file_sha(args.data / f) for f in fitted["dev_files"]},
        "threshold_set_on": {},
        "model": model,
        **more,
        "baseline": baseline,
    }
    return kit.write_weights(args, {"note": note, **fitted["weights"]})


def main(argv: list[str] | None = None) -> int:
    args = kit.parse_args(__doc__.split("\n\n")[0], WEIGHTS_PATH, argv)
    fitted = train(args.data, args.folds, args.cache)
    model = (
        "stage 1: sign-constrained L2 logistic regression on the direct features (consensus votes);"
        " ranking: sign-constrained conditional logit per question on all features; calibration: logistic"
        " on the ranking score and its gap to the list's best, slopes from the corpus, one intercept per"
        " script (CJK questions or not) set on the dev files. Each training file weighs the same."
        " No decision threshold: 0.5 is the calibrated boundary."
    )
    return write(args, fitted, "train_relevance.py", model, str(BASELINE.relative_to(kit.ROOT)))


if __name__ == "__main__":
    sys.exit(main())
