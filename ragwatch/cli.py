"""The ``ragwatch`` command: a thin layer that parses arguments, calls the library, maps errors to exit codes.

Exit codes: 0 success, 2 bad configuration or usage. The library itself never calls ``sys.exit``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from . import __version__
from .errors import ConfigError
from .settings import load_settings

__all__ = ["main"]

EXIT_OK = 0
EXIT_CONFIG = 2


def _config(args: argparse.Namespace) -> int:
    settings = load_settings(args.config_file)
    print(json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragwatch", description="Watch a live RAG service.")
    parser.add_argument("--version", action="version", version=f"ragwatch {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    commands = parser.add_subparsers(dest="command", required=True)
    config = commands.add_parser("config", help="validate the settings (env, YAML) and print them as JSON")
    config.add_argument("--config-file", help="YAML settings file (default: $RAGWATCH_CONFIG_FILE)")
    config.set_defaults(func=_config)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"ragwatch: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
