"""RowSetTree: an interval tree over the [min key, max key] ranges of DiskRowSets.

Inserts, updates and point reads must consult every rowset whose key range covers the key;
the tree finds them in O(log n + k) instead of testing all n rowsets (paper §4.6). Scans with
key bounds use `overlapping(lower, upper)`. The tree is immutable: a flush or compaction
builds a new one and swaps it in together with the rowset list, so readers never lock.

Centered interval tree: each node holds a center key, the intervals containing it sorted by
start (ascending) and by end (descending), and subtrees for intervals entirely left or right.

`bulk_candidates` answers the vectorised question the bulk insert path asks: for a sorted
array of keys, which contiguous slice of it falls in each rowset's range (two searchsorted
calls per rowset, no loop per key).
"""

from __future__ import annotations

from typing import Generic, Sequence, TypeVar

import numpy as np

T = TypeVar("T")


class _Node:
    __slots__ = ("center", "by_start", "by_end", "left", "right")

    def __init__(self, center, by_start, by_end, left, right):
        self.center = center
        self.by_start = by_start
        self.by_end = by_end
        self.left = left
        self.right = right


def _build(items: list) -> _Node | None:
    if not items:
        return None
    points = sorted([it[0] for it in items] + [it[1] for it in items])
    center = points[len(points) // 2]
    here, left, right = [], [], []
    for it in items:
        if it[1] < center:
            left.append(it)
        elif it[0] > center:
            right.append(it)
        else:
            here.append(it)
    return _Node(center, sorted(here, key=lambda it: it[0]),
                 sorted(here, key=lambda it: it[1], reverse=True), _build(left), _build(right))


class RowSetTree(Generic[T]):
    def __init__(self, rowsets: Sequence[T], ranges: Sequence[tuple[bytes, bytes]]):
        self.rowsets = tuple(rowsets)
        items = [(lo, hi, rs) for rs, (lo, hi) in zip(rowsets, ranges)]
        self._root = _build(items)
        self._mins = [lo for lo, _ in ranges]
        self._maxs = [hi for _, hi in ranges]

    def __len__(self) -> int:
        return len(self.rowsets)

    def containing(self, key: bytes) -> list[T]:
        """Rowsets whose [min, max] contains key."""
        out = []
        node = self._root
        while node is not None:
            if key < node.center:
                for lo, _, rs in node.by_start:
                    if lo > key:
                        break
                    out.append(rs)
                node = node.left
            elif key > node.center:
                for _, hi, rs in node.by_end:
                    if hi < key:
                        break
                    out.append(rs)
                node = node.right
            else:
                out.extend(rs for _, _, rs in node.by_start)
                break
        return out

    def overlapping(self, lower: bytes | None, upper: bytes | None) -> list[T]:
        """Rowsets intersecting [lower, upper) (None = unbounded)."""
        out = []
        for rs, lo, hi in zip(self.rowsets, self._mins, self._maxs):
            if (upper is None or lo < upper) and (lower is None or hi >= lower):
                out.append(rs)
        return out

    def bulk_candidates(self, sorted_keys: np.ndarray) -> list[tuple[T, int, int]]:
        """(rowset, start, stop): sorted_keys[start:stop] lie within the rowset's range."""
        out = []
        if not len(sorted_keys):
            return out
        for rs, lo, hi in zip(self.rowsets, self._mins, self._maxs):
            a = int(np.searchsorted(sorted_keys, lo, "left"))
            b = int(np.searchsorted(sorted_keys, hi, "right"))
            if a < b:
                out.append((rs, a, b))
        return out
