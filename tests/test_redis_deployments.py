"""The queue contract on real Redis deployments: TLS (``rediss://``), Sentinel and Cluster.

Every contract test of :mod:`tests.test_queue_contract` that takes the ``queue`` fixture runs here again,
once per deployment, through ``open_queue(url, "svc")``; the deployments are started once per module.
"""

from __future__ import annotations

import gc
import inspect
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragwatch.errors import ConfigError, QueueError
from ragwatch.queue.contract import Queue
from ragwatch.queue.factory import open_queue
from ragwatch.queue.keys import Keys
from tests import test_queue_contract as contract
from tests.servers import RedisCluster, SentinelSetup, TLSRedisServer, free_port, generate_ca

DEPLOYMENTS = ["tls", "sentinel", "cluster"]


@pytest.fixture(autouse=True)
def _collect_cluster_discovery_sockets() -> Iterator[None]:
    """redis-py's cluster client opens throw-away connections while it discovers the slot map and leaves
    them to the garbage collector; collect them here, where their ResourceWarning is expected, instead of
    letting it surface in whatever test happens to run the collector later."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSRedisServer]:
    server = TLSRedisServer(tmp_path_factory.mktemp("redis-tls"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sentinel_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSetup]:
    setup = SentinelSetup(tmp_path_factory.mktemp("redis-sentinel"))
    setup.start()
    yield setup
    setup.stop()


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=DEPLOYMENTS)
def deployment_url(request: pytest.FixtureRequest) -> str:
    """The queue URL of a deployment, emptied for this test."""
    fixture = {"tls": "tls_server", "sentinel": "sentinel_setup", "cluster": "redis_cluster"}[request.param]
    deployment = request.getfixturevalue(fixture)
    deployment.flushall()
    return str(deployment.url)


@pytest.fixture
def queue(deployment_url: str) -> Iterator[Queue]:
    q = open_queue(deployment_url, "svc", maxlen=50)
    q.ensure_group()
    yield q
    q.close()


# -- the shared contract, once per deployment -----------------------------------------------------------
for _name, _test in vars(contract).items():
    if _name.startswith("test_") and "queue" in inspect.signature(_test).parameters:
        globals()[_name] = _test


# -- the operations a worker runs, end to end ------------------------------------------------------------
def run_worker_operations(url: str) -> Queue:
    """add → ensure_group → read → claim_stale → dead_letter → apply (twice) → totals → stats → heartbeats."""
    q = open_queue(url, "svc")
    q.add([b"first", b"second", b"third"])
    q.ensure_group()
    entries = q.read("w1", count=10, block_ms=100)
    assert [e.payload for e in entries] == [b"first", b"second", b"third"]
    q.ack([entries[0].id])
    time.sleep(0.02)
    claimed, gone = q.claim_stale("rescuer", min_idle_ms=5, count=10)
    assert gone == []
    assert [(e.payload, e.deliveries) for e in claimed] == [(b"second", 2), (b"third", 2)]
    q.dead_letter(claimed[0], "ValueError: cannot score")
    assert q.apply("sample-1", b'{"r":1}', {"faithfulness": 0.5, "cp3": 1.0}) is True
    assert q.apply("sample-1", b'{"r":1}', {"faithfulness": 0.5, "cp3": 1.0}) is False
    q.ack([claimed[1].id])
    assert q.totals() == {"faithfulness": (1, 0.5), "cp3": (1, 1.0)}
    assert q.recent_scores(5) == [b'{"r":1}']
    stats = q.stats()
    assert (stats.length, stats.pending, stats.lag, stats.dead) == (3, 0, 0, 1)
    (letter,) = q.dead_letters(5)
    assert (letter["payload"], letter["error"], letter["deliveries"]) == (b"second", "ValueError: cannot score", 2)
    q.heartbeat("worker-a")
    assert set(q.live_workers(30)) == {"worker-a"}
    return q


def test_worker_operations(deployment_url: str) -> None:
    run_worker_operations(deployment_url).close()


# -- TLS -------------------------------------------------------------------------------------------------
def test_tls_with_a_wrong_ca_fails_with_queue_error(tls_server: TLSRedisServer, tmp_path: Path) -> None:
    other_ca, _key = generate_ca(tmp_path, "other-ca")
    q = open_queue(tls_server.url_with_ca(other_ca), "svc", socket_timeout=1)
    with pytest.raises(QueueError, match="certificate verify failed"):
        q.add([b"x"])
    q.close()


def test_tls_port_refuses_plain_text(tls_server: TLSRedisServer) -> None:
    q = open_queue(f"redis://127.0.0.1:{tls_server.port}/0", "svc", socket_timeout=1)
    with pytest.raises(QueueError):
        q.add([b"x"])
    q.close()


# -- Sentinel --------------------------------------------------------------------------------------------
def test_sentinel_names_the_master(sentinel_setup: SentinelSetup) -> None:
    import redis

    sentinel_setup.flushall()
    q = open_queue(sentinel_setup.url, "svc")
    q.add([b"x"])
    q.close()
    host, port = sentinel_setup.master_address()
    direct = redis.Redis(host=host, port=port)
    try:
        assert direct.xlen(Keys("svc").samples) == 1
    finally:
        direct.close()


def test_sentinel_failover_keeps_the_queue(tmp_path: Path) -> None:
    """Entries pending before a failover are still there after it; the client follows the new master."""
    import redis

    setup = SentinelSetup(tmp_path, replicas=1)
    setup.start()
    try:
        q = open_queue(setup.url, "svc", socket_timeout=2)
        q.ensure_group()
        q.add([b"before"])
        (pending,) = q.read("crashed", count=1, block_ms=100)
        old = setup.master_address()
        master = redis.Redis(host=old[0], port=old[1])
        try:
            assert master.execute_command("WAIT", 1, 2000) == 1  # the replica has everything
        finally:
            master.close()
        new = setup.failover()
        assert new != old
        deadline = time.monotonic() + 10
        while True:  # the first command after a failover may fail (old connection); the next one reconnects
            try:
                q.add([b"after"])
                break
            except QueueError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert q.stats().length == 2
        time.sleep(0.02)
        claimed, _gone = q.claim_stale("rescuer", min_idle_ms=5, count=10)
        assert [(e.id, e.payload) for e in claimed] == [(pending.id, b"before")]
        assert [e.payload for e in q.read("w", count=10, block_ms=100)] == [b"after"]
        q.close()
    finally:
        setup.stop()


def test_sentinel_url_without_master_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="master name"):
        open_queue("redis+sentinel://127.0.0.1:26379", "svc")


# -- Cluster ---------------------------------------------------------------------------------------------
def test_cluster_keys_of_a_service_share_one_slot(redis_cluster: RedisCluster) -> None:
    keys = Keys("svc")
    names = [keys.samples, keys.dead, keys.scores, keys.totals, keys.workers, keys.mode, keys.mode_channel]
    names += [keys.applied("sample-1"), keys.applied_hour(493_000), keys.window("cp3")]
    port = redis_cluster.ports[0]
    slots = {int(redis_cluster.command(port, "CLUSTER", "KEYSLOT", name)) for name in names}  # type: ignore[call-overload]
    assert len(slots) == 1
    other = int(redis_cluster.command(port, "CLUSTER", "KEYSLOT", Keys("other").samples))  # type: ignore[call-overload]
    assert other not in slots  # (another service is elsewhere: the tag is the service, not a constant)


def test_cluster_from_any_seed_node_and_data_on_one_node(redis_cluster: RedisCluster) -> None:
    """Seeded with a node that does not serve the service's slot, every operation still works (the client
    follows the slot map), and all the data lands on the one node that serves it."""
    redis_cluster.flushall()
    owner = redis_cluster.slot_owner(Keys("svc").samples)
    seed = next(p for p in redis_cluster.ports if p != owner)
    run_worker_operations(redis_cluster.node_url(seed)).close()
    sizes = {port: int(redis_cluster.command(port, "DBSIZE")) for port in redis_cluster.ports}  # type: ignore[call-overload]
    assert sizes[owner] > 0
    assert all(size == 0 for port, size in sizes.items() if port != owner)


def test_cluster_down_at_start_is_not_fatal() -> None:
    """A service must start while Redis is away: the cluster is contacted on first use, and failures are
    QueueErrors (which producers count and workers retry), not exceptions at construction."""
    q = open_queue(f"redis+cluster://127.0.0.1:{free_port()}", "svc", socket_timeout=0.5)
    with pytest.raises(QueueError):
        q.add([b"x"])
    with pytest.raises(QueueError):
        q.apply("s", b"{}", {"cp3": 1.0})
    q.close()


@pytest.mark.parametrize(
    "url",
    [
        "redis+cluster://127.0.0.1:7000/1",
        "redis+cluster://127.0.0.1:port",
        "redis+cluster:///",
        "redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
    ],
)
def test_cluster_url_errors_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        open_queue(url, "svc")
