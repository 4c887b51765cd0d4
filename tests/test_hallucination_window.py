"""The faithfulness window that moves: ``hallucination_rate`` (an answer with any unsupported claim counts 1)
read as a rolling window, through the real offline judge, worker, queue and SLA evaluator.

Answers of five claims where a hallucinated one invents a single number score faithfulness 0.8, so the
faithfulness window only slides from 0.99 to 0.90 when hallucinated answers go from 5 % to 50 % — never near
its 0.75 line. The share of answers with an unsupported claim goes from 0.05 to 0.50 and crosses its line
(0.20, provisional), exported as the gauges the shipped alert (``RagwatchHallucinationRateHigh``) compares.
"""

from __future__ import annotations

import os
import time

import orjson
import pytest
from prometheus_client import CollectorRegistry

from ragwatch.metrics.catalog import WorkerMetrics, families
from ragwatch.mode.degrade import direction_of
from ragwatch.mode.sla import SLAEvaluator
from ragwatch.queue.factory import open_queue
from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.worker import Worker
from ragwatch.settings import HALLUCINATION_RATE_LINE, load_settings
from tests.conftest import BRIDGE_ANSWER as TRUE_ANSWER
from tests.conftest import BRIDGE_FACTS as FACTS
from tests.conftest import sample as metric

INVENTED = [("1990", "1994"), ("18,000", "25,000"), ("120 meters", "150 meters")]  # one number per answer
WINDOW = 200


def samples(hallucinated: int, prefix: str) -> list[bytes]:
    """``WINDOW`` answers, ``hallucinated`` of them evenly spread (each with one of the three inventions: one
    invented number among four true claims)."""
    now = time.time()
    step = WINDOW // hallucinated
    out = []
    for i in range(WINDOW):
        lie = i % step == 0
        answer = TRUE_ANSWER.replace(*INVENTED[i // step % len(INVENTED)]) if lie else TRUE_ANSWER
        sample = Sample(
            sample_id=f"{prefix}-{i}",
            service="kb",
            question="Tell me about the bridge over the Ems.",
            answer=answer,
            chunks=[SampleChunk(id=f"c{k}", rank=k, text=t) for k, t in enumerate(FACTS)],
            created_at=now,
        )
        out.append(orjson.dumps(sample))
    return out


@pytest.mark.parametrize(("share", "over_the_line"), [(0.05, False), (0.5, True)])
def test_the_hallucination_rate_window_moves_with_the_share_of_hallucinated_answers(
    monkeypatch: pytest.MonkeyPatch, share: float, over_the_line: bool
) -> None:
    for name in [k for k in os.environ if k.startswith("RAGWATCH_")]:
        monkeypatch.delenv(name)
    settings = load_settings()  # the shipped windows and lines, as `ragwatch worker` runs them
    registry = CollectorRegistry()
    metrics = families(WorkerMetrics, registry)
    queue = open_queue(f"memory://window-{share}", "kb")
    queue.add(samples(round(share * WINDOW), f"s{share}"))
    evaluator = SLAEvaluator(queue, settings.sla_policy(), settings.health_thresholds, metrics)
    Worker(queue, [OfflineJudge()], block_ms=20, metrics=metrics, evaluator=evaluator).work(burst=True, max_seconds=60)
    evaluator.tick()

    def window(name: str) -> float:
        assert metric(registry, "ragwatch_window_samples", service="kb", metric=name) == WINDOW
        return metric(registry, "ragwatch_window_value", service="kb", metric=name)

    rate, faithfulness = window("hallucination_rate"), window("faithfulness")
    assert rate == pytest.approx(share)  # each invented number is caught: the window is the share itself
    assert faithfulness == pytest.approx(1 - 0.2 * share)  # 0.99 or 0.90: one claim in five
    line = metric(registry, "ragwatch_sla_threshold", service="kb", metric="hallucination_rate")
    assert line == HALLUCINATION_RATE_LINE and 0.05 < line < 0.5
    assert (rate > line) is over_the_line  # what RagwatchHallucinationRateHigh compares
    assert faithfulness > metric(registry, "ragwatch_sla_threshold", service="kb", metric="faithfulness") == 0.75
    assert direction_of("hallucination_rate") == "max" and direction_of("faithfulness") == "min"
    assert "hallucination_rate" not in queue.read_mode().reason  # a reporting line: it never switches the mode


def test_the_sla_can_be_held_on_the_hallucination_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its direction follows the metric when sla_direction is unset: degraded when the rate rises above."""
    for name in [k for k in os.environ if k.startswith("RAGWATCH_")]:
        monkeypatch.delenv(name)
    assert load_settings().sla_policy().direction == "min"
    policy = load_settings(sla_metric="hallucination_rate", sla_threshold=0.2, sla_min_dwell_seconds=0).sla_policy()
    assert (policy.direction, policy.recover_at) == ("max", pytest.approx(0.15))
    assert load_settings(sla_metric="hallucination_rate", sla_direction="min").sla_policy().direction == "min"
    queue = open_queue("memory://sla-rate", "kb")
    queue.add(samples(WINDOW // 2, "sla"))
    evaluator = SLAEvaluator(queue, policy)
    Worker(queue, [OfflineJudge()], block_ms=20, evaluator=evaluator).work(burst=True, max_seconds=60)
    state = evaluator.tick()
    assert state.degraded and "hallucination_rate 0.500 > 0.2" in state.reason
