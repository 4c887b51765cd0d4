"""The health report: exact table values, worst samples, diagnoses, JSON, state file and the CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragwatch.report.build import METRICS, build_report, load_records_jsonl, load_state, save_state

ROOT = Path(__file__).resolve().parent.parent
THRESHOLDS = {"faithfulness": 0.75, "answer_relevance": 0.85, "context_relevance": 0.35, "context_precision_3": 0.65}


def record(sid: str, diagnosis: str = "healthy", claims: list | None = None, **scores: float) -> dict:
    return {
        "sample_id": sid,
        "service": "kb-qa",
        "question": f"question {sid}",
        "answer": f"answer {sid}",
        "scores": scores,
        "details": {"offline": {"claims": claims or [], "chunks": []}},
        "diagnosis": diagnosis,
        "created_at": 0.0,
    }


BAD_CLAIM = {
    "text": "Reports above 800 yuan need approval.",
    "verdict": "UNSUPPORTED",
    "chunk_id": "exp-2",
    "evidence": "Reports above 600 yuan need approval.",
    "rule": "number_not_in_context",
}
GOOD_CLAIM = {"text": "Fine.", "verdict": "SUPPORTED", "chunk_id": "exp-1", "evidence": "Fine."}


@pytest.fixture
def records() -> list[dict]:
    return [
        record("a", faithfulness=1.0, context_precision_3=0.8, answer_relevance=0.9),
        record("b", "hallucination", [GOOD_CLAIM, BAD_CLAIM], faithfulness=0.5, context_precision_3=0.7),
        record("c", "noisy_retrieval", faithfulness=0.6, context_precision_3=0.3, answer_relevance=0.8),
        record("d", faithfulness=float("nan"), context_precision_3=0.6),
    ]


def row(report, metric: str):
    return next(r for r in report.rows if r.metric == metric)


def test_table_values(records: list[dict]) -> None:
    report = build_report(records, THRESHOLDS, {"generated_at": 1.0, "means": {"faithfulness": 0.8}})
    f = row(report, "faithfulness")  # NaN counts as missing, not as a low score
    assert f.samples == 3
    assert f.mean == pytest.approx(0.7)
    assert f.std == pytest.approx(math.sqrt(((0.3) ** 2 + 0.2**2 + 0.1**2) / 3))
    assert f.delta == pytest.approx(-0.1)
    assert f.status == "warn"  # 0.70 is within 0.05 under 0.75
    cp = row(report, "context_precision_3")
    assert cp.mean == pytest.approx(0.6) and cp.status == "warn" and cp.delta is None
    ar = row(report, "answer_relevance")
    assert ar.mean == pytest.approx(0.85) and ar.status == "ok" and ar.std == pytest.approx(0.05)
    cr = row(report, "context_relevance")
    assert cr.samples == 0 and cr.mean is None and cr.status == "no data"
    low = build_report([record("x", faithfulness=0.5)], THRESHOLDS)
    assert row(low, "faithfulness").status == "fail"
    md = report.markdown()
    assert "| faithfulness | 3 | 0.700 | 0.216 | -0.100 | ≥ 0.750 | ⚠️ |" in md
    assert "| answer_relevance | 2 | 0.850 | 0.050 | – | ≥ 0.850 | ✅ |" in md


def test_worst_samples_are_ordered_and_carry_unsupported_claims(records: list[dict]) -> None:
    report = build_report(records, THRESHOLDS, worst=5)
    worst = report.worst["faithfulness"]
    assert [w.sample_id for w in worst] == ["b", "c"]  # under 0.75, lowest first; a is above, d is NaN
    assert worst[0].unsupported == [
        {
            "text": BAD_CLAIM["text"],
            "chunk_id": "exp-2",
            "evidence": BAD_CLAIM["evidence"],
            "rule": "number_not_in_context",
        }
    ]
    assert [w.sample_id for w in report.worst["context_precision_3"]] == ["c", "d"]
    assert [w.sample_id for w in build_report(records, THRESHOLDS, worst=1).worst["faithfulness"]] == ["b"]
    md = report.markdown()
    assert "`exp-2`" in md and "Reports above 800 yuan" in md and md.index("`b`") < md.index("`c`")


def test_diagnosis_counts_and_advice(records: list[dict]) -> None:
    report = build_report(records, THRESHOLDS)
    assert report.diagnoses["healthy"] == 2
    assert report.diagnoses["hallucination"] == 1 and report.diagnoses["noisy_retrieval"] == 1
    assert report.diagnoses["retrieval_miss"] == 0
    # ties are broken in pipeline order: retrieval before the LLM
    assert report.look_first() == "noisy_retrieval"
    assert "reranker" in report.markdown()
    assert build_report([record("a", faithfulness=1.0)], THRESHOLDS).look_first() is None


def test_json_form(records: list[dict]) -> None:
    data = json.loads(json.dumps(build_report(records, THRESHOLDS).to_dict()))
    assert data["samples"] == 4 and data["services"] == ["kb-qa"]
    assert [m["metric"] for m in data["metrics"]] == list(METRICS)
    assert data["worst"]["faithfulness"][0]["sample_id"] == "b"
    assert {d["diagnosis"]: d["count"] for d in data["diagnoses"]}["hallucination"] == 1
    assert data["look_first"] == "noisy_retrieval"


def test_state_round_trip(tmp_path: Path, records: list[dict]) -> None:
    path = tmp_path / "state.json"
    assert load_state(path) is None
    first = build_report(records, THRESHOLDS, now=100.0)
    save_state(path, first)
    state = load_state(path)
    assert state is not None and state["means"]["faithfulness"] == pytest.approx(0.7)
    second = build_report([record("z", faithfulness=0.9)], THRESHOLDS, state)
    assert row(second, "faithfulness").delta == pytest.approx(0.2)
    assert second.previous_at == 100.0
    path.write_text("{not json")
    assert load_state(path) is None


def test_cli_report_jsonl(tmp_path: Path, records: list[dict]) -> None:
    jsonl = tmp_path / "scores.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    assert len(load_records_jsonl(jsonl)) == 4
    state = tmp_path / "s.json"
    cmd = [sys.executable, "-m", "ragwatch", "report", "--jsonl", str(jsonl), "--state", str(state)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "# ragwatch health report" in out.stdout and state.exists()
    out = subprocess.run([*cmd, "--format", "json"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["metrics"][0]["delta"] == pytest.approx(0.0)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    out = subprocess.run([*cmd[:5], str(bad), "--no-state"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "bad.jsonl:1" in out.stderr


# -- user text is inert ------------------------------------------------------------------------------------
def _permissive_html(markdown: str) -> str:
    """Render as a careless viewer would: raw HTML on, every link scheme allowed, GFM tables."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
    md.validateLink = lambda url: True
    return md.render(markdown)


def test_markdown_escapes_user_text() -> None:
    from tests.scored import XSS_ANSWER, XSS_CHUNK, XSS_QUESTION

    bad = record("x<y", "hallucination", [{**BAD_CLAIM, "text": XSS_ANSWER, "chunk_id": "c`1`"}], faithfulness=0.1)
    bad.update(question=XSS_QUESTION + " a|b *c*", answer=XSS_ANSWER, service="kb<i>")
    bad["details"]["offline"]["claims"][0]["evidence"] = XSS_CHUNK
    md = build_report([bad], THRESHOLDS).markdown()
    html = _permissive_html(md)
    assert "<script" not in html and "<img" not in html and "<svg" not in html and "<i>" not in html
    assert "href=" not in html and "<em>" not in html  # no link of any scheme, no emphasis from user text
    assert "&lt;script&gt;window.__xss" in html  # ... but the text itself is all there, readable
    assert "[the policy](javascript:" in html and "a|b *c*" in html
    assert "<code>c`1`</code>" in html  # a backtick inside an id cannot close its code span


def test_unknown_diagnosis_counts_as_unknown() -> None:
    report = build_report([record("a", "made-up", faithfulness=0.1)], THRESHOLDS)
    assert report.diagnoses["unknown"] == 1 and "made-up" not in report.diagnoses
    assert "Nothing to look at first" in report.markdown()


# -- the CLI: sources, empty sources, the state file ------------------------------------------------------
def run_cli(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    import os

    environ = {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")} | (env or {})
    cmd = [sys.executable, "-m", "ragwatch", "report", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60, env=environ)


def test_cli_report_writes_no_state_file_unless_told(tmp_path: Path, records: list[dict]) -> None:
    jsonl = tmp_path / "scores.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    out = run_cli("--jsonl", str(jsonl), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert list(tmp_path.iterdir()) == [jsonl]  # no .ragwatch-report.json dropped in the cwd
    state = tmp_path / "deep" / "state.json"
    state.parent.mkdir()
    out = run_cli("--jsonl", str(jsonl), cwd=tmp_path, env={"RAGWATCH_REPORT_STATE_FILE": str(state)})
    assert out.returncode == 0, out.stderr
    assert json.loads(state.read_text())["means"]["faithfulness"] == pytest.approx(0.7)
    out = run_cli("--jsonl", str(jsonl), "--no-state", cwd=tmp_path, env={"RAGWATCH_REPORT_STATE_FILE": str(state)})
    assert "Δ against" not in out.stdout


def test_cli_report_on_nothing_says_so(tmp_path: Path, redis_url: str) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    out = run_cli("--jsonl", str(empty))
    assert out.returncode == 1 and "no score records" in out.stderr and out.stdout == ""
    out = run_cli("--redis-url", redis_url, "--service", "nobody")
    assert out.returncode == 1 and "no score records" in out.stderr and "nobody" in out.stderr
    out = run_cli()  # no queue configured: memory:// would be another process's, always empty
    assert out.returncode == 2 and "--jsonl" in out.stderr and "--url" in out.stderr
    out = run_cli("--jsonl", str(tmp_path / "missing.jsonl"))
    assert out.returncode == 2 and "missing.jsonl" in out.stderr


def test_cli_report_html(tmp_path: Path, records: list[dict]) -> None:
    jsonl = tmp_path / "scores.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    page = tmp_path / "report.html"
    out = run_cli("--jsonl", str(jsonl), "--html", str(page))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and "wrote" in out.stderr
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "connect-src 'none'" in html and "uPlot" in html
    assert '"samples":4' in html


def test_the_report_names_who_scored_and_warns_when_versions_mix() -> None:
    """Scores from another judge version (weights, threshold, relevance offset) measure something else: the
    report says who scored the window and flags a judge seen under two versions."""
    shipped = {"name": "offline", "version": "1+aaaa+bbbb"}
    tuned = {"name": "offline", "version": "1+aaaa+bbbbo-1.3+t0.6"}
    rows = [record(f"s{i}", faithfulness=1.0) for i in range(5)]
    for i, r in enumerate(rows):
        r["judges"] = [shipped if i < 3 else tuned, {"name": "semantic", "version": "1+cc"}]
    rows.append(record("broken", faithfulness=1.0) | {"judges": ["not a judge", {"version": "no name"}]})
    report = build_report(rows, THRESHOLDS)
    assert report.judges == [
        {"name": "offline", "version": "1+aaaa+bbbb", "samples": 3},
        {"name": "offline", "version": "1+aaaa+bbbbo-1.3+t0.6", "samples": 2},
        {"name": "semantic", "version": "1+cc", "samples": 5},
    ]
    assert report.mixed_judges() == ["offline"]
    md = report.markdown()
    assert "Scored by `offline` `1+aaaa+bbbb` (3) · `offline` `1+aaaa+bbbbo-1.3+t0.6` (2)" in md
    assert "⚠️ `offline` scored this window under more than one version" in md
    assert "`semantic` scored this window" not in md
    data = json.loads(json.dumps(report.to_dict()))
    assert data["mixed_judges"] == ["offline"] and len(data["judges"]) == 3
    one = build_report(rows[:3], THRESHOLDS)
    assert one.mixed_judges() == [] and "more than one version" not in one.markdown()
    assert "Scored by" not in build_report([record("x", faithfulness=1.0)], THRESHOLDS).markdown()


def test_hallucination_rate_is_held_to_a_ceiling() -> None:
    """The share of answers with an unsupported claim: a higher mean is worse, so its line is a ceiling —
    status, worst samples and the table all read it that way round (as a floor, 0.10 would fail)."""
    thresholds = {**THRESHOLDS, "hallucination_rate": 0.2}

    def rates(*values: float) -> list[dict]:
        return [
            record(f"h{i}", "hallucination" if v else "healthy", [GOOD_CLAIM, BAD_CLAIM] if v else [GOOD_CLAIM],
                   hallucination_rate=v, faithfulness=0.5 if v else 1.0)
            for i, v in enumerate(values)
        ]  # fmt: skip

    bad = build_report(rates(0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0), thresholds)
    r = row(bad, "hallucination_rate")
    assert (r.direction, r.mean, r.status) == ("max", pytest.approx(0.3), "fail")
    assert row(bad, "faithfulness").direction == "min"
    assert row(build_report(rates(1.0, 0.0, 0.0, 0.0), thresholds), "hallucination_rate").status == "warn"  # 0.25
    assert row(build_report(rates(1.0, 0, 0, 0, 0), thresholds), "hallucination_rate").status == "ok"  # 0.20
    assert row(build_report(rates(1.0, *[0.0] * 9), thresholds), "hallucination_rate").status == "ok"  # 0.10
    md = bad.markdown()
    assert "| hallucination_rate | 10 | 0.300 | 0.458 | – | ≤ 0.200 | ❌ |" in md
    assert "| faithfulness | 10 | 0.850 | 0.229 | – | ≥ 0.750 | ✅ |" in md
    # worst samples: the answers over the line (each with its unsupported claim), never the clean ones
    worst = bad.worst["hallucination_rate"]
    assert [w.sample_id for w in worst] == ["h1", "h3", "h6"]
    assert all(w.score == 1.0 and w.unsupported[0]["text"] == BAD_CLAIM["text"] for w in worst)
    data = bad.to_dict()
    assert {m["metric"]: m["direction"] for m in data["metrics"]} == {
        "faithfulness": "min",
        "hallucination_rate": "max",
        "answer_relevance": "min",
        "context_relevance": "min",
        "context_precision_3": "min",
    }
    assert [m["metric"] for m in data["metrics"]][:2] == ["faithfulness", "hallucination_rate"]


def test_default_thresholds_carry_the_hallucination_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragwatch.report.build import default_thresholds
    from ragwatch.settings import HALLUCINATION_RATE_LINE, load_settings

    for name in [k for k in os.environ if k.startswith("RAGWATCH_")]:
        monkeypatch.delenv(name)
    assert default_thresholds(load_settings())["hallucination_rate"] == HALLUCINATION_RATE_LINE


def test_the_report_covers_a_range_and_shows_now_first() -> None:
    """``since``/``until`` keep the records of a range and the header names it; the now-panel (the live
    windows and the breaker in words) comes before the range's table."""
    from ragwatch.mode.degrade import ModeState, Policy
    from ragwatch.report.now import now_panel
    from ragwatch.report.select import time_range

    rows = [record(f"r{i}", faithfulness=0.2 if i < 5 else 1.0) | {"created_at": 1000.0 + i} for i in range(10)]
    span = time_range(since="1005", until="1009", now=2000.0, default=None)
    report = build_report(rows, THRESHOLDS, span=span)
    assert report.samples == 5 and row(report, "faithfulness").mean == pytest.approx(1.0)  # the dip is outside
    assert (report.first_at, report.last_at) == (1005.0, 1009.0)
    assert report.to_dict()["range"]["name"] == "custom" and "(chosen range)" in report.markdown()
    policy = Policy(metric="faithfulness", threshold=0.75, window_samples=5, min_samples=3, hold_seconds=60)
    mode = ModeState(degraded=True, since=1003.0, recovering_since=1007.0)
    live = now_panel(THRESHOLDS, policy, mode, records=rows, now=1009.0)
    md = build_report(rows, THRESHOLDS, span=span, live=live).markdown()
    assert md.index("## Now") < md.index("Range:") < md.index("## Scores")
    assert "leaves when faithfulness ≥ 0.80 for 60 s — 2 s so far" in md
    assert "| faithfulness (SLA) | 1.000 | ≥ 0.750 | +0.250 | 5 |" in md
    assert "## Now" not in build_report(rows, THRESHOLDS).markdown()


def test_cli_report_covers_since_until_with_now_first_and_trace_links(tmp_path: Path) -> None:
    """``report --since/--until`` keep the range's records (the header names it), the now-panel comes first,
    and the HTML report's cards link to the trace of ``trace_url_template``; a bad time is one line, exit 2."""
    rows = [
        record(f"r{i}", faithfulness=0.2 if i < 5 else 1.0) | {"created_at": 1000.0 + i, "trace_id": f"{i:032x}"}
        for i in range(10)
    ]
    jsonl = tmp_path / "scores.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    out = run_cli("--jsonl", str(jsonl), "--no-state", "--since", "1005", "--until", "1009", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["samples"] == 5 and data["range"]["name"] == "custom"
    assert (data["range"]["start"], data["range"]["end"]) == (1005.0, 1009.0)
    assert next(m for m in data["metrics"] if m["metric"] == "faithfulness")["mean"] == pytest.approx(1.0)
    assert data["now"] is not None  # the SLA metric's live window, rebuilt from the records
    md = run_cli("--jsonl", str(jsonl), "--no-state", "--since", "1005").stdout
    assert md.index("## Now") < md.index("## Scores") and "(chosen range)" in md
    page = tmp_path / "report.html"
    env = {"RAGWATCH_TRACE_URL_TEMPLATE": "https://tempo.example/trace/{trace_id}"}
    out = run_cli("--jsonl", str(jsonl), "--no-state", "--until", "1004", "--html", str(page), env=env)
    assert out.returncode == 0, out.stderr
    html = page.read_text(encoding="utf-8")
    assert '"samples":5' in html and '"name":"custom"' in html
    assert f"https://tempo.example/trace/{3:032x}" in html  # a low card of the range links to its trace
    out = run_cli("--jsonl", str(jsonl), "--no-state", "--since", "yesterday-ish")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "not a time" in out.stderr
