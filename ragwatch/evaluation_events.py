"""Moved to :mod:`ragwatch.scoring.evaluation_events`.

Kept so that the documented ``ragwatch.evaluation_events`` imports keep working.
"""

from ragwatch.scoring.evaluation_events import EVENT_NAME, EvaluationEvents

__all__ = ["EVENT_NAME", "EvaluationEvents"]
