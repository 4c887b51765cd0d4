"""Price lookup by model name and USD cost of a call."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ragwatch.capture.pricing import DEFAULT_PRICES, Price, PricingTable
from ragwatch.capture.responses import Usage
from ragwatch.errors import ConfigError

EXPECTED_DEFAULTS = {
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "o3-mini",
    "gpt-3.5-turbo",
    "claude-3-5-sonnet",
    "claude-3-5-haiku",
    "claude-3-7-sonnet",
    "deepseek-chat",
    "deepseek-reasoner",
    "qwen-plus",
    "qwen-turbo",
    "text-embedding-3-small",
    "text-embedding-3-large",
    "text-embedding-ada-002",
}


def test_default_table_covers_the_common_models_with_sane_prices() -> None:
    assert set(DEFAULT_PRICES) == EXPECTED_DEFAULTS
    for name, price in DEFAULT_PRICES.items():
        assert name == name.lower()
        embedding = name.startswith("text-embedding-")  # input tokens only
        assert price.input > 0 and (price.output == 0 if embedding else price.input <= price.output), name
        assert price.cached_input is None or 0 <= price.cached_input < price.input, name


def test_default_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        DEFAULT_PRICES["gpt-4o"] = Price(0, 0)  # type: ignore[index]


LOOKUPS = [
    ("gpt-4o", "gpt-4o"),
    ("GPT-4o", "gpt-4o"),
    ("  gpt-4o\n", "gpt-4o"),
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("gpt-4o-mini", "gpt-4o-mini"),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),  # longest family wins, not gpt-4o
    ("gpt-4.1-2025-04-14", "gpt-4.1"),
    ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
    ("gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
    ("o3-mini-2025-01-31", "o3-mini"),
    ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
    ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
    ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),  # Vertex AI spelling
    ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
    ("claude-3-7-sonnet-20250219", "claude-3-7-sonnet"),
    ("deepseek-chat", "deepseek-chat"),
    ("deepseek-chat:latest", "deepseek-chat"),
    ("deepseek-reasoner", "deepseek-reasoner"),
    ("qwen-plus-latest", "qwen-plus"),
    ("qwen-turbo-2024-11-01", "qwen-turbo"),
    ("gpt-4o@2024-08-06", "gpt-4o"),
    # provider prefixes from gateways
    ("openai/gpt-4o", "gpt-4o"),
    ("openai/gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("Anthropic/claude-3-5-haiku-20241022", "claude-3-5-haiku"),
    ("deepseek/deepseek-reasoner", "deepseek-reasoner"),
]


@pytest.mark.parametrize(("model", "family"), LOOKUPS)
def test_lookup_resolves_spellings_to_families(model: str, family: str) -> None:
    table = PricingTable()
    assert table.lookup(model) is DEFAULT_PRICES[family]
    assert table.lookup(model) is DEFAULT_PRICES[family]  # second time from the cache


@pytest.mark.parametrize(
    "model",
    ["gpt-4", "gpt-4o2", "gpt-4omni", "gpt-4.1x", "gpt", "o3", "llama-3-70b", "claude-3-opus", "", "   ", "/"],
)
def test_unknown_models(model: str) -> None:
    table = PricingTable()
    assert table.lookup(model) is None
    assert table.cost(model, Usage(1000, 1000)) is None  # unknown is not free


def test_non_string_model_is_unknown() -> None:
    assert PricingTable().lookup(None) is None  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ cost

TABLE = PricingTable(
    {
        "cached-model": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
        "plain-model": {"input": 0.5, "output": 1.5},
        "free-cache": Price(input=3.0, output=15.0, cached_input=0.0),
    },
    include_defaults=False,
)

COSTS = [
    # 1000*2.0 + 500*8.0 = 6000 micro-dollars
    ("cached-model", Usage(1000, 500), 0.006),
    # uncached 1200-1024=176 * 2.0 = 352; cached 1024 * 0.5 = 512; output 15 * 8.0 = 120 -> 984
    ("cached-model", Usage(1200, 15, 1024), 0.000984),
    # no cached price: all 1000 input at 0.5 = 500; output 100 * 1.5 = 150 -> 650
    ("plain-model", Usage(1000, 100, 400), 0.00065),
    # uncached 100 * 3.0 = 300; cached 2000 * 0.0 = 0; output 30 * 15.0 = 450 -> 750
    ("free-cache", Usage(2100, 30, 2000), 0.00075),
    # cached above input (garbage): uncached clamps to 0; 150 cached * 0.5 = 75; no output -> 75
    ("cached-model", Usage(100, 0, 150), 0.000075),
    # estimated usage is priced the same way: 4*2.0 + 4*8.0 = 40
    ("cached-model", Usage(4, 4, 0, estimated=True), 0.00004),
    ("cached-model", Usage(0, 0), 0.0),
    # dated spelling of an override resolves by prefix: 1e6 * 0.5 + 1e6 * 1.5 = 2 dollars
    ("plain-model-2025-01-01", Usage(1_000_000, 1_000_000), 2.0),
]


@pytest.mark.parametrize(("model", "usage", "dollars"), COSTS)
def test_cost(model: str, usage: Usage, dollars: float) -> None:
    assert TABLE.cost(model, usage) == pytest.approx(dollars, rel=1e-12, abs=1e-15)


def test_cost_with_default_prices() -> None:
    table = PricingTable()
    # gpt-4o-mini list price 0.15 in / 0.075 cached / 0.60 out:
    # uncached 176 * 0.15 = 26.4; cached 1024 * 0.075 = 76.8; output 15 * 0.60 = 9.0 -> 112.2 micro-dollars
    assert table.cost("gpt-4o-mini-2024-07-18", Usage(1200, 15, 1024)) == pytest.approx(112.2e-6)


# ------------------------------------------------------------------------------------------ overrides


def test_overrides_replace_defaults_and_add_models() -> None:
    table = PricingTable({"gpt-4o": {"input": 1, "output": 2}, "My-Model": Price(0.1, 0.2, 0.05)})
    assert table.lookup("gpt-4o-2024-08-06") == Price(1.0, 2.0, None)
    assert type(table.lookup("gpt-4o").input) is float  # type: ignore[union-attr]
    assert table.lookup("my-model") == Price(0.1, 0.2, 0.05)
    assert table.lookup("MY-MODEL-v2") == Price(0.1, 0.2, 0.05)
    assert table.lookup("gpt-4o-mini") is DEFAULT_PRICES["gpt-4o-mini"]  # the rest of the defaults stay


def test_override_for_a_longer_name_beats_the_default_family() -> None:
    table = PricingTable({"gpt-4o-audio-preview": {"input": 40.0, "output": 80.0}})
    assert table.lookup("gpt-4o-audio-preview-2024-12-17") == Price(40.0, 80.0)
    assert table.lookup("gpt-4o-2024-08-06") is DEFAULT_PRICES["gpt-4o"]


def test_exact_provider_prefixed_override_wins() -> None:
    table = PricingTable({"azure/gpt-4o": {"input": 5.0, "output": 15.0}})
    assert table.lookup("azure/gpt-4o") == Price(5.0, 15.0)
    assert table.lookup("openai/gpt-4o") is DEFAULT_PRICES["gpt-4o"]


def test_settings_style_override_with_null_cached_price() -> None:
    # what a pydantic settings model's model_dump() produces
    table = PricingTable({"m": {"input": 1.0, "output": 2.0, "cached_input": None}}, include_defaults=False)
    assert table.lookup("m") == Price(1.0, 2.0, None)
    assert table.lookup("gpt-4o") is None


BAD_OVERRIDES: list[tuple[str, Any, tuple[str, ...]]] = [
    ("negative", {"m1": {"input": -1, "output": 1}}, ("'m1'", "input")),
    ("nan", {"m1": {"input": 1, "output": math.nan}}, ("'m1'", "output")),
    ("inf", {"m1": {"input": math.inf, "output": 1}}, ("'m1'", "input")),
    ("string", {"m1": {"input": "1.0", "output": 1}}, ("'m1'", "input", "number")),
    ("bool", {"m1": {"input": 1, "output": True}}, ("'m1'", "output", "number")),
    ("none-input", {"m1": {"input": None, "output": 1}}, ("'m1'", "input")),
    ("negative-cached", {"m1": {"input": 1, "output": 1, "cached_input": -0.5}}, ("'m1'", "cached_input")),
    ("unknown-field", {"m1": {"input": 1, "output": 1, "cached": 0.5}}, ("'m1'", "'cached'", "unknown")),
    ("missing-output", {"m1": {"input": 1}}, ("'m1'", "'output'", "missing")),
    ("price-negative", {"m1": Price(input=-2.0, output=1.0)}, ("'m1'", "input")),
    ("price-nan-cached", {"m1": Price(1.0, 1.0, math.nan)}, ("'m1'", "cached_input")),
    ("not-a-price", {"m1": 3.0}, ("'m1'", "float")),
    ("empty-name", {"": {"input": 1, "output": 1}}, ("model name",)),
    ("non-str-name", {5: {"input": 1, "output": 1}}, ("model name", "5")),
    ("not-a-mapping", [("m1", {"input": 1, "output": 1})], ("must map", "list")),
]


@pytest.mark.parametrize(("overrides", "fragments"), [c[1:] for c in BAD_OVERRIDES], ids=[c[0] for c in BAD_OVERRIDES])
def test_bad_overrides_raise_config_error(overrides: Any, fragments: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as info:
        PricingTable(overrides)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


# ------------------------------------------------------------------------------------------ cache


def test_lookup_cache_is_bounded_but_lookups_stay_correct() -> None:
    table = PricingTable()
    for i in range(2000):
        assert table.lookup(f"gpt-4o-mini-ft-{i}") is DEFAULT_PRICES["gpt-4o-mini"]
        assert table.lookup(f"unknown-{i}") is None
    assert len(table._cache) == 1024
    assert table.lookup("gpt-4o-2024-08-06") is DEFAULT_PRICES["gpt-4o"]  # resolved, just not cached
    assert "gpt-4o-2024-08-06" not in table._cache


def test_cache_remembers_unknown_models_too() -> None:
    table = PricingTable()
    assert table.lookup("mystery-model") is None
    assert "mystery-model" in table._cache
