"""Judges: pure functions of a sample that return scores in 0..1 with their evidence.

A judge knows nothing of Redis, Prometheus or threads, so it can be tested, benchmarked and evaluated on
data alone; the worker runs it and records what it says. ``make_judges(["offline"], settings)`` builds
judges by name for the CLI. The LLM judge reads its API key from ``RAGWATCH_JUDGE_API_KEY`` only (never
from settings, so it never appears in a dump of them). Its HTTP client is ``llm`` (the one judge module that may import
httpx); ``llm_prompts`` and ``llm_output`` hold the prompt and the parsing and checking of its answer.

What the other modules own: ``base`` (the protocol, score names), ``offline`` (the offline judge: its model,
weights and scores), ``claim_features`` (each claim's features, hard rules and verdicts), ``claim_context``
(the retrieved chunks indexed for the claims), ``unverifiable`` (refusals, meta and framing lines),
``claims`` (splitting an answer into claims), ``text`` (context sentences, their analysis, token weights),
``text_scan`` (the tokenising pass: tokens, numbers, negation and hedge cues), ``text_lexicon`` (its word
lists and units), ``text_rules`` (negation, hedges, entities, JSON polarity),
``relevance`` and ``answer_relevance`` (chunk and answer relevance), ``trees`` and ``calibration`` (the model
evaluation and weight files), ``semantic``, ``embedding``, ``crossencoder``, ``cascade`` and ``trivial`` (the
other judges).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragwatch.errors import ConfigError
from ragwatch.scoring.judges.base import Judge, Verdict
from ragwatch.scoring.judges.trivial import TrivialJudge
from ragwatch.settings import JUDGE_NAMES

if TYPE_CHECKING:
    from ragwatch.scoring.judges.offline import OfflineJudge
    from ragwatch.settings import Settings

__all__ = ["JUDGE_NAMES", "Judge", "TrivialJudge", "Verdict", "make_judges"]


def make_judges(names: Sequence[str], settings: Settings | None = None) -> list[Judge]:
    """Judges by name, in order; an unknown name or a missing LLM setting is a :class:`ConfigError`."""
    return [_make(name, settings) for name in names]


def _make(name: str, settings: Settings | None) -> Judge:
    if name == "trivial":
        return TrivialJudge()
    if name == "offline":
        return _offline(settings)
    if name == "embedding":
        from ragwatch.scoring.judges.embedding import EmbeddingJudge

        if settings is None:
            return EmbeddingJudge()
        return EmbeddingJudge(settings.embedding_model, **_semantic_kwargs(settings))
    if name == "semantic":
        from ragwatch.scoring.judges.semantic import SemanticJudge

        return SemanticJudge(**_semantic_kwargs(settings)) if settings is not None else SemanticJudge()
    if name == "llm":
        return _llm(settings)
    if name == "cascade":
        from ragwatch.scoring.judges.cascade import CascadeJudge

        band = settings.cascade_band if settings is not None else (0.3, 0.8)
        fraction = settings.cascade_fraction if settings is not None else 0.0
        return CascadeJudge(_offline(settings), _llm(settings), band=band, fraction=fraction)
    raise ConfigError(f"unknown judge {name!r}; known: {list(JUDGE_NAMES)}")


def _offline(settings: Settings | None) -> OfflineJudge:
    from ragwatch.scoring.judges.offline import OfflineJudge

    if settings is None:
        return OfflineJudge()
    return OfflineJudge(
        chunk_cache_size=settings.offline_cache_size,
        threshold=settings.offline_threshold,
        relevance_offset=settings.relevance_offset,
        relevance_offset_cjk=settings.relevance_offset_cjk,
    )


def _semantic_kwargs(settings: Settings) -> dict[str, Any]:
    return {
        "relevance_offset": settings.relevance_offset,
        "relevance_offset_cjk": settings.relevance_offset_cjk,
        "threshold": settings.semantic_threshold,
        "band": settings.semantic_band,
        "cache_size": settings.semantic_cache_size,
        "threads": settings.semantic_threads,
    }


def _llm(settings: Settings | None) -> Judge:
    if settings is None or not settings.judge_base_url or not settings.judge_model:
        raise ConfigError("the llm judge needs judge_base_url and judge_model (RAGWATCH_JUDGE_BASE_URL/_MODEL)")
    from ragwatch.scoring.judges.llm import LLMJudge

    return LLMJudge(
        settings.judge_base_url,
        settings.judge_model,
        timeout=settings.judge_timeout,
        max_retries=settings.judge_max_retries,
        max_concurrency=settings.judge_concurrency,
    )
