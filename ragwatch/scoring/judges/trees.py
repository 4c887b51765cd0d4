"""Gradient-boosted trees at inference time, in numpy: the claim-support model of the offline judge.

Why trees and why this shape: the judge's alignment features interact (a coverage of 0.8 means one thing for
a six-word English claim and another for a Chinese one scored by character bigrams), which a logistic
calibration cannot express. The model is fitted offline (``scripts/train_offline.py``, numpy only, see
``scripts/trainkit.py``) and shipped as a JSON file of complete binary trees of one fixed depth, so scoring
every claim of a sample against every tree is a handful of array operations — no per-node Python loop, and
nothing but numpy installed. A node that did not split has threshold +inf (every row goes left) and the
same leaf values on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["TreeEnsemble"]


class TreeEnsemble:
    """``depth``-deep complete binary trees: margin = base + Σ leaf value (a logit of P(supported)).

    ``feature[t, n]`` / ``threshold[t, n]`` for the ``2**depth - 1`` inner nodes in breadth-first order
    (children of node n are 2n+1 and 2n+2; a row goes right when its value is greater than the threshold),
    ``leaf[t, l]`` for the ``2**depth`` leaves, left to right.
    """

    __slots__ = ("_flat", "_rows_t", "base", "depth", "feature", "leaf", "n_features", "threshold")

    def __init__(self, spec: dict[str, Any], n_features: int) -> None:
        self.depth = int(spec["depth"])
        self.base = float(spec["base"])
        self.n_features = n_features
        inner, leaves = 2**self.depth - 1, 2**self.depth
        self.feature = np.asarray(spec["feature"], dtype=np.intp).reshape(-1, inner)
        thr = [[np.inf if v is None else v for v in row] for row in spec["threshold"]]
        self.threshold = np.asarray(thr, dtype=np.float64).reshape(-1, inner)
        self.leaf = np.asarray(spec["leaf"], dtype=np.float64).reshape(-1, leaves)
        n_trees = self.feature.shape[0]
        if self.threshold.shape[0] != n_trees or self.leaf.shape[0] != n_trees:
            raise ValueError("tree arrays disagree on the number of trees")
        if n_trees and (self.feature.min() < 0 or self.feature.max() >= n_features):
            raise ValueError("a tree splits on a feature this code does not compute")
        self._rows_t = np.arange(n_trees)
        self._flat = (self.feature.ravel(), self.threshold.ravel())

    def margin(self, x: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
        """The logit for each row of ``x`` (claims × features).

        Flat indices throughout: one-dimensional ``take`` is several times cheaper than two-dimensional
        fancy indexing, and a sample has only a handful of claims, so call overhead is what costs.
        """
        xa = np.ascontiguousarray(x, dtype=np.float64)
        n = xa.shape[0]
        n_trees = self.feature.shape[0]
        if n == 0 or n_trees == 0:
            return np.full(n, self.base)
        inner = self.feature.shape[1]
        feature, threshold = self._flat
        tree_base = self._rows_t * inner  # offset of each tree's first node
        row_base = (np.arange(n) * xa.shape[1])[:, None]
        flat_x = xa.ravel()
        node = np.zeros((n, n_trees), dtype=np.intp)
        for _ in range(self.depth):
            at = node + tree_base
            right = flat_x.take(row_base + feature.take(at)) > threshold.take(at)
            node = 2 * node + 1 + right
        leaf = node - inner + self._rows_t * (inner + 1)
        return self.base + self.leaf.ravel().take(leaf).sum(axis=1)

    def predict(self, x: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
        """P(supported) for each row of ``x``."""
        return 1.0 / (1.0 + np.exp(-np.clip(self.margin(x), -30.0, 30.0)))
