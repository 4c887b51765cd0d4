"""Moved to :mod:`ragwatch.report.sources`.

Kept so that the documented ``ragwatch.sources`` imports keep working.
"""

from ragwatch.report.sources import EndpointSource, JsonlSource, QueueSource, ScoreSource, decode_records

__all__ = ["EndpointSource", "JsonlSource", "QueueSource", "ScoreSource", "decode_records"]
