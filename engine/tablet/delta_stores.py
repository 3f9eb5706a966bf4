"""DeltaStores: what one DiskRowSet reads its history and base columns from, as of a moment.

    DeltaStores(undo=(DeltaFile, ...), redo=(DeltaFile, ...),
                dmss=(DeltaMemStore, ...), readers={column id: column reader})

The rowset holds one and replaces it as a whole (a DMS flush, a delta compaction, history
GC: `DiskRowSet.swap_lock` serialises those read-modify-writes), so a reader that
captured it (`DiskRowSet.capture()`) keeps a consistent view while files change under it.
The last DMS of `dmss` receives new mutations; earlier ones are being flushed. `readers`
holds the base-data column readers of every column the rowset has files for (a column
added by ALTER TABLE after the rowset was written has none: its default fills it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from engine.tablet.deltafile import DeltaFile
    from engine.tablet.deltamemstore import DeltaMemStore


class DeltaStores(NamedTuple):
    undo: tuple[DeltaFile, ...]
    redo: tuple[DeltaFile, ...]
    dmss: tuple[DeltaMemStore, ...]
    readers: dict[int, Any]

    def replace(self, **changes: Any) -> DeltaStores:
        """A copy with the given fields replaced (the rowset swaps in the copy)."""
        return self._replace(**changes)
