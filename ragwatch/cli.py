"""The ``ragwatch`` command: a thin layer that parses arguments, calls the library, maps errors to exit codes.

Exit codes: 0 success, 1 unhealthy (``health``: no live worker, or Redis full), queue unreachable (a
``worker`` that never reached it) or nothing to report (``report``), 2 bad configuration or usage.
The library itself never calls ``sys.exit``.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from prometheus_client import REGISTRY

from ragwatch._version import __version__
from ragwatch.errors import ConfigError, QueueError
from ragwatch.settings import load_settings

__all__ = ["main"]

log = logging.getLogger("ragwatch.cli")

EXIT_OK = 0
EXIT_UNHEALTHY = 1
EXIT_CONFIG = 2


def _config(args: argparse.Namespace) -> int:
    settings = load_settings(args.config_file)
    print(json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True))
    return EXIT_OK


def _worker(args: argparse.Namespace) -> int:
    from ragwatch.metrics.catalog import WorkerMetrics, families
    from ragwatch.mode.sla import SLAEvaluator
    from ragwatch.queue.factory import open_queue
    from ragwatch.sampling.sample import Limits
    from ragwatch.scoring.diagnosis import Thresholds
    from ragwatch.scoring.health import serve_worker_http, stall_seconds
    from ragwatch.scoring.judges import make_judges
    from ragwatch.scoring.worker import Worker

    settings = load_settings(
        args.config_file,
        service=args.service,
        redis_url=args.redis_url,
        worker_concurrency=args.concurrency,
        worker_port=args.port,
    )
    judges = make_judges(args.judge or settings.judges, settings)
    queue = open_queue(
        _shared_queue_url(settings, "worker"),
        settings.service,
        maxlen=settings.queue_maxlen,
        scores_maxlen=settings.scores_maxlen,
        applied_ttl_seconds=settings.idempotency_ttl_seconds,
    )
    metrics = families(WorkerMetrics, REGISTRY, settings.latency_buckets)
    worker = Worker(
        queue,
        judges,
        name=args.name,
        concurrency=settings.worker_concurrency,
        batch=settings.worker_batch,
        block_ms=settings.worker_block_ms,
        claim_idle_ms=int(settings.claim_idle_seconds * 1000),
        max_deliveries=settings.max_deliveries,
        metrics=metrics,
        maintenance_seconds=min(5.0, settings.sla_evaluate_seconds),
        evaluator=SLAEvaluator(queue, settings.sla_policy(), settings.health_thresholds, metrics),
        thresholds=Thresholds(
            context_precision=settings.sla_threshold,
            faithfulness=settings.health_thresholds.get("faithfulness", 0.75),
            answer_relevance=settings.health_thresholds.get("answer_relevance", 0.85),
        ),
        limits=Limits(
            settings.max_chunks, settings.max_chunk_chars, settings.max_answer_chars, settings.max_question_chars
        ),
        max_sample_bytes=settings.max_sample_bytes,
    )
    worker.stall_seconds = stall_seconds(worker, settings, judges)
    server = None
    if settings.worker_port is not None and not args.burst:
        dashboard = None
        if settings.dashboard:
            from ragwatch.report.build import default_thresholds
            from ragwatch.report.dashboard import Dashboard
            from ragwatch.report.sources import QueueSource

            dashboard = Dashboard(QueueSource(queue), default_thresholds(settings), settings.sla_policy())
        server = serve_worker_http(worker, settings.worker_port, settings.worker_addr, dashboard=dashboard)
        log.info(
            "worker endpoints on %s:%d (/metrics, /livez, /readyz%s)",
            settings.worker_addr,
            server.server_port,
            ", /dashboard" if dashboard else "",
        )
    log.info(
        "worker %s scoring %s from %s with %s",
        worker.name,
        settings.service,
        queue.url,
        ", ".join(j.name for j in judges),
    )
    try:
        handled = worker.work(burst=args.burst, max_seconds=args.max_seconds)
    finally:
        if server is not None:
            server.shutdown()
        queue.close()
    print(json.dumps({"worker": worker.name, "handled": handled, "queue_reached": worker.reached}))
    if not worker.reached:
        log.error("worker %s never reached the queue at %s", worker.name, queue.url)
        return EXIT_UNHEALTHY
    return EXIT_OK


def _shared_queue_url(settings: Any, command: str) -> str:
    """The commands that talk to other processes need a shared queue: the memory backend is per process."""
    if not settings.redis_url or settings.redis_url.startswith("memory:"):
        raise ConfigError(
            f"ragwatch {command} needs a shared queue: set RAGWATCH_REDIS_URL or pass --redis-url "
            "(memory:// lives inside one process)"
        )
    return str(settings.redis_url)


def _health(args: argparse.Namespace) -> int:
    from ragwatch.queue.factory import open_queue

    settings = load_settings(args.config_file, service=args.service, redis_url=args.redis_url)
    queue = open_queue(_shared_queue_url(settings, "health"), settings.service)
    try:
        live = queue.live_workers(args.max_age)
        stats = queue.stats()
        full = queue.full_reason()
    finally:
        queue.close()
    report: dict[str, Any] = {
        "live_workers": sorted(live),
        "length": stats.length,
        "pending": stats.pending,
        "lag": stats.lag,
        "dead": stats.dead,
    }
    if full:
        report["queue_full"] = full  # names the operator action
    print(json.dumps(report))
    return EXIT_OK if live and not full else EXIT_UNHEALTHY


def _degrade(args: argparse.Namespace) -> int:
    from ragwatch.mode.degrade import effective
    from ragwatch.queue.factory import open_queue

    settings = load_settings(args.config_file, service=args.service, redis_url=args.redis_url)
    queue = open_queue(_shared_queue_url(settings, "degrade"), settings.service)
    try:
        state = queue.read_mode() if args.mode == "status" else queue.set_override(args.mode)
    finally:
        queue.close()
    print(json.dumps({"service": settings.service, "degraded": effective(state), **state.to_fields()}))
    return EXIT_OK


def _eval_judge(args: argparse.Namespace) -> int:
    from ragwatch.scoring.evaluate import main as evaluate

    return evaluate(args.rest)


def _eval_alerts(args: argparse.Namespace) -> int:
    from ragwatch.scoring.alert_eval import main as eval_alerts

    return eval_alerts(args.rest)


def _replay(args: argparse.Namespace) -> int:
    from ragwatch.replay.options import ReplayOptions, parse_duration
    from ragwatch.replay.prober import run

    settings = load_settings(args.config_file, service=args.service, redis_url=args.redis_url)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per probe drowns the summary
    headers = {}
    for item in args.header or ():
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header must be 'Name: value', got {item!r}")
        headers[name.strip()] = value.strip()
    options = ReplayOptions(
        url=args.url,
        service=settings.service,
        method=args.method,
        headers=headers,
        body=args.body,
        question_field=args.question_field,
        answer_path=args.answer,
        chunk_ids_path=args.chunk_ids or None,
        chunk_texts_path=args.chunk_texts or None,
        stream_text_path=args.stream_text,
        golden=args.golden,
        traffic=args.traffic,
        redis_url=settings.redis_url,
        k=args.k,
        concurrency=args.concurrency,
        timeout=args.timeout,
        retries=args.retries,
        min_availability=args.min_availability,
        min_hit_rate=args.min_hit_rate,
        every=parse_duration(args.every) if args.every else None,
        max_runs=args.max_runs,
        metrics_port=args.metrics_port,
        metrics_addr=args.metrics_addr,
        pushgateway=args.pushgateway,
        job=args.job,
        output_format="json" if args.json else "markdown",
        output=args.output,
        progress=False if args.no_progress else None,
        probe_secret=settings.probe_secret.get_secret_value() if settings.probe_secret is not None else None,
    )
    if options.probe_secret is None:
        log.warning("replay: RAGWATCH_PROBE_SECRET is not set, so the service counts these probes as real traffic")
    stop = threading.Event()
    previous = {}
    if options.every and threading.current_thread() is threading.main_thread():
        # a long-running prober stops between runs on SIGTERM/SIGINT (k8s, Ctrl-C)
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        return EXIT_OK if run(options, stop=stop).passed else EXIT_UNHEALTHY
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _demo(args: argparse.Namespace) -> int:
    from ragwatch.demo import run_demo

    logging.getLogger("httpx").setLevel(logging.WARNING)
    result = run_demo(
        requests=args.requests,
        seed=args.seed,
        hallucination_rate=args.hallucination_rate,
        quick=args.quick,
        redis_url=args.redis_url,
        serve=args.serve,
        port=args.port,
        host=args.host,
        service=args.service,
        progress=False if args.no_progress else None,
    )
    return EXIT_OK if result.entered_degraded and result.left_degraded else EXIT_UNHEALTHY


def _report(args: argparse.Namespace) -> int:
    from ragwatch.report.build import build_report, default_thresholds, load_state, save_state
    from ragwatch.report.sources import EndpointSource, JsonlSource, QueueSource

    settings = load_settings(args.config_file, service=args.service, redis_url=args.redis_url)
    queue = None
    if args.jsonl and args.url:
        raise ConfigError("give one source: --jsonl or --url (or neither, for the queue)")
    if args.jsonl:
        source: Any = JsonlSource(args.jsonl)
    elif args.url:
        source = EndpointSource(args.url)
    else:
        from ragwatch.queue.factory import open_queue

        try:
            url = _shared_queue_url(settings, "report")
        except ConfigError as exc:
            raise ConfigError(f"{exc}; or read an export with --jsonl FILE or a live endpoint with --url URL") from None
        queue = open_queue(url, settings.service)
        source = QueueSource(queue)
    try:
        records = source.records(args.count)
        mode = source.mode() if args.html else None
    finally:
        if queue is not None:
            queue.close()
    if not records:
        print(f"ragwatch: no score records in {source.name}: nothing to report", file=sys.stderr)
        return EXIT_UNHEALTHY
    state_path = None if args.no_state else (args.state or settings.report_state_file)
    previous = load_state(state_path) if state_path else None
    thresholds = default_thresholds(settings)
    report = build_report(records, thresholds, previous, worst=args.worst)
    if args.html:
        from ragwatch.report.dashboard import render_html
        from ragwatch.report.view import view_data

        data = view_data(
            records, thresholds, settings.sla_policy(), mode, previous, source=source.name, worst=args.worst
        )
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write(render_html(data))
        print(f"ragwatch: wrote {args.html} ({len(records)} scored samples from {source.name})", file=sys.stderr)
    if not args.html or args.output or args.format == "json":
        text = (
            json.dumps(report.to_dict(), indent=2, ensure_ascii=False) if args.format == "json" else report.markdown()
        )
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        else:
            print(text)
    if state_path:
        save_state(state_path, report)
    return EXIT_OK


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-file", help="YAML settings file (default: $RAGWATCH_CONFIG_FILE)")
    parser.add_argument("--service", help="service name (default: $RAGWATCH_SERVICE)")
    parser.add_argument("--redis-url", help="queue URL (default: $RAGWATCH_REDIS_URL, else memory://)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragwatch", description="Watch a live RAG service.")
    parser.add_argument("--version", action="version", version=f"ragwatch {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    commands = parser.add_subparsers(dest="command", required=True)
    config = commands.add_parser("config", help="validate the settings (env, YAML) and print them as JSON")
    config.add_argument("--config-file", help="YAML settings file (default: $RAGWATCH_CONFIG_FILE)")
    config.set_defaults(func=_config)

    worker = commands.add_parser("worker", help="score sampled requests from the queue")
    _common(worker)
    worker.add_argument(
        "--judge", action="append", help="judge to run (repeatable; default: the judges setting, offline)"
    )
    worker.add_argument("--concurrency", type=int, help="samples scored in parallel (threads)")
    worker.add_argument("--name", help="consumer name (default: host-pid)")
    worker.add_argument("--port", type=int, help="port of /metrics, /livez, /readyz (default 9465)")
    worker.add_argument("--burst", action="store_true", help="drain the queue, then exit")
    worker.add_argument("--max-seconds", type=float, help="stop after this many seconds")
    worker.set_defaults(func=_worker)

    degrade = commands.add_parser("degrade", help="force degraded mode on/off, give it back to the SLA (auto)")
    _common(degrade)
    degrade.add_argument("mode", choices=["on", "off", "auto", "status"])
    degrade.set_defaults(func=_degrade)

    evaluate = commands.add_parser(
        "eval-judge", add_help=False, help="measure a judge on labelled data (ragwatch eval-judge --help)"
    )
    evaluate.add_argument("rest", nargs=argparse.REMAINDER)
    evaluate.set_defaults(func=_eval_judge)

    alerts = commands.add_parser(
        "eval-alerts", add_help=False, help="would the alert lines fire on labelled data (ragwatch eval-alerts --help)"
    )
    alerts.add_argument("rest", nargs=argparse.REMAINDER)
    alerts.set_defaults(func=_eval_alerts)

    replay = commands.add_parser("replay", help="probe the live service with golden / recent questions")
    _common(replay)
    replay.add_argument("--url", required=True, help="endpoint to probe, e.g. http://kb-qa:8000/ask")
    replay.add_argument("--method", default="POST")
    replay.add_argument("--header", action="append", help="'Name: value' sent with every probe (repeatable)")
    replay.add_argument("--body", help='JSON body template; "{question}" in a string value is replaced')
    replay.add_argument("--question-field", help="dotted body field set to the question (default: question)")
    replay.add_argument("--answer", default="answer", help="dotted response path of the answer")
    replay.add_argument("--chunk-ids", default="chunks[].id", help="response path of chunk ids ('' for none)")
    replay.add_argument("--chunk-texts", help="response path of chunk texts")
    replay.add_argument("--stream-text", default="delta", help="SSE: path of the text delta in a JSON event")
    replay.add_argument("--golden", help="golden set (JSONL: question, relevant_ids, reference_answer)")
    replay.add_argument("--traffic", type=int, default=0, help="also replay N recent distinct sampled questions")
    replay.add_argument("--k", type=int, default=5, help="K of Hit Rate / Recall / Precision / MRR")
    replay.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    replay.add_argument("--timeout", type=float, default=10.0, help="seconds per request (whole response)")
    replay.add_argument("--retries", type=int, default=0, help="retries on timeout/connect/5xx (default none)")
    replay.add_argument("--min-availability", type=float, help="exit 1 when availability is under this")
    replay.add_argument("--min-hit-rate", type=float, help="exit 1 when golden hit rate is under this")
    replay.add_argument("--every", help="run on a schedule (30s, 5m, 1h) instead of once")
    replay.add_argument("--max-runs", type=int, help="with --every: stop after this many runs")
    replay.add_argument("--metrics-port", type=int, help="serve /metrics on this port (scheduled prober)")
    replay.add_argument("--metrics-addr", default="0.0.0.0")
    replay.add_argument("--pushgateway", help="push the run's metrics to this Pushgateway (host:port or URL)")
    replay.add_argument("--job", default="ragwatch_replay", help="Pushgateway job name")
    replay.add_argument("--json", action="store_true", help="JSON summary instead of Markdown")
    replay.add_argument("--output", help="write the summary to this file instead of stdout")
    replay.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    replay.set_defaults(func=_replay)

    demo = commands.add_parser("demo", help="watch a bundled RAG service go bad and recover (no setup needed)")
    demo.add_argument("--requests", type=int, help="planned requests, split in 3 phases (default 240; 90 --quick)")
    demo.add_argument("--seed", type=int, default=7, help="seed of questions, faults and hallucinations")
    demo.add_argument("--hallucination-rate", type=float, default=0.2, help="share of answers the LLM falsifies")
    demo.add_argument("--quick", action="store_true", help="shortened run (a few seconds; for tests)")
    demo.add_argument("--redis-url", help="queue URL (default: $RAGWATCH_REDIS_URL, else in-process)")
    demo.add_argument("--serve", action="store_true", help="also serve /ask and /metrics with uvicorn, and stay up")
    demo.add_argument("--port", type=int, default=8000, help="port of --serve (default 8000)")
    demo.add_argument("--host", default="127.0.0.1", help="address of --serve (default 127.0.0.1)")
    demo.add_argument("--service", help="service name (default: a fresh one per run on Redis, so no state leaks in)")
    demo.add_argument("--no-progress", action="store_true", help="plain lines even on a terminal")
    demo.set_defaults(func=_demo)

    report = commands.add_parser("report", help="Markdown, JSON or HTML health report from stored scores")
    _common(report)
    report.add_argument("--jsonl", help="read score records from this JSONL file instead of the queue")
    report.add_argument("--url", help="read them from a running worker's or service's /dashboard endpoint")
    report.add_argument("--count", type=int, default=1000, help="newest score records read from the source")
    report.add_argument(
        "--state",
        help="state file for the Δ column, read then rewritten (default: $RAGWATCH_REPORT_STATE_FILE, else none)",
    )
    report.add_argument("--no-state", action="store_true", help="neither read nor write a state file")
    report.add_argument("--html", help="write a self-contained HTML report (charts, worst samples) to this file")
    report.add_argument("--worst", type=int, default=5, help="worst samples listed per metric")
    report.add_argument("--format", choices=["markdown", "json"], default="markdown")
    report.add_argument("--output", help="write the report to this file instead of stdout")
    report.set_defaults(func=_report)

    health = commands.add_parser("health", help="exit 0 when a worker sent a heartbeat recently, else 1")
    _common(health)
    health.add_argument("--max-age", type=float, default=30.0, help="seconds a heartbeat stays fresh")
    health.set_defaults(func=_health)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["eval-judge"]:  # its own parser (argparse cannot forward "--help" through REMAINDER)
        from ragwatch.scoring.evaluate import main as evaluate

        return evaluate(argv[1:])
    if argv[:1] == ["eval-alerts"]:  # the same, for its own parser
        from ragwatch.scoring.alert_eval import main as eval_alerts

        return eval_alerts(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"ragwatch: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except QueueError as exc:
        print(f"ragwatch: queue error: {exc}", file=sys.stderr)
        return EXIT_UNHEALTHY


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
