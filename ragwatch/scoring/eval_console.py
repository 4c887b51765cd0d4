"""What the evaluation commands (``eval-judge``, ``eval-alerts``) share on the command line: the settings
options, the judge built as a worker builds it, the progress bar, and the tables they print.

Tables are rich tables on a terminal and aligned plain text otherwise, so a pipe or a CI log gets every
column uncut (rich would fit them to 80 columns), and the commands run where rich is not installed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = [
    "Progress",
    "Table",
    "add_settings_options",
    "make_judge",
    "noop",
    "plain_lines",
    "print_tables",
    "progress_bar",
    "render_tables",
]

#: Advance a progress bar by this many items.
Progress = Callable[[int], None]
#: A title, its column names and its rows, every cell already formatted.
Table = tuple[str, list[str], list[list[str]]]


def noop(_: int) -> None:
    return None


def add_settings_options(parser: argparse.ArgumentParser) -> None:
    """The options of the evaluation commands that say where the settings (and the LLM judge) come from."""
    parser.add_argument("--config-file", help="YAML settings file (default: $RAGWATCH_CONFIG_FILE, else none)")
    parser.add_argument("--judge-base-url", help="LLM judge endpoint (default: $RAGWATCH_JUDGE_BASE_URL)")
    parser.add_argument("--judge-model", help="LLM judge model (default: $RAGWATCH_JUDGE_MODEL)")


def make_judge(name: str, settings: Any) -> Any:
    """The judge as a worker would build it: from the settings (environment, ``--config-file``, flags), so
    ``--judge llm`` and ``--judge cascade`` reach the endpoint in ``RAGWATCH_JUDGE_BASE_URL``/``_MODEL``."""
    from ragwatch.scoring.judges import make_judges

    return make_judges([name], settings)[0]


@contextmanager
def progress_bar(total: int, description: str, enabled: bool) -> Iterator[Progress]:
    """A rich progress bar on stderr when it is a terminal; a no-op otherwise (pipes, CI, tests)."""
    if not enabled or not sys.stderr.isatty():
        yield noop
        return
    try:
        from rich.console import Console
        from rich.progress import Progress as RichProgress
    except ImportError:
        yield noop
        return
    with RichProgress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def plain_lines(title: str, columns: list[str], body: list[list[str]]) -> list[str]:
    """One table as aligned plain-text lines: the title, the header, a rule, the rows."""
    widths = [max(len(r[i]) for r in [columns, *body]) for i in range(len(columns))]
    lines = [title, "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in body]
    return lines


def render_tables(tables: Sequence[Table]) -> str:
    """Tables as plain text, a blank line between them."""
    return "\n\n".join("\n".join(plain_lines(*table)) for table in tables)


def print_tables(tables: Sequence[Table]) -> None:
    """Rich tables on a terminal; plain ones otherwise (see the module docstring)."""
    if not sys.stdout.isatty():
        print(render_tables(tables))
        return
    try:
        from rich.console import Console
        from rich.table import Table as RichTable
    except ImportError:
        print(render_tables(tables))
        return
    console = Console()
    for title, columns, body in tables:
        table = RichTable(title=title)
        for i, column in enumerate(columns):
            table.add_column(column, justify="left" if i == 0 else "right")
        for row in body:
            table.add_row(*row)
        console.print(table)
