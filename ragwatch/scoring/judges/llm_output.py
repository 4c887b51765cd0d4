"""The LLM judge's output: parsed, shape-checked and its evidence verified before any score is computed.

The judge is an LLM too and can hallucinate, so nothing it says is believed as written: its JSON is
validated (a malformed answer is worth one retry, see :class:`_Malformed`), a ``SUPPORTED`` claim keeps its
verdict only if its quote really occurs in the context, and the formulas here, not the model, turn the
surviving evidence into scores. Pure functions, no I/O: :mod:`ragwatch.scoring.judges.llm` is the client.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ragwatch.sampling.sample import SampleChunk

__all__ = ["RELEVANT_AT", "SUPPORTED", "UNSUPPORTED", "UNVERIFIABLE"]

SUPPORTED = "SUPPORTED"
UNSUPPORTED = "UNSUPPORTED"
UNVERIFIABLE = "UNVERIFIABLE"
_VERDICTS = frozenset({SUPPORTED, UNSUPPORTED, UNVERIFIABLE})

#: A chunk counts as relevant for the rank-aware Context Precision when its graded relevance reaches this.
RELEVANT_AT = 0.5

QUOTE_NOT_FOUND = "quote not found in context"
NO_QUOTE = "no quote given"
UNKNOWN_VERDICT = "unknown verdict"
NO_VERIFIABLE_CLAIMS = "no verifiable claims"
NO_ANSWER = "no answer in the sample: no faithfulness score"
EMPTY_ANSWER = "empty answer: no faithfulness score"


class _Malformed(Exception):
    """The endpoint answered 2xx but not with the JSON the prompt asked for; worth one retry."""


@dataclass(frozen=True, slots=True)
class _Claim:
    text: str
    verdict: str  # as the model wrote it, stripped and upper-cased
    chunk_id: str | None
    quote: str | None


@dataclass(frozen=True, slots=True)
class _Output:
    """The model's answer after shape validation, before any judgement of its content; immutable because
    it is what the cache stores and several threads may read one entry."""

    claims: tuple[_Claim, ...]
    chunks: tuple[tuple[str, float], ...]
    answer_relevance: float


# --------------------------------------------------------------------------------------------- formulas


def _context_precision(relevances: Sequence[float], k: int) -> float:
    """SLA form of Context Precision@K: mean graded relevance of the top ``k`` chunks, a missing chunk
    counting 0 — retrieving fewer than K chunks is not rewarded by a smaller denominator."""
    return sum(relevances[:k]) / k


def _context_precision_ranked(relevances: Sequence[float], k: int, threshold: float = RELEVANT_AT) -> float:
    """Ragas form: Σ_{i≤k} precision@i · v_i / (relevant chunks in the top k), v_i = relevance ≥ threshold.

    It rewards putting the relevant chunks first; 0 when none of the top k is relevant.
    """
    hits = 0
    total = 0.0
    for i, relevance in enumerate(relevances[:k], start=1):
        if relevance >= threshold:
            hits += 1
            total += hits / i
    return total / hits if hits else 0.0


# --------------------------------------------------------------------------------------- quote matching

_WS = re.compile(r"\s+")
# CJK ideographs, kana, hangul and CJK punctuation: scripts written without spaces, where a model copying a
# quote may add or drop a space or line break between characters without changing the text.
_CJK = "\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
_CJK_GAP = re.compile(rf"(?<=[{_CJK}]) | (?=[{_CJK}])")
_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‟": '"', "‘": "'", "’": "'", "‚": "'", "‛": "'"})


def _normalise(text: str) -> str:
    """Text as compared for quotes: NFKC (full-width ASCII → ASCII), curly quotes straightened, case folded,
    whitespace collapsed, and spaces next to CJK characters removed."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    text = _WS.sub(" ", text).strip()
    return _CJK_GAP.sub("", text)


def _quote_in(quote: str, haystack: str) -> bool:
    """Whether the (normalised) quote occurs in the (normalised) chunk text. An ellipsis in the quote may
    stand for omitted text: its pieces must then occur in order — still grounded, just abridged."""
    pieces = [p.strip() for p in quote.split("...")]
    pieces = [p for p in pieces if p]
    if not pieces:
        return False
    at = 0
    for piece in pieces:
        found = haystack.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


# ------------------------------------------------------------------------------------ output validation


def _number(value: Any) -> float | None:
    """A finite number from JSON; numeric strings are accepted because some models quote their numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _optional_str(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _unfenced(content: str) -> str:
    """The body of a code fence around the whole content (```json … ```), else the content: servers that
    ignore ``response_format`` often wrap their JSON in one.

    String operations, not a regular expression: the pattern this replaced backtracked over every way to
    split a run of whitespace between its lazy body and the closing fence, and a reply of 5,000 spaces
    after an opening fence (a model looping until ``max_tokens``) held the worker for over a minute.
    """
    text = content.strip()
    if len(text) < 6 or not (text.startswith("```") and text.endswith("```")):
        return content
    body = text[3:-3]
    tag = 0  # the language tag, ASCII letters right after the opening fence
    while tag < len(body) and body[tag].isascii() and body[tag].isalpha():
        tag += 1
    return body[tag:].strip()


def _extract(data: Any) -> _Output:
    """The judge's JSON from a chat-completions response body; :class:`_Malformed` names what is wrong."""
    if not isinstance(data, dict):
        raise _Malformed("response body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _Malformed("response has no choices")
    finish = choices[0].get("finish_reason")
    suffix = f" (finish_reason={finish})" if isinstance(finish, str) and finish != "stop" else ""
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or not content.strip():
        raise _Malformed(f"response has no message content{suffix}")
    try:
        obj = orjson.loads(_unfenced(content))
    except orjson.JSONDecodeError:
        raise _Malformed(f"message content is not JSON{suffix}") from None
    if not isinstance(obj, dict):
        raise _Malformed(f"message content is a JSON {type(obj).__name__}, not an object")
    return _validate(obj)


def _validate(obj: dict[str, Any]) -> _Output:
    raw_claims = obj.get("claims")
    if not isinstance(raw_claims, list):
        raise _Malformed("judge output lacks a 'claims' list")
    claims = []
    for i, item in enumerate(raw_claims):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("text"), str)
            or not isinstance(item.get("verdict"), str)
        ):
            raise _Malformed(f"judge output claims[{i}] lacks a string 'text' or 'verdict'")
        claims.append(
            _Claim(
                text=item["text"],
                verdict=item["verdict"].strip().upper(),
                chunk_id=_optional_str(item.get("chunk_id")),
                quote=item.get("quote") if isinstance(item.get("quote"), str) else None,
            )
        )
    raw_chunks = obj.get("chunks")
    if not isinstance(raw_chunks, list):
        raise _Malformed("judge output lacks a 'chunks' list")
    chunks = []
    for i, item in enumerate(raw_chunks):
        chunk_id = _optional_str(item.get("id")) if isinstance(item, dict) else None
        relevance = _number(item.get("relevance")) if isinstance(item, dict) else None
        if chunk_id is None or relevance is None:
            raise _Malformed(f"judge output chunks[{i}] lacks an 'id' or a numeric 'relevance'")
        chunks.append((chunk_id, relevance))
    answer_relevance = _number(obj.get("answer_relevance"))
    if answer_relevance is None:
        raise _Malformed("judge output lacks a numeric 'answer_relevance'")
    return _Output(tuple(claims), tuple(chunks), answer_relevance)


def _usage(data: Any) -> tuple[int, int, bool]:
    """(input tokens, output tokens, reported?) from the response's ``usage``; OpenAI and Responses-style
    names both occur behind gateways."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return 0, 0, False

    def count(*names: str) -> int:
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return 0

    return count("prompt_tokens", "input_tokens"), count("completion_tokens", "output_tokens"), True


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def _check_quote(claim: dict[str, Any], texts: dict[str, list[str]], chunks: list[SampleChunk]) -> None:
    """Keep a SUPPORTED verdict only if its quote is really in the context (fixing a wrong chunk id)."""
    quote = _normalise(claim["quote"]) if claim["quote"] else ""
    if not quote:
        claim["verdict"] = UNSUPPORTED
        claim["downgraded"] = NO_QUOTE
        return
    named = claim["chunk_id"]
    if named in texts and any(_quote_in(quote, text) for text in texts[named]):
        return
    for chunk in chunks:  # rank order: the best-ranked chunk holding the quote gets the credit
        if chunk.text and _quote_in(quote, _normalise(chunk.text)):
            claim["chunk_id"] = chunk.id
            claim["chunk_id_given"] = named
            return
    claim["verdict"] = UNSUPPORTED
    claim["downgraded"] = QUOTE_NOT_FOUND
