"""The docs say what the code does: generated reference pages are current, every setting, metric and public
name is documented, every Python block of the README and the docs runs, and every example runs.

A Python block that cannot run (it calls a paid API, needs a service) is marked on the line before it with
``<!-- not runnable: the reason -->``; the reason is required.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import ragwatch
from ragwatch.metrics.catalog import METRIC_NAMES
from ragwatch.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
#: The README and every page of the site, the files whose Python blocks must run.
DOCUMENTS = [ROOT / "README.md", *PAGES]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
NOT_RUNNABLE = re.compile(r"<!--\s*not runnable:\s*(?P<reason>.*?)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^```\s*$", re.M | re.S)


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- generated pages ----------------------------------------------------------------------------------------


def test_generated_pages_are_current() -> None:
    stale = [_rel(p) for p in _generator().stale()]
    assert not stale, f"out of date: {stale}; run python scripts/gen_docs.py"


def test_api_page_documents_exactly_the_public_api() -> None:
    documented = set(re.findall(r"^::: ragwatch\.(\w+)$", (DOCS / "api.md").read_text(), re.M))
    assert documented == set(ragwatch.__all__) - {"__version__"}


def test_configuration_page_documents_every_setting_with_its_env_name() -> None:
    page = (DOCS / "configuration.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| `(\w+)` \|", page, re.M)}
    assert set(rows) == set(Settings.model_fields)
    assert all(env == f"RAGWATCH_{name.upper()}" for name, env in rows.items())


def test_metrics_page_documents_every_metric() -> None:
    rows = set(re.findall(r"^\| `(ragwatch_\w+)` \|", (DOCS / "metrics.md").read_text(), re.M))
    assert rows == METRIC_NAMES


#: cli.md quotes the parsers' defaults, where ragwatch_replay is the Pushgateway job name, not a metric.
@pytest.mark.parametrize("path", [d for d in DOCUMENTS if d.name != "cli.md"], ids=_rel)
def test_docs_name_only_metrics_the_code_defines(path: Path) -> None:
    mentioned = set(re.findall(r"\bragwatch_[a-z_]+", path.read_text()))
    suffixes = ("_bucket", "_count", "_sum")
    known = {
        m for m in mentioned if m in METRIC_NAMES or (m.endswith(suffixes) and m.rsplit("_", 1)[0] in METRIC_NAMES)
    }
    assert mentioned == known, f"unknown metric names: {sorted(mentioned - known)}"


# -- code blocks --------------------------------------------------------------------------------------------


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """Each Python block of a Markdown text: (line of its first code line, code, reason it is not runnable)."""
    blocks = []
    for match in FENCE.finditer(text):
        if match.group("lang") not in ("python", "py"):
            continue
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUNNABLE.search(before)
        line = text.count("\n", 0, match.start("body")) + 1
        blocks.append((line, match.group("body"), marker.group("reason") if marker else None))
    return blocks


def test_block_reader_sees_fences_and_markers() -> None:
    text = "x\n```python\na = 1\n```\n\n<!-- not runnable: calls a paid API -->\n```py\nb()\n```\n```bash\nls\n```\n"
    assert python_blocks(text) == [(3, "a = 1\n", None), (8, "b()\n", "calls a paid API")]


#: Runs a document's blocks in order in one namespace, as a reader pasting them into one session would; the
#: blank lines put in front make a traceback's line numbers those of the Markdown file.
RUNNER = """
import json, sys
path, blocks = sys.argv[1], json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
for line, code in blocks:
    exec(compile("\\n" * (line - 1) + code, path, "exec"), namespace)
"""


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGWATCH_", "PROMETHEUS_MULTIPROC"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    # blocks may build an SDK client, as a reader's code does; none may call a hosted API (those are marked
    # not runnable), so a placeholder key is all a client's constructor needs
    env["OPENAI_API_KEY"] = "sk-placeholder-for-docs"
    return env


@pytest.mark.parametrize("path", DOCUMENTS, ids=_rel)
def test_python_blocks_run(path: Path, tmp_path: Path) -> None:
    blocks = python_blocks(path.read_text())
    unexplained = [line for line, _, reason in blocks if reason == ""]
    assert not unexplained, f"{_rel(path)}: 'not runnable' without a reason at lines {unexplained}"
    runnable = [(line, code) for line, code, reason in blocks if reason is None]
    if not runnable:
        return
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(path)],
        input=json.dumps(runnable),
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"a Python block of {_rel(path)} failed:\n{done.stderr[-4000:]}"


# -- examples -----------------------------------------------------------------------------------------------


def _requires(example: Path) -> list[str]:
    first = example.read_text().split("\n", 1)[0]
    match = re.fullmatch(r"# requires: ragwatch(?:\[(?P<extras>[\w,-]+)\])?(?:\s.*)?", first)
    assert match, f"{_rel(example)} must state its requirements in its first line: # requires: ragwatch[extras]"
    return match.group("extras").split(",") if match.group("extras") else []


def test_examples_exist_and_name_real_extras() -> None:
    assert EXAMPLES, "examples/ holds no script"
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^([\w-]+) = \[", section, re.M))
    assert {"examples", "docs", "test"} <= extras
    for example in EXAMPLES:
        assert set(_requires(example)) <= extras, f"{_rel(example)} names an extra pyproject.toml lacks"


@pytest.mark.parametrize("example", EXAMPLES, ids=_rel)
def test_example_runs(example: Path, tmp_path: Path) -> None:
    _requires(example)
    done = subprocess.run(
        [sys.executable, str(example)], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (
        f"{_rel(example)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
