"""The small learned calibrations the judges ship: loading their weight files, and the logistic link.

A judge must keep scoring when its weight file is missing or stale (a broken install, a hand edit), so a
file that cannot be used is replaced by built-in defaults with one loud warning. The short content hash of
what was loaded becomes part of the judge's version, so scores from different weights never mix unnoticed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["load_weights", "sigmoid"]

_log = logging.getLogger("ragwatch.judges")


def sigmoid(x: float) -> float:
    """The logistic function, without overflow for large negative ``x``."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def load_weights(
    path: Path, defaults: dict[str, Any], check: Callable[[dict[str, Any]], None], who: str
) -> tuple[dict[str, Any], str]:
    """Weights from ``path`` (``check`` raises ValueError/KeyError/TypeError when they do not fit this code)
    and a short content hash; ``defaults`` with a warning naming ``who`` when the file is unusable."""
    try:
        raw = path.read_bytes()
        weights = json.loads(raw)
        check(weights)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _log.warning("%s: cannot use weights %s (%s); using built-in defaults", who, path, exc)
        raw = json.dumps(defaults, sort_keys=True).encode()
        weights = defaults
    return weights, hashlib.sha256(raw).hexdigest()[:10]
