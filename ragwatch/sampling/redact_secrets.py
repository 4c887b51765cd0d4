"""Provider tokens and bearer credentials: the secret formats a credential scanner knows, as our own regexes.

The formats are those Yelp's ``detect-secrets`` and the providers themselves document (Slack, GitHub
fine-grained tokens, Stripe, Google API keys, GitLab, npm, PyPI, Hugging Face, SendGrid), written here as
anchored regexes rather than taken as a dependency: its plugins scan line by line with per-plugin entropy
heuristics, far slower than one gated regex per family on the flusher thread, and a service would install
its whole plugin machinery for a dozen fixed prefixes. Each kind is gated by a substring test of its prefix,
so prose without one costs a few ``in`` checks.

All count as ``api_key`` (one switch for "provider credentials"); ``Bearer …`` keeps its keyword.
"""

from __future__ import annotations

import re

from ragwatch.sampling.redact_base import Kind

__all__ = ["SECRET_KINDS"]

# Not preceded by a token character, checked after the first character (as the other patterns do, so the
# engine can skip to the leading character class in C).
_START = r"(?<![A-Za-z0-9_-].)"
_END = r"(?![A-Za-z0-9_-])"

_PROVIDER = re.compile(
    r"[xgsrAnph]" + _START + r"(?:"
    r"(?<=x)ox[abposr]-[0-9A-Za-z-]{10,}"  # Slack bot/user/app/refresh tokens: xoxb-, xoxp-, xoxa-, xoxs-
    r"|(?<=x)app-[0-9]-[0-9A-Za-z-]{10,}"  # Slack app-level tokens
    r"|(?<=g)ithub_pat_[0-9A-Za-z_]{22,}"  # GitHub fine-grained personal access tokens
    r"|(?<=g)l(?:pat|dt|rt|ptt|oas)-[0-9A-Za-z_-]{20,}"  # GitLab personal, deploy, runner, trigger tokens
    r"|(?<=[sr])k_(?:live|test)_[0-9A-Za-z]{16,}"  # Stripe secret and restricted keys
    r"|(?<=A)Iza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|(?<=n)pm_[0-9A-Za-z]{36}"  # npm access tokens
    r"|(?<=p)ypi-AgE[0-9A-Za-z_-]{50,}"  # PyPI API tokens (a macaroon)
    r"|(?<=h)f_[A-Za-z]{30,}"  # Hugging Face access tokens
    r")" + _END
)
_SENDGRID = re.compile(r"S(?<![A-Za-z0-9_-].)G\.[0-9A-Za-z_-]{22}\.[0-9A-Za-z_-]{43}" + _END)
#: "Authorization: Bearer <token>", "bearer <token>": the keyword stays, the credential goes.
_BEARER = re.compile(r"[Bb](?<![A-Za-z].)earer[ \t]+(?P<value>[A-Za-z0-9._~+/-]{8,}=*)")

#: A text holds a provider token only if it holds one of these (a substring test each, in C).
_PROVIDER_PREFIXES = (
    "xox", "xapp-", "github_pat_", "glpat-", "gldt-", "glrt-", "glptt-", "gloas-", "k_live_", "k_test_", "AIza",
    "npm_", "pypi-AgE", "hf_",
)  # fmt: skip


def _gate_provider(text: str) -> bool:
    return any(prefix in text for prefix in _PROVIDER_PREFIXES)


#: A password said in words: "my password is hunter2", "the passcode was 1234", "密码是abc123" (the
#: ``password: value`` form is :mod:`~ragwatch.sampling.redact`'s own pattern). The words stay, the value goes.
_PASSWORD_SAID = re.compile(
    r"[pP\u5bc6\u53e3](?<![A-Za-z].)(?:(?<=[pP])(?i:ass(?:word|wd|phrase|code)|in(?: code)?)"
    r"[ \t]+(?i:is|was|will be|=)(?:[ \t]+(?i:now|still|set to))?[ \t]+"
    r"|(?<=\u5bc6)\u7801(?:\u662f|\u4e3a|\u70ba)[ \t]*|(?<=\u53e3)\u4ee4(?:\u662f|\u4e3a|\u70ba)[ \t]*)"
    r"(?P<value>\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|[^\s,;，；。]{1,200}?)(?=[\s,;，；。]|[.!?]?$|[.!?]\s)"
)
_SAID_WORDS = ("ass", "ASS", "in ", "IN ", "\u5bc6\u7801", "\u53e3\u4ee4")


#: What "the password is …" says in help-desk prose, which is no password: kept.
_NOT_SAID_WORDS = (
    "a an the not no too your my our their its this that set now still only also case-sensitive optional "
    "mandatory wrong correct incorrect invalid valid empty blank missing weak strong long short different same "
    "unique secret private public temporary new old"
)
_NOT_SAID = frozenset(_NOT_SAID_WORDS.split())


def _said_value(value: str) -> bool:
    """A value, unless it is an ordinary word of the sentence ("required", "incorrect", "case-sensitive")."""
    low = value.lower()
    return not (low in _NOT_SAID or (low.isalpha() and low.endswith(("ed", "ly", "ing", "ive", "ble", "ful"))))


def _gate_said(text: str) -> bool:
    return (" is " in text or " was " in text or " be " in text or "\u662f" in text or "\u4e3a" in text) and any(
        word in text for word in _SAID_WORDS
    )


SECRET_KINDS = (
    Kind("api_key", _PROVIDER, _gate_provider),
    Kind("api_key", _SENDGRID, lambda text: "SG." in text),
    Kind("api_key", _BEARER, lambda text: "earer" in text),
    Kind("password", _PASSWORD_SAID, _gate_said, _said_value),
)
