"""The degraded-mode state machine on simulated score streams (pure, no I/O)."""

from __future__ import annotations

import itertools
import random

import pytest

from ragwatch.errors import ConfigError
from ragwatch.mode.degrade import ModeState, Policy, effective, step, window_value

POLICY = Policy(
    window_seconds=600, window_samples=20, min_samples=10, margin=0.05, hold_seconds=60, min_dwell_seconds=300
)


def run_stream(scores: list[float], policy: Policy = POLICY, every: float = 1.0) -> list[tuple[int, ModeState]]:
    """Feed one score per `every` seconds, evaluating after each; return (index, state) at each transition."""
    state = ModeState(since=-1e9)
    points: list[tuple[float, float]] = []
    transitions = []
    for i, score in enumerate(scores):
        now = i * every
        points.insert(0, (now, score))  # newest first, as the store returns them
        value, n = window_value(points, policy, now)
        new = step(policy, state, value, n, now)
        if new.degraded != state.degraded:
            transitions.append((i, new))
        state = new
    return transitions


def test_clean_step_drop_enters_within_the_window() -> None:
    scores = [0.9] * 100 + [0.2] * 100
    transitions = run_stream(scores)
    (index, state), *rest = transitions
    assert state.degraded and "context_precision_3" in state.reason
    # the mean of the last 20 crosses 0.65 after 20 * (0.9 - 0.65) / (0.9 - 0.2) = 7.1 bad scores -> the 8th
    assert index == 100 + 7
    assert rest == []


def test_recovery_leaves_after_hold_and_dwell() -> None:
    scores = [0.9] * 50 + [0.2] * 400 + [0.95] * 400
    transitions = run_stream(scores)
    assert [s.degraded for _, s in transitions] == [True, False]
    entered, left = transitions[0][0], transitions[1][0]
    assert entered == 50 + 7
    # recovery: the window mean reaches 0.70 (threshold + margin) after 20 * (0.70 - 0.2) / (0.95 - 0.2) = 13.3
    # -> 14 good scores (index 463), and must hold for 60 s; the 300 s dwell since entering has long passed
    assert left == 463 + 60


def test_noise_around_the_threshold_does_not_flap() -> None:
    rng = random.Random(7)
    scores = [min(1.0, max(0.0, rng.gauss(0.65, 0.15))) for _ in range(3000)]
    transitions = run_stream(scores)
    times = [i for i, _ in transitions]
    # at most one transition per dwell period (300 s here, one score per second)
    assert times  # the noise does push the window under the threshold
    naive = Policy(window_seconds=600, window_samples=20, min_samples=10, margin=0, hold_seconds=0, min_dwell_seconds=0)
    assert len(run_stream(scores, naive)) > 100  # without margin, hold and dwell the same stream flaps
    assert all(b - a >= 300 for a, b in itertools.pairwise(times))
    assert len(transitions) <= 3000 // 300


def test_not_enough_samples_never_decides() -> None:
    policy = Policy(window_seconds=60, window_samples=100, min_samples=50, min_dwell_seconds=0, hold_seconds=0)
    transitions = run_stream([0.0] * 200, policy, every=2.0)  # only 30 scores fit in 60 s
    assert transitions == []


def test_max_direction_mirrors_min() -> None:
    """A 'max' SLA on a bad-outcome rate behaves like the 'min' SLA on its complement."""
    low = Policy(**{**_fields(POLICY), "threshold": 0.35, "direction": "max"})
    scores = [0.9] * 50 + [0.2] * 400 + [0.95] * 400
    mirrored = run_stream([1 - s for s in scores], low)
    assert [(i, s.degraded) for i, s in mirrored] == [(i, s.degraded) for i, s in run_stream(scores)]
    assert "> 0.35" in mirrored[0][1].reason


def _fields(policy: Policy) -> dict:
    return {f: getattr(policy, f) for f in policy.__dataclass_fields__}


def test_override_wins() -> None:
    state = ModeState(degraded=False)
    assert effective(state) is False
    assert effective(ModeState(degraded=False, override="on")) is True
    assert effective(ModeState(degraded=True, override="off")) is False


def test_state_round_trips_through_its_stored_form() -> None:
    state = ModeState(
        degraded=True, since=12.5, reason="r", value=0.4, samples=30, recovering_since=20.0, override="on", version=7
    )
    assert ModeState.from_fields(state.to_fields()) == state
    assert ModeState.from_fields({b"degraded": b"1", b"version": b"3"}).version == 3
    assert ModeState.from_fields({"since": "garbage"}) == ModeState()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": 1.5},
        {"margin": 0.5},
        {"window_seconds": 0},
        {"min_samples": 0},
        {"min_samples": 300, "window_samples": 200},
    ],
)
def test_bad_policy(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        Policy(**kwargs)


CAPPED = Policy(window_samples=100, min_samples=10, max_client_share=0.1)


def test_one_client_keeps_at_most_its_share_of_the_window() -> None:
    # 40 clients with one good score each, one client with 60 bad ones (newest first, interleaved)
    points = [(100.0 - i, 0.0, "attacker") for i in range(60)] + [(50.0 - i, 0.9, f"user{i}") for i in range(40)]
    value, n = window_value(points, CAPPED, 100.0)
    assert n == 40 + 10  # the attacker keeps 10 % of the 100 fresh points, its newest
    assert value == pytest.approx(40 * 0.9 / 50)
    uncapped, _ = window_value(points, Policy(window_samples=100, min_samples=10), 100.0)
    assert uncapped == pytest.approx(40 * 0.9 / 100)


def test_the_cap_never_goes_below_an_even_split() -> None:
    one_client = [(100.0 - i, 0.5, "proxy") for i in range(50)]  # everything behind one unconfigured proxy
    assert window_value(one_client, CAPPED, 100.0) == (pytest.approx(0.5), 50)
    two = [(100.0 - i, 0.2, "a") for i in range(30)] + [(60.0 - i, 0.8, "b") for i in range(10)]
    assert window_value(two, CAPPED, 100.0)[1] == 20 + 10  # quota = 40 / 2 clients


def test_points_without_a_client_are_not_capped() -> None:
    points = [(100.0 - i, 0.4, "") for i in range(30)] + [(60.0 - i, 0.4) for i in range(30)]
    assert window_value(points, CAPPED, 100.0)[1] == 60


def test_max_client_share_is_validated() -> None:
    for share in (0, 1.5, -0.1):
        with pytest.raises(ConfigError, match="max_client_share"):
            Policy(max_client_share=share)
