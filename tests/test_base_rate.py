"""The judges' two base-rate numbers: the threshold table and the relevance offset, the settings that apply
them, and `eval-judge` suggesting them on real labelled files (the loop a team runs on its own traffic)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from ragwatch.errors import ConfigError
from ragwatch.scoring.base_rate import THRESHOLD_GRID, relevance_offset, threshold_table
from ragwatch.scoring.evaluate import main
from ragwatch.scoring.judges import make_judges
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.judges.relevance import RelevanceScorer
from ragwatch.settings import load_settings
from tests.conftest import judge_sample

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "faithfulness" / "ragtruth_dev.jsonl").exists() and os.environ.get("CI") != "true",
    reason="shared data absent (required in CI)",
)


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


# ------------------------------------------------------------------------------------ threshold table


def test_threshold_table_on_hand_computed_answers() -> None:
    labels = [True, True, False, False]
    # answer 4's claim is vetoed by a hard rule: flagged at every threshold, whatever its P
    claims = [[(0.2, False)], [(0.6, False), (0.9, False)], [(0.7, False)], [(0.9, True)]]
    table = threshold_table(labels, claims, current=0.5)
    row = {r["threshold"]: r for r in table["rows"]}
    assert [r["threshold"] for r in table["rows"]] == list(THRESHOLD_GRID)
    # 0.5 flags answers 1 and 4: one right, one wrong, one missed
    assert row[0.5]["precision"] == row[0.5]["recall"] == row[0.5]["f1"] == 0.5
    assert table["current"] == {"threshold": 0.5, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert row[0.6]["f1"] == 0.5  # P 0.6 is not under 0.6
    assert row[0.61]["f1"] == row[0.7]["f1"] == 0.8  # answer 2 flagged too: P 2/3, R 1
    assert row[0.71]["f1"] == pytest.approx(0.6667)  # and answer 3: everything flagged
    assert row[0.05]["flagged_share"] == 0.25 and row[0.05]["f1"] == 0.0  # only the veto
    # F1 0.8 from 0.61 to 0.70: the one nearest the current threshold wins
    assert table["best"]["threshold"] == 0.61 and table["best"]["f1"] == 0.8
    assert threshold_table(labels, claims, current=0.69)["best"]["threshold"] == 0.69
    assert table["hallucinated_share"] == 0.5
    with pytest.raises(ValueError, match="differ in length"):
        threshold_table(labels, claims[:2], current=0.5)


def test_threshold_for_a_precision_takes_the_most_recall_that_keeps_it() -> None:
    # five hallucinated answers, three faithful (P 0.25, 0.58, 0.70); an answer is flagged when P < threshold
    labels = [True, True, True, True, True, False, False, False]
    claims = [[(p, False)] for p in (0.10, 0.20, 0.30, 0.55, 0.65, 0.25, 0.58, 0.70)]
    row = {r["threshold"]: r for r in threshold_table(labels, claims, current=0.5)["rows"]}
    assert (row[0.25]["precision"], row[0.25]["recall"]) == (1.0, 0.4)
    assert (row[0.50]["precision"], row[0.50]["recall"]) == (0.75, 0.6)
    assert (row[0.57]["precision"], row[0.57]["recall"]) == (0.8, 0.8)
    assert row[0.66]["precision"] < 0.75

    def pick(p: float, current: float = 0.5) -> float | None:
        found = threshold_table(labels, claims, current=current, min_precision=p)["for_precision"]
        assert found["min_precision"] == p
        return None if found["row"] is None else found["row"]["threshold"]

    # 0.56-0.58 flag four of the five with one false page: the most recall at 0.75 and at exactly 0.8
    assert pick(0.75) == pick(0.8) == 0.56  # among equal rows, the one nearest the current threshold
    assert pick(0.8, current=0.6) == 0.58
    # only no false page at all is above 0.8: 0.21-0.25, two of five caught
    assert pick(0.81) == 0.25 and pick(0.81, current=0.1) == 0.21
    # the F1-best threshold catches all five at two false pages in seven: under the precision asked
    best = threshold_table(labels, claims, current=0.5)["best"]
    assert best["threshold"] == 0.66 and best["recall"] == 1.0 and best["precision"] < 0.75
    # a precision no threshold reaches on this file: the faithful answer doubts as much as the other
    few = [[(0.10, False)], [(0.10, False)]]
    assert threshold_table([True, False], few, current=0.5, min_precision=0.9)["for_precision"]["row"] is None
    with pytest.raises(ValueError, match="between 0 and 1"):
        threshold_table(labels, claims, current=0.5, min_precision=1.0)
    assert "for_precision" not in threshold_table(labels, claims, current=0.5)


def test_relevance_offset_matches_the_mean_to_the_base_rate() -> None:
    # over-confident scores: one relevant chunk in eight, mean score 0.55
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    labels = [True] + [False] * 7
    out = relevance_offset(labels, scores)
    assert out["suggested"] < -1.0
    shifted = [1 / (1 + math.exp(-(_logit(p) + out["suggested"]))) for p in scores]
    assert sum(shifted) / len(shifted) == pytest.approx(1 / 8, abs=1e-3)  # the suggestion is rounded to 0.001
    assert out["mean_score_after"] == pytest.approx(0.125, abs=1e-4)
    assert out["ece_after"] < out["ece_before"]
    # scores already produced with an offset: the suggestion is the total to set, not the step
    again = relevance_offset(labels, scores, current=1.5)
    assert again["suggested"] == pytest.approx(1.5 + out["suggested"], abs=2e-3)
    # one class says nothing about a base rate
    assert relevance_offset([True, True], [0.4, 0.6])["suggested"] is None
    assert relevance_offset([False, False], [0.4, 0.6])["suggested"] is None


# ------------------------------------------------------------------------------------ the judges


def _decidable_claim(judge: OfflineJudge) -> tuple[object, float]:
    """A sample with a claim the model decides (no veto) at a P that a threshold can move either way."""
    sample = judge_sample(
        "When does the hotel pool open?",
        "The hotel pool closes late, at 10 pm.",
        ["The hotel pool opens at 7 am and closes at 10 pm.", "Breakfast is served in the lobby."],
    )
    analyses = [a for a in judge.analyse(sample) if not a.unverifiable and a.rule is None]
    assert analyses, "the sample must have a claim the model decides"
    p = analyses[0].p_supported
    assert 0.02 < p < 0.98
    return sample, p


def test_offline_threshold_decides_the_verdicts_and_names_the_version() -> None:
    shipped = OfflineJudge()
    sample, p = _decidable_claim(shipped)
    below, above = OfflineJudge(threshold=p - 0.01), OfflineJudge(threshold=p + 0.01)
    assert below.threshold == pytest.approx(p - 0.01)
    assert [c["verdict"] for c in below.score(sample).details["claims"]] == ["SUPPORTED"]
    assert [c["verdict"] for c in above.score(sample).details["claims"]] == ["UNSUPPORTED"]
    assert OfflineJudge(threshold=None).version == shipped.version
    assert len({shipped.version, below.version, above.version}) == 3  # scores of other thresholds never mix
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            OfflineJudge(threshold=bad)


def test_relevance_offset_shifts_every_logit_and_names_the_version() -> None:
    question = "How long is the Great Wall of China?"
    texts = [
        "The Great Wall of China is 21,196 km long.",
        "The Great Wall was built over many centuries.",
        "Bananas are rich in potassium.",
    ]
    shipped, shifted = OfflineJudge(), OfflineJudge(relevance_offset=-1.5)
    for a, b in zip(shipped.relevance(question, texts), shifted.relevance(question, texts), strict=True):
        assert _logit(b) == pytest.approx(_logit(a) - 1.5, abs=1e-9)
    zh = ["长城全长21196千米。", "香蕉富含钾。", "长城修建了很多个世纪。"]
    for a, b in zip(shipped.relevance("长城有多长？", zh), shifted.relevance("长城有多长？", zh), strict=True):
        assert _logit(b) == pytest.approx(_logit(a) - 1.5, abs=1e-9)  # both intercepts move
    assert shifted.version != shipped.version == OfflineJudge(relevance_offset=0.0).version
    # each script has an intercept of its own, so each may have its own offset
    split = OfflineJudge(relevance_offset=-1.5, relevance_offset_cjk=0.5)
    for a, b in zip(shipped.relevance(question, texts), split.relevance(question, texts), strict=True):
        assert _logit(b) == pytest.approx(_logit(a) - 1.5, abs=1e-9)
    for a, b in zip(shipped.relevance("长城有多长？", zh), split.relevance("长城有多长？", zh), strict=True):
        assert _logit(b) == pytest.approx(_logit(a) + 0.5, abs=1e-9)
    assert split.version not in (shipped.version, shifted.version)
    assert OfflineJudge(relevance_offset=-1.5, relevance_offset_cjk=-1.5).version == shifted.version
    with pytest.raises(ValueError, match="finite"):
        RelevanceScorer(offset=float("nan"))
    with pytest.raises(ValueError, match="finite"):
        RelevanceScorer(offset_cjk=float("inf"))


def test_settings_reach_every_judge_built_from_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGWATCH_OFFLINE_THRESHOLD", "0.4")
    monkeypatch.setenv("RAGWATCH_RELEVANCE_OFFSET", "-2")
    settings = load_settings(judge_base_url="http://127.0.0.1:9/v1", judge_model="m")
    offline, cascade = make_judges(["offline", "cascade"], settings)
    assert isinstance(offline, OfflineJudge)
    assert offline.threshold == 0.4 and offline._relevance.offset == offline._relevance.offset_cjk == -2.0
    first = cascade.first  # type: ignore[attr-defined]
    assert first.threshold == 0.4 and first._relevance.offset == -2.0
    monkeypatch.setenv("RAGWATCH_RELEVANCE_OFFSET_CJK", "0.75")
    offline = make_judges(["offline"], load_settings())[0]
    assert offline._relevance.offset == -2.0 and offline._relevance.offset_cjk == 0.75  # type: ignore[attr-defined]
    monkeypatch.delenv("RAGWATCH_RELEVANCE_OFFSET_CJK")
    for name, value in (("RAGWATCH_OFFLINE_THRESHOLD", "1"), ("RAGWATCH_RELEVANCE_OFFSET", "11")):
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigError):
            load_settings()
        monkeypatch.delenv(name)


# ------------------------------------------------------------------------ eval-judge on real files


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    """``ragwatch eval-judge ARGS --json``: its exit code must be 0; the parsed result."""
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _suggest_then_apply(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    path: str,
    settings: dict[str, str],
    *args: str,
) -> tuple[dict, dict]:
    """The loop a team runs: ``--calibration``, then again with the suggested offsets set. ``settings`` maps
    each environment variable to the path of its suggestion in the first run's ``"offset"`` record
    (``"suggested"``, or ``"by_script.cjk.suggested"``). Returns both results; a shift of every logit ranks
    nothing differently, so MAP must not move, and the second run must suggest the same again."""
    before = _json(capsys, path, *args, "--calibration")

    def suggestion(result: dict, where: str) -> float:
        node = result["calibration"]["offset"]
        for key in where.split("."):
            node = node[key]
        return float(node)

    for name, where in settings.items():
        monkeypatch.setenv(name, str(suggestion(before, where)))
    after = _json(capsys, path, *args, "--calibration")
    assert after["overall"]["map"] == before["overall"]["map"]
    for where in settings.values():
        assert suggestion(after, where) == pytest.approx(suggestion(before, where), abs=0.01)  # a fixed point
    assert main([path, *args, "--calibration"]) == 0
    assert "relevance_offset" in capsys.readouterr().out
    return before, after


@needs_data
def test_thresholds_suggestion_closes_the_loop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(DATA / "faithfulness" / "ragtruth_dev.jsonl")
    out = _json(capsys, path, "--limit", "150", "--thresholds")
    table = out["thresholds"]
    assert table["current"]["threshold"] == OfflineJudge().threshold
    assert table["current"]["f1"] == out["overall"]["f1"]  # the table at the judge's threshold is the judge
    assert table["best"]["f1"] >= table["current"]["f1"]
    best = next(r for r in table["rows"] if r["threshold"] == 0.8)
    monkeypatch.setenv("RAGWATCH_OFFLINE_THRESHOLD", "0.8")  # a judge set to another row reads that row
    again = _json(capsys, path, "--limit", "150")["overall"]
    assert (again["precision"], again["recall"], again["f1"]) == (best["precision"], best["recall"], best["f1"])
    assert main([path, "--limit", "20", "--thresholds"]) == 0
    assert "(offline_threshold)" in capsys.readouterr().out
    # a sweep of the offline judge's threshold, on its claims only
    assert main([path, "--limit", "5", "--thresholds", "--judge", "trivial"]) == 2
    assert "a judge with a claim threshold" in capsys.readouterr().err
    rel = str(DATA / "relevance" / "rgb_relevance_dev.jsonl")
    assert main([rel, "--limit", "5", "--thresholds"]) == 2
    assert "faithfulness file" in capsys.readouterr().err


@needs_data
def test_min_precision_picks_a_threshold_the_judge_then_reads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(DATA / "faithfulness" / "ragtruth_dev.jsonl")
    out = _json(capsys, path, "--min-precision", "0.7")  # implies --thresholds
    table = out["thresholds"]
    row = table["for_precision"]["row"]
    assert table["for_precision"]["min_precision"] == 0.7 and row is not None
    assert row["precision"] >= 0.7 and row["threshold"] < table["best"]["threshold"]
    # no row with that precision catches more
    assert all(r["recall"] <= row["recall"] for r in table["rows"] if r["precision"] >= 0.7)
    monkeypatch.setenv("RAGWATCH_OFFLINE_THRESHOLD", str(row["threshold"]))
    again = _json(capsys, path)["overall"]
    assert again["precision"] >= 0.7 and again["recall"] == row["recall"]
    monkeypatch.delenv("RAGWATCH_OFFLINE_THRESHOLD")
    assert main([path, "--limit", "150", "--min-precision", "0.9"]) == 0
    assert "precision ≥ 0.9: no threshold reaches" in " ".join(capsys.readouterr().out.split())
    assert main([path, "--limit", "5", "--min-precision", "1.5"]) == 2
    assert "--min-precision must be between 0 and 1" in capsys.readouterr().err


@needs_data
def test_relevance_offset_suggestion_calibrates_the_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # WikiQA's lists are 5 % relevant, a base rate the shipped English intercept does not fit
    path = str(DATA / "relevance" / "wikiqa_dev.jsonl")
    env = {"RAGWATCH_RELEVANCE_OFFSET": "suggested"}
    out, after = _suggest_then_apply(monkeypatch, capsys, path, env, "--limit", "3000")
    offset, before = out["calibration"]["offset"], out["calibration"]["overall"]
    assert offset["suggested"] < -0.5 and offset["current"] == 0.0
    assert before["mean_score"] > 2 * before["positive_rate"]  # reads high as shipped
    cal = after["calibration"]["overall"]
    assert cal["mean_score"] == pytest.approx(cal["positive_rate"], abs=0.002)
    assert cal["ece"] < before["ece"] / 3


@needs_data
def test_relevance_offsets_per_script_calibrate_each_script(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # RGB's English and Chinese questions: the two intercepts, each with its own offset
    path = str(DATA / "relevance" / "rgb_relevance_dev.jsonl")
    env = {
        "RAGWATCH_RELEVANCE_OFFSET": "by_script.other.suggested",
        "RAGWATCH_RELEVANCE_OFFSET_CJK": "by_script.cjk.suggested",
    }
    out, after = _suggest_then_apply(monkeypatch, capsys, path, env)
    scripts = out["calibration"]["offset"]["by_script"]
    assert set(scripts) == {"other", "cjk"}
    for language in ("en", "zh"):  # RGB's English questions are in Latin script, its Chinese ones in CJK
        cal = after["calibration"]["by_language"][language]
        assert cal["mean_score"] == pytest.approx(cal["positive_rate"], abs=0.002)
    again = after["calibration"]["offset"]["by_script"]
    for script in ("other", "cjk"):  # the second run knows it ran with them
        assert again[script]["current"] == scripts[script]["suggested"]
    assert main([path, "--calibration"]) == 0
    assert "relevance_offset_cjk" in capsys.readouterr().out
