"""Does the evidence shown for a SUPPORTED claim support it? A measurement for ``ragwatch eval-judge``.

An evidence card that quotes "Hotels are booked through the company travel platform." under the claim
"Software may only be installed from the company software portal." costs the whole evidence column its
trust. The judge's verdict may still be right (another chunk held the claim); the quote is what a reader
checks. So eval-judge counts, over the SUPPORTED claims of a labelled file, the quotes that share no
content word (word stem, CJK character bigram or number, as :func:`~ragwatch.scoring.judges.text.content_tokens`
reads them) with their claim — the target is none. A claim with no content word at all ("中", "U.S.") has
nothing a quote could share; it is counted apart (``no_content_word``), not as an offender.

Pure: it reads the claim records a judge put in its verdict details (``text``, ``verdict``, ``evidence``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ragwatch.scoring.judges.text import content_tokens

__all__ = ["EvidenceTally", "quote_shares_content"]

SUPPORTED = "SUPPORTED"


def quote_shares_content(claim: str, quote: str | None) -> bool:
    """Whether ``quote`` holds at least one content word of ``claim`` (False for a missing quote)."""
    if not quote:
        return False
    return not set(content_tokens(claim)).isdisjoint(content_tokens(quote))


@dataclass(slots=True)
class EvidenceTally:
    """Counts SUPPORTED claims and those whose quote shares no content word with the claim.

    ``add`` takes one answer's claim records (``verdict.details["claims"]``, or a composite judge's nested
    ones); ``summary`` is the JSON eval-judge prints. ``examples`` keeps the first few offenders to read.
    """

    supported: int = 0
    unshared: int = 0
    wordless: int = 0
    keep_examples: int = 5
    examples: list[dict[str, str]] | None = None

    def add(self, claims: Iterable[Mapping[str, Any]]) -> None:
        for claim in claims:
            if claim.get("verdict") != SUPPORTED:
                continue
            self.supported += 1
            text = str(claim.get("text") or "")
            quote = claim.get("evidence")
            if not content_tokens(text):
                self.wordless += 1
            elif not quote_shares_content(text, quote if isinstance(quote, str) else None):
                self.unshared += 1
                if self.examples is None:
                    self.examples = []
                if len(self.examples) < self.keep_examples:
                    self.examples.append({"claim": text, "evidence": str(quote or "")})

    def summary(self) -> dict[str, Any]:
        """``supported_claims``, ``quote_shares_no_word`` and its ``share`` of the supported claims that have
        a content word (None when there is none), and ``no_content_word``, the claims set apart."""
        with_words = self.supported - self.wordless
        return {
            "supported_claims": self.supported,
            "no_content_word": self.wordless,
            "quote_shares_no_word": self.unshared,
            "share": round(self.unshared / with_words, 4) if with_words else None,
            "examples": list(self.examples or []),
        }
