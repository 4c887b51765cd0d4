"""The ``ragwatch`` command: a thin layer that parses arguments, calls the library, maps errors to exit codes.

Exit codes: 0 success; 1 unhealthy (``health``: no live worker, or Redis full), a queue that cannot be
reached (``worker --burst``, ``demo``, ``report``, ``health``, ``degrade`` fail at once, in one line) or
nothing to report (``report``); 2 bad configuration or usage (every command validates the settings first,
and names the ``RAGWATCH_*`` variable at fault); 130 interrupted; 141 the reader of the output went away
(``ragwatch report | head``), quietly, as other Unix tools do. The library itself never calls ``sys.exit``.

One module per command (``*_cmd.py``, each with its ``register``), the shared pieces in :mod:`.common`.
Logging: ragwatch's own records at ``--log-level``; other libraries' (httpx, uvicorn, …) only from WARNING
up unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from ragwatch._version import __version__
from ragwatch.cli import config_cmd, demo_cmd, eval_cmd, labels_cmd, queue_cmd, replay_cmd, report_cmd, worker_cmd
from ragwatch.cli.common import EXIT_CONFIG, EXIT_UNHEALTHY, HelpFormatter
from ragwatch.errors import ConfigError, QueueError

__all__ = ["build_parser", "main"]

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a Unix tool whose reader went away
LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]

#: In the order ``ragwatch --help`` lists them.
COMMANDS = (config_cmd, worker_cmd, queue_cmd, eval_cmd, labels_cmd, replay_cmd, demo_cmd, report_cmd)


def _logging_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """``--log-level`` and ``--verbose``, accepted before and after the command name; a subcommand's copy
    defaults to SUPPRESS so that it does not overwrite what was given before the name."""
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="INFO" if top else argparse.SUPPRESS,
        help="level of ragwatch's own log lines (default: INFO)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="also show other libraries' INFO and DEBUG lines (httpx requests, …)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragwatch", description="Watch a live RAG service.", formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"ragwatch {__version__}", help="print the version")
    _logging_options(parser, top=True)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="ragwatch COMMAND --help: its options"
    )
    for module in COMMANDS:
        module.register(commands, HelpFormatter)
    for name, sub in commands.choices.items():
        if name not in eval_cmd.FORWARDED:
            _logging_options(sub, top=False)
    return parser


class _LibraryFilter(logging.Filter):
    """Other libraries' records below WARNING are dropped; ragwatch's own pass at the chosen level."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.split(".", 1)[0] == "ragwatch"


def _configure_logging(level: str, verbose: bool) -> None:
    """One stderr handler on the root logger, unless the process configured logging itself (a test, a
    program that calls :func:`main`): then its handlers are left exactly as they are."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if not verbose:
        handler.addFilter(_LibraryFilter())
    root.addHandler(handler)
    root.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    forwarded = eval_cmd.FORWARDED.get(argv[0]) if argv else None
    try:
        if forwarded is not None:  # its own parser (argparse cannot forward "--help" through REMAINDER)
            code = forwarded(argv[1:])
        else:
            args = build_parser().parse_args(argv)
            _configure_logging(args.log_level, args.verbose)
            code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except ConfigError as exc:
        print(f"ragwatch: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except QueueError as exc:
        print(f"ragwatch: queue error: {exc}", file=sys.stderr)
        return EXIT_UNHEALTHY
    except BrokenPipeError:
        # the reader (head, less) is gone: nothing more to say, and nothing may be flushed at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("ragwatch: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
