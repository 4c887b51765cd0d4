"""Read the shared degraded-mode state, putting back what the store forgot.

Versions only grow, so a store holding an older version than a process has already seen lost writes: an
empty restart without persistence, or a failover to a replica that lagged. Reading it as it is would reset
an SLA-driven degraded state at once (no hold, no dwell: the service flaps) and forget an operator's
override. Each process that notices writes back the newest state it saw, whole (``since``,
``recovering_since`` and the override included), and the store keeps the newest of those writes — so a
replica that missed the last change cannot bring back an older state for good.

Service replicas (:mod:`ragwatch.mode.watcher`) and workers (:mod:`ragwatch.mode.sla`) both read through
here.
"""

from __future__ import annotations

import logging

from ragwatch.labels import safe_text
from ragwatch.mode.degrade import ModeState
from ragwatch.queue.contract import Queue

__all__ = ["read_restoring"]

log = logging.getLogger("ragwatch.mode")


def read_restoring(queue: Queue, last: ModeState | None) -> ModeState:
    """The shared state; when the store holds an older version than ``last`` (the newest this process saw),
    ``last`` is written back unless another process restored a newer one first, and the state then in the
    store is returned."""
    state = queue.read_mode()
    if last is None or state.version >= last.version:
        return state
    restored = queue.restore_mode(last)
    state = queue.read_mode()
    if restored:
        log.warning(
            "ragwatch: degraded-mode state of %s was older in the queue store than last seen here (restarted "
            "empty?); re-asserted the operator override %r and the %s state of version %d (%s)",
            queue.service,
            last.override,
            "degraded" if last.degraded else "normal",
            last.version,
            safe_text(last.reason) or "no reason recorded",
        )
    return state
