"""``ragwatch eval-judge``: metric helpers on hand-computed cases, the command's output and its errors.

Accuracy on the dev data is reported by the command, never asserted here: these tests pin the arithmetic
and the interface.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragwatch.scoring.evaluate import (
    EvalInputError,
    detect_kind,
    evaluate_faithfulness,
    expected_calibration_error,
    hallucination_score,
    load_rows,
    main,
    precision_recall_f1,
    reliability_table,
    render_plain,
    roc_auc,
    row_to_sample,
)
from ragwatch.scoring.judge_metrics import bootstrap_interval
from ragwatch.scoring.judges.base import Verdict
from tests.openai_stub import OpenAIStub, chat_reply

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

# ----------------------------------------------------------------------------------------- metrics


def test_roc_auc_perfect_and_reversed() -> None:
    assert roc_auc([True, False, True, False], [0.9, 0.1, 0.8, 0.3]) == 1.0
    assert roc_auc([True, False, True, False], [0.1, 0.9, 0.3, 0.8]) == 0.0


def test_roc_auc_counts_ties_as_half() -> None:
    assert roc_auc([True, False], [0.5, 0.5]) == 0.5
    # pairs (pos, neg): (.8,.8)=½ (.8,.1)=1 (.3,.8)=0 (.3,.1)=1 -> 2.5 / 4
    assert roc_auc([True, False, True, False], [0.8, 0.8, 0.3, 0.1]) == pytest.approx(0.625)
    # all scores equal: chance
    assert roc_auc([True, True, False], [1.0, 1.0, 1.0]) == 0.5


def test_roc_auc_needs_both_classes() -> None:
    assert roc_auc([True, True], [0.1, 0.2]) is None
    assert roc_auc([], []) is None
    with pytest.raises(ValueError):
        roc_auc([True], [0.1, 0.2])


def test_precision_recall_f1() -> None:
    assert precision_recall_f1([True, True, False, False], [True, False, True, False]) == (0.5, 0.5, 0.5)
    p, r, f = precision_recall_f1([True, True, True, False], [True, True, False, False])
    assert (p, r) == (1.0, pytest.approx(2 / 3))
    assert f == pytest.approx(0.8)
    assert precision_recall_f1([True, False], [False, False]) == (0.0, 0.0, 0.0)


def test_expected_calibration_error_on_a_constructed_example() -> None:
    # bin 0.0-0.1: 4 scores of 0.05, 1 positive → |0.05 − 0.25| = 0.20, weight 4/10
    # bin 0.7-0.8: 5 scores of 0.7 (0.7 lands in the 0.7 bin), 5 positives → |0.7 − 1.0| = 0.30, weight 5/10
    # bin 0.9-1.0: a score of 1.0 (the last bin is closed), positive → 0, weight 1/10
    labels = [True, False, False, False] + [True] * 5 + [True]
    scores = [0.05] * 4 + [0.7] * 5 + [1.0]
    assert expected_calibration_error(labels, scores) == pytest.approx(0.4 * 0.2 + 0.5 * 0.3)
    table = reliability_table(labels, scores)
    assert [b["n"] for b in table] == [4, 0, 0, 0, 0, 0, 0, 5, 0, 1]
    assert table[0] == {"low": 0.0, "high": 0.1, "n": 4, "mean_score": 0.05, "positive_rate": 0.25}
    assert table[1]["mean_score"] is None
    # perfectly calibrated: scores equal to each bin's positive share
    assert expected_calibration_error([True, False, True, False], [0.5] * 4) == pytest.approx(0.0)
    assert expected_calibration_error([], []) is None


# ------------------------------------------------------------------------------------------- input


def faith_row(i: int, hallucinated: bool, task: str = "QA", language: str = "en") -> dict:
    context = "The old stone bridge over the river is 120 meters long and was built in 1990."
    answer = f"The stone bridge over the river is {150 if hallucinated else 120} meters long."
    return {
        "id": f"r{i}",
        "question": "How long is the bridge?",
        "contexts": [context, "Trains cross the river further north."],
        "answer": answer,
        "label_hallucinated": hallucinated,
        "task_type": task,
        "language": language,
    }


def write_jsonl(path: Path, rows: list, extra_lines: list[str] | None = None) -> Path:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows] + (extra_lines or [])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_detect_kind_and_sample() -> None:
    row = faith_row(1, False)
    assert detect_kind(row) == "faithfulness"
    rel = {"question": "q", "passage": "p", "relevant": True, "question_id": "q1", "language": "en"}
    assert detect_kind(rel) == "relevance"
    with pytest.raises(EvalInputError, match="lacks"):
        detect_kind({"contexts": [], "__line__": 4})
    with pytest.raises(EvalInputError, match="unknown schema"):
        detect_kind({"foo": 1})
    sample = row_to_sample(row)
    assert [c.id for c in sample.chunks] == ["c1", "c2"]
    assert sample.answer == row["answer"] and sample.question == row["question"]


def test_load_rows_reports_the_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [faith_row(1, False)], ["", "{not json"])
    with pytest.raises(EvalInputError) as err:
        load_rows(path)
    assert err.value.line == 3


# -------------------------------------------------------------------------------------------- main


def test_main_faithfulness_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        faith_row(i, i % 2 == 0, task="QA" if i < 4 else "Summary", language="en" if i < 3 else "zh") for i in range(6)
    ]
    path = write_jsonl(tmp_path / "faith.jsonl", rows)
    assert main([str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"overall", "by_task_type", "by_language", "evidence"}
    assert set(out["by_task_type"]) == {"QA", "Summary"}
    assert set(out["by_language"]) == {"en", "zh"}
    for stats in [out["overall"], *out["by_task_type"].values(), *out["by_language"].values()]:
        assert set(stats) == {"n", "precision", "recall", "f1", "auc"}
    assert out["overall"]["n"] == 6
    # the number rule catches every invented length, and nothing else
    assert out["overall"]["precision"] == out["overall"]["recall"] == out["overall"]["f1"] == 1.0
    assert out["overall"]["auc"] == 1.0


def test_main_limit_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "faith.jsonl", [faith_row(i, i % 2 == 0) for i in range(6)])
    assert main([str(path), "--limit", "2"]) == 0
    text = capsys.readouterr().out
    assert "overall" in text and "f1" in text
    assert "2 rows" in text


def test_main_relevance_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def rel(qid: str, question: str, passage: str, relevant: bool, language: str = "en") -> dict:
        return {
            "question": question,
            "passage": passage,
            "relevant": relevant,
            "question_id": qid,
            "language": language,
        }

    rows = [
        rel("q1", "How long is the Great Wall of China?", "Bananas are rich in potassium.", False),
        rel("q1", "How long is the Great Wall of China?", "The Great Wall of China is 21,196 km long.", True),
        rel("q2", "长城有多长？", "香蕉富含钾。", False, "zh"),
        rel("q2", "长城有多长？", "长城全长21196千米。", True, "zh"),
        rel("q3", "Who wrote Hamlet?", "Paris is in France.", False),
    ]
    path = write_jsonl(tmp_path / "rel.jsonl", rows)
    assert main([str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"overall", "by_language"}
    assert set(out["overall"]) == {"n_questions", "map", "mrr", "auc"}
    assert out["overall"]["n_questions"] == 2  # q3 has no relevant passage
    assert out["overall"]["map"] == out["overall"]["mrr"] == 1.0
    assert set(out["by_language"]) == {"en", "zh"}


def test_main_relevance_calibration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    question = "How long is the Great Wall of China?"
    rows = [
        {"question": question, "passage": p, "relevant": y, "question_id": "q1", "language": "en"}
        for p, y in [
            ("The Great Wall of China is 21,196 km long.", True),
            ("Bananas are rich in potassium.", False),
            ("The Great Wall of China was built over centuries.", False),
        ]
    ]
    path = write_jsonl(tmp_path / "rel.jsonl", rows)
    assert main([str(path), "--json", "--calibration"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"overall", "by_language", "calibration"}  # the old keys unchanged, one new
    cal = out["calibration"]["overall"]
    assert cal["n"] == 3 and len(cal["bins"]) == 10 and sum(b["n"] for b in cal["bins"]) == 3
    assert cal["positive_rate"] == pytest.approx(1 / 3, abs=1e-4)
    assert 0.0 <= cal["ece"] <= 1.0
    assert set(out["calibration"]["by_language"]) == {"en"}
    assert main([str(path), "--calibration"]) == 0
    text = capsys.readouterr().out
    assert "ECE (10 bins)" in text and "relevant share" in text
    faith = write_jsonl(tmp_path / "faith.jsonl", [faith_row(1, False)])
    assert main([str(faith), "--calibration"]) == 2  # faithfulness is a share of claims, not a probability
    assert "needs a relevance file" in capsys.readouterr().err


def _llm_output(quote: str | None, verdict: str) -> dict:
    claim = {"text": "the claim", "verdict": verdict, "chunk_id": "c1" if quote else None, "quote": quote}
    return {"claims": [claim], "chunks": [{"id": "c1", "relevance": 1.0}], "answer_relevance": 1.0}


@pytest.mark.parametrize("how", ["env", "flags"])
def test_main_llm_judge_through_a_real_openai_protocol_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """``--judge llm`` builds its judge from the settings (env or flags) and talks HTTP to the endpoint."""
    for name in ("RAGWATCH_JUDGE_BASE_URL", "RAGWATCH_JUDGE_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGWATCH_JUDGE_API_KEY", "sk-test-key")
    path = write_jsonl(tmp_path / "faith.jsonl", [faith_row(1, False), faith_row(2, True)])
    with OpenAIStub() as stub:
        stub.script(
            chat_reply(_llm_output("is 120 meters long", "SUPPORTED")),
            chat_reply(_llm_output(None, "UNSUPPORTED")),
        )
        args = [str(path), "--json", "--judge", "llm"]
        if how == "env":
            monkeypatch.setenv("RAGWATCH_JUDGE_BASE_URL", stub.url)
            monkeypatch.setenv("RAGWATCH_JUDGE_MODEL", "judge-model")
        else:
            args += ["--judge-base-url", stub.url, "--judge-model", "judge-model"]
        assert main(args) == 0, capsys.readouterr().err
        assert len(stub.requests) == 2
        assert {r.body["model"] for r in stub.requests} == {"judge-model"}
        assert stub.requests[0].headers.get("authorization") == "Bearer sk-test-key"
    out = json.loads(capsys.readouterr().out)
    assert out["overall"] == {"n": 2, "precision": 1.0, "recall": 1.0, "f1": 1.0, "auc": 1.0}


def test_main_cascade_judge_runs_with_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("RAGWATCH_JUDGE_API_KEY", "sk-test-key")
    path = write_jsonl(tmp_path / "faith.jsonl", [faith_row(1, False), faith_row(2, True)])
    with OpenAIStub() as stub:
        stub.default = chat_reply(_llm_output(None, "UNSUPPORTED"))
        monkeypatch.setenv("RAGWATCH_JUDGE_BASE_URL", stub.url)
        monkeypatch.setenv("RAGWATCH_JUDGE_MODEL", "judge-model")
        assert main([str(path), "--json", "--judge", "cascade"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["overall"]["n"] == 2


def test_main_llm_judge_without_an_endpoint_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RAGWATCH_JUDGE_BASE_URL", "RAGWATCH_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    path = write_jsonl(tmp_path / "faith.jsonl", [faith_row(1, False)])
    assert main([str(path), "--judge", "llm"]) == 2
    assert "RAGWATCH_JUDGE_BASE_URL" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "line"),
    [("{broken", 3), ("[1, 2]", 3), (json.dumps({"question": "q", "contexts": "not a list"}), 3)],
    ids=["json", "not-object", "bad-field"],
)
def test_main_bad_line_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, line: int) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [faith_row(1, False), faith_row(2, True)], [extra])
    assert main([str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert f"line {line}" in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""


def test_main_bad_field_type_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row = faith_row(1, False)
    row["contexts"] = "not a list"
    path = write_jsonl(tmp_path / "bad.jsonl", [faith_row(0, True), row])
    assert main([str(path)]) == 2
    assert "line 2" in capsys.readouterr().err


def test_main_missing_file_and_bad_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    path = write_jsonl(tmp_path / "ok.jsonl", [faith_row(1, False)])
    assert main([str(path), "--limit", "0"]) == 2
    assert main([str(path), "--judge", "no-such-judge"]) == 2


def test_render_plain() -> None:
    result = {"overall": {"n_questions": 2, "map": 0.5, "mrr": 1.0, "auc": None}, "by_language": {}}
    text = render_plain(result, "relevance", "title")
    assert text.splitlines()[0] == "title"
    assert "0.500" in text and "—" in text


# ------------------------------------------------------------------------------------ real dev data


@pytest.mark.skipif(not (DATA / "faithfulness" / "rgb_zh_en_dev.jsonl").exists(), reason="shared data absent")
def test_real_dev_file_shape(capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "faithfulness" / "rgb_zh_en_dev.jsonl"
    assert main([str(path), "--json", "--limit", "100"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["overall"]["n"] == 100
    groups = [out["overall"], *out["by_task_type"].values(), *out["by_language"].values()]
    for stats in groups:
        for key in ("precision", "recall", "f1", "auc"):
            assert stats[key] is None or 0.0 <= stats[key] <= 1.0


def test_auc_ranks_by_fully_supported_where_the_judge_gives_it() -> None:
    """1 − faithfulness ties answers that are all judged faithful; the AUC ranks by the finer score when a
    judge gives one, and falls back to faithfulness (the LLM judge) otherwise."""
    assert hallucination_score({"faithfulness": 1.0, "fully_supported": 0.3}) == pytest.approx(0.7)
    assert hallucination_score({"faithfulness": 0.5}) == pytest.approx(0.5)
    assert hallucination_score({}) == 0.0

    class Stub:
        name, version = "stub", "1"

        def score(self, sample):
            p = 0.9 if "exact" in sample.answer else 0.4
            return Verdict(scores={"faithfulness": 1.0, "fully_supported": p}, details={"claims": []})

    rows = [
        {"question": "q", "contexts": ["c"], "answer": a, "label_hallucinated": h, "task_type": "QA", "language": "en"}
        for a, h in (("exact one", False), ("loose one", True), ("exact two", False), ("loose two", True))
    ]
    assert evaluate_faithfulness(rows, Stub())["overall"]["auc"] == 1.0


def test_eval_judge_counts_supported_quotes_that_share_no_word_with_their_claim() -> None:
    """Issue 27, "evidence that supports": the share of SUPPORTED claims whose quote shares no content word
    with the claim, out of those that have one; a claim without a content word is set apart, UNSUPPORTED
    claims are not counted. Printed as its own table."""
    claims = {
        "one": [
            {"text": "Hotels are reimbursed up to 600 CNY.", "verdict": "SUPPORTED", "evidence": "Hotels: 600 CNY."},
            {"text": "Taxis need receipts.", "verdict": "UNSUPPORTED", "evidence": "Hotels: 600 CNY."},
        ],
        "two": [
            {"text": "Hotels are reimbursed up to 600 CNY.", "verdict": "SUPPORTED", "evidence": "Taxi in 30 days."},
            {"text": "中", "verdict": "SUPPORTED", "evidence": "Taxi in 30 days."},
        ],
    }

    class Stub:
        name, version = "stub", "1"

        def score(self, sample):
            return Verdict(scores={"faithfulness": 1.0}, details={"claims": claims[sample.answer]})

    rows = [
        {
            "question": "q",
            "contexts": ["c"],
            "answer": a,
            "label_hallucinated": False,
            "task_type": "QA",
            "language": "en",
        }
        for a in ("one", "two")
    ]
    result = evaluate_faithfulness(rows, Stub())
    evidence = result["evidence"]
    assert (evidence["supported_claims"], evidence["no_content_word"], evidence["quote_shares_no_word"]) == (3, 1, 1)
    assert evidence["share"] == 0.5
    assert evidence["examples"] == [{"claim": "Hotels are reimbursed up to 600 CNY.", "evidence": "Taxi in 30 days."}]
    lines = render_plain(result, "faithfulness", "t").splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("evidence: SUPPORTED claims whose quote"))
    assert "; 1 claim without a content word set apart" in lines[title]
    assert lines[title + 3].split() == ["2", "1", "0.500"]  # title, header, rule, the row


@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 5)), min_size=2, max_size=60).filter(
        lambda rows: len({y for y, _ in rows}) == 2
    )
)
def test_roc_auc_is_the_share_of_ordered_pairs(rows: list[tuple[bool, int]]) -> None:
    """Against its definition, pair by pair: P(positive scores above negative) + ½ P(tie); few distinct
    scores, so ties are common."""
    labels = [y for y, _ in rows]
    scores = [float(s) for _, s in rows]
    pos = [s for y, s in rows if y]
    neg = [s for y, s in rows if not y]
    pairs = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    assert roc_auc(labels, scores) == pytest.approx(pairs / (len(pos) * len(neg)), abs=1e-12)


def test_bootstrap_interval() -> None:
    values = np.array([1.0] * 30 + [0.0] * 70)
    mean = lambda draw: float(values[draw].mean())  # noqa: E731
    lo, hi = bootstrap_interval(len(values), mean)
    assert lo < 0.3 < hi and hi - lo < 0.25  # about ±1.96·√(0.21/100) = ±0.09
    assert bootstrap_interval(len(values), mean) == [lo, hi]  # seeded: the same file reads the same
    wide = np.array([1.0] * 3 + [0.0] * 7)
    w_lo, w_hi = bootstrap_interval(len(wide), lambda draw: float(wide[draw].mean()))
    assert w_hi - w_lo > 2 * (hi - lo)  # ten units know less than a hundred
    assert bootstrap_interval(50, lambda draw: 0.5) == [0.5, 0.5]
    assert bootstrap_interval(50, lambda draw: None) is None  # undefined in every draw (one class)
    assert bootstrap_interval(0, lambda draw: 1.0) is None


def test_main_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [faith_row(i, i % 2 == 0, task="QA" if i < 4 else "Summary") for i in range(6)]
    path = write_jsonl(tmp_path / "faith.jsonl", rows)
    assert main([str(path), "--json", "--ci"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"overall", "by_task_type", "by_language", "evidence", "ci"}  # one key more, the others kept
    ci = out["ci"]
    assert (ci["level"], ci["resamples"], ci["unit"]) == (0.95, 1000, "answer")
    assert ci["overall"]["f1"] == [1.0, 1.0] and ci["overall"]["auc"] == [1.0, 1.0]  # every answer right
    assert set(ci["by_task_type"]) == {"QA", "Summary"} and set(ci["by_language"]) == {"en"}
    assert main([str(path), "--ci"]) == 0
    text = capsys.readouterr().out
    assert "bootstrap intervals" in text and "1.000–1.000" in text and "task=Summary" in text
    plain = render_plain(out, "faithfulness", "t")  # the table without rich: the title on one line
    assert "95% bootstrap intervals (1000 resamples of answers)" in plain
