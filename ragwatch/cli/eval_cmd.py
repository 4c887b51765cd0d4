"""``ragwatch eval-judge`` and ``ragwatch eval-alerts``: listed here, parsed by their own modules.

argparse cannot forward ``--help`` through ``REMAINDER``, so :func:`ragwatch.cli.main` hands their arguments
to :data:`FORWARDED` before it parses anything; the subparsers below only put them in the command list.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["FORWARDED", "register"]


def _eval_judge(argv: Sequence[str]) -> int:
    from ragwatch.scoring.evaluate import main

    return main(argv)


def _eval_alerts(argv: Sequence[str]) -> int:
    from ragwatch.scoring.alert_cli import main

    return main(argv)


#: Command name → its own entry point, given the arguments after the name.
FORWARDED: dict[str, Callable[[Sequence[str]], int]] = {"eval-judge": _eval_judge, "eval-alerts": _eval_alerts}


def register(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    helps = {
        "eval-judge": "measure a judge on labelled data (ragwatch eval-judge --help)",
        "eval-alerts": "would the alert lines fire on labelled data (ragwatch eval-alerts --help)",
    }
    for name, text in helps.items():
        parser = commands.add_parser(name, add_help=False, help=text, formatter_class=formatter)
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=f"arguments of ragwatch {name}, see its --help")
        parser.set_defaults(func=lambda args, run=FORWARDED[name]: run(args.rest))
