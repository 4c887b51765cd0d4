"""Every argparse parser of the command line, for the help tests: the subcommands of ``ragwatch`` and the
parsers of ``eval-judge`` and ``eval-alerts``, which parse their own arguments."""

from __future__ import annotations

import argparse


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def all_parsers() -> dict[str, argparse.ArgumentParser]:
    """``ragwatch`` itself, each subcommand, and the forwarded commands' own parsers (in their place)."""
    from ragwatch.cli import build_parser
    from ragwatch.scoring.alert_cli import _parser as alerts_parser
    from ragwatch.scoring.evaluate import _parser as judge_parser

    top = build_parser()
    parsers = {"ragwatch": top, **subcommands(top)}
    parsers["eval-judge"] = judge_parser()
    parsers["eval-alerts"] = alerts_parser()
    return parsers


def expanded_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """An action's help as ``--help`` prints it, defaults filled in, on one line."""
    formatter = parser._get_formatter()
    return " ".join(formatter._expand_help(action).split()) if action.help else ""
