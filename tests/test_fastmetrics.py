"""The thread-sharded counters and histograms on the request path (ragwatch.metrics.fast)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ragwatch.metrics import fast as fastmetrics
from ragwatch.metrics.fast import ShardedCounter, ShardedHistogram, counter, histogram

BUCKETS = (0.005, 0.01, 0.1, 1.0, 10.0)


def _lines(registry: CollectorRegistry) -> list[str]:
    return [
        line
        for line in generate_latest(registry).decode().splitlines()
        if line.startswith("demo_") and "_created" not in line
    ]


def test_exposition_matches_prometheus_client_for_the_same_observations() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    h1 = histogram("demo_seconds", "Demo.", ["stage"], BUCKETS, ours)
    h2 = Histogram("demo_seconds", "Demo.", ["stage"], buckets=BUCKETS, registry=theirs)
    c1 = counter("demo_tokens", "Demo.", ["kind"], ours)
    c2 = Counter("demo_tokens", "Demo.", ["kind"], registry=theirs)
    values = [0.0, 0.005, 0.0051, 0.01, 0.5, 1.0, 9.99, 10.0, 11.0, 1e9]  # edges are inclusive (le)
    for v in values:
        h1.labels("retrieve").observe(v)
        h2.labels("retrieve").observe(v)
    for n in (1, 2, 3.5):
        c1.labels("input").inc(n)
        c2.labels("input").inc(n)
    assert _lines(ours) == _lines(theirs)
    assert ours.get_sample_value("demo_seconds_bucket", {"stage": "retrieve", "le": "0.005"}) == 2
    assert ours.get_sample_value("demo_seconds_count", {"stage": "retrieve"}) == len(values)
    assert ours.get_sample_value("demo_tokens_total", {"kind": "input"}) == 6.5
    assert ours.get_sample_value("demo_tokens_created", {"kind": "input"}) is not None


def test_no_update_is_lost_across_threads_and_ended_threads_are_folded_away() -> None:
    registry = CollectorRegistry()
    c = counter("demo_calls", "Demo.", ["service"], registry).labels("s")
    h = histogram("demo_latency_seconds", "Demo.", ["service"], BUCKETS, registry).labels("s")
    per_thread, rounds = 2_000, 4

    def work() -> None:
        for _ in range(per_thread):
            c.inc()
            h.observe(0.05)

    for _ in range(rounds):  # threads that end, as in a thread-per-request server
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        registry.get_sample_value("demo_calls_total", {"service": "s"})  # a scrape folds ended threads
        assert len(fastmetrics._shards) <= threading.active_count()
    expected = per_thread * 8 * rounds
    assert registry.get_sample_value("demo_calls_total", {"service": "s"}) == expected
    assert registry.get_sample_value("demo_latency_seconds_bucket", {"service": "s", "le": "0.1"}) == expected
    assert registry.get_sample_value("demo_latency_seconds_sum", {"service": "s"}) == pytest.approx(0.05 * expected)


def test_histogram_scrapes_concurrent_with_observers_are_monotonic_and_lose_nothing() -> None:
    registry = CollectorRegistry()
    h = histogram("demo_busy_seconds", "Demo.", [], BUCKETS, registry).labels()
    stop = threading.Event()
    made = [0] * 4

    def work(k: int) -> None:
        n = 0
        while not stop.is_set():
            for _ in range(50):
                h.observe(0.05 if n % 2 else 5.0)
                n += 1
        made[k] = n

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(made))]
    for t in threads:
        t.start()
    seen = []
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:  # scrape while the owners observe
        seen.append(registry.get_sample_value("demo_busy_seconds_count"))
    stop.set()
    for t in threads:
        t.join()
    total = sum(made)
    assert len(set(seen)) > 1 and seen == sorted(seen)  # a count that went down would read as a reset
    assert registry.get_sample_value("demo_busy_seconds_count") == total
    assert registry.get_sample_value("demo_busy_seconds_bucket", {"le": "0.1"}) == total // 2
    fast = total // 2
    assert registry.get_sample_value("demo_busy_seconds_sum") == pytest.approx(0.05 * fast + 5.0 * (total - fast))


def test_adder_adds_to_each_counter_beside_its_own_incs_in_every_thread() -> None:
    registry = CollectorRegistry()
    family = counter("demo_llm", "Demo.", ["kind"], registry)
    tokens_in, tokens_out, cost = family.labels("in"), family.labels("out"), family.labels("usd")
    add = fastmetrics.adder(tokens_in, tokens_out, cost)
    lone = fastmetrics.adder(family.labels("alone"))

    def work() -> None:
        for _ in range(1000):
            add(900, 120, 0.25)
            tokens_in.inc(1)
            lone(2)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    work()  # and this thread, which lives on
    value = lambda kind: registry.get_sample_value("demo_llm_total", {"kind": kind})  # noqa: E731
    assert value("in") == 4000 * 901
    assert value("out") == 4000 * 120
    assert value("usd") == pytest.approx(4000 * 0.25)
    assert value("alone") == 8000
    with pytest.raises(ValueError, match="one to four"):
        fastmetrics.adder(*(family.labels(str(i)) for i in range(5)))


def test_labels_are_checked_and_counters_only_go_up() -> None:
    family = ShardedCounter("demo_x", "Demo.", ["a", "b"])
    with pytest.raises(ValueError, match="expected labels"):
        family.labels("only-one")
    child = family.labels("1", "2")
    assert family.labels(1, 2) is child  # label values are strings, as in prometheus_client
    with pytest.raises(ValueError):
        child.inc(-1)
    with pytest.raises(ValueError, match="buckets"):
        ShardedHistogram("demo_y", "Demo.", [], [1.0, 1.0])


def test_duplicate_names_are_refused_by_the_registry() -> None:
    registry = CollectorRegistry()
    histogram("demo_dup_seconds", "Demo.", [], BUCKETS, registry)
    with pytest.raises(ValueError, match="Duplicated"):
        Histogram("demo_dup_seconds", "Demo.", registry=registry)


def test_multiprocess_mode_uses_prometheus_client_classes(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    assert isinstance(counter("demo_mp", "Demo.", ["a"], None), Counter)
    assert isinstance(histogram("demo_mp_seconds", "Demo.", ["a"], BUCKETS, None), Histogram)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_child_of_a_fork_while_another_thread_holds_the_lock_does_not_hang() -> None:
    registry = CollectorRegistry()
    c = counter("demo_fork", "Demo.", [], registry).labels()
    c.inc()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with fastmetrics._lock:
            held.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    pid = os.fork()
    if pid == 0:  # the child: new threads record and scrape without waiting for the parent's lock
        code = 1
        try:
            threading.Thread(target=c.inc).start()
            code = 0 if registry.get_sample_value("demo_fork_total") is not None else 1
        finally:
            os._exit(code)
    release.set()
    t.join()
    deadline = time.monotonic() + 10
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on a lock held by a thread of its parent")
        time.sleep(0.02)
    assert os.waitstatus_to_exitcode(status) == 0


# -- exemplars -----------------------------------------------------------------------------------------------
def _openmetrics(registry: CollectorRegistry) -> list[str]:
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    return [line for line in generate_openmetrics(registry).decode().splitlines() if line.startswith("demo_")]


def test_an_exemplar_marks_its_bucket_in_openmetrics_only_and_the_newest_wins() -> None:
    registry = CollectorRegistry()
    child = histogram("demo_seconds", "Demo.", ["stage"], BUCKETS, registry).labels("request")
    child.observe(0.05)
    child.observe(0.07)
    child.exemplar(0.05, "a" * 32)
    child.exemplar(0.07, "b" * 32)  # same bucket (0.01, 0.1]: replaces the first
    child.exemplar(50.0, "c" * 32)  # past the last bound: +Inf
    marked = [line for line in _openmetrics(registry) if " # {" in line]
    assert [line.split(" # ")[0] for line in marked] == [
        'demo_seconds_bucket{le="0.1",stage="request"} 2.0',
        'demo_seconds_bucket{le="+Inf",stage="request"} 2.0',
    ]
    assert marked[0].split(" # ")[1].startswith(f'{{trace_id="{"b" * 32}"}} 0.07 ')
    assert marked[1].split(" # ")[1].startswith(f'{{trace_id="{"c" * 32}"}} 50.0 ')
    assert "trace_id" not in generate_latest(registry).decode()  # the Prometheus text format has none
    assert "_count" in _lines(registry)[-2] and _lines(registry)[-2].endswith(" 2.0")  # counts untouched


def test_exemplars_mark_a_sampled_request_and_its_stages_bounded_and_only_for_ours() -> None:
    registry = CollectorRegistry()
    family = histogram("demo_seconds", "Demo.", ["stage", "outcome"], BUCKETS, registry)
    children = {(s, o): family.labels(s, o) for s in ("request", "retrieve", "generate") for o in ("ok", "error")}
    durations = {"retrieve": 0.004, "generate": 0.5, "request": 0.6}

    def marked() -> set[tuple[str, str, str]]:
        out = set()
        for line in _openmetrics(registry):
            if " # {" in line:
                labels = line.split("{", 1)[1].split("}", 1)[0]
                out.add((labels, line.split('trace_id="')[1].split('"')[0], line.split("} ")[2].split()[0]))
        return out

    fastmetrics.exemplars(children, durations, "error", "e" * 32)  # failed: the request only
    assert marked() == {('le="1.0",outcome="error",stage="request"', "e" * 32, "0.6")}
    fastmetrics.exemplars(children, durations, "ok", "f" * 32)
    assert {(labels, value) for labels, trace, value in marked() if trace == "f" * 32} == {
        ('le="0.005",outcome="ok",stage="retrieve"', "0.004"),
        ('le="1.0",outcome="ok",stage="generate"', "0.5"),
        ('le="1.0",outcome="ok",stage="request"', "0.6"),
    }
    before = marked()
    fastmetrics.exemplars(children, durations, "ok", None)  # no trace (tracing off): nothing to link
    fastmetrics.exemplars(children, durations, "ok", "9" * 65)  # longer than any trace id: never exposed
    fastmetrics.exemplars({}, durations, "ok", "d" * 32)  # metrics off
    assert marked() == before
    theirs = CollectorRegistry()  # prometheus_client's children (multiprocess mode) keep no exemplars
    child = Histogram("demo_seconds", "Demo.", ["stage", "outcome"], buckets=BUCKETS, registry=theirs)
    fastmetrics.exemplars({("request", "ok"): child.labels("request", "ok")}, durations, "ok", "d" * 32)
    assert " # {" not in "\n".join(_openmetrics(theirs))
