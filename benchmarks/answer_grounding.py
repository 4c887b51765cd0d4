"""What reading the chunks for a short answer costs the offline judge (issue 27), as a ratio.

    python benchmarks/answer_grounding.py [--rounds 5] [--repeat 10]

``benchmarks/judges.py`` times answers of about 80 words, which are never grounded
(:mod:`ragwatch.scoring.judges.answer_grounding` reads short answers only). Here every sample is a short
answer (the last few words of the healthy demo service's answer) to a demo handbook question with the three
chunks the service retrieved: the case where grounding runs. Each round scores them with grounding and
with it switched off (in alternating order, chunk cache off), in CPU time of this process; the figure to
quote is the median of the per-round ratios, since the absolute rates move with the machine's load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ragwatch.scoring.judges.answer_relevance as answer_relevance
from ragwatch.demo.kb import QUESTIONS
from ragwatch.demo.service import DemoService, sentences
from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.offline import OfflineJudge


def short_samples() -> list[Sample]:
    """One short answer per demo question (four English words, six Chinese characters), with its chunks."""
    service = DemoService(rw=None, hallucination_rate=0.0)  # type: ignore[arg-type]  # retrieve/generate only
    out = []
    for i, q in enumerate(QUESTIONS):
        hits = service.retrieve(q.text)
        first = sentences(service.generate(q.text, hits)[0])[0]
        short = " ".join(first.split()[-4:]) if q.lang == "en" else first[-6:]
        chunks = [SampleChunk(h["id"], k, h["text"]) for k, h in enumerate(hits)]
        out.append(Sample(str(i), "bench", q.text, short, chunks, 0.0))
    return out


def cpu_seconds(samples: list[Sample], grounding: bool) -> float:
    """CPU time to score the samples with a fresh judge, grounding on or off."""
    real = answer_relevance.grounded
    if not grounding:
        answer_relevance.grounded = lambda *args: None
    try:
        judge = OfflineJudge(chunk_cache_size=0)
        start = time.process_time()
        for sample in samples:
            judge.score(sample)
        return time.process_time() - start
    finally:
        answer_relevance.grounded = real


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10, help="times each demo question is scored per round")
    args = parser.parse_args(argv)
    samples = short_samples() * args.repeat
    ratios, rates = [], []
    for r in range(args.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        times = {g: cpu_seconds(samples, g) for g in order}
        ratios.append(times[True] / times[False])
        rates.append(len(samples) / times[True])
    print(f"{len(samples)} short samples (3 chunks each) x {args.rounds} rounds")
    print(f"offline judge with grounding: median {statistics.median(rates):.0f} samples/s per core")
    spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
    print(f"CPU time with grounding / without: median {statistics.median(ratios):.3f} ({spread})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
