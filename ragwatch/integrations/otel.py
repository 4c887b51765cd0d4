"""Runs from spans other instrumentations already emit: add one span processor, get scoring and degraded mode.

    provider.add_span_processor(RagwatchSpanProcessor(rw))

A team that already traces its RAG service with OpenTelemetry has the facts ragwatch needs on its spans:
which documents a retriever returned, what the model answered, how many tokens it billed. This processor
reads them as each span ends, in the three dialects in use:

- **OpenTelemetry GenAI semantic conventions** — ``gen_ai.operation.name`` (``chat``, ``text_completion``,
  ``generate_content``, ``retrieval``), ``gen_ai.usage.*``, ``gen_ai.response.model``,
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (when content capture is on),
  ``gen_ai.retrieval.documents`` (e.g. ``opentelemetry-instrumentation-openai-v2``);
- **OpenInference** (Arize Phoenix) — ``openinference.span.kind`` ``LLM`` / ``RETRIEVER`` / ``RERANKER``,
  ``llm.token_count.*``, ``llm.model_name``, ``llm.output_messages.*``, ``retrieval.documents.*``,
  ``input.value`` / ``output.value``;
- **OpenLLMetry** (Traceloop) — ``llm.request.type``, ``gen_ai.usage.prompt_tokens`` & co.,
  ``gen_ai.prompt.*`` / ``gen_ai.completion.*``, vector-store spans with ``db.query.result`` events.

Each LLM and retrieval span is recorded as a stage when it ends (latency, chunks, tokens, cost); the spans
of one trace are gathered into one :class:`~ragwatch.capture.run.Run`, which ends — and is offered to the sampler —
when the trace's local root span ends. The run carries the root's trace and span ids, so the scores'
evaluation events land on that trace. ragwatch's own spans are skipped (they are recorded already), and an
LLM or retrieval span wrapping another of its kind (a framework span around the SDK's) counts once.

What spans cannot tell: time to first token (no convention has it on the span), and the answer and question
text unless the instrumentation captures content. Fail open: any error is counted in
``ragwatch_internal_errors_total`` and the span goes on to the other processors untouched. At most
``max_traces`` traces are kept open; past that the oldest is dropped, counted the same way.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode

from ragwatch.capture.record import record_generation, record_request, record_retrieval, start_background
from ragwatch.capture.responses import Usage
from ragwatch.capture.run import Run

if TYPE_CHECKING:
    from ragwatch.capture.watch import RagWatch

__all__ = ["RagwatchSpanProcessor"]

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_TRACELOOP_LLM = frozenset({"chat", "completion"})
_OWN_SCOPE = "ragwatch"


class SpanError(Exception):
    """Stands for the error a span recorded, so the stage records count it as an error outcome."""


class _Trace:
    """What the ended spans of one open trace contributed so far."""

    __slots__ = ("llm_parents", "query", "retrieval_parents", "run")

    def __init__(self, service: str) -> None:
        self.run = Run(service)
        self.query: str | None = None
        self.llm_parents: set[int] = set()
        self.retrieval_parents: set[int] = set()


class RagwatchSpanProcessor(SpanProcessor):
    """Builds ragwatch runs from GenAI, OpenInference and OpenLLMetry spans; see the module docstring."""

    def __init__(self, rw: RagWatch, *, max_traces: int = 4096) -> None:
        self.rw = rw
        self.max_traces = max_traces
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        self._lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        try:
            self._on_end(span)
        except Exception as exc:
            self.rw.guard.failed("capture", exc)

    def shutdown(self) -> None:
        with self._lock:
            self._traces.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    # -- internals ------------------------------------------------------------------------------------
    def _on_end(self, span: ReadableSpan) -> None:
        scope = span.instrumentation_scope
        if scope is not None and scope.name == _OWN_SCOPE:
            return
        context = span.context
        if context is None:
            return
        # One copy into a plain dict: the SDK's attribute mapping answers a missing key with a raised
        # KeyError, and the dialect probes below mostly miss.
        attrs = dict(span.attributes) if span.attributes else {}
        kind = _kind(attrs)
        trace_id = context.trace_id
        parent = span.parent
        is_root = parent is None or parent.is_remote
        if kind is not None:
            pending = self._pending(trace_id)
            if pending is not None:
                self._record(kind, span, attrs, pending, parent.span_id if parent is not None else None)
        if is_root:
            with self._lock:
                pending = self._traces.pop(trace_id, None)
            if pending is not None:
                self._finish(span, attrs, pending)

    def _pending(self, trace_id: int) -> _Trace | None:
        with self._lock:
            pending = self._traces.get(trace_id)
            created = pending is None
            if pending is None:
                pending = self._traces[trace_id] = _Trace(self.rw.service)
                dropped = self._traces.popitem(last=False) if len(self._traces) > self.max_traces else None
            else:
                dropped = None
        if created:  # a new run, as open_run would make: the scorer and mode watcher must be running
            start_background(self.rw)
        if dropped is not None:
            self.rw.guard.failed("capture", message="span processor: too many open traces, dropped the oldest")
        return pending

    def _record(
        self, kind: str, span: ReadableSpan, attrs: Mapping[str, Any], pending: _Trace, parent: int | None
    ) -> None:
        span_id = span.context.span_id
        elapsed = _seconds(span)
        exc = _error(span, attrs)
        run = pending.run
        if kind == "llm":
            if span_id in pending.llm_parents:  # wraps an LLM span already recorded (framework around SDK)
                if parent is not None:
                    pending.llm_parents.add(parent)
                return
            if parent is not None:
                pending.llm_parents.add(parent)
            text, prompt = _llm_text(attrs)
            if run.question is None and prompt is not None and pending.query is None:
                run.question = prompt
            read = _Read(text, _usage(attrs), _first_str(attrs, _RESPONSE_MODEL_KEYS)) if exc is None else None
            model = _first_str(attrs, _REQUEST_MODEL_KEYS)
            record_generation(self.rw, run, elapsed, None, exc, model, prompt, read)  # type: ignore[arg-type]
        else:
            if span_id in pending.retrieval_parents:
                if parent is not None:
                    pending.retrieval_parents.add(parent)
                return
            if parent is not None:
                pending.retrieval_parents.add(parent)
            documents = _documents(attrs, span)
            query = _query(attrs)
            if query is not None:
                pending.query = query
                run.question = query
            record_retrieval(self.rw, run, elapsed, documents if exc is None else None, exc)

    def _finish(self, root: ReadableSpan, attrs: Mapping[str, Any], pending: _Trace) -> None:
        run = pending.run
        if run.retrieved is None and run.answer is None and run.model is None:
            return  # a trace without GenAI work (a health check): not a RAG request
        question = _plain_text(attrs.get("input.value"))
        if question is not None:
            run.question = question
        run.trace_id = format(root.context.trace_id, "032x")
        run.span_id = format(root.context.span_id, "016x")
        if root.start_time:
            run.started_at = root.start_time / 1e9
        exc = _error(root, attrs)
        answer = _plain_text(attrs.get("output.value"))
        record_request(self.rw, run, _seconds(root), answer, exc)
        if exc is not None:
            run.error = str(attrs.get("error.type") or run.error)


# -- reading attributes --------------------------------------------------------------------------------

_REQUEST_MODEL_KEYS = ("gen_ai.request.model", "llm.model_name")
_RESPONSE_MODEL_KEYS = ("gen_ai.response.model", "llm.model_name")
_INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "llm.token_count.prompt", "gen_ai.usage.prompt_tokens")
_OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "llm.token_count.completion", "gen_ai.usage.completion_tokens")
_CACHED_TOKEN_KEYS = (
    "gen_ai.usage.cache_read.input_tokens",  # GenAI semantic conventions
    "llm.token_count.prompt_details.cache_read",  # OpenInference
    "gen_ai.usage.cache_read_input_tokens",  # OpenLLMetry
)


def _kind(attrs: Mapping[str, Any]) -> str | None:
    """``"llm"``, ``"retrieval"`` or None (a span ragwatch has no use for)."""
    oi = attrs.get("openinference.span.kind")
    if oi is not None:
        if oi == "LLM":
            return "llm"
        if oi in ("RETRIEVER", "RERANKER"):
            return "retrieval"
        return None
    op = attrs.get("gen_ai.operation.name")
    if op in _LLM_OPERATIONS:
        return "llm"
    if op == "retrieval":
        return "retrieval"
    if attrs.get("llm.request.type") in _TRACELOOP_LLM:
        return "llm"
    if attrs.get("db.system") is not None and attrs.get("db.vector.query.top_k") is not None:
        return "retrieval"  # an OpenLLMetry vector-store query; its results are span events
    return None


def _seconds(span: ReadableSpan) -> float:
    if span.start_time is None or span.end_time is None:
        return 0.0
    return max(0.0, (span.end_time - span.start_time) / 1e9)


def _error(span: ReadableSpan, attrs: Mapping[str, Any]) -> BaseException | None:
    if span.status is not None and span.status.status_code is StatusCode.ERROR:
        return SpanError(str(attrs.get("error.type") or span.status.description or "error"))
    return None


def _first_str(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _first_int(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


class _Read:
    """What an LLM span says, in the shape the generation record reads a finished stream in (``text`` None:
    the span carries no answer text, which is not the same as an empty answer)."""

    __slots__ = ("model", "text", "usage")

    def __init__(self, text: str | None, usage: Usage | None, model: str | None) -> None:
        self.text = text
        self.usage = usage
        self.model = model


def _usage(attrs: Mapping[str, Any]) -> Usage | None:
    """Reported usage; every dialect counts cache reads inside the input tokens, as ragwatch does."""
    inp = _first_int(attrs, _INPUT_TOKEN_KEYS)
    out = _first_int(attrs, _OUTPUT_TOKEN_KEYS)
    if inp is None or out is None:
        return None
    cached = _first_int(attrs, _CACHED_TOKEN_KEYS) or 0
    return Usage(inp, out, min(cached, inp))


def _llm_text(attrs: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(answer, last user message) of an LLM span, in whichever dialect carries them."""
    answer = _semconv_messages(attrs.get("gen_ai.output.messages"), None)
    prompt = _semconv_messages(attrs.get("gen_ai.input.messages"), "user")
    if answer is None:
        answer = _indexed(attrs, "llm.output_messages", "message.content", None)
    if prompt is None:
        prompt = _indexed(attrs, "llm.input_messages", "message.content", "message.role")
    if answer is None:
        answer = _indexed(attrs, "gen_ai.completion", "content", None)
    if prompt is None:
        prompt = _indexed(attrs, "gen_ai.prompt", "content", "role")
    if answer is None:
        answer = _plain_text(attrs.get("output.value"))
    return answer, prompt


def _semconv_messages(value: Any, role: str | None) -> str | None:
    """The text of the last message (of ``role``) in a ``gen_ai.*.messages`` JSON attribute."""
    if not isinstance(value, str):
        return None
    try:
        messages = json.loads(value)
    except ValueError:
        return None
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if not isinstance(message, Mapping) or (role is not None and message.get("role") != role):
            continue
        parts = message.get("parts")
        if isinstance(parts, list):
            texts = [p.get("content") for p in parts if isinstance(p, Mapping) and p.get("type") == "text"]
            text = "".join(t for t in texts if isinstance(t, str))
            if text:
                return text
        content = message.get("content")
        if isinstance(content, str):
            return content
    return None


def _indexed(attrs: Mapping[str, Any], prefix: str, field: str, role_field: str | None) -> str | None:
    """The last ``{prefix}.{i}.{field}`` (with ``{role_field}`` == "user" when given): the flattened
    message lists OpenInference and OpenLLMetry write."""
    found: str | None = None
    i = 0
    while True:
        content = attrs.get(f"{prefix}.{i}.{field}")
        if content is None and f"{prefix}.{i}.{role_field or field}" not in attrs:
            break
        if isinstance(content, str) and (role_field is None or attrs.get(f"{prefix}.{i}.{role_field}") == "user"):
            found = content
        i += 1
    return found


def _plain_text(value: Any) -> str | None:
    """``input.value`` / ``output.value`` when they are text; JSON payloads are not a question or answer."""
    if isinstance(value, str) and value and value[0] not in "{[":
        return value
    return None


def _query(attrs: Mapping[str, Any]) -> str | None:
    query = attrs.get("gen_ai.retrieval.query.text")
    if isinstance(query, str) and query:
        return query
    if attrs.get("openinference.span.kind") == "RETRIEVER":
        return _plain_text(attrs.get("input.value"))
    return None


def _documents(attrs: Mapping[str, Any], span: ReadableSpan) -> list[dict[str, Any]]:
    """The retrieved documents as dicts :func:`~ragwatch.capture.chunks.normalize_chunks` reads, in rank order."""
    # OpenInference: a reranker's output is what the LLM saw; a retriever's documents otherwise.
    for prefix in ("reranker.output_documents", "retrieval.documents"):
        docs = _indexed_documents(attrs, prefix)
        if docs:
            return docs
    value = attrs.get("gen_ai.retrieval.documents")
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            return [
                _document(d.get("id"), d.get("content", d.get("text")), d.get("score"), None)
                for d in parsed
                if isinstance(d, Mapping)
            ]
    # OpenLLMetry vector stores: one db.query.result event per hit.
    docs = []
    for event in span.events or ():
        if event.name == "db.query.result":
            e = event.attributes or {}
            docs.append(
                _document(
                    e.get("db.query.result.id"),
                    e.get("db.query.result.document"),
                    e.get("db.query.result.score"),
                    e.get("db.query.result.metadata"),
                )
            )
    return docs


def _indexed_documents(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    docs = []
    i = 0
    while True:
        base = f"{prefix}.{i}.document."
        content, doc_id = attrs.get(base + "content"), attrs.get(base + "id")
        if content is None and doc_id is None:
            break
        docs.append(_document(doc_id, content, attrs.get(base + "score"), attrs.get(base + "metadata")))
        i += 1
    return docs


def _document(doc_id: Any, text: Any, score: Any, metadata: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"text": text if isinstance(text, str) else ""}
    if doc_id is not None and not isinstance(doc_id, bool):
        doc["id"] = str(doc_id)
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        doc["score"] = float(score)
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            metadata = None
    if isinstance(metadata, Mapping) and metadata:
        doc["metadata"] = dict(metadata)
    return doc
