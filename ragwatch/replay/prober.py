"""The replay prober: send known questions to the live service over HTTP and measure what comes back.

Real traffic tells you how the service behaves for users, but not whether it still retrieves the right
chunks for questions whose answer you know, nor whether a deploy changed answers. The prober replays
questions (a golden set and/or recent sampled traffic, see :mod:`ragwatch.replay.source`) against the
service's own HTTP API, like a user would, and reports:

* availability (share of requests that succeeded) and error kinds — ``timeout``, ``connect``,
  ``transport`` (the connection broke mid-response), ``http_5xx``, ``http_4xx``, ``bad_json``,
  ``missing_field`` (the response lacks the configured answer or chunk path);
* latency (send → end of body) of successful requests and, for ``text/event-stream`` responses, time to
  first token, as p50/p95/p99;
* for golden questions answered successfully: Hit Rate@K, Recall@K, Precision@K and MRR of the returned
  chunk ids (functions of :mod:`ragwatch.scoring.retrieval_metrics`);
* answer drift: ``1 - similarity`` (:func:`~ragwatch.replay.source.similarity`) from the golden reference
  answer, or from the answer given when a traffic question was sampled.

Every request carries ``x-ragwatch-probe``, signed with ``probe_secret`` (:func:`ragwatch.capture.probe.sign_probe`),
so ragwatch's own capture keeps probes out of samples; without the secret the service ignores the mark.
Retries are off by default: a prober that retries hides exactly the failures it exists to see.

The library returns a :class:`ReplayReport`; exit codes are the CLI's business.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import math
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, push_to_gateway, start_http_server

from ragwatch.capture.asgi import PROBE_HEADER
from ragwatch.capture.probe import sign_probe
from ragwatch.errors import ConfigError
from ragwatch.metrics.catalog import ReplayMetrics
from ragwatch.replay.source import Question, load_golden, similarity, traffic_questions
from ragwatch.scoring.retrieval_metrics import hit_rate, mean_reciprocal_rank, precision_at_k, recall_at_k

__all__ = [
    "ERROR_KINDS",
    "ProbeResult",
    "ReplayOptions",
    "ReplayReport",
    "RunSummary",
    "extract",
    "parse_duration",
    "probe_all",
    "run",
    "summarize",
]

log = logging.getLogger("ragwatch.replay")

ERROR_KINDS: tuple[str, ...] = (
    "timeout",
    "connect",
    "transport",
    "http_5xx",
    "http_4xx",
    "bad_json",
    "missing_field",
)
QUANTILES: tuple[float, ...] = (0.5, 0.95, 0.99)
QUESTION_PLACEHOLDER = "{question}"


# ------------------------------------------------------------------------------------------------- options


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
                _parse_path(path)

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


# ------------------------------------------------------------------------------------ request and response


class MissingField(LookupError):
    """The response lacks a configured path."""


_SEGMENT = re.compile(r"^([^\[\]]*)((?:\[\d*\])*)$")


def _parse_path(path: str) -> list[tuple[str, list[str]]]:
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
    for key, steps in _parse_path(path):
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


@dataclass(slots=True)
class ProbeResult:
    """What one probe request saw."""

    question: Question
    outcome: str  # "ok" or one of ERROR_KINDS
    latency: float | None = None
    ttft: float | None = None
    status: int | None = None
    answer: str | None = None
    chunk_ids: list[str] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    attempts: int = 1
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


class _Failure(Exception):
    def __init__(self, kind: str, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.status = status


def _map_response(options: ReplayOptions, data: Any) -> tuple[str, list[str], list[str]]:
    try:
        answer = extract(data, options.answer_path)
        ids = extract(data, options.chunk_ids_path) if options.chunk_ids_path else []
        texts = extract(data, options.chunk_texts_path) if options.chunk_texts_path else []
    except MissingField as exc:
        raise _Failure("missing_field", f"response has no {exc.args[0]!r}") from None
    if not isinstance(answer, str):
        raise _Failure("missing_field", f"{options.answer_path!r} is not a string")
    ids = ids if isinstance(ids, list) else [ids]
    texts = texts if isinstance(texts, list) else [texts]
    return answer, [str(i) for i in ids], [str(t) for t in texts]


async def _read_stream(
    options: ReplayOptions, response: httpx.Response, started: float
) -> tuple[str, list[str], list[str], float | None]:
    """Read an SSE body: JSON events carrying ``stream_text_path`` add text, one carrying the chunk path sets
    the chunks, one carrying ``answer_path`` sets the full answer; non-JSON data is text; ``[DONE]`` ends.
    TTFT is stamped at the first non-empty text."""
    deltas: list[str] = []
    answer: str | None = None
    ids: list[str] | None = None
    texts: list[str] = []
    ttft: float | None = None
    data_lines: list[str] = []

    def dispatch(data: str) -> bool:
        nonlocal answer, ids, texts, ttft
        if data.strip() == "[DONE]":
            return True
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            event = None
        text: str | None = None
        if isinstance(event, (dict, list)):
            for path, setter in ((options.chunk_ids_path, "ids"), (options.chunk_texts_path, "texts")):
                if path:
                    try:
                        found = extract(event, path)
                    except MissingField:
                        continue
                    values = [str(v) for v in (found if isinstance(found, list) else [found])]
                    if setter == "ids":
                        ids = values
                    else:
                        texts = values
            try:
                full = extract(event, options.answer_path)
                if isinstance(full, str):
                    answer = full
            except MissingField:
                pass
            try:
                delta = extract(event, options.stream_text_path)
                text = delta if isinstance(delta, str) else None
            except MissingField:
                text = None
        elif event is None or isinstance(event, str):
            text = data if event is None else event
        if text:
            if ttft is None:
                ttft = time.perf_counter() - started
            deltas.append(text)
        return False

    done = False
    async for line in response.aiter_lines():
        if line == "":
            if data_lines:
                done = dispatch("\n".join(data_lines))
                data_lines = []
                if done:
                    break
            continue
        if line.startswith("data:"):
            data_lines.append(line[5:].removeprefix(" "))
    if data_lines and not done:
        dispatch("\n".join(data_lines))
    if answer is None:
        if not deltas:
            raise _Failure("missing_field", "stream carried no text")
        answer = "".join(deltas)
    if options.chunk_ids_path and ids is None:
        raise _Failure("missing_field", f"stream has no {options.chunk_ids_path!r}")
    return answer, ids or [], texts, ttft


async def _attempt(client: httpx.AsyncClient, options: ReplayOptions, question: Question) -> ProbeResult:
    secret = options.probe_secret
    mark = sign_probe(secret, options.method, httpx.URL(options.url).path) if secret else "1"
    headers = {**options.headers, PROBE_HEADER: mark}
    body = build_body(options, question.text)
    started = time.perf_counter()
    request = client.build_request(options.method, options.url, headers=headers, json=body)
    try:
        response = await client.send(request, stream=True)
    except httpx.ConnectTimeout as exc:
        raise _Failure("connect", f"connect timeout: {exc}") from None
    except httpx.TimeoutException as exc:
        raise _Failure("timeout", f"timeout: {type(exc).__name__}") from None
    except httpx.ConnectError as exc:
        raise _Failure("connect", str(exc) or type(exc).__name__) from None
    except httpx.TransportError as exc:
        raise _Failure("transport", f"{type(exc).__name__}: {exc}") from None
    try:
        status = response.status_code
        if status >= 500:
            raise _Failure("http_5xx", f"HTTP {status}", status)
        if status >= 400:
            raise _Failure("http_4xx", f"HTTP {status}", status)
        ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
        ttft: float | None = None
        try:
            if ctype == "text/event-stream":
                answer, ids, texts, ttft = await _read_stream(options, response, started)
            else:
                raw = await response.aread()
                try:
                    data = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    detail = f"body is not JSON ({len(raw)} bytes, {ctype or 'no type'})"
                    raise _Failure("bad_json", detail, status) from None
                answer, ids, texts = _map_response(options, data)
        except httpx.TimeoutException:
            raise _Failure("timeout", "timeout while reading the body", status) from None
        except httpx.TransportError as exc:
            raise _Failure("transport", f"{type(exc).__name__} while reading the body", status) from None
        latency = time.perf_counter() - started
        return ProbeResult(question, "ok", latency, ttft, status, answer, ids, texts)
    finally:
        await response.aclose()


async def _probe(client: httpx.AsyncClient, options: ReplayOptions, question: Question) -> ProbeResult:
    """One question, with the overall deadline enforced here: httpx's timeouts are per read, so a server that
    trickles bytes would otherwise never time out."""
    attempts = 0
    while True:
        attempts += 1
        try:
            result = await asyncio.wait_for(_attempt(client, options, question), options.timeout)
            result.attempts = attempts
            return result
        except asyncio.TimeoutError:
            failure = _Failure("timeout", f"no complete response within {options.timeout:g}s")
        except _Failure as exc:
            failure = exc
        retryable = failure.kind in ("timeout", "connect", "transport", "http_5xx")
        if not retryable or attempts > options.retries:
            return ProbeResult(question, failure.kind, status=failure.status, attempts=attempts, error=str(failure))
        await asyncio.sleep(min(2.0, 0.1 * 2 ** (attempts - 1)))


async def probe_all(
    options: ReplayOptions, questions: Sequence[Question], on_done: Callable[[ProbeResult], None] | None = None
) -> list[ProbeResult]:
    """Probe every question with at most ``concurrency`` requests in flight; results in question order."""
    semaphore = asyncio.Semaphore(options.concurrency)
    limits = httpx.Limits(max_connections=options.concurrency, max_keepalive_connections=options.concurrency)
    async with httpx.AsyncClient(timeout=options.timeout, limits=limits, trust_env=False) as client:

        async def one(q: Question) -> ProbeResult:
            async with semaphore:
                result = await _probe(client, options, q)
            if on_done is not None:
                on_done(result)
            return result

        return list(await asyncio.gather(*(one(q) for q in questions)))


# ------------------------------------------------------------------------------------------------- summary


def _quantile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), None for no data."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _dist(values: Sequence[float]) -> dict[str, float | None]:
    return {f"p{round(q * 100)}": _quantile(values, q) for q in QUANTILES} | {
        "mean": sum(values) / len(values) if values else None,
        "count": len(values),
    }


@dataclass(slots=True)
class RunSummary:
    """One run's figures — the JSON summary is :meth:`to_dict`."""

    service: str
    started_at: float
    duration: float
    requests: int
    ok: int
    availability: float
    errors: dict[str, int]
    latency: dict[str, float | None]
    ttft: dict[str, float | None]
    k: int
    retrieval: dict[str, float] | None  # None without golden questions answered
    golden_answered: int
    drift: dict[str, float | None]
    drift_counts: dict[str, int]
    passed: bool
    failures: list[str]
    sources: dict[str, int]
    examples: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def markdown(self) -> str:
        def ms(v: float | None) -> str:
            return "–" if v is None else f"{v * 1000:.0f} ms"

        def num(v: float | None) -> str:
            return "–" if v is None else f"{v:.3f}"

        lines = [
            f"## ragwatch replay — {self.service}: {'PASS' if self.passed else 'FAIL'}",
            "",
            f"{self.requests} requests ({', '.join(f'{n} {s}' for s, n in self.sources.items())}) "
            f"in {self.duration:.2f} s; availability **{self.availability:.3f}** ({self.ok} ok)",
            "",
            "| | p50 | p95 | p99 | n |",
            "|---|---|---|---|---|",
        ]
        for name, d in (("latency", self.latency), ("TTFT", self.ttft)):
            lines.append(f"| {name} | {ms(d['p50'])} | {ms(d['p95'])} | {ms(d['p99'])} | {d['count']} |")
        errors = {k: v for k, v in self.errors.items() if v}
        lines += ["", "Errors: " + (", ".join(f"{k} {v}" for k, v in errors.items()) if errors else "none")]
        if self.retrieval is not None:
            r = self.retrieval
            lines += [
                "",
                f"Retrieval over {self.golden_answered} answered golden questions (K={self.k}): "
                f"Hit Rate {num(r['hit_rate'])}, Recall {num(r['recall'])}, Precision {num(r['precision'])}, "
                f"MRR {num(r['mrr'])}",
            ]
        for basis, value in self.drift.items():
            if value is not None:
                lines.append(f"Answer drift from {basis} answers: {value:.3f} (n={self.drift_counts[basis]})")
        if self.failures:
            lines += ["", *[f"- floor not met: {f}" for f in self.failures]]
        return "\n".join(lines) + "\n"


def summarize(options: ReplayOptions, results: Sequence[ProbeResult], started_at: float, duration: float) -> RunSummary:
    """Aggregate one run. Retrieval metrics cover golden questions that got a usable answer (a failed request
    is counted by availability, not a second time as a retrieval miss); drift covers answered questions that
    have a reference (golden) or historical (traffic) answer."""
    n = len(results)
    ok = [r for r in results if r.ok]
    errors = {kind: 0 for kind in ERROR_KINDS}
    errors.update(Counter(r.outcome for r in results if not r.ok))
    golden = [r for r in ok if r.question.relevant_ids is not None]
    retrieval = None
    if golden:
        retrieved = [r.chunk_ids for r in golden]
        relevant = [r.question.relevant_ids or [] for r in golden]
        k = options.k
        retrieval = {
            "hit_rate": hit_rate(retrieved, relevant, k),
            "recall": sum(recall_at_k(a, b, k) for a, b in zip(retrieved, relevant, strict=True)) / len(golden),
            "precision": sum(precision_at_k(a, b, k) for a, b in zip(retrieved, relevant, strict=True)) / len(golden),
            "mrr": mean_reciprocal_rank(retrieved, relevant, k),
        }
    drift_values: dict[str, list[float]] = {"reference": [], "historical": []}
    for r in ok:
        if r.question.reference_answer is not None:
            drift_values["reference"].append(1.0 - similarity(r.answer or "", r.question.reference_answer))
        if r.question.historical_answer is not None:
            drift_values["historical"].append(1.0 - similarity(r.answer or "", r.question.historical_answer))
    availability = len(ok) / n if n else 0.0
    failures = []
    if options.min_availability is not None and availability < options.min_availability:
        failures.append(f"availability {availability:.3f} < {options.min_availability}")
    if options.min_hit_rate is not None:
        if retrieval is None:
            failures.append(f"hit rate unknown (no golden question answered) < {options.min_hit_rate}")
        elif retrieval["hit_rate"] < options.min_hit_rate:
            failures.append(f"hit rate {retrieval['hit_rate']:.3f} < {options.min_hit_rate}")
    examples = [
        {"question": r.question.text[:200], "outcome": r.outcome, "error": r.error, "status": r.status}
        for r in results
        if not r.ok
    ][:10]
    return RunSummary(
        service=options.service,
        started_at=started_at,
        duration=duration,
        requests=n,
        ok=len(ok),
        availability=availability,
        errors=errors,
        latency=_dist([r.latency for r in ok if r.latency is not None]),
        ttft=_dist([r.ttft for r in ok if r.ttft is not None]),
        k=options.k,
        retrieval=retrieval,
        golden_answered=len(golden),
        drift={b: (sum(v) / len(v) if v else None) for b, v in drift_values.items()},
        drift_counts={b: len(v) for b, v in drift_values.items()},
        passed=not failures,
        failures=failures,
        sources=dict(Counter(r.question.source for r in results)),
        examples=examples,
    )


def record_metrics(metrics: ReplayMetrics, summary: RunSummary, results: Sequence[ProbeResult]) -> None:
    """Counters and histograms per request; gauges overwritten with this run's figures."""
    s = summary.service
    for kind in ("ok", *ERROR_KINDS):
        metrics.requests.labels(s, kind)  # every series exists from the first run (rate() needs a zero)
    for r in results:
        metrics.requests.labels(s, r.outcome).inc()
        if r.ok and r.latency is not None:
            metrics.duration.labels(s).observe(r.latency)
        if r.ok and r.ttft is not None:
            metrics.ttft.labels(s).observe(r.ttft)
    metrics.availability.labels(s).set(summary.availability)
    for kind, dist in (("latency", summary.latency), ("ttft", summary.ttft)):
        for q in QUANTILES:
            value = dist[f"p{round(q * 100)}"]
            if value is not None:
                metrics.latency_quantile.labels(s, kind, str(q)).set(value)
    if summary.retrieval is not None:
        for name, value in summary.retrieval.items():
            metrics.retrieval.labels(s, name, str(summary.k)).set(value)
    for basis, value in summary.drift.items():
        if value is not None:
            metrics.answer_drift.labels(s, basis).set(value)
    metrics.runs.labels(s, "pass" if summary.passed else "fail").inc()
    metrics.last_run.labels(s).set(summary.started_at + summary.duration)


# ------------------------------------------------------------------------------------------------- running


@dataclass(slots=True)
class ReplayReport:
    """All runs of one invocation; ``passed`` is the last run's verdict (what a CronJob's status shows)."""

    runs: list[RunSummary]
    metrics_port: int | None = None

    @property
    def passed(self) -> bool:
        return bool(self.runs) and self.runs[-1].passed


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def load_questions(options: ReplayOptions) -> list[Question]:
    """Golden questions first, then recent traffic questions not already in the golden set."""
    questions: list[Question] = load_golden(options.golden) if options.golden else []
    if options.traffic > 0:
        from ragwatch.queue.factory import open_queue

        queue = open_queue(options.redis_url, options.service)
        try:
            # distinct questions are rarer than records: read a few times more records than wanted
            records = queue.recent_scores(options.traffic * 5)
        finally:
            queue.close()
        known = {_key(q.text) for q in questions}
        extra = [q for q in traffic_questions(records, options.traffic + len(known)) if _key(q.text) not in known]
        questions += extra[: options.traffic]
    if not questions:
        log.warning("replay: no questions to replay (empty golden set and no stored traffic)")
    return questions


def _progress(enabled: bool | None, total: int) -> tuple[Callable[[ProbeResult], None] | None, Callable[[], None]]:
    """A rich progress bar on an interactive terminal; nothing otherwise (CronJob logs stay quiet)."""
    if enabled is False or (enabled is None and not sys.stderr.isatty()):
        return None, lambda: None
    try:
        from rich.progress import Progress
    except ImportError:
        return None, lambda: None
    bar = Progress(transient=True, console=None)
    task = bar.add_task("replaying", total=total)
    bar.start()
    return (lambda _r: bar.advance(task)), bar.stop


def run_once(options: ReplayOptions, metrics: ReplayMetrics | None = None) -> tuple[RunSummary, list[ProbeResult]]:
    """Load the questions, probe them, summarise, record metrics."""
    questions = load_questions(options)
    on_done, stop = _progress(options.progress, len(questions))
    started_at = time.time()
    t0 = time.perf_counter()
    try:
        results = asyncio.run(probe_all(options, questions, on_done))
    finally:
        stop()
    summary = summarize(options, results, started_at, time.perf_counter() - t0)
    if metrics is not None:
        record_metrics(metrics, summary, results)
    log.info(
        "replay %s: %d requests, availability %.3f, errors %s",
        options.service,
        summary.requests,
        summary.availability,
        {k: v for k, v in summary.errors.items() if v} or "none",
    )
    return summary, results


def _emit(options: ReplayOptions, summary: RunSummary) -> None:
    text = (
        json.dumps(summary.to_dict(), ensure_ascii=False, sort_keys=True) + "\n"
        if options.output_format == "json"
        else summary.markdown()
    )
    if options.output:
        with open(options.output, "a" if options.every else "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def run(
    options: ReplayOptions,
    *,
    stop: threading.Event | None = None,
    on_server: Callable[[int], None] | None = None,
) -> ReplayReport:
    """Run once (push to a Pushgateway if given) or every ``options.every`` seconds serving ``/metrics``.

    ``stop`` ends a scheduled prober between runs (signal handlers, tests); ``max_runs`` bounds it.
    ``on_server`` receives the bound metrics port (useful with port 0).
    """
    options.check()
    stop = stop or threading.Event()
    registry = CollectorRegistry()  # replay metrics only: a push must not carry unrelated series
    metrics = ReplayMetrics(registry)
    server = None
    port = None
    if options.metrics_port is not None:
        server, _thread = start_http_server(options.metrics_port, options.metrics_addr, registry)
        port = int(server.server_port)
        log.info("replay metrics on %s:%d/metrics", options.metrics_addr, port)
        if on_server is not None:
            on_server(port)
    report = ReplayReport([], port)
    try:
        while True:
            t0 = time.monotonic()
            summary, _results = run_once(options, metrics)
            report.runs.append(summary)
            _emit(options, summary)
            if options.pushgateway:
                try:
                    push_to_gateway(
                        options.pushgateway,
                        job=options.job,
                        registry=registry,
                        grouping_key={"service": options.service},
                    )
                except OSError as exc:  # urllib errors: the run's verdict stands, the push is reported
                    log.error("replay: push to %s failed: %s", options.pushgateway, exc)
            if options.every is None or (options.max_runs is not None and len(report.runs) >= options.max_runs):
                break
            if stop.wait(max(0.0, options.every - (time.monotonic() - t0))):
                break
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    return report
