"""Redis key and stream names, in one place.

Every key of a service carries the ``{service}`` hash tag, so in Redis Cluster all of one service's keys
live in one slot and multi-key scripts (apply a score idempotently, dead-letter an entry) stay atomic.
"""

from __future__ import annotations

__all__ = ["GROUP", "Keys"]

#: The consumer group every scoring worker of a service joins.
GROUP = "ragwatch-scorers"


class Keys:
    """Key names of one service."""

    __slots__ = (
        "applied_hour_prefix",
        "applied_prefix",
        "dead",
        "feedback",
        "mode",
        "mode_channel",
        "samples",
        "scores",
        "service",
        "totals",
        "window_prefix",
        "workers",
    )

    def __init__(self, service: str, prefix: str = "ragwatch") -> None:
        base = f"{prefix}:{{{service}}}"
        self.service = service
        self.samples = f"{base}:samples"  # stream: sampled requests waiting to be scored
        self.dead = f"{base}:dead"  # stream: entries that failed too often, with the error
        self.scores = f"{base}:scores"  # stream: score records, trimmed to the retention bound
        self.feedback = f"{base}:feedback"  # stream: people's corrections of the judge, capped (feedback_maxlen)
        self.totals = f"{base}:totals"  # hash: count and sum per metric, for exactly-once aggregates
        self.applied_prefix = f"{base}:applied:"  # + sample id: the marker of ragwatch <= 0.x, still honoured
        self.applied_hour_prefix = f"{base}:applied-by-hour:"  # + unix hour: set of sample ids applied then
        self.workers = f"{base}:workers"  # hash: worker name -> last heartbeat (unix seconds)
        self.window_prefix = f"{base}:window:"  # + metric: list of "time value", newest first, capped
        self.mode = f"{base}:mode"  # hash: the degraded-mode state (ragwatch.mode.degrade.ModeState)
        self.mode_channel = f"{base}:mode:changed"  # pub/sub: announces every mode write

    def applied(self, sample_id: str) -> str:
        return self.applied_prefix + sample_id

    def applied_hour(self, hour: int) -> str:
        """The set of sample ids whose score was applied with a time stamp in ``hour`` (unix seconds // 3600);
        it expires as a whole, so idempotency markers cost one key per hour, not one per sample."""
        return f"{self.applied_hour_prefix}{hour}"

    def window(self, metric: str) -> str:
        return self.window_prefix + metric
