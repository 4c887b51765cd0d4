"""Normalisation of retriever results into Chunks, against local stand-ins for the real libraries' objects."""

from __future__ import annotations

import hashlib
import math
import numbers
import uuid
from collections.abc import Iterator, Mapping
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest

from ragwatch.capture.chunks import Chunk, content_id, normalize_chunk, normalize_chunks
from ragwatch.errors import CaptureError, ChunkError
from tests.servers import require_package

# ------------------------------------------------------------------------------------------ stand-ins


class Document:
    """Shaped like langchain_core.documents.Document."""

    def __init__(self, page_content: Any, metadata: dict[str, Any] | None = None, id: str | None = None):
        self.page_content = page_content
        self.metadata = metadata if metadata is not None else {}
        self.id = id


class TextNode:
    """Shaped like llama_index.core.schema.TextNode (text behind get_content, id in id_ / node_id)."""

    def __init__(self, text: str, id_: str, metadata: dict[str, Any] | None = None):
        self.text = text
        self.id_ = id_
        self.metadata = metadata if metadata is not None else {}

    @property
    def node_id(self) -> str:
        return self.id_

    def get_content(self) -> str:
        return self.text


class OldNode:
    """A node without get_content: text read from .text, id from node_id."""

    def __init__(self, text: str, node_id: str):
        self.text = text
        self.node_id = node_id


class NodeWithScore:
    """Shaped like llama_index.core.schema.NodeWithScore."""

    def __init__(self, node: Any, score: float | None = None):
        self.node = node
        self.score = score


class Float32:
    """A non-float numeric scalar, like numpy.float32 (registered as numbers.Real by numpy)."""

    def __init__(self, value: float):
        self.value = value

    def __float__(self) -> float:
        return self.value


numbers.Real.register(Float32)  # as numpy does for its scalar types


class Unknown:
    pass


def h(text: str) -> str:
    """The content id spelled out independently of the module under test."""
    return "h:" + hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


# ------------------------------------------------------------------------------------------ content ids


def test_content_id_is_blake2b_8_bytes_with_prefix() -> None:
    assert content_id("hello") == "h:a7b6eda801e5347d"  # pinned: ids must not change between releases
    assert content_id("hello") == h("hello")
    assert content_id("检索") == h("检索")


def test_content_id_is_stable_and_discriminating() -> None:
    assert content_id("same text") == content_id("same text")
    assert content_id("same text") != content_id("same text.")
    assert content_id("a") != content_id("A")
    assert len(content_id("x" * 10_000)) == 2 + 16


def test_content_id_survives_lone_surrogates() -> None:
    assert content_id("bad \udcff byte").startswith("h:")


# ------------------------------------------------------------------------------------------ single items

META = {"source": "kb/faq.md", "page": 3}

CASES: list[tuple[str, Any, tuple[str, str, float | None, Mapping[str, Any]]]] = [
    ("str", "plain passage", (h("plain passage"), "plain passage", None, {})),
    ("bytes", "naïve".encode(), (h("naïve"), "naïve", None, {})),
    ("bytes-invalid-utf8", b"ok \xff", (h("ok \ufffd"), "ok \ufffd", None, {})),
    # mappings: key precedence for text, id, score
    ("dict-text", {"text": "t", "id": "c1", "score": 0.5}, ("c1", "t", 0.5, {})),
    ("dict-content", {"content": "t", "chunk_id": 7}, ("7", "t", None, {})),
    ("dict-page_content", {"page_content": "t", "doc_id": "d", "similarity": 0.25}, ("d", "t", 0.25, {})),
    ("dict-chunk", {"chunk": "t", "_id": "m1", "relevance_score": 1}, ("m1", "t", 1.0, {})),
    ("dict-document-str", {"document": "t", "node_id": "n1"}, ("n1", "t", None, {})),
    ("dict-text-wins", {"text": "a", "content": "b"}, (h("a"), "a", None, {})),
    ("dict-none-text-skipped", {"text": None, "content": "b"}, (h("b"), "b", None, {})),
    ("dict-id-precedence", {"text": "t", "doc_id": "d", "id": "i"}, ("i", "t", None, {})),
    ("dict-empty-id-skipped", {"text": "t", "id": "", "chunk_id": "c"}, ("c", "t", None, {})),
    ("dict-uuid-id", {"text": "t", "id": uuid.UUID(int=1)}, (str(uuid.UUID(int=1)), "t", None, {})),
    ("dict-score-precedence", {"text": "t", "score": 0.9, "similarity": 0.1}, (h("t"), "t", 0.9, {})),
    ("dict-distance-ignored", {"text": "t", "distance": 0.1}, (h("t"), "t", None, {})),
    ("dict-metadata", {"text": "t", "metadata": META}, (h("t"), "t", None, META)),
    ("dict-metadata-id", {"text": "t", "metadata": {"doc_id": 42}}, ("42", "t", None, {"doc_id": 42})),
    (
        "dict-top-id-beats-metadata",
        {"text": "t", "id": "top", "metadata": {"id": "m"}},
        ("top", "t", None, {"id": "m"}),
    ),
    ("dict-metadata-not-mapping", {"text": "t", "metadata": ["x"]}, (h("t"), "t", None, {})),
    ("mappingproxy", MappingProxyType({"text": "t", "id": "p"}), ("p", "t", None, {})),
    # scores: bool is not a score, NaN and inf are dropped, numpy-like scalars accepted
    ("score-bool", {"text": "t", "score": True}, (h("t"), "t", None, {})),
    ("score-nan", {"text": "t", "score": math.nan}, (h("t"), "t", None, {})),
    ("score-inf", {"text": "t", "score": math.inf}, (h("t"), "t", None, {})),
    ("score-str", {"text": "t", "score": "0.9"}, (h("t"), "t", None, {})),
    ("score-float32", {"text": "t", "score": Float32(0.5)}, (h("t"), "t", 0.5, {})),
    # LangChain Document
    ("document", Document("d text", META, id="doc-1"), ("doc-1", "d text", None, META)),
    ("document-metadata-id", Document("d", {"chunk_id": "c9"}), ("c9", "d", None, {"chunk_id": "c9"})),
    ("document-empty-id", Document("d", {}, id=""), (h("d"), "d", None, {})),
    # LlamaIndex
    ("node-with-score", NodeWithScore(TextNode("n text", "node-1", META), 0.75), ("node-1", "n text", 0.75, META)),
    ("node-with-nan-score", NodeWithScore(TextNode("n", "node-2"), math.nan), ("node-2", "n", None, {})),
    ("node-with-old-node", NodeWithScore(OldNode("o", "old-1"), 2), ("old-1", "o", 2.0, {})),
    ("text-node", TextNode("n", "node-3", META), ("node-3", "n", None, META)),
    ("old-node", OldNode("o", "old-2"), ("old-2", "o", None, {})),
    # generic objects
    ("obj-text", SimpleNamespace(text="g", id="g1", score=0.5, metadata=META), ("g1", "g", 0.5, META)),
    ("obj-content", SimpleNamespace(content="g", id=5), ("5", "g", None, {})),
    ("obj-no-id", SimpleNamespace(text="g"), (h("g"), "g", None, {})),
    ("obj-int-score", SimpleNamespace(text="g", score=3), (h("g"), "g", 3.0, {})),
    # (doc, score) pairs from similarity_search_with_score
    ("pair-document", (Document("p", {"id": "m"}), 0.12), ("m", "p", 0.12, {"id": "m"})),
    ("pair-int-score", ("p", 1), (h("p"), "p", 1.0, {})),
    ("pair-float32-score", ("p", Float32(0.25)), (h("p"), "p", 0.25, {})),
    ("pair-overrides-dict-score", ({"text": "p", "score": 0.9}, 0.1), (h("p"), "p", 0.1, {})),
    ("pair-nan-score", ("p", math.nan), (h("p"), "p", None, {})),
]


@pytest.mark.parametrize(("item", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_normalize_chunk_shapes(item: Any, expected: tuple[str, str, float | None, Mapping[str, Any]]) -> None:
    chunk = normalize_chunk(item, 4)
    assert (chunk.id, chunk.text, chunk.rank, chunk.score, dict(chunk.metadata)) == (
        expected[0],
        expected[1],
        4,
        expected[2],
        dict(expected[3]),
    )
    assert type(chunk.text) is str
    assert chunk.score is None or type(chunk.score) is float


def test_metadata_is_shared_not_copied() -> None:
    meta = {"source": "a"}
    assert normalize_chunk({"text": "t", "metadata": meta}, 1).metadata is meta
    # chunks without metadata share one read-only empty mapping instead of allocating one each
    a, b = normalize_chunk("x", 1), normalize_chunk({"text": "y"}, 2)
    assert a.metadata is b.metadata
    with pytest.raises(TypeError):
        a.metadata["k"] = "v"  # type: ignore[index]


def test_chunk_is_immutable_and_slotted() -> None:
    chunk = normalize_chunk("x", 1)
    with pytest.raises(AttributeError):
        chunk.text = "y"  # type: ignore[misc]
    assert not hasattr(chunk, "__dict__")
    assert chunk == Chunk(h("x"), "x", 1, None, {})


BAD: list[tuple[str, Any, str]] = [
    ("int", 42, "type int"),
    ("none", None, "type NoneType"),
    ("float", 0.5, "type float"),
    ("list", ["a", "b"], "type list"),
    ("unknown-object", Unknown(), "Unknown"),
    ("dict-without-text", {"id": "x", "score": 1.0}, "no text"),
    ("dict-non-str-text", {"text": 123}, "text is int"),
    ("dict-document-not-str", {"document": {"text": "nested"}}, "no text"),
    ("document-non-str", Document(b"bytes"), "page_content is bytes"),
    ("obj-non-str-text", SimpleNamespace(text=["a"]), "text is list"),
    ("node-non-str", NodeWithScore(SimpleNamespace(text=None, node_id="n")), "node text is NoneType"),
    ("pair-bool-score", ("p", True), "type tuple"),
    ("pair-str-score", ("p", "0.5"), "type tuple"),
    ("triple", ("p", 0.5, "x"), "type tuple"),
]


@pytest.mark.parametrize(("item", "fragment"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_unreadable_items_raise_chunk_error(item: Any, fragment: str) -> None:
    with pytest.raises(ChunkError) as info:
        normalize_chunk(item, 3)
    message = str(info.value)
    assert fragment in message
    assert "#3" in message
    assert isinstance(info.value, CaptureError)
    assert isinstance(info.value, TypeError)


def test_error_message_never_contains_the_content() -> None:
    with pytest.raises(ChunkError) as info:
        normalize_chunk({"text": 99, "content": "SECRET PASSAGE"}, 1)
    assert "SECRET" not in str(info.value)
    with pytest.raises(ChunkError) as info:
        normalize_chunk(("SECRET", "score"), 1)
    assert "SECRET" not in str(info.value)


# ------------------------------------------------------------------------------------------ whole results


def ids_ranks(chunks: list[Chunk]) -> list[tuple[str, int]]:
    return [(c.id, c.rank) for c in chunks]


def test_none_is_empty() -> None:
    assert normalize_chunks(None) == []
    assert normalize_chunks([]) == []


def test_list_keeps_order_as_ranks() -> None:
    result = [{"text": "c", "id": "3", "score": 0.1}, {"text": "a", "id": "1", "score": 0.9}, "b"]
    chunks = normalize_chunks(result)
    assert ids_ranks(chunks) == [("3", 1), ("1", 2), (h("b"), 3)]  # not re-sorted by score
    assert [c.score for c in chunks] == [0.1, 0.9, None]


@pytest.mark.parametrize(
    "single",
    [
        "one passage",
        b"one passage",
        {"text": "one passage"},
        Document("one passage"),
        NodeWithScore(TextNode("one passage", "n")),
        TextNode("one passage", "n"),
        SimpleNamespace(content="one passage"),
    ],
    ids=["str", "bytes", "dict", "document", "node-with-score", "text-node", "object"],
)
def test_single_chunk_like_values_are_one_chunk(single: Any) -> None:
    chunks = normalize_chunks(single)
    assert len(chunks) == 1
    assert chunks[0].text == "one passage"
    assert chunks[0].rank == 1


@pytest.mark.parametrize("key", ["documents", "chunks", "nodes", "results"])
def test_mapping_wrapping_a_list(key: str) -> None:
    chunks = normalize_chunks({key: [{"text": "x", "id": "a"}, {"text": "y", "id": "b"}], "total": 2})
    assert ids_ranks(chunks) == [("a", 1), ("b", 2)]


def test_mapping_wrapping_a_tuple() -> None:
    assert ids_ranks(normalize_chunks({"results": ("x", "y")})) == [(h("x"), 1), (h("y"), 2)]


def test_generator_and_tuple_results() -> None:
    def gen() -> Iterator[str]:
        yield "first"
        yield "second"

    assert ids_ranks(normalize_chunks(gen())) == [(h("first"), 1), (h("second"), 2)]
    assert ids_ranks(normalize_chunks(("first", "second"))) == [(h("first"), 1), (h("second"), 2)]


def test_similarity_search_with_score_result() -> None:
    result = [(Document("alpha", {"id": "a"}), 0.31), (Document("beta", {"id": "b"}), 0.47)]
    chunks = normalize_chunks(result)
    assert [(c.id, c.text, c.rank, c.score) for c in chunks] == [("a", "alpha", 1, 0.31), ("b", "beta", 2, 0.47)]


def test_top_level_pair_is_a_list_of_two_items() -> None:
    # ambiguous by design: a bare (doc, number) at top level is two items, and the number is not a chunk
    with pytest.raises(ChunkError, match="#2 of type float"):
        normalize_chunks((Document("d"), 0.5))


def test_one_bad_item_fails_the_result_with_its_rank() -> None:
    with pytest.raises(ChunkError, match="#2 of type int"):
        normalize_chunks(["ok", 7, "ok"])


def test_non_iterable_result_raises() -> None:
    with pytest.raises(ChunkError, match="type int"):
        normalize_chunks(12)
    with pytest.raises(ChunkError, match="no text"):
        normalize_chunks({"answer": "not a chunk"})


@pytest.mark.parametrize(
    ("metadata", "score"),
    [({"score": 0.8}, 0.8), ({"relevance_score": 0.3}, 0.3), ({"similarity": 1}, 1.0), ({"source": "x"}, None)],
)
def test_langchain_document_score_lives_in_its_metadata(metadata: dict[str, Any], score: float | None) -> None:
    """A LangChain Document has no score field: vector stores and rerankers (Cohere's ``relevance_score``)
    write it into the metadata, and chunk_scores and the degraded score floor need it."""
    langchain = require_package("langchain_core.documents")
    for doc in (Document("t", metadata), langchain.Document("t", metadata=metadata)):
        assert normalize_chunk(doc, 1).score == score
    # the same as JSON (a serialised Document)
    assert normalize_chunk({"page_content": "t", "metadata": metadata}, 1).score == score
    # a score beside the text wins over one in the metadata
    assert normalize_chunk({"text": "t", "score": 0.5, "metadata": metadata}, 1).score == 0.5
