"""``ragwatch config``: validate the settings and print them."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ragwatch.cli.common import EXIT_OK, settings_of

__all__ = ["register"]


def register(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    config = commands.add_parser(
        "config",
        help="validate the settings (env, YAML) and print them as JSON",
        description="Validate the settings (arguments, RAGWATCH_* variables, the YAML file) and print them as JSON.",
        formatter_class=formatter,
    )
    config.add_argument("--config-file", help="YAML settings file (default: $RAGWATCH_CONFIG_FILE, else none)")
    config.set_defaults(func=_config)


def _config(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    # ensure_ascii=False: the notice and other texts print as the UTF-8 a person wrote, not \uXXXX escapes
    print(json.dumps(settings.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False))
    return EXIT_OK
