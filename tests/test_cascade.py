"""The cascade: cheap judge for all, the expensive one for the uncertain band and a sampled fraction."""

from __future__ import annotations

import pytest

from ragwatch.errors import ConfigError
from ragwatch.sampling.sample import Sample
from ragwatch.scoring.judges import make_judges
from ragwatch.scoring.judges.base import Verdict
from ragwatch.scoring.judges.cascade import CascadeJudge
from ragwatch.settings import load_settings


class Cheap:
    name, version = "cheap", "1"

    def score(self, sample: Sample) -> Verdict:
        return Verdict({"faithfulness": float(sample.question or 0), "context_precision_3": 0.5}, {"by": "cheap"})


class Dear:
    name, version = "dear", "2"

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def score(self, sample: Sample) -> Verdict:
        self.calls += 1
        if self.fail:
            raise RuntimeError("endpoint down")
        return Verdict({"faithfulness": 0.99}, {"by": "dear"})


def s(value: float) -> Sample:
    return Sample(sample_id="x", service="svc", question=str(value), answer="a", chunks=[], created_at=0.0)


@pytest.mark.parametrize(("value", "escalated"), [(0.1, False), (0.3, True), (0.55, True), (0.8, True), (0.95, False)])
def test_band_escalates(value: float, escalated: bool) -> None:
    dear = Dear()
    verdict = CascadeJudge(Cheap(), dear, band=(0.3, 0.8)).score(s(value))
    assert dear.calls == int(escalated)
    assert verdict.details["decided_by"] == ("dear" if escalated else "cheap")
    assert verdict.scores["faithfulness"] == (0.99 if escalated else value)
    assert verdict.scores["context_precision_3"] == 0.5  # scores the expensive judge did not give are kept


def test_sampled_fraction_escalates_confident_samples_too() -> None:
    draws = iter([0.5, 0.01])
    judge = CascadeJudge(Cheap(), Dear(), band=(0.3, 0.8), fraction=0.05, rng=lambda: next(draws))
    assert judge.score(s(0.95)).details["decided_by"] == "cheap"
    verdict = judge.score(s(0.95))
    assert verdict.details["decided_by"] == "dear" and verdict.details["escalation"] == "sampled"


def test_failed_escalation_keeps_the_cheap_verdict() -> None:
    verdict = CascadeJudge(Cheap(), Dear(fail=True)).score(s(0.5))
    assert verdict.scores["faithfulness"] == 0.5
    assert verdict.details["decided_by"] == "cheap"
    assert "endpoint down" in verdict.details["escalation_error"]


def test_version_names_both_judges_and_config_is_validated() -> None:
    assert CascadeJudge(Cheap(), Dear()).version == "cheap:1>dear:2"
    with pytest.raises(ConfigError):
        CascadeJudge(Cheap(), Dear(), band=(0.8, 0.3))
    with pytest.raises(ConfigError):
        CascadeJudge(Cheap(), Dear(), fraction=2)


def test_make_judges() -> None:
    assert [j.name for j in make_judges(["offline", "trivial"])] == ["offline", "trivial"]
    with pytest.raises(ConfigError, match="judge_base_url"):
        make_judges(["llm"], load_settings())
    settings = load_settings(judge_base_url="http://127.0.0.1:9/v1", judge_model="m")
    (cascade,) = make_judges(["cascade"], settings)
    assert cascade.name == "cascade" and "llm" in cascade.version
    with pytest.raises(ConfigError, match="unknown judge"):
        make_judges(["oracle"])
    with pytest.raises(ConfigError, match="judges"):
        load_settings(judges=["oracle"])


def test_close_closes_the_llm_judges_http_client() -> None:
    """eval-judge closes the judge it built; a cascade must pass that on, or the LLM judge's pooled sockets
    leak until garbage collection (a ResourceWarning in whichever test runs next)."""
    from ragwatch.scoring.judges.llm import LLMJudge
    from ragwatch.scoring.judges.offline import OfflineJudge

    llm = LLMJudge("http://127.0.0.1:9", "judge-model", api_key="")
    cascade = CascadeJudge(OfflineJudge(), llm)
    assert not llm._client.is_closed
    cascade.close()
    assert llm._client.is_closed
