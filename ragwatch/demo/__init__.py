"""The demo: a bundled bilingual RAG service that ragwatch watches while it goes bad and recovers.

``ragwatch demo`` (or :func:`run_demo`) runs it; :mod:`.service` is the service (also usable as a replay
target), :mod:`.traffic` the traffic generator, :mod:`.kb` the knowledge base.
"""

from __future__ import annotations

from ragwatch.demo.run import DemoResult, run_demo

__all__ = ["DemoResult", "run_demo"]
