"""Moved to :mod:`ragwatch.metrics.exposition`.

Kept so that the documented ``ragwatch.exposition`` imports keep working.
"""

from ragwatch.metrics.exposition import (
    MetricsApp,
    mark_process_dead,
    metrics_asgi_app,
    metrics_registry,
    multiprocess_enabled,
    start_metrics_server,
)

__all__ = [
    "MetricsApp",
    "mark_process_dead",
    "metrics_asgi_app",
    "metrics_registry",
    "multiprocess_enabled",
    "start_metrics_server",
]
