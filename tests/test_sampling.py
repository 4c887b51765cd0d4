"""Which runs go to scoring: rule order, trace-id hashing, rates, probes, the per-process ceiling."""

from __future__ import annotations

import hashlib
import random
import threading
from typing import Any

import pytest

from ragwatch.capture.run import Run
from ragwatch.errors import ConfigError
from ragwatch.sampling.sampler import NOT_A_SAMPLE, REASONS, Decision, Sampler, TokenBucket


class FakeClock:
    """A clock that moves only when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


CHUNKS = [{"id": "leave-1", "text": "Annual leave is 15 days.", "score": 0.8}]


def make_run(
    trace_id: str | None = None,
    *,
    outcome: str = "ok",
    request_seconds: float | None = None,
    route: str | None = None,
    force: bool = False,
    question: str | None = "How long is annual leave?",
    retrieved: Any = CHUNKS,
    retrieve_seconds: float | None = None,
    status: int | None = None,
    **tags: str,
) -> Run:
    """A finished RAG run (a question, retrieved chunks) unless told otherwise."""
    run = Run("svc", question, route=route)
    run.trace_id = trace_id
    run.outcome = outcome
    run.force = force
    run.retrieved = retrieved
    run.status = status
    if request_seconds is not None:
        run.durations["request"] = request_seconds
    if retrieve_seconds is not None:
        run.durations["retrieve"] = retrieve_seconds
    run.tags.update(tags)
    return run


def trace_id(low64: int, high64: int = 0x0123456789ABCDEF) -> str:
    """A well-formed 32-hex-digit trace id whose lower 64 bits (the sampled part) are ``low64``."""
    return f"{high64:016x}{low64:016x}"


def random_trace_ids(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


LOW = trace_id(0)  # sampled at any rate above 0
HIGH = trace_id(2**64 - 1)  # sampled only at rate 1


# -- Decision and reasons ---------------------------------------------------------------------------------


def test_reasons_are_a_closed_set_of_label_safe_values() -> None:
    assert REASONS == (
        "forced",
        "probe",
        "error",
        "slow",
        "route",
        "tag",
        "rate",
        "ceiling",
        "unsampled",
        "error_response",
        "no_context",
        "no_question",
    )
    assert set(NOT_A_SAMPLE) < set(REASONS)
    assert all(r.isidentifier() and r.islower() for r in REASONS)


def test_decision_is_frozen() -> None:
    decision = Decision(True, "rate")
    with pytest.raises(AttributeError):
        decision.sampled = False  # type: ignore[misc]


def test_decisions_are_shared_not_built_per_call() -> None:
    sampler = Sampler(rate=1.0)
    assert sampler.decide(make_run(LOW)) is sampler.decide(make_run(HIGH))


# -- rule order -------------------------------------------------------------------------------------------

RULES: list[tuple[str, dict[str, Any], dict[str, Any], Decision]] = [
    # (case, Sampler kwargs, make_run kwargs, expected)
    ("base rate samples low hash", {"rate": 0.5}, {"trace_id": LOW}, Decision(True, "rate")),
    ("base rate skips high hash", {"rate": 0.5}, {"trace_id": HIGH}, Decision(False, "unsampled")),
    ("forced at rate 0", {"rate": 0.0}, {"trace_id": HIGH, "force": True}, Decision(True, "forced")),
    ("forced probe", {"rate": 0.0}, {"trace_id": HIGH, "force": True, "probe": "1"}, Decision(True, "forced")),
    (
        "error at rate 0",
        {"rate": 0.0, "sample_errors": True},
        {"trace_id": HIGH, "outcome": "error"},
        Decision(True, "error"),
    ),
    (
        "cancelled counts as error",
        {"rate": 0.0, "sample_errors": True},
        {"outcome": "cancelled"},
        Decision(True, "error"),
    ),
    ("4xx counts as error", {"rate": 0.0, "sample_errors": True}, {"status": 400}, Decision(True, "error")),
    ("errors off by default", {"rate": 1.0}, {"trace_id": LOW, "outcome": "error"}, Decision(False, "error_response")),
    ("4xx off by default", {"rate": 1.0}, {"trace_id": LOW, "status": 404}, Decision(False, "error_response")),
    ("5xx off by default", {"rate": 1.0}, {"trace_id": LOW, "status": 503}, Decision(False, "error_response")),
    ("2xx/3xx succeeded", {"rate": 1.0}, {"trace_id": LOW, "status": 304}, Decision(True, "rate")),
    ("forced error", {"rate": 1.0}, {"outcome": "error", "force": True}, Decision(False, "error_response")),
    ("no retriever ran", {"rate": 1.0}, {"trace_id": LOW, "retrieved": None}, Decision(False, "no_context")),
    ("forced without context", {"rate": 1.0}, {"retrieved": None, "force": True}, Decision(False, "no_context")),
    (
        "probe without context",
        {"rate": 1.0, "probe_rate": 1.0},
        {"retrieved": None, "probe": "1"},
        Decision(False, "no_context"),
    ),
    (
        "error without context",
        {"rate": 1.0, "sample_errors": True},
        {"outcome": "error", "retrieved": None},
        Decision(False, "no_context"),
    ),
    ("empty retrieval is a miss", {"rate": 1.0}, {"trace_id": LOW, "retrieved": []}, Decision(True, "rate")),
    (
        "uncountable retrieval",
        {"rate": 1.0},
        {"trace_id": LOW, "retrieved": None, "retrieve_seconds": 0.1},
        Decision(True, "rate"),
    ),
    ("no question", {"rate": 1.0}, {"trace_id": LOW, "question": None}, Decision(False, "no_question")),
    ("blank question", {"rate": 1.0}, {"trace_id": LOW, "question": " \n"}, Decision(False, "no_question")),
    (
        "error reason first",
        {"rate": 1.0},
        {"status": 400, "retrieved": None, "question": None},
        Decision(False, "error_response"),
    ),
    ("slow at rate 0", {"rate": 0.0, "slow_seconds": 2.0}, {"request_seconds": 2.0}, Decision(True, "slow")),
    ("not slow enough", {"rate": 0.0, "slow_seconds": 2.0}, {"request_seconds": 1.99}, Decision(False, "unsampled")),
    ("no request duration", {"rate": 0.0, "slow_seconds": 2.0}, {}, Decision(False, "unsampled")),
    ("slow off by default", {"rate": 0.0}, {"request_seconds": 1e9}, Decision(False, "unsampled")),
    (
        "error beats slow",
        {"rate": 0.0, "slow_seconds": 1.0, "sample_errors": True},
        {"outcome": "error", "request_seconds": 5.0},
        Decision(True, "error"),
    ),
    ("probe excluded by default", {"rate": 1.0}, {"trace_id": LOW, "probe": "1"}, Decision(False, "probe")),
    (
        "probe error excluded",
        {"rate": 1.0, "sample_errors": True},
        {"outcome": "error", "probe": "1"},
        Decision(False, "probe"),
    ),
    ("probe included", {"rate": 0.0, "probe_rate": 1.0}, {"trace_id": HIGH, "probe": "1"}, Decision(True, "probe")),
    ("probe tag must be '1'", {"rate": 1.0}, {"trace_id": LOW, "probe": "0"}, Decision(True, "rate")),
]


@pytest.mark.parametrize(("kwargs", "run_kwargs", "expected"), [c[1:] for c in RULES], ids=[c[0] for c in RULES])
def test_rule_order(kwargs: dict[str, Any], run_kwargs: dict[str, Any], expected: Decision) -> None:
    assert Sampler(**kwargs).decide(make_run(**run_kwargs)) == expected


def test_probe_rate_uses_the_trace_id_hash() -> None:
    sampler = Sampler(rate=0.0, probe_rate=0.5)
    assert sampler.decide(make_run(trace_id(2**63 - 1), probe="1")) == Decision(True, "probe")
    assert sampler.decide(make_run(trace_id(2**63), probe="1")) == Decision(False, "probe")


# -- trace-id hashing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "low64", "sampled"),
    [
        (0.5, 2**63 - 1, True),
        (0.5, 2**63, False),
        (0.25, 2**62 - 1, True),
        (0.25, 2**62, False),
        (1.0, 2**64 - 1, True),
        (0.0, 0, False),
        (2**-64, 0, True),  # the smallest positive rate still samples the lowest hash
        (2**-64, 1, False),
    ],
)
def test_threshold_is_lower_64_bits_against_rate_times_2_pow_64(rate: float, low64: int, sampled: bool) -> None:
    for high in (0, 2**64 - 1):  # the upper half of the id plays no part
        assert Sampler(rate=rate).decide(make_run(trace_id(low64, high))).sampled is sampled


def test_matches_the_opentelemetry_rule_for_random_ids() -> None:
    for rate in (0.01, 0.1, 0.37, 0.9):
        sampler = Sampler(rate=rate)
        for tid in random_trace_ids(500):
            assert sampler.decide(make_run(tid)).sampled is (int(tid[-16:], 16) < rate * 2**64)


def test_same_trace_id_same_decision_in_every_sampler() -> None:
    ids = random_trace_ids(2000, seed=11)
    first = [Sampler(rate=0.3).decide(make_run(t)).sampled for t in ids]
    second = [Sampler(rate=0.3).decide(make_run(t)).sampled for t in ids]
    assert first == second
    assert 0 < sum(first) < len(ids)


def test_uppercase_hex_is_the_same_trace() -> None:
    tid = random_trace_ids(1)[0]
    sampler = Sampler(rate=0.5)
    assert sampler.decide(make_run(tid.upper())) == sampler.decide(make_run(tid))


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_rate_accuracy_over_random_trace_ids(rate: float) -> None:
    sampler = Sampler(rate=rate)
    ids = random_trace_ids(20_000, seed=42)
    share = sum(sampler.decide(make_run(t)).sampled for t in ids) / len(ids)
    assert abs(share - rate) <= 0.015


@pytest.mark.parametrize(("rate", "expected"), [(0.0, 0), (1.0, 20_000)])
def test_rate_zero_and_one_are_exact(rate: float, expected: int) -> None:
    sampler = Sampler(rate=rate)
    ids = [*random_trace_ids(19_998, seed=3), trace_id(0), trace_id(2**64 - 1)]
    assert sum(sampler.decide(make_run(t)).sampled for t in ids) == expected


def test_rate_zero_and_one_are_exact_without_trace_ids() -> None:
    assert not any(Sampler(rate=0.0).decide(make_run(None)).sampled for _ in range(1000))
    assert all(Sampler(rate=1.0).decide(make_run(None)).sampled for _ in range(1000))


@pytest.mark.parametrize(("draw", "expected"), [(0.29, Decision(True, "rate")), (0.3, Decision(False, "unsampled"))])
def test_without_trace_id_falls_back_to_a_random_draw(
    monkeypatch: pytest.MonkeyPatch, draw: float, expected: Decision
) -> None:
    monkeypatch.setattr(random, "random", lambda: draw)
    sampler = Sampler(rate=0.3)
    assert sampler.decide(make_run(None)) == expected
    assert sampler.decide(make_run("")) == expected


def blake_low64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


MALFORMED = [
    "not-a-trace-id",
    "0123456789abcdef",  # 64-bit id: wrong length
    "0123456789abcdef0123456789abcdef0",  # 33 digits
    "0123456789abcdef0123456789abcdeg",  # not hex
    "0x23456789abcdef0123456789abcdef",  # int(..., 16) would accept a 0x prefix
    "01234567 9abcdef0123456789abcdef",
    "01234567_9abcdef0123456789abcdef",  # int(..., 16) would accept an underscore
    "０１２３４５６７８９abcdef0123456789abcdef",  # full-width digits, which int() accepts
    "\ud800broken surrogate",
    "跟踪编号",
    " ",
]


@pytest.mark.parametrize("tid", MALFORMED)
def test_malformed_trace_ids_hash_stably_instead_of_raising(tid: str) -> None:
    for rate in (0.2, 0.5, 0.8):
        expected = blake_low64(tid) < rate * 2**64
        decisions = {Sampler(rate=rate).decide(make_run(tid)).sampled for _ in range(3)}
        assert decisions == {expected}


def test_malformed_trace_ids_still_sample_at_the_rate() -> None:
    sampler = Sampler(rate=0.5)
    share = sum(sampler.decide(make_run(f"req-{i}")).sampled for i in range(20_000)) / 20_000
    assert abs(share - 0.5) <= 0.015


@pytest.mark.parametrize("tid", [12345, b"0123456789abcdef0123456789abcdef", object()])
def test_non_string_trace_id_is_treated_as_absent(monkeypatch: pytest.MonkeyPatch, tid: object) -> None:
    monkeypatch.setattr(random, "random", lambda: 0.0)
    run = make_run()
    run.trace_id = tid  # type: ignore[assignment]
    assert Sampler(rate=0.5).decide(run) == Decision(True, "rate")


def test_odd_run_fields_never_raise() -> None:
    run = make_run(LOW)
    run.route = 42  # type: ignore[assignment]
    run.durations["request"] = "slow"  # type: ignore[assignment]
    run.tags["tenant"] = None  # type: ignore[assignment]
    sampler = Sampler(rate=1.0, slow_seconds=1.0, route_rates={"/a": 0.0}, tag_rates={"tenant=x": 0.0})
    assert sampler.decide(run) == Decision(True, "rate")
    odd = make_run(LOW, question=b"bytes", retrieved=None, status="404")  # type: ignore[arg-type]
    odd.durations = None  # type: ignore[assignment]
    assert sampler.decide(odd) == Decision(False, "no_context")
    odd.retrieved = []
    assert sampler.decide(odd) == Decision(False, "no_question")


# -- route and tag rates ----------------------------------------------------------------------------------

ROUTE_RATES = {"/api": 1.0, "/api/admin": 0.0, "/api/admin/audit": 1.0, "/static/": 0.0}

ROUTES = [
    ("/api", Decision(True, "route")),
    ("/api/ask", Decision(True, "route")),
    ("/api/admin", Decision(False, "unsampled")),  # longer prefix wins over /api
    ("/api/admin/users", Decision(False, "unsampled")),
    ("/api/admin/audit/log", Decision(True, "route")),  # and the longest of all wins
    ("/api/administrator", Decision(True, "route")),  # whole segments: /api/admin does not match
    ("/apix", Decision(False, "unsampled")),  # nor does /api; the base rate (0) applies
    ("/static/app.js", Decision(False, "unsampled")),
    ("/static", Decision(False, "unsampled")),  # "/static/" only covers paths beneath it
    ("/", Decision(False, "unsampled")),
    (None, Decision(False, "unsampled")),
]


@pytest.mark.parametrize(("route", "expected"), ROUTES)
def test_route_rates_longest_path_prefix_wins(route: str | None, expected: Decision) -> None:
    sampler = Sampler(rate=0.0, route_rates=ROUTE_RATES)
    assert sampler.decide(make_run(HIGH, route=route)) == expected


def test_route_prefix_precedence_does_not_depend_on_mapping_order() -> None:
    reordered = dict(reversed(list(ROUTE_RATES.items())))
    for route, expected in ROUTES:
        assert Sampler(rate=0.0, route_rates=reordered).decide(make_run(HIGH, route=route)) == expected


def test_unmatched_route_uses_the_base_rate() -> None:
    sampler = Sampler(rate=1.0, route_rates={"/api": 0.0})
    assert sampler.decide(make_run(HIGH, route="/chat")) == Decision(True, "rate")


TAG_RATES = {"tenant=acme": 1.0, "tier=free": 0.0, "flag=": 1.0}

TAGS: list[tuple[float, dict[str, str], Decision]] = [
    # (base rate, run tags, expected) with TAG_RATES
    (0.0, {"tenant": "acme"}, Decision(True, "tag")),
    (0.0, {"tenant": "other"}, Decision(False, "unsampled")),
    (1.0, {"tier": "free"}, Decision(False, "unsampled")),  # tag rate 0 beats the base rate 1
    (0.0, {"tier": "free", "tenant": "acme"}, Decision(True, "tag")),  # first match in mapping order
    (0.0, {"flag": ""}, Decision(True, "tag")),  # "flag=" matches an empty value
    (0.0, {"flag": "x"}, Decision(False, "unsampled")),
    (1.0, {}, Decision(True, "rate")),
]


@pytest.mark.parametrize(("rate", "tags", "expected"), TAGS)
def test_tag_rates_first_match_in_mapping_order(rate: float, tags: dict[str, str], expected: Decision) -> None:
    assert Sampler(rate=rate, tag_rates=TAG_RATES).decide(make_run(HIGH, **tags)) == expected


def test_tag_rate_order_is_the_mapping_order() -> None:
    run = make_run(HIGH, tier="free", tenant="acme")
    assert Sampler(tag_rates={"tier=free": 0.0, "tenant=acme": 1.0}).decide(run) == Decision(False, "unsampled")
    assert Sampler(tag_rates={"tenant=acme": 1.0, "tier=free": 0.0}).decide(run) == Decision(True, "tag")


def test_tag_value_may_contain_equals_signs() -> None:
    sampler = Sampler(rate=0.0, tag_rates={"q=a=b": 1.0})
    assert sampler.decide(make_run(HIGH, q="a=b")) == Decision(True, "tag")


def test_route_rate_beats_tag_rate() -> None:
    sampler = Sampler(rate=0.0, route_rates={"/api": 0.0}, tag_rates={"tenant=acme": 1.0})
    assert sampler.decide(make_run(HIGH, route="/api/ask", tenant="acme")) == Decision(False, "unsampled")
    assert sampler.decide(make_run(HIGH, route="/chat", tenant="acme")) == Decision(True, "tag")


# -- the ceiling ------------------------------------------------------------------------------------------


def test_ceiling_grants_exactly_n_per_simulated_second() -> None:
    clock = FakeClock()
    sampler = Sampler(rate=1.0, max_per_second=5, clock=clock)
    for _ in range(10):
        decisions = [sampler.decide(make_run(LOW)) for _ in range(20)]
        assert decisions == [Decision(True, "rate")] * 5 + [Decision(False, "ceiling")] * 15
        clock.now += 1.0


def test_ceiling_caps_errors_and_slow_requests_too() -> None:
    clock = FakeClock()
    sampler = Sampler(rate=0.0, slow_seconds=1.0, max_per_second=2, clock=clock, sample_errors=True)
    runs = [make_run(outcome="error"), make_run(request_seconds=3.0), make_run(outcome="error")]
    assert [sampler.decide(r) for r in runs] == [
        Decision(True, "error"),
        Decision(True, "slow"),
        Decision(False, "ceiling"),
    ]


def test_forced_and_probe_runs_bypass_the_ceiling_and_spend_no_tokens() -> None:
    clock = FakeClock()
    sampler = Sampler(rate=1.0, probe_rate=1.0, max_per_second=1, clock=clock)
    assert sampler.decide(make_run(LOW)) == Decision(True, "rate")
    assert sampler.decide(make_run(LOW)) == Decision(False, "ceiling")
    for _ in range(100):
        assert sampler.decide(make_run(LOW, force=True)) == Decision(True, "forced")
        assert sampler.decide(make_run(LOW, probe="1")) == Decision(True, "probe")
    clock.now += 1.0
    assert sampler.decide(make_run(LOW)) == Decision(True, "rate")


def test_unsampled_runs_spend_no_tokens() -> None:
    clock = FakeClock()
    sampler = Sampler(rate=0.5, max_per_second=1, clock=clock)
    for _ in range(10):
        assert sampler.decide(make_run(HIGH)) == Decision(False, "unsampled")
    assert sampler.decide(make_run(LOW)) == Decision(True, "rate")


def test_fractional_ceiling_grants_one_every_other_second() -> None:
    clock = FakeClock()
    sampler = Sampler(rate=1.0, max_per_second=0.5, clock=clock)
    granted = []
    for _ in range(10):
        granted.append(sum(sampler.decide(make_run(LOW)).sampled for _ in range(5)))
        clock.now += 1.0
    assert granted == [1, 0, 1, 0, 1, 0, 1, 0, 1, 0]


# -- TokenBucket ------------------------------------------------------------------------------------------


def test_token_bucket_starts_full_and_refills_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, burst=3, clock=clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    clock.now += 0.1
    assert [bucket.take() for _ in range(2)] == [True, False]
    clock.now += 60.0  # a long idle period refills only up to the burst
    assert sum(bucket.take() for _ in range(10)) == 3


def test_token_bucket_default_burst_is_one_second_of_rate_at_least_one() -> None:
    for rate, burst in ((4, 4), (0.25, 1)):
        bucket = TokenBucket(rate, clock=FakeClock())
        assert sum(bucket.take() for _ in range(10)) == burst


def test_token_bucket_ignores_a_clock_that_steps_back() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1, clock=clock)
    assert bucket.take()
    clock.now -= 100.0
    assert not bucket.take()
    clock.now += 101.0  # one second later than the first take, measured from the earlier reading
    assert bucket.take()


def test_token_bucket_is_thread_safe() -> None:
    bucket = TokenBucket(1000, burst=500, clock=FakeClock())  # frozen clock: the budget is the burst
    granted = [0] * 8
    start = threading.Barrier(8)

    def hammer(index: int) -> None:
        start.wait()
        for _ in range(2000):
            if bucket.take():
                granted[index] += 1

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 500


def test_sampler_is_thread_safe_under_a_ceiling() -> None:
    sampler = Sampler(rate=1.0, max_per_second=300, clock=FakeClock())
    results: list[list[Decision]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def hammer(index: int) -> None:
        start.wait()
        results[index] = [sampler.decide(make_run(LOW)) for _ in range(200)]

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    flat = [d for chunk in results for d in chunk]
    assert flat.count(Decision(True, "rate")) == 300
    assert flat.count(Decision(False, "ceiling")) == 8 * 200 - 300


# -- configuration errors ---------------------------------------------------------------------------------

BAD_SAMPLERS: list[tuple[dict[str, Any], str]] = [
    ({"rate": -0.1}, "rate"),
    ({"rate": 1.01}, "rate"),
    ({"rate": float("nan")}, "rate"),
    ({"rate": "0.1"}, "rate"),
    ({"rate": True}, "rate"),
    ({"rate": None}, "rate"),
    ({"probe_rate": 2}, "probe_rate"),
    ({"slow_seconds": 0}, "slow_seconds"),
    ({"slow_seconds": -1.0}, "slow_seconds"),
    ({"slow_seconds": float("nan")}, "slow_seconds"),
    ({"max_per_second": 0}, "max_per_second"),
    ({"max_per_second": -5}, "max_per_second"),
    ({"max_per_second": float("inf")}, "max_per_second"),
    ({"route_rates": {"/api": 1.5}}, "route_rates"),
    ({"route_rates": {"": 0.5}}, "route_rates"),
    ({"route_rates": {1: 0.5}}, "route_rates"),
    ({"route_rates": ["/api"]}, "route_rates"),
    ({"tag_rates": {"tenant": 0.5}}, "tag_rates"),
    ({"tag_rates": {"=acme": 0.5}}, "tag_rates"),
    ({"tag_rates": {"tenant=acme": -1}}, "tag_rates"),
    ({"tag_rates": {("tenant", "acme"): 0.5}}, "tag_rates"),
    ({"clock": 5}, "clock"),
]


@pytest.mark.parametrize(("kwargs", "parameter"), BAD_SAMPLERS)
def test_bad_sampler_configuration_raises_config_error_naming_the_parameter(
    kwargs: dict[str, Any], parameter: str
) -> None:
    with pytest.raises(ConfigError, match=parameter):
        Sampler(**kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "parameter"),
    [
        ((0,), {}, "rate_per_second"),
        ((-1,), {}, "rate_per_second"),
        ((float("inf"),), {}, "rate_per_second"),
        ((10,), {"burst": 0.5}, "burst"),
        ((10,), {"burst": 0}, "burst"),
        ((10,), {"clock": "now"}, "clock"),
    ],
)
def test_bad_token_bucket_configuration(args: tuple[Any, ...], kwargs: dict[str, Any], parameter: str) -> None:
    with pytest.raises(ConfigError, match=parameter):
        TokenBucket(*args, **kwargs)


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="rate"):
        Sampler(rate=5)
