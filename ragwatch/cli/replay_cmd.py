"""``ragwatch replay``: probe the live service with golden and recent questions."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from ragwatch.cli.common import EXIT_OK, EXIT_UNHEALTHY, add_settings_options, settings_of
from ragwatch.errors import ConfigError

__all__ = ["register"]

log = logging.getLogger("ragwatch.cli")


def register(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    replay = commands.add_parser(
        "replay",
        help="probe the live service with golden / recent questions",
        description="Probe the live service with golden and recent questions; exit 1 when a --min-* line is missed.",
        formatter_class=formatter,
    )
    add_settings_options(
        replay,
        redis_help="queue URL whose score records --traffic reads recent questions from "
        "(default: $RAGWATCH_REDIS_URL, else this process's empty memory://)",
    )
    add = replay.add_argument
    add("--url", required=True, help="endpoint to probe, e.g. http://kb-qa:8000/ask")
    add("--method", default="POST", help="HTTP method of every probe")
    add("--header", action="append", help="'Name: value' sent with every probe (repeatable; default: none)")
    add("--body", help='JSON body template; "{question}" in a string value is replaced (default: {"question": …})')
    add("--question-field", help="dotted body field set to the question (default: question)")
    add("--answer", default="answer", help="dotted response path of the answer")
    add("--chunk-ids", default="chunks[].id", help="response path of chunk ids ('' for none)")
    add("--chunk-texts", help="response path of chunk texts (default: none)")
    add("--stream-text", default="delta", help="SSE: path of the text delta in a JSON event")
    add("--golden", help="golden set, JSONL of question, relevant_ids, reference_answer (default: none)")
    add("--traffic", type=int, default=0, help="also replay N recent distinct sampled questions")
    add("--k", type=int, default=5, help="K of Hit Rate / Recall / Precision / MRR")
    add("--concurrency", type=int, default=4, help="requests in flight")
    add("--timeout", type=float, default=10.0, help="seconds per request (whole response)")
    add("--retries", type=int, default=0, help="retries on timeout/connect/5xx")
    add("--min-availability", type=float, help="exit 1 when availability is under this (default: no line)")
    add("--min-hit-rate", type=float, help="exit 1 when golden hit rate is under this (default: no line)")
    add("--every", help="run on a schedule (30s, 5m, 1h) instead of once (default: once)")
    add("--max-runs", type=int, help="with --every: stop after this many runs (default: until stopped)")
    add("--metrics-port", type=int, help="serve /metrics on this port, for a scheduled prober (default: none)")
    add("--metrics-addr", default="0.0.0.0", help="address of the --metrics-port server")
    add("--pushgateway", help="push the run's metrics to this Pushgateway, host:port or URL (default: none)")
    add("--job", default="ragwatch_replay", help="Pushgateway job name")
    add("--json", action="store_true", help="JSON summary instead of Markdown")
    add("--output", help="write the summary to this file (default: stdout)")
    add("--no-progress", action="store_true", help="no progress bar even on a terminal")
    replay.set_defaults(func=_replay)


def _headers(items: list[str] | None) -> dict[str, str]:
    headers = {}
    for item in items or ():
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header must be 'Name: value', got {item!r}")
        headers[name.strip()] = value.strip()
    return headers


def _replay(args: argparse.Namespace) -> int:
    from ragwatch.replay.options import ReplayOptions, parse_duration
    from ragwatch.replay.prober import run

    settings = settings_of(args)
    options = ReplayOptions(
        url=args.url,
        service=settings.service,
        method=args.method,
        headers=_headers(args.header),
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
