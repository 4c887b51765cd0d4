"""Helpers shared by the benchmark scripts: which code was measured, and a table printer.

rich makes the table nicer when it is installed; it is not a dependency of ragwatch.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from importlib import metadata
from pathlib import Path

import ragwatch

__all__ = ["dist_version", "print_table", "source_fingerprint", "usable_cpus"]


def source_fingerprint() -> str:
    """Which ragwatch code was measured: a hash of its .py files (it has no commit to name yet)."""
    package = Path(ragwatch.__file__).resolve().parent
    files = sorted(package.rglob("*.py"))
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.relative_to(package).as_posix().encode())
        digest.update(f.read_bytes())
    newest = max(f.stat().st_mtime for f in files)
    stamp = dt.datetime.fromtimestamp(newest, dt.timezone.utc).isoformat(timespec="seconds")
    return f"{package} sha256:{digest.hexdigest()[:12]} (newest file {stamp})"


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(c), *(len(r[i]) for r in rows if r)) for i, c in enumerate(columns)]

        def line(cells: list[str]) -> str:
            return "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(cells, widths, strict=True))
            )

        print(title)
        print(line(columns))
        print("  ".join("-" * w for w in widths))
        for row in rows:
            print(line(row) if row else "")
        return
    table = Table(title=title)
    for i, c in enumerate(columns):
        table.add_column(c, justify="left" if i == 0 else "right")
    for row in rows:
        if row:
            table.add_row(*row)
        else:
            table.add_section()
    Console(width=max(150, len(title) + 4)).print(table)


def usable_cpus() -> int | None:
    """Cores this process may run on (its affinity mask), which is what a benchmark can use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count()


def dist_version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"
