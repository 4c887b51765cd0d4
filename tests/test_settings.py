"""Settings: precedence (argument > env > YAML > default) and clear errors at start-up."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

import ragwatch
from ragwatch import ConfigError, load_settings


def test_defaults() -> None:
    s = load_settings()
    assert (s.service, s.tracing, s.metrics, s.capture_chunk_text, s.metrics_port) == (
        "default",
        True,
        True,
        False,
        None,
    )


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "ragwatch.yaml"
    config.write_text("service: from-yaml\ntracing: false\nmax_span_chunks: 7\n")
    monkeypatch.setenv("RAGWATCH_CONFIG_FILE", str(config))
    s = load_settings()
    assert (s.service, s.tracing, s.max_span_chunks) == ("from-yaml", False, 7)
    monkeypatch.setenv("RAGWATCH_SERVICE", "from-env")
    assert load_settings().service == "from-env"
    assert load_settings(service="from-arg").service == "from-arg"
    assert load_settings(service=None).service == "from-env"  # None means "not given"


def test_explicit_config_file_and_pricing(tmp_path: Path) -> None:
    config = tmp_path / "rw.yaml"
    config.write_text("pricing:\n  my-llm: {input: 0.5, output: 1.5, cached_input: 0.1}\n")
    s = load_settings(config)
    assert s.pricing["my-llm"].cached_input == 0.1


def test_env_lists_and_nested(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGWATCH_LATENCY_BUCKETS", "[0.1, 1, 10]")
    monkeypatch.setenv("RAGWATCH_PRICING", '{"m": {"input": 1, "output": 2}}')
    s = load_settings()
    assert s.latency_buckets == (0.1, 1.0, 10.0)
    assert s.pricing["m"].output == 2


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"service": "has spaces"}, "service"),
        ({"metrics_port": 70000}, "metrics_port"),
        ({"latency_buckets": [1, 0.5]}, "strictly increasing"),
        ({"latency_buckets": []}, "at least one bucket"),
        ({"pricing": {"m": {"input": -1, "output": 1}}}, "pricing.m.input"),
        ({"pricing": {"m": {"input": 1, "output": 1, "typo": 2}}}, "pricing.m.typo"),
        ({"no_such_setting": 1}, "no_such_setting"),
    ],
)
def test_bad_settings_name_the_field(overrides: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        load_settings(**overrides)


def test_bad_env_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGWATCH_TRACING", "perhaps")
    with pytest.raises(ConfigError, match="tracing"):
        ragwatch.RagWatch("svc", registry=CollectorRegistry())


def test_a_bad_variable_is_named_even_when_an_argument_overrides_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The argument wins, but a bad RAGWATCH_* value is still a start-up error, and the message names the
    variable a user set (the field name alone is not what they would search their manifests for)."""
    monkeypatch.setenv("RAGWATCH_SAMPLE_RATE", "abc")
    with pytest.raises(ConfigError, match=r"RAGWATCH_SAMPLE_RATE \(sample_rate\): Input should be a valid number"):
        load_settings(sample_rate=1.0)
    with pytest.raises(ConfigError, match=r"RAGWATCH_SAMPLE_RATE \(sample_rate\)"):
        ragwatch.RagWatch("svc", sample_rate=1.0, registry=CollectorRegistry())


def test_the_error_names_where_the_bad_value_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGWATCH_SAMPLE_RATE", "0.5")  # valid, and overridden: the argument is at fault
    with pytest.raises(ConfigError, match=r"settings: sample_rate: Input should be less than or equal to 1$"):
        load_settings(sample_rate=7)
    monkeypatch.delenv("RAGWATCH_SAMPLE_RATE")
    monkeypatch.setenv("RAGWATCH_PRICING__M__INPUT", "-1")  # a nested variable: that one, not its siblings
    monkeypatch.setenv("RAGWATCH_PRICING__M__OUTPUT", "1")
    with pytest.raises(ConfigError, match=r"settings: RAGWATCH_PRICING__M__INPUT \(pricing\.m\.input\): "):
        load_settings()
    monkeypatch.delenv("RAGWATCH_PRICING__M__INPUT")
    monkeypatch.delenv("RAGWATCH_PRICING__M__OUTPUT")
    monkeypatch.setenv("RAGWATCH_PRICING", "{not json")
    with pytest.raises(ConfigError, match=r"settings: RAGWATCH_PRICING \(pricing\): not valid JSON$"):
        load_settings()
    monkeypatch.delenv("RAGWATCH_PRICING")
    config = tmp_path / "rw.yaml"
    config.write_text("sample_rate: 7\n")
    with pytest.raises(ConfigError, match=rf"sample_rate \(in {re.escape(str(config))}\): "):
        load_settings(config)


def test_missing_or_broken_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "absent.yaml")
    monkeypatch.setenv("RAGWATCH_CONFIG_FILE", str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match="RAGWATCH_CONFIG_FILE"):
        load_settings()
    broken = tmp_path / "broken.yaml"
    broken.write_text("service: [unclosed\n")
    with pytest.raises(ConfigError):
        load_settings(broken)


def test_settings_object_and_overrides_are_revalidated() -> None:
    base = load_settings(service="base")
    rw = ragwatch.RagWatch("other", settings=base, registry=CollectorRegistry(), tracing=False)
    assert rw.service == "other" and rw.settings.tracing is False
    with pytest.raises(ConfigError):
        ragwatch.RagWatch("bad name", settings=base, registry=CollectorRegistry())


def test_uses_the_applications_tracer_provider_and_never_replaces_it() -> None:
    """Global providers are process-wide, so this runs in a fresh interpreter."""
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import ragwatch

        before = trace.get_tracer_provider()
        rw = ragwatch.RagWatch("svc")          # created before the app configures tracing
        assert trace.get_tracer_provider() is before, "ragwatch replaced the global provider"

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)    # the application's own provider, set later

        @rw.pipeline
        def answer(q):
            return q

        answer("q")
        print(sorted(s.name for s in exporter.get_finished_spans()))
        """
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "['rag svc']"
