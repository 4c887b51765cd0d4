"""Bound what ragwatch writes where an outsider's text could land: metric labels, logs, displayed reasons.

Some values that end up in a label or a log line come from outside the configuration: the model id is what
the LLM response says it is, a degraded-mode reason is whatever is stored in Redis. A 100 KB model id once
made a 199 MB ``/metrics`` page, so every such value passes through here: capped in length, control
characters (newlines that forge log lines, terminal escapes) replaced, never empty.
"""

from __future__ import annotations

import re

__all__ = ["MAX_LABEL_CHARS", "MAX_LOG_CHARS", "safe_label", "safe_text"]

#: Longest label value kept (the longest real model ids are about 80 characters).
MAX_LABEL_CHARS = 128
#: Longest free-text value (a reason, an error message) put in a log line or shown to an operator.
MAX_LOG_CHARS = 500

# C0 and C1 controls, DEL, and the Unicode line/paragraph separators and bidi overrides that can make a
# displayed line say something else than what it stores.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _bounded(value: str, limit: int) -> str:
    if len(value) > limit:
        value = value[: limit - 1] + "…"
    return _CONTROL.sub("?", value)


def safe_label(value: object) -> str:
    """A label value: a str of at most :data:`MAX_LABEL_CHARS` printable characters (``unknown`` if empty)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= MAX_LABEL_CHARS and text.isprintable() and text:
        return text
    return _bounded(text, MAX_LABEL_CHARS) or "unknown"


def safe_text(value: object, limit: int = MAX_LOG_CHARS) -> str:
    """Free text for a log line or a display: capped at ``limit`` characters, control characters replaced."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit and text.isprintable():
        return text
    return _bounded(text, limit)
