"""One settings object for the whole of ragwatch.

Precedence, highest first: arguments given in code, ``RAGWATCH_*`` environment variables, the YAML file
named by ``RAGWATCH_CONFIG_FILE`` (or passed as ``config_file=``), then defaults. Everything is validated
when the object is built, so a typo fails the service at start-up with the setting's name in the message
instead of silently at 3 a.m.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)

from ragwatch.errors import ConfigError
from ragwatch.mode.degrade import Policy, direction_of
from ragwatch.sampling.redact import BUILTIN_PATTERNS

__all__ = ["DEFAULT_LATENCY_BUCKETS", "HALLUCINATION_RATE_LINE", "PriceSetting", "Settings", "load_settings"]

#: Seconds. RAG stages span a cache hit (milliseconds) to a slow LLM (tens of seconds).
DEFAULT_LATENCY_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)

CONFIG_FILE_ENV = "RAGWATCH_CONFIG_FILE"

#: The default ceiling of the ``hallucination_rate`` window (share of answers with an unsupported claim),
#: exported as ``ragwatch_sla_threshold{metric="hallucination_rate"}`` for RagwatchHallucinationRateHigh.
#: Provisional, until measured on labelled windows (RAGTruth dev, 200 answers at 10 % vs 30 % hallucinated).
HALLUCINATION_RATE_LINE = 0.22  # line chosen by ragwatch eval-alerts

#: Judges a worker can run (built by ``ragwatch.scoring.judges.make_judges``; named here so validating settings
#: does not load the judges into a service process).
JUDGE_NAMES = ("offline", "llm", "cascade", "trivial", "embedding", "semantic")
#: Seconds one judge may spend on one sample by default (``judge_time_budget_s``): realistic text at every
#: size limit takes the offline judge about 0.3 s, so only a hostile or pathological sample reaches it.
JUDGE_TIME_BUDGET_S = 10.0


class PriceSetting(BaseModel):
    """USD per one million tokens for one model; overrides the shipped table."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)


#: A claim threshold: a P(supported) strictly between 0 and 1 (at 0 or 1 every claim would go one way).
ClaimThreshold = Annotated[float, Field(gt=0, lt=1)]
#: A logit added to a relevance calibration; ±10 already moves a 0.5 to 0.99995 or back.
LogitOffset = Annotated[float, Field(ge=-10, le=10)]


class Settings(BaseSettings):
    """Every knob of ragwatch. Environment names are ``RAGWATCH_`` + the field name in upper case."""

    model_config = SettingsConfigDict(
        env_prefix="RAGWATCH_",
        extra="forbid",
        validate_default=True,
        env_nested_delimiter="__",
    )

    service: str = Field(
        default="default",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="Name of the watched service; the `service` label on every metric.",
    )
    tracing: bool = Field(default=True, description="Open OpenTelemetry spans for each stage.")
    metrics: bool = Field(default=True, description="Record Prometheus metrics for each stage.")
    capture_chunk_text: bool = Field(
        default=False,
        description="Put retrieved chunk text on spans (off: ids and scores only, text may be private).",
    )
    max_span_chunks: int = Field(default=20, ge=0, le=1000, description="Chunks described on a span.")
    latency_buckets: tuple[float, ...] = Field(
        default=DEFAULT_LATENCY_BUCKETS, description="Histogram buckets (seconds) for stage latency and TTFT."
    )
    pricing: dict[str, PriceSetting] = Field(
        default_factory=dict, description="Per-model price overrides, USD per 1M tokens."
    )
    metrics_port: int | None = Field(
        default=None, ge=0, le=65535, description="Start a standalone /metrics HTTP server on this port."
    )
    metrics_addr: str = Field(default="0.0.0.0", description="Address of the standalone /metrics server.")
    # -- sampling (service side) ------------------------------------------------------------------------
    sampling: bool = Field(default=True, description="Send a sample of requests to the scoring queue.")
    sample_rate: float = Field(
        default=0.1, ge=0, le=1, description="Share of requests sampled, decided by trace id (0..1)."
    )
    sample_errors: bool = Field(
        default=False,
        description="Sample every failed request (exception, 4xx or 5xx) into the quality windows; off: "
        "they are skipped, counted as error_response.",
    )
    sample_slow_seconds: float | None = Field(
        default=None, gt=0, description="Always sample requests slower than this many seconds."
    )
    sample_route_rates: dict[str, float] = Field(
        default_factory=dict, description='Rate per route path prefix, e.g. {"/api/ask": 0.5}.'
    )
    sample_tag_rates: dict[str, float] = Field(
        default_factory=dict, description='Rate per run tag, keyed "name=value".'
    )
    sample_probe_rate: float = Field(
        default=0.0, ge=0, le=1, description="Rate for replay-probe requests (0 keeps them out of samples)."
    )
    sample_secret: SecretStr | None = Field(
        default=None,
        description="Key mixed into the trace-id sampling hash, so callers cannot choose sampled trace ids; "
        "give every replica the same one (unset: a random key per process).",
    )
    probe_secret: SecretStr | None = Field(
        default=None,
        description="Shared secret that signs the x-ragwatch-probe header (ragwatch replay signs with it); "
        "unset: only probe_sources can mark probes.",
    )
    probe_sources: tuple[str, ...] = Field(
        default=(), description="Client addresses or CIDR networks whose requests may mark probes unsigned."
    )
    probe_max_age_seconds: float = Field(
        default=60.0, gt=0, description="Oldest (and furthest in the future) probe signature accepted."
    )
    probe_nonce_cache: int = Field(
        default=4096,
        ge=16,
        description="Probe nonces one process remembers (for 2 x probe_max_age_seconds); when full, further "
        "probes count as real traffic. Replicas do not share it.",
    )
    probe_max_body_bytes: int = Field(
        default=1 << 20,
        ge=0,
        description="Largest request body hashed to check a probe signature; a larger body is not a probe.",
    )
    sample_max_per_second: float | None = Field(
        default=50.0, gt=0, description="Ceiling on samples per second per process (caps judge cost)."
    )
    redact: tuple[str, ...] = Field(
        default=BUILTIN_PATTERNS,
        description="Built-in redaction patterns applied before a sample leaves the process.",
    )
    store_text: bool = Field(
        default=True, description="Keep question, answer and chunk text in samples (false: SHA-256 only)."
    )
    content_off: bool = Field(
        default=False,
        description="Keep no user text anywhere (GDPR): samples leave with no question, answer, chunk text, hash, "
        "chunk id, metadata or tag; score records, reports and pages hold none. Latency, tokens, cost and scores "
        "stay: the service judges the text in memory (on Redis, on judging threads of its own; workers apply the "
        "scores).",
    )
    max_chunks: int = Field(default=20, ge=1, description="Chunks kept per sample.")
    max_chunk_chars: int = Field(default=4000, ge=1, description="Characters kept per chunk.")
    max_answer_chars: int = Field(default=8000, ge=1, description="Characters kept of the answer.")
    max_question_chars: int = Field(default=2000, ge=1, description="Characters kept of the question.")
    # -- queue -------------------------------------------------------------------------------------------
    redis_url: str | None = Field(
        default=None,
        description="Queue URL: redis://, rediss://, unix://, redis+sentinel://, redis+cluster://; "
        "unset: the in-process memory:// backend.",
    )
    queue_maxlen: int = Field(default=100_000, ge=100, description="Approximate bound of the sample stream.")
    buffer_size: int = Field(default=10_000, ge=1, description="In-process sample buffer; oldest dropped when full.")
    batch_size: int = Field(default=500, ge=1, description="Samples per pipelined queue write.")
    flush_interval: float = Field(default=0.25, gt=0, description="Seconds between buffer flushes.")
    close_timeout: float = Field(default=5.0, ge=0, description="Seconds to flush at shutdown before giving up.")
    # -- worker ------------------------------------------------------------------------------------------
    worker_concurrency: int = Field(default=4, ge=1, le=256, description="Samples scored in parallel (threads).")
    worker_batch: int = Field(default=64, ge=1, description="Entries read from the stream per round trip.")
    worker_block_ms: int = Field(default=2000, ge=1, description="How long one stream read waits for entries.")
    claim_idle_seconds: float = Field(
        default=60.0, gt=0, description="Pending entries idle this long are taken over from a dead worker."
    )
    max_deliveries: int = Field(
        default=5, ge=1, description="Deliveries before an entry goes to the dead-letter stream."
    )
    scores_maxlen: int = Field(default=100_000, ge=100, description="Score records kept (retention bound).")
    idempotency_ttl_seconds: int = Field(
        default=7 * 24 * 3600,
        ge=3600,
        description="How long a scored sample id is remembered (a redelivery within it is not counted twice).",
    )
    scores_max_bytes: int = Field(
        default=64 * 2**20,
        ge=0,
        description="Byte budget of the score records in Redis (MEMORY USAGE); workers trim the oldest past it "
        "(0: only scores_maxlen bounds them).",
    )
    idempotency_max_bytes: int = Field(
        default=64 * 2**20,
        ge=0,
        description="Byte budget of the idempotency markers in Redis; workers drop the oldest hours' markers past "
        "it, never the last two hours' (0: only idempotency_ttl_seconds bounds them).",
    )
    redis_min_headroom_ratio: float = Field(
        default=0.10,
        ge=0,
        lt=1,
        description="Share of Redis maxmemory kept free: under it (or when Redis refuses a score) workers halve "
        "the score records and the older markers at each maintenance pass (0: never under pressure).",
    )
    max_sample_bytes: int = Field(
        default=1_000_000, ge=1024, description="Stream entries larger than this are dead-lettered as oversized."
    )
    worker_stall_seconds: float | None = Field(
        default=None,
        gt=0,
        description="/livez fails after this long without progress (unset: from the read timeout, and the "
        "LLM judge's worst case when one runs).",
    )
    worker_port: int | None = Field(
        default=9465, ge=0, le=65535, description="Worker /metrics, /livez and /readyz port (unset: none)."
    )
    worker_addr: str = Field(default="0.0.0.0", description="Address of the worker's HTTP server.")
    dashboard: bool = Field(
        default=True,
        description="Serve the live quality page at /dashboard on the worker's port, and in a service that "
        "scores in process from RagwatchMiddleware (shows redacted questions).",
    )
    dashboard_sources: tuple[str, ...] = Field(
        default=("127.0.0.0/8", "::1"),
        description="Client addresses or CIDR networks a service's in-process /dashboard answers (others reach "
        "the app's own route); the page is on only when this is set explicitly or dashboard_token is; the "
        "worker's port is not filtered.",
    )
    dashboard_token: SecretStr | None = Field(
        default=None,
        description="Token the /dashboard page and its JSON require (service and worker): "
        "'Authorization: Bearer <token>' or '?token=<token>'; it also makes its holders operators, whose "
        "feedback buttons POST /dashboard/feedback with the header form only (unset: nobody may write).",
    )
    dashboard_trusted_proxies: tuple[str, ...] = Field(
        default=(),
        description="Peer addresses or CIDR networks whose forwarding headers (Forwarded, X-Forwarded-For, "
        "X-Real-IP) /dashboard accepts, with dashboard_token only; other forwarded requests are refused.",
    )
    dashboard_max_readers: int = Field(
        default=2, ge=1, le=64, description="Concurrent /dashboard store reads; one more is answered 503."
    )
    trace_url_template: str | None = Field(
        default=None,
        description="A trace viewer's URL with {trace_id} (Tempo, Jaeger): each card of /dashboard links to its trace.",
    )
    prometheus_url: str | None = Field(
        default=None,
        description="Prometheus the worker's /dashboard reads request rate, errors, p95 latency and cost from.",
    )
    service_version: str | None = Field(
        default=None,
        description="Version of the watched service (OTel service.version); a change is marked on the charts.",
    )
    report_state_file: str | None = Field(
        default=None, description="Where `ragwatch report` keeps the means its Δ column compares with (unset: no Δ)."
    )
    scoring: Literal["auto", "in_process", "off"] = Field(
        default="auto",
        description="Who scores this service's samples: auto (in process on memory://, workers on Redis), "
        "in_process (this process, one background thread, whatever the queue), off (someone else).",
    )
    scoring_max_per_second: float = Field(
        default=2.0,
        gt=0,
        description="Budget of in-process scoring (and of content_off judging in the service), samples per "
        "second; samples over it are skipped, counted.",
    )
    # -- judges ------------------------------------------------------------------------------------------
    judges: tuple[str, ...] = Field(
        default=("offline",), description="Judges a worker runs: offline, llm, cascade, embedding, semantic, trivial."
    )
    judge_base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint of the LLM judge, e.g. https://api.openai.com/v1."
    )
    judge_model: str | None = Field(default=None, description="Pinned model id of the LLM judge.")
    judge_timeout: float = Field(default=30.0, gt=0, description="Seconds per LLM judge request.")
    judge_max_retries: int = Field(default=3, ge=0, description="Retries on 429, 5xx and timeouts.")
    judge_concurrency: int = Field(default=8, ge=1, description="LLM judge requests in flight per worker.")
    judge_time_budget_s: float = Field(
        default=JUDGE_TIME_BUDGET_S,
        ge=0,
        description="Wall-clock seconds one judge may spend on one sample; over it the sample is dead-lettered "
        'with the reason and counted (ragwatch_worker_entries_total{outcome="over_time_budget"}). Checked '
        "between claims by the offline judge (also inside the cascade); 0 turns it off. Keep it under "
        "worker_stall_seconds.",
    )
    embedding_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="Sentence-transformers model (name or local directory) of the embedding judge.",
    )
    offline_cache_size: int = Field(
        default=2048,
        ge=0,
        description="Offline judge (also inside the cascade): chunk text analyses kept in a bounded LRU cache "
        "(about 6 kB each for a 150-word chunk; 0 keeps none). Size it to the chunks retrieved again and again.",
    )
    offline_threshold: ClaimThreshold | None = Field(
        default=None,
        description="Offline judge (also inside the cascade): a claim is SUPPORTED when its P(supported) is at least "
        "this (unset: the threshold in the weight file, set on the dev files). Choose it for your traffic's base "
        "rate with `ragwatch eval-judge FILE --thresholds` on answers you labelled.",
    )
    relevance_offset: LogitOffset = Field(
        default=0.0,
        description="Every judge's chunk relevance: a logit added to its calibration (0: as shipped). A "
        "relevance file of your own with `ragwatch eval-judge FILE --calibration` suggests it.",
    )
    relevance_offset_cjk: LogitOffset | None = Field(
        default=None,
        description="The same for questions written in CJK script, which have an intercept of their own "
        "(unset: relevance_offset). `--calibration` suggests one per script.",
    )
    semantic_threshold: ClaimThreshold | None = Field(
        default=None,
        description="Semantic and embedding judges: a claim the cross-encoder re-scored is SUPPORTED at a blended "
        "P(supported) of at least this (unset: the threshold in the semantic weight note). "
        "`ragwatch eval-judge FILE --judge semantic --thresholds` suggests one.",
    )
    semantic_band: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Semantic tier: re-score claims whose lexical P is this close to the offline threshold "
        "(unset: the band in the weight note; 0 re-scores none, 1 all).",
    )
    semantic_cache_size: int = Field(
        default=4096, ge=0, description="Semantic and embedding judges: entries of each bounded LRU cache."
    )
    semantic_threads: int | None = Field(
        default=None, ge=1, description="Semantic and embedding judges: torch CPU threads (unset: torch's default)."
    )
    cascade_band: tuple[float, float] = Field(
        default=(0.3, 0.8), description="Offline faithfulness in this band escalates to the LLM judge."
    )
    cascade_fraction: float = Field(
        default=0.02, ge=0, le=1, description="Share of other samples escalated anyway (keeps calibration honest)."
    )
    # -- quality windows, SLA and degraded mode -------------------------------------------------------------
    sla_metric: str = Field(default="context_precision_3", description="The score whose window degrades the service.")
    sla_threshold: float = Field(default=0.65, ge=0, le=1, description="Degraded when the window mean is under this.")
    sla_direction: Literal["min", "max"] | None = Field(
        default=None,
        description="min: degraded when the window falls under the threshold; max: when above; unset: from the "
        "metric (max for a rate of bad outcomes such as hallucination_rate, min for quality scores).",
    )
    sla_window_seconds: float = Field(default=900.0, gt=0, description="Window length in seconds.")
    sla_window_samples: int = Field(default=200, ge=1, description="At most this many newest scores in the window.")
    sla_min_samples: int = Field(default=20, ge=1, description="No decision with fewer scores in the window.")
    sla_margin: float = Field(default=0.05, ge=0, le=1, description="Leave only above threshold + margin.")
    sla_hold_seconds: float = Field(default=120.0, ge=0, description="…and only after staying there this long.")
    sla_min_dwell_seconds: float = Field(default=300.0, ge=0, description="Minimum time in a state before switching.")
    sla_evaluate_seconds: float = Field(default=5.0, gt=0, description="How often workers evaluate the window.")
    sla_max_client_share: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="Largest share of the window one client's scores may take (1: no cap; see README).",
    )
    client_header: str | None = Field(
        default=None,
        description="Request header naming the client behind a proxy (its last value); unset: the peer address.",
    )
    health_thresholds: dict[str, float] = Field(
        default_factory=lambda: {
            "faithfulness": 0.75,
            "hallucination_rate": HALLUCINATION_RATE_LINE,
            "answer_relevance": 0.85,
            "context_relevance": 0.35,
        },
        description="Reporting lines per score (exported as gauges; do not switch modes): floors, except for "
        "rates of bad outcomes (hallucination_rate), whose line is a ceiling.",
    )
    degraded_mode: bool = Field(default=True, description="Follow the shared degraded-mode flag in this process.")
    degraded_refresh_seconds: float = Field(
        default=2.0, gt=0, description="Re-read the flag at least this often (changes are also pushed)."
    )
    degraded_notice: str = Field(
        default="当前检索结果相关性一般，建议尝试更具体的问题描述。 Retrieval quality is degraded right now; "
        "a more specific question may help.",
        description="Message for users while degraded (rw.notice, ASGI header x-ragwatch-notice).",
    )
    degraded_min_chunk_score: float | None = Field(
        default=None, description="While degraded, the retriever drops chunks whose score is under this."
    )
    degraded_top_k: int | None = Field(
        default=None, ge=1, description="While degraded, a `top_k=`/`k=` keyword of the retriever is replaced."
    )
    log_every_seconds: float = Field(
        default=60.0, gt=0, description="At most one log line per kind of internal error in this period."
    )

    @field_validator("latency_buckets")
    @classmethod
    def _buckets_increase(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value:
            raise ValueError("needs at least one bucket")
        if any(not math.isfinite(b) or b <= 0 for b in value):
            raise ValueError("buckets must be positive finite numbers of seconds")
        if any(b >= c for b, c in itertools.pairwise(value)):
            raise ValueError("buckets must be strictly increasing")
        return value

    @field_validator("sample_route_rates", "sample_tag_rates")
    @classmethod
    def _rates_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        for key, rate in value.items():
            if not 0 <= rate <= 1:
                raise ValueError(f"rate for {key!r} must be within 0..1, got {rate}")
        return value

    @field_validator("judges")
    @classmethod
    def _known_judges(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [j for j in value if j not in JUDGE_NAMES]
        if unknown or not value:
            raise ValueError(f"unknown judge(s) {unknown}; known: {list(JUDGE_NAMES)}")
        return value

    @field_validator("cascade_band")
    @classmethod
    def _band(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not 0 <= value[0] <= value[1] <= 1:
            raise ValueError(f"must satisfy 0 ≤ low ≤ high ≤ 1, got {list(value)}")
        return value

    @field_validator("trace_url_template", "prometheus_url")
    @classmethod
    def _http_url(cls, value: str | None, info: Any) -> str | None:
        if value is None:
            return None
        if not value.lower().startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        if info.field_name == "trace_url_template" and "{trace_id}" not in value:
            raise ValueError("must contain {trace_id}, e.g. https://tempo/explore?trace={trace_id}")
        return value

    @field_validator("health_thresholds")
    @classmethod
    def _thresholds_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        for key, threshold in value.items():
            if not 0 <= threshold <= 1:
                raise ValueError(f"threshold for {key!r} must be within 0..1, got {threshold}")
        return value

    def scores_in_process(self) -> bool:
        """Whether the service scores its own samples: ``auto`` means exactly when the queue is the
        in-process memory backend (nothing else could read it)."""
        if self.scoring == "off" or not self.sampling:
            return False
        if self.scoring == "in_process":
            return True
        return not self.redis_url or self.redis_url.lower().startswith("memory:")

    def prescores(self, queue_url: str) -> bool:
        """Whether the service judges its samples before they leave: ``content_off`` on a queue other processes
        read (on ``memory://`` the text never leaves, the in-process scorer judges it), unless scoring is off."""
        return self.content_off and self.scoring != "off" and not queue_url.lower().startswith("memory:")

    def sla_policy(self) -> Policy:
        """The degraded-mode policy these settings describe (validated)."""
        return Policy(
            metric=self.sla_metric,
            threshold=self.sla_threshold,
            direction=self.sla_direction or direction_of(self.sla_metric),
            window_seconds=self.sla_window_seconds,
            window_samples=self.sla_window_samples,
            min_samples=self.sla_min_samples,
            margin=self.sla_margin,
            hold_seconds=self.sla_hold_seconds,
            min_dwell_seconds=self.sla_min_dwell_seconds,
            max_client_share=self.sla_max_client_share,
        )

    @field_validator("redact")
    @classmethod
    def _known_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [p for p in value if p not in BUILTIN_PATTERNS]
        if unknown:
            raise ValueError(f"unknown redaction pattern(s) {unknown}; known: {list(BUILTIN_PATTERNS)}")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = os.environ.get(CONFIG_FILE_ENV)
        if path:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
        return tuple(sources)


def load_settings(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Build and validate settings; every problem becomes one :class:`ConfigError` listing each field.

    ``config_file`` wins over ``RAGWATCH_CONFIG_FILE``. Arguments equal to ``None`` count as not given,
    so callers can forward optional parameters without deciding precedence themselves.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        previous = os.environ.get(CONFIG_FILE_ENV)
        os.environ[CONFIG_FILE_ENV] = str(path)
        try:
            return _build(given)
        finally:
            if previous is None:
                os.environ.pop(CONFIG_FILE_ENV, None)
            else:
                os.environ[CONFIG_FILE_ENV] = previous
    path_env = os.environ.get(CONFIG_FILE_ENV)
    if path_env and not Path(path_env).is_file():
        raise ConfigError(f"{CONFIG_FILE_ENV}={path_env!r} does not name a file")
    return _build(given)


def _build(given: dict[str, Any]) -> Settings:
    try:
        settings = _validated(given)
        unshadowed = {k: v for k, v in given.items() if not env_names(k)}
        if len(unshadowed) < len(given):  # an argument wins over its RAGWATCH_* variable; a bad one still fails
            _validated(unshadowed)
        settings.sla_policy()  # cross-field checks (margin vs threshold, min samples vs window)
        return settings
    except SettingsError as exc:  # a RAGWATCH_* variable of a list or mapping that is not JSON
        field = str(exc).split('"')[1] if str(exc).count('"') >= 2 else ""
        names = env_names(field)
        where = f"{', '.join(names)} ({field})" if names else field or "a setting"
        raise ConfigError(f"invalid ragwatch settings: {where}: not valid JSON") from None
    except ConfigError:
        raise
    except Exception as exc:  # a YAML syntax error, an unreadable file
        raise ConfigError(f"could not read ragwatch settings: {exc}") from exc


def _validated(given: dict[str, Any]) -> Settings:
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = "; ".join(f"{_origin(err['loc'], given)}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"invalid ragwatch settings: {problems}") from None


def env_names(field: str) -> list[str]:
    """The ``RAGWATCH_*`` variables set for ``field`` (its own, or nested ones such as
    ``RAGWATCH_PRICING__MY_LLM__INPUT``), spelled as in the environment (names match in any case)."""
    if not field:
        return []
    own = f"RAGWATCH_{field}".lower()
    return sorted(k for k in os.environ if k.lower() == own or k.lower().startswith(own + "__"))


def _origin(loc: tuple[int | str, ...], given: dict[str, Any]) -> str:
    """Where a bad value came from, for the error: the argument's dotted path, else the environment
    variable (which a user sets, and would not find under the field's name), else the YAML file."""
    path = ".".join(str(p) for p in loc) or "<root>"
    field = str(loc[0]) if loc else ""
    if field in given:
        return path
    names = env_names(field)
    for depth in range(len(loc), 1, -1):  # the nested variable that holds the bad value, if it is one
        nested = "RAGWATCH_" + "__".join(str(p) for p in loc[:depth])
        names = [n for n in names if n.lower() == nested.lower()] or names
    if names:
        return f"{', '.join(names)} ({path})"
    config_file = os.environ.get(CONFIG_FILE_ENV)
    return f"{path} (in {config_file})" if config_file else path
