"""Which way imports run: the service side never loads the worker, the judges or the scorer's deps."""

from __future__ import annotations

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


def test_documented_old_import_paths_still_work() -> None:
    """The README documented these module paths before the regroup; they re-export the moved objects."""
    import ragwatch.dashboard
    import ragwatch.evaluation_events
    import ragwatch.exposition
    import ragwatch.retrieval_metrics
    import ragwatch.sources
    from ragwatch.metrics import exposition
    from ragwatch.report import dashboard, sources
    from ragwatch.scoring import evaluation_events, retrieval_metrics

    assert ragwatch.dashboard.asgi_app is dashboard.asgi_app
    assert ragwatch.dashboard.Dashboard is dashboard.Dashboard
    assert ragwatch.sources.QueueSource is sources.QueueSource
    assert ragwatch.exposition.mark_process_dead is exposition.mark_process_dead
    assert ragwatch.evaluation_events.EvaluationEvents is evaluation_events.EvaluationEvents
    assert ragwatch.retrieval_metrics.recall_at_k is retrieval_metrics.recall_at_k
