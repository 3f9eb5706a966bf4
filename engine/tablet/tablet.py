"""Tablet: one horizontal partition of a table — a MemRowSet, DiskRowSets and MVCC.

    Tablet
     ├── MvccManager                       which op timestamps readers may see
     ├── MemRowSet (active)                receives every INSERT
     ├── MemRowSet (frozen, while flushing) still takes UPDATE/DELETE of its rows
     └── RowSetTree of DiskRowSets         each with UNDO files, REDO files, DeltaMemStore

One class, its phases public methods, two kinds of collaborators (Kudu's shape):

    Tablet ── writer: TabletWriter (tablet_write.py)   decode -> convert -> start_op ->
       │                                                apply to the stores -> finish_op
       └──── maintenance ops (tablet_mm_ops.py)         FlushMRSOp, FlushDeltaMemStoresOp,
                                                        CompactRowSetsOp, MinorDelta-,
                                                        MajorDeltaCompactionOp, UndoDelta-
                                                        BlockGCOp: each `perform()`s once

Write path and apply (`TabletWriter`, `tablet.writer`; the tablet's write methods are its):
every write, local or replayed or replicated, goes through `apply(op, timestamp, index)`:
timestamp under the write lock (so timestamp order is log order), WAL append (`start_op`),
rows applied (row_ops.py), wait for durability and MVCC commit (`finish_op`). Writers are
serialised by the write lock; each is admitted first (`admit_write`: memory back-pressure).

Read path: a reader captures the component tuple (an immutable snapshot of which rowsets
exist) and an MVCC snapshot, then never locks. Flushes build new components off to the side
and swap the tuple.

Maintenance (flushes, compactions, history GC: one op class each in tablet_mm_ops.py; the
tablet's `flush_mrs`, `compact_rowsets`, ... perform one) builds new rowsets off to the
side, then swaps the components under the write lock.

What other modules may use of a tablet (its public surface besides reads and writes):
`write_lock` (a caller writing several tablets as one, `Table`'s in-order writes, holds
every tablet's write lock around `first_failure` + `apply_deferred`), `admit_write()`
(memory back-pressure, before any lock), `flush_lock` (held while tablet copy links the
files, so no flush swaps them), `anchor_index()` (the oldest op the WAL must keep),
`current_schema` (the schema the stores are in now) and the maintenance methods.
What its collaborators use besides: `components` / `swap_components` (the component record
and its swap, under the write lock), `start_op` / `finish_op` (the op phases),
`new_memrowset`, `allocate_rowset_id`, `last_timestamp`, `mrs_flushed_index` /
`mark_mrs_flushed`, `persist_metadata`, `history_gc_mark`. The underscore members are the
tablet's own: no collaborator reads them (tests/engine/test_tablet_interfaces.py).

Durability: every op is in the WAL before it is acknowledged; `Tablet.open` restores the
flushed state (tablet_metadata.py) and replays the WAL from the log anchor
(tablet_bootstrap.py).

Schema changes (`alter_schema`: ALTER TABLE ADD / DROP COLUMN): the MemRowSet and every
DeltaMemStore are flushed, then the new schema and its version replace the old ones in the
tablet metadata atomically, so WAL replay never meets an op logged under another schema.
Rowsets are not rewritten; columns are matched by id everywhere. Readers take the schema
from the captured `TabletComponents`, so each read sees the schema before or after, never
a mix.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import threading
import time
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import errors
from engine.cfile.block_cache import BlockCache
from engine.clock import Clock, HybridClock, from_micros, physical_micros
from engine.consensus.log import Log
from engine.convert import identity, python_converter
from engine.config import TabletConfig
from engine.key_encoding import (
    compile_key_encoder,
    encode_key_prefix,
    encode_keys,
)
from engine.schema import ColumnSchema, Schema
from engine.tablet.diskrowset import DiskRowSet, ScanStats
from engine.tablet.memrowset import MemRowSet
from engine.tablet.ordered_scan import ordered_batches
from engine.tablet.mvcc import MvccManager, MvccSnapshot
from engine.tablet.scan_spec import BoundPredicate, ColumnPredicate, key_bounds
from engine.tablet.tablet_bootstrap import replay
from engine.tablet.tablet_metadata import (
    META_FILE,
    ROWSETS_DIR,
    TabletComponents,
    TabletMetadata,
    rowset_dir,
    rowset_tree,
)
from engine.tablet.tablet_mm_ops import (
    CompactRowSetsOp,
    FlushDeltaMemStoresOp,
    FlushMRSOp,
    MajorDeltaCompactionOp,
    MinorDeltaCompactionOp,
    UndoDeltaBlockGCOp,
    maintenance_ops,
    pick_compaction,
)
from engine.tablet.tablet_write import TabletWriter
from engine.tablet.write_op import WriteOp, WriteResult
from engine.types import DataType, to_logical

__all__ = ["META_FILE", "OrderMode", "Tablet", "python_converter"]  # META_FILE: for tools


# `Tablet.lookup`'s output plan: a text column's value is decoded in line
# (`python_converter` of STRING / VARCHAR), not by a call per value
_DECODE = object()


class OrderMode(enum.Enum):
    """How a scan orders its rows (Kudu's OrderMode; `Tablet.open_scan`)."""

    UNORDERED = "unordered"  # fastest: insert order in MemRowSets, then rowset by rowset
    ORDERED = "ordered"  # primary-key order, resumable after a key (fault-tolerant scans)



class Tablet:
    # decides a batch's first failing row under its write lock (first_failure): what
    # Table's in-order writes need of every tablet they write
    in_order_writes = True

    def __init__(self, path: str, schema: Schema, config: TabletConfig, clock: Clock,
                 meta: TabletMetadata | None = None):
        self.path = path
        self.schema = schema
        self.config = config
        self.clock = clock
        self.mvcc = MvccManager()
        self.cache = BlockCache(config.block_cache_bytes)
        self._write_lock = threading.RLock()
        # Held by flushes, merging compactions and alter_schema (which runs flushes inside).
        self._flush_lock = threading.RLock()
        self._key_cols = schema.key_columns
        self._encode_key = compile_key_encoder(self._key_cols)
        # Physical -> Python converters by column id (ids are never reused, so converters
        # of every schema this tablet has had can live in one dict).
        self._to_python: dict[int, Any] = {}
        self._lookup_cols: tuple = (None, {})          # `_lookup_columns`' cache
        self.writer = TabletWriter(self)   # the write pipeline (tablet_write.py)
        # the one-row small write (`TabletWriter.write_one`), bound here rather than
        # delegated by a method: every single-row write of a Table calls it
        self.write_one = self.writer.write_one
        self._set_schema(schema)
        meta = meta or TabletMetadata(schema)
        # Bumped by every alter_schema; persisted with the schema (see alter_schema).
        self.schema_version = meta.schema_version
        self._next_rowset_id = meta.next_rowset_id
        self._next_mrs_id = meta.next_mrs_id
        # Every op with index <= this has its MemRowSet inserts in DiskRowSets.
        self._mrs_flushed_index = meta.mrs_flushed_index
        drss = [DiskRowSet(rowset_dir(path, m["id"]), schema, m, self.cache, config)
                for m in meta.rowsets]
        last_ts = meta.last_timestamp
        if last_ts:
            self.clock.update(last_ts)  # MVCC catches up in the bootstrap, after replay
        self._last_ts = last_ts
        self._components = TabletComponents(self.new_memrowset(), (), rowset_tree(drss), schema)
        self.log = Log(os.path.join(path, "wal"), config.wal_sync, config.wal_segment_bytes,
                       config.wal_commit_delay_us, config.wal_commit_siblings)
        self.replayed_ops = 0
        self.maintenance = None  # set by MaintenanceManager.register
        self.write_stalls = 0

    # -- lifecycle ---------------------------------------------------------------------
    @classmethod
    def create(cls, path: str, schema: Schema, config: TabletConfig | None = None,
               clock: Clock | None = None, schema_version: int = 0) -> "Tablet":
        os.makedirs(os.path.join(path, ROWSETS_DIR), exist_ok=True)
        if TabletMetadata.exists(path):
            raise errors.AlreadyPresent(f"a tablet already exists at {path}")
        t = cls(path, schema, config or TabletConfig(), clock or HybridClock(),
                TabletMetadata(schema, schema_version))
        t.log.open_for_append(1)
        t.persist_metadata()
        return t

    @classmethod
    def open(cls, path: str, config: TabletConfig | None = None,
             clock: Clock | None = None) -> "Tablet":
        meta = TabletMetadata.load(path)
        meta.remove_orphans(path)
        t = cls(path, meta.schema, config or TabletConfig(), clock or HybridClock(), meta)
        t._bootstrap()
        return t

    def _bootstrap(self) -> None:
        """Replay the WAL from the log anchor and reopen it (tablet_bootstrap.py)."""
        start = self.anchor_index()
        result = replay(self.log, start, lambda op, ts, index: self.apply(op, ts, index=index))
        self.replayed_ops = result.ops_replayed
        self.log.open_for_append(max(result.last_index, self.log.last_index, start - 1) + 1)
        self.mvcc.adjust_for_replay(self._last_ts)
        with self._write_lock:
            self.persist_metadata()

    @property
    def write_lock(self) -> threading.RLock:
        """The lock every writer holds while it applies (never across the fsync): held
        by a caller applying to several tablets at once (`Table`'s in-order writes)."""
        return self._write_lock

    @property
    def flush_lock(self) -> threading.RLock:
        """Held by flushes, merging compactions and alter_schema: while a caller holds
        it, no maintenance op swaps this tablet's files (tablet copy links them)."""
        return self._flush_lock

    @property
    def current_schema(self) -> Schema:
        """The schema of the tablet's stores now (the captured components'), which a
        scan started now reads in."""
        return self._components.schema

    def anchor_index(self) -> int:
        """The oldest op index whose effects may exist only in the WAL."""
        comps = self._components
        low = [self._mrs_flushed_index]
        low += [d.flushed_index for d in comps.drss]
        return min(low) + 1

    def close(self) -> None:
        with self._write_lock:
            self.persist_metadata()
        self.log.close()

    def new_memrowset(self) -> MemRowSet:
        """A new, empty MemRowSet of the current schema with the next MRS id (a flush
        swaps it in for the one it freezes)."""
        self._next_mrs_id += 1
        return MemRowSet(self.schema, self._next_mrs_id)

    def _set_schema(self, schema: Schema) -> None:
        """The schema the write path, flushes and compactions use, and what derives from it
        (readers take theirs from the captured `TabletComponents`)."""
        self.schema = schema
        self._key_cols = schema.key_columns  # same ids and types in every schema; names
        # may change (a catalog RENAME COLUMN reaches the tablet with its next alter)
        for c in schema.columns:
            if c.id not in self._to_python:
                self._to_python[c.id] = python_converter(c)
        self.writer.set_schema(schema)

    def persist_metadata(self, schema: tuple[Schema, int] | None = None) -> None:
        """Write tablet metadata atomically (the caller holds the write lock: a
        maintenance op after its swap, close, alter_schema), then GC the log.
        The log hears the new anchor before the write too (`before_anchor`).

        Stores with nothing unflushed are advanced to the last op index first: every op so
        far is durable as far as they are concerned, so they must not hold back log GC.
        `schema`: (schema, version) to persist instead of the current ones (alter_schema
        persists the new schema before it switches to it).
        """
        comps = self._components
        last = self.log.last_index
        if comps.mrs.empty() and not comps.frozen:
            self._mrs_flushed_index = max(self._mrs_flushed_index, last)
        for d in comps.drss:
            d.advance_flushed_index_if_clean(last)
        schema, version = schema or (self.schema, self.schema_version)
        # state kept beside the data as of the new flushed index (a replica's result
        # tracker) is made durable first: the metadata below makes the log before the
        # anchor unneeded
        self.log.before_anchor(self.anchor_index())
        TabletMetadata(schema, version, self._next_rowset_id, self._next_mrs_id,
                       max(self.mvcc.last_committed(), self._last_ts),
                       self._mrs_flushed_index, tuple(d.metadata() for d in comps.drss)
                       ).write(self.path, self.config.fsync)
        self.log.gc(self.anchor_index())

    # -- what the write pipeline and the maintenance ops use of the tablet ---------------
    @property
    def components(self) -> TabletComponents:
        """The tablet's current components (an immutable record: which MemRowSets and
        DiskRowSets exist, and their schema). A reader captures it once; a maintenance op
        builds the next one and swaps it in (`swap_components`)."""
        return self._components

    def swap_components(self, components: TabletComponents) -> None:
        """Make `components` the tablet's (the caller holds the write lock: a flush or a
        compaction swapping rowsets; readers keep the record they captured)."""
        self._components = components

    @property
    def last_timestamp(self) -> int:
        """The timestamp of the last op started (the write lock's holder sees every op up
        to it in the stores; a flush waits for it to be safe, then reads at it)."""
        return self._last_ts

    @property
    def mrs_flushed_index(self) -> int:
        """Every op with a log index <= this has its MemRowSet inserts in DiskRowSets
        (replay skips them)."""
        return self._mrs_flushed_index

    def mark_mrs_flushed(self, index: int) -> None:
        """A flush put the inserts of every op up to `index` in DiskRowSets (the caller
        holds the write lock and persists the metadata next)."""
        self._mrs_flushed_index = max(self._mrs_flushed_index, index)

    def allocate_rowset_id(self) -> int:
        """The id of a new DiskRowSet (persisted with the next metadata write)."""
        self._next_rowset_id += 1
        return self._next_rowset_id

    # -- the op phases the write pipeline runs (tablet_write.py) --------------------------
    def start_op(self, timestamp: int | None, index: int | None, body: bytes | None
                 ) -> tuple[int, int]:
        """Start an op (the caller holds the write lock): its timestamp (the clock's when None, else
        the caller's, which must be after every timestamp applied so far), its MVCC
        start, and its WAL entry (appended at the next index unless the op is already in
        the log at `index`, WAL replay). Returns (timestamp, log index). The caller
        applies the op to the stores next, and aborts it in MVCC if that raises."""
        if timestamp is None:
            ts = self.mvcc.start_op_now(self.clock)   # see MvccManager.fence
        else:
            ts = timestamp
            if index is None and ts <= self._last_ts:  # a caller-chosen timestamp
                raise errors.InvalidArgument(
                    f"tablet {self.path}: op timestamp {ts} is not after the last applied "
                    f"timestamp {self._last_ts}")
            self.mvcc.start_op(ts)
        if index is None:
            index = self.log.next_index()
            try:
                self.log.append_write(index, ts, body)
            except BaseException:
                # not in the log, so never applied: an op left in flight would hold back
                # safe time (and a flush waiting for every op in flight) for good
                self.mvcc.abort_op(ts)
                raise
        self._last_ts = max(self._last_ts, ts)
        return ts, index

    def finish_op(self, ts: int, index: int, durable: bool,
                  result: WriteResult | Callable[[], WriteResult]
                  ) -> Callable[[], WriteResult]:
        """The deferred end of an op started by `start_op` and applied to the stores
        (`apply_deferred`'s returned call): wait until its
        WAL entry is durable (`durable`: it was appended here, not replayed), commit it
        in MVCC whatever happens, then return its result (`result`, or what the call
        `result` builds).
        The call names the WAL position it waits for, `finish.durable_at = (log,
        index)`, when it waits at all: a caller may make that position durable elsewhere
        first (`log.wait_durable(i)` for any i >= index: the wire's WAL sync thread does it
        once for a batch of writes, wire/server.py `WalSync`), after which the call does
        not wait for the disk - it commits and returns the result (or raises the log's
        failure at once, if the fsync failed)."""
        def finish() -> WriteResult:
            try:
                if durable:
                    self.log.wait_durable(index)
            finally:
                self.mvcc.commit_op(ts)
            return result if type(result) is WriteResult else result()
        if durable:
            finish.durable_at = (self.log, index)
        return finish

    # -- memory back-pressure (the write pipeline admits every write here first) ---------
    def memory_bytes(self) -> int:
        """Bytes held by in-memory stores: MemRowSets (active and flushing) and DMSs."""
        comps = self._components
        n = comps.mrs.nbytes
        for f in comps.frozen:       # plain loops: every write asks (admission)
            n += f.nbytes
        for d in comps.drss:
            n += d.dms_memory_bytes()
        return n

    def admission_would_wait(self) -> bool:
        """Whether `admit_write` would slow a write now (in-memory stores past the soft
        limit)."""
        return self.memory_bytes() >= (self.config.memory_limit_bytes
                                       * self.config.memory_soft_fraction)

    def admit_write(self) -> None:
        """Apply back-pressure before a write when in-memory stores are too large.

        Above the soft limit the writer sleeps a little (longer the closer to the limit)
        while the maintenance manager flushes; at the limit it waits for flushes, and if
        memory does not come down it is refused with ServiceUnavailable (SQLSTATE 53200)
        rather than risking the process being killed for running out of memory.
        """
        limit = self.config.memory_limit_bytes
        soft = limit * self.config.memory_soft_fraction
        mem = self.memory_bytes()
        if mem < soft:
            return
        self.write_stalls += 1
        mm = self.maintenance
        if mem < limit:
            if mm is not None:
                mm.wake()
            time.sleep(0.05 * (mem - soft) / max(limit - soft, 1))
            return
        if mm is None:  # nobody else will flush: do it inline
            self.flush_mrs()
            self.flush_dms()
        else:
            deadline = time.monotonic() + 10.0
            while self.memory_bytes() >= limit and time.monotonic() < deadline:
                mm.wake()
                time.sleep(0.01)
        if self.memory_bytes() >= limit:
            raise errors.ServiceUnavailable(
                f"tablet {self.path}: in-memory stores hold {self.memory_bytes()} bytes, at "
                f"the memory limit of {limit}; the write was refused, retry after flushes")

    # -- writes: the write pipeline's (tablet_write.py `TabletWriter`) -----------------
    def insert(self, rows) -> WriteResult:
        return self.writer.insert(rows)

    def upsert(self, rows) -> WriteResult:
        return self.writer.upsert(rows)

    def update(self, rows) -> WriteResult:
        return self.writer.update(rows)

    def delete(self, rows) -> WriteResult:
        return self.writer.delete(rows)

    def write(self, ops, rows) -> WriteResult:
        """One op of `rows` (`ops`: one OpType for all, or one per row)."""
        return self.writer.write(ops, rows)

    def write_deferred(self, ops, rows) -> Callable[[], WriteResult]:
        """`write` up to its wait for durability (`TabletWriter.write_deferred`)."""
        return self.writer.write_deferred(ops, rows)

    def write_small(self, ops: Sequence[int], columns: Sequence[str],
                    rows: Sequence[Sequence]) -> WriteResult:
        """A few rows of Python values (`TabletWriter.write_small`)."""
        return self.writer.write_small(ops, columns, rows)

    def prepare_small(self, ops: Sequence[int], columns: Sequence[str],
                      rows: Sequence[Sequence], keys: Sequence[bytes] | None = None):
        """The small-write op checked and converted, no lock (`TabletWriter.prepare_small`)."""
        return self.writer.prepare_small(ops, columns, rows, keys)

    def apply_small_deferred(self, prepared, never_block: bool = False
                             ) -> Callable[[], WriteResult] | None:
        """A prepared small write applied (`TabletWriter.apply_small_deferred`)."""
        return self.writer.apply_small_deferred(prepared, never_block)

    def first_failure(self, op: WriteOp, converted: list | None = None
                      ) -> tuple[int, str, str] | None:
        """The first row `apply` would reject now (`TabletWriter.first_failure`)."""
        return self.writer.first_failure(op, converted)

    def apply(self, op: WriteOp, timestamp: int | None = None, *,
              index: int | None = None) -> WriteResult:
        """Apply one write op: the single path of every write (`TabletWriter.apply`)."""
        return self.writer.apply(op, timestamp, index=index)

    def apply_deferred(self, op: WriteOp, timestamp: int | None = None, *,
                       index: int | None = None, converted: tuple | None = None
                       ) -> Callable[[], WriteResult]:
        """`apply` up to its wait for durability (`TabletWriter.apply_deferred`)."""
        return self.writer.apply_deferred(op, timestamp, index=index, converted=converted)

    @property
    def small_writes(self) -> int:
        """Ops that took the small-write path."""
        return self.writer.small_writes

    # -- maintenance: one op of tablet_mm_ops.py each ------------------------------------
    def maintenance_ops(self) -> list:
        """Candidate maintenance ops with scores (tablet_mm_ops.py `maintenance_ops`)."""
        return maintenance_ops(self)

    def pick_compaction(self) -> tuple[list[int], float] | None:
        """Rowsets the budgeted knapsack policy would merge, with its score."""
        return pick_compaction(self)

    def flush_mrs(self) -> int:
        """Flush the MemRowSet to DiskRowSets (`FlushMRSOp`); returns rows flushed."""
        return FlushMRSOp(self).perform()

    def flush_dms(self) -> int:
        """Flush every DeltaMemStore to a REDO DeltaFile (`FlushDeltaMemStoresOp`);
        returns records flushed."""
        return FlushDeltaMemStoresOp(self).perform()

    def minor_delta_compact(self, drs: DiskRowSet) -> int:
        """`MinorDeltaCompactionOp` of one of this tablet's rowsets."""
        return MinorDeltaCompactionOp(self, drs).perform()

    def major_delta_compact(self, drs: DiskRowSet) -> int:
        """`MajorDeltaCompactionOp` of one of this tablet's rowsets."""
        return MajorDeltaCompactionOp(self, drs).perform()

    def gc_undo_deltas(self) -> int:
        """UndoDeltaBlockGC over every rowset (`UndoDeltaBlockGCOp`); returns UNDO records
        dropped."""
        return UndoDeltaBlockGCOp(self).perform()

    def compact_rowsets(self, ids: Sequence[int]) -> int:
        """Merging compaction of the DiskRowSets with these ids (`CompactRowSetsOp`);
        returns the number of input rows."""
        return CompactRowSetsOp(self, ids).perform()

    def compact_deltas(self) -> int:
        """Major-compact every rowset with REDO files (tests and benchmarks)."""
        return sum(self.major_delta_compact(d) for d in self._components.drss)

    def history_gc_mark(self) -> int:
        """History at or before this may be dropped by compactions and UNDO GC.

        The ancient history mark, but never past the oldest op the WAL may still replay:
        replay decides what each op saw from the rowsets' history (see `RowOps.locate`), so
        that history must outlive the log entries that need it.
        """
        anchor_ts = self.log.ts_at_or_before(self.anchor_index())
        ahm = self.ancient_history_mark()
        return ahm if anchor_ts is None else min(ahm, anchor_ts - 1)

    # -- introspection -------------------------------------------------------------------
    def num_rowsets(self) -> int:
        return len(self._components.drss)

    def mrs_bytes(self) -> int:
        return self._components.mrs.nbytes

    def mrs_rows(self) -> int:
        return len(self._components.mrs)

    def dms_bytes(self) -> int:
        return sum(d.dms.nbytes for d in self._components.drss)

    def current_timestamp(self) -> int:
        return self.mvcc.last_committed()

    def rowsets_info(self) -> list[dict]:
        out = []
        for d in self._components.drss:
            info = {"id": d.id, "rows": d.num_rows, "base_bytes": d.base_bytes,
                    "min_key": d.min_key, "max_key": d.max_key}
            info.update(d.delta_stats())
            out.append(info)
        return out

    # -- reads -------------------------------------------------------------------------
    def ancient_history_mark(self) -> int:
        """The ancient history mark: reads at timestamps below it are refused, and history
        at or before it may be collected (a read exactly at the mark needs none of it)."""
        age = self.config.history_max_age_s
        if self.clock.is_hybrid:
            now = physical_micros(self.clock.now())
            return max(0, from_micros(max(0, now - int(age * 1_000_000))))
        return max(0, self.mvcc.last_committed() - int(age))

    def _snapshot(self, snapshot: int | MvccSnapshot | None) -> MvccSnapshot:
        if snapshot is None:
            return self.mvcc.take_snapshot()
        if isinstance(snapshot, MvccSnapshot):
            return snapshot
        ts = int(snapshot)
        ahm = self.ancient_history_mark()
        if ts < ahm:
            raise errors.SnapshotTooOld(
                f"snapshot timestamp {ts} is before the ancient history mark {ahm}: history "
                f"older than history_max_age_s={self.config.history_max_age_s} has been or "
                f"may be garbage collected")
        self.wait_safe(ts)
        return MvccSnapshot.at(ts)

    def wait_safe(self, ts: int) -> None:
        """Make a read at `ts` repeatable: no later op may take a timestamp <= ts, and every
        op that already holds one must finish first (Kudu waits for "safe time"). The
        clock moves under the MVCC lock (`MvccManager.fence`), so this holds for a `ts`
        past every op started here too (a fresh timestamp, another tablet's latest).
        On a tablet server the replica's barrier comes first (TabletReplica.wait_safe):
        there the leader stamps ops before they reach this tablet."""
        self.mvcc.fence(ts, self.clock)
        self.mvcc.wait_for_safe(ts)

    def _read_view(self, snapshot, prepare):
        """(MVCC snapshot, components, prepare(schema)) for a read.

        The snapshot is taken before the components are captured (the order flushes rely
        on); `prepare` checks the request against the schema the components carry (bad
        column names raise here) and returns what the read needs. If an alter_schema
        swapped the components in between, it is done again with the new schema, so a read
        uses exactly one schema: the one before the ALTER or the one after.
        """
        while True:
            schema = self._components.schema
            prepared = prepare(schema)
            snap = self._snapshot(snapshot)
            comps = self._components
            if comps.schema is schema:
                return snap, comps, prepared

    def _bounds(self, schema: Schema, predicates: Sequence[ColumnPredicate], lower_key,
                upper_key) -> tuple[bytes | None, bytes | None]:
        lo, hi = key_bounds(schema, predicates)
        if lower_key is not None:
            k = encode_key_prefix(tuple(lower_key), self._key_cols)
            lo = k if lo is None else max(lo, k)
        if upper_key is not None:
            k = encode_key_prefix(tuple(upper_key), self._key_cols) if len(
                tuple(upper_key)) == len(self._key_cols) else None
            if k is None:  # a prefix as exclusive upper bound: every key below the prefix
                k = encode_key_prefix(tuple(upper_key), self._key_cols)
            hi = k if hi is None else min(hi, k)
        return lo, hi

    def scan(self, columns: Sequence[str] | None = None,
             predicates: Sequence[ColumnPredicate] = (), snapshot=None,
             lower_key=None, upper_key=None, lazy: bool = True,
             stats: ScanStats | None = None) -> Iterator[pa.RecordBatch]:
        """Open a scan now (snapshot taken, rowsets captured, bad input raised here) and
        return an iterator of RecordBatches; see docs/engine-api.md."""
        return self.open_scan(columns, predicates, snapshot, lower_key, upper_key, lazy,
                              stats)[1]

    def open_scan(self, columns: Sequence[str] | None = None,
                  predicates: Sequence[ColumnPredicate] = (), snapshot=None,
                  lower_key=None, upper_key=None, lazy: bool = True,
                  stats: ScanStats | None = None,
                  order_mode: OrderMode = OrderMode.UNORDERED,
                  resume_after: bytes | None = None,
                  batch_rows: int | None = None) -> tuple[pa.Schema, Iterator]:
        """(Arrow schema of the projection, iterator), the scan opened now (snapshot taken,
        rowsets captured, bad input raised here). Kudu's OrderMode:

        - UNORDERED (default): RecordBatches, the MemRowSets' rows in insert order, then
          each DiskRowSet's;
        - ORDERED: (RecordBatch, its last encoded key) pairs in primary-key order
          (engine/tablet/ordered_scan.py), at most `batch_rows` rows each, starting
          strictly after the encoded key `resume_after` - what a fault-tolerant scan needs
          to resume on another replica at the same snapshot.
        """
        ordered = order_mode is OrderMode.ORDERED
        if not ordered and (resume_after is not None or batch_rows is not None):
            raise errors.InvalidArgument("resume_after and batch_rows need an ORDERED scan")

        def prepare(schema: Schema):
            names = list(columns) if columns is not None else schema.names
            cols = [schema.column(n) for n in names]
            # an ordered scan reads the key columns too (for the order), then drops them
            scan_cols = cols + [k for k in schema.key_columns if k.name not in names] \
                if ordered else cols
            bound = [BoundPredicate(p, schema.column(p.column)) for p in predicates]
            return (cols, scan_cols, schema.key_columns, bound, schema.arrow_schema(names),
                    schema.arrow_schema([c.name for c in scan_cols]),
                    self._bounds(schema, predicates, lower_key, upper_key))

        snap, comps, (cols, scan_cols, key_cols, bound, out_schema, scan_schema,
                      (lower, upper)) = self._read_view(snapshot, prepare)
        stats = stats if stats is not None else ScanStats()
        if resume_after is not None:
            resume_after = bytes(resume_after)
            lower = resume_after if lower is None else max(lower, resume_after)
        if any(p.always_false for p in bound) or (
                lower is not None and upper is not None and lower >= upper):
            return out_schema, iter(())
        mrs_caps = [(m, m.capture()) for m in (comps.mrs, *comps.frozen)]
        drss = comps.tree.overlapping(lower, upper)
        stats.rowsets_pruned += len(comps.drss) - len(drss)
        drs_caps = [(d, d.capture()) for d in drss]
        if ordered:
            return out_schema, ordered_batches(
                mrs_caps, drs_caps, snap, len(cols), scan_cols, key_cols, bound, out_schema,
                scan_schema, lower, upper, lazy, resume_after, stats, batch_rows,
                self._to_batch)

        def batches() -> Iterator[pa.RecordBatch]:
            for m, cap in mrs_caps:
                for block in m.scan(cols, bound, snap, lower, upper, stats, cap):
                    yield self._to_batch(block, cols, out_schema)
            for d, cap in drs_caps:
                for block in d.scan(cols, bound, snap, lower, upper, stats, lazy, cap):
                    yield self._to_batch(block, cols, out_schema)
        return out_schema, batches()

    def _to_batch(self, block: dict, cols: Sequence[ColumnSchema], schema: pa.Schema
                  ) -> pa.RecordBatch:
        if not cols:  # count-only scan: a batch with rows but no columns
            return pa.record_batch({"_": pa.nulls(block["__count__"])}).select([])
        arrays = [to_logical(block[c.id], c.type, c.precision, c.scale) for c in cols]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def scan_table(self, columns: Sequence[str] | None = None,
                   predicates: Sequence[ColumnPredicate] = (), snapshot=None,
                   lower_key=None, upper_key=None, lazy: bool = True,
                   stats: ScanStats | None = None) -> pa.Table:
        """`scan` collected into one table (an empty projection gives a count-only table)."""
        schema, it = self.open_scan(columns, predicates, snapshot, lower_key, upper_key,
                                    lazy, stats)
        batches = list(it)
        if not schema.names:
            n = sum(b.num_rows for b in batches)
            return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])
        return pa.Table.from_batches(batches, schema=schema)

    def count_rows(self, snapshot=None) -> int:
        return sum(b.num_rows for b in self.scan([], snapshot=snapshot))

    def lookup(self, key: Sequence[Any], columns: Sequence[str] | None = None,
               snapshot=None, encoded: bytes | None = None) -> dict | None:
        """One row by its full primary key, as {column: Python value}, or None.
        `encoded`: the key's encoding when the caller has it (routing computes it:
        `PartitionSchema.route_key`), else it is encoded here."""
        k = self._encode_key(key) if encoded is None else encoded
        names = None if columns is None else tuple(columns)
        # `_read_view` inlined (a point read's every frame counts): the snapshot taken
        # before the components are captured, done again if an ALTER swapped them
        while True:
            schema = self._components.schema
            cache = self._lookup_cols       # `_lookup_columns`, its hit inlined
            got = cache[1].get(names) if cache[0] is schema else None
            cols, out_plan = got if got is not None else \
                self._lookup_columns(schema, names)
            snap = self.mvcc.take_snapshot() if snapshot is None else \
                self._snapshot(snapshot)
            comps = self._components
            if comps.schema is schema:
                break
        row = None
        if not comps.mrs.empty() or comps.frozen:
            for mrs in (comps.mrs, *comps.frozen):
                rid = mrs.find_one(k)
                if rid >= 0:
                    row = mrs.lookup_row(rid, cols, snap)
                    if row is not None:
                        break
        if row is None:
            for drs in comps.tree.containing(k):
                rid = drs.find_key(k)
                if rid >= 0:
                    row = drs.lookup_row(rid, cols, snap)
                    if row is not None:
                        break
        if row is None:
            return None
        # physical -> Python values (`python_converter`): text decoded here, identity
        # skipped, the rest called (a loop per column of one row)
        out = {}
        for name, cid, conv in out_plan:
            v = row[cid]
            if conv is None or v is None:
                out[name] = v
            elif conv is _DECODE:
                out[name] = v.decode()
            else:
                out[name] = conv(v)
        return out

    def _lookup_columns(self, schema: Schema, names: tuple[str, ...] | None) -> tuple:
        """(the ColumnSchemas of a lookup's columns (all: None) under `schema`, the
        output plan: (name, column id, converter) per column, the converter None for an
        identity, `_DECODE` for text), cached per schema and names (a point-read workload
        asks for the same ones every time)."""
        cache = self._lookup_cols
        if cache[0] is not schema:
            cache = self._lookup_cols = (schema, {})
        got = cache[1].get(names)
        if got is None:
            cols = list(schema.columns) if names is None else [schema.column(n)
                                                               for n in names]
            plan = []
            for c in cols:
                conv = self._to_python[c.id]
                plan.append((c.name, c.id, None if conv is identity else
                             _DECODE if c.type in (DataType.STRING, DataType.VARCHAR)
                             else conv))
            got = (cols, plan)
            if len(cache[1]) < 64:
                cache[1][names] = got
        return got

    def diff_scan(self, start_ts: int, end_ts: int, columns: Sequence[str] | None = None
                  ) -> pa.Table:
        """Rows changed in (start_ts, end_ts] with an `is_deleted` column (see docs)."""
        return self._diff_scan(self._snapshot(start_ts), start_ts, end_ts, columns, False)

    def _diff_scan(self, s_snap: MvccSnapshot, start_ts: int, end_ts: int,
                   columns: Sequence[str] | None, deleted_at_start: bool) -> pa.Table:
        """diff_scan from a start snapshot already checked. `deleted_at_start`: a deleted
        row reports its values at start_ts, exactly its last values when (start, end]
        holds one commit (Tablet.changes); otherwise the end snapshot's materialization
        of the dead row gives its last values (a REINSERT of a ghost key in the MemRowSet
        can leave another version's there: changes() does not rely on it)."""
        def prepare(schema: Schema):
            names = list(columns) if columns is not None else schema.names
            names = [k.name for k in schema.key_columns if k.name not in names] + names
            return schema, names, [schema.column(n) for n in names]

        e_snap, comps, (schema, names, cols) = self._read_view(end_ts, prepare)
        key_cols = schema.key_columns
        pieces = []  # (keys, live_s, live_e, {cid: phys})

        def take_rows(rowids: np.ndarray, materialized, cols):
            """Select `rowids` out of block-wise materialized state at one snapshot."""
            lives, colparts = [], {c.id: [] for c in cols}
            keyparts = []
            for blk in materialized:
                first, live, vals = blk[0], blk[1], blk[2]
                m = len(live)
                a = np.searchsorted(rowids, first)
                b = np.searchsorted(rowids, first + m)
                if a == b:
                    continue
                local = rowids[a:b] - first
                lives.append(live[local])
                pl = pa.array(local)
                for c in cols:
                    colparts[c.id].append(vals[c.id].take(pl))
                if len(blk) > 3:
                    keyparts.append(blk[3][local])
            return lives, colparts, keyparts

        for rs in (comps.mrs, *comps.frozen, *comps.drss):
            changed = rs.changed_rowids(start_ts, end_ts)
            if not len(changed):
                continue
            cols_s = cols if deleted_at_start else []
            # only the blocks holding a changed row are materialized (the change feed
            # diff-scans once per commit: whole-rowset materializations made its cost
            # grow with the rowset's size, not with the commit's rows)
            live_s_parts, colparts_s, _ = take_rows(
                changed, rs.materialize(cols_s, s_snap, changed), cols_s)
            live_e_parts, colparts, keyparts = take_rows(
                changed, rs.materialize(cols, e_snap, changed), cols)
            live_s = np.concatenate(live_s_parts)
            live_e = np.concatenate(live_e_parts)
            vals = {c.id: pa.concat_arrays(colparts[c.id]) for c in cols}
            vals_s = {c.id: pa.concat_arrays(colparts_s[c.id]) for c in cols_s}
            if keyparts:
                keys = np.concatenate(keyparts)
            else:
                keys = encode_keys([vals[c.id] for c in key_cols], key_cols)
            pieces.append((keys, live_s, live_e, vals, vals_s))
        out_schema = schema.arrow_schema(names).append(pa.field("is_deleted", pa.bool_()))
        if not pieces:
            return out_schema.empty_table()
        keys = np.concatenate([p[0] for p in pieces])
        live_s = np.concatenate([p[1] for p in pieces])
        live_e = np.concatenate([p[2] for p in pieces])
        vals = {c.id: pa.concat_arrays([p[3][c.id] for p in pieces]) for c in cols}
        vals_s = {c.id: pa.concat_arrays([p[4][c.id] for p in pieces])
                  for c in cols} if deleted_at_start else {}
        cand = np.flatnonzero(live_s | live_e)
        # One output row per key: the version live at end_ts if any, else a deleted one.
        order = cand[np.lexsort((~live_e[cand], keys[cand]))]
        sk = keys[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = sk[1:] != sk[:-1]
        pick = pa.array(order[first])
        deleted = ~live_e[order[first]]
        mask = pa.array(deleted)
        arrays = [to_logical(pc.if_else(mask, vals_s[c.id].take(pick), vals[c.id].take(pick))
                             if deleted_at_start and deleted.any() else vals[c.id].take(pick),
                             c.type, c.precision, c.scale) for c in cols]
        arrays.append(pa.array(deleted))
        return pa.Table.from_arrays(arrays, schema=out_schema)

    def change_timestamps(self, start_ts: int, end_ts: int) -> np.ndarray:
        """Sorted distinct commit timestamps of the ops that changed a row of this tablet
        in (start_ts, end_ts]; start_ts must be at or after the ancient history mark (older
        history may be gone)."""
        self._snapshot(start_ts)               # refuses a start below the ancient history mark
        self._snapshot(end_ts)                 # waits until end_ts is safe
        return self._change_timestamps(start_ts, end_ts)

    def change_counts(self, start_ts: int, end_ts: int, retained: bool = False
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(sorted distinct commit timestamps in (start_ts, end_ts], the UNDO / REDO /
        insert records each holds): a bound on the rows `changes` gives for that commit (a
        record per changed row; an op that inserts and deletes a key at one timestamp has
        records and no row), for a change stream's rate limit (wire.flight.changes_plan
        "limit_rows"). start_ts as in `changes` (`retained`: from the mark)."""
        if retained:
            start_ts = max(int(start_ts), self.ancient_history_mark())
        else:
            self._snapshot(start_ts)
        self._snapshot(end_ts)
        comps = self._components
        parts = [rs.change_timestamps(start_ts, end_ts, distinct=False)
                 for rs in (comps.mrs, *comps.frozen, *comps.drss)]
        parts = [p for p in parts if len(p)]
        if not parts:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        return np.unique(np.concatenate(parts), return_counts=True)

    def _change_timestamps(self, start_ts: int, end_ts: int) -> np.ndarray:
        comps = self._components
        parts = [rs.change_timestamps(start_ts, end_ts)
                 for rs in (comps.mrs, *comps.frozen, *comps.drss)]
        parts = [p for p in parts if len(p)]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    def changes(self, start_ts: int, end_ts: int, columns: Sequence[str] | None = None,
                retained: bool = False) -> pa.Table:
        """Every committed change in (start_ts, end_ts]: one row per (key, commit) with the
        row as that commit left it, `is_deleted` and `commit_ts`, in commit order (then key
        order). A diff scan collapses a key's changes in its window into one; here the
        window is cut at every commit timestamp the rowsets hold (`change_timestamps`) and
        each piece is a diff scan, so a key inserted, updated and deleted in one window
        yields three rows. Cost: one diff scan per distinct commit in the window (a diff
        scan materializes the blocks of the rowsets that hold a changed row), so callers page
        through long windows (the Spark change source reads one micro-batch at a time).
        An op that inserts and deletes a key at one timestamp leaves no row (nothing was
        visible to any snapshot).

        start_ts below the ancient history mark raises SnapshotTooOld, unless `retained`
        (a change feed's "earliest"): then the window starts at the mark. The mark is
        checked once; the pieces read history from there on (as a long scan does)."""
        if retained:
            start_ts = max(int(start_ts), self.ancient_history_mark())
        else:
            self._snapshot(start_ts)
        self._snapshot(end_ts)
        stamps = self._change_timestamps(start_ts, end_ts)
        out, prev = [], int(start_ts)
        for ts in stamps.tolist():
            d = self._diff_scan(MvccSnapshot.at(prev), prev, ts, columns, True)
            prev = ts
            if d.num_rows:
                out.append(d.append_column("commit_ts", pa.array(
                    np.full(d.num_rows, ts, dtype=np.int64))))
        if out:
            return pa.concat_tables(out)
        empty = self._diff_scan(MvccSnapshot.at(end_ts), end_ts, end_ts, columns, False)
        return empty.append_column("commit_ts", pa.array([], pa.int64()))

    # -- schema changes ----------------------------------------------------------------
    def alter_schema(self, new_schema: Schema, version: int | None = None) -> int:
        """ALTER TABLE ADD / DROP COLUMN on this tablet (Kudu's AlterSchema); returns the
        tablet's schema version afterwards.

        `new_schema` is the whole new schema: the same key columns (same ids and types),
        the columns kept (same ids and definitions; only their names may differ, which is
        how a catalog RENAME COLUMN reaches the tablet), minus dropped ones, plus added
        ones with ids never used before (>= the current `next_column_id`), each nullable or
        with a DEFAULT. `version`: the schema version this makes (default: current + 1); a
        tablet already at or past it does nothing, so the catalog can re-send an alter
        after a crash (Kudu: "if the current version >= new version, there is nothing to
        do").

        Design: flush, then swap the schema atomically in the tablet metadata. Kudu logs
        the alter as its own WAL entry and replays writes before it with the old schema.
        Here WAL entries carry rows by column *name* and replay converts them with the
        tablet's schema, so instead no entry older than the alter may ever be replayed:
          1. flush the MemRowSet and every DeltaMemStore, writers still running;
          2. block writers (write lock) and flush what arrived meanwhile: now every op
             logged so far is in flushed files, so the log anchor is past all of them;
          3. persist the new schema and version atomically (tablet-meta.json), then switch
             to them with a new, empty MemRowSet that has the new schema; unblock.
        A crash before step 3's metadata swap reopens with the old schema and (only)
        the flushes; a crash after it reopens with the new schema; either way WAL replay
        starts after the alter's point, and only ops logged after it, all written under
        the new schema, are replayed. No data is lost, nothing is rewritten: a rowset
        written before the alter reads an added column as its DEFAULT and ignores a
        dropped column's data and deltas (see diskrowset.py), and compactions write the
        new schema's columns only. Writers wait for step 2's (small) flush only.

        Reads use one schema each: a scan, lookup or diff scan takes the schema from the
        components it captures (`_read_view`), so one opened before the alter finishes
        with the old columns, reading the old stores. The alter has no MVCC timestamp:
        time travel reads the *current* schema at every snapshot (PostgreSQL semantics:
        an added column reads as its DEFAULT, or NULL, in snapshots before the ALTER too;
        a dropped column is gone from every snapshot; a re-added name is a new column
        that never sees the old one's data). A write that names a dropped column fails
        with ColumnNotFound, also when it raced with the alter (`apply`).
        """
        with self._flush_lock:  # no flush or merging compaction runs meanwhile
            if version is None:
                version = self.schema_version + 1
            elif version <= self.schema_version:
                return self.schema_version  # already applied
            _check_alter(self.schema, new_schema)
            self.flush_mrs()
            self.flush_dms()
            with self._write_lock:
                self.flush_mrs()
                self.flush_dms()
                comps = self._components
                last = self.log.last_index
                unflushed = (not comps.mrs.empty() or comps.frozen or any(
                    not d.advance_flushed_index_if_clean(last) for d in comps.drss))
                if unflushed:  # cannot happen: writers are blocked and the flushes are done
                    raise errors.EngineError(
                        f"tablet {self.path}: stores still hold unflushed data after the "
                        f"flushes of ALTER TABLE; the schema was not changed")
                self._next_mrs_id += 1
                mrs = MemRowSet(new_schema, self._next_mrs_id)
                # Persisted first: if this fails, the tablet keeps its old schema.
                self.persist_metadata((new_schema, version))
                self._set_schema(new_schema)
                self.schema_version = version
                for d in comps.drss:
                    d.set_schema(new_schema)
                self._components = TabletComponents(mrs, (), comps.tree, new_schema)
            return version

def _check_alter(old: Schema, new: Schema) -> None:
    """The rules of `Tablet.alter_schema`: raise InvalidArgument if `new` breaks one."""
    def same(a: ColumnSchema, b: ColumnSchema) -> bool:
        return dataclasses.replace(a, name="") == dataclasses.replace(b, name="")

    if new.num_key_columns != old.num_key_columns or not all(
            a.id == b.id and same(a, b) for a, b in zip(old.key_columns, new.key_columns)):
        raise errors.InvalidArgument(
            f"ALTER TABLE cannot change the primary key: {old!r} -> {new!r}")
    if new.next_column_id < old.next_column_id:
        raise errors.InvalidArgument(
            f"ALTER TABLE: next column id {new.next_column_id} < {old.next_column_id} "
            f"(column ids are never reused)")
    for c in new.columns:
        if old.has_column_id(c.id):
            prev = old.column_by_id(c.id)
            if not same(prev, c):
                raise errors.InvalidArgument(
                    f'ALTER TABLE cannot change the definition of column "{prev.name}" '
                    f"(only its name): {prev} -> {c}")
        elif c.id < old.next_column_id:
            raise errors.InvalidArgument(
                f'column "{c.name}": id {c.id} was used before (column ids are never '
                f"reused, so a dropped column's data cannot reappear)")
        elif not c.nullable and c.default is None:
            raise errors.InvalidArgument(
                f'A new non-null column must have a default value (column "{c.name}")')
