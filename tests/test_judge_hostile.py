"""Legal-size hostile samples cost the offline judge work linear in their size (issue 29, item 6).

An answer and chunks built from one short negated sentence repeated up to every size limit used to cost
20 s of judge time: each claim nearly repeats every context sentence, and each such "twin" had its negation
scopes scanned again — claims × sentences scans. Work is counted here (Python lines executed, calls to the
scope scanner), never timed; the wall-clock figures are in ``benchmarks/hostile_text.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges import claim_context
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.judges.text import sentence_spans

UNIT = "Limit 12 is 34 and 56 not 78. "


def repeated(chars: int) -> str:
    return (UNIT * (chars // len(UNIT) + 1))[:chars]


def hostile(answer_chars: int, chunk_chars: int, chunks: int = 5) -> Sample:
    return Sample(
        sample_id="hostile",
        service="t",
        question="What is the limit?",
        answer=repeated(answer_chars),
        chunks=[SampleChunk(id=f"c{i}", rank=i + 1, text=repeated(chunk_chars)) for i in range(chunks)],
        created_at=0.0,
    )


def lines_executed(fn: Callable[[], Any]) -> int:
    """Python lines run by ``fn()``: a count of work that does not depend on the machine's speed."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(previous)
    return count


@pytest.fixture
def judge() -> OfflineJudge:
    judge = OfflineJudge(chunk_cache_size=0)  # every chunk read afresh, as a new sample's would be
    judge.score(hostile(60, 60))  # memoised word tables warm, so both sizes pay the same fixed costs
    return judge


def test_work_on_a_repeated_negated_sentence_grows_linearly_with_its_size(judge: OfflineJudge) -> None:
    small, large = (lines_executed(lambda n=n: judge.score(hostile(2 * n, n))) for n in (600, 1200))
    # linear work doubles (2.0); the old claims × sentences rescans quadrupled it (3.9 at these sizes)
    assert large / small < 2.5, (small, large)


def test_each_context_sentence_has_its_negation_scopes_read_once(
    judge: OfflineJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    scopes = claim_context.negation_scopes

    def counted(text: str) -> list[set[str]]:
        calls.append(text)
        return scopes(text)

    monkeypatch.setattr(claim_context, "negation_scopes", counted)
    sample = hostile(3000, 1500)
    verdict = judge.score(sample)
    sentences = sum(len(sentence_spans(c.text or "")) for c in sample.chunks)
    assert 0 < len(calls) <= sentences  # was one scan per claim and twin sentence: 100 × 250 here
    assert verdict.details["claims"]  # and the claims were judged, all of them
    assert len(verdict.details["claims"]) == 100


def test_a_repeated_claim_gets_the_verdict_and_evidence_of_its_first_reading(judge: OfflineJudge) -> None:
    sample = Sample(
        sample_id="r",
        service="t",
        question="When did the bridge open?",
        answer="The bridge opened in 1932. It is not 120 meters long. The bridge opened in 1932. It is red.",
        chunks=[SampleChunk(id="c1", rank=1, text="The bridge opened in 1932. It is 120 meters long.")],
        created_at=0.0,
    )
    claims = judge.score(sample).details["claims"]
    first, second = claims[0], claims[2]
    assert (first["start"], second["start"]) == (0, 54)  # each keeps its own place in the answer
    assert {k: v for k, v in first.items() if k not in ("start", "end")} == {
        k: v for k, v in second.items() if k not in ("start", "end")
    }
    assert claims[1]["verdict"] == "UNSUPPORTED"  # the negation flip still read off the (cached) scopes
