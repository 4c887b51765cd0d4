"""A passage as the judges read it: its sentences, each sentence's tokens and cues, and what a token weighs.

The offline judge has no model, so everything it knows about a sentence comes from here. The tokens,
numbers and negation/hedge cues themselves come from the one tokenising pass in
:mod:`ragwatch.scoring.judges.text_scan` (it says how words, CJK text and numbers are normalised); this
module cuts context text into sentences, gives each its scan (:func:`analyse_text`) and weighs tokens
(:func:`token_prior`). The word lists and unit table live in :mod:`ragwatch.scoring.judges.text_lexicon`;
the rule helpers read off one scan (negation scope and reach, hedges, entities, JSON polarity) in
:mod:`ragwatch.scoring.judges.text_rules`.

Everything is regex + dict lookups with compiled patterns and memoised work, because the judge must
score hundreds of samples per second per core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ragwatch.scoring.judges.text_lexicon import wordset
from ragwatch.scoring.judges.text_scan import NumberMention, scan, scan_spans, stem

__all__ = [
    "GENERIC_WORDS",
    "TextAnalysis",
    "analyse_text",
    "content_tokens",
    "sentence_spans",
    "token_prior",
]


#: English words that are content words grammatically but say little about *what* a text asserts.
GENERIC_WORDS = frozenset(
    stem(w)
    for w in wordset(
        """
        provide include use make help offer allow base passage information important various several many
        different mention state describe need well like good great new way also other overall however
        additionally known call refer consider find give show mean type kind part number level area often
        usually generally typically specific particular certain thing lot able
        """
    )
)


@lru_cache(maxsize=65536)
def token_prior(tok: str) -> int:
    """Prior informativeness of a token, in tenths: numbers count double, generic words little.

    Integers on purpose: sums over *sets* of tokens then do not depend on the (hash-seeded) iteration order,
    so a claim or chunk on the edge of a threshold gets the same verdict in every process.
    """
    if tok[0] == "#":
        return 20
    if tok in GENERIC_WORDS:
        return 4
    if tok.isascii():
        return 10 if len(tok) > 3 else 7
    return 10


def content_tokens(text: str) -> list[str]:
    """Content tokens of ``text`` in order (see :func:`scan`); the order matters only for token bigrams."""
    return scan(text).tokens


# ---------------------------------------------------------------------------------- context sentences

_SENT_END_RE = re.compile(
    r"(?=[。！？；!?.;\n\"}])(?:"  # cheap first-character filter: most positions fail here, 7x faster
    r"[。！？；!?]+[”’\"'）)」』]*"  # CJK and bang/question terminators always end a sentence
    r"|(?<![A-Z])(?<!\b[A-Za-z]\.[A-Za-z])[.;](?:\.\.)?[”’\"')]*(?=\s+[^a-z\s]|\s*$)"  # ". X" not after initials
    r"|\n+"
    r"|\",\s*\""  # JSON: each key-value pair of a flat object is its own "sentence"
    r"|\},\s*\{"
    r")"
)


#: Every match of ``_SENT_END_RE`` starts with one of these characters.
_SENT_END_START_RE = re.compile(r"[。！？；!?.;\n\"}]")


def _sentence_ends(text: str) -> list[int]:
    """Ends of the ``_SENT_END_RE`` matches, as ``finditer`` would find them.

    The pattern is tried only where it can start: finding those characters is a plain character-set scan
    in the regex engine, while ``finditer`` evaluates the pattern's look-ahead at every position. Every
    match consumes a character, so trying the candidates in order from the last match's end finds the
    same leftmost, non-overlapping matches.
    """
    ends = []
    pos = 0
    search, match = _SENT_END_START_RE.search, _SENT_END_RE.match
    while (c := search(text, pos)) is not None:
        m = match(text, c.start())
        if m is None:
            pos = c.start() + 1
        else:
            pos = m.end()
            ends.append(pos)
    return ends


def sentence_spans(text: str, min_chars: int = 3) -> list[tuple[int, int]]:
    """Fast, approximate sentence boundaries for *context* text, as (start, end) offsets.

    Context sentences are only alignment windows, so a missed abbreviation costs little; the careful
    segmenter for answers is :func:`ragwatch.scoring.judges.claims.split_claims`.
    """
    spans = []
    pos = 0
    ends = _sentence_ends(text)
    if not ends or ends[-1] < len(text):
        ends.append(len(text))
    for end in ends:
        piece = text[pos:end]
        stripped = piece.strip()
        if len(stripped) >= min_chars:
            s = pos + len(piece) - len(piece.lstrip())
            spans.append((s, s + len(stripped)))
        pos = end
    return spans


@dataclass(slots=True)
class TextAnalysis:
    """A passage cut into sentences with, per sentence, its tokens and its negation/hedge cues."""

    spans: list[tuple[int, int]]
    tokens: list[list[str]]
    negations: list[int]
    strong: list[bool]
    modal: list[bool]
    approx: list[bool]
    numbers: list[NumberMention]

    def all_tokens(self) -> list[str]:
        return [t for toks in self.tokens for t in toks]


def analyse_text(text: str) -> TextAnalysis:
    """Sentences of ``text`` (as :func:`sentence_spans`), each scanned as if it stood alone (see
    :func:`~ragwatch.scoring.judges.text_scan.scan_spans`, which reads them as ranges of the passage)."""
    spans = sentence_spans(text)
    scans = scan_spans(text, spans)
    return TextAnalysis(
        spans,
        [sc.tokens for sc in scans],
        [sc.negation_count for sc in scans],
        [sc.strong for sc in scans],
        [sc.modal for sc in scans],
        [sc.approx for sc in scans],
        [m for sc in scans for m in sc.numbers],
    )
