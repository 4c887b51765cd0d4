"""Metrics: every Prometheus family ragwatch exports, the hot-path counters, and how they are exposed.

``catalog`` declares every metric (names, labels, buckets); ``fast`` holds the thread-sharded counters and
histograms the request path writes to; ``exposition`` serves ``/metrics``.

May import: ``prometheus_client`` and the top-level foundations. Nothing else in ragwatch.
"""
