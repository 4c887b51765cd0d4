"""The replay's options, checked before the first request: a typo in a template must not look like an outage."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ragwatch.errors import ConfigError
from ragwatch.replay.mapping import parse_path

__all__ = ["ReplayOptions", "parse_duration"]


@dataclass(slots=True)
class ReplayOptions:
    """Everything one replay needs; validated by :meth:`check` (a bad value is a :class:`ConfigError`)."""

    url: str
    service: str = "default"
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None  # JSON template; string values containing "{question}" get the question
    question_field: str | None = None  # dotted path set to the question in the body (default "question")
    answer_path: str = "answer"
    chunk_ids_path: str | None = "chunks[].id"  # None or "": the service returns no chunks
    chunk_texts_path: str | None = None
    stream_text_path: str = "delta"  # SSE: where a text delta sits in a JSON event
    golden: str | None = None
    traffic: int = 0  # recent distinct questions from the queue's score records
    redis_url: str | None = None
    k: int = 5
    concurrency: int = 4
    timeout: float = 10.0
    retries: int = 0
    min_availability: float | None = None
    min_hit_rate: float | None = None
    every: float | None = None  # seconds between runs; None: run once
    max_runs: int | None = None
    metrics_port: int | None = None
    metrics_addr: str = "0.0.0.0"
    pushgateway: str | None = None
    job: str = "ragwatch_replay"
    output_format: str = "markdown"  # or "json"
    output: str | None = None
    progress: bool | None = None  # None: a rich bar when stderr is a terminal
    probe_secret: str | None = field(default=None, repr=False)  # signs x-ragwatch-probe (settings.probe_secret)

    def check(self) -> None:
        """Fail before the first request: a typo in a template should not look like an outage."""
        if not re.match(r"^https?://", self.url):
            raise ConfigError(f"replay url must start with http:// or https://, got {self.url!r}")
        if self.golden is None and self.traffic <= 0:
            raise ConfigError("replay needs questions: --golden FILE and/or --traffic N")
        for name in ("concurrency", "k"):
            if getattr(self, name) < 1:
                raise ConfigError(f"replay {name} must be ≥ 1, got {getattr(self, name)}")
        if self.timeout <= 0 or self.retries < 0:
            raise ConfigError("replay timeout must be > 0 and retries ≥ 0")
        for name in ("min_availability", "min_hit_rate"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ConfigError(f"replay {name} must be in [0, 1], got {value}")
        if self.every is not None and self.every <= 0:
            raise ConfigError("replay --every must be a positive duration")
        if self.output_format not in ("markdown", "json"):
            raise ConfigError(f"replay output format must be markdown or json, got {self.output_format!r}")
        self.body_template()  # parses it
        for path in (self.answer_path, self.chunk_ids_path, self.chunk_texts_path, self.question_field):
            if path:
                parse_path(path)

    def body_template(self) -> Any:
        if self.body is None:
            return {}
        try:
            return json.loads(self.body)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"replay --body is not valid JSON: {exc.msg} (column {exc.colno})") from exc


def parse_duration(text: str) -> float:
    """``"5m"``, ``"30s"``, ``"0.5s"``, ``"1h"``, ``"250ms"`` or plain seconds → seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*", text)
    if not match:
        raise ConfigError(f"not a duration: {text!r} (use e.g. 30s, 5m, 1h)")
    value = float(match.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[match.group(2)]
    if value <= 0:
        raise ConfigError(f"duration must be positive: {text!r}")
    return value
