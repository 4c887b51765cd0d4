"""Every CLI path with its exit code, run as a real subprocess (``python -m ragwatch``): the settings check
every command shares, a Redis that cannot be reached (a closed port), a reader that goes away, the logs and
the text the commands print. The help's completeness is pinned in ``test_cli_help.py``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch import ConfigError
from ragwatch.cli import build_parser
from ragwatch.queue.factory import open_queue
from tests.cli_parsers import expanded_help, subcommands
from tests.scored import scored_records
from tests.servers import free_port, interrupt, lines_until, wait_ready

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "hunter2-secret"


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without any RAGWATCH_* of the machine, plus ``extra``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RAGWATCH_")} | extra


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragwatch", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(**(env or {})),
    )


def store_records(redis_url: str, service: str, n: int = 60) -> None:
    queue = open_queue(redis_url, service)
    records = scored_records(n=n)
    queue.apply_many([(r["sample_id"], orjson.dumps(r), r["scores"], r["created_at"]) for r in records])
    queue.close()


def test_version() -> None:
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
    assert "metrics_port" in out.stderr and "RAGWATCH_METRICS_PORT" in out.stderr


def test_usage_error_exits_2() -> None:
    assert run("no-such-command").returncode == 2


def test_eval_judge_is_reachable_from_the_cli(tmp_path: Path) -> None:
    assert run("eval-judge", "--help").returncode == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\nnot json\n')
    out = run("eval-judge", str(bad))
    assert out.returncode == 2 and "line" in out.stderr


def test_cross_process_commands_refuse_the_in_process_backend() -> None:
    for command in (["worker"], ["health"], ["degrade", "status"], ["report"]):
        out = run(*command, env={"RAGWATCH_REDIS_URL": ""})
        assert out.returncode == 2, command
        assert "RAGWATCH_REDIS_URL" in out.stderr


# -- row 1: RAGWATCH_SAMPLE_RATE=abc ragwatch demo --quick ran and exited 0 ---------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["demo", "--quick", "--no-progress"],
        ["worker", "--burst", "--redis-url", "redis://127.0.0.1:1/0"],
        ["replay", "--url", "http://127.0.0.1:1/ask"],
        ["report", "--jsonl", "scores.jsonl"],
        ["health", "--redis-url", "redis://127.0.0.1:1/0"],
        ["degrade", "status", "--redis-url", "redis://127.0.0.1:1/0"],
        ["config"],
    ],
    ids=lambda c: c[0],
)
def test_a_bad_variable_fails_every_entry_point_with_the_same_line(
    command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's own service sets sample_rate=1.0, which used to hide the bad variable: the demo ran and
    exited 0. Now the command and ``RagWatch(...)`` (given the same setting as an argument) fail alike."""
    monkeypatch.setenv("RAGWATCH_SAMPLE_RATE", "abc")
    with pytest.raises(ConfigError) as raised:
        ragwatch.RagWatch("svc", sample_rate=1.0, registry=CollectorRegistry())
    expected = f"ragwatch: configuration error: {raised.value}"
    assert "RAGWATCH_SAMPLE_RATE" in expected

    out = run(*command, env={"RAGWATCH_SAMPLE_RATE": "abc"})
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stderr.splitlines() == [expected]
    assert out.stdout == ""


# -- row 2: ragwatch demo --port 8000 (no --serve) ignored --port ---------------------------------------------


def test_demo_port_implies_serve(tmp_path: Path) -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "ragwatch", "demo", "--quick", "--port", str(port), "--no-progress"]
    env = clean_env(PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        printed = lines_until(proc, "still serving")
        assert any(f"http://127.0.0.1:{port}/dashboard" in line for line in printed), "".join(printed)
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
    finally:
        interrupt(proc)


# -- row 3: an unreachable Redis: 190 lines, two tracebacks, ~20 s (demo); retries forever (worker --burst) ---


@pytest.mark.parametrize(
    "command",
    [["worker", "--burst"], ["demo", "--quick", "--no-progress"], ["report"], ["health"], ["degrade", "status"]],
    ids=lambda c: c[0],
)
def test_an_unreachable_redis_fails_at_once_in_one_line(command: list[str]) -> None:
    port = free_port()  # bound, then released: nothing listens there
    url = f"redis://:{PASSWORD}@127.0.0.1:{port}/0"
    out = run(*command, env={"RAGWATCH_REDIS_URL": url}, timeout=30)
    assert out.returncode == 1, out.stderr[-3000:]
    assert out.stderr.splitlines() == [
        f"ragwatch: queue error: cannot reach the queue at redis://:***@127.0.0.1:{port}/0: "
        f"ConnectionError: Error 111 connecting to 127.0.0.1:{port}. Connection refused."
    ]
    assert PASSWORD not in out.stdout + out.stderr and out.stdout == ""


def test_a_long_running_worker_retries_with_one_line_per_attempt() -> None:
    """Without --burst the worker waits for Redis (compose may start it first): one log line per backoff
    step, never a traceback, and exit 1 if it never got through before --max-seconds."""
    url = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"
    out = run("worker", "--max-seconds", "2", "--port", str(free_port()), env={"RAGWATCH_REDIS_URL": url})
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    retries = [line for line in lines if "queue unavailable" in line and "retrying in" in line]
    assert len(retries) >= 3, out.stderr
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (INFO|WARNING|ERROR) ", line) for line in lines), lines
    assert "Traceback" not in out.stderr and PASSWORD not in out.stderr
    assert json.loads(out.stdout)["queue_reached"] is False


# -- row 4: ragwatch report … | head -2 printed a BrokenPipeError traceback -------------------------------------


def test_a_reader_that_goes_away_ends_the_report_quietly(redis_url: str, tmp_path: Path) -> None:
    store_records(redis_url, "kb-qa")
    cmd = [sys.executable, "-m", "ragwatch", "report", "--redis-url", redis_url, "--service", "kb-qa", "--no-state"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env()
    )
    proc.stdout.close()  # type: ignore[union-attr]  # like head -2 once it has its lines: before the report is written
    _, err = proc.communicate(timeout=60)
    assert err == ""
    assert proc.returncode == 141  # 128 + SIGPIPE, as a shell reports any Unix tool whose reader left


# -- row 5: ragwatch report --url … printed "INFO httpx: HTTP Request" lines ------------------------------------


def test_library_info_lines_only_with_verbose(redis_url: str, tmp_path: Path) -> None:
    store_records(redis_url, "kb-qa", n=30)
    port = free_port()
    env = clean_env(RAGWATCH_WORKER_ADDR="127.0.0.1")
    worker = [sys.executable, "-m", "ragwatch", "--log-level", "WARNING", "worker", "--redis-url", redis_url]
    proc = subprocess.Popen(
        [*worker, "--service", "kb-qa", "--port", str(port), "--max-seconds", "60"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_ready(port, proc)
        url = f"http://127.0.0.1:{port}/dashboard"
        quiet = run("report", "--url", url, "--no-state")
        assert quiet.returncode == 0, quiet.stderr
        assert "30 scored samples" in quiet.stdout
        assert quiet.stderr == ""
        verbose = run("report", "--url", url, "--no-state", "--verbose")
        assert verbose.returncode == 0 and "INFO httpx: HTTP Request: GET" in verbose.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)


# -- row 6: ragwatch config printed the notice as \u5f53\u524d… escapes -----------------------------------------


def test_config_prints_utf8() -> None:
    out = run("config", env={"PYTHONIOENCODING": "utf-8"})
    assert out.returncode == 0
    notice = json.loads(out.stdout)["degraded_notice"]
    assert notice.startswith("当前检索结果")
    assert f'"degraded_notice": "{notice}"' in out.stdout
    assert "\\u" not in out.stdout


# -- row 7: report, health, degrade --help promised --redis-url "else memory://", which all three refuse ---------


@pytest.mark.parametrize("command", [["report"], ["health"], ["degrade", "status"], ["worker"]], ids=lambda c: c[0])
def test_help_promises_no_default_the_command_refuses(command: list[str]) -> None:
    parser = subcommands(build_parser())[command[0]]
    redis_help = next(expanded_help(parser, a) for a in parser._actions if "--redis-url" in a.option_strings)
    assert "else memory://" not in redis_help and "memory:// is refused" in redis_help
    refused = run(*command, env={"RAGWATCH_REDIS_URL": "memory://"})
    assert refused.returncode == 2 and "needs a shared queue" in refused.stderr
