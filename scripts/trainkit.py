"""What the two calibration scripts (``train_offline.py``, ``train_relevance.py``) share.

numpy-only fitting (weighted L2 logistic regression by Newton's method, sign constraints by an active
set), reading the shared data, and the command line and weight-file writing both scripts offer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

L2 = 1.0
#: A fit: feature columns → (intercept, coefficients).
Fit = Callable[[np.ndarray], tuple[float, np.ndarray]]


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, l2: float = L2) -> tuple[float, np.ndarray]:
    """Weighted L2-regularised logistic regression (intercept unpenalised): (intercept, coefficients)."""
    n, d = x.shape
    xb = np.hstack([np.ones((n, 1)), x])
    w = np.ones(n) if w is None else w
    beta = np.zeros(d + 1)
    penalty = np.full(d + 1, l2)
    penalty[0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ beta, -30, 30)))
        grad = xb.T @ (w * (p - y)) + penalty * beta
        hess = (xb * (w * p * (1 - p))[:, None]).T @ xb + np.diag(penalty) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    return float(beta[0]), beta[1:]


def sign_constrained(fit: Fit, x: np.ndarray, signs: Sequence[int]) -> tuple[float, np.ndarray]:
    """``fit`` on the features whose weights keep their sign (+1: ≥ 0, -1: ≤ 0, 0: free).

    Why: features are correlated (coverage by the context vs. count of missing words), and an unconstrained
    fit happily gives "more missing words" a *positive* weight to correct another coefficient — harmless on
    the dev data, absurd on a new sample. The feature with the largest wrong-signed weight is dropped and
    the rest refitted until every sign is right. Returns the full coefficient vector (dropped ones at 0).
    """
    active = list(range(x.shape[1]))
    while True:
        intercept, coef = fit(x[:, active])
        wrong = [f for f, c in zip(active, coef, strict=True) if signs[f] * c < 0]
        if not wrong:
            full = np.zeros(x.shape[1])
            full[active] = coef
            return intercept, full
        active.remove(max(wrong, key=lambda f: abs(coef[active.index(f)])))


def predict(intercept: float, coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(intercept + x @ coef, -30, 30)))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def file_sha(path: Path) -> str:
    """A short content hash, recorded in the weight file so a retrain on other data is visible."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def parse_args(description: str, weights_path: Path, argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=weights_path)
    parser.add_argument("--dry-run", action="store_true", help="fit and report, do not write the weights")
    parser.add_argument(
        "--check", action="store_true", help="rebuild in memory; exit 1 unless the weight file is byte-identical"
    )
    parser.add_argument("--cache", action="store_true", help="cache extracted features under /tmp (iterating)")
    return parser.parse_args(argv)


def trained_by(script: str, args: argparse.Namespace) -> str:
    return f"python scripts/{script}" + (f" --folds {args.folds}" if args.folds != 5 else "")


def write_weights(args: argparse.Namespace, weights: dict[str, Any]) -> int:
    """Write the weight file unless ``--dry-run``; with ``--check`` compare instead. The scripts' exit code."""
    text = json.dumps(weights, indent=1, ensure_ascii=False) + "\n"
    if getattr(args, "check", False):
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'rebuilds byte-identically' if same else 'DIFFERS from the rebuild'}")
        return 0 if same else 1
    if not args.dry_run:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


# ------------------------------------------------------------------------------- gradient-boosted trees


def quantile_edges(x: np.ndarray, n_bins: int) -> list[np.ndarray]:
    """Per feature, split candidates: midpoints between consecutive distinct values at up to ``n_bins``
    quantiles. Midpoints (not the values themselves) so rounding a threshold in the weight file can never
    move a training value to the other side."""
    edges = []
    for col in x.T:
        values = np.unique(col)
        if len(values) > n_bins:
            values = np.unique(np.quantile(col, np.linspace(0, 1, n_bins + 1), method="lower"))
        edges.append((values[:-1] + values[1:]) / 2 if len(values) > 1 else np.zeros(0))
    return edges


def fit_gbt(
    x: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    *,
    n_trees: int = 200,
    depth: int = 3,
    learning_rate: float = 0.1,
    l2: float = 1.0,
    min_hess: float = 1.0,
    n_bins: int = 32,
    signs: Sequence[int] | None = None,
    round_to: int = 6,
    init: np.ndarray | None = None,
) -> dict[str, Any]:
    """Weighted binary-logloss gradient boosting with depth-``depth`` complete trees, numpy only.

    Deterministic by construction (no sampling, ties broken by the lowest feature and bin), so a weight
    file rebuilds byte for byte. ``signs`` (+1 / -1 / 0 per feature) are monotone constraints in the
    "basic" form: a split whose children's values go the wrong way is not taken, and each child's values
    are bounded by the midpoint, so the whole ensemble is monotone in every constrained feature. Returns
    the spec :class:`ragwatch.scoring.judges.trees.TreeEnsemble` reads (node thresholds, leaf values, base).
    ``init``: a margin per row to boost from (a linear model's logits); the base is then 0.
    """
    n, d = x.shape
    edges = quantile_edges(x, n_bins)
    n_b = max(1, max(len(e) for e in edges) + 1)
    bins = np.stack([np.searchsorted(e, x[:, f], side="left") for f, e in enumerate(edges)], axis=1)
    flat = bins + (np.arange(d) * n_b)[None, :]
    signs_arr = np.zeros(d) if signs is None else np.asarray(signs, dtype=float)
    if init is None:
        pos = float(np.sum(w * y)) / float(np.sum(w))
        base = float(np.log(pos / (1 - pos)))
        margin = np.full(n, base)
    else:
        base = 0.0
        margin = np.asarray(init, dtype=float).copy()
    inner, leaves = 2**depth - 1, 2**depth
    features: list[list[int]] = []
    thresholds: list[list[float | None]] = []
    leaf_values: list[list[float]] = []
    for _ in range(n_trees):
        p = 1.0 / (1.0 + np.exp(-margin))
        g, h = w * (p - y), w * p * (1 - p)
        node = np.zeros(n, dtype=np.intp)
        feat_t = [0] * inner
        thr_t: list[float | None] = [None] * inner
        bounds = {0: (-np.inf, np.inf)}
        for level in range(depth):
            first = 2**level - 1
            width = 2**level
            local = node - first
            key = (local[:, None] * (d * n_b) + flat).ravel()
            size = width * d * n_b
            gh = np.bincount(key, weights=np.repeat(g, d), minlength=size).reshape(width, d, n_b)
            hh = np.bincount(key, weights=np.repeat(h, d), minlength=size).reshape(width, d, n_b)
            gl, hl = np.cumsum(gh, axis=2)[:, :, :-1], np.cumsum(hh, axis=2)[:, :, :-1]
            gt, ht = gh.sum(axis=2)[:, :1, None], hh.sum(axis=2)[:, :1, None]
            gr, hr = gt - gl, ht - hl
            vl, vr = -gl / (hl + l2), -gr / (hr + l2)
            gain = gl**2 / (hl + l2) + gr**2 / (hr + l2) - gt**2 / (ht + l2)
            ok = (hl >= min_hess) & (hr >= min_hess) & (gain > 1e-12)
            ok &= (signs_arr[None, :, None] * (vr - vl)) >= 0
            for f, e in enumerate(edges):  # bins past a feature's last edge are not real split points
                ok[:, f, len(e) :] = False
            gain = np.where(ok, gain, -np.inf)
            for j in range(width):
                nid = first + j
                lo, hi = bounds.get(nid, (-np.inf, np.inf))
                best = int(np.argmax(gain[j]))
                f, b = divmod(best, n_b - 1) if n_b > 1 else (0, 0)
                kids = (2 * nid + 1, 2 * nid + 2)
                if not np.isfinite(gain[j].flat[best]):
                    feat_t[nid], thr_t[nid] = 0, None
                    bounds[kids[0]] = bounds[kids[1]] = (lo, hi)
                    continue
                feat_t[nid], thr_t[nid] = f, round(float(edges[f][b]), round_to)
                if signs_arr[f] != 0:
                    mid = float(np.clip((vl[j, f, b] + vr[j, f, b]) / 2, lo, hi))
                    low_side, high_side = (lo, mid), (mid, hi)
                    bounds[kids[0]], bounds[kids[1]] = (
                        (low_side, high_side) if signs_arr[f] > 0 else (high_side, low_side)
                    )
                else:
                    bounds[kids[0]] = bounds[kids[1]] = (lo, hi)
            # route the rows one level down (a node that did not split sends everything left)
            thr_node = np.array([np.inf if thr_t[first + j] is None else thr_t[first + j] for j in range(width)])
            feat_node = np.array([feat_t[first + j] for j in range(width)])
            go_right = x[np.arange(n), feat_node[local]] > thr_node[local]
            node = 2 * node + 1 + go_right
        leaf = node - inner
        gs = np.bincount(leaf, weights=g, minlength=leaves)
        hs = np.bincount(leaf, weights=h, minlength=leaves)
        values = -gs / (hs + l2)
        for j in range(leaves):
            lo, hi = bounds.get(inner + j, (-np.inf, np.inf))
            values[j] = np.clip(values[j], lo, hi)
        values = np.round(values * learning_rate, round_to)
        margin = margin + values[leaf]
        features.append(feat_t)
        thresholds.append(thr_t)
        leaf_values.append([float(v) for v in values])
    return {
        "depth": depth,
        "base": round(base, round_to),
        "feature": features,
        "threshold": thresholds,
        "leaf": leaf_values,
    }
