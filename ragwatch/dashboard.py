"""Moved to :mod:`ragwatch.report.dashboard`.

Kept so that the documented ``ragwatch.dashboard`` imports keep working.
"""

from ragwatch.report.dashboard import *  # noqa: F403 - the whole public API of the new place
from ragwatch.report.dashboard import __all__ as __all__
