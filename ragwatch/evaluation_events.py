"""Moved to :mod:`ragwatch.scoring.evaluation_events`.

Kept so that the documented ``ragwatch.evaluation_events`` imports keep working.
"""

from ragwatch.scoring.evaluation_events import *  # noqa: F403 - the whole public API of the new place
from ragwatch.scoring.evaluation_events import __all__ as __all__
