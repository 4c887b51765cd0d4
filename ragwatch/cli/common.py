"""What every command shares: exit codes, the help formatter, the settings options, the one settings check,
and the start-up check of the queue.

Every command validates the settings through :func:`settings_of` before it does anything else, so a bad
``RAGWATCH_*`` value fails every command (and ``RagWatch(...)``) with the same one-line error, exit 2.
"""

from __future__ import annotations

import argparse
from typing import Any

from ragwatch.errors import ConfigError

__all__ = [
    "EXIT_CONFIG",
    "EXIT_OK",
    "EXIT_UNHEALTHY",
    "HelpFormatter",
    "add_settings_options",
    "reached_queue",
    "settings_of",
    "shared_queue_url",
]

EXIT_OK = 0
EXIT_UNHEALTHY = 1
EXIT_CONFIG = 2

#: The ``--redis-url`` help of the commands that need a queue other processes share.
SHARED_QUEUE_HELP = (
    "queue URL, a Redis other processes share (default: $RAGWATCH_REDIS_URL; memory:// is refused: it lives "
    "inside one process)"
)


class HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: …)`` to an option's help unless the help already names its default in words
    (``default: $RAGWATCH_SERVICE``), or there is none to show (``None``, an off flag)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.required:
            return text
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"


def add_settings_options(parser: argparse.ArgumentParser, redis_help: str | None = SHARED_QUEUE_HELP) -> None:
    """``--config-file`` and ``--service``, and ``--redis-url`` with the help the command can keep
    (``None``: the command takes no queue URL)."""
    parser.add_argument("--config-file", help="YAML settings file (default: $RAGWATCH_CONFIG_FILE, else none)")
    parser.add_argument("--service", help="service name (default: $RAGWATCH_SERVICE, else 'default')")
    if redis_help is not None:
        parser.add_argument("--redis-url", help=redis_help)


def settings_of(args: argparse.Namespace, **overrides: Any) -> Any:
    """The validated settings of a command: its ``--config-file``/``--service``/``--redis-url`` (those it has)
    over the environment and the YAML file; :class:`ConfigError` (exit 2) naming the bad variable."""
    from ragwatch.settings import load_settings

    given = {name: getattr(args, name, None) for name in ("service", "redis_url")}
    return load_settings(getattr(args, "config_file", None), **given, **overrides)


def shared_queue_url(settings: Any, command: str) -> str:
    """The commands that talk to other processes need a shared queue: the memory backend is per process."""
    if not settings.redis_url or settings.redis_url.startswith("memory:"):
        raise ConfigError(
            f"ragwatch {command} needs a shared queue: set RAGWATCH_REDIS_URL or pass --redis-url "
            "(memory:// lives inside one process)"
        )
    return str(settings.redis_url)


def reached_queue(settings: Any, command: str, **options: Any) -> Any:
    """The shared queue, checked once: an unreachable Redis is a one-line :class:`QueueError` (exit 1)."""
    from ragwatch.queue.reach import open_reached_queue

    return open_reached_queue(shared_queue_url(settings, command), settings.service, **options)
