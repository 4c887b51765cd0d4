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
