"""An LLM-as-judge for faithfulness, context relevance and Context Precision@K.

One chat-completions call per sample, to any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, DeepSeek,
Qwen/DashScope compatible mode, a gateway), asks the model to split the answer into atomic claims with a
verdict and a verbatim quote each, to rate every retrieved chunk's relevance to the question, and to rate
the answer's relevance. The scores are then computed here, not by the model, from that evidence.

The judge is an LLM too and can hallucinate, so its output is checked before it is believed:

- a ``SUPPORTED`` claim must carry a quote that really occurs in the context (after normalising whitespace,
  case and full-width forms); otherwise it is downgraded to ``UNSUPPORTED``. A quote found in another chunk
  than the one named is accepted and the chunk id corrected: the claim *is* grounded, only the pointer was
  wrong;
- a verdict outside the three known ones counts as ``UNSUPPORTED`` (a judge that hedges has not confirmed
  the claim);
- relevance values are clamped to 0..1, and chunks the model left out score 0 and are flagged.

Those checks, the output parsing and the score formulas live in :mod:`ragwatch.scoring.judges.llm_output`
(pure functions); this module is the client: configuration, the HTTP call, retries, concurrency and cache.

Scores (names from :mod:`ragwatch.scoring.judges.base`):

- ``faithfulness`` = supported / (claims − unverifiable). When nothing verifiable was asserted (no claims,
  or only "the context does not say" / "根据现有信息无法回答") it is **1.0** with
  ``details["faithfulness_basis"] = "no verifiable claims"``: nothing was invented, and a correct refusal
  must not read as a hallucination. A missing or empty answer (a failed request) gets *no* faithfulness
  score, as in the offline judge, so failures do not flatter the rolling means;
- ``hallucination_rate`` = 1.0 when any verifiable claim is UNSUPPORTED (a downgraded or unknown verdict
  included), else 0.0; present exactly when ``faithfulness`` is (both from ``base.claim_scores``);
- ``context_relevance`` = mean graded chunk relevance (0 when nothing was retrieved);
- ``context_precision_{k}`` = mean relevance of the top k, a missing chunk counting 0;
- ``context_precision_ranked_{k}`` = Ragas' rank-aware form with relevance ≥ 0.5 as relevant;
- ``answer_relevance`` as the model rated it (0 for an empty answer).

Operational choices, all because the worker calls judges from a thread pool and retries failed samples:
one shared ``httpx.Client``; a semaphore bounds requests in flight (a burst of samples must not become a
burst of rate-limit errors); 429/5xx/timeouts are retried with capped, fully jittered exponential backoff,
then raised as :class:`JudgeError` so the worker counts the failure and retries the sample later; other 4xx
are configuration problems and raised at once; malformed output is retried once with the same request. An
LRU cache keyed by (judge, model, prompt version, prompt) makes re-scoring an identical sample free. Every
call runs inside :func:`ragwatch.suppress`, so a host that is itself instrumented never records the judge's
traffic as user requests.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import random
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from ragwatch.capture.pricing import Price
from ragwatch.capture.run import suppress
from ragwatch.errors import ConfigError, RagwatchError
from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.base import (
    ANSWER_RELEVANCE,
    CONTEXT_RELEVANCE,
    Verdict,
    claim_scores,
    context_precision,
    context_precision_ranked,
)
from ragwatch.scoring.judges.llm_output import (
    _VERDICTS,
    EMPTY_ANSWER,
    NO_ANSWER,
    NO_VERIFIABLE_CLAIMS,
    SUPPORTED,
    UNKNOWN_VERDICT,
    UNSUPPORTED,
    UNVERIFIABLE,
    _check_quote,
    _clamp,
    _context_precision,
    _context_precision_ranked,
    _extract,
    _Malformed,
    _normalise,
    _Output,
    _usage,
)
from ragwatch.scoring.judges.llm_prompts import PROMPT_VERSION, SYSTEM_PROMPT, render_user_prompt
from ragwatch.scoring.judges.lru import LRUCache

__all__ = ["SUPPORTED", "UNSUPPORTED", "UNVERIFIABLE", "JudgeError", "LLMJudge"]

log = logging.getLogger("ragwatch.judges.llm")

#: Version of the scoring code (post-processing and formulas); bump when they change what a score means.
JUDGE_VERSION = "1"

_RETRYABLE_STATUS = frozenset({408, 429})  # plus every 5xx
_ENV_KEYS = ("RAGWATCH_JUDGE_API_KEY", "OPENAI_API_KEY")
_MAX_ERROR_BODY = 300


class JudgeError(RagwatchError):
    """The judge could not produce a verdict for this sample (endpoint down, rate-limited past the retry
    budget, misconfigured, or answering with unusable output). The worker counts it and retries the sample
    later; the message never contains the API key."""


def _price(value: Any) -> Price | None:
    """``price`` as a :class:`~ragwatch.capture.pricing.Price`: accepts one, an ``(input, output)`` pair or a mapping
    with ``input``/``output`` (USD per 1M tokens)."""
    if value is None:
        return None
    if isinstance(value, Price):
        price = value
    elif isinstance(value, Mapping) and {"input", "output"} <= set(value) and set(value) <= {"input", "output"}:
        price = Price(input=value["input"], output=value["output"])
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        price = Price(input=value[0], output=value[1])
    else:
        raise ConfigError("LLMJudge price must be a Price, an (input, output) pair or {'input': …, 'output': …}")
    for name in ("input", "output"):
        rate = getattr(price, name)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate < 0:
            raise ConfigError(f"LLMJudge price {name} must be a non-negative number (USD per 1M tokens)")
    return price


def _int_at_least(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"LLMJudge {name} must be an integer >= {minimum}, got {value!r}")
    return value


def _seconds(name: str, value: Any, *, positive: bool) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        raise ConfigError(f"LLMJudge {name} must be a {'positive' if positive else 'non-negative'} number of seconds")
    return float(value)


# ------------------------------------------------------------------------------------------------ judge


class LLMJudge:
    """Judge faithfulness, context relevance, Context Precision@K and answer relevance with an LLM.

    ``LLMJudge("http://127.0.0.1:8000/v1", "qwen2.5-72b-instruct")``. The model is required and pinned —
    a judge that silently follows a provider's default model changes its numbers without notice — and it
    is part of :attr:`version`. ``api_key=None`` reads ``RAGWATCH_JUDGE_API_KEY`` (and, only when the base
    URL is OpenAI's own, ``OPENAI_API_KEY`` — an OpenAI key is never sent to another host); pass ``""`` to
    send no key (a local server).

    Thread-safe: one instance serves the worker's whole pool. Call :meth:`close` (or use ``with``) at the
    end to release connections.
    """

    name = "llm"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_cap: float = 20.0,
        max_concurrency: int = 8,
        cache_size: int = 10_000,
        price: Price | tuple[float, float] | Mapping[str, float] | None = None,
        k: int = 3,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"LLMJudge base_url must be an http(s) URL, got {base_url!r}")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("LLMJudge model is required (a pinned model id, recorded with every score)")
        if api_key is None:
            names = _ENV_KEYS if urlsplit(base_url).hostname == "api.openai.com" else _ENV_KEYS[:1]
            api_key = next((os.environ[n] for n in names if os.environ.get(n)), "")
        if not isinstance(api_key, str):
            raise ConfigError("LLMJudge api_key must be a string")
        self.base_url = base_url.rstrip("/")
        self.model = model.strip()
        self.timeout = _seconds("timeout", timeout, positive=True)
        self.max_retries = _int_at_least("max_retries", max_retries, 0)
        self.backoff_base = _seconds("backoff_base", backoff_base, positive=False)
        self.backoff_cap = _seconds("backoff_cap", backoff_cap, positive=False)
        self.max_concurrency = _int_at_least("max_concurrency", max_concurrency, 1)
        self.cache_size = _int_at_least("cache_size", cache_size, 0)
        self.price = _price(price)
        self.k = _int_at_least("k", k, 1)
        self.prompt_version = PROMPT_VERSION
        #: judge code + prompt + model: a change in any of them changes the numbers, so it changes this.
        self.version = f"{JUDGE_VERSION}+prompt.{PROMPT_VERSION}+{self.model}"

        self._api_key = api_key
        self._url = f"{self.base_url}/chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(self.timeout),
            limits=httpx.Limits(max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency),
        )
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self._lock = threading.Lock()
        self._cache = LRUCache(self.cache_size)
        self._totals: dict[str, float] = {
            "requests": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "cache_hits": 0,
            "failures": 0,
        }

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else None
        return (
            f"LLMJudge(base_url={self.base_url!r}, model={self.model!r}, api_key={key}, "
            f"prompt_version={self.prompt_version!r}, k={self.k})"
        )

    def __enter__(self) -> LLMJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the shared HTTP client (its pooled connections)."""
        self._client.close()

    @property
    def usage_totals(self) -> dict[str, float]:
        """A snapshot of what this judge has spent since it was built: HTTP ``requests`` sent (retries
        included), ``input_tokens``, ``output_tokens``, ``cost_usd`` (0 without a ``price``), ``cache_hits``
        and ``failures`` (samples that ended in :class:`JudgeError`)."""
        with self._lock:
            return dict(self._totals)

    # ----------------------------------------------------------------------------------------- scoring

    def score(self, sample: Sample) -> Verdict:
        """Scores for one sample; raises :class:`JudgeError` when no trustworthy verdict could be had."""
        if sample.question is None and sample.answer is None:
            # Sampled with store_text=false: only hashes left the service, and hashes cannot be judged.
            # Not an error — retrying would never help — so an empty verdict says why nothing was scored.
            return Verdict(scores={}, details=self._base_details() | {"skipped": "sample carries no text"})
        chunks = sorted(sample.chunks, key=lambda c: c.rank)
        user = render_user_prompt(sample.question, [(c.id, c.text) for c in chunks], sample.answer)
        key = hashlib.sha256(orjson.dumps([self.name, self.model, PROMPT_VERSION, user])).hexdigest()

        output = self._cache_get(key)
        if output is not None:
            return self._verdict(
                chunks, sample.answer, output, input_tokens=0, output_tokens=0, usage_reported=True, cached=True
            )
        try:
            output, input_tokens, output_tokens, reported = self._complete(user)
        except JudgeError:
            with self._lock:
                self._totals["failures"] += 1
            raise
        self._cache_put(key, output)
        return self._verdict(
            chunks,
            sample.answer,
            output,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usage_reported=reported,
            cached=False,
        )

    def _base_details(self) -> dict[str, Any]:
        return {"model": self.model, "prompt_version": PROMPT_VERSION}

    def _verdict(
        self,
        chunks: list[SampleChunk],
        answer: str | None,
        output: _Output,
        *,
        input_tokens: int,
        output_tokens: int,
        usage_reported: bool,
        cached: bool,
    ) -> Verdict:
        """Check the model's evidence against the sample and compute the scores from what survives."""
        texts: dict[str, list[str]] = {}
        for chunk in chunks:
            texts.setdefault(chunk.id, []).append(_normalise(chunk.text) if chunk.text else "")

        claims: list[dict[str, Any]] = []
        for raw in output.claims:
            claim: dict[str, Any] = {
                "text": raw.text,
                "verdict": raw.verdict,
                "chunk_id": raw.chunk_id,
                "quote": raw.quote,
            }
            if raw.verdict not in _VERDICTS:
                claim["verdict"] = UNSUPPORTED
                claim["downgraded"] = f"{UNKNOWN_VERDICT} {raw.verdict!r}"
            elif raw.verdict == SUPPORTED:
                _check_quote(claim, texts, chunks)
            claims.append(claim)

        counts = {v.lower(): sum(c["verdict"] == v for c in claims) for v in (SUPPORTED, UNSUPPORTED, UNVERIFIABLE)}
        counts["downgraded"] = sum("downgraded" in c for c in claims)
        verifiable = len(claims) - counts["unverifiable"]

        given: dict[str, float] = {}
        for chunk_id, relevance in output.chunks:
            given.setdefault(chunk_id, relevance)  # a repeated id: the first rating stands
        rows: list[dict[str, Any]] = []
        for chunk in chunks:
            row: dict[str, Any] = {"id": chunk.id}
            if chunk.id in given:
                raw_relevance = given[chunk.id]
                row["relevance"] = _clamp(raw_relevance)
                if raw_relevance != row["relevance"]:
                    row["clamped_from"] = raw_relevance
            else:
                row["relevance"] = 0.0
                row["missing"] = True
            rows.append(row)
        relevances = [row["relevance"] for row in rows]

        details = self._base_details()
        scores: dict[str, float] = {}
        if answer is None or not answer.strip():
            # No answer (the request failed) or an empty one: there is nothing to be faithful *to the context*
            # about, and a 1.0 would flatter failed requests in the rolling means. Like the offline judge,
            # report no faithfulness; an empty answer does not address the question (answer relevance 0).
            details["faithfulness_basis"] = NO_ANSWER if answer is None else EMPTY_ANSWER
        else:
            # faithfulness and hallucination_rate as every claim-splitting judge computes them. Nothing
            # checkable asserted (no claims, or only "the context does not say"): nothing was invented, so the
            # answer is faithful (1.0, no hallucination). Scoring it 0 would punish correct refusals; leaving
            # the score out would hide refusals from the rolling means. The basis says why.
            scores.update(claim_scores(counts["supported"], verifiable - counts["supported"]))
            if not verifiable:
                details["faithfulness_basis"] = NO_VERIFIABLE_CLAIMS
        # No chunks retrieved: nothing relevant was retrieved (0), not "unknown".
        scores[CONTEXT_RELEVANCE] = sum(relevances) / len(relevances) if relevances else 0.0
        if not relevances:
            details["context_basis"] = "no chunks retrieved"
        scores[context_precision(self.k)] = _context_precision(relevances, self.k)
        scores[context_precision_ranked(self.k)] = _context_precision_ranked(relevances, self.k)
        if answer is not None:
            scores[ANSWER_RELEVANCE] = _clamp(output.answer_relevance) if answer.strip() else 0.0

        details.update(
            claims=claims,
            claim_counts=counts,
            chunks=rows,
            usage={"input_tokens": input_tokens, "output_tokens": output_tokens},
            cost_usd=self._cost(input_tokens, output_tokens),
            cached=cached,
        )
        if not usage_reported:
            details["usage_reported"] = False
        if answer and answer.strip() and output.answer_relevance != scores[ANSWER_RELEVANCE]:
            details["answer_relevance_clamped_from"] = output.answer_relevance
        missing = [row["id"] for row in rows if row.get("missing")]
        if missing:
            details["missing_chunk_ids"] = missing
        unknown = [chunk_id for chunk_id in given if chunk_id not in texts]
        if unknown:
            details["unknown_chunk_ids"] = unknown
        return Verdict(scores=scores, details=details)

    def _cost(self, input_tokens: int, output_tokens: int) -> float | None:
        if self.price is None:
            return None
        return (input_tokens * self.price.input + output_tokens * self.price.output) / 1_000_000

    # ------------------------------------------------------------------------------------------- cache

    def _cache_get(self, key: str) -> _Output | None:
        output: _Output | None = self._cache.get(key)
        if output is not None:
            with self._lock:
                self._totals["cache_hits"] += 1
        return output

    def _cache_put(self, key: str, output: _Output) -> None:
        self._cache.put(key, output)

    # -------------------------------------------------------------------------------------------- HTTP

    def _complete(self, user: str) -> tuple[_Output, int, int, bool]:
        """Ask the model; one more identical request if the answer is unusable (models occasionally emit
        bad JSON even at temperature 0, and servers batch requests non-deterministically)."""
        payload = orjson.dumps(
            {
                "model": self.model,
                "temperature": 0,
                "response_format": {"type": "json_object"},
                "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
            }
        )
        input_tokens = output_tokens = 0
        reported = True
        problem = ""
        for attempt in (1, 2):
            response = self._post(payload)
            try:
                data = orjson.loads(response.content)
            except orjson.JSONDecodeError:
                problem = "response body is not JSON"
            else:
                used_in, used_out, was_reported = _usage(data)
                input_tokens += used_in
                output_tokens += used_out
                reported = reported and was_reported
                self._account(used_in, used_out)
                try:
                    return _extract(data), input_tokens, output_tokens, reported
                except _Malformed as exc:
                    problem = str(exc)
            if attempt == 1:
                log.info("ragwatch llm judge: unusable output (%s); asking once more", problem)
        raise JudgeError(self._scrub(f"llm judge ({self.model}): {problem}, twice"))

    def _post(self, payload: bytes) -> httpx.Response:
        """One successful (2xx) response, retrying rate limits, server errors and timeouts with backoff."""
        attempt = 0
        while True:
            retry_after: float | None = None
            with self._lock:
                self._totals["requests"] += 1
            try:
                with self._slots, suppress():
                    response = self._client.post(self._url, content=payload)
            except httpx.TimeoutException:
                reason = f"timed out after {self.timeout:g} s"
            except httpx.TransportError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return response
                if status not in _RETRYABLE_STATUS and status < 500:
                    # 400/401/403/404/422…: the URL, key, model name or request is wrong; retrying cannot help.
                    raise JudgeError(self._scrub(f"llm judge: HTTP {status} from {self._url}: {_snippet(response)}"))
                reason = f"HTTP {status}"
                retry_after = _retry_after(response)
            if attempt >= self.max_retries:
                raise JudgeError(
                    self._scrub(f"llm judge: {reason} from {self._url} (gave up after {attempt + 1} attempts)")
                )
            if retry_after is not None:
                delay = min(retry_after, self.backoff_cap)
            else:  # full jitter: concurrent workers that failed together do not retry together
                delay = random.uniform(0.0, min(self.backoff_cap, self.backoff_base * 2**attempt))
            attempt += 1
            log.info("ragwatch llm judge: %s; retry %d/%d in %.2f s", reason, attempt, self.max_retries, delay)
            time.sleep(delay)

    def _account(self, input_tokens: int, output_tokens: int) -> None:
        cost = self._cost(input_tokens, output_tokens) or 0.0
        with self._lock:
            self._totals["input_tokens"] += input_tokens
            self._totals["output_tokens"] += output_tokens
            self._totals["cost_usd"] += cost

    def _scrub(self, message: str) -> str:
        """Error bodies sometimes echo the credentials sent; never let the key reach a log or a traceback."""
        return message.replace(self._api_key, "***") if self._api_key else message


def _retry_after(response: httpx.Response) -> float | None:
    """A numeric ``Retry-After`` (seconds); the HTTP-date form is rare from APIs and falls back to backoff."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _snippet(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:_MAX_ERROR_BODY] + ("…" if len(text) > _MAX_ERROR_BODY else "")
