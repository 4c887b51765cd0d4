"""What every redaction pattern is made of: a regex, an optional cheap gate, an optional check, and how a match
is masked.

Apart from :mod:`ragwatch.sampling.redact` (the :class:`~ragwatch.sampling.redact.Redactor` and the first
patterns) so the pattern families added since — provider tokens in :mod:`~ragwatch.sampling.redact_secrets`,
identity numbers, national phone formats and addresses in :mod:`~ragwatch.sampling.redact_ids` — are each a
table of :class:`Kind` rows the redactor reads, not more branches in it.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Kind", "masker", "valid_cn_id"]


@dataclass(frozen=True, slots=True)
class Kind:
    """One pattern of a redaction family.

    ``name`` is the built-in pattern it counts under and is switched with (``redact=``); several kinds may
    share a name (every provider token is an ``api_key``). ``gate`` is a cheap test a text must pass before
    the regex runs (None: the regex, led by a character class the engine skips to in C, is its own gate).
    ``valid`` checks what would be masked (a check digit); a pattern with a ``value`` group masks only that
    group and keeps the rest (``Bearer``, ``my password is``) so a reader knows what was there.
    """

    name: str
    pattern: re.Pattern[str]
    gate: Callable[[str], bool] | None = None
    valid: Callable[[str], bool] | None = None


def masker(
    pattern: re.Pattern[str], replacement: str, valid: Callable[[str], bool] | None = None
) -> Callable[[str], tuple[str, int]]:
    """``text -> (masked text, matches masked)`` for one pattern: the ``value`` group when the pattern has one,
    else the whole match, and only when ``valid`` accepts it. The replacement is inserted literally."""
    keyed = "value" in pattern.groupindex

    def sub(text: str) -> tuple[str, int]:
        hits = 0

        def replace(match: re.Match[str]) -> str:
            nonlocal hits
            start, end = match.span("value") if keyed else match.span()
            if valid is not None and not valid(text[start:end]):
                return match.group()
            hits += 1
            return text[match.start() : start] + replacement + text[end : match.end()]

        return pattern.sub(replace, text), hits

    return sub


_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def valid_cn_id(text: str) -> bool:
    """True for an 18-character PRC id whose birth date exists and whose check character matches, or a
    15-digit first-generation id (no check digit) whose region starts 1-8 and whose birth date exists."""
    if len(text) == 15:
        if int(text[0]) not in range(1, 9):
            return False
        try:
            datetime.date(1900 + int(text[6:8]), int(text[8:10]), int(text[10:12]))
        except ValueError:
            return False
        return True
    year = int(text[6:10])
    if not 1900 <= year <= 2099:
        return False
    try:
        datetime.date(year, int(text[10:12]), int(text[12:14]))
    except ValueError:  # month 13, Feb 30, ...
        return False
    total = 0
    for weight, char in zip(_CN_ID_WEIGHTS, text, strict=False):
        total += weight * int(char)
    last = text[17]
    # ISO 7064 MOD 11-2: the check value makes the weighted sum 1 mod 11 (10 is written X). Values, not
    # characters, are compared so a full-width check digit ("７") is as valid as "7".
    return (12 - total % 11) % 11 == (10 if last in "Xx" else int(last))
