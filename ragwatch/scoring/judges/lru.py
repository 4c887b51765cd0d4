"""The judges' one bounded cache: chunk analyses, embeddings and cross-encoder scores.

Why one class: every judge that keeps work across samples must bound it (a worker runs for weeks) and may be
called from several threads (``ragwatch worker`` scores on a thread pool), so the bound and the lock are
written once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["LRUCache"]


class LRUCache:
    """A small thread-safe LRU map (workers score samples in several threads); ``maxsize`` 0 keeps nothing."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 0:
            raise ValueError("cache size must be ≥ 0")
        self.maxsize = maxsize
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Any) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key]
            self.misses += 1
            return None

    def put(self, key: Any, value: Any) -> None:
        if not self.maxsize:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
