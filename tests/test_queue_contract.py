"""One contract, two backends: the memory queue must behave like the Redis Stream queue."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from ragwatch.errors import ConfigError, QueueError
from ragwatch.queue.contract import Queue
from ragwatch.queue.factory import open_queue


@pytest.fixture(params=["memory", "redis"])
def queue(request: pytest.FixtureRequest) -> Iterator[Queue]:
    if request.param == "memory":
        q = open_queue("memory://contract", "svc", maxlen=50)
    else:
        url = request.getfixturevalue("redis_url")
        q = open_queue(url, "svc", maxlen=50)
    q.ensure_group()
    yield q
    q.close()


def test_add_read_ack(queue: Queue) -> None:
    queue.add([b"one", b"two", b"three"])
    entries = queue.read("w1", count=2, block_ms=100)
    assert [e.payload for e in entries] == [b"one", b"two"]
    assert all(e.deliveries == 1 for e in entries)
    rest = queue.read("w2", count=10, block_ms=100)
    assert [e.payload for e in rest] == [b"three"]  # each entry goes to one consumer of the group
    stats = queue.stats()
    assert (stats.length, stats.pending, stats.lag) == (3, 3, 0)
    queue.ack([e.id for e in entries + rest])
    assert queue.stats().pending == 0
    assert queue.read("w1", count=10, block_ms=50) == []


def test_read_blocks_then_returns_empty(queue: Queue) -> None:
    started = time.monotonic()
    assert queue.read("w1", count=1, block_ms=200) == []
    assert time.monotonic() - started >= 0.15


def test_lag_counts_undelivered(queue: Queue) -> None:
    queue.add([b"a", b"b", b"c", b"d"])
    queue.read("w1", count=1, block_ms=10)
    assert queue.stats().lag == 3


def test_stale_entries_are_claimed_with_growing_delivery_count(queue: Queue) -> None:
    queue.add([b"x"])
    (first,) = queue.read("crashed", count=1, block_ms=100)
    assert queue.claim_stale("rescuer", min_idle_ms=10_000, count=10) == ([], [])  # not idle long enough
    time.sleep(0.06)
    claimed, gone = queue.claim_stale("rescuer", min_idle_ms=50, count=10)
    assert gone == []
    assert [(e.id, e.payload, e.deliveries) for e in claimed] == [(first.id, b"x", 2)]
    time.sleep(0.06)
    (again,), _ = queue.claim_stale("rescuer-2", min_idle_ms=50, count=10)
    assert again.deliveries == 3


def test_trimmed_pending_entries_are_reported_gone(queue: Queue) -> None:
    queue.add([b"old"])
    (old,) = queue.read("crashed", count=1, block_ms=100)
    queue.add([f"new-{i}".encode() for i in range(300)])  # MAXLEN ~50 trims the old entry away
    time.sleep(0.06)
    claimed, gone = queue.claim_stale("rescuer", min_idle_ms=50, count=500)
    assert old.id in gone
    assert old.id not in [e.id for e in claimed]
    assert queue.stats().length < 300


def test_dead_letter_acks_and_keeps_the_error(queue: Queue) -> None:
    queue.add([b"poison"])
    (entry,) = queue.read("w1", count=1, block_ms=100)
    queue.dead_letter(entry, "ValueError: cannot score")
    assert queue.stats().pending == 0
    assert queue.stats().dead == 1
    (letter,) = queue.dead_letters(10)
    assert letter["id"] == entry.id and letter["payload"] == b"poison"
    assert letter["error"] == "ValueError: cannot score"


def test_apply_is_idempotent_per_sample(queue: Queue) -> None:
    assert queue.apply("s1", b'{"r":1}', {"faithfulness": 0.5, "cp3": 1.0}) is True
    assert queue.apply("s1", b'{"r":1}', {"faithfulness": 0.5, "cp3": 1.0}) is False  # redelivered
    assert queue.apply("s2", b'{"r":2}', {"faithfulness": 0.25}) is True
    totals = queue.totals()
    assert totals["faithfulness"] == (2, pytest.approx(0.75))
    assert totals["cp3"] == (1, pytest.approx(1.0))
    assert queue.recent_scores(10) == [b'{"r":2}', b'{"r":1}']


def test_ensure_group_is_idempotent(queue: Queue) -> None:
    assert queue.ensure_group() is False  # the fixture created it: only the creating call says True
    queue.add([b"a"])
    assert queue.ensure_group() is False
    assert len(queue.read("w", count=5, block_ms=50)) == 1


def test_heartbeats(queue: Queue) -> None:
    queue.heartbeat("worker-a")
    assert set(queue.live_workers(30)) == {"worker-a"}
    assert queue.live_workers(-1) == {}


def test_forget_worker_removes_only_its_heartbeat(queue: Queue) -> None:
    queue.heartbeat("worker-a")
    queue.heartbeat("worker-b")
    queue.forget_worker("worker-a")
    assert set(queue.live_workers(30)) == {"worker-b"}


def test_trim_scored_keeps_pending_and_undelivered_entries(queue: Queue) -> None:
    queue.add([b"a", b"b", b"c", b"d", b"e"])
    first = queue.read("w", count=3, block_ms=100)  # a, b, c delivered; d, e not yet
    queue.ack([first[0].id, first[2].id])  # a and c scored; b still pending
    assert queue.trim_scored() == 1  # only a: b is pending, and c comes after it
    rest = queue.read("w", count=10, block_ms=100)
    assert [e.payload for e in rest] == [b"d", b"e"]  # nothing undelivered was lost
    queue.ack([first[1].id] + [e.id for e in rest])
    assert queue.trim_scored() == 4 and queue.stats().length == 0
    assert queue.trim_scored() == 0


def test_discard_acknowledges_and_deletes(queue: Queue) -> None:
    queue.add([b"a", b"b"])
    entries = queue.read("w", count=2, block_ms=100)
    queue.discard([entries[0].id])
    stats = queue.stats()
    assert (stats.length, stats.pending) == (1, 1)
    assert queue.claim_stale("w2", 0, 10)[0][0].payload == b"b"


def test_unknown_scheme_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="kafka"):
        open_queue("kafka://broker", "svc")


def test_redis_down_raises_queue_error() -> None:
    from tests.servers import free_port

    q = open_queue(f"redis://127.0.0.1:{free_port()}/0", "svc", socket_timeout=0.5)
    with pytest.raises(QueueError, match="XADD"):
        q.add([b"x"])


def test_password_and_acl_user(tmp_path_factory: pytest.TempPathFactory) -> None:
    import redis

    from tests.servers import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis-auth"), password="s3cret")
    server.start()
    try:
        admin = redis.Redis.from_url(server.url)
        admin.acl_setuser("scorer", enabled=True, passwords=["+pw"], keys=["ragwatch:*"], commands=["+@all"])
        admin.close()
        for url in (server.url, f"redis://scorer:pw@127.0.0.1:{server.port}/0"):
            q = open_queue(url, "svc")
            q.ensure_group()
            q.add([b"x"])
            assert q.read("w", 1, 100)[0].payload == b"x"
            assert "s3cret" not in repr(q) and ":pw@" not in repr(q)
            q.close()
        with pytest.raises(QueueError):
            open_queue(f"redis://:wrong@127.0.0.1:{server.port}/0", "svc").add([b"x"])
    finally:
        server.stop()


def test_windows_are_pushed_once_per_sample_newest_first(queue: Queue) -> None:
    queue.apply("a", b"{}", {"cp3": 0.2}, at=100.0)
    queue.apply("b", b"{}", {"cp3": 0.8, "faithfulness": 1.0}, at=101.0)
    queue.apply("b", b"{}", {"cp3": 0.8, "faithfulness": 1.0}, at=102.0)  # redelivered: no second point
    assert queue.window("cp3", 10) == [(101.0, 0.8), (100.0, 0.2)]
    assert queue.window("cp3", 1) == [(101.0, 0.8)]
    assert queue.window("faithfulness", 10) == [(101.0, 1.0)]
    assert queue.window("unknown", 10) == []


def test_mode_compare_and_set_override_and_notification(queue: Queue) -> None:
    import threading
    from dataclasses import replace

    state = queue.read_mode()
    assert state.version == 0 and not state.degraded and state.override == "auto"
    listener = queue.mode_listener()
    listener.wait(0.05)  # subscribe before anything changes
    entered = replace(state, degraded=True, since=5.0, reason="cp3 low", value=0.4, samples=30, version=1)

    timer = threading.Timer(0.2, lambda: queue.write_mode(entered, expected_version=0))
    timer.start()
    started = time.monotonic()
    assert listener.wait(5.0) is True
    assert time.monotonic() - started < 2.0  # woken by the notification, not by the timeout
    timer.join()
    assert queue.read_mode() == entered
    assert queue.write_mode(replace(entered, degraded=False, version=2), expected_version=0) is False  # lost race
    before = time.time()
    forced = queue.set_override("off")
    assert forced.override == "off" and forced.version == 2 and forced.degraded
    assert queue.read_mode() == forced
    # every backend logs when the operator set it (the page's override markers read this log)
    ((command, at),) = forced.override_log
    assert command == "off" and before <= at <= time.time()
    assert queue.set_override("auto").override_log == (("off", at), ("auto", pytest.approx(time.time(), abs=5)))
    listener.close()


def test_apply_many_is_idempotent_in_and_across_batches(queue: Queue) -> None:
    batch = [("s1", b"1", {"m": 1.0}, 10.0), ("s2", b"2", {"m": 0.5}, 11.0), ("s1", b"1", {"m": 1.0}, 10.0)]
    assert queue.apply_many(batch) == [True, True, False]
    assert queue.apply_many(batch[:2]) == [False, False]
    assert queue.totals()["m"] == (2, pytest.approx(1.5))
    assert queue.window("m", 10) == [(11.0, 0.5), (10.0, 1.0)]


def test_restore_mode_writes_only_over_an_older_version(queue: Queue) -> None:
    from dataclasses import replace

    from ragwatch.mode.degrade import ModeState

    seen = ModeState(degraded=True, since=5.0, reason="cp3 low", recovering_since=9.0, override="on", version=4)
    assert queue.restore_mode(seen) is True  # the store holds nothing (version 0): written whole
    assert queue.read_mode() == seen
    assert queue.restore_mode(replace(seen, override="off", version=3)) is False  # older: never over newer
    assert queue.restore_mode(replace(seen, override="off", version=4)) is False  # nor over the same
    assert queue.read_mode() == seen
    newer = replace(seen, override="auto", degraded=False, recovering_since=None, version=5)
    assert queue.restore_mode(newer) is True
    assert queue.read_mode() == newer


def test_trim_retention_reports_what_it_did(queue: Queue) -> None:
    retention = queue.trim_retention()
    assert (retention.scores, retention.markers) == (0, 0)  # nothing over a budget (none set)
    assert retention.headroom is None  # neither backend here has a maxmemory
