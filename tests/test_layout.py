"""Which way imports run: the service side never loads the worker, the judges or the scorer's deps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_service_side_does_not_import_the_scoring_side() -> None:
    script = (
        "import sys, ragwatch\n"
        "rw = ragwatch.RagWatch('svc')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('ragwatch.worker', 'ragwatch.judges', "
        "'ragwatch.health', 'starlette', 'fastapi')))\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
