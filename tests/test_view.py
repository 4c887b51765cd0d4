"""The page's view data: time buckets, degraded periods replayed with the real breaker, slices, worst samples."""

from __future__ import annotations

import json

import pytest

from ragwatch.mode.degrade import ModeState, Policy
from ragwatch.report.view import bucket_seconds, degraded_periods, view_data
from tests.scored import XSS_QUESTION, scored_records

THRESHOLDS = {"faithfulness": 0.75, "answer_relevance": 0.85, "context_relevance": 0.35, "context_precision_3": 0.65}
POLICY = Policy(window_samples=20, min_samples=8, window_seconds=120, hold_seconds=10, min_dwell_seconds=10)
START = 1_800_000_000.0


def test_bucket_width_snaps_to_readable_steps() -> None:
    assert bucket_seconds(0) == 0.1 and bucket_seconds(10) == 0.2  # a demo's few seconds still get a shape
    assert bucket_seconds(600, 60) == 10
    assert bucket_seconds(601, 60) == 15
    assert bucket_seconds(3600 * 24, 60) == 1800


def test_timeline_means_and_counts_per_bucket() -> None:
    records = scored_records(START)
    data = view_data(records, THRESHOLDS, POLICY, now=START + 700)
    tl = data["timeline"]
    assert tl["step"] == 10 and tl["t"][0] == START and len(tl["t"]) == 60
    counts = tl["series"]["context_precision_3"]["count"]
    assert sum(counts) == 240 and counts[0] == 4
    first = [r["scores"]["context_precision_3"] for r in records[:4]]
    assert tl["series"]["context_precision_3"]["mean"][0] == pytest.approx(sum(first) / 4)
    mix = data["diagnosis_mix"]
    assert sum(mix["noisy_retrieval"]) == sum(1 for r in records if r["diagnosis"] == "noisy_retrieval")
    assert sum(sum(v) for v in mix.values()) == 240
    json.dumps(data, allow_nan=False)  # what the endpoint sends must be strict JSON


def test_degraded_period_is_replayed_from_the_scores() -> None:
    records = scored_records(START)  # the fault covers samples 80..159, i.e. 200 s .. 400 s
    data = view_data(records, THRESHOLDS, POLICY, now=START + 700)
    [period] = data["degraded_periods"]
    assert START + 200 < period["start"] < START + 260  # once 8+ of the last 20 drag the mean under 0.65
    assert START + 400 < period["end"] < START + 480  # after the window recovers and holds 10 s
    assert "context_precision_3" in period["reason"] and not period["open"]
    healthy_only = [r for r in records if r["scores"]["context_precision_3"] >= 0.65]
    assert view_data(healthy_only, THRESHOLDS, POLICY)["degraded_periods"] == []


def test_a_period_still_open_ends_at_the_last_point() -> None:
    points = [(float(t), 0.9) for t in range(30)] + [(float(t), 0.1) for t in range(30, 60)]
    [period] = degraded_periods(points, POLICY)
    assert period["open"] and period["end"] == 59.0


def test_live_override_shows_even_without_a_replayed_period() -> None:
    records = scored_records(START)[:60]  # healthy part only
    forced = ModeState(override="on", since=START + 100, reason="operator")
    data = view_data(records, THRESHOLDS, POLICY, forced)
    assert data["mode"]["degraded"] and data["mode"]["override"] == "on"
    assert data["degraded_periods"][-1]["start"] == START + 100


def test_heatmap_slices_by_route_model_and_tag() -> None:
    records = scored_records(START)
    rows = {(r["kind"], r["value"]): r for r in view_data(records, THRESHOLDS, POLICY)["heatmap"]["rows"]}
    assert {k for k, _ in rows} == {"route", "model", "tag"}
    chat = [r for r in records if r["route"] == "/chat"]
    cell = rows[("route", "/chat")]["cells"]["faithfulness"]
    assert cell["n"] == len(chat)
    assert cell["mean"] == pytest.approx(sum(r["scores"]["faithfulness"] for r in chat) / len(chat))
    assert rows[("tag", "tenant=globex")]["samples"] == 60


def test_worst_samples_carry_all_claims_and_chunks() -> None:
    data = view_data(scored_records(START), THRESHOLDS, POLICY, worst=3)
    faith = [w for w in data["worst"] if w["metric"] == "faithfulness"]
    assert len(faith) == 3 and faith[0]["score"] == 0.0 and faith[0]["question"] == XSS_QUESTION
    verdicts = [c["verdict"] for c in faith[1]["claims"]]
    assert "UNSUPPORTED" in verdicts and len(verdicts) == 2
    assert faith[1]["chunks"][0] == {"id": "travel-07", "relevance": pytest.approx(0.9, abs=0.6), "used": True}
    assert faith[0]["claims"][0]["start"] is None  # offsets that are not offsets are dropped, not trusted


def test_bad_records_are_skipped_not_fatal() -> None:
    records = [*scored_records(START, n=30), "junk", {"scores": "nope"}, {"created_at": "x", "scores": {}}]
    data = view_data(records, THRESHOLDS, POLICY)
    assert data["samples"] == 32  # the two dicts count as samples without scores; the string is ignored
    assert sum(data["timeline"]["series"]["faithfulness"]["count"]) == 30


def test_the_hallucination_rate_line_is_a_ceiling() -> None:
    records = scored_records(START)
    data = view_data(records, {**THRESHOLDS, "hallucination_rate": 0.2}, POLICY, now=START + 700)
    assert data["directions"]["hallucination_rate"] == "max" and data["directions"]["faithfulness"] == "min"
    assert data["thresholds"]["hallucination_rate"] == 0.2
    [rate] = [m for m in data["metrics"] if m["metric"] == "hallucination_rate"]
    lies = [r for r in records if r["scores"]["hallucination_rate"] == 1.0]
    assert rate["mean"] == pytest.approx(len(lies) / len(records)) and rate["status"] == "ok"  # ~1 in 7 < 0.2
    series = data["timeline"]["series"]["hallucination_rate"]
    assert sum(c * m for c, m in zip(series["count"], series["mean"], strict=True) if m is not None) == len(lies)
    worst = [w for w in data["worst"] if w["metric"] == "hallucination_rate"]
    assert len(worst) == 5 and all(w["score"] == 1.0 for w in worst)
    flagged = [w for w in worst if w["sample_id"] != "s-<b>bold</b>"]  # its claims were doctored, not its scores
    assert all(any(c["verdict"] == "UNSUPPORTED" for c in w["claims"]) for w in flagged)
