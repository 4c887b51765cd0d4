"""``ragwatch demo``: the bundled service goes bad and recovers while ragwatch watches."""

from __future__ import annotations

import argparse
from typing import Any

from ragwatch.cli.common import EXIT_OK, EXIT_UNHEALTHY, settings_of

__all__ = ["register"]

DEFAULT_PORT = 8000
DEFAULT_HOST = "127.0.0.1"


def register(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    demo = commands.add_parser(
        "demo",
        help="watch a bundled RAG service go bad and recover (no setup needed)",
        description="Watch a bundled RAG service go bad and recover (no setup needed). Exit 0 when degraded "
        "mode switched on and off again, 1 when it did not or Redis cannot be reached. --port or --host "
        "implies --serve.",
        formatter_class=formatter,
    )
    add = demo.add_argument
    add("--requests", type=int, help="planned requests, split in 3 phases (default: 240; 90 with --quick)")
    add("--seed", type=int, default=7, help="seed of questions, faults and hallucinations")
    add("--hallucination-rate", type=float, default=0.2, help="share of answers the LLM falsifies, 0..1")
    add("--quick", action="store_true", help="shortened run (a few seconds; for tests)")
    add(
        "--redis-url",
        help="queue URL, a Redis to go through as in production (default: $RAGWATCH_REDIS_URL, else in-process)",
    )
    add("--serve", action="store_true", help="also serve /ask, /metrics and /dashboard with uvicorn, and stay up")
    add("--port", type=int, help=f"port of --serve; implies --serve (default: {DEFAULT_PORT})")
    add("--host", help=f"address of --serve; implies --serve (default: {DEFAULT_HOST})")
    add("--service", help="service name (default: a fresh one per run on Redis, so no state leaks in)")
    add("--no-progress", action="store_true", help="plain lines even on a terminal")
    demo.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from ragwatch.demo import run_demo

    settings_of(args)  # every RAGWATCH_* value is checked before the demo starts (its service overrides some)
    result = run_demo(
        requests=args.requests,
        seed=args.seed,
        hallucination_rate=args.hallucination_rate,
        quick=args.quick,
        redis_url=args.redis_url,
        serve=args.serve or args.port is not None or args.host is not None,
        port=DEFAULT_PORT if args.port is None else args.port,
        host=args.host or DEFAULT_HOST,
        service=args.service,
        progress=False if args.no_progress else None,
    )
    return EXIT_OK if result.entered_degraded and result.left_degraded else EXIT_UNHEALTHY
