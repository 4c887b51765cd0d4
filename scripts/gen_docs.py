"""Write the reference pages of the docs site from the code, so they cannot drift from it.

    python scripts/gen_docs.py            # rewrite the generated pages and sections
    python scripts/gen_docs.py --check    # exit 1, naming the stale files, if any differs from the code

What is generated, and from what:

- ``docs/configuration.md``, between ``<!-- generated:settings -->`` markers: one row per field of
  :class:`ragwatch.settings.Settings` (environment name, type, default, allowed range, description);
- ``docs/metrics.md``, between ``<!-- generated:metrics -->`` markers: one row per family the metric classes
  of :mod:`ragwatch.metrics.catalog` register (type, labels, help text);
- ``docs/cli.md``, whole: every command's ``--help``, read from the parser the ``ragwatch`` command runs;
- ``docs/api.md``, whole: one mkdocstrings entry per name in ``ragwatch.__all__``.

``tests/test_docs.py`` runs the same functions and fails when a committed page differs from their output.
Run it with the project's interpreter (``.venv/bin/python``): argparse words its help per Python version.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: Width of the rendered --help, the same as the CLI help snapshots in tests/fixtures/cli_help.
HELP_COLUMNS = "100"


def _cell(text: str) -> str:
    """Text safe inside one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(value: str) -> str:
    """An inline code span that survives backticks in the value."""
    fence = "``" if "`" in value else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{value}{pad}{fence}"


# -- settings -----------------------------------------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    """A reader's name for a settings type: ``float``, ``list[str]``, ``"auto" or "off"`` (``None`` left out:
    the default column says "unset")."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    if origin is Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{origin.__name__}[{inner}]"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: Any) -> str:
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is None or hasattr(value, "get_secret_value"):
        return "unset"
    if isinstance(value, tuple):
        value = list(value)
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list, bool, int, float)) else str(value)
    if len(text) > 60:  # long defaults (the latency buckets, the notice) are summarised, not pasted
        text = text[:57] + "…"
    return _code(text)


def _constraints(field: Any) -> list[Any]:
    """The constraint objects on a field, including those inside ``Annotated`` aliases under ``Optional``."""
    found = list(field.metadata)
    stack = [field.annotation]
    while stack:
        annotation = stack.pop()
        args = get_args(annotation)
        if get_origin(annotation) is Annotated:
            found.extend(args[1:])
            args = args[:1]
        stack.extend(args)
    for item in list(found):  # a Field() inside Annotated carries its own metadata list
        found.extend(getattr(item, "metadata", ()))
    return found


def _bounds(field: Any) -> str:
    """The range pydantic enforces on a field (``ge``/``gt``/``le``/``lt``, lengths, a pattern)."""
    parts: list[str] = []
    for item in _constraints(field):
        for attr, symbol in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            bound = getattr(item, attr, None)
            if isinstance(bound, (int, float)):
                parts.append(f"{symbol} {bound}")
        for attr, label in (("min_length", "length ≥"), ("max_length", "length ≤")):
            bound = getattr(item, attr, None)
            if isinstance(bound, int):
                parts.append(f"{label} {bound}")
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            parts.append(f"matches {_code(pattern)}")
    return ", ".join(dict.fromkeys(parts))


def settings_table() -> str:
    """The configuration reference: every setting, its environment variable, type, default and meaning."""
    from ragwatch.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "RAGWATCH_")
    rows = [
        "| setting | environment | type | default | allowed | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        rows.append(
            "| "
            + " | ".join(
                [
                    _code(name),
                    _code(f"{prefix}{name.upper()}"),
                    _code(_type_name(field.annotation)),
                    _cell(_default(field)),
                    _cell(_bounds(field)),
                    _cell(field.description or ""),
                ]
            )
            + " |"
        )
    return "\n".join(rows)


# -- metrics ------------------------------------------------------------------------------------------------


def _metric_objects(obj: Any) -> Iterator[Any]:
    for value in vars(obj).values():
        if hasattr(value, "_labelnames") or hasattr(value, "labelnames"):
            yield value


def metrics_table() -> str:
    """The metrics reference: every family of :mod:`ragwatch.metrics.catalog`, as a scrape shows it."""
    from prometheus_client import CollectorRegistry

    from ragwatch.metrics import catalog

    registry = CollectorRegistry()
    seen: dict[str, tuple[str, tuple[str, ...], str]] = {}
    classes = [
        value
        for name, value in vars(catalog).items()
        if isinstance(value, type) and name.endswith("Metrics") and value.__module__ == catalog.__name__
    ]
    for cls in classes:
        families = catalog.families(cls, registry)
        for metric in _metric_objects(families):
            labels = tuple(getattr(metric, "_labelnames", ()) or getattr(metric, "labelnames", ()))
            for family in metric.describe():
                name = family.name + ("_total" if family.type == "counter" else "")
                seen.setdefault(name, (family.type, labels, family.documentation))
    missing = catalog.METRIC_NAMES - set(seen)
    if missing:  # a family in METRIC_NAMES that no metric class registers: the page would silently omit it
        raise SystemExit(f"metric families without a class in ragwatch.metrics.catalog: {sorted(missing)}")
    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for name in sorted(seen):
        kind, labels, help_text = seen[name]
        rows.append(f"| {_code(name)} | {kind} | {', '.join(labels)} | {_cell(help_text)} |")
    return "\n".join(rows)


# -- command line -------------------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(name, one-line help) of each subcommand, in the order the parser lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return [(name, helps.get(name, "")) for name in action.choices]
    return []


def _help_of(argv: list[str]) -> str:
    """What ``ragwatch ARGV --help`` prints, read in process from the command's own entry point."""
    from ragwatch.cli import main

    out = io.StringIO()
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(io.StringIO()),
            contextlib.suppress(SystemExit),
        ):
            main([*argv, "--help"])
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return out.getvalue().rstrip() + "\n"


def cli_page() -> str:
    """The CLI reference page: the top-level help, then each command's."""
    from ragwatch.cli import build_parser

    parts = [
        "# Command-line reference",
        "",
        "<!-- Generated by scripts/gen_docs.py from the parsers in ragwatch/cli.py: do not edit by hand. -->",
        "",
        "Every command reads its settings as `RagWatch(...)` does: `RAGWATCH_*` environment variables and the",
        "YAML file of `RAGWATCH_CONFIG_FILE` (or `--config-file`), then the options below. The exit codes:",
        "0 success, 1 an unhealthy or failed result (a floor not met, no worker alive, no score records, the",
        "queue unreachable), 2 a usage or configuration error.",
        "",
        "## ragwatch",
        "",
        "```text",
        _help_of([]).rstrip(),
        "```",
    ]
    for name, summary in _subcommands(build_parser()):
        parts += ["", f"## ragwatch {name}", ""]
        if summary:
            parts += [summary[0].upper() + summary[1:] + ".", ""]
        parts += ["```text", _help_of([name]).rstrip(), "```"]
    return "\n".join(parts) + "\n"


# -- Python API ---------------------------------------------------------------------------------------------


def api_page() -> str:
    """The API reference page: one mkdocstrings entry per public name, in ``__all__``'s order."""
    import ragwatch

    parts = [
        "# Python API",
        "",
        "<!-- Generated by scripts/gen_docs.py from ragwatch.__all__: do not edit by hand. -->",
        "",
        "Everything below is importable from the top-level package (`import ragwatch`) and is the public",
        "surface: names elsewhere in the package may move between minor versions. The integrations have their",
        "own modules (`ragwatch.integrations.langchain`, `.llamaindex`, `.openai`, `.otel`).",
        "",
        "`ragwatch.__version__` is the installed version, as a string.",
    ]
    for name in ragwatch.__all__:
        if name.startswith("__"):
            continue
        parts += ["", f"::: ragwatch.{name}"]
    return "\n".join(parts) + "\n"


# -- pages --------------------------------------------------------------------------------------------------


def replace_section(text: str, name: str, body: str) -> str:
    """``text`` with the part between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` replaced."""
    start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"the page lacks the {start} … {end} markers")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", text, count=1)


def outputs() -> dict[Path, Callable[[str], str]]:
    """Each generated file and how its new text follows from its current text."""
    return {
        DOCS / "configuration.md": lambda text: replace_section(text, "settings", settings_table()),
        DOCS / "metrics.md": lambda text: replace_section(text, "metrics", metrics_table()),
        DOCS / "cli.md": lambda _: cli_page(),
        DOCS / "api.md": lambda _: api_page(),
    }


def stale() -> list[Path]:
    """The generated files whose committed text differs from what the code generates now."""
    found = []
    for path, render in outputs().items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if render(current) != current:
            found.append(path)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated page is out of date")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale()
        for path in out_of_date:
            print(f"out of date: {path.relative_to(ROOT)} (run python scripts/gen_docs.py)", file=sys.stderr)
        return 1 if out_of_date else 0
    for path, render in outputs().items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        new = render(current)
        if new != current:
            path.write_text(new, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
