"""Split an answer into atomic claims, with character offsets into the original answer.

Faithfulness is judged claim by claim, so the unit matters: a whole paragraph is "mostly supported" even
when one sentence in it is invented, and a sentence cut at a decimal point ("3.", "5 million") becomes two
meaningless claims. Offsets matter too: they let a dashboard highlight the unsupported span, and they let
the evaluation compare a claim with the human-labelled hallucinated spans of the dev data.

What the segmenter understands:

* sentence ends in Chinese (``。！？；``) and English (``. ! ? ;``) — but not a decimal (``3.5``), a version
  (``v1.2.3``), a URL or e-mail address, an initial (``J. K. Rowling``), a dotted abbreviation (``e.g.``,
  ``U.S.``) or a known one (``Dr.``, ``etc.``), nor a period followed by a lower-case word;
* list items, bullets, numbered lines (``1.``, ``1)``, ``1、``, ``（1）``) and Markdown headings: the marker
  is not part of the claim;
* quoted code: fenced blocks (```` ``` ```` / ``~~~``) produce no claims; `inline code` never splits a
  sentence, and a sentence that is only inline code is not a claim;
* compound sentences, conservatively: "A; B", "A, while/whereas/but B", "A and also B", "A, and it/they …",
  "A，并且/而且/同时/但是 B" become two claims when both halves are substantial on their own.

Numbers, dates, units and names are never cut because the only split points are the ones above.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import accumulate

from ragwatch.scoring.judges.text_scan import CJK_CHARS

__all__ = ["Claim", "mask_inline_code", "split_claims"]


@dataclass(frozen=True, slots=True)
class Claim:
    """One atomic statement of an answer: ``text == answer[start:end]``."""

    text: str
    start: int
    end: int


_FENCE_RE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[^\n]*$|\Z)", re.DOTALL | re.MULTILINE)
_INLINE_CODE_RE = re.compile(r"`[^`\n]+`")
_URL_RE = re.compile(
    r"(?:https?://|www\.)[^\s<>\"'`）)\]」]+[^\s<>\"'`）)\]」.,;:!?。，；：！？]|[\w.+-]+@[\w-]+\.[\w.-]+\w"
)
_MARKER_RE = re.compile(
    r"[ \t]*(?:#{1,6}[ \t]+|>[ \t]*"
    r"|(?:[-*+•·▪●○◦]|\d{1,3}[.)]|[a-z][.)]|[A-Za-z]\)|[一二三四五六七八九十]{1,3}[.])[ \t]+"
    r"|\d{1,3}、|[（(]\d{1,3}[)）][ \t]*|[一二三四五六七八九十]{1,3}、)"
)
_TERM_RE = re.compile(r"[。！？；]+|[!?]+|\.{3,}|…+|[.;]")
_CLOSERS = "\"'”’）)」』]*"
_WORD_BEFORE_RE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "st",
        "vs",
        "inc",
        "ltd",
        "co",
        "corp",
        "jr",
        "sr",
        "no",
        "nos",
        "fig",
        "figs",
        "approx",
        "mt",
        "vol",
        "pp",
        "cf",
        "al",
        "est",
        "dept",
        "gen",
        "gov",
        "rep",
        "sen",
        "sgt",
        "capt",
        "col",
        "lt",
        "op",
        "ca",
        "ed",
        "eds",
        "rev",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "mon",
        "tue",
        "wed",
        "thu",
        "fri",
        "sat",
        "sun",
        "u.s",
        "u.k",
        "u.n",
        "a.m",
        "p.m",
        "ph.d",
        "b.a",
        "m.a",
        "e.u",
        "d.c",
    ]
)
_COMPOUND_RE = re.compile(
    r",\s+(?:while|whereas|but)\s+"
    r"|;\s+"
    r"|(?<!\s)\s+and\s+also\s+"  # (?<!\s): tried once per run of spaces, not at each (quadratic)
    r"|,\s+and\s+(?=(?:it|they|he|she|this|these|those|we|there|its|his|her|their)\b)"
    r"|，\s*(?:并且|而且|同时|但是|然而|此外|另外|但|而(?![是且]))"
)
_CONTENT_RE = re.compile(rf"[A-Za-z0-9{CJK_CHARS}]")
_LATIN_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’.-][A-Za-z0-9]+)*")
_CJK_RE = re.compile(f"[{CJK_CHARS}]")
_NON_SPACE_RE = re.compile(r"\S")
_TERMINAL = tuple(".!?。！？；;:：")


def mask_inline_code(text: str) -> str:
    """``text`` with inline code replaced by spaces (same length): code is quoted, not asserted."""
    if "`" not in text:  # the common case, without the call into the regex engine
        return text
    return _INLINE_CODE_RE.sub(lambda m: " " * len(m.group()), text)


def _protected(text: str) -> list[tuple[int, int]]:
    """Ranges no sentence boundary may fall in: inline code, URLs and e-mail addresses."""
    spans = [m.span() for m in _INLINE_CODE_RE.finditer(text)] if "`" in text else []
    if "://" in text or "www." in text or "@" in text:  # every URL or address has one; the e-mail
        spans += [m.span() for m in _URL_RE.finditer(text)]  # alternative backtracks over every word
    return _union(spans)


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of half-open ranges as disjoint ranges in order, for :func:`_inside` to bisect."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        elif start < end:
            merged.append((start, end))
    return merged


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    """Whether ``pos`` lies in one of :func:`_protected`'s ranges: a bisection, not a scan, because it is
    asked at every terminator and connective (an answer of thousands of `x`. was quadratic)."""
    i = bisect_right(spans, (pos, math.inf)) - 1
    return i >= 0 and pos < spans[i][1]


def _lines(text: str) -> list[tuple[int, int]]:
    """Line ranges of ``text`` outside fenced code blocks, with list markers and headings cut off."""
    fences = [m.span() for m in _FENCE_RE.finditer(text)] if "```" in text or "~~~" in text else []
    out = []
    pos = 0
    for line in text.split("\n"):
        start, end = pos, pos + len(line)
        pos = end + 1
        if any(s <= start < e for s, e in fences):
            continue
        m = _MARKER_RE.match(text, start, end)
        if m:
            start = m.end()
        if text[start:end].strip():
            out.append((start, end))
    return out


def _blocks(text: str) -> list[tuple[int, int, bool]]:
    """Lines joined when a sentence wraps onto the next line (no terminator, next starts lower-case).

    The flag says whether the block starts at a list marker or heading (it then never joins upward).
    """
    blocks: list[tuple[int, int, bool]] = []
    for start, end in _lines(text):
        line_start = text.rfind("\n", 0, start) + 1
        marked = start != line_start and text[line_start:start].strip() != ""
        if blocks and not marked:
            pstart, pend, pmarked = blocks[-1]
            prev = text[pstart:pend].rstrip()
            head = text[start:end].lstrip()
            if prev and not prev.endswith(_TERMINAL) and head[:1].islower() and text.count("\n", pend, start) == 1:
                blocks[-1] = (pstart, end, pmarked)
                continue
        blocks.append((start, end, marked))
    return blocks


def _is_boundary(text: str, m: re.Match[str], end_of_block: int, protected: list[tuple[int, int]]) -> int | None:
    """Where the sentence ends if this terminator ends it, else ``None``."""
    i = m.start()
    if _inside(i, protected):
        return None
    tok = m.group()
    j = m.end()
    while j < end_of_block and text[j] in _CLOSERS:
        j += 1
    nxt = text[j] if j < end_of_block else ""
    if tok[0] in "。！？；":
        return j
    if nxt and not nxt.isspace() and not ("\u3400" <= nxt <= "\u9fff"):
        return None  # "3.5", "v1.2", "e.g.x", "a!b": no space after, not a boundary
    if tok[0] in "!?":
        return j
    if tok[0] == ";":
        return j
    # the next character after any spaces (found, not sliced off: a copy of the rest of the block at every
    # terminator is quadratic in a long answer)
    after = _NON_SPACE_RE.search(text, j, end_of_block)
    lower_next = after is not None and after.group().islower()
    if tok[0] in ".…" and len(tok) > 1:  # ellipsis: a boundary only before a new sentence
        return None if lower_next else j
    if lower_next:
        return None  # "e.g. the", "approx. five": a lower-case word continues the sentence
    w = _WORD_BEFORE_RE.search(text, max(0, i - 20), i)
    if w:
        word = w.group(1)
        if word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isupper()):
            return None
        if "." in word and len(word) <= 6:  # dotted abbreviation such as "U.S." or "a.m."
            return None
    return j


def _sentences(text: str, start: int, end: int, protected: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    pos = start
    for m in _TERM_RE.finditer(text, start, end):
        if m.start() < pos:
            continue
        cut = _is_boundary(text, m, end, protected)
        if cut is not None:
            out.append((pos, cut))
            pos = cut
    if pos < end:
        out.append((pos, end))
    return out


class _WordCount:
    """Whether a slice of one sentence has enough words to stand alone as a claim (three, a CJK character
    counting half), so compound splitting never leaves a fragment. Counted once per sentence and read for
    any slice in O(log n): a sentence strung together with hundreds of ", but" would otherwise be recounted
    after each (quadratic in the answer)."""

    def __init__(self, text: str, start: int, end: int) -> None:
        tokens = sorted(
            [(m.start(), m.end(), 1.0) for m in _LATIN_WORD_RE.finditer(text, start, end)]
            + [(m.start(), m.end(), 0.5) for m in _CJK_RE.finditer(text, start, end)]
        )  # Latin words and CJK characters never overlap, so starts and ends are both in order
        self._starts = [t[0] for t in tokens]
        self._ends = [t[1] for t in tokens]
        self._total = [0.0, *accumulate(t[2] for t in tokens)]

    def substantial(self, start: int, end: int) -> bool:
        """Three words or more in ``text[start:end]`` (exact when no word crosses ``start`` or ``end``)."""
        first, last = bisect_left(self._starts, start), bisect_right(self._ends, end)
        return last > first and self._total[last] - self._total[first] >= 3


def _split_compound(text: str, start: int, end: int, protected: list[tuple[int, int]]) -> list[tuple[int, int]]:
    pieces = []
    pos = start
    words: _WordCount | None = None
    for m in _COMPOUND_RE.finditer(text, start, end):
        if _inside(m.start(), protected):
            continue
        # a connective starts at punctuation or a space and ends at a space, a CJK character or before a
        # pronoun: no word crosses either side
        words = words or _WordCount(text, start, end)
        if words.substantial(pos, m.start()) and words.substantial(m.end(), end):
            cut = m.start() + 1 if text[m.start()] == ";" else m.start()
            pieces.append((pos, cut))
            pos = m.end()
    pieces.append((pos, end))
    return pieces


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and (text[start].isspace() or text[start] in ",，、;；:：*_>-"):
        start += 1
    while end > start and (text[end - 1].isspace() or text[end - 1] in ",，、"):
        end -= 1
    return start, end


def split_claims(text: str) -> list[Claim]:
    """The atomic claims of ``text`` in order; ``claim.text == text[claim.start:claim.end]``."""
    if not text:
        return []
    protected = _protected(text)
    claims = []
    for bstart, bend, _ in _blocks(text):
        for sstart, send in _sentences(text, bstart, bend, protected):
            for cstart, cend in _split_compound(text, sstart, send, protected):
                cstart, cend = _trim(text, cstart, cend)
                piece = text[cstart:cend]
                if not piece or not _CONTENT_RE.search(mask_inline_code(piece)):
                    continue
                claims.append(Claim(piece, cstart, cend))
    return claims
