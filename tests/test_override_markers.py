"""Issue 27, markers: an operator's ``ragwatch degrade on|off|auto`` is drawn on every chart at the time it was set.

The override and its time go through the mode state's compare-and-set on a real redis-server, by the real
command; the page data (``/dashboard.json``) then carries an ``override`` marker at that time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import orjson
from prometheus_client import CollectorRegistry

from ragwatch.mode.degrade import MAX_OVERRIDE_LOG, ModeState, with_override
from ragwatch.queue.factory import open_queue
from ragwatch.report.dashboard import Dashboard
from ragwatch.report.sources import EndpointSource, QueueSource
from ragwatch.scoring.health import serve_worker_http
from ragwatch.scoring.worker import Worker
from tests.scored import scored_records
from tests.test_cli import run
from tests.test_dashboard import POLICY, THRESHOLDS


def _overrides(dashboard: Dashboard) -> list[tuple[float, str]]:
    response = dashboard.handle("/dashboard.json", "range=15m")
    assert response is not None and response.status == 200
    data = json.loads(response.body)
    return [(m["t"], m["label"]) for m in data["markers"] if m["kind"] == "override"]


def test_degrade_on_then_auto_each_leave_a_marker_at_their_time(redis_url: str) -> None:
    queue = open_queue(redis_url, "kb-qa")
    try:
        records = scored_records(start=time.time() - 300, n=60)
        queue.apply_many([(r["sample_id"], orjson.dumps(r), r["scores"], r["created_at"]) for r in records])
        dashboard = Dashboard(QueueSource(queue), THRESHOLDS, POLICY, cache_seconds=0.0)
        assert _overrides(dashboard) == []

        before = time.time()
        out = run("degrade", "on", "--service", "kb-qa", "--redis-url", redis_url)
        after = time.time()
        assert out.returncode == 0, out.stderr
        printed = json.loads(out.stdout)
        assert printed["degraded"] is True and printed["override"] == "on"
        [(t_on, label)] = _overrides(dashboard)
        assert label == "operator: on" and before <= t_on <= after

        out = run("degrade", "auto", "--service", "kb-qa", "--redis-url", redis_url)
        assert out.returncode == 0, out.stderr
        marks = _overrides(dashboard)
        assert [label for _, label in marks] == ["operator: on", "operator: auto"]
        assert marks[0][0] == t_on and marks[1][0] >= after
        assert queue.read_mode().override == "auto"
    finally:
        queue.close()


def test_a_state_stored_without_the_log_still_decodes_with_unknown_times() -> None:
    old = {"degraded": "0", "since": "5.0", "override": "on", "version": "3"}  # as stored before the log
    state = ModeState.from_fields(old)
    assert (state.override, state.override_log, state.version) == ("on", (), 3)
    garbled = ModeState.from_fields({**old, "override_log": "on@nan bogus@1 on@x off@12.5"})
    assert garbled.override_log == (("off", 12.5),)  # only what parses; the rest of the state is kept


def test_the_log_round_trips_and_keeps_only_the_newest() -> None:
    state = ModeState()
    for i in range(MAX_OVERRIDE_LOG + 3):
        state = with_override(state, ("on", "off", "auto")[i % 3], 100.0 + i)
    assert len(state.override_log) == MAX_OVERRIDE_LOG and state.override_log[-1][1] == 100.0 + MAX_OVERRIDE_LOG + 2
    assert state.version == MAX_OVERRIDE_LOG + 3
    assert ModeState.from_fields(state.to_fields()) == state


def test_a_report_built_from_a_remote_page_marks_the_overrides_too(redis_url: str, tmp_path: Path) -> None:
    """``ragwatch report --url`` reads the mode from the page's JSON: the override log must travel with it, or
    the HTML report of a worker's page has no operator markers while the page itself has them."""
    queue = open_queue(redis_url, "kb-qa")
    records = scored_records(start=time.time() - 300, n=60)
    queue.apply_many([(r["sample_id"], orjson.dumps(r), r["scores"], r["created_at"]) for r in records])
    dashboard = Dashboard(QueueSource(queue), THRESHOLDS, POLICY, cache_seconds=0.0)
    server = serve_worker_http(Worker(queue, []), 0, "127.0.0.1", CollectorRegistry(), dashboard=dashboard)
    try:
        before = time.time()
        queue.set_override("on")
        queue.set_override("auto")
        url = f"http://127.0.0.1:{server.server_port}/dashboard"
        remote = EndpointSource(url).mode()
        assert remote is not None and [c for c, _ in remote.override_log] == ["on", "auto"]
        assert all(before <= at <= time.time() for _, at in remote.override_log)
        page = tmp_path / "report.html"
        out = run("report", "--url", url, "--html", str(page), "--no-state")
        assert out.returncode == 0, out.stderr
        assert page.read_text(encoding="utf-8").count('"kind":"override"') == 2
    finally:
        server.shutdown()
        server.server_close()
        queue.close()
