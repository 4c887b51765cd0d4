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


def test_worst_samples_are_grouped_by_question_with_all_claims_and_chunks() -> None:
    records = scored_records(START)
    data = view_data(records, THRESHOLDS, POLICY, worst=3)
    groups = data["worst"]
    past = [
        r
        for r in records
        if r["question"] == records[0]["question"]
        and any(r["scores"][m] < t for m, t in THRESHOLDS.items() if m in r["scores"] and m != "context_relevance")
    ]
    asked = next(g for g in groups if g["sample"]["question"] == records[0]["question"])
    assert asked["count"] == len(past) > 50  # one card for the question, the count of its failing samples
    assert len(asked["others"]) == 10 and len({g["sample"]["question"] for g in groups}) == len(groups)
    xss = next(g for g in groups if g["sample"]["question"] == XSS_QUESTION)
    assert xss["count"] == 1 and xss["sample"]["score"] == 0.0 and xss["sample"]["metric"] == "faithfulness"
    card = asked["sample"]  # the furthest past a line: the lowest CP@3 of the fault
    assert card["metric"] == "context_precision_3"
    assert card["score"] == min(r["scores"]["context_precision_3"] for r in past)
    assert len(card["claims"]) == 2 and {c["verdict"] for c in card["claims"]} <= {
        "SUPPORTED",
        "UNSUPPORTED",
        "UNVERIFIABLE",
    }
    assert card["chunks"][0]["id"] == "travel-07" and card["chunks"][0]["used"] is True
    assert card["trace_id"] == records[int(card["sample_id"][1:])]["trace_id"] and card["trace_link"] is None
    assert xss["sample"]["claims"][0]["start"] is None  # offsets that are not offsets are dropped, not trusted


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
    worst = [g["sample"] for g in data["worst"] if g["sample"]["metric"] == "hallucination_rate"]
    assert worst and all(w["score"] == 1.0 for w in worst)
    flagged = [w for w in worst if w["sample_id"] != "s-<b>bold</b>"]  # its claims were doctored, not its scores
    assert flagged and all(any(c["verdict"] == "UNSUPPORTED" for c in w["claims"]) for w in flagged)


# -- issue 27: range, filters, labels, duplicates, markers, the now-panel, operations ------------------------
def test_a_range_keeps_its_records_and_the_axis_spans_it() -> None:
    from ragwatch.report.select import time_range

    records = scored_records(START)  # 10 minutes from START
    now = START + 900
    span = time_range({"range": ["15m"]}, now)
    assert (span.start, span.end, span.name) == (now - 900, None, "15m")
    data = view_data(records, THRESHOLDS, POLICY, span=span, now=now)
    assert data["samples"] == 240 and data["timeline"]["t"][0] <= START and data["range"]["name"] == "15m"
    assert data["timeline"]["t"][-1] + data["timeline"]["step"] >= now  # the axis reaches the range's end
    late = time_range({"from": [str(START + 300)], "to": [str(START + 400)]}, now)
    part = view_data(records, THRESHOLDS, POLICY, span=late, now=now)
    inside = [r for r in records if START + 300 <= r["created_at"] <= START + 400]
    assert part["samples"] == len(inside) == 41 and part["range"]["name"] == "custom"
    assert sum(part["timeline"]["series"]["faithfulness"]["count"]) == 41
    assert time_range({"from": ["90m"]}, now).start == now - 5400  # a duration ago
    assert time_range(None, now, default=None).start is None  # the report's default: every record


def test_bad_range_values_are_config_errors() -> None:
    from ragwatch.errors import ConfigError
    from ragwatch.report.select import Filters, time_range

    for query in ({"range": ["7d"]}, {"from": ["yesterday"]}, {"from": ["200"], "to": ["100"]}):
        with pytest.raises(ConfigError):
            time_range(query, START)
    with pytest.raises(ConfigError, match="min must be a number"):
        Filters.from_query({"min": ["low"]})


def test_filters_narrow_everything_but_the_replay() -> None:
    from ragwatch.report.select import Filters

    records = scored_records(START)

    def only(**query: str) -> dict:
        return view_data(records, THRESHOLDS, POLICY, filters=Filters.from_query({k: [v] for k, v in query.items()}))

    noisy = only(diagnosis="noisy_retrieval")
    assert noisy["samples"] == sum(1 for r in records if r["diagnosis"] == "noisy_retrieval") > 0
    assert noisy["degraded_periods"] == view_data(records, THRESHOLDS, POLICY)["degraded_periods"]
    assert only(route="/chat")["samples"] == sum(1 for r in records if r["route"] == "/chat")
    assert only(model="qwen-7b")["samples"] == 120 and only(tag="tenant=globex")["samples"] == 60
    low = only(metric="context_precision_3", max="0.3")
    assert low["samples"] == sum(1 for r in records if r["scores"]["context_precision_3"] <= 0.3) == 80
    assert only(q="REFUND")["samples"] == 1  # case-folded substring of the question (the XSS sample's)
    assert only(q=records[5]["trace_id"])["samples"] == 1
    assert only(q="nothing like this")["samples"] == 0
    assert noisy["filter_options"]["route"] == sorted({r["route"] for r in records})  # menus cover the range


def test_several_diagnosis_labels_count_under_each() -> None:
    from ragwatch.report.build import build_report

    records = scored_records(START, n=30)
    for r in records:
        r["diagnoses"] = ["noisy_retrieval", "hallucination"] if r["diagnosis"] == "hallucination" else [r["diagnosis"]]
    both = sum(1 for r in records if len(r["diagnoses"]) == 2)
    report = build_report(records, THRESHOLDS)
    assert both and report.diagnoses["hallucination"] == both
    assert report.diagnoses["noisy_retrieval"] == both + sum(1 for r in records if r["diagnosis"] == "noisy_retrieval")
    data = view_data(records, THRESHOLDS, POLICY)
    assert sum(data["diagnosis_mix"]["hallucination"]) == both
    assert view_data(records, THRESHOLDS, POLICY, filters=_filters(diagnosis="hallucination"))["samples"] == both


def _filters(**query: str):  # type: ignore[no-untyped-def]
    from ragwatch.report.select import Filters

    return Filters.from_query({k: [v] for k, v in query.items()})


def test_a_metric_equal_to_another_by_construction_is_shown_once() -> None:
    records = scored_records(START)
    assert view_data(records, THRESHOLDS, POLICY)["merged"] == {}  # 0.9 x CP@3: a different metric
    for r in records:
        r["scores"]["context_relevance"] = r["scores"]["context_precision_3"]  # top_k == K
    data = view_data(records, THRESHOLDS, POLICY)
    assert data["merged"] == {"context_relevance": "context_precision_3"}
    assert "context_relevance" not in data["heatmap"]["metrics"]
    assert "context_relevance" not in data["timeline"]["series"]
    assert all(g["sample"]["metric"] != "context_relevance" for g in data["worst"])
    assert [m["metric"] for m in data["metrics"]].count("context_relevance") == 0


def test_markers_for_mode_switches_judge_and_service_versions() -> None:
    records = scored_records(START)
    for i, r in enumerate(records):
        r["service_version"] = "1.4.0" if i < 100 else "1.5.0"
        if i >= 200:
            r["judges"] = [{"name": "offline", "version": "2"}]
    data = view_data(records, THRESHOLDS, POLICY, now=START + 700)
    kinds = {(m["kind"], m["label"]): m["t"] for m in data["markers"]}
    assert kinds[("version", "service 1.5.0")] == records[100]["created_at"]
    assert kinds[("judge", "judge offline 2")] == records[200]["created_at"]
    [period] = data["degraded_periods"]
    assert kinds[("mode", "degraded")] == period["start"] and kinds[("mode", "normal")] == period["end"]
    assert not view_data(scored_records(START)[:60], THRESHOLDS, POLICY)["markers"]  # nothing changed


def test_trace_links_are_built_from_the_template_and_escaped() -> None:
    from ragwatch.report.worst import trace_link

    template = "https://tempo.example/explore?trace={trace_id}&x=1"
    assert trace_link(template, "abc123") == "https://tempo.example/explore?trace=abc123&x=1"
    assert trace_link(template, 'a&b="<x>/#') == "https://tempo.example/explore?trace=a%26b%3D%22%3Cx%3E%2F%23&x=1"
    assert trace_link("javascript:alert('{trace_id}')", "abc") is None and trace_link(None, "abc") is None
    assert trace_link(template, None) is None
    data = view_data(scored_records(START), THRESHOLDS, POLICY, trace_url=template)
    card = data["worst"][0]["sample"]
    assert card["trace_link"] == template.replace("{trace_id}", card["trace_id"])


def test_now_panel_is_the_breakers_window_and_says_why_in_words() -> None:
    from ragwatch.mode.degrade import window_value
    from ragwatch.report.now import breaker_words, now_panel, points_from_records

    records = scored_records(START)[:150]  # ends inside the fault
    panel = now_panel(THRESHOLDS, POLICY, None, records=records, metrics=list(THRESHOLDS))
    sla = panel["windows"][0]
    expected = window_value(points_from_records(records, "context_precision_3"), POLICY, records[-1]["created_at"])
    assert (sla["metric"], sla["value"], sla["samples"]) == ("context_precision_3", *expected)
    assert sla["value"] < 0.3 and sla["margin"] == pytest.approx(sla["value"] - 0.65) and sla["sla"]
    assert panel["as_of"] == records[-1]["created_at"] and panel["words"] == "mode: not in this source"
    since = START + 250
    degraded = ModeState(degraded=True, since=since, recovering_since=since + 20, reason="x")
    words = breaker_words(now_panel(THRESHOLDS, POLICY, degraded, records=records, now=since + 65)["breaker"])
    assert "degraded since " in words
    assert words.endswith("leaves when context_precision_3 ≥ 0.70 for 10 s — 45 s so far"), words
    normal = now_panel(THRESHOLDS, POLICY, ModeState(since=since), records=records, now=since + 5)["words"]
    assert "enters degraded when context_precision_3 < 0.65 over at least 8 samples" in normal
    assert "not before" in normal  # 5 s into a 10 s minimum dwell
    forced = now_panel(THRESHOLDS, POLICY, ModeState(override="on", since=since), records=records)["words"]
    assert forced.startswith("degraded by an operator")


def test_operations_from_this_processs_own_metrics() -> None:
    from prometheus_client import CollectorRegistry

    from ragwatch.metrics.catalog import CaptureMetrics
    from ragwatch.report.ops import InProcessOperations, histogram_quantile
    from ragwatch.report.select import TimeRange

    assert histogram_quantile(0.5, [(0.1, 0.0), (0.2, 10.0), (float("inf"), 10.0)]) == pytest.approx(0.15)
    assert histogram_quantile(0.95, [(0.1, 0.0), (float("inf"), 4.0)]) == 0.1  # in +Inf: the highest bound
    assert histogram_quantile(0.95, []) is None
    m = CaptureMetrics(CollectorRegistry())
    ops = InProcessOperations([m.stage_duration, m.cost], "svc")
    ok, err = m.stage_duration.labels("svc", "request", "ok"), m.stage_duration.labels("svc", "request", "error")
    for _ in range(18):
        ok.observe(0.03)
    err.observe(2.0)
    err.observe(2.0)
    m.stage_duration.labels("other", "request", "ok").observe(9.0)  # another service: not ours
    m.cost.labels("svc", "gpt", "reported").inc(0.5)
    started = ops._snapshots[0][0]
    figures = ops.figures(TimeRange(), now=started + 100)
    assert figures["requests"] == 20 and figures["error_ratio"] == pytest.approx(0.1)
    assert figures["rate_per_second"] == pytest.approx(0.2) and figures["cost_per_hour"] == pytest.approx(18.0)
    assert 1.0 < figures["p95_seconds"] <= 2.5  # the two 2 s errors are the top 10 %
    for _ in range(10):
        ok.observe(0.03)
    later = ops.figures(TimeRange(start=started + 150), now=started + 200)  # only what came after the snapshot
    assert later["requests"] == 10 and later["error_ratio"] == 0 and later["since"] == started + 100
