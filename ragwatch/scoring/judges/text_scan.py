"""The tokenising pass: one scan of a text gives its content tokens, its numbers with units, and its
negation and hedge cues.

Apart from :mod:`ragwatch.scoring.judges.text` because it is the judge's inner loop, written for speed
rather than for easy reading: one regex pass per text, words looked up in bulk when a text holds nothing
else, a passage's sentences read as ranges of it rather than slices (:func:`scan_spans`), memoised word
and number normalisation. Every rule that decides what a token or a cue *is* lives here, in one place,
because the claim and the context must be read by exactly the same code; the modules that use a scan —
sentences and token weights in :mod:`~ragwatch.scoring.judges.text`, negation scope, entities and JSON
polarity in :mod:`~ragwatch.scoring.judges.text_rules` — build on it and never reach inside. The word
lists and unit table it reads are data, in :mod:`~ragwatch.scoring.judges.text_lexicon`.

The choices are deliberately simple and symmetric, so a quirk of the stemmer costs nothing as long as both
sides share it:

* English: lower-cased words (camelCase split, so a JSON key ``RestaurantsTakeOut`` matches "takeout"),
  a light suffix-stripping stemmer, a stopword list; month abbreviations and small number words are
  folded to one spelling ("Feb" = "february", "nine" = "9").
* CJK: overlapping character bigrams (a lone character stays a unigram); bigrams made only of function
  characters (的, 了, 是 …) are dropped. No word segmenter is needed and none is downloaded.
* Numbers: one token per number, with thousands separators removed and ``4.0`` = ``4``, prefixed ``#``
  so "2019" never collides with a word; each mention also records the unit that follows it.
* Cues: English negators and hedges are recognised word by word during the pass; Chinese ones by small
  regexes over the text.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ragwatch.scoring.judges.text_lexicon import (
    CJK_FUNCTION,
    MONTHS,
    NUMBER_WORDS,
    SCALES,
    STOPWORDS,
    UNIT_ALT,
    UNITS,
    wordset,
)

__all__ = [
    "CJK_CHARS",
    "NumberMention",
    "Scan",
    "scan",
    "scan_spans",
    "stem",
    "word_tokens",
]

#: CJK ideographs (unified, extension A, compatibility) — the characters tokenised as bigrams.
CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"


_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[a-z]+")
_THOUSANDS_RE = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light, symmetric suffix stripper: "formed", "forms", "forming" and "form" meet; so do "provides",
    "provided" and "provide" (a final "e" is always dropped). Cheap and memoised."""
    w = word
    if w.endswith(("'s", "’s")):
        w = w[:-2]
    if len(w) <= 3:
        return w[:-1] if len(w) == 3 and w[-1] == "e" else w  # "use" meets "used"
    # plural / third person
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses") or w.endswith(("ches", "shes", "xes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    # verb and adverb suffixes
    if w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("eed"):
        w = w[:-1]
    elif w.endswith("ing") and len(w) > 5:
        w = w[:-3]
        if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "lsz":
            w = w[:-1]
    elif w.endswith("ed") and len(w) > 3:
        w = w[:-2]
        if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "lsz":
            w = w[:-1]
    elif w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def _clock(raw: str, suffix: str) -> str:
    """A 12-hour time as a 24-hour one: ("5", "pm") → "17:00", ("12:30", "am") → "0:30"."""
    hour, _, minute = raw.partition(":")
    if not hour.isdigit() or (minute and not minute.isdigit()):
        return raw
    h = int(hour) % 12 + (12 if suffix.lower().startswith("p") else 0)
    return f"{h}:{int(minute or 0):02d}"


@lru_cache(maxsize=65536)
def _number_token(raw: str) -> str:
    """One spelling per value: ``1,523`` → ``#1523``; ``4.0`` → ``#4``; times keep their colon."""
    if "," in raw:  # "1,523" is one number; "3,4" in a list keeps the first (the caller splits lists)
        raw = raw.replace(",", "") if _THOUSANDS_RE.match(raw) else raw.split(",", 1)[0]
    if ":" in raw:
        parts = raw.split(":")
        if all(p.isdigit() for p in parts):
            return "#" + ":".join([str(int(parts[0]))] + [p.zfill(2) for p in parts[1:]])
        raw = parts[0]
    if raw.count(".") == 1:
        head, tail = raw.split(".")
        tail = tail.rstrip("0")
        head = head.lstrip("0") or "0"
        return "#" + (head + "." + tail if tail else head)
    if "." in raw:  # version number: keep verbatim
        return "#" + raw
    return "#" + (raw.lstrip("0") or "0")


@lru_cache(maxsize=65536)
def word_tokens(word: str) -> tuple[str, ...]:
    """Normalised tokens of one Latin word: camelCase split, stopwords dropped, months/numbers folded."""
    parts = [word]
    if not word.islower() and not word.isupper():
        split = _CAMEL_RE.findall(word)
        if all(len(p) >= 3 for p in split):  # "OutdoorSeating" splits, "WiFi" and "iPhone" stay whole
            parts = split
            if "Take" in parts and "Out" in parts:  # one word in prose ("takeout", "take-out")
                i = parts.index("Take")
                if parts[i + 1 : i + 2] == ["Out"]:
                    parts[i : i + 2] = ["takeout"]
    out = []
    for part in parts:
        low = part.lower().replace("’", "'")
        if low in STOPWORDS or len(low) == 1:
            continue
        if low in NUMBER_WORDS:
            out.append("#" + NUMBER_WORDS[low])
            continue
        low = MONTHS.get(low, low)
        out.append(stem(low))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class NumberMention:
    """A number with the unit that qualifies it (``None`` when bare); ``value`` is its ``#`` token."""

    value: str
    unit: str | None


#: Mentions are immutable and repeat (years, small counts): one instance per (value, unit).
_mention = lru_cache(maxsize=65536)(NumberMention)


# -------------------------------------------------------------------------------- negation and hedges
# English cues are recognised word by word during the one tokenising pass (a set lookup per word is far
# cheaper than a case-insensitive alternation regex over the whole text); Chinese cues use small regexes.

_NEG_WORDS = wordset(
    "not no never none nobody nothing neither without cannot lack lacks lacking absent avoid avoids avoiding"
)
#: Strong hedges: the context says something is expected, planned or estimated, not that it happened.
_STRONG_WORDS = wordset(
    "expected expects estimated estimates projected forecast anticipated predicted reportedly allegedly rumored "
    "rumoured planned"
)
_STRONG_PAIRS = frozenset(
    {("plans", "to"), ("plan", "to"), ("scheduled", "to"), ("scheduled", "for"), ("poised", "to")}
)
#: Modal hedges: possibility rather than fact ("may", 可能). Weaker: writers paraphrase "may" as "can".
_MODAL_WORDS = wordset("may might could possibly possible probably potentially perhaps likely unlikely")
#: Approximators that soften the number after them: "about 30", "more than 5", "约30", "30左右".
_APPROX_WORDS = wordset("about around approximately roughly nearly almost some over under upwards")
_APPROX_PAIRS = frozenset(
    {
        ("close", "to"),
        ("more", "than"),
        ("less", "than"),
        ("fewer", "than"),
        ("at", "least"),
        ("at", "most"),
        ("an", "estimated"),
        ("up", "to"),
    }
)
_APPROX_NOUNS = wordset("a an one two three four five six seven eight nine ten half few dozen")

_NEG_ZH_RE = re.compile(r"不|没有|没|未|非|无|勿|否")
#: Frequent compounds in which the character does not negate ("不断", "非常", "无论", "未来" …).
_NEG_ZH_FALSE = re.compile(
    r"不仅|不断|不过|不少|不同|不久|不错|不论|不管|不得不|不但|无论|无数|无线|无人机|非常|非洲|未来"
    r"|是否|否则|能否|可否|与否|差不多|不得|毫无疑问"
)
_STRONG_ZH_RE = re.compile(r"预计|或将|有望|预期|预测|估计|据称|据报道|拟于|拟将|计划于|计划将")
_MODAL_ZH_RE = re.compile(r"可能|或许|也许|大概")
_APPROX_ZH_RE = re.compile(r"(?:[约近逾超]|大约|多达|约为)\s?(\d[\d,.]*)|(\d[\d,.]*)[^\d，。,.]{0,3}左右")
_HAS_CJK_RE = re.compile(f"[{CJK_CHARS}]")

#: Cue classes of a word. ``_PAIR_END`` ("to", "for") is a strong hedge only after "plans", "scheduled" ….
_NONE, _NEG, _MODAL, _STRONG, _APPROX_NOUN, _PAIR_END = 0, 1, 2, 3, 4, 5


@lru_cache(maxsize=131072)
def _word_info(word: str) -> tuple[tuple[str, ...], int, str]:
    """Tokens of a raw word, its cue class and its lower-case form, memoised (words repeat a lot)."""
    if "." in word:  # "U.S." is "US"
        word = word.replace(".", "")
    low = word.lower()
    if low in _NEG_WORDS or low.endswith(("n't", "n’t")):
        cue = _NEG
    elif low in _MODAL_WORDS:
        cue = _MODAL
    elif low in _STRONG_WORDS:
        cue = _STRONG
    elif low in _APPROX_NOUNS:
        cue = _APPROX_NOUN
    elif low in ("to", "for"):
        cue = _PAIR_END
    else:
        cue = _NONE
    return word_tokens(word), cue, low


# --------------------------------------------------------------------------------------------- the scan

#: One token per match: a word, a number (optionally with a currency before and a unit after), a CJK run.
#: The alternatives start with disjoint characters, so their order changes no match; words, by far the most
#: frequent, come first because the engine tries the alternatives in order at every position.
_WORD_PATTERN = r"[A-Za-z]+(?:['’][A-Za-z]+)*(?:\.(?<=\b[A-Za-z]\.)(?:[A-Za-z]\.)+)?"  # "U.S." is one word
_SCAN_RE = re.compile(
    rf"({_WORD_PATTERN})"
    r"|([$€£])?[ ]?(\d+(?:[.,:]\d+)*)(?:[ \t-]?(?i:(" + UNIT_ALT + r"))(?![A-Za-z]))?"
    rf"|([{CJK_CHARS}]+)"
)
#: Without a digit or a CJK character only the word alternative of ``_SCAN_RE`` can match.
_WORD_RE = re.compile(_WORD_PATTERN)
_NOT_WORDS_ONLY_RE = re.compile(rf"[\d{CJK_CHARS}]")
#: Hyphenated spellings that are one word elsewhere ("Wi-Fi" = "WiFi", "e-mail" = "email").
_HYPHEN_COMPOUND_RE = re.compile(r"\b(wi-fi|e-mail|on-line|web-site|take-out|check-in|check-out)\b", re.IGNORECASE)
#: The letters around the hyphen of every compound above (same case rules): texts without them skip the
#: substitution, whose alternation is tried at every position (most hyphens are "well-known").
_HYPHEN_HINT_RE = re.compile(r"-(?<=[ienbk]-)[fmlsoi]", re.IGNORECASE)


def _join_compound(m: re.Match[str]) -> str:
    """Same length out as in, so offsets stay offsets into the original text."""
    word = m.group().replace("-", "")
    return word + " "


def _word_before(text: str, pos: int, lo: int) -> bool:
    """Whether only spaces separate ``pos`` from the word before it (looking no further back than ``lo``)."""
    k = pos
    while k > lo and text[k - 1] == " ":
        k -= 1
    return k > lo and text[k - 1].isalpha()


def _blank(m: re.Match[str]) -> str:
    return "\u3000" * len(m.group())


def _join_compounds(text: str) -> str:
    """``text`` with hyphenated compounds joined ("Wi-Fi" → "WiFi "): same length, so offsets still hold."""
    if "-" not in text or _HYPHEN_HINT_RE.search(text) is None:
        return text
    return _HYPHEN_COMPOUND_RE.sub(_join_compound, text)


@dataclass(slots=True)
class Scan:
    """What one pass over a text found: content tokens, numbers with units, negation and hedge cues.

    ``positions`` (offsets of tokens) and ``negations`` (offsets of negators) are filled only when asked
    for; the counts and flags always are.
    """

    tokens: list[str]
    numbers: list[NumberMention]
    negation_count: int
    strong: bool
    modal: bool
    approx: bool
    approx_numbers: set[str]
    positions: list[int] | None = None
    negations: list[int] | None = None
    ranged: bool = False


def scan(text: str, positions: bool = False) -> Scan:
    """Tokens, numbers and cues of ``text`` in a single tokenising pass.

    Tokens: English stems (stopwords dropped, camelCase split, months and small number words folded), CJK
    character bigrams (a lone character stays a unigram; bigrams of two function characters are
    dropped), one ``#`` token per number. A unit after a number is both recorded in its mention and
    tokenised like any other word, so "3 km" still matches "3 kilometres" by value.
    """
    sc = _scan_range(_join_compounds(text), 0, len(text), positions)
    if _HAS_CJK_RE.search(text):
        _add_cjk_cues(sc, text)
    return sc


def scan_spans(text: str, spans: Sequence[tuple[int, int]]) -> list[Scan]:
    """A scan of each ``(start, end)`` span of ``text``, each exactly as if that span stood alone.

    The judge's hottest path (a dozen sentences per chunk, five chunks per sample), so the passage is
    prepared once — compounds joined, the CJK test — and each span is read as a range of it, never a
    slice. The caller's spans must start after whitespace or a terminator (sentence spans do), so the
    tokeniser's look-behinds see the same non-word character there as at the start of a slice: the same
    tokens and cues as scanning each span's own text (``tests/test_judge_text.py`` checks it).
    """
    work = _join_compounds(text)
    has_cjk = _HAS_CJK_RE.search(text) is not None
    scans = []
    for s, e in spans:
        sc = _scan_range(work, s, e, False)
        if has_cjk and _HAS_CJK_RE.search(text, s, e):
            _add_cjk_cues(sc, text[s:e])
        scans.append(sc)
    return scans


def _scan_range(work: str, lo: int, hi: int, positions: bool) -> Scan:
    """The tokenising pass over ``work[lo:hi]`` (compounds already joined), read exactly as that slice.

    Offsets are into ``work``. The regex runs with ``pos``/``endpos`` and every look around the match is
    bounded by ``lo``/``hi``, so a passage's sentences are scanned without slicing it (see
    :func:`scan_spans`); Chinese cues are added by :func:`_add_cjk_cues`.
    """
    if not positions and _NOT_WORDS_ONLY_RE.search(work, lo, hi) is None:
        words_only = _scan_words(work, lo, hi)
        if words_only is not None:
            return words_only
    tokens: list[str] = []
    append = tokens.append
    extend = tokens.extend
    mentions: list[NumberMention] = []
    approx_numbers: set[str] = set()
    pos_list: list[int] | None = [] if positions else None
    neg_list: list[int] | None = [] if positions else None
    negs = 0
    strong = modal = approx = ranged = False
    prev1 = prev2 = prev_num = ""
    for m in _SCAN_RE.finditer(work, lo, hi):
        word = m[1]  # the common case first, without unpacking every group
        if word is not None:
            toks, cue, low = _word_info(word)
            if cue:
                if cue == _NEG:
                    if low != "no" or not work.startswith("-", m.end(), hi):  # "no-fly list" negates nothing
                        negs += 1
                        if neg_list is not None:
                            neg_list.append(m.start())
                elif cue == _MODAL:
                    modal = True
                elif cue == _STRONG:
                    strong = True
                elif cue == _APPROX_NOUN:
                    if prev1 in _APPROX_WORDS:  # "about an hour", "around half"
                        approx = True
                elif (prev1, low) in _STRONG_PAIRS and prev2 != "you":  # not "if you plan to"
                    strong = True
            if pos_list is not None:
                pos_list.extend([m.start()] * len(toks))
            extend(toks)
            prev2, prev1 = prev1, low
            continue
        _, cur, num, unit, cjk = m.groups()
        if num is not None:
            before = len(tokens)
            start = m.start()
            # an approximator right before the number ("about 30", not 'blog about "100 Days"')
            approximated = (prev1 in _APPROX_WORDS or (prev2, prev1) in _APPROX_PAIRS) and _word_before(work, start, lo)
            approx = approx or approximated
            # "6 to 8 minutes", "4-6": a range is itself imprecise (but "2022-01-18" is a date)
            hyphen_range = prev1 == "#" and start - lo > 1 and work[start - 1] in "-–" and work[start - 2].isdigit()
            ranged = ranged or (hyphen_range and num[0] != "0" != prev_num[0]) or (prev1 == "to" and prev2 == "#")
            prev_num = num
            if ":" in num and "." in num.split(":", 1)[0]:
                pieces = num.split(".", 1)  # "2012.12:01": a date run into a time
            else:
                pieces = num.split(",") if "," in num and not _THOUSANDS_RE.match(num) else (num,)
            norm_unit = UNITS.get(unit.lower()) if unit else None
            if norm_unit == "time":  # "5:30 pm" is "17:30", as a 24-hour clock (or a JSON record) writes it
                pieces = (*pieces[:-1], _clock(pieces[-1], unit))
                norm_unit = unit = None
            if norm_unit == "year" and unit == "年" and len(num) == 4:
                norm_unit = None  # "2019年" is a date, not a duration
            if cur:  # "$5 million" is "usd million": a currency never hides the scale word after it
                norm_unit = UNITS[cur] + (" " + norm_unit if norm_unit in SCALES else "")
            last = len(pieces) - 1
            for i, piece in enumerate(pieces):
                if piece:
                    value = _number_token(piece)
                    append(value)
                    mentions.append(_mention(value, norm_unit if i == last else None))
                    if approximated:
                        approx_numbers.add(value)
            if unit:
                if unit[0].isascii():
                    extend(word_tokens(unit))
                elif unit not in CJK_FUNCTION:
                    append(unit)
            if pos_list is not None:
                pos_list.extend([start] * (len(tokens) - before))
            prev2, prev1 = prev1, "#"
        else:
            n = len(cjk)
            start = m.start()
            if n == 1:
                if cjk not in CJK_FUNCTION:
                    append(cjk)
                    if pos_list is not None:
                        pos_list.append(start)
            else:
                for i in range(n - 1):
                    a, b = cjk[i], cjk[i + 1]
                    if a not in CJK_FUNCTION or b not in CJK_FUNCTION:
                        append(a + b)
                        if pos_list is not None:
                            pos_list.append(start + i)  # each bigram at its own offset (negation scopes)
            prev2, prev1 = prev1, ""
    return Scan(tokens, mentions, negs, strong, modal, approx, approx_numbers, pos_list, neg_list, ranged)


_TOKS, _CUE = operator.itemgetter(0), operator.itemgetter(1)


def _scan_words(work: str, lo: int, hi: int) -> Scan | None:
    """:func:`_scan_range` of a range that holds words only (no digit, no CJK character), about three times
    faster: the words are looked up in bulk and only the few that carry a cue are visited, with the same
    rules. ``None`` (let the full pass decide) when a "no" may open a compound such as "no-fly"."""
    infos = list(map(_word_info, _WORD_RE.findall(work, lo, hi)))
    tokens = list(itertools.chain.from_iterable(map(_TOKS, infos)))
    cues = list(map(_CUE, infos))
    negs = 0
    strong = modal = approx = False
    for k in itertools.compress(range(len(cues)), cues):
        cue = cues[k]
        if cue == _NEG:
            if infos[k][2] == "no" and work.find("-", lo, hi) >= 0:
                return None
            negs += 1
        elif cue == _MODAL:
            modal = True
        elif cue == _STRONG:
            strong = True
        elif cue == _APPROX_NOUN:
            approx = approx or (k > 0 and infos[k - 1][2] in _APPROX_WORDS)
        elif k > 0 and (infos[k - 1][2], infos[k][2]) in _STRONG_PAIRS and (k < 2 or infos[k - 2][2] != "you"):
            strong = True
    return Scan(tokens, [], negs, strong, modal, approx, set())


def _add_cjk_cues(sc: Scan, text: str) -> None:
    """Chinese negators and hedges of ``text`` (the text :func:`_scan_range` read), added to its scan."""
    if sc.negations is not None:
        sc.negations.extend(m.start() for m in _NEG_ZH_RE.finditer(_NEG_ZH_FALSE.sub(_blank, text)))
        sc.negations.sort()
        sc.negation_count = len(sc.negations)
    else:
        sc.negation_count += len(_NEG_ZH_RE.findall(_NEG_ZH_FALSE.sub(_blank, text)))
    sc.strong = sc.strong or _STRONG_ZH_RE.search(text) is not None
    sc.modal = sc.modal or _MODAL_ZH_RE.search(text) is not None
    for m in _APPROX_ZH_RE.finditer(text):
        sc.approx = True
        raw = (m.group(1) or m.group(2)).rstrip(".,")
        sc.approx_numbers.update(t for t in scan(raw).tokens if t[0] == "#")
