"""Service-version markers (issue 27, "markers"): the ``service_version`` setting travels with every sample,
the worker keeps it in the score record, and the first record of a new version is a marker on the page.

Two deploys of one service (two ``RagWatch`` producers, versions 1.4.0 then 1.5.0) write to one queue; a
real worker scores the samples; the page data built from the stored records marks the switch.
"""

from __future__ import annotations

from typing import Any

import orjson

import ragwatch
from ragwatch.capture.run import Run
from ragwatch.queue.factory import open_queue
from ragwatch.report.view import view_data
from ragwatch.sampling.sample import build_record, decode_sample
from ragwatch.scoring.worker import Worker
from tests.conftest import hotel_pipeline

CHUNKS = [{"id": "exp-1", "text": "Hotels are reimbursed up to 600 CNY per night.", "score": 0.9}]
URL = "memory://deploys"


def deploy(version: str | None, requests: int) -> None:
    """One deploy of the service: ``requests`` sampled requests, flushed to the queue, then shut down."""
    options: dict[str, Any] = {"sample_rate": 1.0, "sample_max_per_second": 1e6, "tracing": False}
    rw = ragwatch.RagWatch("kb", registry=None, redis_url=URL, scoring="off", service_version=version, **options)
    answer = hotel_pipeline(rw, CHUNKS)
    for i in range(requests):
        answer(f"hotel limit {version} {i}?")
    assert rw.flush(10)
    rw.close()


def test_a_new_service_version_is_a_marker_on_the_page() -> None:
    deploy("1.4.0", 3)
    deploy("1.5.0", 3)
    queue = open_queue(URL, "kb")
    try:
        assert Worker(queue, [], block_ms=50).work(burst=True, max_seconds=30) == 6
        records = [orjson.loads(r) for r in queue.recent_scores(100)]
    finally:
        queue.close()
    assert sorted(r["service_version"] for r in records) == ["1.4.0"] * 3 + ["1.5.0"] * 3
    first_new = min(r["created_at"] for r in records if r["service_version"] == "1.5.0")
    versions = [m for m in view_data(records, {})["markers"] if m["kind"] == "version"]
    assert versions == [{"t": first_new, "kind": "version", "label": "service 1.5.0"}]


def test_the_version_is_recorded_only_when_set_and_old_records_still_decode() -> None:
    run = Run("kb", "q?", None)
    assert "service_version" not in build_record(run)  # a service without one writes what it always wrote
    assert build_record(run, service_version="2.0.1")["service_version"] == "2.0.1"
    assert build_record(run, content=False, service_version="2.0.1")["service_version"] == "2.0.1"
    record = build_record(run)
    assert decode_sample(orjson.dumps(record)).service_version is None  # an older producer's record
    # a foreign producer's odd value loses the field, not the sample
    assert decode_sample(orjson.dumps({**record, "service_version": 7})).service_version is None
    assert decode_sample(orjson.dumps({**record, "service_version": "2.0.1"})).service_version == "2.0.1"
