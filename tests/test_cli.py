"""Every CLI path with its exit code, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragwatch", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_version() -> None:
    import ragwatch

    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"ragwatch {ragwatch.__version__}"


def test_config_prints_validated_settings(tmp_path: Path) -> None:
    config = tmp_path / "rw.yaml"
    config.write_text("service: kb-qa\n")
    out = run("config", "--config-file", str(config), env={"RAGWATCH_TRACING": "false"})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["service"] == "kb-qa" and data["tracing"] is False


def test_bad_config_exits_2_with_the_field_name() -> None:
    out = run("config", env={"RAGWATCH_METRICS_PORT": "not-a-port"})
    assert out.returncode == 2
    assert "metrics_port" in out.stderr


def test_usage_error_exits_2() -> None:
    assert run("no-such-command").returncode == 2


def test_eval_judge_is_reachable_from_the_cli(tmp_path: Path) -> None:
    assert run("eval-judge", "--help").returncode == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\nnot json\n')
    out = run("eval-judge", str(bad))
    assert out.returncode == 2 and "line" in out.stderr


def test_cross_process_commands_refuse_the_in_process_backend() -> None:
    for command in (["worker"], ["health"], ["degrade", "status"]):
        out = run(*command, env={"RAGWATCH_REDIS_URL": ""})
        assert out.returncode == 2, command
        assert "RAGWATCH_REDIS_URL" in out.stderr
