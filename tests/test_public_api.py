"""The public surface a restructure must not move: ``ragwatch.__all__`` and every CLI command's help.

The help texts in ``tests/fixtures/cli_help/`` were written from the tree before the package was regrouped
into subpackages; comparing against them proves the CLI did not change under the move. A deliberate CLI
change rewrites the fixture in the same commit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ragwatch

ROOT = Path(__file__).resolve().parent.parent
HELP = ROOT / "tests" / "fixtures" / "cli_help"

PUBLIC = [
    "CaptureError",
    "Chunk",
    "ChunkError",
    "ConfigError",
    "Price",
    "PricingTable",
    "QueueError",
    "RagWatch",
    "RagwatchError",
    "RagwatchMiddleware",
    "ResponseError",
    "Run",
    "Settings",
    "Usage",
    "__version__",
    "current_run",
    "force_sample",
    "instrument",
    "load_settings",
    "metrics_asgi_app",
    "normalize_chunks",
    "start_metrics_server",
    "suppress",
    "uninstrument",
]


def test_all_is_pinned() -> None:
    assert ragwatch.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(ragwatch, name) is not None, name


def _help(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "ragwatch", *args, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("fixture", sorted(p.stem for p in HELP.glob("*.txt")))
def test_cli_help_unchanged(fixture: str) -> None:
    args = () if fixture == "ragwatch" else (fixture,)
    assert _help(*args) == (HELP / f"{fixture}.txt").read_text()


def test_every_command_has_a_pinned_help() -> None:
    from ragwatch.cli import build_parser

    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert sorted(p.stem for p in HELP.glob("*.txt")) == sorted(["ragwatch", *commands])
