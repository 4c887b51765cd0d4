"""The worker side of degraded mode: read the windows, export them, decide, publish.

Any number of workers may run this; the mode is written with compare-and-set, so when two decide at once
one wins and the other re-reads on its next tick. Because the window and the state live in the queue's
store, a restarted worker continues where the last one left off — and when the store itself restarts
empty, the newest state seen is written back (:mod:`ragwatch.mode.restore`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from ragwatch.labels import safe_text
from ragwatch.metrics.catalog import WorkerMetrics
from ragwatch.mode.degrade import ModeState, Policy, step, window_value
from ragwatch.mode.restore import read_restoring
from ragwatch.queue.contract import Queue

__all__ = ["SLAEvaluator"]

log = logging.getLogger("ragwatch.sla")


class SLAEvaluator:
    def __init__(
        self,
        queue: Queue,
        policy: Policy,
        health: Mapping[str, float] | None = None,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.queue = queue
        self.policy = policy
        self.health = dict(health or {})
        self.metrics = metrics
        self._last: ModeState | None = None  # the newest state seen, written back if the store forgets it
        # With a per-client cap, read past the window's size: capped points leave room for older ones.
        share = policy.max_client_share
        self._depth = policy.window_samples if share >= 1 else min(5 * policy.window_samples, 1000)

    def tick(self, now: float | None = None) -> ModeState:
        """Evaluate once; returns the state in force afterwards."""
        now = time.time() if now is None else now
        policy = self.policy
        value, samples = window_value(self.queue.window_clients(policy.metric, self._depth), policy, now)
        self._export(policy.metric, value, samples, policy.threshold)
        for metric, threshold in self.health.items():
            if metric != policy.metric:
                v, n = window_value(self.queue.window_clients(metric, self._depth), policy, now)
                self._export(metric, v, n, threshold)
        # an empty restart must not reset the state: restored whole, its hold and dwell still apply
        state = read_restoring(self.queue, self._last)
        self._seen(state)
        new = step(policy, state, value, samples, now)
        if new is state or not self.queue.write_mode(new, state.version):
            return state
        self._seen(new)
        if new.degraded != state.degraded:
            to = "degraded" if new.degraded else "normal"
            if self.metrics is not None:
                self.metrics.transitions.labels(self.queue.service, to).inc()
            log.warning("ragwatch: service %s enters %s mode: %s", self.queue.service, to, safe_text(new.reason))
        return new

    def _seen(self, state: ModeState) -> None:
        if state.version and (self._last is None or state.version >= self._last.version):
            self._last = state

    def _export(self, metric: str, value: float | None, samples: int, threshold: float) -> None:
        m = self.metrics
        if m is None:
            return
        service = self.queue.service
        m.window_samples.labels(service, metric).set(samples)
        m.sla_threshold.labels(service, metric).set(threshold)
        if value is not None:
            m.window_value.labels(service, metric).set(value)
