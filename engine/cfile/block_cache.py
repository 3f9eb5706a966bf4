"""BlockCache: a process-wide LRU of decoded pages, bounded in bytes.

Point lookups and key-index probes decode the same few pages again and again; the cache keeps
them decoded (Kudu's block cache keeps raw blocks; here decoding is the dominant cost, so the
decoded form is what is worth keeping). Full scans bypass the cache so one big scan does not
evict the working set of point operations.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Hashable


class BlockCache:
    def __init__(self, capacity_bytes: int):
        self.capacity = capacity_bytes
        self._items: collections.OrderedDict[Hashable, tuple[Any, int]] = (
            collections.OrderedDict())
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_load(self, key: Hashable, load: Callable[[], tuple[Any, int]]) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return item[0]
        value, size = load()
        with self._lock:
            self.misses += 1
            if key not in self._items:
                self._items[key] = (value, size)
                self._bytes += size
                while self._bytes > self.capacity and len(self._items) > 1:
                    _, (_, s) = self._items.popitem(last=False)
                    self._bytes -= s
        return value

    def erase_prefix(self, prefix: tuple) -> None:
        with self._lock:
            for k in [k for k in self._items if isinstance(k, tuple) and k[:len(prefix)] == prefix]:
                self._bytes -= self._items.pop(k)[1]

    @property
    def nbytes(self) -> int:
        return self._bytes
