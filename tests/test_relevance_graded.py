"""Graded chunk relevance: a function of (question, chunk) alone, with an off-topic floor and graded levels;
its background and weights rebuild from the training corpus, and the dev files read the issue's targets."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragwatch.scoring.judges.relevance import RelevanceScorer
from ragwatch.scoring.judges.relevance_cues import question_kind
from ragwatch.scoring.judges.relevance_graded import BACKGROUND_PATH, GRADED_WEIGHTS_PATH

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
SCORER = RelevanceScorer()

QUESTIONS = [
    "Who wrote the novel Hamlet?",
    "When did the Great Wall of China get built?",
    "How many employees does Acme have in 2024?",
    "长城有多长？",
    "2022年冬奥会开幕式总导演是谁",
]
POOL = [
    "Hamlet is a tragedy written by William Shakespeare around 1600.",
    "Hamlet is set in Denmark at the castle of Elsinore.",
    "The Great Wall was built between the 7th century BC and 1644.",
    "Acme has 5,000 employees in 2024.",
    "Acme's revenue in 2023 was $5 million.",
    "长城全长21196千米。",
    "香蕉富含钾。",
    "2022年北京冬奥会开幕式总导演张艺谋表示简约。",
    "The stock market closed higher on Friday.",
    "",
]
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=9)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    question=st.sampled_from(QUESTIONS),
    chunk=st.sampled_from(POOL[:-1]),
    neighbours=st.lists(st.one_of(st.sampled_from(POOL), st.lists(words, max_size=12).map(" ".join)), max_size=8),
    position=st.integers(min_value=0, max_value=8),
)
def test_a_chunk_reads_the_same_alone_and_in_any_list(
    question: str, chunk: str, neighbours: list[str], position: int
) -> None:
    """Invariance: nothing of the list enters a chunk's relevance (the SLA would otherwise read the list)."""
    alone = SCORER.score(question, [chunk])[0]
    texts = list(neighbours)
    at = min(position, len(texts))
    texts.insert(at, chunk)
    assert SCORER.score(question, texts)[at] == alone


@settings(max_examples=150, deadline=None)
@given(
    question=st.lists(words, min_size=2, max_size=10).map(" ".join),
    chunks=st.lists(st.lists(words, min_size=1, max_size=30).map(" ".join), min_size=1, max_size=5),
)
def test_a_chunk_sharing_no_word_with_the_question_reads_near_zero(question: str, chunks: list[str]) -> None:
    """The off-topic floor: a chunk with none of the question's words is off topic, whatever it says."""
    q_words = set(question.split())
    chunks = [" ".join(w for w in c.split() if w[:5] not in {q[:5] for q in q_words}) or "zzz" for c in chunks]
    for relevance in SCORER.score(f"What is {question}?", chunks):
        assert relevance <= 0.05


def test_the_three_levels_in_both_scripts() -> None:
    """Answer-bearing > on topic without the answer > off topic, in English and Chinese, and the elements
    and information caps: another year, or no value for a "how many" / "when" question, is not the answer."""
    cases = [
        (
            "Who wrote the novel Hamlet?",
            "Hamlet is a tragedy written by William Shakespeare around 1600.",
            "Hamlet is set in Denmark at the castle of Elsinore.",
            "Bananas are rich in potassium.",
        ),
        (
            "What was Acme's revenue in 2024?",
            "Acme's revenue in 2024 was $7 million.",
            "Acme's revenue in 2023 was $5 million.",
            "The stock market closed higher on Friday.",
        ),
        (
            "How many employees does Acme have?",
            "Acme has 5,000 employees.",
            "Acme employees enjoy flexible hours and a free lunch every Friday.",
            "Paris is the capital of France.",
        ),
        ("长城有多长？", "长城全长21196千米。", "长城修建了很多个世纪。", "香蕉富含钾。"),
    ]
    for question, answer, same_topic, off_topic in cases:
        a, s, o = SCORER.score(question, [answer, same_topic, off_topic])
        assert a > s + 0.05 and 0.25 < s < 0.6 and o < 0.05, (question, a, s, o)
        if "many" in question or "2024" in question or "多长" in question:  # the value is there: high
            assert a > 0.8, (question, a)


def test_offset_moves_every_score_by_one_logit_and_keeps_the_order() -> None:
    texts = ["Hamlet is a tragedy written by William Shakespeare.", "Hamlet is set in Denmark.", "Bananas."]
    base = SCORER.score("Who wrote Hamlet?", texts)
    low = RelevanceScorer(offset=-1.0).score("Who wrote Hamlet?", texts)
    assert sorted(range(3), key=base.__getitem__) == sorted(range(3), key=low.__getitem__)
    assert all(lo < b for lo, b in zip(low, base, strict=True))


def test_weight_files_say_what_they_were_built_from() -> None:
    note = json.loads(GRADED_WEIGHTS_PATH.read_text(encoding="utf-8"))["note"]
    assert note["fitted_on"] and all(f.startswith("train/relevance/") for f in note["fitted_on"])
    assert note["set_on_dev"] == "nothing"
    background = json.loads(BACKGROUND_PATH.read_text(encoding="utf-8"))
    assert all(f.startswith("train/") for f in background["note"]["built_from"])
    assert background["docs"] > 10_000 and background["cjk_docs"] > 1_000
    assert BACKGROUND_PATH.stat().st_size < 1_000_000  # a small file, shipped in the wheel


def _needs_data() -> None:
    if not (DATA / "train" / "relevance").exists():
        pytest.skip("shared data absent")


def test_background_and_weights_rebuild_byte_identically() -> None:
    _needs_data()
    done = subprocess.run(
        [
            sys.executable,
            str(
                ROOT / "scripts" / "train_graded_relevance.py",
            ),
            "--check",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.count("rebuilds byte-identically") == 2


def test_dev_files_meet_the_alert_targets(capsys: pytest.CaptureFixture[str]) -> None:
    """``ragwatch eval-alerts`` on both dev relevance files (nothing fitted on them): every chunk reads the
    same alone, other questions' passages ≤ 0.10 per language and an all-off-topic top 3 ≤ 0.15, on-topic
    non-answers ≥ 0.15 above them, a healthy top 3 ≥ 0.35 above an off-topic one, off-topic windows always
    under the SLA and RGB's healthy ones never. (The answer-over-same-topic gap ≥ 0.20 is met on WikiQA
    only; the README says so.)"""
    from ragwatch.scoring.alert_cli import main

    paths = [DATA / "relevance" / name for name in ("wikiqa_dev.jsonl", "rgb_relevance_dev.jsonl")]
    if not all(p.exists() for p in paths):
        pytest.skip("shared data absent")
    assert main([*map(str, paths), "--limit", "600", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for f in out["files"]:
        cases = f["cases"]
        assert f["invariance"]["within_share"] >= 0.95
        assert cases["off_topic"]["cp3"]["mean"] <= 0.15
        assert cases["gold"]["cp3"]["mean"] - cases["off_topic"]["cp3"]["mean"] >= 0.35
        assert cases["off_topic"]["windows_under_sla"] >= 0.99
        for lang, order in f["graded_order"].items():
            assert order["off_topic"]["mean"] <= 0.10, lang
            assert order["same_topic"]["mean"] - order["off_topic"]["mean"] >= 0.15, lang
        if "rgb" in f["file"]:
            assert cases["gold"]["windows_under_sla"] <= 0.05
        else:
            wiki = f["graded_order"]["en"]
            assert wiki["answer"]["mean"] - wiki["same_topic"]["mean"] >= 0.20


def _training_script() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_graded_relevance

    return train_graded_relevance


def test_sentence_windows_join_a_sections_sentences_in_document_order() -> None:
    """The windowed training lists: each question's sentences, sorted by their place in the document (not by
    file order), joined four at a time every two; a window bears the answer when one of its sentences does,
    and the windows form a list of their own (another question id)."""
    script = _training_script()
    ranks = [4, 0, 5, 2, 1, 3]
    rows = [
        {"question_id": "q1", "rank_in_document": r, "passage": f"S{r}.", "relevant": r == 0, "group": "g"}
        for r in ranks
    ]
    windows = script.sentence_windows(rows)
    assert [w["passage"] for w in windows] == ["S0. S1. S2. S3.", "S2. S3. S4. S5."]
    assert [w["relevant"] for w in windows] == [True, False]
    assert {w["question_id"] for w in windows} == {"wq1"}
    assert {w["group"] for w in windows} == {"g"}


def test_grouped_folds_keep_a_windowed_file_with_the_file_it_is_built_from() -> None:
    """A window holds its source sentences: were a group's windows in another fold than its sentences,
    cross-validation would train on the held-out sentences."""
    script = _training_script()
    (windowed, source), *_ = script.WINDOWED.items()
    groups = [f"g{i}" for i in range(20)]
    files = [source] * 20 + [windowed] * 20 + ["train/relevance/other.jsonl"] * 20
    t = {
        "grade": np.zeros(60),
        "file": np.array(files),
        "group": np.array(groups * 3),
    }
    fold = script.grouped_folds(t, 5)
    assert (fold[:20] == fold[20:40]).all()
    assert len(set(fold[:20].tolist())) == 5


def _news_script() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    import news_lists

    return news_lists


_STORY = (
    "The city council met on Monday to discuss the new harbour bridge across the river. "
    "Officials said the harbour bridge had been planned for a decade by the council. "
    "The harbour bridge opened on 12 March 2021 after years of delays and disputes. "
    "Critics of the council said the harbour bridge cost far more than the first estimate. "
    "Mayor Ellen Okafor praised the engineers who built the harbour bridge. "
    "The council also approved a new bus route along the river. "
    "Residents near the river welcomed the news from the council. "
    "The council will publish its report on the harbour bridge next year."
)


def test_news_lists_hold_the_value_in_one_passage_and_ask_for_its_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic news list: exactly one answer-bearing passage, which holds the asked value; the same
    passage with the value blanked and the story's other passages are same-topic non-answers without it;
    the question asks for the value's kind and never contains it; the same seed gives the same lists."""
    script = _news_script()
    monkeypatch.setitem(script.CHUNK_CHARS, "en", 200)  # a short story cut into passages of two sentences
    rows = script.lists_of(_STORY, "en", "news:test", random.Random(0))
    assert rows, "the story holds a date and a name: it must give lists"
    by_q: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_q.setdefault(row["question_id"], []).append(row)
    for qid, listed in by_q.items():
        answers = [r for r in listed if r["relevant"]]
        assert len(answers) == 1, qid
        value = script._VALUE[(listed[0]["kind"], "en")].search(answers[0]["passage"]).group()
        assert value not in listed[0]["question"]
        assert all(value not in r["passage"] for r in listed if not r["relevant"])
        assert any(not r["relevant"] for r in listed)
        assert (
            question_kind(listed[0]["question"])
            == {"date": "date", "number": "number", "person": "person"}[listed[0]["kind"]]
        )
        assert {r["group"] for r in listed} == {"news:test"}
    assert rows == script.lists_of(_STORY, "en", "news:test", random.Random(0))


def test_news_questions_in_chinese_ask_within_the_values_clause(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chinese lists ask inside the clause that holds the value ("造成全国1.2万人受灾" → "造成全国多少人受灾"),
    and a wire-service dateline's date is never asked for."""
    script = _news_script()
    story = (
        "新华社北京3月5日电 记者从应急管理部获悉，今年以来多地遭遇强降雨。"
        "据统计，这次强降雨造成全国12万人受灾，多条道路一度中断。"
        "应急管理部已派出工作组赶赴灾区，指导各地开展救灾工作。"
        "气象部门表示，未来一周南方地区仍有较强降雨，需要防范次生灾害。"
        "各地政府正在组织人员排查隐患，确保群众生命财产安全。"
    )
    monkeypatch.setitem(script.CHUNK_CHARS, "zh", 60)
    rows = script.lists_of(story, "zh", "news:zh", random.Random(0))
    questions = {r["question"] for r in rows}
    assert "这次强降雨造成全国多少人受灾？" in questions
    assert not any("什么时候电" in q for q in questions)
