"""What a finished stage call records, written once for every way of capturing it.

The stages (:mod:`ragwatch.capture.stages`), the call objects (:mod:`ragwatch.capture.calls`), the stream
proxies and the framework integrations all end a call here: ``record_retrieval``, ``record_rerank``,
``record_embedding``, ``record_generation`` and ``record_request`` put its latency, chunk counts, tokens and
cost into the metrics and its facts into the request's :class:`~ragwatch.capture.run.Run`, and
``open_run`` starts a run (and, with the process's first one, the background threads). Keeping them in one
module is what makes a decorated call and an integration's call record identically.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ragwatch.capture.chunks import ChunkError, normalize_chunks
from ragwatch.capture.responses import StreamAccumulator, Usage, estimate_tokens, read_embedding, read_response
from ragwatch.capture.run import _RUN, Run
from ragwatch.labels import MAX_LABEL_CHARS, safe_label

if TYPE_CHECKING:
    from ragwatch.capture.host import CaptureHost
    from ragwatch.metrics.catalog import ModelChildren

__all__ = [
    "candidates_of",
    "gather_retrieved",
    "hand_over",
    "is_stream",
    "open_run",
    "question_of",
    "record_embedding",
    "record_generation",
    "record_request",
    "record_rerank",
    "record_retrieval",
    "restore_retrieved",
    "start_background",
]

_perf = time.perf_counter
_CANCELLED = (GeneratorExit, asyncio.CancelledError)


_STREAM_TYPES: dict[type, bool] = {}
_QUESTION_KEYS = ("question", "query", "q", "input", "prompt")


def question_of(args: tuple, kwargs: dict | None) -> str | None:
    """The user's question among a watched function's arguments: a keyword such as ``question=``, else
    the first string among the first two positional arguments (a method's first argument is ``self``)."""
    if not kwargs and args and type(args[0]) is str:  # the common `answer(question)` call
        return args[0]
    if kwargs:
        for key in _QUESTION_KEYS:
            value = kwargs.get(key)
            if isinstance(value, str):
                return value
    for value in args[:2]:
        if isinstance(value, str):
            return value
    return None


def is_stream(value: Any) -> bool:
    """An iterator the host will consume after the call returns (a generator, an SDK stream object or
    stream manager), or an SDK raw-response wrapper whose parsed result is read later (openai's
    ``with_raw_response`` / ``with_streaming_response``: :func:`~ragwatch.capture.streams.proxy_stream`
    reads what they parse to, never their HTTP body as the answer).

    Cached per type: this runs on every wrapped call, and two failed ``hasattr`` lookups cost more than
    a dictionary hit. Bounded, in case a host generates classes.
    """
    cls = type(value)
    try:
        found = _STREAM_TYPES.get(cls)
        if found is None:
            found = (
                hasattr(cls, "__next__")
                or hasattr(cls, "__anext__")
                # SDK stream managers (openai's `.stream()`, anthropic's): the stream opens on `with`
                or (
                    cls.__name__.endswith("StreamManager") and (hasattr(cls, "__enter__") or hasattr(cls, "__aenter__"))
                )
                or is_raw_response(cls)
            )
            if len(_STREAM_TYPES) < 512:
                _STREAM_TYPES[cls] = found
    except Exception:  # a class whose metaclass raises on lookup or hashing: not a stream we can follow
        return False
    return found


_RAW_RESPONSES = frozenset({"LegacyAPIResponse", "APIResponse", "AsyncAPIResponse"})


def is_raw_response(cls: type) -> bool:
    """openai's wrappers of the HTTP response around a parsed result (``.parse()``)."""
    return cls.__name__ in _RAW_RESPONSES and cls.__module__.startswith("openai.") and hasattr(cls, "parse")


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    return "cancelled" if isinstance(exc, _CANCELLED) else "error"


def _observe(
    rw: CaptureHost, run: Run | None, stage: str, elapsed: float, exc: BaseException | None, rag: bool = False
) -> str:
    """A stage's latency into its histogram and the run's durations; returns the outcome. ``rag``: the
    stage (a retriever, reranker or LLM) makes the run a RAG request, one the sampler may take."""
    outcome = "ok" if exc is None else _outcome(exc)
    children = rw.stage_children
    if children:
        children[(stage, outcome)].observe(elapsed)
    if run is not None:
        if rag:
            run.rag = True
        durations = run.durations
        if stage in durations:
            durations[stage] += elapsed
        else:
            durations[stage] = elapsed
    return outcome


def record_retrieval(
    rw: CaptureHost, run: Run | None, elapsed: float, result: Any, exc: BaseException | None
) -> int | None:
    """A finished retriever call; returns how many chunks came back (None: nothing countable). A request's
    retrievals add up, each chunk once: a question expanded into several queries, retrievers side by side, an
    agent's tool calls — the answer is judged against everything retrieved for it."""
    _observe(rw, run, "retrieve", elapsed, exc, True)
    if exc is not None or result is None:
        return None
    try:
        count = len(result)
    except TypeError:
        return None  # an iterator we must not consume; nothing to count
    if rw.chunks_child is not None:
        rw.chunks_child.observe(count)
    if run is not None:
        earlier = run.retrieved
        run.retrieved = result
        run.reset_chunks()
        gather_retrieved(run, earlier)
    return count


def record_generation(
    rw: CaptureHost,
    run: Run | None,
    elapsed: float,
    result: Any,
    exc: BaseException | None,
    model: str | None,
    prompt: Any,
    acc: StreamAccumulator | None = None,
    ttft: float | None = None,
) -> tuple[str, Usage | None, float | None]:
    """A finished LLM call: tokens (reported, else estimated from ``prompt`` and the answer), cost, TTFT.

    ``acc`` holds what a stream delivered (then ``result`` is ignored). Returns (model, usage, cost) for
    the span.
    """
    _observe(rw, run, "generate", elapsed, exc, True)
    text: str | None = None
    usage: Usage | None = None
    answered: str | None = None
    if acc is not None:
        text, usage, answered = acc.text, acc.usage, acc.model
    elif exc is None and result is not None:
        try:
            text, usage, answered = read_response(result)
        except Exception as err:
            rw.guard.failed("response", err)
    model = _model_label(rw, answered or model or "unknown")
    if usage is None and text is not None:
        usage = Usage(_estimate_prompt(prompt), estimate_tokens(text), 0, True)
    children, cost = _bill(rw, model, usage)
    if ttft is not None and children is not None:
        children.ttft.observe(ttft)
    if run is not None:
        if text is not None:
            run.answer = text
        run.model = model
        if run.usage is None:
            run.usage, run.cost_usd = usage, cost
        else:  # an agent's loop, a query rewrite: the request costs every model call it made
            _add_usage(run, usage, cost)
        if ttft is not None and run.ttft is None:
            run.ttft = ttft
    return model, usage, cost


def _add_usage(run: Run, usage: Usage | None, cost: float | None) -> None:
    """Add one more generation's tokens and cost to the run's (estimated if any part was)."""
    prior = run.usage
    if usage is not None and prior is not None:
        run.usage = Usage(
            prior.input_tokens + usage.input_tokens,
            prior.output_tokens + usage.output_tokens,
            prior.cached_input_tokens + usage.cached_input_tokens,
            prior.estimated or usage.estimated,
        )
    if cost is not None:
        run.cost_usd = cost if run.cost_usd is None else run.cost_usd + cost


def _model_label(rw: CaptureHost, model: Any) -> str:
    """The model id as a label: bounded (it comes from the response: never a 100 KB string) and redacted — an
    e-mail or a key in a fine-tuned model's id would reach /metrics, spans, logs and samples. The memoised
    redactor makes a known id one dictionary lookup."""
    if type(model) is not str or len(model) > MAX_LABEL_CHARS or not model.isprintable():
        model = safe_label(model)
    return rw.redact_cached(model)


def _bill(rw: CaptureHost, model: str, usage: Usage | None) -> tuple[ModelChildren | None, float | None]:
    """Price ``usage`` and add its tokens and cost to ``model``'s counters; returns (children, cost)."""
    children: ModelChildren | None
    try:
        children = rw.models[model]
    except KeyError:
        children = rw.model_children(model)
    cost = None
    if usage is not None:
        try:
            cost = rw.pricing.cost(model, usage)
        except Exception as err:  # a broken pricing entry: counted, the call goes on without cost
            rw.guard.failed("pricing", err)
        else:
            if cost is None:
                rw.count_unpriced(model, children)
        if children is not None:
            if usage.estimated:
                children.add_estimated(usage.input_tokens, usage.output_tokens, cost or 0.0)
            else:
                u = usage
                children.add_reported(u.input_tokens, u.output_tokens, u.cached_input_tokens, cost or 0.0)
    return children, cost


def record_rerank(
    rw: CaptureHost, run: Run | None, elapsed: float, before: Any, result: Any, exc: BaseException | None
) -> int | None:
    """A finished reranker (or any step that filters or reorders the chunks between retriever and LLM).

    Its result is what the LLM receives, so it becomes the run's chunks (the sample's context precision is
    scored on it); the list it was given (``before``, else the retriever's) is kept as ``run.candidates``.
    Not counted in ``ragwatch_retrieved_chunks``, which stays the retriever's. Returns the kept count."""
    _observe(rw, run, "rerank", elapsed, exc, True)
    if exc is not None or result is None:
        return None
    try:
        count = len(result)
    except TypeError:
        return None
    if run is not None:
        run.candidates = before if before is not None else run.retrieved
        run.retrieved = result
        run.reset_chunks()
    return count


def record_embedding(
    rw: CaptureHost,
    run: Run | None,
    elapsed: float,
    result: Any,
    exc: BaseException | None,
    model: str | None,
    inputs: Any,
    usage: Usage | None = None,
) -> tuple[str, Usage | None, float | None]:
    """A finished embedding call: its own ``embed`` latency (not hidden in ``retrieve``), the input tokens it
    billed (reported, else estimated from ``inputs``) and their cost. The run's answer, model and usage
    stay the generation's. Returns (model, usage, cost) for the span."""
    _observe(rw, run, "embed", elapsed, exc)
    answered = None
    if exc is None and result is not None and usage is None:
        try:
            usage, answered = read_embedding(result)
        except Exception as err:
            rw.guard.failed("response", err)
    if exc is None and usage is None:
        usage = Usage(_estimate_prompt(inputs), 0, 0, True)
    model = _model_label(rw, answered or model or "unknown")
    _, cost = _bill(rw, model, usage)
    return model, usage, cost


def restore_retrieved(run: Run | None, saved: Any) -> None:
    """Give ``run`` back the chunks it held before an inner retrieval recorded its own: what a retriever
    inside another one returns is the outer one's input (:meth:`RerankCall.inner_retrieved`), not yet the
    LLM's context, and the run may hold chunks of other retrievals meanwhile."""
    if run is not None and run.retrieved is not saved:
        run.retrieved = saved
        run.reset_chunks()


def gather_retrieved(run: Run | None, earlier: Any) -> None:
    """Put chunks retrieved earlier in the request before the ones a retrieval just recorded, each chunk
    once: an agent's tools retrieve more than once, a query expanded into several finds some chunks again, and
    the final answer is judged against all of it."""
    if earlier and run is not None and isinstance(run.retrieved, list) and run.retrieved is not earlier:
        found = run.retrieved
        try:
            held = {c.id for c in normalize_chunks(earlier)}
            found = [item for item, c in zip(found, normalize_chunks(found), strict=True) if c.id not in held]
        except ChunkError:  # unreadable chunks are counted when the run is sampled; here they are only added
            pass
        run.retrieved = list(earlier) + found
        run.reset_chunks()


_CANDIDATE_KEYS = ("chunks", "documents", "nodes", "docs", "results", "candidates", "passages")


def candidates_of(args: tuple, kwargs: dict | None) -> Any:
    """The list a reranker was handed: a keyword such as ``chunks=``, else the first list or tuple among its
    positional arguments."""
    if kwargs:
        for key in _CANDIDATE_KEYS:
            value = kwargs.get(key)
            if isinstance(value, (list, tuple)):
                return value
    for value in args:
        if isinstance(value, (list, tuple)):
            return value
    return None


def record_request(rw: CaptureHost, run: Run, elapsed: float, result: Any, exc: BaseException | None) -> None:
    """Close a run and hand it to the listeners (the sampler) if it is a RAG request (``run.rag``); each
    listener's errors are contained. Its latency is recorded either way, now; the hand-over waits while a
    stream opened in the run is still open (:meth:`Run.hold`): the last of them to end makes it
    (:func:`hand_over`), so the listeners see that stream's stage, tokens and cost."""
    run.outcome = _observe(rw, run, "request", elapsed, exc)
    if exc is not None:
        run.error = type(exc).__qualname__
    elif run.answer is None and isinstance(result, str):
        run.answer = result
    if run._streams and run.hold(rw):  # read unlocked first: most runs open no stream
        count_waiting(rw, 1)
        return
    hand_over(rw, run)


def count_waiting(rw: CaptureHost, change: int) -> None:
    """Move ``ragwatch_runs_waiting_for_streams``: a run held for its streams (+1), handed over after (-1).
    A stream the host keeps open and never finishes holds its run that long; the gauge shows it."""
    metrics = rw.metrics
    if metrics is not None:
        metrics.runs_waiting.labels(rw.service).inc(change)


def hand_over_held(rw: CaptureHost, run: Run) -> None:
    """Hand over a run that waited for its streams (:meth:`Run.release` or :func:`take_waiting` said so),
    taking it off ``ragwatch_runs_waiting_for_streams``."""
    count_waiting(rw, -1)
    hand_over(rw, run)


def hand_over(rw: CaptureHost, run: Run) -> None:
    """Hand an ended run to the listeners if it is a RAG request: at its end (:func:`record_request`), or
    once the last stream it waited for ended (:meth:`Run.release` said so)."""
    if rw.listeners and run.rag:
        rw.run_ended(run)


def open_run(rw: CaptureHost, question: str | None, route: str | None) -> Run | None:
    """A new run for a request, or None inside one already running (a middleware run or an outer
    pipeline), which the inner one joins: it marks it a RAG request, may fill in the question, and records
    nothing itself."""
    current = _RUN.get()
    if current is not None:
        current.rag = True
        if question and current.question is None:
            current.question = question
        return None
    start_background(rw)
    return Run(rw.service, question, route)


def start_background(rw: CaptureHost) -> None:
    """Start this process's mode watcher and in-process scorer if they are not running: every capture path
    calls it when it opens a run (decorators, context managers, middleware, integrations, the span
    processor), so scoring never depends on which path saw the first request. Not at construction: a
    pre-fork master must not start threads its workers would not inherit."""
    mode = rw.mode_watcher
    if mode is not None and not mode.running:
        mode.start()
    scorer = rw.scorer
    if scorer is not None and not scorer.running:
        scorer.start()


def _estimate_prompt(prompt: Any) -> int:
    """Rough input size when the API reported none: the string content of the call's arguments."""
    total = 0
    stack = [prompt]
    seen = 0
    while stack and seen < 256:
        item = stack.pop()
        seen += 1
        if isinstance(item, str):
            total += estimate_tokens(item)
        elif isinstance(item, Mapping):
            for key in ("content", "text", "page_content"):
                value = item.get(key)
                if isinstance(value, str):
                    total += estimate_tokens(value)
                    break
            else:
                messages = item.get("messages")
                if isinstance(messages, (list, tuple)):
                    stack.extend(messages)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            text = getattr(item, "page_content", None) or getattr(item, "text", None)
            if isinstance(text, str):
                total += estimate_tokens(text)
    return total
