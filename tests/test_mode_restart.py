"""Degraded mode around a hung or wiped Redis (issue 29, items 9 and 10) — on real servers.

A service's start-up does not wait on a Redis that accepts connections and never answers; an empty Redis
restart neither resets an SLA-driven degraded state (its hold and dwell still apply) nor lets a stale replica
bring back an operator's old override; the samples the wiped stream held unscored are counted.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch.guard import Guard
from ragwatch.mode.degrade import ModeState, Policy
from ragwatch.mode.sla import SLAEvaluator
from ragwatch.mode.watcher import ModeWatcher
from ragwatch.queue.redis import RedisQueue
from ragwatch.sampling.sample import Sample
from ragwatch.scoring.judges.base import Verdict
from tests.conftest import sample as metric
from tests.conftest import wait_for
from tests.servers import RedisServer, free_port
from tests.test_worker_faults import good, outcome, worker_for

METRIC = "context_precision_3"


class SilentServer:
    """A TCP server that accepts every connection and never answers: a hung Redis (or a black-holing
    proxy in front of one). Counts connections accepted and those the client closed."""

    def __init__(self) -> None:
        self.port = free_port()
        self.accepted = 0
        self.closed = 0
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(0.05):
                sock = key.fileobj
                if sock is self._listener:
                    conn, _ = self._listener.accept()
                    self._selector.register(conn, selectors.EVENT_READ)
                    self.accepted += 1
                    continue
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(65536)  # read the command, never reply
                except OSError:
                    data = b""
                if not data:
                    self._selector.unregister(sock)
                    sock.close()
                    self.closed += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


# -- item 9: start-up does not wait on a hung Redis -------------------------------------------------------------


def test_construction_returns_while_a_hung_redis_still_holds_the_first_read(
    silent: SilentServer, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    def reads(outcome: str) -> float:
        return metric(registry, "ragwatch_degraded_state_reads_total", service="svc", read="first", outcome=outcome)

    with caplog.at_level(logging.INFO, logger="ragwatch"):
        rw = ragwatch.RagWatch("svc", redis_url=f"redis://127.0.0.1:{silent.port}/0", registry=registry)
        try:
            # Returned before the first read failed (the old synchronous read logged its failure first) …
            assert "could not read degraded-mode state" not in caplog.text
            # … while it is under way: connected, command sent, the 5 s socket timeout not struck.
            wait_for(lambda: silent.accepted >= 1, timeout=4)
            assert silent.closed == 0
            assert reads("ok") + reads("error") == 0  # unknown yet …
            assert not rw.degraded and rw.mode == ModeState()  # … so the configured default: normal, no override
            wait_for(lambda: reads("error") == 1, timeout=60)  # the outcome, once the timeout struck
            wait_for(lambda: silent.closed >= 1)
            wait_for(lambda: "could not read degraded-mode state at start-up" in caplog.text)  # logged after counted
            assert not rw.degraded
        finally:
            rw.close(0)


def test_the_first_read_of_a_live_redis_is_logged_and_counted(
    redis_url: str, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    RedisQueue(redis_url, "svc").set_override("on")
    with caplog.at_level(logging.INFO, logger="ragwatch"):
        rw = ragwatch.RagWatch("svc", redis_url=redis_url, registry=registry)
        try:
            wait_for(lambda: rw.degraded)  # the override, without any request or watching thread yet
            labels = {"service": "svc", "read": "first", "outcome": "ok"}
            assert metric(registry, "ragwatch_degraded_state_reads_total", **labels) == 1
            wait_for(lambda: "degraded-mode state of svc read at start-up" in caplog.text)
        finally:
            rw.close(0)


# -- item 10: an empty restart ------------------------------------------------------------------------------------


def _scores(queue: RedisQueue, value: float, n: int, prefix: str, at: float) -> None:
    assert all(queue.apply_many([(f"{prefix}{i}", b"{}", {METRIC: value}, at) for i in range(n)]))


def test_an_empty_restart_keeps_an_sla_driven_degraded_state_with_its_hold_and_dwell(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    queue = RedisQueue(redis_url, "svc")
    policy = Policy(window_samples=20, min_samples=5, hold_seconds=120, min_dwell_seconds=300)
    evaluator = SLAEvaluator(queue, policy)
    replica = ModeWatcher(RedisQueue(redis_url, "svc"), guard=Guard(None))
    t0 = time.time()
    _scores(queue, 0.2, 10, "bad", t0)
    entered = evaluator.tick(t0)
    assert entered.degraded and entered.since == t0
    assert replica.refresh().degraded and replica.degraded

    client.flushall()  # what a Redis restart without persistence leaves: no state, no windows
    assert replica.refresh().degraded and replica.degraded  # no flap to normal
    assert evaluator.tick(t0 + 10) == entered  # held, the same state (since, reason) restored
    _scores(queue, 0.9, 10, "good", t0 + 20)  # the windows refill, recovered
    recovering = evaluator.tick(t0 + 20)
    assert recovering.degraded and recovering.recovering_since == t0 + 20
    assert evaluator.tick(t0 + 200).degraded  # hold done, dwell (since t0, before the wipe) not yet
    _scores(queue, 0.9, 10, "later", t0 + 350)
    left = evaluator.tick(t0 + 350)
    assert not left.degraded and left.since == t0 + 350
    assert not replica.refresh().degraded
    client.close()


def test_a_stale_replica_does_not_bring_back_an_old_override_after_a_wipe(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    operator = RedisQueue(redis_url, "svc")
    stale = ModeWatcher(RedisQueue(redis_url, "svc"), guard=Guard(None))
    fresh = ModeWatcher(RedisQueue(redis_url, "svc"), guard=Guard(None))
    operator.set_override("on")
    stale.refresh()
    fresh.refresh()
    operator.set_override("auto")  # the operator gives control back …
    fresh.refresh()  # … which one replica saw before the wipe, the other not
    assert stale.state.override == "on" and fresh.state.override == "auto"

    client.flushall()
    stale.refresh()  # the stale replica notices first and writes back the "on" it knows
    fresh.refresh()  # the fresh one knows a newer state: it wins
    stale.refresh()
    assert operator.read_mode().override == "auto"
    assert stale.state.override == "auto" and not stale.degraded
    assert fresh.state.override == "auto" and not fresh.degraded
    client.close()


class _Gate:
    """A judge that waits until the test lets it finish (to hold a sample in flight across a restart)."""

    name = "gate"
    version = "1"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def score(self, sample: Sample) -> Verdict:
        self.entered.set()
        self.release.wait(30)
        return Verdict(scores={"context_relevance": 1.0})


def test_samples_waiting_in_a_wiped_stream_are_counted_lost(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    queue = RedisQueue(server.url, "kb", socket_timeout=2.0)
    queue.ensure_group()
    queue.add([good(f"s{i}") for i in range(100)])
    registry = CollectorRegistry()
    gate = _Gate()
    worker = worker_for(RedisQueue(server.url, "kb", socket_timeout=2.0), registry, [gate], batch=1, concurrency=1)
    worker.maintenance_seconds = 0.1
    thread = threading.Thread(target=worker.work, kwargs={"max_seconds": 60})
    thread.start()
    try:
        assert gate.entered.wait(30)  # one sample in flight, 99 waiting in the stream
        server.stop()
        server.start()  # on the same port, empty
        gate.release.set()
        wait_for(lambda: outcome(registry, "lost") > 0, timeout=30)
        assert outcome(registry, "lost") == 99
        assert outcome(registry, "scored") == 1  # the one in flight was scored, into the new Redis
        queue.add([good("after")])  # and the pipeline carries on
        wait_for(lambda: outcome(registry, "scored") == 2, timeout=30)
        assert orjson.loads(queue.recent_scores(1)[0])["sample_id"] == "after"
    finally:
        gate.release.set()
        worker.stop()
        thread.join(30)
        queue.close()
        server.stop()
