"""Judge throughput: samples per second per core for the offline judge (target ≥ 300/s per core).

    python benchmarks/judges.py                 # 400 samples, a few seconds
    python benchmarks/judges.py --samples 2000 --json /tmp/judges.json

A "typical sample" is built from real RAGTruth QA rows in ``../shared/data`` (read, never copied): five
chunks of about 150 words and an answer of about 80 words. Time is CPU time of this process (one core), so
other load on the machine changes it less than wall time would. The trivial judge (a regex tokeniser and
a set intersection) runs interleaved as an in-run floor.

``--semantic N`` adds the semantic tier and the embedding judge (extras ``semantic`` / ``embeddings``) on
the first N samples, with their caches off (every pair and chunk is new, the worst case), scored through
``score_many`` in batches of 8: samples and cross-encoder pairs per CPU-second, the share of claims
re-scored, and the process's peak RSS before and after. The "warm" embedding row scores the same samples a
second time with its caches on: chunk embeddings come from the cache, as when a retriever returns the same
chunks again (claim pairs too: re-scored claims cost nothing there).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragwatch.sampling.sample import Sample, SampleChunk  # noqa: E402
from ragwatch.scoring.judges.offline import OfflineJudge  # noqa: E402
from ragwatch.scoring.judges.trivial import TrivialJudge  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "faithfulness" / "ragtruth_dev.jsonl"


def words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def typical_samples(count: int) -> list[Sample]:
    """Samples of the typical size, cycling through the QA rows of the dev file."""
    if not DATA.exists():
        sys.exit(f"data file {DATA} not found (the shared data folder sits beside the checkout)")
    rows = [json.loads(line) for line in DATA.open(encoding="utf-8")]
    rows = [r for r in rows if r.get("task_type") == "QA" and len(r["answer"].split()) >= 40]
    pool = " ".join(c for r in rows for c in r["contexts"]).split()
    samples = []
    for i in range(count):
        row = rows[i % len(rows)]
        offset = (i * 150) % max(1, len(pool) - 2000)
        contexts = []
        for text in row["contexts"][:5]:  # short passages are topped up to ~150 words with other rows' text
            extra = max(0, 150 - len(text.split()))
            contexts.append(words(text, 150) + (" " + " ".join(pool[offset : offset + extra]) if extra else ""))
            offset += extra
        while len(contexts) < 5:  # QA rows carry 1-3 passages: pad with other rows' text to reach five
            contexts.append(" ".join(pool[offset : offset + 150]))
            offset += 150
        samples.append(
            Sample(
                sample_id=f"s{i}",
                service="bench",
                question=row["question"],
                answer=words(row["answer"], 80),
                chunks=[SampleChunk(id=f"c{j}", rank=j + 1, text=t) for j, t in enumerate(contexts)],
                created_at=0.0,
            )
        )
    return samples


def measure(judge: Any, samples: list[Sample], rounds: int) -> list[float]:
    """Samples per CPU-second, one figure per round."""
    rates = []
    for _ in range(rounds):
        started = time.process_time()
        for sample in samples:
            judge.score(sample)
        rates.append(len(samples) / max(1e-9, time.process_time() - started))
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--semantic", type=int, default=0, metavar="N", help="also the semantic judges on N samples")
    args = parser.parse_args()
    samples = typical_samples(args.samples)
    judges = {"offline": OfflineJudge(), "trivial": TrivialJudge()}
    for judge in judges.values():  # warm caches (compiled regexes, weights)
        judge.score(samples[0])
    rates: dict[str, list[float]] = {name: [] for name in judges}
    for _ in range(args.rounds):  # interleaved, so machine noise hits both alike
        for name, judge in judges.items():
            rates[name] += measure(judge, samples, 1)
    chunk_words = statistics.mean(len((c.text or "").split()) for s in samples for c in s.chunks)
    answer_words = statistics.mean(len((s.answer or "").split()) for s in samples)
    print(f"date:    {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}")
    print(f"python:  {platform.python_implementation()} {platform.python_version()} on {platform.platform()}")
    print(
        f"samples: {len(samples)} × {args.rounds} rounds; 5 chunks of {chunk_words:.0f} words, answers of "
        f"{answer_words:.0f} words (RAGTruth QA rows)"
    )
    print(f"{'judge':<10} {'median samples/s/core':>22} {'min':>8} {'max':>8}")
    for name, values in rates.items():
        print(f"{name:<10} {statistics.median(values):>22.0f} {min(values):>8.0f} {max(values):>8.0f}")
    offline = statistics.median(rates["offline"])
    print(f"offline judge = {offline:.0f} samples/s per core (target ≥ 300): {'PASS' if offline >= 300 else 'FAIL'}")
    out: dict[str, Any] = {"rates": rates, "samples": len(samples), "rounds": args.rounds}
    if args.semantic:
        out["semantic"] = semantic_rows(samples[: args.semantic], offline)
    if args.json:
        args.json.write_text(json.dumps(out))
    return 0


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def semantic_rows(samples: list[Sample], offline_rate: float) -> dict[str, Any]:
    """Samples and pairs per CPU-second of the semantic tier and the embedding judge (caches off)."""
    from ragwatch.scoring.judges.embedding import EmbeddingJudge
    from ragwatch.scoring.judges.semantic import SemanticJudge

    rows: dict[str, Any] = {}
    print(f"{'judge':<16} {'samples/s/core':>15} {'pairs/s/core':>13} {'re-scored':>10} {'peak RSS MiB':>13}")
    variants = (
        ("semantic", SemanticJudge, 0),
        ("embedding", EmbeddingJudge, 0),
        ("embedding, warm", EmbeddingJudge, 4096),
    )
    for name, make, cache in variants:
        rss_before = _peak_rss_mib()
        judge = make(cache_size=cache)
        judge.score_many(samples if cache else samples[:2])  # warm up; with a cache: every chunk seen once
        started = time.process_time()
        verdicts = []
        for b in range(0, len(samples), 8):
            verdicts += judge.score_many(samples[b : b + 8])
        cpu = max(1e-9, time.process_time() - started)
        pairs = sum(v.details["semantic"]["rescored"] for v in verdicts)
        claims = sum(v.details["semantic"]["claims"] for v in verdicts)
        rows[name] = {
            "samples_per_cpu_s": len(samples) / cpu,
            "pairs_per_cpu_s": pairs / cpu,
            "rescored_share": pairs / max(1, claims),
            "rss_mib": [rss_before, _peak_rss_mib()],
        }
        r = rows[name]
        print(
            f"{name:<16} {r['samples_per_cpu_s']:>15.1f} {r['pairs_per_cpu_s']:>13.1f} {r['rescored_share']:>10.0%} "
            f"{rss_before:>6.0f} → {r['rss_mib'][1]:.0f}"
        )
        del judge
    print(f"(offline judge in the same run: {offline_rate:.0f} samples/s per core)")
    return rows


if __name__ == "__main__":
    sys.exit(main())
