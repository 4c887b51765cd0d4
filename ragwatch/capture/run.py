"""One pipeline run: what ragwatch learned about a single user request.

A :class:`Run` travels in a context variable from the pipeline wrapper (or the ASGI middleware) to the
retriever and LLM wrappers called inside it, so they can attach their results without the host passing
anything around. When the run ends, listeners (the sampler, tests) receive it. Expensive derivations —
normalised chunks, for instance — are deferred until a listener asks, so an unsampled request pays nothing
for them.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from ragwatch.capture.chunks import Chunk, normalize_chunks
from ragwatch.capture.responses import Usage

__all__ = ["Run", "current_run", "force_sample", "suppress", "suppressed"]

_RUN: ContextVar[Run | None] = ContextVar("ragwatch_run", default=None)
_SUPPRESS: ContextVar[bool] = ContextVar("ragwatch_suppress", default=False)
#: False until suppress() is first used, so wrappers skip reading _SUPPRESS in processes that never do.
_suppress_used = [False]
#: The framework-level model or embedding call open in this context (a LangChain chat model, a LlamaIndex
#: LLM, a LangChain ``Embeddings``): an SDK call made inside it is that same call, which the framework's
#: integration records — watched at both levels, it would be counted twice (see :func:`framework_call`).
_FRAMEWORK_CALL: ContextVar[Any] = ContextVar("ragwatch_framework_call", default=None)
#: Guards every run's open streams and hold (:meth:`Run.hold_for`): a stream may end in another thread
#: (Starlette reads sync generators in a thread pool, a finaliser runs wherever the last reference goes)
#: while its run ends. One lock for all runs: it is taken only by runs that opened a stream, a few times
#: per stream, never per item.
_HOLD = threading.Lock()
#: Ended runs waiting for their streams, with the host that hands each over (:meth:`Run.hold`): its
#: ``close()`` hands them over as they are (:func:`take_waiting`), so a sample the sampler was promised is not
#: lost at shutdown because a stream was still open. Weak: a run whose stream is collected ends by itself.
#: Changed outside ``_HOLD`` only (a change can allocate, and a collection then may run a stream's
#: finaliser, which takes ``_HOLD``); who hands a run over is decided under it, by ``_held``.
_WAITING: weakref.WeakKeyDictionary[Run, Any] = weakref.WeakKeyDictionary()


class Run:
    """Facts about one request; filled in by the stage wrappers, read by listeners after it ends."""

    __slots__ = (
        "__weakref__",
        "_chunks",
        "_held",
        "_streams",
        "answer",
        "candidates",
        "client",
        "cost_usd",
        "durations",
        "error",
        "force",
        "model",
        "outcome",
        "question",
        "rag",
        "retrieved",
        "route",
        "service",
        "span_id",
        "started_at",
        "status",
        "tags",
        "tools",
        "trace_id",
        "ttft",
        "usage",
    )

    def __init__(self, service: str, question: str | None = None, route: str | None = None) -> None:
        self.service = service
        self.question = question
        self.route = route
        self.started_at = time.time()
        self.trace_id: str | None = None
        self.span_id: str | None = None
        #: A keyed hash of who sent the request (set by the ASGI middleware): caps one client's share of
        #: the quality window, never the address itself.
        self.client: str | None = None
        self.retrieved: Any = None
        self._chunks: list[Chunk] | None = None
        #: The list a reranker was given, when one ran (``retrieved`` is then what it kept: the LLM's context).
        self.candidates: Any = None
        #: The tools an agent called during the request, in order: ``(name, seconds, outcome)``.
        self.tools: list[tuple[str, float, str]] | None = None
        self.answer: str | None = None
        self.model: str | None = None
        self.usage: Usage | None = None
        self.cost_usd: float | None = None
        self.ttft: float | None = None
        self.durations: dict[str, float] = {}
        self.outcome = "ok"
        self.error: str | None = None
        #: The HTTP status of the response (set by the ASGI middleware; None elsewhere). A 4xx is no
        #: exception, so ``outcome`` stays "ok"; the sampler reads both (``error_response``).
        self.status: int | None = None
        self.force = False
        self.tags: dict[str, str] = {}
        #: Whether this is a RAG request, the only kind handed to listeners (the sampler). True for runs a
        #: ``@rw.pipeline`` or ``rw.request()`` opened; the ASGI middleware opens its runs unmarked, and a
        #: pipeline, retriever or LLM stage entered during the request marks them (so do ``force_sample``).
        self.rag = True
        #: The stream calls opened in this run that have not ended (None until the first one opens), and
        #: whether the run ended while some were open: it then waits for them before the listeners get it.
        self._streams: set[object] | None = None
        self._held = False

    @property
    def chunks(self) -> list[Chunk]:
        """The retrieved chunks, normalised on first access (may raise :class:`ChunkError`)."""
        if self._chunks is None:
            self._chunks = normalize_chunks(self.retrieved)
        return self._chunks

    def reset_chunks(self) -> None:
        """Forget the normalised chunks: ``retrieved`` changed (a reranker ran, a tool retrieved more)."""
        self._chunks = None

    def add_duration(self, stage: str, seconds: float) -> None:
        """Several retriever or LLM calls in one request add up per stage."""
        self.durations[stage] = self.durations.get(stage, 0.0) + seconds

    # -- streams that outlive the code that opened them ----------------------------------------------------
    # A stream opened in the run may end after the run does: asyncio closes an abandoned async generator
    # a few loop steps later (its finaliser hook schedules aclose()), and a StreamingResponse reads the rest
    # of a stream after the pipeline returned. The listeners must see the run with that stream's stage,
    # tokens and cost, so the run's end does not hand it over while one is open: the last to end does.
    # The bound: a stream the host drops unfinished ends (cancelled) when it is collected.

    def hold_for(self, call: object) -> None:
        """``call`` (a stage's call, followed as a stream) opened in this run: the run waits for its end."""
        streams = self._streams
        if streams is None:
            # Made before the lock is taken: allocating under it could start a garbage collection whose
            # finalisers end another stream in this thread, which may take the lock again.
            fresh = {call}
            with _HOLD:  # two threads opening the run's first streams at once: neither set may be lost
                streams = self._streams
                if streams is None:
                    self._streams = fresh
                    return
        streams.add(call)  # once made, the set stays: adding needs no lock (one step under the GIL)

    def hold(self, host: Any = None) -> bool:
        """The run ended: True when streams opened in it are still open — the last of them to end hands
        the run to the listeners (:meth:`release` says which), or ``host``'s ``close()`` does
        (:func:`take_waiting`); False: hand it over now."""
        _WAITING[self] = host  # before the lock (see _WAITING); undone below when nothing is open
        with _HOLD:
            held = bool(self._streams)
            if held:
                self._held = True
        if not held:
            _WAITING.pop(self, None)
        return held

    def release(self, call: object) -> bool:
        """``call``, a stream opened in this run, ended: True when it is the last one an ended run waited
        for, and its caller hands the run over (exactly one caller does).

        No lock while the run has not ended (a stream read to its end inside its pipeline, the common
        case): ``call`` leaves the set first, then the hold is read, so a run ending meanwhile either sees
        the set without it or is seen held here. Held, the lock decides who hands the run over."""
        streams = self._streams
        if streams is None or call not in streams:
            return False
        streams.discard(call)
        if not self._held:
            return False
        with _HOLD:
            if streams or not self._held:
                return False
            self._held = False
        _WAITING.pop(self, None)
        return True

    def __repr__(self) -> str:
        return f"<Run service={self.service!r} trace_id={self.trace_id} outcome={self.outcome}>"


def take_waiting(host: Any) -> list[Run]:
    """The ended runs of ``host`` still waiting for a stream, which its caller now hands over as they are
    (``close()``: a stream still open at shutdown must not cost its run's sample); a stream ending later
    does not hand them over again."""
    taken = []
    for run, owner in list(_WAITING.items()):
        if owner is not host:
            continue
        with _HOLD:
            mine = run._held
            run._held = False
        _WAITING.pop(run, None)
        if mine:
            taken.append(run)
    return taken


def current_run() -> Run | None:
    """The run of the request being served in this context, if a pipeline is active."""
    return _RUN.get()


def force_sample(reason: str = "forced") -> None:
    """Ask that the current request be sampled for scoring whatever the sampling rate says."""
    run = _RUN.get()
    if run is not None:
        run.force = True
        run.rag = True  # the host says so: handed to the sampler even from a request no stage marked
        run.tags["force_reason"] = reason


@contextlib.contextmanager
def suppress() -> Iterator[None]:
    """Switch capture off inside the block, e.g. for ragwatch's own calls to an LLM judge."""
    _suppress_used[0] = True
    token = _SUPPRESS.set(True)
    try:
        yield
    finally:
        _SUPPRESS.reset(token)


def suppressed() -> bool:
    """True inside :func:`suppress`: wrappers then call straight through."""
    return _SUPPRESS.get()


def enter_framework_call(call: Any) -> None:
    """Mark ``call`` (a framework's model or embedding call, just started) as the one open in this context.

    Framework callbacks come as separate start and end events, so there is no block to reset the variable
    in: it stays set, and :func:`framework_call` asks the call whether it is still open instead."""
    _FRAMEWORK_CALL.set(call)


def framework_call(rw: Any, kind: Any) -> Any:
    """The open framework call of class ``kind`` that ``rw`` is recording in this context, or None: an SDK
    wrapper then leaves the call to it (one generation, one bill)."""
    call = _FRAMEWORK_CALL.get()
    if type(call) is kind and not call._ended and call.rw is rw:  # kind: a call class (None is never one)
        return call
    return None
