"""TabletMetadata: the durable description of a tablet, and TabletComponents, its live view.

    TABLET_DIR/
     ├── tablet-meta.json     schema + version, id counters, flushed indexes, rowset list
     ├── rowsets/<id>/        one DiskRowSet each: base.cf, bloom.bin, delta and column files
     └── wal/                 the write-ahead log (engine/consensus/log.py)

`TabletMetadata` is one version of `tablet-meta.json` (Kudu's TabletMetadata / its
superblock), immutable: the tablet builds a new one from its state and `write`s it, which
replaces the file atomically (write a temporary file, fsync, rename, fsync the directory),
so after a crash the file holds the state before or after a change, never half of it.
What it records, and the invariant each field keeps:

  schema, schema_version  the schema every rowset is read with and every replayed op is
                          converted with; bumped by `Tablet.alter_schema`, which flushes
                          everything first, so no WAL entry older than the schema is ever
                          replayed (see tablet.py).
  next_rowset_id,         id counters; ids are never reused (a crash between writing a
  next_mrs_id             rowset and naming it here leaves an orphan, never a clash).
  last_timestamp          at or after every op the metadata's files contain; the clock and
                          MVCC resume after it on open (tablet_bootstrap.py).
  mrs_flushed_index       every op with index <= this has its MemRowSet inserts in
                          DiskRowSets (the WAL replays only later inserts).
  rowsets                 each DiskRowSet's own metadata (`DiskRowSet.metadata()`): its
                          files and its `flushed_index` (ops <= it have their mutations of
                          its rows in its files).

The durable-swap rule every change of the rowset list follows (flush, compaction, GC):
write the new files first, then the metadata naming them, and delete files only after a
metadata that no longer names them is durable. A crash in between leaves garbage, never a
hole; `remove_orphans` deletes that garbage on open (Kudu:
TabletMetadata::DeleteOrphanedBlocks).

`TabletComponents` is what readers capture: the active MemRowSet, the MemRowSets being
flushed, the tree of DiskRowSets and the schema to read them with. It is replaced as a
whole (never mutated), so a reader holding one sees one consistent set of rowsets with one
schema (Kudu's TabletComponents).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Sequence

from engine import errors
from engine.fs import write_json_atomic
from engine.schema import Schema
from engine.tablet.diskrowset import DiskRowSet
from engine.tablet.memrowset import MemRowSet
from engine.tablet.rowset_tree import RowSetTree

META_FILE = "tablet-meta.json"
ROWSETS_DIR = "rowsets"


class TabletComponents:
    """What rowsets exist, and the schema to read them with; replaced as a whole (readers
    capture one reference, so a read never mixes the schemas before and after an ALTER)."""

    __slots__ = ("mrs", "frozen", "tree", "schema")

    def __init__(self, mrs: MemRowSet, frozen: tuple[MemRowSet, ...],
                 tree: RowSetTree[DiskRowSet], schema: Schema):
        self.mrs = mrs
        self.frozen = frozen
        self.tree = tree
        self.schema = schema

    @property
    def drss(self) -> tuple[DiskRowSet, ...]:
        return self.tree.rowsets


def rowset_tree(drss: Sequence[DiskRowSet]) -> RowSetTree[DiskRowSet]:
    """The interval tree over DiskRowSets' key ranges that point writes and scans probe."""
    return RowSetTree(drss, [(d.min_key, d.max_key) for d in drss])


def rowset_dir(tablet_path: str, rowset_id: int) -> str:
    return os.path.join(tablet_path, ROWSETS_DIR, f"{rowset_id:08d}")


@dataclasses.dataclass(frozen=True)
class TabletMetadata:
    """One version of tablet-meta.json (see the module docstring for each field's rule)."""

    schema: Schema
    schema_version: int = 0
    next_rowset_id: int = 0
    next_mrs_id: int = 0
    last_timestamp: int = 0
    mrs_flushed_index: int = 0
    rowsets: tuple[dict, ...] = ()

    def to_dict(self) -> dict:
        return {"schema": self.schema.to_dict(), "schema_version": self.schema_version,
                "next_rowset_id": self.next_rowset_id, "next_mrs_id": self.next_mrs_id,
                "last_timestamp": self.last_timestamp,
                "mrs_flushed_index": self.mrs_flushed_index, "rowsets": list(self.rowsets)}

    @staticmethod
    def from_dict(d: dict) -> "TabletMetadata":
        return TabletMetadata(Schema.from_dict(d["schema"]), d.get("schema_version", 0),
                              d.get("next_rowset_id", 0), d.get("next_mrs_id", 0),
                              d.get("last_timestamp", 0), d.get("mrs_flushed_index", 0),
                              tuple(d.get("rowsets", ())))

    @staticmethod
    def exists(tablet_path: str) -> bool:
        return os.path.exists(os.path.join(tablet_path, META_FILE))

    @staticmethod
    def load(tablet_path: str) -> "TabletMetadata":
        """Read a tablet's metadata; NotFound if there is no tablet, Corruption if the
        file cannot be parsed."""
        try:
            with open(os.path.join(tablet_path, META_FILE)) as f:
                d = json.load(f)
        except FileNotFoundError:
            raise errors.NotFound(f"no tablet at {tablet_path}") from None
        except ValueError as e:
            raise errors.Corruption(f"{tablet_path}/{META_FILE}: {e}") from e
        return TabletMetadata.from_dict(d)

    def write(self, tablet_path: str, fsync: bool) -> None:
        """Replace tablet-meta.json atomically with this version."""
        write_json_atomic(os.path.join(tablet_path, META_FILE), self.to_dict(), fsync)

    def remove_orphans(self, tablet_path: str) -> None:
        """Delete files a crash left behind: rowsets and delta files this metadata does not
        name, and half-written `.tmp` files. They were never visible (the metadata naming
        them was not written), so removing them loses nothing."""
        rs_dir = os.path.join(tablet_path, ROWSETS_DIR)
        live = {f"{m['id']:08d}": m for m in self.rowsets}
        if not os.path.isdir(rs_dir):
            return
        for name in os.listdir(rs_dir):
            full = os.path.join(rs_dir, name)
            if name not in live:
                shutil.rmtree(full, ignore_errors=True)
                continue
            m = live[name]
            keep = {"base.cf", "bloom.bin", "meta.json"} | {d["file"] for d in m["undo"]} | {
                d["file"] for d in m["redo"]} | {cf["file"] for cf in m.get("col_files", [])}
            for f in os.listdir(full):
                if f not in keep:
                    os.unlink(os.path.join(full, f))
        for name in os.listdir(tablet_path):
            if name.endswith(".tmp"):
                os.unlink(os.path.join(tablet_path, name))
