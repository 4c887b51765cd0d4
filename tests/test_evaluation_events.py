"""Scores next to traces: the worker emits each recorded score as a ``gen_ai.evaluation.result`` event whose
trace and span ids are those of the sampled request (captured with a real TracerProvider, scored from the
memory queue, exported by a real LoggerProvider into an in-memory exporter)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.queue.factory import open_queue
from ragwatch.sampling.sample import Sample, decode_sample
from ragwatch.scoring.evaluation_events import EVENT_NAME, EvaluationEvents
from ragwatch.scoring.judges import TrivialJudge
from ragwatch.scoring.judges.base import Verdict
from ragwatch.scoring.worker import Worker
from tests.conftest import Spans


class FixedJudge:
    """Faithfulness 0.6 (under the 0.75 SLA line) and CP@3 0.9 (over 0.65), whatever the sample."""

    name = "fixed"
    version = "1"

    def score(self, sample: Sample) -> Verdict:
        return Verdict(scores={"faithfulness": 0.6, "context_precision_3": 0.9})


@pytest.fixture
def logs() -> Any:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def capture(url: str, provider: Any, questions: list[str], **settings: Any) -> ragwatch.RagWatch:
    rw = ragwatch.RagWatch(
        "kb",
        registry=CollectorRegistry(),
        tracer_provider=provider,
        redis_url=url,
        sample_rate=1.0,
        sample_max_per_second=1e6,
        flush_interval=0.02,
        scoring="off",  # these tests run their own worker against the queue
        **settings,
    )

    @rw.pipeline
    def answer(question: str) -> str:
        with rw.retrieval() as r:
            r.record([{"id": "c1", "text": "Hotels up to 600 CNY.", "score": 0.9}])
        return "600 CNY."

    for q in questions:
        answer(q)
    assert rw.flush(10)
    return rw


def work(url: str, events: EvaluationEvents, judges: list[Any]) -> Worker:
    worker = Worker(open_queue(url, "kb"), judges, block_ms=50, claim_idle_ms=50, evaluation_events=events)
    worker.work(burst=True, max_seconds=30)
    return worker


def test_each_score_is_an_event_on_the_judged_requests_span(provider: Any, spans: Spans, logs: Any) -> None:
    logger_provider, exporter = logs
    url = "memory://evaluation-events"
    rw = capture(url, provider, ["q1", "q2"])
    work(url, EvaluationEvents(logger_provider), [FixedJudge()])

    roots = {format(s.context.span_id, "016x"): s for s in spans.all() if s.name == "rag kb"}
    assert len(roots) == 2
    records = [e.log_record for e in exporter.get_finished_logs()]
    assert len(records) == 4  # two scores for each of two samples
    for record in records:
        root = roots[format(record.span_id, "016x")]
        assert record.trace_id == root.context.trace_id
        assert record.event_name == EVENT_NAME
        assert record.attributes["ragwatch.service"] == "kb"
    by_metric = {r.attributes["gen_ai.evaluation.name"]: r for r in records}
    faithfulness, precision = by_metric["faithfulness"], by_metric["context_precision_3"]
    assert faithfulness.attributes["gen_ai.evaluation.score.value"] == 0.6
    assert faithfulness.attributes["gen_ai.evaluation.score.label"] == "fail"
    assert precision.attributes["gen_ai.evaluation.score.label"] == "pass"
    assert faithfulness.attributes["gen_ai.evaluation.explanation"] == "sample diagnosis: hallucination"

    # A redelivered sample is not scored again, so it emits nothing again.
    queue = open_queue(url, "kb")
    again = [orjson.loads(r) for r in queue.recent_scores(10)]
    queue.add([orjson.dumps(decode_sample(orjson.dumps({**r, "chunks": [{"id": "c", "rank": 0}]}))) for r in again])
    work(url, EvaluationEvents(logger_provider), [FixedJudge()])
    assert len(exporter.get_finished_logs()) == 4
    rw.close()


def test_the_score_record_keeps_the_span_id(provider: Any, spans: Spans, logs: Any) -> None:
    url = "memory://evaluation-span-id"
    rw = capture(url, provider, ["q"])
    work(url, EvaluationEvents(logs[0]), [TrivialJudge()])
    (record,) = [orjson.loads(r) for r in open_queue(url, "kb").recent_scores(10)]
    root = spans.named("rag kb")
    assert record["span_id"] == format(root.context.span_id, "016x")
    assert record["trace_id"] == format(root.context.trace_id, "032x")
    rw.close()


def test_off_without_a_logger_provider_and_for_untraced_samples(provider: Any, logs: Any) -> None:
    assert not EvaluationEvents().enabled  # no global LoggerProvider was set in this process
    assert EvaluationEvents(logs[0]).enabled
    url = "memory://evaluation-untraced"
    rw = capture(url, provider, ["q"], tracing=False)  # no trace ids to hang an event on
    worker = work(url, EvaluationEvents(logs[0]), [FixedJudge()])
    assert worker.processed == 1
    assert logs[1].get_finished_logs() == ()
    rw.close()


def test_a_broken_logger_never_stops_scoring(provider: Any, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def get_logger(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("exporter misconfigured")

    url = "memory://evaluation-broken"
    rw = capture(url, provider, ["q"])
    worker = work(url, EvaluationEvents(Broken()), [FixedJudge()])
    assert worker.processed == 1
    assert len(open_queue(url, "kb").recent_scores(10)) == 1
    assert "could not emit evaluation events" in caplog.text
    rw.close()
