"""Moved to :mod:`ragwatch.report.sources`.

Kept so that the documented ``ragwatch.sources`` imports keep working.
"""

from ragwatch.report.sources import *  # noqa: F403 - the whole public API of the new place
from ragwatch.report.sources import __all__ as __all__
