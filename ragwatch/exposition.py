"""Moved to :mod:`ragwatch.metrics.exposition`.

Kept so that the documented ``ragwatch.exposition`` imports keep working.
"""

from ragwatch.metrics.exposition import *  # noqa: F403 - the whole public API of the new place
from ragwatch.metrics.exposition import __all__ as __all__
