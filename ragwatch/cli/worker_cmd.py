"""``ragwatch worker``: score sampled requests from the shared queue."""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from ragwatch.cli.common import (
    EXIT_OK,
    EXIT_UNHEALTHY,
    add_settings_options,
    reached_queue,
    settings_of,
    shared_queue_url,
)

__all__ = ["register"]

log = logging.getLogger("ragwatch.cli")


def register(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    worker = commands.add_parser(
        "worker",
        help="score sampled requests from the queue",
        description="Score sampled requests from the shared queue. With --burst: drain it and exit (exit 1 at "
        "once when Redis cannot be reached). Without: run until stopped, retrying an unreachable Redis with "
        "backoff (one log line per attempt).",
        formatter_class=formatter,
    )
    add_settings_options(worker)
    worker.add_argument(
        "--judge", action="append", help="judge to run (repeatable; default: the judges setting, offline)"
    )
    worker.add_argument(
        "--concurrency",
        type=int,
        help="samples scored in parallel, threads (default: $RAGWATCH_WORKER_CONCURRENCY, else 4)",
    )
    worker.add_argument("--name", help="consumer name (default: host-pid)")
    worker.add_argument(
        "--port",
        type=int,
        help="port of /metrics, /livez, /readyz and /dashboard (default: $RAGWATCH_WORKER_PORT, else 9465); "
        "none with --burst",
    )
    worker.add_argument("--burst", action="store_true", help="drain the queue, then exit")
    worker.add_argument("--max-seconds", type=float, help="stop after this many seconds (default: run until stopped)")
    worker.set_defaults(func=_worker)


def _worker(args: argparse.Namespace) -> int:
    from prometheus_client import REGISTRY

    from ragwatch.metrics.catalog import WorkerMetrics, families
    from ragwatch.mode.sla import SLAEvaluator
    from ragwatch.queue.factory import open_queue
    from ragwatch.sampling.sample import Limits
    from ragwatch.scoring.diagnosis import Thresholds
    from ragwatch.scoring.health import serve_worker_http, stall_seconds
    from ragwatch.scoring.judges import make_judges
    from ragwatch.scoring.worker import Worker

    settings = settings_of(args, worker_concurrency=args.concurrency, worker_port=args.port)
    judges = make_judges(args.judge or settings.judges, settings)
    options = {
        "maxlen": settings.queue_maxlen,
        "scores_maxlen": settings.scores_maxlen,
        "applied_ttl_seconds": settings.idempotency_ttl_seconds,
        "scores_max_bytes": settings.scores_max_bytes,
        "idempotency_max_bytes": settings.idempotency_max_bytes,
        "min_headroom_ratio": settings.redis_min_headroom_ratio,
    }
    if args.burst:  # a one-shot run that cannot reach the queue fails now, in one line
        queue = reached_queue(settings, "worker", **options)
    else:  # a long-running worker starts anyway and retries (Redis may come up after it, as in compose)
        queue = open_queue(shared_queue_url(settings, "worker"), settings.service, **options)
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
        thresholds=Thresholds.of(settings),
        limits=Limits(
            settings.max_chunks, settings.max_chunk_chars, settings.max_answer_chars, settings.max_question_chars
        ),
        max_sample_bytes=settings.max_sample_bytes,
        judge_time_budget_s=settings.judge_time_budget_s,
    )
    worker.stall_seconds = stall_seconds(worker, settings, judges)
    worker.scoring.content = not settings.content_off
    server = None
    if settings.worker_port is not None and not args.burst:
        dashboard = None
        if settings.dashboard:
            from ragwatch.report.dashboard import Dashboard
            from ragwatch.report.sources import QueueSource

            dashboard = Dashboard.from_settings(QueueSource(queue), settings)  # the dashboard_token gate
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
