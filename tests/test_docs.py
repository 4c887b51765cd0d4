"""The README documents exactly the public API, every setting and every metric the code defines."""

from __future__ import annotations

import re
from pathlib import Path

import ragwatch
from ragwatch.metrics.catalog import METRIC_NAMES
from ragwatch.settings import Settings

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def section(name: str) -> str:
    match = re.search(rf"<!-- {name}:start -->(.*?)<!-- {name}:end -->", README, re.S)
    assert match, f"README lacks the {name} section"
    return match.group(1)


def test_public_api_matches_readme() -> None:
    documented = set(re.findall(r"`([A-Za-z_]+)`", section("api")))
    assert documented == set(ragwatch.__all__)


def test_every_setting_is_documented_with_its_env_name() -> None:
    table = section("settings-table")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| `(\w+)` \|", table, re.M)}
    assert set(rows) == set(Settings.model_fields)
    assert all(env == f"RAGWATCH_{name.upper()}" for name, env in rows.items())


def test_readme_names_only_metrics_the_code_defines() -> None:
    mentioned = set(re.findall(r"\bragwatch_[a-z_]+", README))
    suffixes = ("_bucket", "_count", "_sum")
    bases = {
        m for m in mentioned if m in METRIC_NAMES or (m.endswith(suffixes) and m.rsplit("_", 1)[0] in METRIC_NAMES)
    }
    assert mentioned == bases, f"unknown metric names in README: {sorted(mentioned - bases)}"
    assert mentioned >= METRIC_NAMES, f"undocumented metrics: {sorted(METRIC_NAMES - mentioned)}"
