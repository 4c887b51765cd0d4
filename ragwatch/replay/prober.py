"""The replay prober: send known questions to the live service over HTTP and measure what comes back.

Real traffic tells you how the service behaves for users, but not whether it still retrieves the right
chunks for questions whose answer you know, nor whether a deploy changed answers. The prober replays
questions (a golden set and/or recent sampled traffic, see :mod:`ragwatch.replay.source`) against the
service's own HTTP API, like a user would, and reports:

* availability (share of requests that succeeded) and error kinds — ``timeout``, ``connect``,
  ``transport`` (the connection broke mid-response), ``http_5xx``, ``http_4xx``, ``bad_json``,
  ``missing_field`` (the response lacks the configured answer or chunk path);
* latency (send → end of body) of successful requests and, for ``text/event-stream`` responses, time to
  first token, as p50/p95/p99;
* for golden questions answered successfully: Hit Rate@K, Recall@K, Precision@K and MRR of the returned
  chunk ids (functions of :mod:`ragwatch.scoring.retrieval_metrics`);
* answer drift: ``1 - similarity`` (:func:`~ragwatch.replay.source.similarity`) from the golden reference
  answer, or from the answer given when a traffic question was sampled.

Every request carries ``x-ragwatch-probe``, signed with ``probe_secret`` (:func:`ragwatch.capture.probe.sign_probe`),
so ragwatch's own capture keeps probes out of samples; without the secret the service ignores the mark.
Retries are off by default: a prober that retries hides exactly the failures it exists to see.

The library returns a :class:`ReplayReport`; exit codes are the CLI's business.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, push_to_gateway, start_http_server

from ragwatch.metrics.catalog import ReplayMetrics
from ragwatch.metrics.exposition import log_errors
from ragwatch.replay.client import ProbeResult, probe_all
from ragwatch.replay.options import ReplayOptions
from ragwatch.replay.source import Question, load_golden, traffic_questions
from ragwatch.replay.summary import RunSummary, record_metrics, summarize

__all__ = ["ReplayReport", "load_questions", "run", "run_once"]

log = logging.getLogger("ragwatch.replay")


@dataclass(slots=True)
class ReplayReport:
    """All runs of one invocation; ``passed`` is the last run's verdict (what a CronJob's status shows)."""

    runs: list[RunSummary]
    metrics_port: int | None = None

    @property
    def passed(self) -> bool:
        return bool(self.runs) and self.runs[-1].passed


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def load_questions(options: ReplayOptions) -> list[Question]:
    """Golden questions first, then recent traffic questions not already in the golden set."""
    questions: list[Question] = load_golden(options.golden) if options.golden else []
    if options.traffic > 0:
        from ragwatch.queue.factory import open_queue

        queue = open_queue(options.redis_url, options.service)
        try:
            # distinct questions are rarer than records: read a few times more records than wanted
            records = queue.recent_scores(options.traffic * 5)
        finally:
            queue.close()
        known = {_key(q.text) for q in questions}
        extra = [q for q in traffic_questions(records, options.traffic + len(known)) if _key(q.text) not in known]
        questions += extra[: options.traffic]
    if not questions:
        log.warning("replay: no questions to replay (empty golden set and no stored traffic)")
    return questions


def _progress(enabled: bool | None, total: int) -> tuple[Callable[[ProbeResult], None] | None, Callable[[], None]]:
    """A rich progress bar on an interactive terminal; nothing otherwise (CronJob logs stay quiet)."""
    if enabled is False or (enabled is None and not sys.stderr.isatty()):
        return None, lambda: None
    try:
        from rich.progress import Progress
    except ImportError:
        return None, lambda: None
    bar = Progress(transient=True, console=None)
    task = bar.add_task("replaying", total=total)
    bar.start()
    return (lambda _r: bar.advance(task)), bar.stop


def run_once(options: ReplayOptions, metrics: ReplayMetrics | None = None) -> tuple[RunSummary, list[ProbeResult]]:
    """Load the questions, probe them, summarise, record metrics."""
    questions = load_questions(options)
    on_done, stop = _progress(options.progress, len(questions))
    started_at = time.time()
    t0 = time.perf_counter()
    try:
        results = asyncio.run(probe_all(options, questions, on_done))
    finally:
        stop()
    summary = summarize(options, results, started_at, time.perf_counter() - t0)
    if metrics is not None:
        record_metrics(metrics, summary, results)
    log.info(
        "replay %s: %d requests, availability %.3f, errors %s",
        options.service,
        summary.requests,
        summary.availability,
        {k: v for k, v in summary.errors.items() if v} or "none",
    )
    return summary, results


def _emit(options: ReplayOptions, summary: RunSummary) -> None:
    text = (
        json.dumps(summary.to_dict(), ensure_ascii=False, sort_keys=True) + "\n"
        if options.output_format == "json"
        else summary.markdown()
    )
    if options.output:
        with open(options.output, "a" if options.every else "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def run(
    options: ReplayOptions,
    *,
    stop: threading.Event | None = None,
    on_server: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Run once (push to a Pushgateway if given) or every ``options.every`` seconds serving ``/metrics``.

    ``stop`` ends a scheduled prober between runs (signal handlers, tests); ``max_runs`` bounds it.
    ``on_server`` receives the bound metrics port (useful with port 0).
    """
    options.check()
    stop = stop or threading.Event()
    registry = CollectorRegistry()  # replay metrics only: a push must not carry unrelated series
    metrics = ReplayMetrics(registry)
    server = None
    port = None
    if options.metrics_port is not None:
        server, _thread = start_http_server(options.metrics_port, options.metrics_addr, registry)
        log_errors(server, "replay metrics HTTP")
        port = int(server.server_port)
        log.info("replay metrics on %s:%d/metrics", options.metrics_addr, port)
        if on_server is not None:
            on_server(port)
    report = ReplayReport([], port)
    try:
        while True:
            t0 = time.monotonic()
            summary, _results = run_once(options, metrics)
            report.runs.append(summary)
            _emit(options, summary)
            if options.pushgateway:
                try:
                    push_to_gateway(
                        options.pushgateway,
                        job=options.job,
                        registry=registry,
                        grouping_key={"service": options.service},
                    )
                except OSError as exc:  # urllib errors: the run's verdict stands, the push is reported
                    log.error("replay: push to %s failed: %s", options.pushgateway, exc)
            if options.every is None or (options.max_runs is not None and len(report.runs) >= options.max_runs):
                break
            if stop.wait(max(0.0, options.every - (time.monotonic() - t0))):
                break
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    return report
