"""``ragwatch eval-alerts``: the cases built from labels, the window arithmetic, the command's output and errors.

The judges' figures on the dev data are printed by the command, never asserted here. Tests with a stub judge
pin the plumbing (a stub whose relevance follows the labels must give the numbers the labels imply); tests
with the shipped offline judge check only what any judge must do (off-topic retrievals under the SLA).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragwatch.cli import main as cli_main
from ragwatch.sampling.sample import Sample
from ragwatch.scoring.alert_cases import ANSWER, CASES, OFF_TOPIC, SAME_TOPIC, bm25_order, bm25_tokens, build_retrievals
from ragwatch.scoring.alert_cli import main
from ragwatch.scoring.alert_eval import (
    Options,
    distribution,
    evaluate_faithfulness_alerts,
    evaluate_relevance_alerts,
    window_auc,
    window_means,
)
from ragwatch.scoring.judges.base import Verdict
from ragwatch.settings import HALLUCINATION_RATE_LINE

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

# ---------------------------------------------------------------------------------------- fixtures

TOPICS = [
    ("glacier caves", "ice", "A glacier cave is formed by meltwater flowing through the ice of a glacier."),
    ("the Eiffel Tower", "Paris", "The Eiffel Tower was built in 1889 by Gustave Eiffel in Paris."),
    ("photosynthesis", "leaves", "Photosynthesis converts light into chemical energy in the leaves of plants."),
    ("the Nile river", "Egypt", "The Nile river flows north for 6,650 km through Egypt into the Mediterranean."),
    ("jazz music", "New Orleans", "Jazz music originated in New Orleans in the late 19th century."),
    ("the Great Wall", "China", "The Great Wall of China was built over centuries to guard the northern border."),
    ("penicillin", "Fleming", "Penicillin was discovered by Alexander Fleming in 1928 in London."),
    ("Mount Everest", "Nepal", "Mount Everest, on the border of Nepal and Tibet, is 8,849 metres high."),
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def relevance_rows(answers: int = 1, non_answers: int = 4, topics: list = TOPICS) -> list[dict[str, Any]]:
    """Per topic: ``answers`` answer-bearing sentences, then ``non_answers`` same-topic sentences that do not
    answer; every passage carries its class in its id (the judge under test never sees ids)."""
    rows = []
    for q, (subject, place, fact) in enumerate(topics):
        texts = [(f"{fact} (source {a + 1} on {subject})", True) for a in range(answers)]
        texts += [(f"Visitors to {place} often ask about {subject}; guide number {n + 1} says little.", False)
                  for n in range(non_answers)]  # fmt: skip
        for i, (text, relevant) in enumerate(texts):
            rows.append(
                {
                    "id": f"q{q}-{i}",
                    "question": f"What is known about {subject}?",
                    "passage": text,
                    "relevant": relevant,
                    "question_id": f"q{q}",
                    "language": "en",
                    "document_title": subject,
                }
            )
    return rows


def faith_row(i: int, hallucinated: bool) -> dict[str, Any]:
    context = "The museum opens at 9 am and closes at 5 pm. Entry costs 12 euros for adults."
    answer = "The museum opens at 9 am. Entry costs 40 euros." if hallucinated else "The museum opens at 9 am."
    return {
        "id": f"a{i}",
        "question": "When does the museum open and what does it cost?",
        "contexts": [context],
        "answer": answer,
        "label_hallucinated": hallucinated,
        "task_type": "QA",
        "language": "en",
    }


class MarkerJudge:
    """Relevance 0.9 for a passage that states the fact, 0.5 for one of the question's own topic, 0.1
    otherwise — what the labels say, as a perfect graded judge would, unless ``relative``: then each
    relevance is divided by the list's best (a list-dependent judge, which the invariance check must catch)."""

    name, version = "marker", "1"

    def __init__(self, relative: bool = False) -> None:
        self.relative = relative
        self.calls = 0

    @staticmethod
    def _rel(question: str, text: str) -> float:
        subject = question.removeprefix("What is known about ").removesuffix("?")
        if f"on {subject})" in text:
            return 0.9
        return 0.5 if subject in text else 0.1

    def score(self, sample: Sample) -> Verdict:
        self.calls += 1
        rels = [self._rel(sample.question or "", c.text or "") for c in sorted(sample.chunks, key=lambda c: c.rank)]
        if self.relative and rels:
            rels = [r / max(rels) for r in rels]
        cp3 = sum(rels[:3]) / 3
        chunks = [{"id": c.id, "relevance": r} for c, r in zip(sample.chunks, rels, strict=True)]
        scores = {"context_relevance": sum(rels) / len(rels), "context_precision_3": cp3}
        return Verdict(scores, {"chunks": chunks})


EXPECTED = {ANSWER: 0.9, SAME_TOPIC: 0.5, OFF_TOPIC: 0.1}


# ------------------------------------------------------------------------------------ window maths


def test_window_auc_of_identical_cases_is_about_half() -> None:
    values = np.random.default_rng(1).uniform(0.2, 0.9, size=300)
    a = window_means(values, 200, 1000, np.random.default_rng(2))
    b = window_means(values, 200, 1000, np.random.default_rng(3))
    assert window_auc(a, b) == pytest.approx(0.5, abs=0.05)


def test_window_auc_separated_reversed_and_tied() -> None:
    assert window_auc([0.8, 0.9], [0.1, 0.2]) == 1.0
    assert window_auc([0.1, 0.2], [0.8, 0.9]) == 0.0
    assert window_auc([0.5, 0.5], [0.5]) == 0.5  # a tie counts one half
    assert window_auc([], [0.5]) is None


def test_window_means_resample_the_values() -> None:
    values = [0.0, 1.0]
    means = window_means(values, 200, 500, np.random.default_rng(0))
    assert means.shape == (500,)
    assert means.min() > 0.0 and means.max() < 1.0  # 200 fair coin flips are never all heads
    assert means.mean() == pytest.approx(0.5, abs=0.01)
    # seeded: the same generator seed gives the same windows
    assert np.array_equal(means, window_means(values, 200, 500, np.random.default_rng(0)))
    # a window of one value has that value's spread; a constant has none
    assert set(window_means(values, 1, 100, np.random.default_rng(0))) == {0.0, 1.0}
    assert np.all(window_means([0.7] * 5, 200, 10, np.random.default_rng(0)) == pytest.approx(0.7))
    assert window_means([], 200, 10, np.random.default_rng(0)).size == 0


def test_distribution_percentiles() -> None:
    d = distribution(list(range(101)))
    assert d == {"n": 101, "mean": 50.0, "p5": 5.0, "p50": 50.0, "p95": 95.0}
    assert distribution([])["mean"] is None


# ---------------------------------------------------------------------------------------- the cases


def test_bm25_tokens_and_order() -> None:
    assert bm25_tokens("The Nile, 6,650 km!") == ["the", "nile", "6", "650", "km"]
    assert bm25_tokens("北京是首都") == ["北京", "京是", "是首", "首都"]
    passages = ["Cats sleep a lot.", "Paris is the capital of France.", "The capital city has a river."]
    assert bm25_order("What is the capital of France?", passages)[0] == 1
    assert bm25_order("What is the capital of France?", passages)[-1] == 0


def test_cases_are_built_from_the_labels() -> None:
    rows = relevance_rows(answers=1, non_answers=4)
    # one question with two answers and too few candidates for a full top 3 otherwise
    rows += [dict(r, question_id="small", document_title="small") for r in relevance_rows(1, 1, TOPICS[:1])]
    built = build_retrievals(rows, seed=0)
    cases = built["retrievals"]
    assert built["questions"] == {"in_file": len(TOPICS) + 1, "selected": len(TOPICS) + 1}
    by_q = {q: [r for r in rows if r["question_id"] == q] for q in {r["question_id"] for r in rows}}
    assert "small" not in {r.question_id for c in CASES for r in cases[c] if c != "same_topic"}
    for case in CASES:
        assert len(cases[case]) == len(TOPICS), case
        for r in cases[case]:
            assert len(r.texts) == 3 and len(r.classes) == 3
            own = {row["passage"]: row["relevant"] for row in by_q[r.question_id]}
            for text, cls in zip(r.texts, r.classes, strict=True):
                # every chunk's class is what the labels say of it
                assert cls == (OFF_TOPIC if text not in own else ANSWER if own[text] else SAME_TOPIC)
    for gold in cases["gold"]:
        answer = next(row["passage"] for row in by_q[gold.question_id] if row["relevant"])
        assert gold.texts[0] == answer and gold.classes == [ANSWER, SAME_TOPIC, SAME_TOPIC]
        assert gold.label_cp3 == pytest.approx(1 / 3)
    gold = {r.question_id: r for r in cases["gold"]}
    positions = set()
    for r in cases["one_off_topic"]:
        at = r.classes.index(OFF_TOPIC)
        positions.add(at)
        assert r.classes.count(OFF_TOPIC) == 1
        assert [t for i, t in enumerate(r.texts) if i != at] == [
            t for i, t in enumerate(gold[r.question_id].texts) if i != at
        ]
    assert len(positions) > 1  # the replaced position is drawn, not fixed
    for r in cases["off_topic"]:
        assert r.classes == [OFF_TOPIC] * 3 and len(set(r.texts)) == 3
    assert all(r.classes == [SAME_TOPIC] * 3 for r in cases["same_topic"])
    # seeded: the same seed builds the same lists, another seed other ones
    again = build_retrievals(rows, seed=0)["retrievals"]
    assert [r.texts for r in again["off_topic"]] == [r.texts for r in cases["off_topic"]]
    other = build_retrievals(rows, seed=1)["retrievals"]
    assert [r.texts for r in other["off_topic"]] != [r.texts for r in cases["off_topic"]]


def test_gold_puts_every_answer_first_and_limit_picks_questions() -> None:
    rows = relevance_rows(answers=2, non_answers=3)
    cases = build_retrievals(rows, seed=0)["retrievals"]
    assert all(r.classes == [ANSWER, ANSWER, SAME_TOPIC] for r in cases["gold"])
    limited = build_retrievals(rows, seed=0, limit=3)
    assert limited["questions"]["selected"] == 3
    assert len({r.question_id for c in CASES for r in limited["retrievals"][c]}) == 3
    # a question without an answer still gives a same-topic list, and nothing else
    no_answer = [dict(r, relevant=False, question_id="none") for r in relevance_rows(1, 3, TOPICS[:1])]
    cases = build_retrievals(no_answer + relevance_rows(1, 3, TOPICS[1:4]), seed=0)["retrievals"]
    assert "none" in {r.question_id for r in cases["same_topic"]}
    assert "none" not in {r.question_id for c in CASES if c != "same_topic" for r in cases[c]}


def test_off_topic_never_comes_from_the_questions_own_document() -> None:
    rows = relevance_rows(1, 4)
    # a second question on the Eiffel Tower's document: its passages are not off topic for the first
    rows += [
        dict(r, question_id="q1-bis", id=r["id"] + "b", passage=r["passage"] + " Again.")
        for r in rows
        if r["question_id"] == "q1"
    ]
    cases = build_retrievals(rows, seed=0)["retrievals"]
    for r in cases["off_topic"] + cases["one_off_topic"]:
        if r.question_id in ("q1", "q1-bis"):
            assert not any(
                "Eiffel" in t or "Paris" in t for t, c in zip(r.texts, r.classes, strict=True) if c == OFF_TOPIC
            )


# -------------------------------------------------------------------------------- relevance summary


def test_relevance_alerts_follow_a_judge_that_follows_the_labels() -> None:
    judge = MarkerJudge()
    options = Options(window=50, windows=200, sla=0.4, invariance=30)
    result = evaluate_relevance_alerts(relevance_rows(2, 4), judge, options)
    built = build_retrievals(relevance_rows(2, 4), seed=0)["retrievals"]
    for case in CASES:
        expected = np.mean([sum(EXPECTED[c] for c in r.classes) / 3 for r in built[case]])
        assert result["cases"][case]["cp3"]["mean"] == pytest.approx(expected, abs=1e-4), case
        assert result["cases"][case]["label_cp3"] == pytest.approx(
            np.mean([r.label_cp3 for r in built[case]]), abs=1e-4
        )
    # gold (0.9, 0.9, 0.5) reads 0.77, off topic 0.1, same topic 0.5: under an SLA of 0.4 only off topic
    assert result["cases"]["gold"]["windows_under_sla"] == 0.0
    assert result["cases"]["off_topic"]["windows_under_sla"] == 1.0
    assert result["cases"]["same_topic"]["windows_under_sla"] == 0.0
    assert result["window_auc"]["gold"]["off_topic"] == 1.0
    assert result["window_auc"]["gold"]["same_topic"] == 1.0
    # the relevances do not depend on the list: every chunk scored alone keeps its relevance
    assert result["invariance"]["n"] == 30 and result["invariance"]["within_share"] == 1.0
    order = result["graded_order"]["en"]
    assert [order[c]["mean"] for c in (ANSWER, SAME_TOPIC, OFF_TOPIC)] == pytest.approx([0.9, 0.5, 0.1])
    assert order["ordered"] is True
    # one judge call per retrieval and per invariance chunk, no more
    assert judge.calls == sum(len(built[c]) for c in CASES) + 30


def test_invariance_catches_a_list_dependent_judge() -> None:
    options = Options(window=20, windows=50, invariance=60)
    result = evaluate_relevance_alerts(relevance_rows(1, 4), MarkerJudge(relative=True), options)
    inv = result["invariance"]
    assert inv["within_share"] is not None and inv["within_share"] < 1.0
    assert inv["max_abs_diff"] > 0.05
    off = evaluate_relevance_alerts(relevance_rows(1, 4), MarkerJudge(), Options(invariance=0, windows=10))
    assert off["invariance"]["n"] == 0 and off["invariance"]["within_share"] is None


def test_sla_decides_the_share_of_windows_under_it() -> None:
    rows = relevance_rows(2, 4)
    low = evaluate_relevance_alerts(rows, MarkerJudge(), Options(sla=0.3, windows=100, invariance=0))
    high = evaluate_relevance_alerts(rows, MarkerJudge(), Options(sla=0.95, windows=100, invariance=0))
    assert all(low["cases"][c]["windows_under_sla"] == 0.0 for c in CASES if c != "off_topic")
    assert all(high["cases"][c]["windows_under_sla"] == 1.0 for c in CASES)


# ---------------------------------------------------------------------------------- faithfulness


class FaithJudge:
    """Flags an answer that says "40 euros" (the hallucinated ones), and also every faithful answer whose id
    ends in 0, a false alarm on a tenth of them; gives ``hallucination_rate`` only when ``rate_score``."""

    name, version = "faith", "1"

    def __init__(self, rate_score: bool) -> None:
        self.rate_score = rate_score
        self.calls = 0

    def score(self, sample: Sample) -> Verdict:
        self.calls += 1
        flagged = "40 euros" in (sample.answer or "") or sample.sample_id.endswith("0")
        claims = [{"text": "x", "verdict": "UNSUPPORTED" if flagged else "SUPPORTED"}, {"verdict": "SUPPORTED"}]
        scores = {"faithfulness": 0.5 if flagged else 1.0}
        if self.rate_score:
            scores["hallucination_rate"] = 1.0 if flagged else 0.0
        return Verdict(scores, {"claims": claims})


@pytest.mark.parametrize("rate_score", [True, False])
def test_faithfulness_windows_hold_the_asked_rate(rate_score: bool) -> None:
    rows = [faith_row(i, hallucinated=i % 4 == 0) for i in range(80)]
    judge = FaithJudge(rate_score)
    options = Options(window=100, windows=300, rates=(0.0, 0.1, 0.3), compare=((0.1, 0.3), (0.0, 0.0)))
    result = evaluate_faithfulness_alerts(rows, judge, options)
    assert judge.calls == 80  # each answer judged once; windows are resamples
    assert result["hallucination_rate_from"] == ("score" if rate_score else "claims")
    faithful_flagged = sum(1 for i in range(80) if i % 4 and i % 10 == 0) / sum(1 for i in range(80) if i % 4)
    by_rate = {r["rate"]: r for r in result["rates"]}
    assert [r["rate"] for r in result["rates"]] == [0.0, 0.1, 0.3]
    for rate, r in by_rate.items():
        assert r["hallucinated_per_window"] == round(rate * 100)
        # every hallucinated answer is caught; faithful ones are false alarms at their share
        expected = rate + (1 - rate) * faithful_flagged
        assert r["hallucination_rate"]["mean"] == pytest.approx(expected, abs=0.01)
        assert r["faithfulness"]["mean"] == pytest.approx(1 - 0.5 * expected, abs=0.01)
    assert by_rate[0.3]["windows_over_hallucination_line"] == 1.0
    assert by_rate[0.0]["windows_over_hallucination_line"] < 0.05
    assert by_rate[0.3]["windows_under_faithfulness_line"] == 0.0
    high, same = result["compare"]
    assert high["auc_hallucination_rate"] > 0.99 and high["auc_faithfulness"] > 0.99
    assert same["auc_hallucination_rate"] == pytest.approx(0.5, abs=0.06)
    assert result["per_answer"]["hallucinated"] == {
        "answers": 20,
        "faithfulness_mean": 0.5,
        "hallucination_rate_mean": 1.0,
    }


def test_faithfulness_needs_both_kinds_of_answer() -> None:
    from ragwatch.scoring.evaluate import EvalInputError

    rows = [faith_row(i, hallucinated=False) for i in range(10)]
    with pytest.raises(EvalInputError, match="no hallucinated answers"):
        evaluate_faithfulness_alerts(rows, FaithJudge(True), Options(rates=(0.1,), compare=((0.1, 0.1),)))
    only_zero = evaluate_faithfulness_alerts(rows, FaithJudge(True), Options(rates=(0.0,), compare=((0.0, 0.0),)))
    assert only_zero["rates"][0]["hallucinated_per_window"] == 0


# ------------------------------------------------------------------------------ the command, JSON


def relevance_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "rel.jsonl", relevance_rows(1, 4))


def faithfulness_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "faith.jsonl", [faith_row(i, i % 3 == 0) for i in range(30)])


def test_json_schema_of_a_run_on_both_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rel, faith = relevance_file(tmp_path), faithfulness_file(tmp_path)
    assert main([str(rel), str(faith), "--json", "--windows", "100", "--sla", "0.65", "--invariance", "20"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["judge"] == "offline" and out["sla"] == 0.65 and out["window"] == 200 and out["windows"] == 100
    assert out["hallucination_line"] == pytest.approx(HALLUCINATION_RATE_LINE)  # the shipped line, from settings
    assert out["faithfulness_line"] == pytest.approx(0.75)
    relevance, faithfulness = out["files"]
    assert (relevance["kind"], faithfulness["kind"]) == ("relevance", "faithfulness")
    assert relevance["file"] == str(rel) and relevance["metric"] == "context_precision_3"
    assert set(relevance["cases"]) == set(CASES)
    for case in relevance["cases"].values():
        cp3 = case["cp3"]
        assert cp3["n"] == len(TOPICS) and 0.0 <= cp3["p5"] <= cp3["p50"] <= cp3["p95"] <= 1.0
        assert 0.0 <= case["windows_under_sla"] <= 1.0
        assert case["window_mean"]["p5"] <= case["window_mean"]["p95"]
    assert set(relevance["window_auc"]) == {"gold", "realistic"}
    assert all(0.0 <= v <= 1.0 for aucs in relevance["window_auc"].values() for v in aucs.values())
    assert relevance["invariance"]["n"] == 20 and relevance["graded_order"]["en"]["answer"]["n"] > 0
    assert faithfulness["answers"] == 30 and [r["rate"] for r in faithfulness["rates"]] == [0.05, 0.1, 0.3, 0.5]
    assert faithfulness["compare"][0]["low"] == 0.1 and faithfulness["compare"][0]["high"] == 0.3


def test_off_topic_windows_fall_under_the_sla_with_the_offline_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(relevance_file(tmp_path)), "--json", "--windows", "200", "--invariance", "0"]) == 0
    cases = json.loads(capsys.readouterr().out)["files"][0]["cases"]
    assert cases["off_topic"]["windows_under_sla"] == 1.0


def test_table_output_and_cli_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rel = relevance_file(tmp_path)
    assert cli_main(["eval-alerts", str(rel), "--windows", "50", "--rates", "0.1,0.3"]) == 0
    captured = capsys.readouterr()
    assert "rel.jsonl — relevance, judge offline" in captured.out
    for case in CASES:
        assert re.search(rf"^{case}\s", captured.out, re.M), case
    assert "window AUC" in captured.out and "invariance:" in captured.out
    assert "rel.jsonl: done" in captured.err  # progress goes to stderr


def test_options_come_from_the_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGWATCH_SLA_THRESHOLD", "0.9")
    monkeypatch.setenv("RAGWATCH_SLA_WINDOW_SAMPLES", "40")
    assert main([str(faithfulness_file(tmp_path)), "--json", "--windows", "10"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["sla"], out["window"]) == (0.9, 40)
    assert out["files"][0]["rates"][0]["hallucinated_per_window"] == 2  # 0.05 x 40
    assert main([str(faithfulness_file(tmp_path)), "--json", "--windows", "10", "--sla", "0.5", "--window", "20"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["sla"], out["window"]) == (0.5, 20)


# ----------------------------------------------------------------------------------------- errors


def test_missing_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rel = relevance_file(tmp_path)
    missing = tmp_path / "nope.jsonl"
    assert main([str(rel), str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing judged before every file was read
    assert captured.err.strip().count("\n") == 0
    assert captured.err.startswith("ragwatch eval-alerts: error: ") and str(missing) in captured.err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "q"}\n', "unknown schema"),
        ('{"question": "q", "passage": "p", "relevant": true}\n', "lacks question_id, language"),
        ("not json\n", "line 1: not valid JSON"),
        ("", "holds no rows"),
    ],
)
def test_bad_files_name_the_file_and_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and err.count("\n") == 1


def test_mixed_kinds_and_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [*relevance_rows(1, 3)[:2], faith_row(1, True)])
    assert main([str(mixed)]) == 2
    assert "line 3: a relevance file cannot mix" in capsys.readouterr().err
    faith = faithfulness_file(tmp_path)
    assert main([str(faith), "--window", "0"]) == 2
    assert main([str(faith), "--sla", "1.5"]) == 2
    assert main([str(faith), "--judge", "no-such-judge"]) == 2
    assert "no-such-judge" in capsys.readouterr().err
    only_faithful = write_jsonl(tmp_path / "ok.jsonl", [faith_row(i, False) for i in range(5)])
    assert main([str(only_faithful)]) == 2
    assert "no hallucinated answers" in capsys.readouterr().err
    for bad in (["--rates", "0.1,x"], ["--rates", "1.5"], ["--compare", "0.1"]):
        with pytest.raises(SystemExit) as exc:
            main([str(faith), *bad])
        assert exc.value.code == 2


# ------------------------------------------------------------------------------------ real dev data

DEV_FILES = [
    DATA / "relevance" / "wikiqa_dev.jsonl",
    DATA / "relevance" / "rgb_relevance_dev.jsonl",
    DATA / "faithfulness" / "ragtruth_dev.jsonl",
]


@pytest.mark.skipif(not all(p.exists() for p in DEV_FILES), reason="shared data absent")
def test_real_dev_files(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*map(str, DEV_FILES), "--json", "--limit", "60", "--windows", "200", "--invariance", "20"]
    assert main(args) == 0
    wikiqa, rgb, ragtruth = json.loads(capsys.readouterr().out)["files"]
    for f in (wikiqa, rgb):
        assert f["kind"] == "relevance" and f["questions"]["selected"] == 60
        assert f["cases"]["gold"]["cp3"]["n"] > 0 and f["cases"]["off_topic"]["cp3"]["n"] > 0
        assert f["cases"]["off_topic"]["label_cp3"] == 0.0 and f["cases"]["gold"]["label_cp3"] > 0.3
    assert set(rgb["graded_order"]) == {"en", "zh"}
    assert ragtruth["kind"] == "faithfulness" and ragtruth["answers"] == 60
    per_answer = ragtruth["per_answer"]
    assert per_answer["hallucinated"]["answers"] + per_answer["faithful"]["answers"] == 60
