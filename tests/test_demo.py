"""The demo end to end: a fault drives degraded mode on and off, and the report names the falsified answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragwatch.demo import run_demo
from ragwatch.demo.kb import CHUNKS, QUESTIONS
from ragwatch.demo.service import Index, _falsify, tokenize

ROOT = Path(__file__).resolve().parent.parent


def test_knowledge_base_is_bilingual_and_retrievable() -> None:
    assert {q.lang for q in QUESTIONS} == {"en", "zh"}
    assert 2 * min(sum(q.lang == lang for q in QUESTIONS) for lang in ("en", "zh")) >= len(QUESTIONS) * 0.8
    index = Index()
    for q in QUESTIONS:  # the healthy retriever finds the question's own policy area in its language
        top = index.search(q.text, 3)
        assert (top[0][0].topic, top[0][0].lang) == (q.topic, q.lang), q.text
    assert len(CHUNKS) > 60
    assert "出差" in tokenize("出差住宿") and "expense" in tokenize("Expenses")


def test_falsify_changes_a_number_to_one_absent_from_the_context() -> None:
    out, kind = _falsify("Reports above 600 yuan need approval.", "Reports above 600 yuan need approval.", 0.0)
    assert kind == "number" and "800" in out and "600" not in out


@pytest.fixture(scope="module")
def quick_result():
    lines: list[str] = []
    result = run_demo(quick=True, progress=False, out=lines.append)
    return result, "\n".join(lines)


def test_degraded_mode_is_entered_and_left(quick_result) -> None:
    result, printed = quick_result
    assert result.entered_degraded and result.left_degraded
    assert result.degraded_responses > 0
    assert [d for _, d, _ in result.transitions] == [True, False]
    assert result.scored == result.requests
    assert result.seconds < 15
    assert "# ragwatch health report" in printed and "degraded mode entered: yes, left: yes" in printed


def test_report_names_the_falsified_answers(quick_result) -> None:
    result, _ = quick_result
    assert result.falsified >= 5
    assert result.flagged >= 0.6 * result.falsified
    report = result.report.to_dict()
    hallucinations = {d["diagnosis"]: d["count"] for d in report["diagnoses"]}["hallucination"]
    assert hallucinations > 0
    worst = report["worst"]["faithfulness"]
    assert worst and all(w["unsupported"] for w in worst)
    falsified = set(result.hallucinated_sample_ids)
    assert sum(w["sample_id"] in falsified for w in worst) >= 0.6 * len(worst)
    for w in worst:  # each unsupported claim names the chunk it was checked against, shown in the Markdown
        for claim in w["unsupported"]:
            assert claim["chunk_id"] and claim["evidence"]
    assert worst[0]["sample_id"] in result.report_markdown


def test_cli_demo_quick_exits_zero() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ragwatch", "demo", "--quick", "--no-progress"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "DEGRADED mode ON" in out.stdout and "degraded mode OFF" in out.stdout
    assert "## Diagnoses" in out.stdout


def test_replayed_degraded_period_matches_what_the_demo_did(quick_result) -> None:
    """The page's red band is replayed from the scores with the breaker the worker ran: one period, as long
    as the live one (within the worker's tick and scoring lag)."""
    from ragwatch.demo.run import demo_policy
    from ragwatch.report.build import default_thresholds
    from ragwatch.report.view import view_data

    result, _ = quick_result
    data = view_data(result.records, default_thresholds(), demo_policy(quick=True))
    [period] = data["degraded_periods"]
    (on, _, _), (off, _, _) = result.transitions
    assert period["end"] - period["start"] == pytest.approx(off - on, abs=0.5)
