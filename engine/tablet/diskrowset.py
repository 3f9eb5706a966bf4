"""DiskRowSet: immutable columnar base data plus UNDO/REDO delta stores.

    +-----------+       +------------------------+      +---------+     +----------------+
    | UNDO      | <---  | base data (CFile)      | ---> | REDO    | --> | DeltaMemStore  |
    | DeltaFiles|       | c<id> ... + __key      |      | Delta-  |     | (in memory)    |
    +-----------+       | bloom.bin, min/max key |      | Files   |     +----------------+
                        +------------------------+      +---------+

Rows are addressed by rowid = position in key order (dense, immutable). The base CFile has one
column per table column (by column id) and `__key`, the encoded primary key of each row with
a value index: a key is found by the rowset tree (min/max key), then the bloom filter, then a
binary search of the value index and one page (`find_key`, `find_keys`).

Updates and deletes of rows go to the DeltaMemStore keyed by (rowid, timestamp); a flush
turns it into a REDO DeltaFile. A REDO never re-inserts a row here: inserting a deleted key
again goes to the MemRowSet, leaving a dead "ghost" here (at most one version of a key is
live at any time).

Reading at snapshot S goes block by block, one block per base page (`scan`, `materialize`):
  1. base values from the pages (decoded, or only gathered at the surviving positions:
     `_read_at`)
  2. UNDO records with timestamps not committed in S, applied newest first
  3. REDO records (files, then DMS) committed in S, applied oldest first
Steps 2 and 3 are vectorised (`delta.resolve` over the block's records from
`_deltas_for`, patched into the values by `_patched`), and both are skipped without reading
anything when a store's timestamp range cannot matter for S.

REDO files pile up and UNDO history grows; delta compactions (delta_compaction.py, classes
of their own over this rowset's public interface: `capture` / `replace_stores` under
`swap_lock`, `new_file`, `write_delta`, `add_column_file`) and UNDO GC (`gc_undo`) fold or
drop them, swapping the rowset's stores as a whole.

Lazy materialization (paper §4.8): predicate columns are read first, one at a time, each
only at the rows that passed the previous ones; a page whose min/max rule out a predicate
is skipped without decoding; other projected columns are read only for surviving rows, and
not at all for blocks where nothing survives.

Schema changes (`Tablet.alter_schema`, ALTER TABLE ADD / DROP COLUMN) never rewrite a
rowset: files name columns by id (`c<id>`), never by name, and ids are never reused.
  - a column added after the rowset was written has no file here: it reads as its DEFAULT
    (or NULL) in every row and at every snapshot (`_fill_default`), until an UPDATE sets
    it (a delta record with its id) or a compaction writes it out;
  - a dropped column's data stays in the files, unread: reads ask for the ids they project
    and delta application keeps only those (`_deltas_for`), delta compactions fold only the
    current schema's columns (records of other ids are discarded), and a merging
    compaction writes only the current schema's columns. Its reader stays in the `DeltaStores`,
    so a scan opened before the DROP still finishes with the columns it started with.
`schema` is replaced by the tablet, under its flush and write locks (`set_schema`).
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
import shutil
import threading
import time
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from engine.cfile.block_cache import BlockCache
from engine.cfile.bloom import BloomFilter, hash_key, hash_keys
from engine.cfile.cfile import (
    COMPRESSION_BY_NAME,
    ENCODING_BY_NAME,
    CFileReader,
    CFileWriter,
    fsync_dir,
)
from engine.cfile.encodings import Compression, Encoding
from engine.config import TabletConfig
from engine.convert import default_array
from engine.key_encoding import binary_to_fixed, find_sorted
from engine.schema import ColumnSchema, Schema
from engine.tablet.delta import (
    DeltaBatch,
    DeltaType,
    MutationKind,
    Resolution,
    patch_array,
    patch_gathered,
    resolve,
)
from engine.tablet.delta_compaction import MajorDeltaCompaction, MinorDeltaCompaction
from engine.tablet.deltafile import DeltaFile, write_delta_file
from engine.tablet.delta_stores import DeltaStores
from engine.tablet.deltamemstore import DeltaMemStore, apply_chain, first_liveness
from engine.tablet.mvcc import MvccSnapshot
from engine.tablet.scan_spec import BoundPredicate

KEY_COLUMN = "__key"
_DELETE = int(MutationKind.DELETE)


@dataclasses.dataclass
class ScanStats:
    """Counters a scan fills in (EXPLAIN ANALYZE reports them)."""

    rows_scanned: int = 0  # rows in the blocks visited
    rows_returned: int = 0
    blocks_skipped_zone_map: int = 0  # blocks ruled out by page min/max
    blocks_skipped_lazy: int = 0  # blocks where predicates left nothing: other columns unread
    cells_skipped_lazy: int = 0  # projected cells never decoded thanks to lazy materialization
    rowsets_pruned: int = 0
    servers: tuple = ()  # on a cluster: "uuid@addr" of the tablet server(s) that served it

    def add(self, other: "ScanStats") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


_GATHER_ANY_DENSITY = (Encoding.FOR, Encoding.DICT)


def _fill_default(col: ColumnSchema, n: int) -> pa.Array:
    """A column added after this rowset was written (ALTER TABLE ADD COLUMN: no file of the
    rowset has its id) reads as its default, or NULL."""
    return default_array(col, n)


class DiskRowSet:
    def __init__(self, dir_path: str, schema: Schema, meta: dict, cache: BlockCache,
                 config: TabletConfig):
        self.dir = dir_path
        self.id = meta["id"]
        self.num_rows = meta["num_rows"]
        self.min_key = bytes.fromhex(meta["min_key"])
        self.max_key = bytes.fromhex(meta["max_key"])
        self.base_bytes = meta.get("base_bytes", 0)
        self.schema = schema
        self.config = config
        self._cache = cache
        self._base = CFileReader(os.path.join(dir_path, "base.cf"))
        self._keys = self._base.column(KEY_COLUMN)
        # Column files: base.cf, then files written by major delta compactions, each
        # holding new versions of some columns; the newest file of a column wins.
        self._col_files = list(meta.get("col_files", [{"file": "base.cf", "columns": None}]))
        readers: dict[int, object] = {}
        for cf in self._col_files:
            r = self._base if cf["file"] == "base.cf" else CFileReader(
                os.path.join(dir_path, cf["file"]))
            for c in schema.columns:
                if f"c{c.id}" in r.columns:
                    readers[c.id] = r.columns[f"c{c.id}"]
        with open(os.path.join(dir_path, "bloom.bin"), "rb") as f:
            self._bloom = BloomFilter.from_bytes(f.read())
        undo = tuple(DeltaFile(os.path.join(dir_path, d["file"]), d) for d in meta["undo"])
        redo = tuple(DeltaFile(os.path.join(dir_path, d["file"]), d) for d in meta["redo"])
        self._file_seq = meta.get("file_seq", len(undo) + len(redo))
        # Every op with index <= flushed_index has its effects on this rowset in its files.
        self.flushed_index = meta.get("flushed_index", 0)
        # Replaced as a whole, so a reader's capture is consistent (delta_stores.py).
        self._stores = DeltaStores(undo, redo, (DeltaMemStore(),), readers)
        self._dead: np.ndarray | None = None  # latest liveness for the write path
        self._dead_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._merge_cache: dict[str, tuple] = {}
        # Files replaced by a compaction or GC, deleted only once tablet metadata no longer
        # names them (a crash in between must leave the old, complete state).
        self.obsolete_files: list[str] = []
        # Serialises read-modify-write of `_stores` (DMS flush, delta compactions, GC).
        self._swap_lock = threading.Lock()
        # Held for a whole delta compaction / merge so two never work on one rowset.
        self.compact_lock = threading.Lock()

    def set_schema(self, schema: Schema) -> None:
        """The tablet's schema changed (ALTER TABLE): see the module docstring. Column
        readers are kept, so scans that captured the old stores read what they expect."""
        self.schema = schema

    # -- metadata ----------------------------------------------------------------------
    def metadata(self) -> dict:
        undo, redo, _, _ = self._stores
        return {"id": self.id, "col_files": self._col_files, "num_rows": self.num_rows, "min_key": self.min_key.hex(),
                "max_key": self.max_key.hex(), "base_bytes": self.base_bytes,
                "file_seq": self._file_seq, "flushed_index": self.flushed_index,
                "undo": [self._desc(f) for f in undo], "redo": [self._desc(f) for f in redo]}

    @staticmethod
    def _desc(f: DeltaFile) -> dict:
        return {"file": os.path.basename(f.path), "type": f.type.value, "count": f.count,
                "min_ts": f.min_ts, "max_ts": f.max_ts, "columns": f.column_ids}

    @property
    def dms(self) -> DeltaMemStore:
        return self._stores.dmss[-1]

    def delta_stats(self) -> dict:
        undo, redo, dms, _ = self._stores
        return {"undo_files": len(undo), "undo_records": sum(len(f) for f in undo),
                "redo_files": len(redo), "redo_records": sum(len(f) for f in redo),
                "dms_records": sum(len(d) for d in dms), "dms_bytes": sum(d.nbytes for d in dms)}

    # -- key lookups ---------------------------------------------------------------------
    def _key_page(self, page: int) -> np.ndarray:
        def load():
            arr = binary_to_fixed(self._keys.decode(page))
            return arr, arr.nbytes
        return self._cache.get_or_load((self.dir, KEY_COLUMN, page), load)

    def find_key(self, key: bytes) -> int:
        """rowid of `key` (live or dead), or -1. The scalar path of point operations."""
        if key < self.min_key or key > self.max_key:
            return -1
        if not self._bloom.may_contain_one(hash_key(key)):
            return -1
        page = self._keys.find_page(key)
        if page < 0:
            return -1
        i = find_sorted(self._key_page(page), key)
        return page * self._keys.page_rows + i if i >= 0 else -1

    def find_keys(self, keys: np.ndarray, hashes: np.ndarray | None = None) -> np.ndarray:
        """Vectorised find_key over an ``S<w>`` array (rowid or -1 per key)."""
        out = np.full(len(keys), -1, dtype=np.int64)
        if not len(keys):
            return out
        cand = np.flatnonzero((keys >= self.min_key) & (keys <= self.max_key))
        if not len(cand):
            return out
        h = hashes[cand] if hashes is not None else hash_keys(keys[cand])
        cand = cand[self._bloom.may_contain(h)]
        if not len(cand):
            return out
        pages = self._keys.pages_for_sorted(keys[cand])
        for page in np.unique(pages[pages >= 0]):  # a loop per page, not per row
            idx = cand[pages == page]
            pk = self._key_page(int(page))
            pos = np.searchsorted(pk, keys[idx])
            pos_c = np.minimum(pos, len(pk) - 1)
            hit = pk[pos_c] == keys[idx]
            out[idx[hit]] = int(page) * self._keys.page_rows + pos_c[hit]
        return out

    def rowid_range(self, lower: bytes | None, upper: bytes | None) -> tuple[int, int]:
        """Rows whose key is in [lower, upper) as a rowid range (paper §4.7)."""
        lo, hi = 0, self.num_rows
        if lower is not None and lower > self.min_key:
            lo = self._lower_bound(lower)
        if upper is not None and upper <= self.max_key:
            hi = self._lower_bound(upper)
        return lo, max(lo, hi)

    def _lower_bound(self, key: bytes) -> int:
        """First rowid whose key is >= key."""
        firsts = self._keys.first_values()
        page = max(bisect.bisect_right(firsts, key) - 1, 0)
        keys = self._key_page(page)
        i = int(np.searchsorted(keys, key, "left"))
        return page * self._keys.page_rows + i

    # -- write path (tablet write lock held) ---------------------------------------------
    def latest_dead(self) -> np.ndarray:
        """Bool per row: deleted in the latest state (built once from the REDO stores)."""
        if self._dead is None:
            with self._dead_lock:
                if self._dead is None:
                    dead = np.zeros(self.num_rows, dtype=bool)
                    _, redo, dmss, _ = self._stores
                    for batch in [f.records() for f in redo] + [d.view() for d in dmss]:
                        k = batch.kind != MutationKind.UPDATE
                        # REDOs of a DiskRowSet are UPDATE or DELETE only.
                        dead[batch.rowid[k]] = True
                    self._dead = dead
        return self._dead

    def live_at(self, rowids: np.ndarray, ts: int, seq: int) -> np.ndarray:
        """Liveness of some rows just before round `seq` of the op at timestamp `ts`:
        records before ts, and those of the same op in earlier rounds, count.

        Used by WAL replay only: a loop over the few candidate rows of a replayed op, each
        resolved with the vectorised delta code.
        """
        undo_files, redo_files, dmss, _ = self._stores
        out = np.ones(len(rowids), dtype=bool)
        for i, r in enumerate(rowids):
            r = int(r)
            u = [f.records().slice_rows(r, r + 1) for f in undo_files]
            d = [(x.records() if isinstance(x, DeltaFile) else x.view()).slice_rows(r, r + 1)
                 for x in list(redo_files) + list(dmss)]
            undo = DeltaBatch.concat(u)
            redo = DeltaBatch.concat(d)
            if len(undo):
                undo = undo.select((undo.ts > ts) | ((undo.ts == ts) & (undo.seq >= seq)))
            if len(redo):
                redo = redo.select((redo.ts < ts) | ((redo.ts == ts) & (redo.seq < seq)))
            for recs, last in ((undo, False), (redo, True)):
                if len(recs):
                    res = resolve(recs, r, 1, last, [])
                    if res.live is not None and res.live[0] >= 0:
                        out[i] = bool(res.live[0])
        return out

    def mutate(self, batch: DeltaBatch) -> None:
        dead = self.latest_dead()
        self.dms.append(batch)
        dead[batch.rowid[batch.kind == MutationKind.DELETE]] = True

    def mutate_row(self, rowid: int, ts: int, kind: int, values: dict | None, types: dict,
                   nbytes: int) -> None:
        """`mutate` of one UPDATE / DELETE record given as plain values (the small-write
        path: `DeltaMemStore.append_row`)."""
        dead = self.latest_dead()
        self.dms.append_row(rowid, ts, kind, values, types, nbytes)
        if kind == _DELETE:
            dead[rowid] = True

    # -- delta flush ---------------------------------------------------------------------
    def begin_dms_flush(self) -> DeltaMemStore | None:
        """Swap in a new DMS (caller holds the write lock); returns the one to flush."""
        with self._swap_lock:
            st = self._stores
            old = st.dmss[-1]
            if old.empty():
                return None
            self._stores = st.replace(dmss=st.dmss + (DeltaMemStore(),))
            return old

    def advance_flushed_index_if_clean(self, index: int) -> bool:
        """Nothing unflushed (a single empty DMS): every op so far is durable here.
        Returns whether that was the case."""
        dmss = self._stores.dmss
        if len(dmss) == 1 and dmss[0].empty():
            self.flushed_index = max(self.flushed_index, index)
            return True
        return False

    def finish_dms_flush(self, old: DeltaMemStore, fsync: bool, index: int) -> None:
        """Write `old` as a REDO DeltaFile and replace it (no lock needed: readers see either
        the DMS or the file, both holding the same records)."""
        with self._flush_lock:
            self._file_seq += 1
            name = f"redo_{self._file_seq:06d}.df"
            path = os.path.join(self.dir, name)
            desc = write_delta_file(path, old.view(), DeltaType.REDO, self.config.page_rows,
                                    fsync)
            desc["file"] = name
            f = DeltaFile(path, desc)
            with self._swap_lock:
                st = self._stores
                self._stores = st.replace(redo=st.redo + (f,),
                                           dmss=tuple(d for d in st.dmss if d is not old))
            if fsync:
                fsync_dir(self.dir)
            self.flushed_index = max(self.flushed_index, index)

    # -- delta compactions and history GC (maintenance ops) -----------------------------
    def redo_file_count(self) -> int:
        return len(self._stores.redo)

    def redo_file_records(self) -> int:
        return sum(len(f) for f in self._stores.redo)

    def undo_gc_candidates(self, ahm: int) -> list[DeltaFile]:
        """UNDO files all of whose records are at or before the ancient history mark."""
        return [f for f in self._stores.undo if f.max_ts <= ahm]

    def gc_undo(self, ahm: int) -> int:
        """UndoDeltaBlockGC: drop UNDO files older than the ancient history mark. No read
        at or after the mark applies them, and reads before it are refused."""
        with self._swap_lock:
            st = self._stores
            dead = [f for f in st.undo if f.max_ts <= ahm]
            if not dead:
                return 0
            self._stores = st.replace(undo=tuple(f for f in st.undo if f not in dead))
        self.obsolete_files += [f.path for f in dead]
        return sum(f.count for f in dead)

    def minor_delta_compact(self) -> int:
        """Merge all REDO DeltaFiles into one (delta_compaction.py `MinorDeltaCompaction`)."""
        return MinorDeltaCompaction(self).run()

    def major_delta_compact(self, ahm: int) -> int:
        """Fold REDO DeltaFiles into base data, turning them into UNDO records
        (delta_compaction.py `MajorDeltaCompaction`)."""
        return MajorDeltaCompaction(self, ahm).run()

    # what the delta compactions use to swap this rowset's stores
    @property
    def swap_lock(self) -> threading.Lock:
        """Serialises read-modify-writes of the stores (`capture` then `replace_stores`):
        DMS flush, delta compactions, UNDO GC."""
        return self._swap_lock

    def replace_stores(self, stores: DeltaStores) -> None:
        """Make `stores` this rowset's, in one assignment (the caller holds `swap_lock`;
        a scan that captured the old record keeps reading it)."""
        self._stores = stores

    def new_file(self, prefix: str, ext: str) -> tuple[str, str]:
        """(name, path) of a new file of this rowset (`<prefix>_<seq>.<ext>`, the sequence
        persisted with the metadata)."""
        self._file_seq += 1
        name = f"{prefix}_{self._file_seq:06d}.{ext}"
        return name, os.path.join(self.dir, name)

    def write_delta(self, batch: DeltaBatch, dtype: DeltaType) -> DeltaFile | None:
        """`batch` written as a new DeltaFile of this rowset (None: an empty batch)."""
        if not len(batch):
            return None
        name, path = self.new_file(dtype.value, "df")
        desc = write_delta_file(path, batch, dtype, self.config.page_rows, self.config.fsync)
        desc["file"] = name
        return DeltaFile(path, desc)

    def add_column_file(self, col_file: dict | None, readers: dict) -> list[str]:
        """Record a column file a major compaction wrote (`col_file`: {"file", "columns"},
        None: none) and drop the column files (other than base.cf) that no column of
        `readers` reads any more; returns the names dropped (the caller holds
        `swap_lock` and lists their paths as obsolete)."""
        if col_file:
            self._col_files.append(col_file)
        used = {os.path.basename(r_path) for r_path in
                (getattr(r, "path", "") for r in readers.values())}
        gone = [cf["file"] for cf in self._col_files
                if cf["file"] != "base.cf" and cf["file"] not in used]
        self._col_files = [cf for cf in self._col_files if cf["file"] not in gone]
        return gone

    def dms_memory_bytes(self) -> int:
        return sum(d.nbytes for d in self._stores.dmss)

    def dms_age_s(self) -> float:
        first = [d.first_append_at for d in self._stores.dmss if d.first_append_at is not None]
        return time.monotonic() - min(first) if first else 0.0

    def read_base_column(self, name: str) -> pa.Array:
        """The whole base-data column file `name` (e.g. the encoded key column), decoded."""
        r = self._base.column(name)
        parts = [r.decode(p) for p in range(r.num_pages)]
        return pa.concat_arrays(parts) if parts else pa.array([], type=r.type)

    def read_column(self, col: ColumnSchema, readers) -> pa.Array:
        """Column `col`'s whole base data through `readers` (a capture's `readers`); its
        default value on every row when the rowset has no file for it (added later)."""
        r = readers.get(col.id)
        if r is None:
            return _fill_default(col, self.num_rows)
        parts = [r.decode(p) for p in range(r.num_pages)]
        return pa.concat_arrays(parts) if parts else pa.array([], type=col.physical_type)

    # -- read path -----------------------------------------------------------------------
    def _merged(self, kind: str, stores) -> DeltaBatch:
        """All records of these stores as one sorted batch, cached until the stores change
        (each store is sorted; merging them for every scan would dominate scan time)."""
        key = (kind, tuple((id(x), len(x)) for x in stores))
        cached = self._merge_cache.get(kind)
        if cached is not None and cached[0] == key:
            return cached[1]
        batch = DeltaBatch.concat([x.records() if isinstance(x, DeltaFile) else x.view()
                                   for x in stores if len(x)])
        self._merge_cache[kind] = (key, batch)
        return batch

    def _deltas_for(self, snapshot: MvccSnapshot, col_ids: set[int], st=None
                    ) -> tuple[DeltaBatch | None, DeltaBatch | None]:
        """(UNDO records to roll back, REDO records to apply) for this snapshot."""
        undo_files, redo_files, dmss, _ = st or self._stores
        undo = redo = None
        u = [f for f in undo_files if snapshot.may_have_uncommitted_at_or_before(f.max_ts)]
        if u:
            b = self._merged("undo", u)
            undo = b.select(~snapshot.is_committed_array(b.ts)).drop_columns(col_ids)
        r = [x for x in list(redo_files) + list(dmss) if len(x) and
             snapshot.may_have_committed_at_or_after(x.min_ts)]
        if r:
            b = self._merged("redo", r)
            redo = b.select(snapshot.is_committed_array(b.ts)).drop_columns(col_ids)
        return (undo if undo is not None and len(undo) else None,
                redo if redo is not None and len(redo) else None)

    def _read_full(self, col: ColumnSchema, page: int, lo: int, hi: int, readers) -> pa.Array:
        r = readers.get(col.id)
        if r is None:
            return _fill_default(col, hi - lo)
        return r.decode(page)

    def _read_at(self, col: ColumnSchema, page: int, lo: int, hi: int,
                 sel: np.ndarray | None, readers) -> pa.Array:
        """Physical values of rows lo+sel (sel=None: every row of the block)."""
        if sel is None:
            return self._read_full(col, page, lo, hi, readers)
        r = readers.get(col.id)
        if r is None:
            return _fill_default(col, len(sel))
        # dense: one decode then take is cheaper than a gather, except where the gather
        # reads the selected slots only (FOR: deltas[sel]; DICT: codes[sel]), where it is
        # cheaper whatever the density (TPC-H Q01 keeps 98.6% of lineitem's rows)
        if len(sel) * 4 >= hi - lo and r.encoding(page) not in _GATHER_ANY_DENSITY:
            return r.decode(page).take(pa.array(sel))
        return r.gather(page, sel, ascending=True)      # (sel: flatnonzero's, ascending)

    def capture(self) -> DeltaStores:
        """This rowset's stores as of now; a scan started later reads exactly them."""
        return self._stores

    def scan(self, columns: Sequence[ColumnSchema], predicates: Sequence[BoundPredicate],
             snapshot: MvccSnapshot, lower: bytes | None, upper: bytes | None,
             stats: ScanStats, lazy: bool = True, st=None) -> Iterator[dict[int, pa.Array]]:
        """Yield {col_id: physical array} per block for live rows matching the predicates.

        `st` is the capture() taken when the tablet scan was opened, so compactions or
        history GC that finish while the scan runs do not change what it returns.
        """
        lo_row, hi_row = self.rowid_range(lower, upper)
        if lo_row >= hi_row:
            return
        need = {c.id for c in columns} | {p.col_id for p in predicates}
        st = st or self._stores
        readers = st.readers
        undo, redo = self._deltas_for(snapshot, need, st)
        pr = self.config.page_rows
        pred_cols = {p.col_id: p.col for p in predicates}
        for page in range(lo_row // pr, (hi_row - 1) // pr + 1):
            blo, bhi = page * pr, min((page + 1) * pr, self.num_rows)
            lo, hi = max(blo, lo_row), min(bhi, hi_row)
            n = bhi - blo
            res_u = resolve(undo.slice_rows(blo, bhi), blo, n, False, None) if undo else None
            res_r = resolve(redo.slice_rows(blo, bhi), blo, n, True, None) if redo else None
            stats.rows_scanned += hi - lo
            live = np.ones(n, dtype=bool)
            if res_u is not None:
                live = res_u.apply_live(live)
            if res_r is not None:
                live = res_r.apply_live(live)
            if lo > blo or hi < bhi:
                live[: lo - blo] = False
                live[hi - blo:] = False
            # Zone maps: skip the block if a predicate column without patches rules it out.
            skip = False
            for p in predicates:
                patched = (res_u is not None and p.col_id in res_u.patches) or (
                    res_r is not None and p.col_id in res_r.patches)
                r = readers.get(p.col_id)
                if not patched and r is not None and not p.may_match(*r.stats(page)):
                    skip = True
                    break
            if skip:
                stats.blocks_skipped_zone_map += 1
                continue
            all_live = bool(live.all())
            sel = None if all_live else np.flatnonzero(live)
            if lazy:
                # Predicate columns one at a time, each read only at the rows that passed
                # the previous ones; other columns only at the final survivors.
                for p in predicates:
                    m = self._matches(p, page, blo, bhi, sel, res_u, res_r, readers)
                    if not m.all():
                        keep = np.flatnonzero(m)
                        sel = keep if sel is None else sel[keep]
                        if not len(sel):
                            break
                if sel is not None and not len(sel):
                    stats.blocks_skipped_lazy += 1
                    stats.cells_skipped_lazy += (hi - lo) * len(columns)
                    continue
                if sel is not None:
                    stats.cells_skipped_lazy += ((hi - lo) - len(sel)) * len(columns)
                values = {c.id: self._patched(c, page, blo, bhi, sel, res_u, res_r, readers)
                          for c in columns}
            else:
                full = {cid: self._patched(col, page, blo, bhi, None, res_u, res_r, readers)
                        for cid, col in ({c.id: c for c in columns} | pred_cols).items()}
                m = live.copy()
                for p in predicates:
                    m &= p.evaluate(full[p.col_id])
                if not m.any():
                    continue
                keep = None if m.all() else pa.array(np.flatnonzero(m))
                values = {c.id: (full[c.id] if keep is None else full[c.id].take(keep))
                          for c in columns}
                sel = None if keep is None else np.flatnonzero(m)
            out = {c.id: values[c.id] for c in columns}
            nrows = (bhi - blo) if sel is None else len(sel)
            if nrows == 0:
                continue
            stats.rows_returned += nrows
            yield out if columns else {"__count__": nrows}

    def _matches(self, p: BoundPredicate, page: int, blo: int, bhi: int,
                 sel: np.ndarray | None, res_u: Resolution | None, res_r: Resolution | None,
                 readers) -> np.ndarray:
        """Predicate `p`'s mask over the block's rows lo+sel (sel=None: every row). On a
        dictionary-coded page without patches it is evaluated once per dictionary entry
        and gathered by code: a status column's few strings instead of every row's."""
        r = readers.get(p.col_id)
        if r is not None and p.on_dictionary and not (
                (res_u is not None and p.col_id in res_u.patches) or
                (res_r is not None and p.col_id in res_r.patches)):
            parts = r.dict_page(page)
            if parts is not None and len(parts[0]):
                dictionary, codes, valid = parts
                if sel is not None:
                    codes = codes[sel]
                    valid = None if valid is None else valid[sel]
                m = p.evaluate(dictionary)[codes]
                return m if valid is None else (m & valid)
        return p.evaluate(self._patched(p.col, page, blo, bhi, sel, res_u, res_r, readers))

    def _patched(self, col: ColumnSchema, page: int, blo: int, bhi: int, sel: np.ndarray | None,
                 res_u: Resolution | None, res_r: Resolution | None, readers) -> pa.Array:
        arr = self._read_at(col, page, blo, bhi, sel, readers)
        for res in (res_u, res_r):
            if res is not None and col.id in res.patches:
                pos, vals = res.patches[col.id]
                arr = (patch_array(arr, pos, vals) if sel is None
                       else patch_gathered(arr, sel, pos, vals))
        return arr

    def materialize(self, columns: Sequence[ColumnSchema], snapshot: MvccSnapshot,
                    rowids: np.ndarray | None = None
                    ) -> Iterator[tuple[int, np.ndarray, dict[int, pa.Array]]]:
        """Every row, dead or alive, per block: (first rowid, live mask, physical columns);
        with `rowids` (sorted), only the blocks holding one of them (a diff scan's changed
        rows: the other pages are neither read nor resolved)."""
        st = self._stores
        readers = st.readers
        undo, redo = self._deltas_for(snapshot, {c.id for c in columns}, st)
        pr = self.config.page_rows
        for page in range((self.num_rows + pr - 1) // pr):
            blo, bhi = page * pr, min((page + 1) * pr, self.num_rows)
            if rowids is not None:
                a = int(np.searchsorted(rowids, blo))
                if a == len(rowids) or int(rowids[a]) >= bhi:
                    continue
            n = bhi - blo
            res_u = resolve(undo.slice_rows(blo, bhi), blo, n, False, None) if undo else None
            res_r = resolve(redo.slice_rows(blo, bhi), blo, n, True, None) if redo else None
            live = np.ones(n, dtype=bool)
            for res in (res_u, res_r):
                if res is not None:
                    live = res.apply_live(live)
            cols = {c.id: self._patched(c, page, blo, bhi, None, res_u, res_r, readers)
                    for c in columns}
            yield blo, live, cols

    def _records_in(self, start_ts: int, end_ts: int, field: str, distinct: bool = True
                    ) -> np.ndarray:
        """Sorted distinct values of `field` ("rowid" or "ts") of the UNDO and REDO records
        in (start_ts, end_ts]; with `distinct` false, one per record, unsorted."""
        undo_files, redo_files, dmss, _ = self._stores
        parts = []
        for store in list(undo_files) + list(redo_files) + list(dmss):
            if len(store) == 0 or store.max_ts <= start_ts or store.min_ts > end_ts:
                continue
            b = store.records() if isinstance(store, DeltaFile) else store.view()
            parts.append(getattr(b, field)[(b.ts > start_ts) & (b.ts <= end_ts)])
        if not parts:
            return np.empty(0, dtype=np.int64)
        if not distinct:
            return np.concatenate(parts).astype(np.int64, copy=False)
        return np.unique(np.concatenate(parts)).astype(np.int64, copy=False)

    def changed_rowids(self, start_ts: int, end_ts: int) -> np.ndarray:
        """Sorted rowids with any UNDO or REDO record in (start_ts, end_ts]."""
        return self._records_in(start_ts, end_ts, "rowid")

    def change_timestamps(self, start_ts: int, end_ts: int, distinct: bool = True
                          ) -> np.ndarray:
        """Sorted distinct timestamps of the UNDO and REDO records in (start_ts, end_ts]:
        the commits that changed a row of this rowset in that window (with `distinct`
        false, one per record: Tablet.change_counts)."""
        return self._records_in(start_ts, end_ts, "ts", distinct)

    def lookup_row(self, rowid: int, columns: Sequence[ColumnSchema], snapshot: MvccSnapshot
                   ) -> dict[int, object] | None:
        """Physical values of one row at a snapshot, or None if not live then.

        Base values are read cell by cell in place (`CFile read_cell`), so a lookup costs
        a few microseconds per column whatever the page size, and needs no page cache.

        The common case after updates - no UNDO to roll back at this snapshot, no REDO
        file, one DeltaMemStore - reads the row's records with the store's own
        `row_changes` (its row records walked in Python, its Arrow records sliced by
        rowid: exactly `resolve` over them), without building DeltaBatches per lookup
        (`_deltas_for_row` and its concatenations: the read after an update storm).
        """
        st = self._stores
        undo_files, redo_files, dmss, _ = st
        simple = not redo_files
        if simple:
            acb = snapshot.all_committed_before
            for f in undo_files:        # a loop per UNDO file of the rowset (a few)
                if f.max_ts >= acb:     # `may_have_uncommitted_at_or_before`
                    simple = False
                    break
        if simple and len(dmss) <= 1:
            changed = None
            if dmss and len(dmss[0]) and dmss[0].may_have_row(rowid):
                changed = dmss[0].row_changes(rowid, snapshot, [c.id for c in columns])
                if changed is not None and changed[0] == 0:
                    return None
            readers = st.readers
            out = {}
            for c in columns:
                r = readers.get(c.id)
                out[c.id] = r.read_cell(rowid) if r is not None else \
                    _fill_default(c, 1)[0].as_py()
            if changed is not None:
                for cid, v in changed[1].items():
                    if cid in out:
                        out[cid] = v
            return out
        res_list = []
        changed = None
        if self._has_deltas_for(snapshot, st):
            live = True
            undo, redo = self._deltas_for_row(rowid, snapshot, st)
            # single-row writes' records of the row, as plain values (deltamemstore.py)
            plain = [r for d in st.dmss if len(d) for r in d.row_records(rowid)]
            if plain:
                if redo is not None and len(redo):
                    plain += redo.to_records()
                    redo = None
                plain.sort(key=lambda r: (r[1], r[2]))    # a row's few records
                want = {c.id for c in columns} & {cid for r in plain if r[4] for cid in r[4]}
                changed = apply_chain(plain, snapshot, want, first_liveness(plain))
            for recs, last in ((undo, False), (redo, True)):
                if recs is not None and len(recs):
                    res = resolve(recs, rowid, 1, last, None)
                    if res.live is not None and res.live[0] >= 0:
                        live = bool(res.live[0])
                    res_list.append(res)
            if changed is not None and changed[0] >= 0:
                live = bool(changed[0])
            if not live:
                return None
        readers = st.readers
        out = {}
        for c in columns:
            r = readers.get(c.id)
            out[c.id] = r.read_cell(rowid) if r is not None else _fill_default(c, 1)[0].as_py()
        for res in res_list:  # newer values from the deltas (UNDO first, then REDO)
            for cid, (_, vals) in res.patches.items():
                if cid in out:
                    out[cid] = vals[0].as_py()
        if changed is not None:   # the REDO records, row records among them
            for cid, v in changed[1].items():
                if cid in out:
                    out[cid] = v
        return out

    def _has_deltas_for(self, snapshot: MvccSnapshot, st) -> bool:
        """False when no UNDO must be rolled back and no REDO/DMS record exists at all."""
        undo_files, redo_files, dmss, _ = st
        if any(snapshot.may_have_uncommitted_at_or_before(f.max_ts) for f in undo_files):
            return True
        return any(len(s) for s in redo_files) or any(len(d) for d in dmss)

    def _deltas_for_row(self, rowid: int, snapshot: MvccSnapshot, st
                        ) -> tuple[DeltaBatch | None, DeltaBatch | None]:
        undo_files, redo_files, dmss, _ = st
        undo = redo = None
        us = []
        for f in undo_files:
            if snapshot.may_have_uncommitted_at_or_before(f.max_ts):
                b = f.records().slice_rows(rowid, rowid + 1)
                if len(b):
                    us.append(b.select(~snapshot.is_committed_array(b.ts)))
        rs = []
        for store in list(redo_files) + list(dmss):
            if len(store) == 0 or not snapshot.may_have_committed_at_or_after(store.min_ts):
                continue
            b = store.records().slice_rows(rowid, rowid + 1) if isinstance(
                store, DeltaFile) else store.rows_records(rowid, rowid + 1)
            if len(b):
                rs.append(b.select(snapshot.is_committed_array(b.ts)))
        if us:
            undo = DeltaBatch.concat(us)
        if rs:
            redo = DeltaBatch.concat(rs)
        return undo, redo

    def undo_max_ts(self) -> int:
        return max((f.max_ts for f in self._stores.undo), default=0)

    def delete_files(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def write_diskrowset(dir_path: str, drs_id: int, schema: Schema, data: pa.Table,
                     keys: np.ndarray, undo: DeltaBatch, redo: DeltaBatch,
                     config: TabletConfig, flushed_index: int = 0) -> dict:
    """Write one DiskRowSet directory from key-sorted physical data; returns its metadata.

    Files are written under `<dir>.tmp` and the directory renamed into place last, so a
    crash leaves either no rowset or a complete one (the tablet metadata names it only
    after this returns).
    """
    tmp = dir_path + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    w = CFileWriter(os.path.join(tmp, "base.cf"), fsync=config.fsync)
    try:
        for col in schema.columns:
            w.add_column(f"c{col.id}", data.column(col.name), config.page_rows,
                         ENCODING_BY_NAME[col.encoding],
                         COMPRESSION_BY_NAME.get(col.compression, Compression.NONE))
        w.add_column(KEY_COLUMN, _fixed_to_binary(keys), config.page_rows, Encoding.PLAIN, Compression.NONE,
                     value_index=True)
        base_bytes = w.finish({"num_rows": data.num_rows})
    except BaseException:
        w.abort()
        raise
    bloom = BloomFilter.build(hash_keys(keys), config.bloom_fp_rate)
    with open(os.path.join(tmp, "bloom.bin"), "wb") as f:
        f.write(bloom.to_bytes())
        f.flush()
        if config.fsync:
            os.fsync(f.fileno())
    meta = {"id": drs_id, "num_rows": data.num_rows, "min_key": bytes(keys[0]).hex(),
            "max_key": bytes(keys[-1]).hex(), "base_bytes": base_bytes, "undo": [],
            "redo": [], "file_seq": 0, "flushed_index": flushed_index}
    for batch, dtype in ((undo, DeltaType.UNDO), (redo, DeltaType.REDO)):
        if len(batch):
            meta["file_seq"] += 1
            name = f"{dtype.value}_{meta['file_seq']:06d}.df"
            desc = write_delta_file(os.path.join(tmp, name), batch, dtype, config.page_rows,
                                    config.fsync)
            desc["file"] = name
            meta[dtype.value].append(desc)
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(meta, f)
    if config.fsync:
        fsync_dir(tmp)
    os.replace(tmp, dir_path)
    if config.fsync:
        fsync_dir(os.path.dirname(dir_path))
    return meta


def delete_obsolete(drs: "DiskRowSet") -> None:
    files, drs.obsolete_files = drs.obsolete_files, []
    for path in files:
        _unlink(path)


def _unlink(path: str) -> None:
    """Remove a file replaced by a compaction. Readers that captured the old state keep
    working: records are loaded and column files memory-mapped before they are dropped."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _fixed_to_binary(keys: np.ndarray) -> pa.Array:
    """numpy ``S<w>`` -> Arrow binary with each value's trailing zero bytes dropped.

    The canonical key form (see key_encoding) has no trailing zeros; lengths are found
    vectorised from the last non-zero byte of each row.
    """
    n = len(keys)
    w = keys.dtype.itemsize
    m = keys.view(np.uint8).reshape(n, w)
    nz = m != 0
    # length = index of last non-zero byte + 1 (0 for an all-zero key)
    rev_first = np.argmax(nz[:, ::-1], axis=1)
    lens = np.where(nz.any(axis=1), w - rev_first, 0).astype(np.int32)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:])
    data = m[np.arange(w) < lens[:, None]]
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(data.tobytes())])
