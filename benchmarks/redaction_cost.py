"""Redaction cost per sample on the flusher thread: all built-in patterns, and the first eleven names alone.

    python benchmarks/redaction_cost.py            # a few seconds

A sample is a question, an answer and five chunks of ordinary prose with dates, amounts, versions and a
time in them (what most text is), one in ten also carrying contact details. Each is redacted whole, without
the chunk cache (a worst case: the service redacts a repeated chunk once). The figure is microseconds per
sample and the ratio of all patterns to the first eleven names (which since issue 29 include the extended
forms: provider tokens, said passwords, national phones, CJK-domain e-mail), so the ratio is what the six
new names (passport, hk_id, tw_id, uk_nino, fr_nir, ipv6) add. Both run in the same process, interleaved,
so the machine's speed changes both alike.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchcommon import print_table, source_fingerprint  # noqa: E402

from ragwatch.sampling.redact import BUILTIN_PATTERNS, Redactor  # noqa: E402

_FIRST_ELEVEN = BUILTIN_PATTERNS[:11]
_PROSE = (
    "On 2024-03-18 the committee approved 1,250.00 EUR for the upgrade to version 2.4.1, effective at 09:30. "
    "Employees travelling to Shenzhen may book hotels up to 600 CNY per night; receipts are required within "
    "30 days. The policy applies to all staff, contractors included, and replaces the 2019 guideline. "
)
_CONTACT = "Contact Zhang Wei at zhang.wei@example.com or +86 138 1234 5678, office 010-62345678. "


def samples(n: int) -> list[list[str]]:
    out = []
    for i in range(n):
        extra = _CONTACT if i % 10 == 0 else ""
        out.append(["How much may I spend on hotels in Shenzhen?", _PROSE * 3 + extra, *[_PROSE * 4] * 5])
    return out


def per_sample_us(redact: Redactor, batch: list[list[str]]) -> float:
    started = time.perf_counter()
    for texts in batch:
        for text in texts:
            redact(text)
    return (time.perf_counter() - started) / len(batch) * 1e6


def main() -> int:
    batch = samples(500)
    every, first = Redactor(), Redactor(_FIRST_ELEVEN)
    runs: dict[str, list[float]] = {"all": [], "first eleven": []}
    for _ in range(5):  # interleaved, best of five
        runs["all"].append(per_sample_us(every, batch))
        runs["first eleven"].append(per_sample_us(first, batch))
    best = {k: min(v) for k, v in runs.items()}
    chars = sum(len(t) for t in batch[0])
    print_table(
        f"redaction per sample ({chars:,} characters: question, answer, 5 chunks; 1 in 10 with contact details)",
        ["patterns", "µs per sample", "ratio"],
        [
            [f"all {len(BUILTIN_PATTERNS)}", f"{best['all']:.0f}", f"{best['all'] / best['first eleven']:.2f}"],
            ["first 11", f"{best['first eleven']:.0f}", "1.00"],
        ],
    )
    print(source_fingerprint())
    return 0


if __name__ == "__main__":
    sys.exit(main())
