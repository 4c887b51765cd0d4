"""The planted-error generator (scripts/make_synthetic_faithfulness.py): each kind changes exactly the text its
span marks, leaves the context unchanged and plants something the context does not state; the whole set
rebuilds byte for byte from the training corpus."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_synthetic_faithfulness", ROOT / "scripts" / "make_synthetic_faithfulness.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SYNTH = _generator()
EN = {
    "question": "When did the museum open and how many rooms does it have?",
    "contexts": ["The City Museum in Lyon opened in 1998. It has 120 rooms and may add a wing later."],
    "answer": "The City Museum in Lyon opened in 1998 and is large: it has 120 rooms, and it may add a wing later.",
    "language": "en",
}
ZH = {
    "question": "博物馆什么时候开放？",
    "contexts": ["市博物馆于1998年开放，共有120个展厅，预计明年扩建。"],
    "answer": "市博物馆于1998年开放，是本市最大的博物馆，共有120个展厅，预计明年扩建。",
    "language": "zh",
}
POOL = {"en": ["Bananas are rich in potassium."], "zh": ["香蕉富含钾。"], "entities": ["Geneva", "Paris"]}


def _planted(kind: str, base: dict[str, Any], seed: int = 0) -> tuple[str, list[list[int]]]:
    out = SYNTH.plant(kind, base, random.Random(seed), POOL)
    assert out is not None, f"{kind} should apply to {base['answer']!r}"
    return out


@pytest.mark.parametrize(
    ("kind", "base"),
    [(k, EN) for k in SYNTH.KINDS] + [(k, ZH) for k in SYNTH.KINDS if k != "entity"],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_span_marks_exactly_what_changed(kind: str, base: dict[str, Any], seed: int) -> None:
    answer, spans = _planted(kind, base, seed)
    assert len(spans) == 1
    start, end = spans[0]
    before = base["answer"]
    assert 0 <= start < end <= len(answer)
    assert answer != before
    # outside the span the text is the base's: what precedes it (an added sentence after one space), and
    # what follows it
    assert answer[:start].rstrip(" ") == before[:start].rstrip(" ")
    assert answer[end:] == before[len(before) - (len(answer) - end) :]
    planted = answer[start:end]
    assert planted.strip()
    if kind in ("number", "year", "entity", "added"):
        assert planted not in "\n".join(base["contexts"]), f"{kind}: the planted text is stated by the context"


def test_each_kind_plants_what_it_says() -> None:
    assert _planted("year", EN)[0].count("1998") == 0
    number, spans = _planted("number", EN)
    assert "120" not in number and number[spans[0][0] : spans[0][1]].isdigit()
    assert "not" in _planted("negation", EN)[0].split() or "cannot" in _planted("negation", EN)[0]
    assert "may" not in _planted("hedge", EN)[0].split()
    assert _planted("entity", EN)[0].count("Lyon") == 0
    assert "不" in _planted("negation", ZH)[0] or "没有" in _planted("negation", ZH)[0]
    assert "预计" not in _planted("hedge", ZH)[0]
    added, spans = _planted("added", ZH)
    assert added.startswith(ZH["answer"]) and spans[0][0] == len(ZH["answer"])


def test_a_kind_that_does_not_apply_is_refused() -> None:
    plain = {**EN, "answer": "The museum is pleasant.", "contexts": ["The museum is pleasant."]}
    for kind in ("number", "year", "hedge", "entity"):
        assert SYNTH.plant(kind, plain, random.Random(0), POOL) is None
    assert SYNTH.plant("entity", ZH, random.Random(0), POOL) is None  # no Chinese entity swap


def test_the_set_rebuilds_byte_for_byte_and_keeps_document_groups() -> None:
    if not (DATA / "train" / "faithfulness").exists():
        pytest.skip("shared data absent")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_synthetic_faithfulness.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "rebuilds byte-identically" in done.stdout
    manifest = json.loads((ROOT / "scripts" / "synthetic_faithfulness.manifest.json").read_text(encoding="utf-8"))
    assert set(manifest["by_kind"]) == {"faithful", *SYNTH.KINDS}
    rows = SYNTH.build_rows(DATA)
    assert all(r["licence"] and "NC" not in r["licence"].upper().split("-") for r in rows)
    assert all(":" in r["group"] for r in rows)  # the document's own group: variants share its fold
    assert not any(r["source"].startswith("synthetic/RAGTruth") for r in rows)  # nothing from the dev files
