"""OpenTelemetry attribute names ragwatch puts on spans.

GenAI names follow the OpenTelemetry GenAI semantic conventions (development status); names under
``ragwatch.`` are ours, for facts the conventions do not cover yet. Kept in one module so a convention
rename is a one-line change.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ragwatch.capture.chunks import Chunk

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
USAGE_INPUT = "gen_ai.usage.input_tokens"
USAGE_OUTPUT = "gen_ai.usage.output_tokens"
USAGE_CACHED = "gen_ai.usage.cache_read.input_tokens"
RETRIEVAL_TOP_K = "gen_ai.retrieval.top_k"
RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
ERROR_TYPE = "error.type"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"

OP_CHAT = "chat"
OP_RETRIEVAL = "retrieval"
OP_WORKFLOW = "invoke_workflow"
OP_EMBEDDINGS = "embeddings"
OP_TOOL = "execute_tool"
#: not (yet) a GenAI operation name: OpenInference calls the span kind RERANKER
OP_RERANK = "rerank"

SERVICE = "ragwatch.service"
USAGE_ESTIMATED = "ragwatch.usage.estimated"
COST = "ragwatch.cost_usd"
TTFT = "ragwatch.time_to_first_token"
RETRIEVAL_COUNT = "ragwatch.retrieval.chunk_count"
RETRIEVAL_IDS = "ragwatch.retrieval.chunk_ids"
RETRIEVAL_SCORES = "ragwatch.retrieval.chunk_scores"
RETRIEVAL_TEXTS = "ragwatch.retrieval.chunk_texts"
RERANK_INPUT_COUNT = "ragwatch.rerank.input_count"
RERANK_OUTPUT_COUNT = "ragwatch.rerank.output_count"
RERANK_INPUT_IDS = "ragwatch.rerank.input_chunk_ids"
TOOL_ARGUMENTS_SIZE = "ragwatch.tool.arguments_size"
PROBE = "ragwatch.capture.probe"


def documents_json(chunks: Sequence[Chunk], ids: Sequence[str] | None = None) -> str:
    """``gen_ai.retrieval.documents``: a JSON array of ``{"id", "score"}`` objects (never the text).

    ``ids`` replaces the chunks' own ids (the redacted ones, when the caller redacts them)."""
    names = [c.id for c in chunks] if ids is None else ids
    return json.dumps(
        [
            {"id": i, "score": c.score} if c.score is not None else {"id": i}
            for c, i in zip(chunks, names, strict=False)
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )
