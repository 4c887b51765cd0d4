"""Process lifecycle hooks that never keep their object alive: reset in a forked child, close at exit.

``os.register_at_fork`` and ``atexit`` keep their callbacks for the life of the process, so a callback that
held its object would leak every producer, queue and watcher ever made. These hold the bound method weakly;
once the object is collected the callback does nothing.
"""

from __future__ import annotations

import atexit
import os
import weakref
from collections.abc import Callable

__all__ = ["call_at_exit", "call_in_child"]


def _weakly(method: Callable[[], object]) -> Callable[[], None]:
    ref = weakref.WeakMethod(method)

    def call() -> None:
        bound = ref()
        if bound is not None:
            bound()

    return call


def call_in_child(method: Callable[[], object]) -> None:
    """Call the bound ``method`` in every child forked from now on, for as long as its object lives
    (threads and locks do not survive fork)."""
    os.register_at_fork(after_in_child=_weakly(method))


def call_at_exit(method: Callable[[], object]) -> None:
    """Call the bound ``method`` at interpreter exit if its object still lives."""
    atexit.register(_weakly(method))
