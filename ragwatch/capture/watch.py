"""The user-facing object: ``rw = RagWatch(service="kb-qa")`` and its decorators and context managers.

Everything expensive happens here, once: settings are validated, metric children bound, the tracer
looked up (the application's TracerProvider — ragwatch never installs or replaces one). The per-call
work lives in :mod:`ragwatch.capture.stages`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from opentelemetry import trace
from opentelemetry.trace import TracerProvider
from prometheus_client import REGISTRY, CollectorRegistry

from ragwatch._version import __version__
from ragwatch.capture.calls import (
    Call,
    DegradedRetrieveCall,
    EmbedCall,
    GenerateCall,
    PipelineCall,
    RerankCall,
    RetrieveCall,
)
from ragwatch.capture.chunks import normalize_chunk
from ragwatch.capture.instrument import instrument
from ragwatch.capture.pricing import PricingTable
from ragwatch.capture.record import hand_over_held
from ragwatch.capture.run import Run, take_waiting
from ragwatch.capture.stages import (
    EmbedStage,
    GenerateStage,
    PipelineStage,
    RerankStage,
    RetrieveStage,
    Stage,
    _Degraded,
)
from ragwatch.forks import call_at_exit
from ragwatch.guard import Guard
from ragwatch.metrics.catalog import (
    MAX_MODELS,
    CaptureMetrics,
    ModelChildren,
    ModeMetrics,
    ProducerMetrics,
    capture_metrics,
    families,
)
from ragwatch.metrics.fast import exemplars
from ragwatch.mode.degrade import ModeState
from ragwatch.mode.watcher import ModeWatcher
from ragwatch.queue.contract import Queue
from ragwatch.queue.factory import open_queue
from ragwatch.queue.producer import Producer
from ragwatch.sampling.redact import Redactor
from ragwatch.sampling.sample import Limits, build_record, encode_record
from ragwatch.sampling.sampler import REASONS, Sampler
from ragwatch.settings import Settings, load_settings

if TYPE_CHECKING:
    from ragwatch.capture.feedback import FeedbackWriter
    from ragwatch.report.build import Report
    from ragwatch.scoring.embedded import InProcessScorer, PreScorer

__all__ = ["RagWatch", "Scope"]

log = logging.getLogger("ragwatch")
#: the ``stage`` label values of ``ragwatch_stage_duration_seconds``
STAGES = ("request", "retrieve", "rerank", "embed", "generate")
F = TypeVar("F", bound=Callable[..., Any])


def _key(secret: Any) -> bytes | None:
    """A settings secret as key bytes (BLAKE2b keys are at most 64 bytes: longer ones are hashed down)."""
    if secret is None:
        return None
    raw = secret.get_secret_value().encode()
    if not raw:  # an empty variable is no secret: a public key would make the hash predictable again
        return None
    return raw if len(raw) <= 64 else hashlib.sha256(raw).digest()


def _score_of(item: Any) -> float | None:
    try:
        return normalize_chunk(item, 1).score
    except Exception:
        return None


class RagWatch:
    """Watches one RAG service: decorate its retriever, its LLM call and the pipeline that joins them.

    ``service`` and any keyword of :class:`~ragwatch.settings.Settings` may be given here; what is not
    given comes from ``RAGWATCH_*`` environment variables, then the YAML file, then defaults.
    ``registry`` is the Prometheus registry (``None``: metrics are kept but not registered, for tests);
    ``tracer_provider`` defaults to the application's global one; ``redact_with`` is your own redaction
    function, applied after the built-in patterns to every text a sample carries; ``rerank(question,
    chunks)`` is applied to the retriever's result while the service is degraded. ``auto_instrument=True``
    instruments every supported framework installed (:func:`ragwatch.integrations.instrument`).
    """

    def __init__(
        self,
        service: str | None = None,
        *,
        settings: Settings | None = None,
        config_file: str | os.PathLike[str] | None = None,
        registry: CollectorRegistry | None = REGISTRY,
        tracer_provider: TracerProvider | None = None,
        redact_with: Callable[[str], str] | None = None,
        rerank: Callable[[str | None, Any], Any] | None = None,
        auto_instrument: bool = False,
        **overrides: Any,
    ) -> None:
        if settings is None:
            settings = load_settings(config_file, service=service, **overrides)
        elif service is not None or overrides:  # re-validate: explicit arguments win over the object
            settings = load_settings(None, **{**settings.model_dump(), "service": service, **overrides})
        self.settings = settings
        self.service = settings.service
        self.pricing = PricingTable({m: p.model_dump() for m, p in settings.pricing.items()})
        self.metrics: CaptureMetrics | None = None
        self.stage_children: dict[tuple[str, str], Any] = {}
        self.chunks_child: Any = None
        self.models: dict[str, ModelChildren] = {}
        metrics = capture_metrics(registry, settings.latency_buckets)
        self.guard = Guard(metrics.internal_errors, settings.log_every_seconds)
        if settings.metrics:
            self.metrics = metrics
            for stage in STAGES:
                for outcome in ("ok", "error", "cancelled"):
                    self.stage_children[(stage, outcome)] = metrics.stage_duration.labels(self.service, stage, outcome)
            self.chunks_child = metrics.retrieved_chunks.labels(self.service)
        self.tracer = (
            trace.get_tracer("ragwatch", __version__, tracer_provider=tracer_provider) if settings.tracing else None
        )
        self.listeners: list[Callable[[Run], None]] = []
        self._unpriced_warned: set[str] = set()
        self._lock = threading.Lock()
        self._metrics_server: Any = None
        self.producer: Producer | None = None
        self.mode_watcher: ModeWatcher | None = None
        self.scorer: InProcessScorer | None = None
        self._prescorer: PreScorer | None = None  # content_off on a shared queue: judges before sending
        self.queue: Queue | None = None
        self._rerank = rerank
        # One redactor for everything that leaves the process (samples, span attributes, exception events);
        # the memoised form serves texts that recur (chunk texts and ids, routes).
        self.redactor = Redactor(settings.redact, custom=redact_with)
        self.redact_cached = functools.lru_cache(maxsize=4096)(self.redactor)
        if settings.sampling or settings.degraded_mode:
            self.queue = queue = open_queue(
                settings.redis_url, self.service, maxlen=settings.queue_maxlen, scores_maxlen=settings.scores_maxlen
            )
            if settings.sampling:
                self._setup_sampling(queue, registry, redact_with)
            if settings.scores_in_process():  # judges load now: a bad judge setting fails at start-up
                from ragwatch.scoring.embedded import InProcessScorer

                judges = self._prescorer.judges if self._prescorer is not None else None  # loaded once
                self.scorer = InProcessScorer(queue, settings, guard=self.guard, registry=registry, judges=judges)
            if settings.degraded_mode:
                self.mode_watcher = ModeWatcher(
                    queue,
                    guard=self.guard,
                    refresh_seconds=settings.degraded_refresh_seconds,
                    metrics=families(ModeMetrics, registry) if settings.metrics else None,
                )  # its thread starts with the first request: a pre-fork master never runs it
                self.mode_watcher.initial_read()  # …but rw.degraded is right from here on (an override, say)
        if settings.metrics_port is not None:
            self.start_metrics_server()
        #: what :func:`ragwatch.integrations.instrument` instrumented for this RagWatch, by framework
        self.instrumented: dict[str, Any] = {}
        if auto_instrument:
            from ragwatch.integrations import instrument as instrument_installed

            instrument_installed(self)

    # -- degraded mode ------------------------------------------------------------------------------------
    @property
    def degraded(self) -> bool:
        """True while the service runs in degraded mode (a local read: no I/O)."""
        mode = self.mode_watcher
        return mode is not None and mode.degraded

    @property
    def mode(self) -> ModeState:
        """The degraded-mode state as last seen by this process (since when, why, window value, override).
        Its ``degraded`` is the mode in force, override included — always equal to :attr:`degraded`."""
        return self.mode_watcher.view if self.mode_watcher is not None else ModeState()

    @property
    def notice(self) -> str | None:
        """The message to show users while degraded, else None."""
        return self.settings.degraded_notice if self.degraded else None

    def on_transition(self, callback: Callable[[ModeState, ModeState], None]) -> Callable[[ModeState, ModeState], None]:
        """Run ``callback(old, new)`` when degraded mode switches (or an override changes); usable as a
        decorator. It runs on ragwatch's background thread; its errors are contained."""
        if self.mode_watcher is not None:
            self.mode_watcher.callbacks.append(callback)
        return callback

    def degraded_result(self, question: str | None, result: Any) -> Any:
        """Apply the configured degraded-mode retrieval policies; the original result on any error."""
        floor = self.settings.degraded_min_chunk_score
        try:
            if floor is not None and isinstance(result, list):
                kept = [item for item in result if _score_of(item) is None or _score_of(item) >= floor]  # type: ignore[operator]
                result = kept if kept else result[:1]  # never leave the LLM with nothing at all
            if self._rerank is not None:
                result = self._rerank(question, result)
        except Exception as exc:
            self.guard.failed("capture", exc)
        return result

    def _setup_sampling(
        self, queue: Queue, registry: CollectorRegistry | None, redact_with: Callable[[str], str] | None
    ) -> None:
        s = self.settings
        sampler = Sampler(
            s.sample_rate,
            sample_errors=s.sample_errors,
            slow_seconds=s.sample_slow_seconds,
            route_rates=s.sample_route_rates,
            tag_rates=s.sample_tag_rates,
            probe_rate=s.sample_probe_rate,
            max_per_second=s.sample_max_per_second,
            # Keyed so a caller's traceparent cannot pick sampled trace ids; replicas agree when they share it.
            secret=_key(s.sample_secret) or os.urandom(32),
        )
        options: dict[str, Any] = {
            "limits": Limits(s.max_chunks, s.max_chunk_chars, s.max_answer_chars, s.max_question_chars),
            "redact": self.redactor,
            # Popular chunks are retrieved again and again; redacting each distinct text once saves most of the
            # flusher's time (redaction, like any user redact_with function, must be deterministic).
            "redact_chunk": self.redact_cached,
            "service_version": s.service_version,
        }
        keep_text = s.store_text
        # content_off: no text leaves the process. The in-process queue is the process: its scorer judges the
        # text in memory and stores records without it (Scoring(content=False)). A shared queue gets textless
        # samples, judged first by this process on judging threads of its own (scoring.embedded.PreScorer,
        # loaded only then: the documented exception of ARCHITECTURE.md).
        content = not s.content_off or queue.url.lower().startswith("memory:")
        prescorer = None
        if s.prescores(queue.url):
            from ragwatch.scoring.embedded import PreScorer

            prescorer = self._prescorer = PreScorer(queue, s, options, guard=self.guard)  # ConfigError now
        elif not content:  # said once, at start-up: a worker cannot judge what it never receives
            log.warning(
                "ragwatch: content_off with scoring='off' on a shared queue: samples reach it without text or"
                " scores, so workers acknowledge them unscored (latency, tokens and cost are kept)"
            )

        def build(run: Run, reason: str) -> bytes:
            return encode_record(build_record(run, reason=reason, keep_text=keep_text, content=content, **options))

        metrics = families(ProducerMetrics, registry) if s.metrics else None
        self.producer = producer = Producer(
            queue,
            build if prescorer is None else prescorer.encode,
            metrics=metrics,
            guard=self.guard,
            buffer_size=s.buffer_size,
            batch_size=s.batch_size,
            flush_interval=s.flush_interval,
            close_timeout=s.close_timeout,
            release=None if prescorer is None else prescorer.stage.release,
        )
        if prescorer is not None:  # judged off the flusher thread, then sent with the producer's next batch
            prescorer.stage.deliver = producer.deliver
        # at exit, before the producer's own flush (atexit runs the later registration first): runs still
        # waiting for a stream reach the sampler, as close() does
        call_at_exit(self._hand_over_waiting)
        decisions = (
            {
                (sampled, reason): metrics.decisions.labels(self.service, "sampled" if sampled else "skipped", reason)
                for sampled in (True, False)
                for reason in REASONS
            }
            if metrics is not None
            else {}
        )
        decide = sampler.decide
        offer = producer.offer

        def sample(run: Run) -> None:
            decision = decide(run)
            child = decisions.get((decision.sampled, decision.reason))
            if child is not None:
                child.inc()
            if decision.sampled:
                offer(run, decision.reason)
                exemplars(self.stage_children, run.durations, run.outcome, run.trace_id)  # latency → trace

        self.listeners.append(sample)

    # -- scores and the health report ------------------------------------------------------------------
    def scores(self, count: int = 1000) -> list[dict[str, Any]]:
        """The newest ``count`` score records, newest first, as the worker stores them (dicts shaped like
        :class:`~ragwatch.scoring.worker.ScoreRecord`). In process (``memory://``) at most the last 1,000 are kept;
        on Redis this reads the shared store (I/O: not for the request path)."""
        if self.queue is None:
            return []
        import orjson

        out = []
        for raw in self.queue.recent_scores(count):
            try:
                out.append(orjson.loads(raw))
            except orjson.JSONDecodeError:  # one bad record never hides the others
                continue
        return out

    _feedback_writer: FeedbackWriter | None = None  # made on the first rw.feedback

    def feedback(
        self,
        sample_id: str,
        *,
        verdict: Literal["right", "wrong"] | None = None,
        claim: str | None = None,
        chunk_id: str | None = None,
        chunk_relevant: bool | None = None,
        golden: bool = False,
        note: str | None = None,
    ) -> bool:
        """Correct the judge on one scored sample (the ``sample_id`` of its score record, as :meth:`scores`
        and the live page's cards show it): its ``verdict`` was ``"right"`` or
        ``"wrong"`` (about the whole answer, or with ``claim`` — the claim's text — about that claim), the
        retrieved chunk ``chunk_id`` was relevant or not (``chunk_relevant``), the question belongs in the
        replay golden set (``golden``), and a ``note`` for the reviewer. At least one of them.

        Stored redacted beside the scores (``memory://`` at once; Redis from a background thread, never on the
        calling thread) and counted in ``ragwatch_feedback_total``; ``ragwatch labels export`` turns them into
        ``eval-judge`` rows and golden questions. Returns True when stored or buffered, False when it was
        dropped (no queue, the store failing: counted and logged, never raised). Arguments that are no
        feedback raise :class:`~ragwatch.sampling.feedback.FeedbackError` (a ``ValueError``) at once: that is
        a bug in the calling code, not something a request can cause.
        """
        from ragwatch.capture.feedback import FeedbackWriter
        from ragwatch.sampling.feedback import count_feedback, make_feedback

        record = make_feedback(
            sample_id,
            verdict=verdict,
            claim=claim,
            chunk_id=chunk_id,
            chunk_relevant=chunk_relevant,
            golden=golden,
            note=note,
        )
        try:
            writer = self._feedback_writer
            if writer is None and self.queue is not None:
                with self._lock:
                    writer = self._feedback_writer
                    if writer is None:
                        writer = self._feedback_writer = FeedbackWriter(
                            self.queue,
                            self.redactor,
                            guard=self.guard,
                            counter=self.metrics.feedback if self.metrics is not None else None,
                            content=not self.settings.content_off,
                            close_timeout=self.settings.close_timeout,
                        )
            if writer is None:  # neither sampling nor degraded mode: there is no store to keep it in
                counter = self.metrics.feedback if self.metrics is not None else None
                count_feedback(counter, self.service, record.kinds, "dropped")
                self.guard.note("capture", None, "rw.feedback: no queue (sampling is off), dropped", key="feedback")
                return False
            return writer.offer(record)
        except Exception as exc:
            self.guard.failed("capture", exc)
            return False

    def report(self, count: int = 1000, *, worst: int = 5) -> Report:
        """The health report over :meth:`scores` with this service's thresholds (``.markdown()``,
        ``.to_dict()``); the same report ``ragwatch report`` prints."""
        from ragwatch.report.build import report_from

        return report_from(self, self.settings, count=count, worst=worst)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every sampled request was written to the queue (True) or ``timeout`` passed."""
        return self.producer.flush(timeout) if self.producer is not None else True

    def close(self, timeout: float | None = None) -> None:
        """Flush and stop the background threads (the sender also flushes at interpreter exit). Runs still
        waiting for a stream opened in them go to the listeners first, as they are."""
        self._hand_over_waiting()
        if self.producer is not None:
            self.producer.close(timeout)
        if self._feedback_writer is not None:
            self._feedback_writer.close(timeout)
        if self.scorer is not None:
            self.scorer.stop()
        if self.mode_watcher is not None:
            self.mode_watcher.stop()

    def _hand_over_waiting(self) -> None:
        """Hand the runs still waiting for a stream opened in them to the listeners, as they are (once)."""
        try:
            for run in take_waiting(self):
                hand_over_held(self, run)
        except Exception as err:
            self.guard.failed("capture", err)

    def __repr__(self) -> str:
        return f"RagWatch(service={self.service!r})"

    # -- decorators ---------------------------------------------------------------------------------
    @overload
    def retriever(self, fn: F) -> F: ...
    @overload
    def retriever(self, fn: None = None, *, name: str = "retrieval") -> Callable[[F], F]: ...

    def retriever(self, fn: Any = None, *, name: str = "retrieval") -> Any:
        """Watch a retriever (sync, async or a generator of chunks); its result is returned unchanged."""
        stage = RetrieveStage(self, name)

        def begin(args: tuple, kwargs: dict) -> Call:
            degraded = type(stage.begin(args, kwargs)) is _Degraded  # the question, degraded top_k
            top_k = None
            if kwargs:
                top_k = kwargs["top_k"] if "top_k" in kwargs else kwargs.get("k")
            return (DegradedRetrieveCall if degraded else RetrieveCall)(
                self, top_k if isinstance(top_k, int) else None, name
            )

        return self._decorator(fn, begin, stage)

    @overload
    def llm(self, fn: F) -> F: ...
    @overload
    def llm(self, fn: None = None, *, model: str | None = None, provider: str | None = None) -> Callable[[F], F]: ...

    def llm(self, fn: Any = None, *, model: str | None = None, provider: str | None = None) -> Any:
        """Watch an LLM call returning text, an OpenAI/Anthropic-style response, or a stream of deltas.

        ``model`` is the requested model (the response's own model id wins when it reports one) and keys
        the pricing table. A keyword argument ``model=`` of the call itself overrides it per call.
        """

        # The class itself is the begin function (via partial): no Python frame between wrapper and call.
        begin = functools.partial(GenerateCall, self, model, provider)
        return self._decorator(fn, begin, GenerateStage(self, model, provider))

    @overload
    def reranker(self, fn: F) -> F: ...
    @overload
    def reranker(self, fn: None = None, *, name: str = "rerank") -> Callable[[F], F]: ...

    def reranker(self, fn: Any = None, *, name: str = "rerank") -> Any:
        """Watch a reranker (or any step that filters or reorders the retrieved chunks): its latency as the
        ``rerank`` stage, the list it was given (its ``chunks=`` / ``documents=`` / ``nodes=`` keyword or first
        list argument) and the one it returns, which becomes the run's chunks — what the LLM receives, so
        context precision is scored on it."""
        return self._decorator(fn, functools.partial(RerankCall, self, name), RerankStage(self, name))

    @overload
    def embedder(self, fn: F) -> F: ...
    @overload
    def embedder(
        self, fn: None = None, *, model: str | None = None, provider: str | None = None
    ) -> Callable[[F], F]: ...

    def embedder(self, fn: Any = None, *, model: str | None = None, provider: str | None = None) -> Any:
        """Watch an embedding call: the ``embed`` stage's latency, and the input tokens it billed (the
        response's ``usage``, else estimated from its ``input=`` / texts), priced like an LLM's."""
        begin = functools.partial(EmbedCall, self, model, provider)
        return self._decorator(fn, begin, EmbedStage(self, model, provider))

    @overload
    def pipeline(self, fn: F) -> F: ...
    @overload
    def pipeline(self, fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...

    def pipeline(self, fn: Any = None, *, name: str | None = None) -> Any:
        """Watch one user request end to end: one trace, one run, one candidate for sampling."""

        return self._decorator(fn, functools.partial(PipelineCall, self, None, None, name), PipelineStage(self, name))

    def _decorator(self, fn: Any, begin: Callable[[tuple, dict], Call], stage: Stage) -> Any:
        # Spans need a call object per call; without tracing, plain calls go through the stage alone.
        lean = stage if self.tracer is None else None
        if fn is None:
            return lambda f: instrument(f, begin, self.guard, lean)
        return instrument(fn, begin, self.guard, lean)

    # -- context managers (for code that cannot be decorated) ------------------------------------------
    def request(self, question: str | None = None, *, route: str | None = None) -> Scope:
        """``with rw.request(question):`` — the context-manager form of :meth:`pipeline`."""
        return Scope(self, lambda: PipelineCall(self, question, route))

    def retrieval(self, *, top_k: int | None = None, name: str = "retrieval") -> Scope:
        """``with rw.retrieval() as r: r.record(chunks)`` — the form of :meth:`retriever`."""
        return Scope(self, lambda: RetrieveCall(self, top_k, name))

    def generation(self, *, model: str | None = None, provider: str | None = None) -> Scope:
        """``with rw.generation(model=...) as g: g.record(response)`` (or ``g.feed(event)`` per delta)."""
        return Scope(self, lambda: GenerateCall(self, model, provider))

    # -- listeners, pricing, exposition -----------------------------------------------------------------
    def add_listener(self, listener: Callable[[Run], None]) -> None:
        """Call ``listener(run)`` when each request ends (the sampler's hook); its errors are contained."""
        self.listeners.append(listener)

    def remove_listener(self, listener: Callable[[Run], None]) -> None:
        self.listeners.remove(listener)

    def run_ended(self, run: Run) -> None:
        for listener in self.listeners:
            try:
                listener(run)
            except Exception as exc:
                self.guard.failed("listener", exc)

    def model_children(self, model: str) -> ModelChildren | None:
        """Children for ``model``, remembered per RagWatch so the request path finds them in one lookup."""
        if self.metrics is None:
            return None
        children = self.metrics.model(self.service, model)
        if len(self.models) < 2 * MAX_MODELS:  # models past the cap share `other`; don't remember them all
            self.models[model] = children
        return children

    def count_unpriced(self, model: str, children: ModelChildren | None) -> None:
        """Count a call whose model has no price, and warn once per model."""
        if children is not None:
            children.unpriced.inc()
        if model not in self._unpriced_warned and len(self._unpriced_warned) < 64:
            with self._lock:
                self._unpriced_warned.add(model)
            log.warning("ragwatch: no price for model %r; its calls are counted without cost", model)

    def start_metrics_server(self, port: int | None = None, addr: str | None = None) -> Any:
        """Serve ``/metrics`` on a background thread (``metrics_port`` setting, or ``port``)."""
        from ragwatch.metrics.exposition import start_metrics_server

        if self._metrics_server is None:
            chosen = self.settings.metrics_port if port is None else port
            self._metrics_server = start_metrics_server(chosen or 0, addr or self.settings.metrics_addr)
        return self._metrics_server

    def middleware(self, app: Any, **options: Any) -> Any:
        """Wrap an ASGI app so each HTTP request is a pipeline run
        (:class:`~ragwatch.capture.asgi.RagwatchMiddleware`)."""
        from ragwatch.capture.asgi import RagwatchMiddleware

        return RagwatchMiddleware(app, watch=self, **options)


class Scope:
    """A stage as a context manager, sync or async; never raises from its own bookkeeping."""

    __slots__ = ("_begin", "_call", "_result", "_rw")

    def __init__(self, rw: RagWatch, begin: Callable[[], Call]) -> None:
        self._rw = rw
        self._begin = begin
        self._call: Call | None = None
        self._result: Any = None

    @property
    def run(self) -> Run | None:
        return self._call.run if self._call is not None else None

    def record(self, result: Any) -> Any:
        """Hand the stage's result (chunks, an LLM response) to ragwatch; returns it unchanged."""
        self._result = result
        return result

    def feed(self, event: Any) -> Any:
        """One streamed item (an LLM delta); returns it unchanged."""
        if self._call is not None:
            self._call.on_item(event)
        return event

    def __enter__(self) -> Scope:
        try:
            self._call = self._begin()
            self._call.activate()
        except Exception as exc:
            self._rw.guard.failed("capture", exc)
            self._call = None
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        call = self._call
        if call is not None:
            call.deactivate()
            call.finish(self._result, exc)

    async def __aenter__(self) -> Scope:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)
