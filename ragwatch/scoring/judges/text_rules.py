"""The rule helpers of the offline judge built on one scan of a text: negation scope and reach, hedges,
named-entity tokens, the polarity of structured (JSON) values.

They answer the questions the judge's hard rules ask (does this negation govern that word, is this number
only approximated, does this record say "no" to WiFi), on top of the tokens and cues of
:func:`ragwatch.scoring.judges.text_scan.scan`; the tokenising itself stays in :mod:`ragwatch.scoring.judges.text_scan`.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from ragwatch.scoring.judges.text_scan import scan, word_tokens

__all__ = [
    "approximated_numbers",
    "entity_tokens",
    "hedge_count",
    "json_polarity",
    "modal_hedge",
    "negation_count",
    "negation_reach",
    "negation_scopes",
    "number_hedged",
    "strong_hedge",
]

# -------------------------------------------------------------------------------------------- negation

#: A negation governs its own clause: punctuation or a conjunction that starts another clause ends it.
_SCOPE_END_RE = re.compile(
    r"[,.;:!?，。；：！？()（）]|\b(?:but|while|whereas|because|although|though|which|so|yet)\b|但|却"
)
#: "as" ends a scope only after it governed a word: "not physically connected as they are discrete" (but
#: "not as big as" keeps "big").
_SCOPE_AS_RE = re.compile(r"\bas\b")


def negation_count(text: str) -> int:
    """How many negators ``text`` contains (English and Chinese)."""
    return scan(text).negation_count


def negation_scopes(text: str) -> list[set[str]]:
    """For each negator, the content tokens it governs (up to four, within its clause) that ``text`` does not
    also state un-negated.

    Comparing parities of whole sentences misfires on "bake until dry but not toasted" against "bake until
    dry": the negation there is about a word the claim never mentions. The judge only counts negators whose
    scope shares a token with the other side. A word the text also says plainly is no negated fact either:
    "amino acids can be made by the body, while others cannot be made by the body".
    """
    sc = scan(text, positions=True)
    assert sc.positions is not None and sc.negations is not None
    positions, tokens = sc.positions, sc.tokens
    scopes = []
    inside: set[int] = set()
    for pos in sc.negations:
        cut = _SCOPE_END_RE.search(text, pos, pos + 40)
        stop = cut.start() if cut else pos + 40
        after_as = _SCOPE_AS_RE.search(text, pos, stop)
        i = bisect_right(positions, pos)
        scope: set[str] = set()
        while i < len(positions) and positions[i] < stop and len(scope) < 4:
            if after_as and positions[i] > after_as.start() and scope:
                break
            scope.add(tokens[i])
            inside.add(i)
            i += 1
        scopes.append(scope)
    if not scopes:
        return scopes
    plain = {t for i, t in enumerate(tokens) if i not in inside}
    return [scope - plain for scope in scopes]


#: A negated copula also negates its subject: "WiFi is not available".
_COPULA_NEG_RE = re.compile(
    r"\b(?:is|are|was|were)(?: currently| also| still)? (?=not\b)|\b(?:isn|aren|wasn|weren)(?=['’]t\b)"
)
#: What ends the reach of a negation over a list: the sentence, or a contrast.
_REACH_END_RE = re.compile(r"[.;!?。；！？]|\b(?:but|while|whereas|although|though|however|yet|instead)\b")


def negation_reach(text: str) -> tuple[set[str], set[str]]:
    """Tokens ``text`` negates, and tokens whose polarity it leaves unclear.

    Negated: a negator's scope (:func:`negation_scopes`) and the subject of a negated copula ("WiFi is not
    available"). Unclear: the rest of the sentence after a negator, up to a contrast ("no WiFi,
    reservations or music" negates all three; "does not take reservations, offers outdoor seating" only
    the first) — a checker should not decide on those.
    """
    sc = scan(text, positions=True)
    assert sc.positions is not None and sc.negations is not None
    if not sc.negations:
        return set(), set()
    positions, tokens = sc.positions, sc.tokens
    negated: set[str] = set().union(*negation_scopes(text))
    unclear: set[str] = set()
    for pos in sc.negations:
        end = _REACH_END_RE.search(text, pos)
        stop = end.start() if end else len(text)
        i = bisect_right(positions, pos)
        while i < len(positions) and positions[i] < stop:
            unclear.add(tokens[i])
            i += 1
        copulas = list(_COPULA_NEG_RE.finditer(text, max(0, pos - 30), pos + 8))
        cop = copulas[-1] if copulas else None
        if cop is not None and cop.end() >= pos - 1:
            # the subject: a short clause before the copula is all subject ("valet and garage parking options
            # are not available"), in a longer one only its last two words surely are; what comes before a
            # comma may be a list the negation also covers ("street parking, lot parking and valet are not")
            start = max(text.rfind(".", 0, cop.start()), text.rfind(";", 0, cop.start()))
            comma = text.rfind(",", max(start, 0), cop.start())
            before = [tokens[k] for k, p in enumerate(positions) if start < p < max(comma, start + 1)]
            subject = [tokens[k] for k, p in enumerate(positions) if max(comma, start) < p < cop.start()]
            unclear.update(before)
            if len(subject) <= 4:
                negated.update(subject)
            else:
                negated.update(subject[-2:])
                unclear.update(subject[:-2])
    return negated, unclear - negated


# ---------------------------------------------------------------------------------------------- hedges


def hedge_count(text: str) -> int:
    """Kinds of hedge present in ``text`` (0..3): strong, modal, number approximator."""
    sc = scan(text)
    return int(sc.strong) + int(sc.modal) + int(sc.approx)


def strong_hedge(text: str) -> bool:
    """Whether ``text`` reports an expectation or estimate ("expected", "预计", "或将") rather than a fact."""
    return scan(text).strong


def modal_hedge(text: str) -> bool:
    """Whether ``text`` states a possibility ("may", "could", "可能")."""
    return scan(text).modal


def approximated_numbers(text: str) -> set[str]:
    """Number tokens that ``text`` softens with an approximator ("about 30" → ``#30``; "约1200万" → ``#1200``)."""
    return scan(text).approx_numbers


def number_hedged(text: str) -> bool:
    """Whether ``text`` approximates a quantity ("about 30", "about an hour", "约30", "30左右")."""
    return scan(text).approx


# -------------------------------------------------------------------------------------------- entities

_ENTITY_RE = re.compile(r"(?<![.!?。！？]\s)(?<!^)\b[A-Z][a-zA-Z]+\b|\b[A-Z]{2,}\b")


#: Capitalised words that name a unit, not an entity ("58 degrees Fahrenheit").
_NOT_ENTITIES = frozenset({"fahrenheit", "celsius", "kelvin"})


def entity_tokens(text: str) -> set[str]:
    """Normalised tokens of capitalised words that are not sentence-initial: a cheap named-entity proxy."""
    out: set[str] = set()
    for m in _ENTITY_RE.finditer(text):
        out.update(word_tokens(m.group()))
    return out - _NOT_ENTITIES


# ------------------------------------------------------------------------------------ structured data

_JSON_PAIR_RE = re.compile(r'"([A-Za-z][A-Za-z0-9_ ]{0,40})"\s*:\s*(true|false|null|"[^"\n]{0,40}"|[{\[\d-])')
_KEY_SPLIT_RE = re.compile(r"[_\s]+")
_NEGATIVE_VALUES = frozenset({"no", "none", "false", "n/a", "", "0"})
#: A string value that reads as a setting ("free", "no", "u'beer_and_wine'"), not as a name or a date.
_SETTING_VALUE_RE = re.compile(r"^(?:u?')?([a-z_/]{0,20})'?$")
#: Key words that only say which record a key belongs to ("RestaurantsTakeOut" is about take-out).
_KEY_PREFIXES = frozenset({"restaurant", "business"})


def json_polarity(text: str) -> tuple[dict[tuple[str, ...], int], str]:
    """Polarity of the keys of JSON objects in ``text``, and ``text`` with those keys blanked out.

    Structured chunks (a product record, a business listing) state facts as ``"WiFi": "no"`` or
    ``"OutdoorSeating": false``; an answer saying "offers WiFi" mentions the key and so *looks* supported to a
    lexical judge. Each key is the tuple of its word tokens (less a record prefix such as "Restaurants"), so
    a claim must name the whole key ("outdoor seating", not just "seating") to be checked against it.
    Polarity: +1 (true or a setting such as "free"), -1 (false, "no", "none"), 0 (null: not known —
    asserting either way is unsupported). Names, addresses, numbers, nested objects and lists give no
    polarity. A key seen with different polarities is dropped, it cannot decide anything.
    """
    if '":' not in text and '" :' not in text:
        return {}, text
    polarity: dict[tuple[str, ...], int] = {}
    mixed: set[tuple[str, ...]] = set()
    pieces = []
    pos = 0
    for m in _JSON_PAIR_RE.finditer(text):
        key, value = m.group(1), m.group(2)
        pieces.append(text[pos : m.start(1)])
        pieces.append(" " * len(key))
        pos = m.end(1)
        if value == "null":
            pol = 0
        elif value == "true":
            pol = 1
        elif value == "false":
            pol = -1
        elif value[0] == '"' and (setting := _SETTING_VALUE_RE.match(value.strip('"').strip())) is not None:
            pol = -1 if setting.group(1) in _NEGATIVE_VALUES else 1
        else:
            continue
        toks = tuple(t for part in _KEY_SPLIT_RE.split(key) for t in word_tokens(part) if t not in _KEY_PREFIXES)
        if not toks:
            continue
        if toks in polarity and polarity[toks] != pol:
            mixed.add(toks)
        polarity[toks] = pol
    pieces.append(text[pos:])
    for toks in mixed:
        polarity.pop(toks, None)
    return polarity, "".join(pieces)
