"""Deployment artefacts (grafana/, exporters/, helm/) checked with the real tools: promtool, helm,
kubernetes-validate, JSON Schema. Binaries and optional packages skip locally when absent and fail under
CI=true (scripts/test.sh installs prometheus for promtool and fetches helm with scripts/get_helm.sh)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ragwatch.metrics.catalog import METRIC_NAMES
from ragwatch.mode.degrade import HIGHER_IS_WORSE
from ragwatch.report.build import METRICS
from ragwatch.settings import HALLUCINATION_RATE_LINE, Settings

from .servers import require_binary

ROOT = Path(__file__).resolve().parent.parent
GRAFANA = ROOT / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "ragwatch-overview.json"
DASHBOARD_SCHEMA = GRAFANA / "schema" / "dashboard-subset.schema.json"
GRAFANA_ALERTS = GRAFANA / "provisioning" / "alerting" / "ragwatch-alerts.yaml"
PROM = ROOT / "exporters" / "prometheus"
RULES = PROM / "rules" / "ragwatch.rules.yml"
RULE_TESTS = PROM / "tests" / "ragwatch.test.yml"
BASELINE_TESTS = PROM / "tests" / "ragwatch-baseline.test.yml"  # a week of history, evaluated every 10 min
RULE_TEST_FILES = sorted((PROM / "tests").glob("*.test.yml"))
BASELINE = "service_metric:ragwatch_window_value:avg_7d"
DRIFT_ALERTS = ("RagwatchWindowUnderBaseline", "RagwatchWindowOverBaseline")
OTEL = ROOT / "exporters" / "otel-collector" / "config.yaml"
CHART = ROOT / "helm" / "ragwatch"
ALL_FEATURES = CHART / "ci" / "all-features-values.yaml"
KUBERNETES_VERSION = "1.33.0"  # a current release; kubernetes-validate ships its schemas
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
IN_CI = os.environ.get("CI") == "true"

# a ragwatch metric name not part of a recording-rule name (level:metric:operation)
METRIC_RE = re.compile(r"(?<![\w:])ragwatch_[a-z0-9_]+(?![\w:])")
RECORDED_RE = re.compile(r"(?<![\w:])[a-z_]+:ragwatch_[a-z0-9_]+:[a-z0-9_]+(?![\w:])")


def require_module(name: str) -> Any:
    """Skip locally when a test-only package is missing; fail under CI, where the test extras install it."""
    import importlib.util

    if IN_CI and importlib.util.find_spec(name) is None:
        pytest.fail(f"{name} is required in CI (add it to the test extras)")
    return pytest.importorskip(name)


def require_helm() -> str:
    local = ROOT / ".tools" / "helm"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    if shutil.which("helm") is None and not IN_CI:
        pytest.skip("helm not found: run bash scripts/get_helm.sh")
    return require_binary("helm")


# -- collecting the PromQL of every artefact --------------------------------------------------------------


def _walk_exprs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from _walk_exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk_exprs(item)


def dashboard_exprs() -> list[str]:
    return list(_walk_exprs(json.loads(DASHBOARD.read_text())))


def grafana_alert_exprs() -> list[str]:
    doc = yaml.safe_load(GRAFANA_ALERTS.read_text())
    return [
        query["model"]["expr"]
        for group in doc["groups"]
        for rule in group["rules"]
        for query in rule["data"]
        if query["datasourceUid"] != "__expr__"
    ]


def rule_groups(path: Path = RULES) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text())["groups"]


def rules_exprs() -> list[str]:
    return [rule["expr"] for group in rule_groups() for rule in group["rules"]]


def recorded_names() -> set[str]:
    return {rule["record"] for group in rule_groups() for rule in group["rules"] if "record" in rule}


def rule_tests() -> list[dict[str, Any]]:
    return [test for path in RULE_TEST_FILES for test in yaml.safe_load(path.read_text())["tests"]]


def rule_test_series() -> list[str]:
    found = []
    for test in rule_tests():
        found += [s["series"] for s in test.get("input_series", [])]
        found += [t["expr"] for t in test.get("promql_expr_test", [])]
        found += [s["labels"] for t in test.get("promql_expr_test", []) for s in t.get("exp_samples", [])]
    return found


def known(name: str) -> bool:
    if name in METRIC_NAMES:
        return True
    return any(name.endswith(suffix) and name[: -len(suffix)] in METRIC_NAMES for suffix in HISTOGRAM_SUFFIXES)


def unknown_names(texts: list[str]) -> set[str]:
    recorded = recorded_names()
    bad = {name for text in texts for name in METRIC_RE.findall(text) if not known(name)}
    bad |= {name for text in texts for name in RECORDED_RE.findall(text) if name not in recorded}
    return bad


def render(helm: str, *extra: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [helm, "template", "rw", str(CHART), "--namespace", "rag", *extra],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def promtool(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    binary = require_binary("promtool")
    return subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


# -- metric names ---------------------------------------------------------------------------------------


def test_artefacts_reference_real_metric_names() -> None:
    texts = {
        "dashboard": dashboard_exprs(),
        "grafana alerts": grafana_alert_exprs(),
        "prometheus rules": rules_exprs(),
        "rule tests": rule_test_series(),
    }
    for where, exprs in texts.items():
        assert exprs, f"no PromQL found in {where}"
        assert not unknown_names(exprs), f"{where} uses metrics ragwatch does not export: {unknown_names(exprs)}"


def test_unknown_names_are_caught() -> None:  # the check above is not vacuous
    assert unknown_names(["rate(ragwatch_no_such_metric_total[5m])"]) == {"ragwatch_no_such_metric_total"}
    assert unknown_names(["ragwatch_score_bucket + service:ragwatch_queue_lag:max"]) == set()
    assert unknown_names(["service:ragwatch_nothing:rate1m"]) == {"service:ragwatch_nothing:rate1m"}


def test_replay_panels_and_alert_follow_the_replay_metrics() -> None:
    replay = sorted(n for n in METRIC_NAMES if n.startswith("ragwatch_replay_"))
    used = " ".join(dashboard_exprs() + grafana_alert_exprs() + rules_exprs())
    if replay:
        assert "ragwatch_replay_availability" in used
        assert "ragwatch_replay_retrieval" in used


# -- PromQL and Prometheus files, checked by promtool -----------------------------------------------------

GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$service": ".*"}


def _as_promql(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unhandled Grafana variable in {expr!r}"
    return expr


def test_dashboard_and_grafana_alert_promql_parses(tmp_path: Path) -> None:
    exprs = [_as_promql(e) for e in dashboard_exprs() + grafana_alert_exprs()]
    rules = [{"record": f"ragwatch_check:expr{i}:parse", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "exprs.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "parse", "rules": rules}]}))
    out = promtool("check", "rules", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules)} rules found" in out.stdout


def test_promtool_rejects_bad_promql(tmp_path: Path) -> None:  # the parse check is not vacuous
    path = tmp_path / "bad.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "a:b:c", "expr": "sum(("}]}]}))
    assert promtool("check", "rules", str(path)).returncode != 0


def test_prometheus_rules_check() -> None:
    out = promtool("check", "rules", str(RULES))
    assert out.returncode == 0, out.stdout + out.stderr


def test_prometheus_rules_unit_tests_fire_and_resolve() -> None:
    assert {RULE_TESTS, BASELINE_TESTS} <= set(RULE_TEST_FILES)
    out = promtool("test", "rules", *(str(p.relative_to(PROM)) for p in RULE_TEST_FILES), cwd=PROM)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("SUCCESS") == len(RULE_TEST_FILES)
    # every alert is tested firing and resolved
    alerts = {r["alert"] for g in rule_groups() for r in g["rules"] if "alert" in r}
    tests = rule_tests()
    fired = {c["alertname"] for t in tests for c in t.get("alert_rule_test", []) if c["exp_alerts"]}
    resolved = {c["alertname"] for t in tests for c in t.get("alert_rule_test", []) if not c["exp_alerts"]}
    assert alerts == fired == resolved


def _alert(name: str) -> dict[str, Any]:
    [rule] = [r for g in rule_groups() for r in g["rules"] if r.get("alert") == name]
    return rule


def test_the_rules_hold_rates_of_bad_answers_to_a_ceiling() -> None:
    """Rules and Grafana alerts pick a window's direction by name (``metric=~"…"``): the same names as the
    code's HIGHER_IS_WORSE, so a rate of bad outcomes is never alerted on for falling, nor a score for rising."""
    exprs = rules_exprs() + grafana_alert_exprs()
    named = {m for e in exprs for m in re.findall(r'metric[!=]~"([^"]*)"', e)}
    assert named == {"|".join(sorted(HIGHER_IS_WORSE))}
    assert "hallucination_rate" in HIGHER_IS_WORSE
    high = _alert("RagwatchHallucinationRateHigh")["expr"]
    assert 'ragwatch_window_value{metric="hallucination_rate"}' in high and "\n  > on (service)" in high
    # its line is the workers' exported setting, whose default is the one provisional value
    assert 'ragwatch_sla_threshold{metric="hallucination_rate"}' in high
    assert Settings().health_thresholds["hallucination_rate"] == HALLUCINATION_RATE_LINE
    assert "hallucination_rate" in METRICS


def test_every_window_has_a_7_day_baseline_and_drift_alerts() -> None:
    [baseline] = [r for g in rule_groups() for r in g["rules"] if r.get("record") == BASELINE]
    assert baseline["expr"] == "avg_over_time(service_metric:ragwatch_window_value:max[7d])"
    for name in DRIFT_ALERTS:
        rule = _alert(name)
        assert BASELINE in rule["expr"] and "on (service, metric)" in rule["expr"]
        assert rule["expr"].rstrip().endswith("> 0.10"), "the margin is one number at the end of each alert"
    grafana = [e for e in grafana_alert_exprs() if "[7d:5m]" in e]
    assert len(grafana) == len(DRIFT_ALERTS)


def test_prometheus_config_check() -> None:
    out = promtool("check", "config", str(PROM / "prometheus.yml"))
    assert out.returncode == 0, out.stdout + out.stderr


def test_grafana_alerts_match_prometheus_alerts() -> None:
    doc = yaml.safe_load(GRAFANA_ALERTS.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    assert len({r["uid"] for r in rules}) == len(rules)
    alerts = [r for g in rule_groups() for r in g["rules"] if "alert" in r]
    assert len(rules) == len(alerts)
    for rule in rules:
        refs = {q["refId"]: q for q in rule["data"]}
        assert rule["condition"] in refs
        assert refs[rule["condition"]]["model"]["type"] == "threshold"
        assert rule["labels"]["severity"] in {"critical", "warning"}


# -- Grafana dashboard ------------------------------------------------------------------------------------


def test_dashboard_validates_against_the_pinned_schema() -> None:
    jsonschema = require_module("jsonschema")
    schema = json.loads(DASHBOARD_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    dashboard = json.loads(DASHBOARD.read_text())
    jsonschema.Draft202012Validator(schema).validate(dashboard)
    broken = json.loads(DASHBOARD.read_text())
    del broken["panels"][1]["targets"][0]["refId"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(broken)


def test_dashboard_validates_against_grafanas_own_schema() -> None:
    """grafana/schema/dashboard.schema.json is generated from @grafana/schema's TypeScript types
    (scripts/gen_grafana_schema.sh); the subset schema above adds what ragwatch itself requires."""
    jsonschema = require_module("jsonschema")
    schema = json.loads((GRAFANA / "schema" / "dashboard.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    dashboard = json.loads(DASHBOARD.read_text())
    jsonschema.Draft7Validator(schema).validate(dashboard)
    broken = json.loads(DASHBOARD.read_text())
    broken["templating"]["list"][0]["current"] = {"selected": True}  # Grafana requires text and value
    broken["panels"][0]["gridPos"]["h"] = "tall"
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(broken))
    assert {e.json_path for e in errors} >= {"$.templating.list[0].current", "$.panels[0]"}  # panels: anyOf


def test_dashboard_layout_and_content() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        for dx in range(grid["w"]):
            for dy in range(grid["h"]):
                cell = (grid["x"] + dx, grid["y"] + dy)
                assert cell not in cells, f"panel {panel['title']!r} overlaps another"
                cells.add(cell)
        for target in panel.get("targets", []):
            if "ragwatch_internal_errors_total" not in target["expr"] and "vector(" not in target["expr"]:
                assert '$service"' in target["expr"], f"{panel['title']}: {target['expr']} ignores $service"
    used = " ".join(dashboard_exprs())
    for name in (
        "ragwatch_window_value",
        "ragwatch_sla_threshold",
        "ragwatch_degraded",
        "ragwatch_diagnoses_total",
        "ragwatch_queue_lag",
        "ragwatch_dead_letters",
        "ragwatch_scoring_duration_seconds_bucket",
        "ragwatch_time_to_first_token_seconds_bucket",
        "ragwatch_cost_usd_total",
        "ragwatch_samples_dropped_total",
        "ragwatch_sampling_decisions_total",
    ):
        assert name in used, name
    # each quality window panel draws its 7-day baseline beside its line, and the rate of hallucinated
    # answers has a panel of its own
    windows = [
        p for p in dashboard["panels"] if any("ragwatch_window_value" in t["expr"] for t in p.get("targets", ()))
    ]
    shown = set()
    for panel in windows:
        [window] = [t["expr"] for t in panel["targets"] if t["expr"].startswith("max by (service) (ragwatch_window")]
        metric = re.search(r'metric="(\w+)"', window).group(1)  # type: ignore[union-attr]
        shown.add(metric)
        assert f"avg_over_time({window}[7d:5m])" in [t["expr"] for t in panel["targets"]], panel["title"]
        lines = [t["expr"] for t in panel["targets"] if "ragwatch_sla_threshold" in t["expr"]]
        assert len(lines) == 1 and f'metric="{metric}"' in lines[0], panel["title"]
    assert shown == {"context_precision_3", "faithfulness", "hallucination_rate"}


def test_grafana_provisioning_files() -> None:
    dashboards = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "ragwatch.yaml").read_text())
    assert dashboards["apiVersion"] == 1 and dashboards["providers"][0]["type"] == "file"
    alerts = yaml.safe_load(GRAFANA_ALERTS.read_text())
    assert alerts["apiVersion"] == 1
    for rule in (r for g in alerts["groups"] for r in g["rules"]):
        assert rule["annotations"]["dashboardUid"] == json.loads(DASHBOARD.read_text())["uid"]


# -- OpenTelemetry collector ------------------------------------------------------------------------------


def test_otel_collector_config() -> None:
    config = yaml.safe_load(OTEL.read_text())
    assert set(config["receivers"]["otlp"]["protocols"]) == {"grpc", "http"}
    assert {"memory_limiter", "batch"} <= set(config["processors"])
    assert "otlp" in config["exporters"] and config["exporters"]["otlp"]["endpoint"]
    traces = config["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    assert traces["processors"][0] == "memory_limiter" and traces["processors"][-1] == "batch"
    assert "otlp" in traces["exporters"]
    for section in ("receivers", "processors", "exporters"):
        for name in traces[section]:
            assert name in config[section], f"pipeline uses undefined {section[:-1]} {name}"
    overlay = yaml.safe_load((OTEL.parent / "spanmetrics.yaml").read_text())
    assert "spanmetrics" in overlay["connectors"]
    assert "spanmetrics" in overlay["service"]["pipelines"]["traces"]["exporters"]


# -- Helm chart -------------------------------------------------------------------------------------------


def test_chart_rules_are_the_exporters_rules() -> None:
    assert (CHART / "files" / "ragwatch.rules.yml").read_text() == RULES.read_text()


@pytest.mark.parametrize("values", [None, ALL_FEATURES], ids=["defaults", "all-features"])
def test_helm_lint_strict(values: Path | None) -> None:
    helm = require_helm()
    extra = ["-f", str(values)] if values else []
    out = subprocess.run([helm, "lint", "--strict", str(CHART), *extra], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("values", [None, ALL_FEATURES], ids=["defaults", "all-features"])
def test_helm_template_validates_against_kubernetes(values: Path | None) -> None:
    helm = require_helm()
    kv = require_module("kubernetes_validate")
    docs = render(helm, *(["-f", str(values)] if values else []))
    group = [d["apiVersion"].split("/")[0] for d in docs]
    builtin = [d for d, g in zip(docs, group, strict=True) if "." not in g or g.endswith(".k8s.io")]  # not CRDs
    assert len(builtin) >= 4
    for doc in builtin:
        kv.validate(doc, KUBERNETES_VERSION, strict=True)
    kinds = {d["kind"] for d in docs}
    assert {"ConfigMap", "Deployment", "Service", "ServiceAccount"} <= kinds
    assert ("Secret" in kinds) == (values is None)  # all-features uses existingSecret


def test_helm_worker_deployment() -> None:
    helm = require_helm()
    docs = render(helm)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"][0] == "worker"
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["ports"][0]["containerPort"] == 9465
    assert container["resources"]["limits"] and container["resources"]["requests"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert set(env) == {"RAGWATCH_REDIS_URL", "RAGWATCH_JUDGE_API_KEY", "RAGWATCH_DASHBOARD_TOKEN"}
    startup = container["startupProbe"]
    assert startup["httpGet"]["path"] == "/livez" and startup["periodSeconds"] * startup["failureThreshold"] >= 300
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    assert container["envFrom"][0]["configMapRef"]["name"] == config["metadata"]["name"]
    assert all(key.startswith("RAGWATCH_") for key in config["data"])
    assert config["data"]["RAGWATCH_WORKER_PORT"] == "9465"
    secret = next(d for d in docs if d["kind"] == "Secret")
    assert env["RAGWATCH_REDIS_URL"]["name"] == secret["metadata"]["name"]
    assert not {"CronJob", "ScaledObject", "ServiceMonitor", "PrometheusRule"} & {d["kind"] for d in docs}


def test_helm_all_features() -> None:
    helm = require_helm()
    docs = {d["kind"]: d for d in render(helm, "-f", str(ALL_FEATURES))}
    container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert {r["name"] for n, r in refs.items() if n != "RAGWATCH_REDIS_PASSWORD"} == {"kb-qa-ragwatch"}
    assert refs["RAGWATCH_REDIS_PASSWORD"] == {"name": "redis-auth", "key": "password"}
    assert "replicas" not in docs["Deployment"]["spec"]  # KEDA owns the replica count
    trigger = docs["ScaledObject"]["spec"]["triggers"][0]
    assert trigger["type"] == "redis-streams"
    assert trigger["metadata"]["stream"] == "ragwatch:{kb-qa}:samples"
    assert trigger["metadata"]["consumerGroup"] == "ragwatch-scorers"
    assert docs["ScaledObject"]["spec"]["scaleTargetRef"]["name"] == docs["Deployment"]["metadata"]["name"]
    assert docs["ScaledObject"]["apiVersion"] == "keda.sh/v1alpha1"
    assert docs["TriggerAuthentication"]["spec"]["secretTargetRef"][0]["parameter"] == "password"
    assert docs["PrometheusRule"]["apiVersion"] == "monitoring.coreos.com/v1"
    assert docs["PrometheusRule"]["spec"]["groups"] == rule_groups()
    assert docs["ServiceMonitor"]["spec"]["endpoints"][0]["port"] == "http-metrics"
    job = docs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert job["containers"][0]["args"][:3] == ["replay", "--url", "http://kb-qa.rag:8000/ask"]
    assert job["restartPolicy"] == "Never"


def test_helm_prometheus_rule_passes_promtool(tmp_path: Path) -> None:
    helm = require_helm()
    docs = {d["kind"]: d for d in render(helm, "-f", str(ALL_FEATURES))}
    path = tmp_path / "helm.rules.yml"
    path.write_text(yaml.safe_dump(docs["PrometheusRule"]["spec"]))
    out = promtool("check", "rules", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert not unknown_names([r["expr"] for g in docs["PrometheusRule"]["spec"]["groups"] for r in g["rules"]])


def test_helm_prometheus_rule_passes_the_rule_unit_tests(tmp_path: Path) -> None:
    """The rules as the chart renders them (through fromYaml / toYaml) fire and resolve like the file."""
    helm = require_helm()
    docs = {d["kind"]: d for d in render(helm, "-f", str(ALL_FEATURES))}
    rules = tmp_path / "helm.rules.yml"
    rules.write_text(yaml.safe_dump(docs["PrometheusRule"]["spec"]))
    names = []
    for path in RULE_TEST_FILES:
        doc = yaml.safe_load(path.read_text())
        doc["rule_files"] = [str(rules)]
        (tmp_path / path.name).write_text(yaml.safe_dump(doc, sort_keys=False))
        names.append(path.name)
    out = promtool("test", "rules", *names, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_helm_schema_rejects_bad_values() -> None:
    helm = require_helm()
    out = subprocess.run(
        [helm, "template", "rw", str(CHART), "--set", "serviceName=bad/name"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode != 0 and "serviceName" in out.stderr
    out = subprocess.run(
        [helm, "template", "rw", str(CHART), "--set", "redis.url="],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode != 0


@pytest.mark.parametrize("enabled", [True, False])
def test_helm_worker_dashboard_switch(enabled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """worker.dashboard reaches the workers as RAGWATCH_DASHBOARD, in the form the settings read."""
    from ragwatch.settings import load_settings

    helm = require_helm()
    extra = [] if enabled else ["--set", "worker.dashboard=false"]
    config = next(d for d in render(helm, *extra) if d["kind"] == "ConfigMap")
    assert config["data"]["RAGWATCH_DASHBOARD"] == str(enabled).lower()
    for name in [k for k in os.environ if k.startswith("RAGWATCH_")]:
        monkeypatch.delenv(name)
    for name, value in config["data"].items():
        monkeypatch.setenv(name, value)
    assert load_settings(None).dashboard is enabled
    out = subprocess.run(
        [helm, "template", "rw", str(CHART), "--set-string", "worker.dashboard=sometimes"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode != 0 and "dashboard" in out.stderr


def _values(tmp_path: Path, values: dict[str, Any]) -> list[str]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return ["-f", str(path)]


def test_helm_redis_password_comes_only_from_a_secret(tmp_path: Path) -> None:
    helm = require_helm()
    out = subprocess.run(
        [helm, "template", "rw", str(CHART), "--set", "redis.url=redis://:hunter2@redis:6379/0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode != 0 and "redis.url" in out.stderr  # a password in plain values is refused
    for url in ("redis://redis:6379/0?password=hunter2", "rediss://redis:6380/0?ssl_cert_reqs=none&PassWord=hunter2"):
        out = subprocess.run(
            [helm, "template", "rw", str(CHART), "--set", f"redis.url={url}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert out.returncode != 0 and "redis.url" in out.stderr, url  # in the query string too (issue 29)
    values = {
        "redis": {"url": "redis://redis:6379/0", "passwordSecret": {"name": "redis-auth", "key": "pw"}},
        "keda": {"enabled": True},
        "replay": {"enabled": True, "url": "http://kb:8000/ask"},
        "judge": {"apiKey": "sk-test"},
    }
    docs = render(helm, *_values(tmp_path, values))
    by_kind = {d["kind"]: d for d in docs}
    worker = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    replay = by_kind["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    worker_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in worker["env"]}
    replay_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in replay["env"]}
    password = {"name": "redis-auth", "key": "pw"}
    assert worker_env["RAGWATCH_REDIS_PASSWORD"] == replay_env["RAGWATCH_REDIS_PASSWORD"] == password
    auth = by_kind["TriggerAuthentication"]["spec"]["secretTargetRef"][0]
    assert {"name": auth["name"], "key": auth["key"]} == password  # KEDA reads the workers' Secret
    assert "RAGWATCH_JUDGE_API_KEY" in worker_env and "RAGWATCH_JUDGE_API_KEY" not in replay_env
    assert "hunter2" not in yaml.safe_dump_all(docs)
    generated = ("probe-secret", "dashboard-token")  # random: may contain any two letters
    assert "pw" not in str({k: v for k, v in by_kind["Secret"]["stringData"].items() if k not in generated})
    values["keda"] = {"enabled": True, "passwordSecret": {"name": "other", "key": "pw"}}
    out = subprocess.run(
        [helm, "template", "rw", str(CHART), *_values(tmp_path, values)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode != 0 and "differ" in out.stderr  # KEDA cannot be given other credentials


def test_helm_network_policies_allow_only_dns_redis_judge_and_scrapes() -> None:
    helm = require_helm()
    docs = render(helm, "-f", str(ALL_FEATURES))
    policies = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}
    worker, replay = policies["rw-ragwatch-worker"], policies["rw-ragwatch-replay"]
    assert worker["policyTypes"] == replay["policyTypes"] == ["Ingress", "Egress"]
    (scrape,) = worker["ingress"]
    assert scrape["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert scrape["ports"] == [{"protocol": "TCP", "port": 9465}]
    assert replay["ingress"] == []

    def ports(rule: dict[str, Any]) -> set[tuple[str, int]]:
        return {(p["protocol"], p["port"]) for p in rule["ports"]}

    dns, redis_rule, judge = worker["egress"]
    assert ports(dns) == {("UDP", 53), ("TCP", 53)}
    assert ports(redis_rule) == {("TCP", 6379), ("TCP", 26379)}
    assert redis_rule["to"][0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "redis"}
    assert ports(judge) == {("TCP", 443)} and "ipBlock" in judge["to"][0]
    assert all(rule.get("to") for rule in worker["egress"])  # no rule open to every destination
    assert replay["egress"][:2] == [dns, redis_rule] and len(replay["egress"]) == 4
    assert {p for rule in replay["egress"][2:] for p in ports(rule)} == {("TCP", 8000), ("TCP", 9091)}
    selector = docs[[d["kind"] for d in docs].index("Deployment")]["spec"]["selector"]["matchLabels"]
    assert worker["podSelector"]["matchLabels"] == selector
    out = subprocess.run(
        [helm, "template", "rw", str(CHART), "--set", "networkPolicy.enabled=true"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode != 0 and "networkPolicy.redis.to" in out.stderr  # never an allow-all by accident


def test_helm_disruption_budget_and_topology_spread() -> None:
    helm = require_helm()
    docs = {d["kind"]: d for d in render(helm)}
    selector = docs["Deployment"]["spec"]["selector"]["matchLabels"]
    pdb = docs["PodDisruptionBudget"]["spec"]
    assert pdb == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    (spread,) = docs["Deployment"]["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert spread["labelSelector"]["matchLabels"] == selector
    assert "PodDisruptionBudget" not in {d["kind"] for d in render(helm, "--set", "podDisruptionBudget.enabled=false")}


@pytest.mark.parametrize("values", [None, ALL_FEATURES], ids=["defaults", "all-features"])
def test_helm_config_map_loads_as_worker_settings(monkeypatch: pytest.MonkeyPatch, values: Path | None) -> None:
    """A worker pod starts with the ConfigMap as its environment: it must load (JUDGES: offline did not)."""
    from ragwatch.settings import load_settings

    docs = render(require_helm(), *(["-f", str(values)] if values else []))
    for name, value in next(d for d in docs if d["kind"] == "ConfigMap")["data"].items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.judges == (("cascade",) if values else ("offline",))


@pytest.mark.parametrize(("timeout", "retries"), [(30, 3), (60, 5)])
def test_helm_liveness_outlasts_the_llm_judges_worst_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout: int, retries: int
) -> None:
    """The worker's /livez stall limit comes from the chart's ConfigMap (the same settings the pod loads),
    and together with the probe's own window it must outlast one LLM-judged sample's worst case."""
    from ragwatch.scoring.health import stall_seconds
    from ragwatch.settings import load_settings

    helm = require_helm()
    config = {"JUDGES": '["cascade"]', "JUDGE_TIMEOUT": str(timeout), "JUDGE_MAX_RETRIES": str(retries)}
    docs = {d["kind"]: d for d in render(helm, *_values(tmp_path, {"config": config}))}
    for name, value in docs["ConfigMap"]["data"].items():  # the environment the worker pod starts with
        monkeypatch.setenv(name, value)
    settings = load_settings()
    worker = type("W", (), {"block_ms": settings.worker_block_ms, "maintenance_seconds": 5.0})()
    judges = [type("J", (), {"name": name})() for name in settings.judges]
    probe = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    window = probe["periodSeconds"] * probe["failureThreshold"]
    assert stall_seconds(worker, settings, judges) + window > timeout * (retries + 1) + retries * 20


# -- issue 29 item 8: the chart's and the compose file's defaults ------------------------------------------


def _secret_env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container.get("env", []) if "valueFrom" in e}


def test_helm_secret_settings_live_in_the_secret_never_the_config_map(tmp_path: Path) -> None:
    """probe_secret, sample_secret and the dashboard token go into the chart's Secret and reach the pods by
    secretKeyRef; the schema refuses them in `config` (the ConfigMap, plain text to anyone who can read it)."""
    helm = require_helm()
    values = {
        "replay": {"enabled": True, "url": "http://kb:8000/ask"},
        "secrets": {"probeSecret": "probe-s3cret", "sampleSecret": "sample-s3cret", "dashboardToken": "dash-t0ken"},
    }
    docs = render(helm, *_values(tmp_path, values))
    by_kind = {d["kind"]: d for d in docs}
    secret = by_kind["Secret"]
    assert secret["stringData"]["probe-secret"] == "probe-s3cret"
    assert secret["stringData"]["sample-secret"] == "sample-s3cret"
    assert secret["stringData"]["dashboard-token"] == "dash-t0ken"
    config = yaml.safe_dump(by_kind["ConfigMap"])
    assert not {"probe-s3cret", "sample-s3cret", "dash-t0ken"} & set(re.findall(r"[\w-]+", config))
    worker = _secret_env(by_kind["Deployment"]["spec"]["template"]["spec"]["containers"][0])
    replay = _secret_env(by_kind["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0])
    name = secret["metadata"]["name"]
    assert worker["RAGWATCH_DASHBOARD_TOKEN"] == {"name": name, "key": "dashboard-token"}
    assert replay["RAGWATCH_PROBE_SECRET"] == {"name": name, "key": "probe-secret"}  # signed by default
    assert "RAGWATCH_DASHBOARD_TOKEN" not in replay and "RAGWATCH_PROBE_SECRET" not in worker
    for key in ("PROBE_SECRET", "SAMPLE_SECRET", "DASHBOARD_TOKEN"):
        out = subprocess.run(
            [helm, "template", "rw", str(CHART), "--set", f"config.{key}=leaked"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert out.returncode != 0 and "config" in out.stderr, key


def test_helm_generates_the_probe_secret_and_dashboard_token_when_none_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defaults: the replay CronJob is signed and the worker's page asks for a token, both generated when
    not given (and kept on upgrades through lookup). The replay runs unsigned only when asked to."""
    from ragwatch.settings import load_settings

    helm = require_helm()
    docs = render(helm, *_values(tmp_path, {"replay": {"enabled": True, "url": "http://kb:8000/ask"}}))
    by_kind = {d["kind"]: d for d in docs}
    data = by_kind["Secret"]["stringData"]
    assert re.fullmatch(r"[A-Za-z0-9]{40}", data["probe-secret"]) and re.fullmatch(
        r"[A-Za-z0-9]{40}", data["dashboard-token"]
    )
    assert data["probe-secret"] != data["dashboard-token"]
    for name in [k for k in os.environ if k.startswith("RAGWATCH_")]:
        monkeypatch.delenv(name)
    for name, value in by_kind["ConfigMap"]["data"].items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAGWATCH_DASHBOARD_TOKEN", data["dashboard-token"])  # what the worker pod gets
    settings = load_settings()
    assert settings.dashboard and settings.dashboard_token is not None
    unsigned = {
        "replay": {"enabled": True, "url": "http://kb:8000/ask", "unsigned": True},
        "worker": {"dashboard": False},
    }
    by_kind = {d["kind"]: d for d in render(helm, *_values(tmp_path, unsigned))}
    replay = by_kind["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert "RAGWATCH_PROBE_SECRET" not in _secret_env(replay)
    assert (
        "probe-secret" not in by_kind["Secret"]["stringData"]
        and "dashboard-token" not in by_kind["Secret"]["stringData"]
    )
    worker = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert "RAGWATCH_DASHBOARD_TOKEN" not in _secret_env(worker)


def test_helm_network_policy_guards_the_worker_port_while_the_dashboard_is_on(tmp_path: Path) -> None:
    """With networkPolicy.enabled=false (the default) and the dashboard on (the default), an ingress-only
    NetworkPolicy admits to the worker port only Prometheus's namespace and networkPolicy.dashboardFrom."""
    helm = require_helm()
    kv = require_module("kubernetes_validate")
    operators = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "sre"}}}]
    docs = render(helm, *_values(tmp_path, {"networkPolicy": {"dashboardFrom": operators}}))
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    kv.validate(policy, KUBERNETES_VERSION, strict=True)
    spec = policy["spec"]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert spec["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert spec["policyTypes"] == ["Ingress"] and "egress" not in spec  # egress is the cluster's business
    (rule,) = spec["ingress"]
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    assert rule["from"] == [monitoring, *operators]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9465}]
    off = render(helm, "--set", "worker.dashboard=false")
    assert "NetworkPolicy" not in {d["kind"] for d in off}  # no page, nothing to guard beyond the defaults
    full = render(helm, "-f", str(ALL_FEATURES))
    worker = next(d for d in full if d["kind"] == "NetworkPolicy" and d["metadata"]["name"].endswith("-worker"))
    assert worker["spec"]["policyTypes"] == ["Ingress", "Egress"]  # the full policy when enabled


COMPOSE = ROOT / "docker-compose.yml"


def test_compose_publishes_on_loopback_only_and_grafana_has_no_anonymous_viewers() -> None:
    """Issue 29 item 8: the worker's and the demo's pages (questions and answers) were published on every
    interface and Grafana let anonymous viewers in. Every published port is bound to 127.0.0.1, the demo
    and the worker take RAGWATCH_DASHBOARD_TOKEN, and Grafana's anonymous access is off."""
    from jsonschema import Draft201909Validator

    compose = yaml.safe_load(COMPOSE.read_text())
    schema = json.loads((ROOT / "tests/schemas/compose-spec.json").read_text())
    assert not list(Draft201909Validator(schema).iter_errors(compose))
    services = compose["services"]
    published = {name: s.get("ports", []) for name, s in services.items() if s.get("ports")}
    assert {"kb-qa", "ragwatch-worker", "grafana", "prometheus"} <= set(published)
    for name, ports in published.items():
        for port in ports:
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), (name, port)
    grafana = services["grafana"]["environment"]
    assert str(grafana.get("GF_AUTH_ANONYMOUS_ENABLED", "false")).lower() == "false"
    assert "GF_AUTH_ANONYMOUS_ORG_ROLE" not in grafana
    for name in ("kb-qa", "ragwatch-worker"):
        assert "RAGWATCH_DASHBOARD_TOKEN" in services[name]["environment"], name
        assert services[name]["environment"]["RAGWATCH_REDIS_URL"] == "redis://redis:6379/0"
