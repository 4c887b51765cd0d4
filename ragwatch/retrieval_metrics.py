"""Moved to :mod:`ragwatch.scoring.retrieval_metrics`.

Kept so that the documented ``ragwatch.retrieval_metrics`` imports keep working.
"""

from ragwatch.scoring.retrieval_metrics import *  # noqa: F403 - the whole public API of the new place
from ragwatch.scoring.retrieval_metrics import __all__ as __all__
