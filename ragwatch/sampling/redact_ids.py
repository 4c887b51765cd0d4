"""Identity numbers, national phone formats, IPv6 and CJK-domain e-mail: the kinds found leaking in issue 29.

Each kind follows :mod:`ragwatch.sampling.redact`'s two principles — no false positives on ordinary numbers
(a check digit verified where the format has one, a keyword required where it has none), no ``\\b`` (Chinese
text runs words into numbers) — and its cost stays linear: every regex is led by a character class the
engine skips to in C, every repetition is bounded, and a start is refused in the middle of a run.

* ``passport``: the number after "passport (no.)" or "护照(号码)" — CN (E/G + 8 digits, E + letter + 7), US (9
  digits, or a letter + 8), and any 6-9 character number with at least five digits. Without the keyword a
  passport number is indistinguishable from a part number, so it is not masked.
* ``hk_id`` (``A123456(7)``, check digit mod 11), ``tw_id`` (``A123456789``, check digit of the letter code),
  ``uk_nino`` (``AB 12 34 56 C``, the never-issued prefixes refused), ``fr_nir`` (numéro de sécurité sociale,
  15 digits, key = 97 − n mod 97, Corsica's 2A/2B read).
* ``phone`` (more formats): ``+44 (0)20 7946 0958`` (a trunk zero in brackets), ``0049 30 1234567`` (the
  00 international prefix, with a separator), mainland landlines ``010-62345678`` / ``(0755) 1234567``,
  UK national ``020 7946 0958`` (11 digits, grouped), French ``01 23 45 67 89``.
* ``ipv6``: full and compressed forms, verified by :mod:`ipaddress` (so ``12:30:45`` or ``std::vector`` stay).
* ``email`` (more): a domain in CJK script with a CJK top-level domain (``zhang@例子.中国``) or an ASCII one; the
  local part stays Latin, so the Chinese words run into it are not swallowed.
"""

from __future__ import annotations

import ipaddress
import re

from ragwatch.sampling.redact_base import Kind, valid_cn_id

__all__ = ["ID_KINDS"]

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"

# -------------------------------------------------------------------------------------------- passports

_PASSPORT = re.compile(
    r"[pP\u62a4](?<![A-Za-z].)(?:(?<=[pP])(?i:assport)(?:[ \t]*(?i:no\.?|number|num\.?|#))?"
    r"|(?<=\u62a4)\u7167(?:\u53f7\u7801|\u53f7|\u865f\u78bc|\u865f)?)"
    r"(?:[ \t]*[:\uff1a#]?[ \t]*(?:(?i:is)[ \t]+)?|\u662f|\u4e3a)"
    r"(?P<value>(?=[A-Z0-9]*(?:[0-9][A-Z]?){5})[A-Z0-9]{6,9})(?![A-Za-z0-9])"
)

# ----------------------------------------------------------------------------------- regional id numbers

_HK_ID = re.compile(r"[A-Z](?<![A-Za-z0-9].)[A-Z]?[0-9]{6}(?:\([0-9A]\)|[0-9A])(?![A-Za-z0-9])")


def _valid_hk_id(text: str) -> bool:
    """Hong Kong identity card: letters A=10..Z=35 (a missing second letter is 36 at the front), weights
    9..2 over the eight characters before the check digit; check = 11 − sum mod 11 (10 is A, 11 is 0)."""
    body = text.replace("(", "").replace(")", "")
    check, body = body[-1], body[:-1]
    if len(body) == 7:
        body = " " + body
    values = [36 if c == " " else int(c, 36) for c in body]
    total = sum(v * w for v, w in zip(values, range(9, 1, -1), strict=True))
    expected = (11 - total % 11) % 11
    return ("A" if expected == 10 else str(expected)) == check


_TW_ID = re.compile(r"[A-Z](?<![A-Za-z0-9].)[1289][0-9]{8}(?![A-Za-z0-9])")
#: The two-digit code of each leading letter of a Taiwanese id (not alphabetical past H: I, O, W … came later).
_TW_CODES = dict(zip("ABCDEFGHJKLMNPQRSTUVXYWZIO", range(10, 36), strict=True))


def _valid_tw_id(text: str) -> bool:
    """Taiwan national id / resident certificate: the letter's code (two digits) and the nine digits,
    weighted 1, 9, 8 … 1, 1, sum to a multiple of 10."""
    code = _TW_CODES[text[0]]
    digits = [code // 10, code % 10, *map(int, text[1:])]
    return sum(d * w for d, w in zip(digits, (1, 9, 8, 7, 6, 5, 4, 3, 2, 1, 1), strict=True)) % 10 == 0


_UK_NINO = re.compile(
    r"[A-CEGHJ-PR-TW-Z](?<![A-Za-z0-9].)[A-CEGHJ-NPR-TW-Z](?:[ ]?[0-9]{2}){3}[ ]?[A-D](?![A-Za-z0-9])"
)


def _valid_nino(text: str) -> bool:
    """National Insurance number prefixes never issued (HMRC): BG, GB, NK, KN, TN, NT, ZZ."""
    return text[:2] not in ("BG", "GB", "NK", "KN", "TN", "NT", "ZZ")


_FR_NIR = re.compile(
    r"[12](?<![0-9].)[ ]?[0-9]{2}[ ]?(?:0[1-9]|1[0-2]|[2-9][0-9])[ ]?(?:[0-9]{2}|2[ABab])[ ]?[0-9]{3}[ ]?[0-9]{3}"
    r"[ ]?[0-9]{2}(?![0-9])"
)


def _valid_nir(text: str) -> bool:
    """French social security number: key (last two digits) = 97 − (first 13 mod 97), Corsica's départements
    2A and 2B read as 19 and 18 for the sum. Fifteen digits in one run that also read as a first-generation
    PRC id are left to ``cn_id`` (masked there; a NIR is usually written in groups)."""
    compact = text.replace(" ", "").upper()
    if compact == text and valid_cn_id(compact):  # unspaced, and a first-generation PRC id: cn_id's, not ours
        return False
    body = compact[:13].replace("2A", "19", 1) if compact[5:7] == "2A" else compact[:13]
    if compact[5:7] == "2B":
        body = compact[:5] + "18" + compact[7:13]
    return 97 - int(body) % 97 == int(compact[13:])


# ------------------------------------------------------------------------------------------------- phones

_D = "[0-9]"
#: "+44 (0)20 7946 0958": the trunk zero in brackets, then 6-13 more digits with single separators.
_PHONE_TRUNK = re.compile(rf"\+[1-9]{_D}{{0,2}}[ -]?\(0\)[ -]?{_D}(?:[ .-]?{_D}){{5,12}}(?!\d)")
#: "0049 30 1234567": the 00 international prefix and 8-13 digits; a separator is required (checked).
_PHONE_00 = re.compile(rf"0(?<!\d.)0[1-9](?:[ .-]?{_D}){{8,13}}(?!\d)")
#: Mainland landlines: area code 010, 02x or 0xxx, written with a dash, a space or brackets, then 7-8 digits.
_CN_LANDLINE = re.compile(
    rf"[0(](?<![0-9].)(?:(?<=\()0(?:10|2{_D}|[3-9]{_D}{{2}})\)[ -]?|(?<=0)(?:10|2{_D}|[3-9]{_D}{{2}})[ -])"
    rf"[2-9]{_D}{{6,7}}(?!\d)"
)
#: UK national numbers: 0 + 10 digits in two or three groups (02x xxxx xxxx, 01xxx xxxxxx, 07xxx xxxxxx).
_UK_NATIONAL = re.compile(rf"0(?<!\d.)[1-9]{_D}{{1,3}}[ -]{_D}{{3,4}}(?:[ -]?{_D}{{3,4}})?(?!\d)")
#: French national numbers: 0 + 9 digits in pairs, one separator kind throughout ("01 23 45 67 89").
_FR_NATIONAL = re.compile(rf"0(?<!\d.)[1-9](?P<sep>[ .-]){_D}{{2}}(?:(?P=sep){_D}{{2}}){{3}}(?!\d)")


def _has_separator(text: str) -> bool:
    return any(c in text for c in " .-")


def _valid_uk_national(text: str) -> bool:
    digits = sum(c.isdigit() for c in text)
    return digits == 11 and text[1] in "12378"


# --------------------------------------------------------------------------------------------------- IPv6

#: A run of hex digits, colons and (for an embedded IPv4 tail) dots, not ending in a sentence's dot.
_IPV6 = re.compile(r"[0-9A-Fa-f:](?<![0-9A-Za-z:.].)[0-9A-Fa-f:.]{1,44}(?<!\.)(?![0-9A-Za-z:])")
_IPV6_GATE = re.compile(r":[0-9A-Fa-f]{0,4}:")


def _valid_ipv6(text: str) -> bool:
    if text.count(":") < 2:
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------------- CJK-domain e-mail

_CJK_TLDS = (
    "中国|中國|公司|网络|網絡|香港|台湾|台灣|澳门|澳門|新加坡|在线|中文网|网址|网店|商城|商店|集团|我爱你|政务|公益|"
    "移动|手机|游戏|企业|娱乐|信息|广东|佛山|时尚|微博|健康|招聘|购物"
)
_LOCAL = "A-Za-z0-9._%+-"
#: A Latin local part, "@" (or a full-width "＠"), labels that may be CJK, a CJK or ASCII top-level domain.
_EMAIL_CJK = re.compile(
    rf"[{_LOCAL}](?<![{_LOCAL}].)[{_LOCAL}]{{0,63}}[@\uff20](?:[{_CJK}A-Za-z0-9-]{{1,63}}\.){{1,4}}"
    rf"(?:{_CJK_TLDS}|[A-Za-z]{{2,24}}(?![A-Za-z]))"
)
_HAS_CJK = re.compile(f"[{_CJK}]")


def _cjk_domain(text: str) -> bool:
    """Only addresses whose domain is in CJK script: the others are the first e-mail pattern's."""
    return _HAS_CJK.search(text, text.find("@") + 1 if "@" in text else text.find("\uff20") + 1) is not None


def _gate_email_cjk(text: str) -> bool:
    return ("@" in text or "\uff20" in text) and _HAS_CJK.search(text) is not None


ID_KINDS = (
    Kind("passport", _PASSPORT, lambda t: "assport" in t or "ASSPORT" in t or "\u62a4\u7167" in t),
    Kind("hk_id", _HK_ID, None, _valid_hk_id),
    Kind("tw_id", _TW_ID, None, _valid_tw_id),
    Kind("uk_nino", _UK_NINO, None, _valid_nino),
    Kind("fr_nir", _FR_NIR, None, _valid_nir),
    Kind("phone", _PHONE_TRUNK, lambda t: "(0)" in t),
    Kind("phone", _PHONE_00, None, _has_separator),
    Kind("phone", _CN_LANDLINE),
    Kind("phone", _FR_NATIONAL),
    Kind("phone", _UK_NATIONAL, None, _valid_uk_national),
    Kind("ipv6", _IPV6, lambda t: _IPV6_GATE.search(t) is not None, _valid_ipv6),
    Kind("email", _EMAIL_CJK, _gate_email_cjk, _cjk_domain),
)
