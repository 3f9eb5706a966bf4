"""Tablet: one horizontal partition of a table — a MemRowSet, DiskRowSets and MVCC.

    Tablet
     ├── MvccManager                       which op timestamps readers may see
     ├── MemRowSet (active)                receives every INSERT
     ├── MemRowSet (frozen, while flushing) still takes UPDATE/DELETE of its rows
     └── RowSetTree of DiskRowSets         each with UNDO files, REDO files, DeltaMemStore

Write path (`write`): one call is one op with one timestamp. Rows are applied on their own
(Kudu semantics), vectorised in rounds of distinct keys (row_ops.py). Writers are
serialised by `_write_lock` (Python gives no parallel speed-up here; it also makes "the
latest state" the write path consults well-defined). The op commits in MVCC before the lock
is released, so its effects appear to readers atomically.

Apply (`apply(op, timestamp=None, index=None)`): the one path every write takes. `write`
validates the rows and applies memory back-pressure, then calls `apply(WriteOp)`: the
tablet picks the timestamp (clock, under the write lock, so timestamp order is log order),
appends the op to the WAL, applies it, waits for durability and commits it in MVCC. WAL
replay calls `apply(op, ts, index=i)` with the logged timestamp and index: nothing is
logged again and rows already in flushed files are skipped (tablet_bootstrap.py). A
replicated tablet applies a committed Raft entry the same way, with its leader's
timestamp, so embedded and replicated tablets share one apply path.

Read path: a reader captures the component tuple (an immutable snapshot of which rowsets
exist) and an MVCC snapshot, then never locks. Flushes build new components off to the side
and swap the tuple.

Maintenance (flushes, compactions, history GC: tablet_mm_ops.py) builds new rowsets off
to the side, then swaps the components under the write lock.

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
import os
import threading
import time
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from engine import errors
from engine.cfile.block_cache import BlockCache
from engine.clock import Clock, HybridClock, from_micros, physical_micros
from engine.consensus.log import WRITE, Log, LogEntry
from engine.convert import cast_column, python_converter, table_from_pydict
from engine.config import TabletConfig
from engine.key_encoding import (
    compile_key_encoder,
    encode_key_prefix,
    encode_keys,
)
from engine.schema import ColumnSchema, Schema
from engine.tablet.diskrowset import DiskRowSet, ScanStats
from engine.tablet.memrowset import MemRowSet
from engine.tablet.mvcc import MvccManager, MvccSnapshot
from engine.tablet.scan_spec import BoundPredicate, ColumnPredicate, key_bounds
from engine.tablet.row_ops import RowOps
from engine.tablet.tablet_bootstrap import replay
from engine.tablet.tablet_metadata import (
    META_FILE,
    ROWSETS_DIR,
    TabletComponents,
    TabletMetadata,
    rowset_dir,
    rowset_tree,
)
from engine.tablet.tablet_mm_ops import TabletMaintenance
from engine.tablet.write_op import (
    OpType,
    RowError,
    RowErrorCode,
    WriteOp,
    WriteResult,
)
from engine.types import to_logical, to_physical

__all__ = ["META_FILE", "Tablet", "python_converter"]  # META_FILE: for tools reading a tablet



class Tablet(TabletMaintenance):
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
        self._components = TabletComponents(self._new_mrs(), (), rowset_tree(drss), schema)
        self.log = Log(os.path.join(path, "wal"), config.wal_sync, config.wal_segment_bytes)
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
        t._persist_metadata()
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
        start = self._anchor_index()
        result = replay(self.log, start, lambda op, ts, index: self.apply(op, ts, index=index))
        self.replayed_ops = result.ops_replayed
        self.log.open_for_append(max(result.last_index, self.log.last_index, start - 1) + 1)
        self.mvcc.adjust_for_replay(self._last_ts)
        with self._write_lock:
            self._persist_metadata()

    def _anchor_index(self) -> int:
        """The oldest op index whose effects may exist only in the WAL."""
        comps = self._components
        low = [self._mrs_flushed_index]
        low += [d.flushed_index for d in comps.drss]
        return min(low) + 1

    def close(self) -> None:
        with self._write_lock:
            self._persist_metadata()
        self.log.close()

    def _new_mrs(self) -> MemRowSet:
        self._next_mrs_id += 1
        return MemRowSet(self.schema, self._next_mrs_id)

    def _set_schema(self, schema: Schema) -> None:
        """The schema the write path, flushes and compactions use, and what derives from it
        (readers take theirs from the captured `TabletComponents`)."""
        self.schema = schema
        self._key_cols = schema.key_columns  # same ids and types in every schema; names
        # may change (a catalog RENAME COLUMN reaches the tablet with its next alter)
        self._key_ids = {c.id for c in schema.key_columns}
        self._non_key = [c for c in schema.columns if c.id not in self._key_ids]
        for c in schema.columns:
            if c.id not in self._to_python:
                self._to_python[c.id] = python_converter(c)

    def _persist_metadata(self, schema: tuple[Schema, int] | None = None) -> None:
        """Write tablet metadata atomically (caller holds the write lock), then GC the log.

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
        TabletMetadata(schema, version, self._next_rowset_id, self._next_mrs_id,
                       max(self.mvcc.last_committed(), self._last_ts),
                       self._mrs_flushed_index, tuple(d.metadata() for d in comps.drss)
                       ).write(self.path, self.config.fsync)
        self.log.gc(self._anchor_index())

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

    # -- writes ------------------------------------------------------------------------
    def insert(self, rows) -> WriteResult:
        return self.write(OpType.INSERT, rows)

    def upsert(self, rows) -> WriteResult:
        return self.write(OpType.UPSERT, rows)

    def update(self, rows) -> WriteResult:
        return self.write(OpType.UPDATE, rows)

    def delete(self, rows) -> WriteResult:
        return self.write(OpType.DELETE, rows)

    def write(self, ops, rows) -> WriteResult:
        return self.write_deferred(ops, rows)()

    def write_deferred(self, ops, rows) -> Callable[[], WriteResult]:
        """`write` whose wait for durability is left to the returned call (see
        `apply_deferred`)."""
        pre_bad: dict[int, tuple[str, str]] = {}
        raw_keys = None
        if isinstance(rows, dict):
            table, pre_bad, raw_keys = table_from_pydict(self.schema, rows)
        else:
            table = _as_table(rows)
        n = table.num_rows
        if np.isscalar(ops) or isinstance(ops, OpType):
            op_arr = np.full(n, int(ops), dtype=np.int8)
        else:
            op_arr = np.asarray([int(o) for o in ops] if not isinstance(ops, np.ndarray)
                                else ops, dtype=np.int8)
            if len(op_arr) != n:
                raise errors.InvalidArgument(f"{len(op_arr)} op types for {n} rows")
        for name in table.column_names:
            self.schema.index_of(name)  # raises ColumnNotFound
        for c in self._key_cols:
            if c.name not in table.column_names:
                raise errors.InvalidArgument(f"key column {c.name!r} missing from the rows")
        self._admit_write()
        if not pre_bad:
            return self.apply_deferred(WriteOp(op_arr, table))
        # Rows whose values could not even form an Arrow column are reported, and the rest
        # are written (and logged) without them, so WAL replay sees exactly what applied.
        keep = np.array([i for i in range(n) if i not in pre_bad], dtype=np.int64)
        finish = self.apply_deferred(WriteOp(op_arr[keep], table.take(pa.array(keep))))

        def finish_all() -> WriteResult:
            r = finish()
            errs = [dataclasses.replace(e, index=int(keep[e.index])) for e in r.row_errors]
            for i, (code, msg) in pre_bad.items():
                errs.append(RowError(i, code, msg, tuple(raw_keys[i])))
            return WriteResult(r.timestamp, r.num_applied, sorted(errs, key=lambda e: e.index))
        return finish_all

    def first_failure(self, op: WriteOp) -> tuple[int, str, str] | None:
        """(row, code, message) of the first row of `op` that `apply` would reject now, or
        None when every row would apply; changes nothing. INSERT / UPSERT ops only (the
        in-order writes of `Table.write(..., in_order=True)`); the caller holds the write
        lock, so the answer stays true until it applies the op.

        A row is rejected for a value that does not convert (NOT_NULL / INVALID, as
        `apply` reports it) or, for an INSERT, a key that is live now or written by an
        earlier row of the op: every earlier row is an INSERT or UPSERT that applies (the
        first rejected row is what is being looked for), so it makes its key live."""
        ops, table = op.ops, op.rows
        if len(ops) == 0:
            return None
        if not np.isin(ops, (OpType.INSERT, OpType.UPSERT)).all():
            raise errors.InvalidArgument("an in-order write holds INSERT and UPSERT rows only")
        bad: dict[int, tuple[str, str]] = {}
        phys = self._convert(table, ops, bad)
        first = min(bad) if bad else len(ops)
        ins = np.flatnonzero(ops[:first] == OpType.INSERT)
        if len(ins):
            key_phys = [phys[c.id].slice(0, first) for c in self._key_cols]
            keys = encode_keys(key_phys, self._key_cols)
            _, first_seen = np.unique(keys, return_index=True)
            repeat = np.ones(first, dtype=bool)
            repeat[first_seen] = False
            comps = self._components
            kind = RowOps(comps, self.schema, self._key_cols, self._non_key,
                          self._mrs_flushed_index)._locate(keys[ins], comps)[0]
            fails = ins[(kind > 0) | repeat[ins]]
            if len(fails):
                return int(fails[0]), RowErrorCode.ALREADY_PRESENT.value, "key already present"
        if first < len(ops):
            return first, *bad[first]
        return None

    def memory_bytes(self) -> int:
        """Bytes held by in-memory stores: MemRowSets (active and flushing) and DMSs."""
        comps = self._components
        return (comps.mrs.nbytes + sum(f.nbytes for f in comps.frozen)
                + sum(d.dms_memory_bytes() for d in comps.drss))

    def _admit_write(self) -> None:
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

    def apply(self, op: WriteOp, timestamp: int | None = None, *,
              index: int | None = None) -> WriteResult:
        """Apply one write op: the single path of every write (see "Apply" in the module
        docstring). Returns once the op is committed in MVCC (visible to new readers).
        It is `apply_deferred(...)()`; see there for the arguments."""
        return self.apply_deferred(op, timestamp, index=index)()

    def apply_deferred(self, op: WriteOp, timestamp: int | None = None, *,
                       index: int | None = None) -> Callable[[], WriteResult]:
        """`apply` up to its wait for durability: when this returns, the op is in the WAL
        (not yet fsynced) and applied to the stores under its timestamp, not yet visible;
        the returned call waits until the WAL entry is durable, commits the op in MVCC
        and returns its result. It must be called exactly once, soon (readers wanting a
        timestamp at or after the op's wait for it). A write over several tablets applies
        each one's share this way and then waits for their fsyncs together, in parallel
        (`Table`), instead of one fsync after the other.

        `timestamp`: None: the tablet takes one from its clock under the write lock, so
        timestamps increase with log order (the local write path). Given: the op's order
        was decided elsewhere (WAL replay; a Raft follower applying its leader's op): the
        clock is moved past it, and it must be above every timestamp applied so far.
        `index`: None: the op is appended to the tablet's WAL and the call waits until it
        is durable. Given: the op is already in the log at that index, so it is not logged
        again, and rows whose effects flushed files already hold are skipped (replay).

        Values are converted before the lock is taken; if an ALTER TABLE switched the schema
        in between, the rows are checked and converted again under the lock, so an op is
        always logged and applied with the schema in force when it is (a write naming a
        column dropped meanwhile fails with ColumnNotFound and leaves no trace).
        """
        if index is not None and timestamp is None:
            raise errors.InvalidArgument("an op already in the log must come with its timestamp")
        op_arr, table = op.ops, op.rows
        if timestamp is not None:
            self.clock.update(timestamp)
        schema = self.schema
        bad: dict[int, tuple[str, str]] = {}
        phys = self._convert(table, op_arr, bad)
        body = op.encode() if index is None else None
        with self._write_lock:
            if self.schema is not schema:  # an alter_schema ran since the conversion
                for name in table.column_names:
                    self.schema.index_of(name)  # raises ColumnNotFound
                bad = {}
                phys = self._convert(table, op_arr, bad)
            ts = self.clock.now() if timestamp is None else timestamp
            if index is None and ts <= self._last_ts:  # a caller-chosen timestamp
                raise errors.InvalidArgument(
                    f"tablet {self.path}: op timestamp {ts} is not after the last applied "
                    f"timestamp {self._last_ts}")
            self.mvcc.start_op(ts)
            replay_index = index
            if index is None:
                index = self.log.next_index()
                self.log.append(LogEntry(0, index, ts, WRITE, body))
            self._last_ts = max(self._last_ts, ts)
            try:
                applied = RowOps(self._components, self.schema, self._key_cols,
                                 self._non_key, self._mrs_flushed_index).apply(
                    op_arr, phys, ts, bad, replay_index)
            except BaseException:
                self.mvcc.abort_op(ts)
                raise

        def finish() -> WriteResult:
            try:
                if replay_index is None:
                    self.log.wait_durable(index)
            finally:
                self.mvcc.commit_op(ts)
            errs = []
            if bad:
                key_cols = [table.column(c.name) for c in self._key_cols]
                for i in sorted(bad):
                    code, msg = bad[i]
                    key = tuple(col[i].as_py() for col in key_cols)
                    errs.append(RowError(i, code, msg, key))
            return WriteResult(ts, applied, errs)
        return finish

    def _convert(self, table: pa.Table, ops: np.ndarray, bad: dict) -> dict[int, pa.Array]:
        """Logical input columns -> physical arrays; bad rows recorded in `bad`.

        DELETE rows are identified by their key alone: their other columns are ignored,
        never validated.
        """
        out: dict[int, pa.Array] = {}
        needs_all = (ops == OpType.INSERT) | (ops == OpType.UPSERT)
        not_delete = ops != OpType.DELETE
        for col in self.schema.columns:
            is_key = col.id in self._key_ids
            if col.name not in table.column_names:
                if not col.nullable and col.default is None and not is_key:
                    for i in np.flatnonzero(needs_all):
                        bad.setdefault(int(i), (RowErrorCode.NOT_NULL.value,
                                                f'null value in column "{col.name}" violates'
                                                f' not-null constraint'))
                continue
            if not is_key and not not_delete.any():
                continue  # a pure DELETE batch needs only the key
            arr = table.column(col.name).combine_chunks()
            col_bad: dict[int, tuple[str, str]] = {}
            arr = cast_column(arr, col, col_bad)
            if arr.null_count and not col.nullable:
                nulls = np.asarray(arr.is_null())
                for i in np.flatnonzero(nulls):
                    col_bad.setdefault(int(i), (RowErrorCode.NOT_NULL.value,
                                                f'null value in column "{col.name}" violates '
                                                f'not-null constraint'))
            for i, err in col_bad.items():
                if is_key or not_delete[i]:
                    bad.setdefault(i, err)
            out[col.id] = to_physical(arr, col.type, col.precision)
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
        op that already holds one must finish first (Kudu waits for "safe time")."""
        self.clock.update(ts)
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
        return self._open_scan(columns, predicates, snapshot, lower_key, upper_key, lazy,
                               stats)[1]

    def _open_scan(self, columns, predicates, snapshot, lower_key, upper_key, lazy, stats
                   ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """`scan`, plus the Arrow schema of its batches."""
        def prepare(schema: Schema):
            names = list(columns) if columns is not None else schema.names
            cols = [schema.column(n) for n in names]
            bound = [BoundPredicate(p, schema.column(p.column)) for p in predicates]
            return cols, bound, schema.arrow_schema(names), self._bounds(
                schema, predicates, lower_key, upper_key)

        snap, comps, (cols, bound, out_schema, (lower, upper)) = self._read_view(
            snapshot, prepare)
        stats = stats if stats is not None else ScanStats()
        if any(p.always_false for p in bound) or (
                lower is not None and upper is not None and lower >= upper):
            return out_schema, iter(())
        mrs_caps = [(m, m.capture()) for m in (comps.mrs, *comps.frozen)]
        drss = comps.tree.overlapping(lower, upper)
        stats.rowsets_pruned += len(comps.drss) - len(drss)
        drs_caps = [(d, d.capture()) for d in drss]

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
        schema, it = self._open_scan(columns, predicates, snapshot, lower_key, upper_key,
                                     lazy, stats)
        batches = list(it)
        if not schema.names:
            n = sum(b.num_rows for b in batches)
            return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])
        return pa.Table.from_batches(batches, schema=schema)

    def count_rows(self, snapshot=None) -> int:
        return sum(b.num_rows for b in self.scan([], snapshot=snapshot))

    def lookup(self, key: Sequence[Any], columns: Sequence[str] | None = None,
               snapshot=None) -> dict | None:
        """One row by its full primary key, as {column: Python value}, or None."""
        k = self._encode_key(key)
        snap, comps, cols = self._read_view(snapshot, lambda schema: list(
            schema.columns) if columns is None else [schema.column(n) for n in columns])
        conv = self._to_python
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
        return {c.name: conv[c.id](row[c.id]) for c in cols}

    def diff_scan(self, start_ts: int, end_ts: int, columns: Sequence[str] | None = None
                  ) -> pa.Table:
        """Rows changed in (start_ts, end_ts] with an `is_deleted` column (see docs)."""
        def prepare(schema: Schema):
            names = list(columns) if columns is not None else schema.names
            names = [k.name for k in schema.key_columns if k.name not in names] + names
            return schema, names, [schema.column(n) for n in names]

        s_snap = self._snapshot(start_ts)
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
            live_s_parts, _, _ = take_rows(changed, rs.materialize([], s_snap), [])
            live_e_parts, colparts, keyparts = take_rows(changed, rs.materialize(cols, e_snap),
                                                         cols)
            live_s = np.concatenate(live_s_parts)
            live_e = np.concatenate(live_e_parts)
            vals = {c.id: pa.concat_arrays(colparts[c.id]) for c in cols}
            if keyparts:
                keys = np.concatenate(keyparts)
            else:
                keys = encode_keys([vals[c.id] for c in key_cols], key_cols)
            pieces.append((keys, live_s, live_e, vals))
        out_schema = schema.arrow_schema(names).append(pa.field("is_deleted", pa.bool_()))
        if not pieces:
            return out_schema.empty_table()
        keys = np.concatenate([p[0] for p in pieces])
        live_s = np.concatenate([p[1] for p in pieces])
        live_e = np.concatenate([p[2] for p in pieces])
        vals = {c.id: pa.concat_arrays([p[3][c.id] for p in pieces]) for c in cols}
        cand = np.flatnonzero(live_s | live_e)
        # One output row per key: the version live at end_ts if any, else a deleted one.
        order = cand[np.lexsort((~live_e[cand], keys[cand]))]
        sk = keys[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = sk[1:] != sk[:-1]
        pick = pa.array(order[first])
        arrays = [to_logical(vals[c.id].take(pick), c.type, c.precision, c.scale) for c in cols]
        arrays.append(pa.array(~live_e[order[first]]))
        return pa.Table.from_arrays(arrays, schema=out_schema)

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
                self._persist_metadata((new_schema, version))
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


def _as_table(rows) -> pa.Table:
    if isinstance(rows, pa.Table):
        return rows
    if isinstance(rows, pa.RecordBatch):
        return pa.Table.from_batches([rows])
    if isinstance(rows, dict):
        return pa.table(rows)
    if isinstance(rows, list):
        return pa.Table.from_pylist(rows)
    raise errors.InvalidArgument(f"cannot write rows of type {type(rows).__name__}")
