"""Raw bytes from a retriever are decoded only as far as the chunk limit (issue 29, item 10).

A retriever that hands back 10 MB of invalid UTF-8 used to cost the request thread (with tracing) a decode
of all of it, a 10-million-character text, its content hash and its redaction. Now at most 4 bytes per
character of ``max_chunk_chars`` are decoded and that many characters kept.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.capture.chunks import content_id, normalize_chunks
from tests.conftest import Spans

HUGE = b"\xff" * 10_000_000  # every byte invalid: each decodes to one replacement character


def test_bytes_are_cut_before_decoding_and_ids_follow_the_kept_text() -> None:
    [huge, plain] = normalize_chunks([HUGE, "plain text"], max_chars=4000)
    assert huge.text == "\ufffd" * 4000
    assert huge.id == content_id(huge.text)
    assert plain.text == "plain text" and plain.id == content_id("plain text")  # str is never cut here
    euro = ("€" * 5000).encode()  # 3 bytes a character: the cut lands inside one
    assert normalize_chunks(euro, max_chars=1000)[0].text == "€" * 1000
    assert normalize_chunks(bytearray(b"short"), max_chars=1000)[0].text == "short"
    assert normalize_chunks([{"text": "x" * 5000}], max_chars=10)[0].text == "x" * 5000
    assert len(normalize_chunks([HUGE[:100_000]])[0].text) == 100_000  # no limit given: all of it, as before


def test_a_traced_retrieval_of_10_mb_of_invalid_bytes_decodes_only_the_chunk_limit(
    registry: CollectorRegistry, provider: TracerProvider, spans: Spans
) -> None:
    rw = ragwatch.RagWatch(
        "svc", registry=registry, tracer_provider=provider, capture_chunk_text=True, max_chunk_chars=4000
    )

    @rw.retriever
    def retrieve(question: str) -> list[Any]:
        return [HUGE]

    assert retrieve("q") == [HUGE]  # the host's result, untouched
    span = spans.named("retrieval")
    [text] = span.attributes["ragwatch.retrieval.chunk_texts"]  # type: ignore[index, misc]
    assert text == "\ufffd" * 4000
    assert span.attributes["ragwatch.retrieval.chunk_ids"] == (content_id("\ufffd" * 4000),)  # type: ignore[index]
    rw.close(0)
