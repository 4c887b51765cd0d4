"""How a question becomes a request body and a response becomes an answer and chunk ids.

The service's own API is described by a JSON body template and dotted response paths (``answer``,
``chunks[].id``), so the prober needs no code per service; these are the pure functions behind them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ragwatch.errors import ConfigError

if TYPE_CHECKING:
    from ragwatch.replay.options import ReplayOptions

__all__ = ["QUESTION_PLACEHOLDER", "MissingField", "build_body", "extract", "parse_path"]

QUESTION_PLACEHOLDER = "{question}"


class MissingField(LookupError):
    """The response lacks a configured path."""


_SEGMENT = re.compile(r"^([^\[\]]*)((?:\[\d*\])*)$")


def parse_path(path: str) -> list[tuple[str, list[str]]]:
    """``chunks[].id`` → [("chunks", [""]), ("id", [])]: a key, then list steps ("" = every item, "0" = index)."""
    out = []
    for part in path.split("."):
        m = _SEGMENT.match(part)
        if not m or (not m.group(1) and not m.group(2)):
            raise ConfigError(f"bad response path {path!r} at {part!r} (use e.g. answer, data.chunks[].id)")
        out.append((m.group(1), re.findall(r"\[(\d*)\]", m.group(2))))
    return out


def extract(obj: Any, path: str) -> Any:
    """The value at a dotted path; ``[]`` maps over a list, ``[n]`` indexes. Raises :class:`MissingField`."""
    values: list[Any] = [obj]
    many = False
    for key, steps in parse_path(path):
        nxt: list[Any] = []
        for v in values:
            if key:
                if not isinstance(v, Mapping) or key not in v:
                    raise MissingField(path)
                v = v[key]
            cur = [v]
            for step in steps:
                stepped: list[Any] = []
                for item in cur:
                    if not isinstance(item, list):
                        raise MissingField(path)
                    if step == "":
                        stepped.extend(item)
                        many = True
                    elif int(step) < len(item):
                        stepped.append(item[int(step)])
                    else:
                        raise MissingField(path)
                cur = stepped
            nxt.extend(cur)
        values = nxt
    return values if many else values[0]


def _set_path(body: Any, path: str, value: str) -> Any:
    if not isinstance(body, dict):
        raise ConfigError("replay --question-field needs a JSON object body")
    keys = path.split(".")
    target = body
    for key in keys[:-1]:
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            raise ConfigError(f"replay --question-field {path!r} crosses a non-object in the body")
    target[keys[-1]] = value
    return body


def _fill(template: Any, question: str) -> Any:
    """Substitute the question into string values (never into raw JSON text, so quotes cannot break it)."""
    if isinstance(template, str):
        return question if template == QUESTION_PLACEHOLDER else template.replace(QUESTION_PLACEHOLDER, question)
    if isinstance(template, list):
        return [_fill(v, question) for v in template]
    if isinstance(template, dict):
        return {k: _fill(v, question) for k, v in template.items()}
    return template


def build_body(options: ReplayOptions, question: str) -> Any:
    body = _fill(copy.deepcopy(options.body_template()), question)
    field_ = options.question_field or (None if options.body else "question")
    if field_:
        body = _set_path(body, field_, question)
    return body
