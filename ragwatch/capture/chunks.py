"""Turn whatever a retriever returned into a flat, ordered list of :class:`Chunk`.

Retrievers in the wild return plain strings, dicts of many dialects, LangChain ``Document`` objects,
LlamaIndex nodes, ``(document, score)`` pairs... Everything downstream of capture (metrics, traces, drift
checks) wants one shape, so the translation happens here, once, by duck typing: ragwatch must not import
LangChain or LlamaIndex just to recognise their objects.

This runs on the host's request path for every retrieval, so the rules are plain attribute and key probes
with early returns; nothing is copied (metadata mappings are shared with the caller, not cloned).
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from ragwatch.errors import ChunkError

__all__ = ["Chunk", "content_id", "normalize_chunk", "normalize_chunks"]

# One shared read-only empty mapping: most chunks carry no metadata, and a fresh ``{}`` per chunk would be
# pure allocation churn on the hot path (and a mutable default someone could write into).
_EMPTY_METADATA: Mapping[str, Any] = MappingProxyType({})

_MISSING: Any = object()

# Key order is precedence order: the first key present (and not None) wins.
_TEXT_KEYS = ("text", "content", "page_content", "chunk")
_ID_KEYS = ("id", "chunk_id", "doc_id", "_id", "node_id")
_METADATA_ID_KEYS = ("id", "chunk_id", "doc_id")
# ``distance`` is deliberately absent: lower means closer, so reading it as a score would invert rankings.
_SCORE_KEYS = ("score", "similarity", "relevance_score")
_LIST_KEYS = ("documents", "chunks", "nodes", "results")


class Chunk(NamedTuple):
    """One retrieved passage, as every later stage of ragwatch sees it.

    ``rank`` is 1-based and follows the retriever's own order, because rank-sensitive metrics (hit@k, MRR)
    need the order the LLM actually saw, not one re-sorted by score. ``score`` is whatever relevance number
    the retriever reported (its scale and direction depend on the store); ``None`` when it gave none.
    ``metadata`` is the caller's own mapping, not a copy: treat it as read-only. A named tuple because
    building one per retrieved item is on the request path when spans record, and a tuple is the cheapest
    immutable record Python has.
    """

    id: str
    text: str
    rank: int
    score: float | None
    metadata: Mapping[str, Any]


def content_id(text: str) -> str:
    """Derive an id from the text for chunks the retriever did not label.

    It must be stable across processes and restarts (so the same passage is recognised in different
    requests and on different workers), which rules out ``hash()``; 8 bytes of BLAKE2b is cheap and wide
    enough that collisions among one service's passages are not a practical concern. The ``h:`` prefix keeps
    derived ids from ever being mistaken for a retriever's own.
    """
    # surrogatepass: text decoded with surrogateescape must still get an id instead of crashing capture.
    return "h:" + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


#: UTF-8 spends at most this many bytes on one character: the bytes a ``max_chars`` chunk can need.
_MAX_UTF8_BYTES = 4


def normalize_chunk(item: Any, rank: int, max_chars: int | None = None) -> Chunk:
    """Read one retrieved item; ``rank`` is its 1-based position in the retriever's result.

    ``max_chars`` (the ``max_chunk_chars`` setting) bounds the text of a chunk given as raw bytes: at most
    4 × ``max_chars`` bytes are decoded and ``max_chars`` characters kept, so a retriever returning
    megabytes of undecodable bytes costs the request thread a bounded amount of work (its derived id is
    that of the kept text). ``None``: no bound. Text given as ``str`` is never cut here.

    Raises :class:`~ragwatch.errors.ChunkError` for shapes it cannot read. The message names the item's type
    and position but never its content, because retrieved text may be private and errors end up in logs.
    """
    if type(item) is dict and "metadata" not in item:  # the vector-store common case: {"id", "text", "score"}
        text = item.get("text")
        chunk_id = item.get("id")
        score = item.get("score")
        if type(text) is str and type(chunk_id) is str and chunk_id and (score is None or type(score) is float):
            finite = score if score is None or math.isfinite(score) else None
            return Chunk(chunk_id, text, rank, finite, _EMPTY_METADATA)
    chunk_id, text, score, metadata = _read(item, rank, max_chars)
    return Chunk(chunk_id, text, rank, score, metadata)


def normalize_chunks(result: Any, max_chars: int | None = None) -> list[Chunk]:
    """Read a whole retriever result, keeping the retriever's order as ranks 1..n (``max_chars``: see
    :func:`normalize_chunk`).

    A top-level list or tuple is always a list of items, even one that happens to look like a
    ``(document, score)`` pair: guessing there would make the meaning of a result depend on its length.
    """
    if result is None:
        return []
    if isinstance(result, (list, tuple)):
        return [normalize_chunk(item, rank, max_chars) for rank, item in enumerate(result, 1)]
    if isinstance(result, (str, bytes, bytearray)):
        return [normalize_chunk(result, 1, max_chars)]
    if isinstance(result, Mapping):
        for key in _LIST_KEYS:
            items = result.get(key)
            if isinstance(items, (list, tuple)):
                return [normalize_chunk(item, rank, max_chars) for rank, item in enumerate(items, 1)]
        return [normalize_chunk(result, 1, max_chars)]
    if _looks_like_chunk_object(result):
        return [normalize_chunk(result, 1, max_chars)]
    if isinstance(result, Iterable):
        return [normalize_chunk(item, rank, max_chars) for rank, item in enumerate(result, 1)]
    raise ChunkError(f"cannot read a retriever result of type {_type_name(result)}")


# --------------------------------------------------------------------------------------------- internals


def _read(item: Any, rank: int, max_chars: int | None = None) -> tuple[str, str, float | None, Mapping[str, Any]]:
    """Return ``(id, text, score, metadata)`` so the public functions build exactly one Chunk per item."""
    if isinstance(item, str):
        return content_id(item), item, None, _EMPTY_METADATA
    if type(item) is dict or isinstance(item, Mapping):  # exact-dict test first: ~6x cheaper than the ABC
        return _read_mapping(item, rank)
    if isinstance(item, tuple):
        if len(item) == 2 and _is_number(item[1]) and not isinstance(item[0], tuple):
            chunk_id, text, _, metadata = _read(item[0], rank, max_chars)
            return chunk_id, text, _score(item[1]), metadata
        raise _unreadable(item, rank)
    if isinstance(item, (bytes, bytearray)):
        text = _decode(item, max_chars)
        return content_id(text), text, None, _EMPTY_METADATA
    return _read_object(item, rank)


def _decode(raw: bytes | bytearray, max_chars: int | None) -> str:
    """Bytes as text, invalid sequences replaced; with ``max_chars``, only the bytes that many characters can
    take are decoded (a slice copies just those), so the cost does not grow with what the retriever sent."""
    if max_chars is None:
        return bytes(raw).decode("utf-8", "replace")
    return bytes(raw[: _MAX_UTF8_BYTES * max_chars]).decode("utf-8", "replace")[:max_chars]


def _read_mapping(item: Mapping[str, Any], rank: int) -> tuple[str, str, float | None, Mapping[str, Any]]:
    text: Any = None
    for key in _TEXT_KEYS:
        text = item.get(key)
        if text is not None:
            break
    else:
        # ``document`` only counts as text when it is a string: elsewhere (e.g. rerank APIs) it is a nested
        # object, and ``str()`` of that would silently monitor a repr instead of the passage.
        text = item.get("document")
        if not isinstance(text, str):
            raise _unreadable(item, rank, "it has no text, content, page_content, chunk or document key")
    if not isinstance(text, str):
        raise _unreadable(item, rank, f"its text is {_type_name(text)}, not str")

    metadata = _as_metadata(item.get("metadata"))
    chunk_id = _first_id(item, _ID_KEYS) or _first_id(metadata, _METADATA_ID_KEYS) or content_id(text)

    score: float | None = None
    for key in _SCORE_KEYS:
        value = item.get(key)
        if value is not None:
            score = _score(value)
            break
    else:
        if metadata:  # a serialised LangChain Document: {"page_content", "metadata": {"score": ...}}
            score = _metadata_score(metadata)
    return chunk_id, text, score, metadata


def _metadata_score(metadata: Mapping[str, Any]) -> float | None:
    """A score kept in the metadata, where LangChain puts it: a ``Document`` has no score field, so vector
    stores' relevance-score wrappers and rerankers (Cohere's ``relevance_score``) write it there."""
    for key in _SCORE_KEYS:
        value = metadata.get(key)
        if value is not None:
            return _score(value)
    return None


def _read_object(item: Any, rank: int) -> tuple[str, str, float | None, Mapping[str, Any]]:
    # LangChain Document: page_content + metadata, optional id (newer versions) else an id in the metadata.
    page_content = getattr(item, "page_content", _MISSING)
    if page_content is not _MISSING:
        if not isinstance(page_content, str):
            raise _unreadable(item, rank, f"its page_content is {_type_name(page_content)}, not str")
        metadata = _as_metadata(getattr(item, "metadata", None))
        chunk_id = (
            _str_id(getattr(item, "id", None)) or _first_id(metadata, _METADATA_ID_KEYS) or content_id(page_content)
        )
        # Vector stores and rerankers put the score in the metadata (``similarity_search_with_relevance_scores``
        # wrappers, Cohere's ``relevance_score``); a Document has no score field of its own.
        return chunk_id, page_content, _metadata_score(metadata) if metadata else None, metadata

    # LlamaIndex NodeWithScore: the score lives on the wrapper, everything else on the wrapped node.
    node = getattr(item, "node", None)
    if node is not None:
        chunk_id, node_text, _, metadata = _read_node(node, item, rank)
        return chunk_id, node_text, _score(getattr(item, "score", None)), metadata

    # LlamaIndex TextNode (and other BaseNode subclasses) handed over directly.
    if getattr(item, "node_id", None) is not None or getattr(item, "id_", None) is not None:
        return _read_node(item, item, rank)

    # Anything else with a string .text / .content (Haystack-style documents, home-grown classes).
    text = getattr(item, "text", None)
    if text is None:
        text = getattr(item, "content", None)
        if text is None:
            raise _unreadable(item, rank)
    if not isinstance(text, str):
        raise _unreadable(item, rank, f"its text is {_type_name(text)}, not str")
    metadata = _as_metadata(getattr(item, "metadata", None))
    chunk_id = _str_id(getattr(item, "id", None)) or _first_id(metadata, _METADATA_ID_KEYS) or content_id(text)
    return chunk_id, text, _score(getattr(item, "score", None)), metadata


def _read_node(node: Any, item: Any, rank: int) -> tuple[str, str, float | None, Mapping[str, Any]]:
    """Read a LlamaIndex-style node; ``item`` is what the caller passed, for error messages only."""
    # get_content() first: newer node classes keep their text behind it rather than in a .text field.
    get_content = getattr(node, "get_content", None)
    text = get_content() if callable(get_content) else getattr(node, "text", None)
    if not isinstance(text, str):
        raise _unreadable(item, rank, f"its node text is {_type_name(text)}, not str")
    metadata = _as_metadata(getattr(node, "metadata", None))
    chunk_id = (
        _str_id(getattr(node, "node_id", None))
        or _str_id(getattr(node, "id_", None))
        or _first_id(metadata, _METADATA_ID_KEYS)
        or content_id(text)
    )
    return chunk_id, text, None, metadata


def _looks_like_chunk_object(obj: Any) -> bool:
    """Tell a single document-like object from a container of them, for ``normalize_chunks``."""
    return (
        getattr(obj, "page_content", None) is not None
        or getattr(obj, "node", None) is not None
        or isinstance(getattr(obj, "text", None), str)
        or isinstance(getattr(obj, "content", None), str)
        or callable(getattr(obj, "get_content", None))
    )


def _as_metadata(value: Any) -> Mapping[str, Any]:
    if value is None:  # the common case, and isinstance against the Mapping ABC is slow
        return _EMPTY_METADATA
    return value if isinstance(value, Mapping) and value else _EMPTY_METADATA


def _first_id(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        found = _str_id(mapping.get(key))
        if found:
            return found
    return None


def _str_id(value: Any) -> str | None:
    """Ids arrive as str, int or UUID; empty ones mean "no id" so the content id takes over."""
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, bool):  # a flag, not an identifier
        return None
    return str(value) or None


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    # numbers.Real admits numpy scalars: FAISS & co. hand back numpy.float32, which is not a float subclass.
    # isinstance tries the tuple in order, so plain floats and ints never reach the slower ABC check.
    return isinstance(value, (float, int, numbers.Real))


def _score(value: Any) -> float | None:
    """Scores feed averages and histograms, where one NaN or inf would poison the aggregate, so drop them."""
    if value is None:
        return None
    if type(value) is float:
        return value if math.isfinite(value) else None
    if not _is_number(value):
        return None
    try:
        result = float(value)
    except (OverflowError, TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def _type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _unreadable(item: Any, rank: int, why: str = "") -> ChunkError:
    message = f"cannot read retrieved item #{rank} of type {_type_name(item)} as a chunk"
    return ChunkError(f"{message}: {why}" if why else message)
