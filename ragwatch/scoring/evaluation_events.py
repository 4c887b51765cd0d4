"""Scores next to traces: each score a worker records becomes an OpenTelemetry ``gen_ai.evaluation.result``
event, parented to the trace and span of the request it judged.

Tempo, Jaeger and Grafana then show the verdict on the trace itself, beside the retrieval and the LLM call
it is about, instead of only in ragwatch's own report. The event follows the GenAI semantic conventions
(``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.value``, ``gen_ai.evaluation.score.label``,
``gen_ai.evaluation.explanation``) and goes out through the Logs API.

Off unless the process has a LoggerProvider: one passed in, or the global one set with
``opentelemetry._logs.set_logger_provider`` (which the OpenTelemetry distro and ``opentelemetry-instrument``
do when logs export is on). Without one, nothing is built at all. A sample without trace ids (tracing off
when it was captured) is scored as usual and emits no event: an event that cannot be placed on a trace is
noise. Emitting never raises into the worker: a failure is counted and logged by the worker's guard.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import _logs
from opentelemetry import trace as otel_trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from ragwatch._version import __version__
from ragwatch.scoring.diagnosis import Thresholds
from ragwatch.scoring.judges.base import ANSWER_RELEVANCE, FAITHFULNESS, context_precision

__all__ = ["EVENT_NAME", "EvaluationEvents"]

log = logging.getLogger("ragwatch.worker")

EVENT_NAME = "gen_ai.evaluation.result"
NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
SERVICE = "ragwatch.service"
SAMPLE_ID = "ragwatch.sample_id"

#: Providers that only stand in until the application sets one: emitting through them does nothing.
_PLACEHOLDERS = frozenset({"ProxyLoggerProvider", "NoOpLoggerProvider"})


class EvaluationEvents:
    """Emits one event per score of a scored sample; ``logger_provider`` defaults to the global one."""

    def __init__(self, logger_provider: Any = None, thresholds: Thresholds | None = None) -> None:
        self._provider = logger_provider
        self._logger: Any = None
        self._thresholds = thresholds or Thresholds()

    @property
    def enabled(self) -> bool:
        """True when a real LoggerProvider is there (checked each time: the app may set it after us)."""
        return self._resolve() is not None

    def emit_record(self, record: Any) -> int:
        """The worker's call: the events of one newly recorded score record (a
        :class:`~ragwatch.scoring.worker.ScoreRecord`). Logs and returns 0 on any failure, so scoring never stops."""
        try:
            return self.emit(
                trace_id=record.trace_id,
                span_id=getattr(record, "span_id", None),
                scores=record.scores,
                service=record.service,
                sample_id=record.sample_id,
                diagnosis=record.diagnosis,
            )
        except Exception:
            log.warning("could not emit evaluation events for sample %s", record.sample_id, exc_info=True)
            return 0

    def emit(
        self,
        *,
        trace_id: str | None,
        span_id: str | None,
        scores: Mapping[str, float],
        service: str,
        sample_id: str,
        diagnosis: str | None = None,
    ) -> int:
        """Emit the scores of one sample; returns how many events went out (0: off, or no trace ids)."""
        if not scores or not trace_id or not span_id:
            return 0
        logger = self._resolve()
        if logger is None:
            return 0
        parent = _parent_context(trace_id, span_id)
        if parent is None:
            return 0
        sent = 0
        for metric, value in scores.items():
            attributes: dict[str, Any] = {
                NAME: metric,
                SCORE_VALUE: float(value),
                SERVICE: service,
                SAMPLE_ID: sample_id,
            }
            label = self._label(metric, value)
            if label is not None:
                attributes[SCORE_LABEL] = label
            if diagnosis:
                attributes[EXPLANATION] = f"sample diagnosis: {diagnosis}"
            _emit(logger, parent, attributes)
            sent += 1
        return sent

    def _label(self, metric: str, value: float) -> str | None:
        """``pass``/``fail`` against the SLA line of the metric, when ragwatch knows one."""
        t = self._thresholds
        lines = {
            FAITHFULNESS: t.faithfulness,
            ANSWER_RELEVANCE: t.answer_relevance,
            context_precision(t.k): t.context_precision,
        }
        line = lines.get(metric)
        if line is None:
            return None
        return "pass" if value >= line else "fail"

    def _resolve(self) -> Any:
        provider = self._provider if self._provider is not None else _logs.get_logger_provider()
        if type(provider).__name__ in _PLACEHOLDERS:
            return None
        if self._logger is None or self._logger_of is not provider:
            self._logger = provider.get_logger("ragwatch", __version__)
            self._logger_of = provider
        return self._logger

    _logger_of: Any = None


def _parent_context(trace_id: str, span_id: str) -> Any:
    """A context whose current span is the sampled request's (remote: it lives in another process)."""
    try:
        tid, sid = int(trace_id, 16), int(span_id, 16)
    except ValueError:
        return None
    if not tid or not sid:
        return None
    span_context = SpanContext(tid, sid, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return otel_trace.set_span_in_context(NonRecordingSpan(span_context))


def _emit(logger: Any, parent: Any, attributes: dict[str, Any]) -> None:
    try:
        logger.emit(event_name=EVENT_NAME, context=parent, attributes=attributes)
    except TypeError:  # an opentelemetry-api older than 1.35: no keyword form, ids on the record itself
        span_context = otel_trace.get_current_span(parent).get_span_context()
        logger.emit(
            _logs.LogRecord(
                trace_id=span_context.trace_id,
                span_id=span_context.span_id,
                trace_flags=span_context.trace_flags,
                attributes={**attributes, "event.name": EVENT_NAME},
            )
        )
