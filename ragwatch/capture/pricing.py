"""Turn token usage into an estimated USD cost per LLM call.

Cost is usually the first thing a RAG service owner asks about and the last thing the provider reports per
request, so ragwatch computes it from :class:`~ragwatch.capture.responses.Usage` and a price table. Prices change
and contracts differ, hence the built-in table is only a starting point that deployments override.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ragwatch.errors import ConfigError

if TYPE_CHECKING:
    from ragwatch.capture.responses import Usage

__all__ = ["DEFAULT_PRICES", "Price", "PricingTable"]


@dataclass(frozen=True, slots=True)
class Price:
    """List price of one model in USD per million tokens, the unit providers publish prices in.

    ``cached_input`` is the discounted rate for prompt-cache hits; ``None`` means the provider gives no
    discount (or it is unknown), so cached tokens cost the full ``input`` rate rather than nothing.
    """

    input: float
    output: float
    cached_input: float | None = None


# Public list prices (USD per 1M tokens, standard tier, no batch discount) as known at the time of writing.
# They go stale: override them through PricingTable(overrides=...) rather than trusting them for invoicing.
# Names are the undated model families; dated snapshots ("gpt-4o-2024-08-06") resolve to them by prefix.
DEFAULT_PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # OpenAI
        "gpt-4o": Price(input=2.50, output=10.00, cached_input=1.25),
        "gpt-4o-mini": Price(input=0.15, output=0.60, cached_input=0.075),
        "gpt-4.1": Price(input=2.00, output=8.00, cached_input=0.50),
        "gpt-4.1-mini": Price(input=0.40, output=1.60, cached_input=0.10),
        "gpt-4.1-nano": Price(input=0.10, output=0.40, cached_input=0.025),
        "o3-mini": Price(input=1.10, output=4.40, cached_input=0.55),
        "gpt-3.5-turbo": Price(input=0.50, output=1.50),
        # OpenAI embeddings: input tokens only
        "text-embedding-3-small": Price(input=0.02, output=0.0),
        "text-embedding-3-large": Price(input=0.13, output=0.0),
        "text-embedding-ada-002": Price(input=0.10, output=0.0),
        # Anthropic; cached_input is the cache-read rate (cache writes cost more and are billed as input here)
        "claude-3-5-sonnet": Price(input=3.00, output=15.00, cached_input=0.30),
        "claude-3-5-haiku": Price(input=0.80, output=4.00, cached_input=0.08),
        "claude-3-7-sonnet": Price(input=3.00, output=15.00, cached_input=0.30),
        # DeepSeek, after the V3.2 price cut (previously chat 0.27/1.10/0.07, reasoner 0.55/2.19/0.14)
        "deepseek-chat": Price(input=0.28, output=0.42, cached_input=0.028),
        "deepseek-reasoner": Price(input=0.28, output=0.42, cached_input=0.028),
        # Alibaba Cloud Model Studio, international (USD) list price, lowest context tier, non-thinking mode
        "qwen-plus": Price(input=0.40, output=1.20),
        "qwen-turbo": Price(input=0.05, output=0.20),
    }
)

_PRICE_FIELDS = ("input", "output", "cached_input")
_SUFFIX_SEPARATORS = "-@:"  # gpt-4o-2024-08-06, claude-3-5-sonnet-v2@20241022, deepseek-chat:latest
_CACHE_LIMIT = 1024
_MAX_NAME_CHARS = 128  # longer model names are resolved by their first 128 characters
_MISSING: Any = object()


class PricingTable:
    """Resolve model names to prices and price calls.

    Model names arrive in many spellings for one price (dated snapshots, ``-latest`` aliases, gateway
    prefixes such as ``openai/``), so lookup falls back from an exact match to a provider-stripped one and
    then to the longest known family name. Resolutions are cached because the same few names recur on
    every request; the cache stops growing at 1024 names so a caller that puts unbounded strings in the
    model field cannot turn it into a memory leak.
    """

    __slots__ = ("_cache", "_names", "_prices")

    def __init__(
        self,
        overrides: Mapping[str, Price | Mapping[str, float]] | None = None,
        *,
        include_defaults: bool = True,
    ) -> None:
        prices: dict[str, Price] = dict(DEFAULT_PRICES) if include_defaults else {}
        if overrides is not None:
            if not isinstance(overrides, Mapping):
                kind = type(overrides).__name__
                raise ConfigError(f"pricing overrides must map model names to prices, got {kind}")
            for model, spec in overrides.items():
                if not isinstance(model, str) or not model.strip():
                    raise ConfigError(f"pricing override has an invalid model name: {model!r}")
                prices[model.strip().lower()] = _validated_price(model, spec)
        self._prices = prices
        # Longest first, so the first prefix hit is the most specific family (gpt-4o-mini before gpt-4o).
        self._names = sorted(prices, key=len, reverse=True)
        self._cache: dict[str, Price | None] = {}

    def lookup(self, model: str) -> Price | None:
        """Return the price for ``model``, or None when no known name matches it."""
        if not isinstance(model, str):
            return None
        found = self._cache.get(model, _MISSING)
        if found is not _MISSING:
            return found
        found = self._resolve(model[:_MAX_NAME_CHARS])
        if len(self._cache) < _CACHE_LIMIT and len(model) <= _MAX_NAME_CHARS:
            self._cache[model] = found  # a long name is resolved but not kept: 1024 of them could be 100 MB
        return found

    def cost(self, model: str, usage: Usage) -> float | None:
        """Return the USD cost of one call, or None for an unknown model (unknown is not free)."""
        price = self._cache.get(model, _MISSING)  # lookup()'s cache, read inline: this runs per LLM call
        if price is _MISSING:
            price = self.lookup(model)
        if price is None:
            return None
        cached = usage.cached_input_tokens
        cached = cached if cached > 0 else 0
        uncached = usage.input_tokens - cached
        uncached = uncached if uncached > 0 else 0
        cached_rate = price.input if price.cached_input is None else price.cached_input
        return (uncached * price.input + cached * cached_rate + usage.output_tokens * price.output) / 1e6

    def _resolve(self, model: str) -> Price | None:
        name = model.strip().lower()
        if not name:
            return None
        prices = self._prices
        price = prices.get(name)
        if price is not None:
            return price
        # Gateways (OpenRouter, LiteLLM) prefix the provider: "openai/gpt-4o". Exact names above win, so an
        # override can still price one gateway's spelling differently.
        bare = name.rpartition("/")[2]
        if bare != name:
            price = prices.get(bare)
            if price is not None:
                return price
        for candidate in (name, bare) if bare != name else (name,):
            size = len(candidate)
            for known in self._names:
                cut = len(known)
                if cut < size and candidate[cut] in _SUFFIX_SEPARATORS and candidate.startswith(known):
                    return prices[known]
        return None


def _validated_price(model: str, spec: Any) -> Price:
    """Check an override up front, so a typo fails at start-up instead of skewing costs for weeks."""
    if isinstance(spec, Price):
        values = {field: getattr(spec, field) for field in _PRICE_FIELDS}
    elif isinstance(spec, Mapping):
        values = dict(spec)
        for field in values:
            if field not in _PRICE_FIELDS:
                raise ConfigError(
                    f"price for model {model!r} has unknown field {field!r} (expected input, output, cached_input)"
                )
        for field in ("input", "output"):
            if field not in values:
                raise ConfigError(f"price for model {model!r} is missing field {field!r}")
    else:
        raise ConfigError(
            f"price for model {model!r} must be a Price or a mapping with input and output, got {type(spec).__name__}"
        )
    cached = values.get("cached_input")
    return Price(
        input=_rate(model, "input", values["input"]),
        output=_rate(model, "output", values["output"]),
        cached_input=None if cached is None else _rate(model, "cached_input", cached),
    )


def _rate(model: str, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"price for model {model!r}: {field} must be a number, got {type(value).__name__}")
    rate = float(value)
    if not math.isfinite(rate) or rate < 0:
        raise ConfigError(f"price for model {model!r}: {field} must be a finite number >= 0, got {value!r}")
    return rate
