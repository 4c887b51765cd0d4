"""Hostile text: does the offline judge's (and the redactor's) cost grow with the text, or with its square?

    python benchmarks/hostile_text.py              # about a minute
    python benchmarks/hostile_text.py --size 32000 --json /tmp/hostile.json

A worker scores whatever a service answered. One answer of 200,000 spaces with one word at the end used to
hold the offline judge for about a minute: a regular expression tried its ``\\s+`` at every space of the run
(quadratic), and claims strung together with hundreds of ", but" were recounted after each. The sampler
cuts answers at ``max_answer_chars`` (8,000) and chunks at ``max_chunk_chars`` (4,000), which bounds the
damage inside a service, but ``eval-judge``, a judge called directly, or a raised limit reads the whole text.

For each repeated unit (spaces, list items, connectives, numbers, abbreviations, CJK, markup …), followed by
one word and placed in the answer, the question or a chunk, the judge scores the text at ``--size``
characters and at four times that, in one run. The figure is the ratio of the two CPU times: about 4 for
work linear in the text, about 16 for quadratic. A ratio is used, not an absolute time, because this
machine's speed moves between minutes; rows whose larger text takes under ``--floor`` seconds are neither
shown nor judged (a ratio of two tiny times is noise). Exit status 1 when any judged row reads above
``--limit`` (default 8).

First, the legal-size case of issue 29 (item 6): an answer and 20 chunks built from one negated sentence
repeated up to a quarter, half and all of every default size limit, judged whole. Each claim nearly repeats
every context sentence; the judge used to rescan each such sentence's negation scopes per claim (20 s per
sample at the limits). Its table shows time per sample and time(2x) / time(x): about 2 for linear work
(exit status 1 above 3).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchcommon import print_table, source_fingerprint  # noqa: E402

from ragwatch.sampling.redact import Redactor  # noqa: E402
from ragwatch.sampling.sample import Limits, Sample, SampleChunk  # noqa: E402
from ragwatch.scoring.judges.offline import OfflineJudge  # noqa: E402

#: Units repeated to the size asked: what a tokeniser, a sentence splitter or a rule might loop over.
UNITS = (
    " ", "\n", "\t", "  \n", "- a\n", "| a |\n", "* ", "1) ", "# ", "1", "1.", "1,000 ", "1.5e10 ", "$1", "%",
    "10 km ", "2024", "年", "，", "。", "预计", "，而", "; ", ", but ", " and also", ", and it ", "not ",
    "e.g. ", "U.S. ", "Mr. ", "A. ", "...", "…", "!?", "—", "(", "[", "{", '"', "`", "``` ", "<b>",
    "&amp;", "http://a.b/", "a@b.c ", "x=1 ", '{"a": 1}', "\u200b", "a ", ".`", "`;", "。`", "`e.g.",
)  # fmt: skip
#: Where the text goes: a field of a sample the offline judge scores, or the text the sampler's redactor
#: (every built-in pattern) masks, which also runs on the request thread for exception messages.
PLACES = ("answer", "question", "chunk", "redactor")
#: Units only a redaction pattern would loop over.
REDACTION_UNITS = (
    "eyJ", "sk-", "a@", "a@b.", "1-", "+1 ", "DE00 ", "1234 ", "password=", "1.1.1.", "138",
    # the kinds of issue 29: tokens, said passwords, passports, ids, phones, IPv6, CJK-domain e-mail
    "xoxb-", "glpat-", "Bearer ", "password is ", "passport ", "A123456", "A1", "AB 12 ", "1 85 ", "::", "1:",
    "+44 (0)", "0049 ", "010-", "01 23 ", "020 ", "de89 ", "a@例", "@例子.",
)  # fmt: skip
#: The sentence of issue 29, item 6: a negated claim every context sentence nearly repeats.
LEGAL_UNIT = "Limit 12 is 34 and 56 not 78. "


def sample(place: str, text: str) -> Sample:
    """A sample with ``text`` in one place and a short ordinary text in the others."""
    return Sample(
        sample_id="hostile",
        service="bench",
        question=text if place == "question" else "What happened to prices in 2024?",
        answer=text if place == "answer" else "Prices rose by 5% in 2024.",
        chunks=[
            SampleChunk(id="c1", rank=1, text=text if place == "chunk" else "In 2024 prices rose by 5%."),
            SampleChunk(id="c2", rank=2, text="Wages were flat."),
        ],
        created_at=0.0,
    )


def cpu_seconds(judge: OfflineJudge, redact: Redactor, place: str, text: str) -> float:
    started = time.process_time()
    if place == "redactor":
        redact(text)
    else:
        judge.score(sample(place, text))
    return time.process_time() - started


def legal_size(judge: OfflineJudge, fraction: float, limits: Limits) -> float:
    """CPU seconds to judge answer and chunks of :data:`LEGAL_UNIT` at ``fraction`` of every size limit."""

    def text(chars: int) -> str:
        return (LEGAL_UNIT * (chars // len(LEGAL_UNIT) + 1))[:chars]

    chunk = text(int(limits.max_chunk_chars * fraction))
    hostile = Sample(
        sample_id="legal",
        service="bench",
        question="What is the limit?",
        answer=text(int(limits.max_answer_chars * fraction)),
        chunks=[SampleChunk(id=f"c{i}", rank=i + 1, text=chunk) for i in range(limits.max_chunks)],
        created_at=0.0,
    )
    started = time.process_time()
    judge.score(hostile)
    return time.process_time() - started


def legal_size_table(judge: OfflineJudge) -> list[str]:
    """Judge time per sample at a quarter, half and all of the default limits: linear work doubles."""
    limits = Limits()
    times = {f: min(legal_size(judge, f, limits) for _ in range(3)) for f in (0.25, 0.5, 1.0)}
    rows = [
        [f"{f:g} × limits", f"{times[f] * 1000:.0f}", f"{times[f] / times[f / 2]:.2f}" if f / 2 in times else ""]
        for f in times
    ]
    print_table(
        f"legal-size sample of {LEGAL_UNIT.strip()!r} (answer ≤ {limits.max_answer_chars:,}, "
        f"{limits.max_chunks} chunks ≤ {limits.max_chunk_chars:,} characters): ratio ≈ 2 linear, ≈ 4 quadratic",
        ["size", "ms per sample", "time(2x) / time(x)"],
        rows,
    )
    return [f"legal-size ×{f:g}" for f in (0.5, 1.0) if times[f] / times[f / 2] > 3.0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=16000, help="characters of the smaller text (default 16000)")
    parser.add_argument("--limit", type=float, default=8.0, help="highest acceptable ratio (default 8)")
    parser.add_argument("--floor", type=float, default=0.02, help="seconds under which a row is not judged")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.size < 100:
        parser.error("--size must be at least 100")
    judge = OfflineJudge(chunk_cache_size=0)  # every chunk read afresh
    redact = Redactor()
    judge.score(sample("answer", "warm up."))
    legal_failed = legal_size_table(judge)
    rows, results, failed = [], [], list(legal_failed)
    units = (*UNITS, *REDACTION_UNITS)
    for i, unit in enumerate(units):
        for place in PLACES if unit in UNITS else ("redactor",):
            small, large = (unit * max(1, n // len(unit)) + " end" for n in (args.size, 4 * args.size))
            t_small, t_large = (cpu_seconds(judge, redact, place, text) for text in (small, large))
            ratio = t_large / max(t_small, 1e-6)
            judged = t_large >= args.floor
            bad = judged and ratio > args.limit
            if bad:
                failed.append(f"{unit!r} in the {place}")
            results.append(
                {"unit": unit, "place": place, "small_s": t_small, "large_s": t_large, "ratio": ratio, "judged": judged}
            )
            if judged:
                verdict = "QUADRATIC?" if bad else "ok"
                rows.append(
                    [repr(unit), place, f"{t_small * 1000:.1f}", f"{t_large * 1000:.1f}", f"{ratio:.1f}", verdict]
                )
        print(f"  {i + 1}/{len(units)} units", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    print_table(
        f"offline judge and redactor, {args.size:,} vs {4 * args.size:,} characters "
        "(ratio ≈ 4 linear, ≈ 16 quadratic); "
        f"{len(results) - len(rows)} rows under {args.floor} s not shown",
        ["unit", "in", "ms (size)", "ms (4 × size)", "ratio", ""],
        rows,
    )
    print(source_fingerprint())
    if args.json:
        args.json.write_text(json.dumps({"size": args.size, "results": results}, indent=1), encoding="utf-8")
    if failed:
        print(f"above ×{args.limit:g}: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
