"""``ragwatch report``: the Markdown, JSON or HTML health report from stored scores."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ragwatch.cli.common import (
    EXIT_OK,
    EXIT_UNHEALTHY,
    SHARED_QUEUE_HELP,
    add_settings_options,
    reached_queue,
    settings_of,
)
from ragwatch.errors import ConfigError

__all__ = ["register"]


def register(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    report = commands.add_parser(
        "report",
        help="Markdown, JSON or HTML health report from stored scores",
        description="A health report from stored score records: the shared queue's, an exported JSONL file's "
        "(--jsonl) or a running worker's or service's (--url). Exit 1 when there is nothing to report or the "
        "source cannot be reached.",
        formatter_class=formatter,
    )
    add_settings_options(report, redis_help=SHARED_QUEUE_HELP + "; not needed with --jsonl or --url")
    add = report.add_argument
    add("--jsonl", help="read score records from this JSONL file instead of the queue (default: the queue)")
    add("--url", help="read them from a running worker's or service's /dashboard endpoint (default: the queue)")
    add("--count", type=int, default=1000, help="newest score records read from the source")
    add(
        "--since",
        help="report only requests from this time on: epoch seconds, ISO 8601 (local time unless it names a "
        "zone) or a duration ago like 15m, 2h, 1d (default: no lower bound)",
    )
    add("--until", help="and up to this time, written the same ways (default: no upper bound)")
    add(
        "--state",
        help="state file for the Δ column, read then rewritten (default: $RAGWATCH_REPORT_STATE_FILE, else none)",
    )
    add("--no-state", action="store_true", help="neither read nor write a state file")
    add("--html", help="write a self-contained HTML report, charts and worst samples, to this file (default: none)")
    add("--worst", type=int, default=5, help="worst samples listed per metric")
    add("--format", choices=["markdown", "json"], default="markdown", help="format of the text report")
    add("--output", help="write the report to this file (default: stdout)")
    report.set_defaults(func=_report)


def _source(args: argparse.Namespace, settings: Any) -> tuple[Any, Any]:
    """The score records' source, and the queue to close afterwards (``None`` when it is not the queue)."""
    from ragwatch.report.sources import EndpointSource, JsonlSource, QueueSource

    if args.jsonl and args.url:
        raise ConfigError("give one source: --jsonl or --url (or neither, for the queue)")
    if args.jsonl:
        return JsonlSource(args.jsonl), None
    if args.url:
        token = settings.dashboard_token.get_secret_value() if settings.dashboard_token is not None else None
        return EndpointSource(args.url, token=token), None
    try:
        queue = reached_queue(settings, "report")
    except ConfigError as exc:
        raise ConfigError(f"{exc}; or read an export with --jsonl FILE or a live endpoint with --url URL") from None
    return QueueSource(queue), queue


def _report(args: argparse.Namespace) -> int:
    from ragwatch.report.build import build_report, default_thresholds, load_state, save_state
    from ragwatch.report.dashboard import live_panel
    from ragwatch.report.select import time_range

    settings = settings_of(args)
    # A bad --since/--until is a one-line ConfigError (exit 2) before any source is opened.
    span = time_range(since=args.since, until=args.until, now=time.time(), default=None)
    thresholds = default_thresholds(settings)
    source, queue = _source(args, settings)
    try:
        records = source.records(args.count)
        mode = source.mode()
        # The now-panel reads the queue's live windows: before the queue is closed.
        live = live_panel(source, records, thresholds, settings.sla_policy(), mode)
    finally:
        if queue is not None:
            queue.close()
    if not records:
        print(f"ragwatch: no score records in {source.name}: nothing to report", file=sys.stderr)
        return EXIT_UNHEALTHY
    state_path = None if args.no_state else (args.state or settings.report_state_file)
    previous = load_state(state_path) if state_path else None
    report = build_report(records, thresholds, previous, worst=args.worst, span=span, live=live)
    if args.html:
        from ragwatch.report.dashboard import render_html
        from ragwatch.report.view import view_data

        data = view_data(
            records,
            thresholds,
            settings.sla_policy(),
            mode,
            previous,
            source=source.name,
            worst=args.worst,
            span=span,
            live=live,
            trace_url=settings.trace_url_template,
        )
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write(render_html(data))
        print(f"ragwatch: wrote {args.html} ({len(records)} scored samples from {source.name})", file=sys.stderr)
    if state_path:  # before printing: a reader that stops early (| head) must not lose the Δ baseline
        save_state(state_path, report)
    if not args.html or args.output or args.format == "json":
        text = (
            json.dumps(report.to_dict(), indent=2, ensure_ascii=False) if args.format == "json" else report.markdown()
        )
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        else:
            print(text)
    return EXIT_OK
