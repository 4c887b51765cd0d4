"""Graded chunk relevance: a function of (question, chunk) alone, with an off-topic floor and graded levels;
its background and weights rebuild from the training corpus, and the dev files read the issue's targets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragwatch.scoring.judges.relevance import RelevanceScorer
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
