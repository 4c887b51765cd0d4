"""The CLI's help is complete: every option of every command says what it does and what it defaults to.

Row "no help text / no default shown" of issue 28 (``replay --method``, ``--metrics-addr``, ``report --format``,
``degrade {on,off,auto,status}`` had none; ``demo --seed``, ``--hallucination-rate``, ``report --worst``,
``worker --concurrency`` showed no default). The pinned texts themselves are in ``tests/fixtures/cli_help``.
"""

from __future__ import annotations

import argparse

import pytest

from tests.cli_parsers import all_parsers, expanded_help

PARSERS = all_parsers()


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_option_has_help(name: str) -> None:
    parser = PARSERS[name]
    missing = [a.dest for a in _options(parser) if not expanded_help(parser, a).strip()]
    assert missing == [], f"ragwatch {name}: no help for {missing}"


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_option_shows_its_default(name: str) -> None:
    """A value's default is printed; an option whose default is computed (``None``: from a setting, the
    host, all rows) says so in words, "default: …"; a flag is off unless given, which needs no words."""
    parser = PARSERS[name]
    silent = []
    for action in _options(parser):
        if not action.option_strings or action.required or action.nargs == 0:
            continue  # positionals, required options, flags and --version
        text = expanded_help(parser, action)
        default = action.default
        if default is argparse.SUPPRESS or default is None:
            shown = "default" in text
        else:
            spelled = {str(default)}
            if isinstance(default, (tuple, list)):  # a list option's default as one types it: 0.05,0.1
                spelled |= {",".join(str(v) for v in default)}
            shown = any(f"default: {s}" in text or f"default {s}" in text for s in spelled)
        if not shown:
            silent.append(f"{action.option_strings[-1]} ({text!r}, default {default!r})")
    assert silent == [], f"ragwatch {name}: default not shown for {silent}"


def test_the_issue_rows_are_covered() -> None:
    """The options the issue named are among those checked (so a rename cannot drop them silently)."""
    named = {
        "replay": ["--method", "--metrics-addr"],
        "report": ["--format", "--worst"],
        "demo": ["--seed", "--hallucination-rate"],
        "worker": ["--concurrency"],
        "degrade": [],
    }
    for command, options in named.items():
        parser = PARSERS[command]
        flags = {f for a in _options(parser) for f in a.option_strings}
        assert set(options) <= flags, command
    mode = next(a for a in PARSERS["degrade"]._actions if a.dest == "mode")
    assert all(f"{choice}:" in expanded_help(PARSERS["degrade"], mode) for choice in mode.choices or ())
