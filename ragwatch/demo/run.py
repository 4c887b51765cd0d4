"""``ragwatch demo``: a watched RAG service goes bad and recovers, and ragwatch says why — in one command.

What runs, all in one process unless ``RAGWATCH_REDIS_URL`` points at a real Redis (then samples, scores and
the mode flag go through it, exactly as in production): the demo service behind ragwatch's ASGI middleware
(sampling every request), a scoring worker thread with the default offline judge, and an SLA evaluator with
a fast policy (a 20-sample window instead of 200, seconds of hold and dwell instead of minutes) so the whole
story fits in well under a minute:

1. healthy traffic;
2. a retrieval fault (off-topic chunks ranked first) drives Context Precision@3 under the SLA → degraded
   mode switches on and answers carry ``rw.notice``;
3. the fault is removed; once the window has held above threshold + margin, degraded mode switches off.

Meanwhile the "LLM" falsifies a share of answers; the closing health report should name them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ragwatch.errors import ConfigError

if TYPE_CHECKING:
    from ragwatch.capture.watch import RagWatch

__all__ = ["DemoResult", "demo_policy", "run_demo"]

SERVICE = "ragwatch-demo"


@dataclass
class DemoResult:
    """What happened, for people (``report_markdown``) and for tests (everything else)."""

    entered_degraded: bool
    left_degraded: bool
    requests: int
    scored: int
    falsified: int
    flagged: int  # falsified answers whose faithfulness is under its threshold (or diagnosed hallucination)
    hallucinated_sample_ids: list[str]
    flagged_sample_ids: list[str]
    report_markdown: str
    report: Any
    degraded_responses: int
    transitions: list[tuple[float, bool, str]] = field(default_factory=list)  # (seconds since start, degraded, why)
    seconds: float = 0.0
    queue_url: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)  # the score records the report was built from

    @property
    def caught_share(self) -> float:
        return self.flagged / self.falsified if self.falsified else 1.0


def demo_policy(quick: bool = False) -> Any:
    """The SLA policy of the demo: production's threshold and margin, a small window, short hold and dwell."""
    from ragwatch.mode.degrade import Policy

    return Policy(
        metric="context_precision_3",
        threshold=0.65,
        window_seconds=120.0,
        window_samples=20,
        min_samples=8,
        margin=0.05,
        hold_seconds=1.0 if quick else 3.0,
        min_dwell_seconds=1.0 if quick else 4.0,
    )


def demo_watch(service_name: str, queue_url: str, **settings: Any) -> RagWatch:
    """The RagWatch of the demo service: every request sampled, quick flushes and mode refreshes, a
    TracerProvider that exports nowhere (it gives each run a trace id to match scores by), and a zero price
    for the demo's model (no "unpriced model" warning)."""
    from opentelemetry.sdk.trace import TracerProvider

    from ragwatch.capture.watch import RagWatch

    return RagWatch(
        service_name,
        redis_url=queue_url,
        sample_rate=1.0,
        sample_max_per_second=10_000,
        flush_interval=0.05,
        degraded_refresh_seconds=0.2,
        tracer_provider=TracerProvider(),
        pricing={"demo-extractive": {"input": 0.0, "output": 0.0}},
        scoring="off",  # the demo runs its own worker thread with the demo's short SLA policy
        **settings,
    )


def run_demo(
    *,
    requests: int | None = None,
    seed: int = 7,
    hallucination_rate: float = 0.2,
    quick: bool = False,
    redis_url: str | None = None,
    serve: bool = False,
    port: int = 8000,
    host: str = "127.0.0.1",
    service: str | None = None,
    progress: bool | None = None,
    out: Callable[[str], None] = print,
) -> DemoResult:
    """Run the whole demo and return what happened (see the module docstring).

    ``requests`` is the planned total (split in three phases; a phase runs longer while it waits for a mode
    switch); default 240, or 90 with ``quick``. ``redis_url`` defaults to ``$RAGWATCH_REDIS_URL``, else an
    in-process queue. ``serve`` also serves the app on ``host:port`` with uvicorn during the run, with the live
    quality page at ``/dashboard``, and keeps it up afterwards until Ctrl-C. ``service`` fixes the service
    name, so that separate workers and a replay prober (as in ``docker-compose.yml``) can name it; by default
    a run on Redis gets a fresh one.
    """
    from prometheus_client import REGISTRY

    from ragwatch.demo.service import DemoService, build_app
    from ragwatch.demo.traffic import Display, Phase, QuestionStream, send_phase
    from ragwatch.metrics.catalog import WorkerMetrics, families
    from ragwatch.mode.sla import SLAEvaluator
    from ragwatch.queue.reach import open_reached_queue
    from ragwatch.report.build import build_report, default_thresholds
    from ragwatch.scoring.diagnosis import Thresholds
    from ragwatch.scoring.judges.offline import OfflineJudge
    from ragwatch.scoring.worker import Worker

    if not 0.0 <= hallucination_rate <= 1.0:
        raise ConfigError("the demo's hallucination rate must be within 0..1")
    total = requests if requests is not None else (90 if quick else 240)
    if total < 30:
        raise ConfigError("the demo needs at least 30 requests (three phases of 10)")
    redis_url = redis_url or os.environ.get("RAGWATCH_REDIS_URL") or None
    if redis_url:  # a fresh service name: windows and mode state of an earlier run must not leak in
        service_name = service or f"{SERVICE}-{uuid.uuid4().hex[:6]}"
        queue_url = redis_url
    else:
        service_name = service or SERVICE
        queue_url = f"memory://demo-{uuid.uuid4().hex[:8]}"
    queue = open_reached_queue(queue_url, service_name)  # an unreachable Redis: one line, before any output
    policy = demo_policy(quick)
    sla_log = logging.getLogger("ragwatch.sla")
    sla_level = sla_log.level
    sla_log.setLevel(logging.ERROR)  # the demo announces mode switches itself; restored at the end
    started = time.monotonic()
    display = Display(progress)

    rw = demo_watch(
        service_name,
        queue_url,
        sla_window_samples=policy.window_samples,
        sla_min_samples=policy.min_samples,
        sla_hold_seconds=policy.hold_seconds,
        sla_min_dwell_seconds=policy.min_dwell_seconds,
    )
    settings = rw.settings
    thresholds = default_thresholds(settings)
    transitions: list[tuple[float, bool, str]] = []

    @rw.on_transition
    def _announce(old: Any, new: Any) -> None:
        at = time.monotonic() - started
        transitions.append((at, new.degraded, new.reason))
        if new.degraded:
            display.event(f"[demo] {at:5.1f}s  DEGRADED mode ON  — {new.reason}; answers now carry the notice")
        else:
            display.event(f"[demo] {at:5.1f}s  degraded mode OFF — {new.reason}")

    metrics = families(WorkerMetrics, REGISTRY, settings.latency_buckets)
    worker = Worker(
        queue,
        [OfflineJudge()],
        name="demo-worker",
        concurrency=2,
        batch=32,
        block_ms=100,
        metrics=metrics,
        maintenance_seconds=0.25,
        evaluator=SLAEvaluator(queue, policy, settings.health_thresholds, metrics),
        thresholds=Thresholds(
            context_precision=policy.threshold,
            faithfulness=thresholds.get("faithfulness", 0.75),
            answer_relevance=thresholds.get("answer_relevance", 0.85),
        ),
    )
    worker_thread = threading.Thread(target=worker.work, name="ragwatch-demo-worker", daemon=True)
    worker_thread.start()

    demo_service = DemoService(rw, hallucination_rate=hallucination_rate, seed=seed)
    app = build_app(demo_service)
    server = None
    if serve:
        from ragwatch.access import DashboardGate
        from ragwatch.report.dashboard import Dashboard, asgi_app
        from ragwatch.report.sources import QueueSource

        # The page shows the demo's questions and answers: never without a gate, even in a container that
        # binds 0.0.0.0. The token is RAGWATCH_DASHBOARD_TOKEN's, or a fresh one printed here.
        token = settings.dashboard_token.get_secret_value() if settings.dashboard_token is not None else None
        token = token or secrets.token_urlsafe(18)
        gate = DashboardGate(token, None, settings.dashboard_trusted_proxies)
        dashboard = Dashboard(QueueSource(queue), thresholds, policy, refresh_seconds=2.0, cache_seconds=0.5, gate=gate)
        server = _serve(asgi_app(dashboard, app), host, port)
        out(
            f"[demo] serving POST http://{host}:{port}/ask and GET http://{host}:{port}/metrics; "
            f"live quality page: http://{host}:{port}/dashboard?token={token}"
        )

    n_healthy = total // 3
    n_fault = total // 3
    n_recovery = total - n_healthy - n_fault
    pause = 0.01 if quick else 0.05
    out(
        f"[demo] service {service_name!r}, queue {queue_url.split('@')[-1]}, offline judge, "
        f"hallucination rate {hallucination_rate:.0%}, SLA {policy.metric} ≥ {policy.threshold} "
        f"over the last {policy.window_samples} scores"
    )

    def fault(on: bool) -> Callable[[], None]:
        def switch() -> None:
            demo_service.fault = on

        return switch

    phases = [
        (Phase("1/3 healthy traffic", n_healthy, 0), None),
        (Phase("2/3 retrieval fault injected", n_fault, 20 * n_fault, until=lambda: rw.degraded), fault(True)),
        (
            Phase("3/3 fault removed, recovering", n_recovery, 40 * n_recovery, until=lambda: not rw.degraded),
            fault(False),
        ),
    ]
    degraded_responses = 0

    async def drive() -> int:
        import httpx

        nonlocal degraded_responses
        questions = QuestionStream(seed)
        sent = 0
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
            for phase, before in phases:
                if before is not None:
                    before()
                if display._progress is not None:
                    display.event(f"[demo] {time.monotonic() - started:5.1f}s  phase {phase.name}")
                n, d = await send_phase(client, questions, phase, display, pause)
                sent += n
                degraded_responses += d
        return sent

    display.start()
    try:
        sent = asyncio.run(drive())
    finally:
        display.stop()
    rw.flush(5.0)
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline:  # let the worker score what is left before the report
        stats = queue.stats()
        if stats.lag == 0 and stats.pending == 0:
            break
        time.sleep(0.05)
    records = [orjson.loads(raw) for raw in queue.recent_scores(100_000)]
    report = build_report(records, thresholds)
    markdown = report.markdown()

    by_trace = {r.get("trace_id"): r for r in records if r.get("trace_id")}
    falsified = [by_trace[t] for t in demo_service.falsified if t in by_trace]
    limit = thresholds.get("faithfulness", 0.75)
    flagged = [
        r
        for r in falsified
        if r.get("diagnosis") == "hallucination"
        or (isinstance(r["scores"].get("faithfulness"), float) and r["scores"]["faithfulness"] < limit)
    ]
    result = DemoResult(
        entered_degraded=any(d for _, d, _ in transitions),
        left_degraded=any(d for _, d, _ in transitions) and not rw.degraded and not transitions[-1][1],
        requests=sent,
        scored=len(records),
        falsified=len(falsified),
        flagged=len(flagged),
        hallucinated_sample_ids=[r["sample_id"] for r in falsified],
        flagged_sample_ids=[r["sample_id"] for r in flagged],
        report_markdown=markdown,
        report=report,
        degraded_responses=degraded_responses,
        transitions=transitions,
        seconds=time.monotonic() - started,
        queue_url=queue_url,
        records=records,
    )
    out("")
    out(markdown)
    out(
        f"[demo] {sent} requests, {len(records)} scored, {degraded_responses} answered in degraded mode; "
        f"degraded mode entered: {'yes' if result.entered_degraded else 'NO'}, "
        f"left: {'yes' if result.left_degraded else 'NO'}; the LLM falsified {result.falsified} answers, "
        f"ragwatch flagged {result.flagged} of them ({result.caught_share:.0%}); {result.seconds:.1f} s"
    )
    if server is not None:
        out(
            f"[demo] still serving on http://{host}:{port} (worker running; open "
            f"http://{host}:{port}/dashboard?token={token}) "
            "— Ctrl-C to stop"
        )
        try:
            while server.thread.is_alive():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        server.server.should_exit = True
        server.thread.join(5)
    worker.stop()
    worker_thread.join(5)
    rw.close(1.0)
    if not redis_url:
        from ragwatch.queue.memory import MemoryQueue

        with MemoryQueue._named_lock:  # forget this run's in-process queue (tests run the demo repeatedly)
            MemoryQueue._named.pop((queue_url.split("://", 1)[1], service_name), None)
    else:
        queue.close()
    sla_log.setLevel(sla_level)
    return result


@dataclass
class _Server:
    server: Any
    thread: threading.Thread


def _serve(app: Any, host: str, port: int) -> _Server:
    """uvicorn in a background thread (uvicorn is optional: only ``--serve`` needs it)."""
    try:
        import uvicorn
    except ImportError as exc:
        raise RuntimeError("ragwatch demo --serve needs uvicorn: pip install uvicorn") from exc
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="ragwatch-demo-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not server.started:
        raise RuntimeError(f"could not serve on {host}:{port}")
    return _Server(server, thread)
