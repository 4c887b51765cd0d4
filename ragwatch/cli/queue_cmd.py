"""``ragwatch health`` and ``ragwatch degrade``: the operator's two questions to the shared queue."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ragwatch.cli.common import EXIT_OK, EXIT_UNHEALTHY, add_settings_options, reached_queue, settings_of

__all__ = ["register"]

MODES = {
    "on": "force degraded mode on",
    "off": "force it off",
    "auto": "give the decision back to the SLA evaluator",
    "status": "print the state without changing it",
}


def register(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    degrade = commands.add_parser(
        "degrade",
        help="force degraded mode on/off, give it back to the SLA (auto)",
        description="Force the service's degraded mode on or off, give it back to the SLA evaluator, or show it.",
        formatter_class=formatter,
    )
    add_settings_options(degrade)
    degrade.add_argument("mode", choices=list(MODES), help="; ".join(f"{name}: {what}" for name, what in MODES.items()))
    degrade.set_defaults(func=_degrade)

    health = commands.add_parser(
        "health",
        help="exit 0 when a worker sent a heartbeat recently, else 1",
        description="Exit 0 when a worker sent a heartbeat recently and Redis accepts writes, else 1 (also when "
        "Redis cannot be reached); prints the queue's figures as JSON.",
        formatter_class=formatter,
    )
    add_settings_options(health)
    health.add_argument("--max-age", type=float, default=30.0, help="seconds a heartbeat stays fresh")
    health.set_defaults(func=_health)


def _health(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    queue = reached_queue(settings, "health")
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

    settings = settings_of(args)
    queue = reached_queue(settings, "degrade")
    try:
        state = queue.read_mode() if args.mode == "status" else queue.set_override(args.mode)
    finally:
        queue.close()
    # "degraded" is what replicas do (the override included), not the stored field of the window's decision
    print(json.dumps({"service": settings.service, **state.to_fields(), "degraded": effective(state)}))
    return EXIT_OK
