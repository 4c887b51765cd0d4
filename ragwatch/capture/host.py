"""What the capture objects need from the :class:`~ragwatch.capture.watch.RagWatch` that made them.

The call objects (:mod:`ragwatch.capture.stages`), the ASGI middleware and the framework integrations
record into a RagWatch. They see it through this protocol, not through its private attributes and not
through its class: ``stages`` and ``asgi`` import nothing of ``watch`` (which imports them), so the capture
modules form no circle, and the members below are everything a call may touch. RagWatch implements it;
mypy checks that it does wherever a RagWatch is passed as a host.

These members are for ragwatch's own capture code and integrations. They are not part of the user API
(the README does not document them) and may change between releases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from ragwatch.capture.pricing import PricingTable
    from ragwatch.capture.run import Run
    from ragwatch.guard import Guard
    from ragwatch.metrics.catalog import CaptureMetrics, ModelChildren
    from ragwatch.mode.watcher import ModeWatcher
    from ragwatch.queue.contract import Queue
    from ragwatch.scoring.embedded import InProcessScorer
    from ragwatch.settings import Settings

__all__ = ["CaptureHost"]


class CaptureHost(Protocol):
    service: str
    settings: Settings
    #: contains every error of ragwatch's own bookkeeping (counted, logged, never raised into the host)
    guard: Guard
    #: None when tracing is off
    tracer: Tracer | None
    pricing: PricingTable
    #: None when degraded mode is off
    mode_watcher: ModeWatcher | None
    #: called with each finished run (the sampler's hook)
    listeners: list[Callable[[Run], None]]
    #: per (stage, status): the latency histogram child, resolved once
    stage_children: dict[tuple[str, str], Any]
    #: the retrieved-chunks histogram child; None without metrics
    chunks_child: Any
    #: per model: its metric children, resolved once
    models: dict[str, ModelChildren]
    #: the in-process scorer (started with the first request, as the mode watcher is); None unless
    #: ``scoring`` is on for ``memory://``. Only its type comes from the scoring side.
    scorer: InProcessScorer | None
    #: the queue samples go to (and, scoring in process, scores come from); None with sampling and
    #: degraded mode both off
    queue: Queue | None
    #: the capture metric families; None with metrics off
    metrics: CaptureMetrics | None

    @property
    def redactor(self) -> Callable[[str], str]:
        """The sample redactor, for exception messages on spans."""

    @property
    def redact_cached(self) -> Callable[[str], str]:
        """The same, memoised: chunk ids and texts come back request after request."""

    @property
    def degraded(self) -> bool: ...

    @property
    def notice(self) -> str | None: ...

    def model_children(self, model: str) -> ModelChildren | None: ...

    def count_unpriced(self, model: str, children: ModelChildren | None) -> None: ...

    def run_ended(self, run: Run) -> None: ...

    def degraded_result(self, question: str | None, result: Any) -> Any: ...
