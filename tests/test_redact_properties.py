"""Property tests: every built-in pattern masks every well-formed instance, wherever it sits in text.

Each strategy builds valid instances of one kind of secret (check digits computed, not copied from a list),
puts them between random Chinese/English words, and asserts nothing of the secret survives redaction.
"""

from __future__ import annotations

import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from ragwatch.sampling.redact import Redactor

REDACT = Redactor()
WORDS = st.text(alphabet="的是了在我有他这 ，。abcxyzQRS", max_size=20)
DIGITS = "0123456789"


def around(secret: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str]]:
    """(text, secret): the secret with random words (and a separating space or CJK comma) on each side."""
    return st.tuples(WORDS, st.sampled_from([" ", "，", "："]), secret, st.sampled_from([" ", "，", "。"]), WORDS).map(
        lambda t: ("".join(t), t[2])
    )


def luhn_complete(body: str) -> str:
    total = 0
    for index, char in enumerate(reversed(body)):
        digit = int(char)
        if index % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return body + str((10 - total % 10) % 10)


def assert_masked(text: str, secret: str, name: str) -> None:
    out = REDACT(text)
    assert secret not in out, (text, out)
    assert f"[{name}]" in out, (text, out)


ascii_local = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._+", min_size=1, max_size=12).filter(
    lambda s: s[0] not in "._+" and s[-1] not in "._+"
)
label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=10)
intl_label = st.text(alphabet="abcdéüößçñбвгдежпримерαβγ", min_size=1, max_size=10)


@settings(max_examples=200)
@given(
    around(
        st.tuples(ascii_local, st.sampled_from(["@", "＠"]), label, st.sampled_from(["com", "cn", "org"])).map(
            lambda t: f"{t[0]}{t[1]}{t[2]}.{t[3]}"
        )
    )
)
def test_email_ascii_and_fullwidth_at(case: tuple[str, str]) -> None:
    assert_masked(*case, "email")


@settings(max_examples=200)
@given(
    around(
        st.tuples(intl_label, intl_label, st.sampled_from(["de", "рф", "ελ", "xn--p1ai"])).map(
            lambda t: f"{t[0]}@{t[1]}.{t[2]}"
        )
    )
)
def test_email_internationalised(case: tuple[str, str]) -> None:
    assert_masked(*case, "email")


@settings(max_examples=200)
@given(
    around(
        st.one_of(
            st.tuples(
                st.sampled_from(["sk-", "sk-proj-", "sk-ant-api03-"]),
                st.text(alphabet="ABCDEFabcdef0123456789_-", min_size=20, max_size=60),
            ).map("".join),
            st.tuples(
                st.sampled_from(["AKIA", "ASIA"]),
                st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16),
            ).map("".join),
            st.text(alphabet="ABCabc0123456789", min_size=36, max_size=36).map(lambda s: "ghp_" + s),
        )
    )
)
def test_api_keys(case: tuple[str, str]) -> None:
    assert_masked(*case, "api_key")


b64url = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", min_size=8, max_size=80)


@settings(max_examples=200)
@given(around(st.tuples(b64url, b64url, b64url).map(lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}")))
def test_jwt(case: tuple[str, str]) -> None:
    assert_masked(*case, "jwt")


JWT_PIECES = ["eyJ", "eyJhbGci", "abcde", ".", "..", "-", "_", " ", "x", "0123", "é", "\n", "eyJabcde.eyJabcde."]


@settings(max_examples=500)
@given(st.lists(st.sampled_from(JWT_PIECES), max_size=30).map("".join))
def test_jwt_scan_masks_exactly_what_the_pattern_matches(text: str) -> None:
    # the scan that skips failed runs (linear) against the engine trying every start (quadratic)
    from ragwatch.sampling.redact import _PATTERNS, _sub_jwt

    pattern = _PATTERNS["jwt"]
    assert _sub_jwt(pattern, "[jwt]", text) == pattern.subn("[jwt]", text)
    assert _sub_jwt(pattern, r"<\g<0>>", text) == pattern.subn(r"<\g<0>>", text)


def test_a_token_after_a_long_hostile_run_is_still_masked() -> None:
    # 30,000 "eyJ" (once 0.4 s of backtracking per redaction, on the request thread for exception messages),
    # then a real token glued to the run's end: it belongs to the run and is masked with it from its first
    # possible start, as the pattern says
    token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl"
    redact = Redactor(["jwt"])
    out = redact("eyJ" * 30_000 + " then " + token + " end")
    assert out == "eyJ" * 30_000 + " then [jwt] end"
    glued = redact("eyJ" * 30_000 + token)
    assert "eyJzdWIiOiIxMjM0In0" not in glued and glued.endswith("[jwt]")
    assert redact.counts()["jwt"] == 2


@settings(max_examples=200)
@given(
    WORDS,
    st.sampled_from(["password", "Password", "PASSWORD", "passwd", "pwd", "passphrase", "secret", "密码", "口令"]),
    st.sampled_from([": ", "=", "：", " = "]),
    st.text(alphabet="ABCxyz0123456789!#$%^&*()[]{}<>?/~", min_size=6, max_size=30),
)
def test_password_in_text(words: str, key: str, sep: str, value: str) -> None:
    out = REDACT(f"{words} {key}{sep}{value} 谢谢")
    assert value not in out
    assert f"{key}{sep}[password]" in out


@settings(max_examples=200)
@given(
    around(
        st.tuples(
            st.integers(1, 899).filter(lambda a: a != 666),
            st.integers(1, 99),
            st.integers(1, 9999),
            st.sampled_from("- "),
        ).map(lambda t: f"{t[0]:03d}{t[3]}{t[1]:02d}{t[3]}{t[2]:04d}")
    )
)
def test_us_ssn(case: tuple[str, str]) -> None:
    assert_masked(*case, "us_ssn")


def iban(country: str, bban: str) -> str:
    rotated = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in rotated)) % 97
    return f"{country}{check:02d}{bban}"


@settings(max_examples=200)
@given(
    st.tuples(
        st.sampled_from(["DE", "GB", "FR", "NL", "ES", "IT"]),
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=0, max_size=4),
        st.text(alphabet=DIGITS, min_size=14, max_size=22),
        st.booleans(),
    ),
    WORDS,
)
def test_iban(parts: tuple[str, str, str, bool], words: str) -> None:
    country, letters, digits, grouped = parts
    compact = iban(country, letters + digits)
    written = " ".join(compact[i : i + 4] for i in range(0, len(compact), 4)) if grouped else compact
    out = REDACT(f"{words} IBAN {written} 谢谢")
    assert digits not in out and written not in out, out
    assert "[iban]" in out, out


@settings(max_examples=200)
@given(
    around(
        st.tuples(
            st.integers(200, 999),
            st.integers(200, 999),
            st.integers(0, 9999),
            st.sampled_from(
                ["({a}) {e}-{n}", "{a}-{e}-{n}", "{a}.{e}.{n}", "1-{a}-{e}-{n}", "1 ({a}) {e}-{n}", "{a} {e} {n}"]
            ),
        ).map(lambda t: t[3].format(a=t[0], e=t[1], n=f"{t[2]:04d}"))
    )
)
def test_us_phone(case: tuple[str, str]) -> None:
    out = REDACT(case[0])
    assert case[1] not in out and "[us_phone]" in out, out


@settings(max_examples=200)
@given(around(st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))))
def test_ipv4(case: tuple[str, str]) -> None:
    assert_masked(*case, "ipv4")


@settings(max_examples=200)
@given(WORDS, st.text(alphabet=DIGITS, min_size=12, max_size=12), st.text(alphabet=DIGITS, min_size=14, max_size=14))
def test_amex_and_dotted_cards(words: str, amex_body: str, visa_body: str) -> None:
    amex = luhn_complete("37" + amex_body)  # 15 digits, written 4-6-5
    visa = luhn_complete("4" + visa_body)  # 16 digits, written with dots
    amex_written = f"{amex[:4]} {amex[4:10]} {amex[10:]}"
    visa_written = ".".join(visa[i : i + 4] for i in range(0, 16, 4))
    out = REDACT(f"{words} 卡号 {amex_written}，or {visa_written}。")
    assert amex_written not in out and visa_written not in out, out
    assert out.count("[bank_card]") == 2, out


@settings(max_examples=200)
@given(
    around(
        st.tuples(
            st.integers(1, 8),
            st.text(alphabet=DIGITS, min_size=5, max_size=5),
            st.dates(datetime.date(1900, 1, 1), datetime.date(1999, 12, 31)),
            st.text(alphabet=DIGITS, min_size=3, max_size=3),
        ).map(lambda t: f"{t[0]}{t[1]}{t[2]:%y%m%d}{t[3]}")
    )
)
def test_cn_id_15_digits(case: tuple[str, str]) -> None:
    assert_masked(*case, "cn_id")
