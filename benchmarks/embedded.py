"""What in-process scoring (the ``memory://`` default) costs the host, and what it delivers.

    python benchmarks/embedded.py                  # about 3 minutes
    python benchmarks/embedded.py --quick          # about 40 s (shorter phases: noisier p99)
    python benchmarks/embedded.py --json /tmp/embedded.json

Four measurements, each against a baseline measured in the same run:

1. **Host latency at a steady 100 requests/s**: an open-loop schedule (request *i* starts at t0 + i/100 s)
   of pipeline calls — a BM25 retriever over the demo handbook (real CPU work), a 5 ms wait standing in for
   the LLM's network call, an extractive answer — on two RagWatch objects with every default (sampling at
   0.1, tracing on with an SDK provider) except ``scoring``: ``auto`` (in-process scoring at its default
   budget, on its own memory:// queue) and ``off``. Phases alternate (off, on, off, on, …) so machine noise
   hits both alike; p50 and p99 of the call's own duration over all phases of a variant.
2. **Scored samples per second** at that budget: scores applied during the ``auto`` phases / their time.
3. **RSS after one hour-equivalent of samples**: 360,000 requests (an hour at 100 req/s: 36,000 samples
   at the default rate) through a default RagWatch as fast as they go — five fixed chunks of ~150 words,
   no LLM wait, the per-second sampling ceiling lifted so the hour's samples all happen, tracing off
   (spans are bounded by the span processor's queue and ``overhead.py --rss`` covers them) — RSS
   (``VmRSS``) read every 10 %; bounded means the last reading is the 10 % one plus noise.
4. **The sampling cost as a request pays it**: that light traced pipeline, p50 per call with sampling on
   at the default rate versus ``sampling=False``, interleaved in rounds of 500 calls.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchcommon import print_table, source_fingerprint, usable_cpus  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

import ragwatch  # noqa: E402
from ragwatch.demo.kb import CHUNKS, QUESTIONS  # noqa: E402
from ragwatch.demo.service import Index  # noqa: E402

INDEX = Index(tuple(c for c in CHUNKS if c.lang == "en"))
QUESTION_TEXTS = [q.text for q in QUESTIONS if q.lang == "en"]


class DropExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def provider() -> TracerProvider:
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=2048))
    return tp


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


#: Five retrieved chunks of ~150 words (what a sample carries in the RSS and sampling-cost runs).
FIXED_CHUNKS = [
    {"id": f"doc-{i}", "text": " ".join([CHUNKS[(i * 7 + j) % len(CHUNKS)].text for j in range(6)])[:900], "score": 0.9}
    for i in range(5)
]


LIGHT_ANSWER = FIXED_CHUNKS[0]["text"][:300]


def service(wait: float, *, light: bool = False, **settings: Any) -> tuple[ragwatch.RagWatch, Any, CollectorRegistry]:
    """A watched pipeline; every setting at its default unless given (own registry, own memory queue).
    ``light``: the retriever returns five fixed chunks instead of searching and the "LLM" a fixed answer
    (the pipeline costs little, so what ragwatch adds stands out)."""
    registry = CollectorRegistry()
    rw = ragwatch.RagWatch(
        "bench",
        registry=registry,
        tracer_provider=provider(),
        redis_url=f"memory://bench-{uuid.uuid4().hex[:8]}",
        **settings,
    )

    @rw.retriever
    def retrieve(question: str, top_k: int = 3) -> list[dict[str, Any]]:
        if light:
            return FIXED_CHUNKS
        return [{"id": c.id, "text": c.text, "score": s} for c, s in INDEX.search(question, top_k)]

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str, chunks: list[dict[str, Any]]) -> dict[str, Any]:
        if wait:
            time.sleep(wait)  # the LLM's network round trip
        if light:
            text = LIGHT_ANSWER
        else:
            sentences = [s for c in chunks for s in re.split(r"(?<=[.!?]) ", c["text"])]
            text = max(sentences, key=lambda s: len(words(question) & words(s)))
        return {
            "model": "gpt-4o-mini",
            "choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 400, "completion_tokens": 30},
        }

    @rw.pipeline
    def answer(question: str) -> Any:
        return generate(question, retrieve(question))

    return rw, answer, registry


def scored(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("ragwatch_worker_entries_total", {"service": "bench", "outcome": "scored"}) or 0.0


def skipped(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("ragwatch_scoring_skipped_total", {"service": "bench", "reason": "budget"}) or 0.0


def paced(answer: Any, seconds: float, rate: float, offset: int) -> list[float]:
    """Open loop at ``rate`` requests/s for ``seconds``: the duration of each call, in seconds."""
    out = []
    n = int(seconds * rate)
    t0 = time.perf_counter()
    for i in range(n):
        due = t0 + i / rate
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        started = time.perf_counter()
        answer(QUESTION_TEXTS[(offset + i) % len(QUESTION_TEXTS)])
        out.append(time.perf_counter() - started)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="shorter phases (noisier p99)")
    parser.add_argument("--phases", type=int, help="phases per variant (default 6; 3 with --quick)")
    parser.add_argument("--phase-seconds", type=float, help="seconds per phase (default 12; 5 with --quick)")
    parser.add_argument("--hour", type=int, default=360_000, help="requests of the RSS run (an hour at 100/s)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    phases = args.phases or (3 if args.quick else 6)
    phase_seconds = args.phase_seconds or (5.0 if args.quick else 12.0)
    hour = args.hour // 10 if args.quick else args.hour
    print(f"ragwatch {ragwatch.__version__} · {source_fingerprint()} · {usable_cpus()} usable CPUs")

    # 1-2: latency at 100 req/s, scoring at its default budget vs off
    on, answer_on, reg_on = service(0.005)
    off, answer_off, _ = service(0.005, scoring="off")
    budget = on.settings.scoring_max_per_second
    for answer in (answer_on, answer_off):  # warm-up: start threads, fill caches
        paced(answer, 1.0, 100, 0)
    lat: dict[str, list[float]] = {"off": [], "on": []}
    on_seconds = 0.0
    scored_before = scored(reg_on)
    for p in range(phases):
        for name, answer in (
            (("off", answer_off), ("on", answer_on))
            if p % 2 == 0
            else (
                ("on", answer_on),
                ("off", answer_off),
            )
        ):
            started = time.monotonic()
            lat[name] += paced(answer, phase_seconds, 100, p * 1000)
            if name == "on":
                on_seconds += time.monotonic() - started
    rate = (scored(reg_on) - scored_before) / on_seconds
    p50 = {k: pct(v, 0.5) * 1e3 for k, v in lat.items()}
    p99 = {k: pct(v, 0.99) * 1e3 for k, v in lat.items()}
    on.close(1)
    off.close(1)

    # 3: RSS over an hour-equivalent of requests (default sampling: ~36,000 samples), scoring on
    rss_rw, rss_answer, rss_reg = service(0.0, light=True, sample_max_per_second=1e6, tracing=False)
    readings = []
    for i in range(hour):
        rss_answer(QUESTION_TEXTS[i % len(QUESTION_TEXTS)])
        if (i + 1) % (hour // 10) == 0:
            readings.append(rss_mib())
    rss_rw.flush(10)
    sampled = rss_reg.get_sample_value(
        "ragwatch_sampling_decisions_total", {"service": "bench", "decision": "sampled", "reason": "rate"}
    )
    rss_rw.close(1)

    # 4: the sampling cost in context: traced pipeline, default rate, vs sampling off
    s_on, a_on, _ = service(0.0, light=True)
    s_off, a_off, _ = service(0.0, light=True, sampling=False)
    cost: dict[str, list[float]] = {"on": [], "off": []}
    rounds = 10 if args.quick else 40
    for r in range(rounds):
        for name, answer in (("on", a_on), ("off", a_off)) if r % 2 == 0 else (("off", a_off), ("on", a_on)):
            for i in range(500):
                started = time.perf_counter()
                answer(QUESTION_TEXTS[i % len(QUESTION_TEXTS)])
                cost[name].append(time.perf_counter() - started)
    s_on.close(1)
    s_off.close(1)
    c50 = {k: statistics.median(v) * 1e6 for k, v in cost.items()}

    rows = [
        ["host latency p50 at 100 req/s, scoring off (ms)", f"{p50['off']:.2f}", ""],
        [f"host latency p50, in-process scoring at {budget:g}/s (ms)", f"{p50['on']:.2f}",
         f"{p50['on'] / p50['off']:.3f}× (target ≤ 1.05×)"],
        ["host latency p99 at 100 req/s, scoring off (ms)", f"{p99['off']:.2f}", ""],
        [f"host latency p99, in-process scoring at {budget:g}/s (ms)", f"{p99['on']:.2f}",
         f"{p99['on'] / p99['off']:.3f}× (target ≤ 1.25×)"],
        ["scored samples/s at the default budget", f"{rate:.2f}", f"budget {budget:g}/s"],
        [f"RSS after 10% / 20% / 100% of {hour:,} requests ({sampled or 0:,.0f} samples) (MiB)",
         f"{readings[0]:.1f} / {readings[1]:.1f} / {readings[-1]:.1f}",
         f"+{readings[-1] - readings[1]:.1f} MiB from 20%"],
        ["traced pipeline p50, sampling off (µs)", f"{c50['off']:.1f}", ""],
        ["traced pipeline p50, sampling at the default rate (µs)", f"{c50['on']:.1f}",
         f"+{c50['on'] - c50['off']:.1f} µs"],
    ]  # fmt: skip
    print_table("in-process scoring (memory://, default settings)", ["measurement", "value", "vs baseline"], rows)
    ok50 = p50["on"] / p50["off"] <= 1.05
    ok99 = p99["on"] / p99["off"] <= 1.25
    print(f"{'PASS' if ok50 else 'FAIL'} p50 ratio {p50['on'] / p50['off']:.3f} ≤ 1.05")
    print(f"{'PASS' if ok99 else 'FAIL'} p99 ratio {p99['on'] / p99['off']:.3f} ≤ 1.25")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "p50_ms": p50,
                    "p99_ms": p99,
                    "scored_per_second": rate,
                    "budget": budget,
                    "rss_mib": readings,
                    "hour_requests": hour,
                    "sampling_p50_us": c50,
                    "requests_per_variant": {k: len(v) for k, v in lat.items()},
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
