"""Which way imports run: the service side never loads the worker, the judges or the scorer's deps."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "options",
    ["scoring='off'", "redis_url='redis://127.0.0.1:1/0', degraded_mode=False"],
    ids=["scoring-off", "redis-auto"],
)
def test_service_side_does_not_import_the_scoring_side(options: str) -> None:
    """Unless it scores in process (the memory:// default), a service never loads judges or the worker."""
    script = (
        "import sys, ragwatch\n"
        f"rw = ragwatch.RagWatch('svc', {options})\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('ragwatch.scoring', 'ragwatch.report', "
        "'ragwatch.replay', 'ragwatch.mode.sla', 'ragwatch.cli', 'starlette', 'fastapi')))\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["dashboard", "sources", "exposition", "evaluation_events", "retrieval_metrics"])
def test_the_pre_regroup_re_exports_are_gone(name: str) -> None:
    """An unreleased 0.x package keeps no old import paths: each object has one home, in its subpackage."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"ragwatch.{name}")
