"""Tablet: one horizontal partition of a table — a MemRowSet, DiskRowSets and MVCC.

    Tablet
     ├── MvccManager                       which op timestamps readers may see
     ├── MemRowSet (active)                receives every INSERT
     ├── MemRowSet (frozen, while flushing) still takes UPDATE/DELETE of its rows
     └── RowSetTree of DiskRowSets         each with UNDO files, REDO files, DeltaMemStore

Write path (`write`): one call is one op with one timestamp. Rows are applied on their own
(Kudu semantics), in *rounds*: round r holds the r-th occurrence of each key in the batch,
so within a round keys are distinct and the round is processed with vectorised lookups —
the MRS key index, the rowset tree, bloom filters and key-index pages for all its rows at
once — while rows that touch the same key still apply in batch order. Writers are
serialised by `_write_lock` (Python gives no parallel speed-up here; it also makes "the
latest state" the write path consults well-defined). The op commits in MVCC before the lock
is released, so its effects appear to readers atomically.

Read path: a reader captures the component tuple (an immutable snapshot of which rowsets
exist) and an MVCC snapshot, then never locks. Flushes build new components off to the side
and swap the tuple.

Flush (`flush_mrs`), as in Kudu's flush with its "duplicating" phase made simple:
  1. under the write lock: freeze the MRS and swap in a new empty one; take the flush
     snapshot (every op so far has committed);
  2. without the lock: sort the frozen rows by key, fold histories into base + UNDO
     (`compaction.fold_history`), write DiskRowSets rolled at `drs_target_bytes`;
     meanwhile writers may still UPDATE/DELETE rows of the frozen MRS;
  3. under the write lock: re-apply the frozen MRS's mutations newer than the flush
     snapshot to the new DiskRowSets' DeltaMemStores (rowids translated), then swap the
     frozen MRS for the DiskRowSets and persist tablet metadata atomically.

Durability: every op is in the WAL before it is acknowledged; `Tablet.open` restores the
flushed state and replays the WAL from the log anchor (`_bootstrap`).

Schema changes (`alter_schema`: ALTER TABLE ADD / DROP COLUMN): the MemRowSet and every
DeltaMemStore are flushed, then the new schema and its version replace the old ones in the
tablet metadata atomically, so WAL replay never meets an op logged under another schema.
Rowsets are not rewritten; columns are matched by id everywhere. Readers take the schema
from the captured `_Components`, so each read sees the schema before or after, never a mix.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import json
import os
import shutil
import threading
import time
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from engine import errors
from engine.cfile.block_cache import BlockCache
from engine.cfile.bloom import hash_keys
from engine.fs import write_json_atomic
from engine.clock import Clock, HybridClock, from_micros, physical_micros
from engine.consensus.log import WRITE, Log, LogEntry
from engine.config import TabletConfig
from engine.key_encoding import (
    DECIMAL_CONTEXT,
    binary_to_fixed,
    compile_key_encoder,
    encode_key_prefix,
    encode_keys,
)
from engine.schema import ColumnSchema, Schema
from engine.tablet.compaction import fold_history, merge_histories, unfold_history
from engine.tablet.compaction_policy import (
    CompactionPolicyConfig,
    RowSetInfo,
    select_rowsets_to_compact,
)
from engine.tablet.delta import DeltaBatch, MutationKind
from engine.tablet.diskrowset import (
    KEY_COLUMN,
    DiskRowSet,
    ScanStats,
    delete_obsolete,
    write_diskrowset,
)
from engine.tablet.maintenance_manager import MaintenanceOp
from engine.tablet.memrowset import MemRowSet
from engine.tablet.mvcc import MvccManager, MvccSnapshot
from engine.tablet.rowset_tree import RowSetTree
from engine.tablet.scan_spec import BoundPredicate, ColumnPredicate, key_bounds
from engine.convert import cast_column, default_array
from engine.tablet.write_op import (
    OpType,
    RowError,
    RowErrorCode,
    WriteResult,
    decode_write,
    encode_write,
)
from engine.types import DataType, invalid_value_message, to_logical, to_physical

META_FILE = "tablet-meta.json"
_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_DT = _dt.datetime(1970, 1, 1)


class _Components:
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


def _identity(v: Any) -> Any:
    return v


def python_converter(col: ColumnSchema):
    """A function: physical scalar (int/bytes/None) -> Python value of the logical type."""
    match col.type:
        case DataType.DATE:
            return lambda v: None if v is None else _EPOCH_DATE + _dt.timedelta(days=v)
        case DataType.TIMESTAMP:
            return lambda v: None if v is None else _EPOCH_DT + _dt.timedelta(microseconds=v)
        case DataType.DECIMAL:
            scale = col.scale

            def dec(v):
                if v is None:
                    return None
                if isinstance(v, bytes):
                    v = int.from_bytes(v, "little", signed=True)
                return decimal.Decimal(v).scaleb(-scale, context=DECIMAL_CONTEXT)
            return dec
        case DataType.STRING | DataType.VARCHAR:
            return lambda v: None if v is None else v.decode()
    return _identity


class Tablet:
    def __init__(self, path: str, schema: Schema, config: TabletConfig, clock: Clock,
                 meta: dict | None = None):
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
        meta = meta or {}
        # Bumped by every alter_schema; persisted with the schema (see alter_schema).
        self.schema_version = meta.get("schema_version", 0)
        self._next_rowset_id = meta.get("next_rowset_id", 0)
        self._next_mrs_id = meta.get("next_mrs_id", 0)
        # Every op with index <= this has its MemRowSet inserts in DiskRowSets.
        self._mrs_flushed_index = meta.get("mrs_flushed_index", 0)
        drss = [DiskRowSet(os.path.join(path, "rowsets", f"{m['id']:08d}"), schema, m,
                           self.cache, config) for m in meta.get("rowsets", [])]
        last_ts = meta.get("last_timestamp", 0)
        if last_ts:
            self.clock.update(last_ts)  # MVCC catches up in _bootstrap, after replay
        self._last_ts = last_ts
        self._components = _Components(self._new_mrs(), (), self._tree(drss), schema)
        self.log = Log(os.path.join(path, "wal"), config.wal_sync, config.wal_segment_bytes)
        self.replayed_ops = 0
        self.maintenance = None  # set by MaintenanceManager.register
        self.write_stalls = 0

    # -- lifecycle ---------------------------------------------------------------------
    @classmethod
    def create(cls, path: str, schema: Schema, config: TabletConfig | None = None,
               clock: Clock | None = None, schema_version: int = 0) -> "Tablet":
        os.makedirs(os.path.join(path, "rowsets"), exist_ok=True)
        if os.path.exists(os.path.join(path, META_FILE)):
            raise errors.AlreadyPresent(f"a tablet already exists at {path}")
        t = cls(path, schema, config or TabletConfig(), clock or HybridClock(),
                {"schema_version": schema_version})
        t.log.open_for_append(1)
        t._persist_metadata()
        return t

    @classmethod
    def open(cls, path: str, config: TabletConfig | None = None,
             clock: Clock | None = None) -> "Tablet":
        try:
            with open(os.path.join(path, META_FILE)) as f:
                meta = json.load(f)
        except FileNotFoundError:
            raise errors.NotFound(f"no tablet at {path}") from None
        except ValueError as e:
            raise errors.Corruption(f"{path}/{META_FILE}: {e}") from e
        _remove_orphans(path, meta)
        t = cls(path, Schema.from_dict(meta["schema"]), config or TabletConfig(),
                clock or HybridClock(), meta)
        t._bootstrap()
        return t

    def _bootstrap(self) -> None:
        """Replay the WAL from the log anchor (Kudu's TabletBootstrap).

        Ops whose effects are already in flushed files are filtered row by row: an insert
        is skipped if its op index <= mrs_flushed_index; a mutation of a DiskRowSet row is
        skipped if its index <= that rowset's flushed_index. Everything else is applied
        again with its original timestamp, so time travel is unchanged by a restart.
        """
        start = self._anchor_index()
        last = 0
        for entry in self.log.read_from(start):
            last = entry.index
            if entry.type != WRITE:
                continue
            ops, rows = decode_write(entry.body)
            self.clock.update(entry.timestamp)
            self._write_at(ops, rows, entry.timestamp, replay_index=entry.index)
            self.replayed_ops += 1
        self.log.open_for_append(max(last, self.log.last_index, start - 1) + 1)
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
        (readers take theirs from the captured `_Components`)."""
        self.schema = schema
        self._key_cols = schema.key_columns  # same ids and types in every schema; names
        # may change (a catalog RENAME COLUMN reaches the tablet with its next alter)
        self._key_ids = {c.id for c in schema.key_columns}
        self._non_key = [c for c in schema.columns if c.id not in self._key_ids]
        for c in schema.columns:
            if c.id not in self._to_python:
                self._to_python[c.id] = python_converter(c)

    @staticmethod
    def _tree(drss: Sequence[DiskRowSet]) -> RowSetTree[DiskRowSet]:
        return RowSetTree(drss, [(d.min_key, d.max_key) for d in drss])

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
        meta = {"schema": schema.to_dict(), "schema_version": version,
                "next_rowset_id": self._next_rowset_id,
                "next_mrs_id": self._next_mrs_id,
                "last_timestamp": max(self.mvcc.last_committed(), self._last_ts),
                "mrs_flushed_index": self._mrs_flushed_index,
                "rowsets": [d.metadata() for d in comps.drss]}
        write_json_atomic(os.path.join(self.path, META_FILE), meta, self.config.fsync)
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
        pre_bad: dict[int, tuple[str, str]] = {}
        raw_keys = None
        if isinstance(rows, dict):
            table, pre_bad, raw_keys = self._table_from_pydict(rows)
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
            return self._write_at(op_arr, table, None)
        # Rows whose values could not even form an Arrow column are reported, and the rest
        # are written (and logged) without them, so WAL replay sees exactly what applied.
        keep = np.array([i for i in range(n) if i not in pre_bad], dtype=np.int64)
        r = self._write_at(op_arr[keep], table.take(pa.array(keep)), None)
        errs = [dataclasses.replace(e, index=int(keep[e.index])) for e in r.row_errors]
        for i, (code, msg) in pre_bad.items():
            errs.append(RowError(i, code, msg, tuple(raw_keys[i])))
        return WriteResult(r.timestamp, r.num_applied, sorted(errs, key=lambda e: e.index))

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

    def _table_from_pydict(self, rows: dict) -> tuple[pa.Table, dict, list]:
        """dict of Python lists -> Arrow table; values no Arrow column can hold become NULL
        and their rows are reported as INVALID (the error path converts value by value)."""
        n = len(next(iter(rows.values()))) if rows else 0
        cols, bad = {}, {}
        for name, values in rows.items():
            values = list(values)
            if len(values) != n:
                raise errors.InvalidArgument("columns of the rows have different lengths")
            target = self.schema.column(name).arrow_type if self.schema.has_column(name) \
                else None
            try:
                # Inferred first: pa.array(..., type=int64) would silently truncate 1.5.
                # The inferred column is then cast safely (and per row on failure) later.
                cols[name] = pa.array(values)
                continue
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
                pass
            good = []
            integral = target is not None and pa.types.is_integer(target)
            for i, v in enumerate(values):  # error path only
                try:
                    if integral and isinstance(v, float) and not v.is_integer():
                        raise ValueError("not an integer")
                    pa.array([v], type=target)
                    good.append(v)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError,
                        ValueError) as e:
                    col = self.schema.column(name) if self.schema.has_column(name) else None
                    bad.setdefault(i, (RowErrorCode.INVALID.value, invalid_value_message(
                        name, col.type_sql() if col is not None else None, v, e)))
                    good.append(None)
            cols[name] = pa.array(good, type=target)
        key_names = [c.name for c in self._key_cols]
        raw_keys = [tuple(rows[k][i] if k in rows else None for k in key_names)
                    for i in range(n)] if bad else []
        return pa.table(cols) if cols else pa.table({}), bad, raw_keys

    def _write_at(self, op_arr: np.ndarray, table: pa.Table, replay_ts: int | None,
                  replay_index: int | None = None) -> WriteResult:
        """Log (unless replaying), apply under the write lock, wait for durability, commit.

        Values are converted before the lock is taken; if an ALTER TABLE switched the schema
        in between, the rows are checked and converted again under the lock, so an op is
        always logged and applied with the schema in force when it is (a write naming a
        column dropped meanwhile fails with ColumnNotFound and leaves no trace).
        """
        schema = self.schema
        bad: dict[int, tuple[str, str]] = {}
        phys = self._convert(table, op_arr, bad)
        body = encode_write(op_arr, table) if replay_index is None else None
        with self._write_lock:
            if self.schema is not schema:  # an alter_schema ran since the conversion
                for name in table.column_names:
                    self.schema.index_of(name)  # raises ColumnNotFound
                bad = {}
                phys = self._convert(table, op_arr, bad)
            ts = self.clock.now() if replay_ts is None else replay_ts
            self.mvcc.start_op(ts)
            index = replay_index
            if index is None:
                index = self.log.next_index()
                self.log.append(LogEntry(0, index, ts, WRITE, body))
            self._last_ts = max(self._last_ts, ts)
            try:
                applied = self._apply(op_arr, phys, ts, bad, replay_index)
            except BaseException:
                self.mvcc.abort_op(ts)
                raise
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

    def _apply(self, ops: np.ndarray, phys: dict[int, pa.Array], ts: int, bad: dict,
               replay_index: int | None = None) -> int:
        n = len(ops)
        if n == 0:
            return 0
        key_phys = [phys[c.id] for c in self._key_cols]
        ok = np.ones(n, dtype=bool)
        if bad:
            ok[list(bad)] = False
            # keys of bad rows may be null; encode a harmless placeholder for them
            key_phys = [a.fill_null(pa.scalar(0 if not pa.types.is_binary(a.type) else b"",
                                              type=a.type)) if a.null_count else a
                        for a in key_phys]
        keys = encode_keys(key_phys, self._key_cols)
        rows = np.flatnonzero(ok)
        order = rows[np.argsort(keys[rows], kind="stable")]  # by key, then batch order
        sk = keys[order]
        same = sk[1:] == sk[:-1]
        # Consecutive UPDATEs of one key: only the last changes anything (they set the same
        # columns and an UPDATE never changes whether a row is live), so the others take
        # its outcome instead of costing a round each (a Zipf-skewed batch would need one
        # round per repeat of its hottest key). Same op, same timestamp: no reader can see
        # the intermediate values anyway.
        is_upd = ops[order] == OpType.UPDATE
        chain = same & is_upd[:-1] & is_upd[1:]
        superseded, follows = np.empty(0, np.int64), np.empty(0, np.int64)
        if chain.any():
            m = len(order)
            pos = np.arange(m)
            boundary = np.ones(m, dtype=bool)
            boundary[:-1] = ~chain
            last_pos = np.minimum.accumulate(np.where(boundary, pos, m)[::-1])[::-1]
            sup = np.flatnonzero(~boundary)
            superseded, follows = order[sup], order[last_pos[sup]]
            keep = boundary
            order, sk = order[keep], sk[keep]
            same = sk[1:] == sk[:-1]
        # Round r = the r-th occurrence of a key in this batch (stable sort keeps order).
        m = len(order)
        new_group = np.ones(m, dtype=bool)
        new_group[1:] = ~same
        group_start = np.maximum.accumulate(np.where(new_group, np.arange(m), 0))
        rank = np.arange(m) - group_start
        applied = 0
        for r in range(int(rank.max()) + 1 if m else 0):
            idx = np.sort(order[rank == r])
            if len(idx):
                applied += self._apply_round(idx, ops[idx], keys[idx], phys, ts, r, bad,
                                             replay_index)
        if not bad:
            return applied + len(superseded)
        for s_row, f_row in zip(superseded.tolist(), follows.tolist()):  # error path only:
            if f_row in bad:  # copying per-row outcomes, the data work was done above
                bad[s_row] = bad[f_row]
            else:
                applied += 1
        return applied

    def _locate(self, keys: np.ndarray, comps: _Components,
                replay: tuple[int, int, int] | None = None):
        """Where each key is live: (kind, which, rowid) + active-MRS rowid of dead keys.

        kind: 0 = not live anywhere, 1 = active MRS, 2 = a frozen MRS, 3 = a DiskRowSet.

        WAL replay of op (index i, timestamp t, round r) must see the state op i saw, but
        flushed rowsets may already hold the future (a later DELETE in a REDO file, a later
        re-insertion flushed into another rowset). So during replay a DiskRowSet row counts
        as live if its history says it was live just before round r of the op at t (every
        op before i has been replayed or is durable), and among several such candidates one
        whose
        flushed_index < i wins: that rowset still needs op i (a durable candidate means op i
        is already applied, and it is skipped whichever is chosen).
        """
        n = len(keys)
        kind = np.zeros(n, dtype=np.int8)
        which = np.full(n, -1, dtype=np.int64)
        rowid = np.full(n, -1, dtype=np.int64)
        mrs_rid = comps.mrs.find(keys)
        found = mrs_rid >= 0
        live = np.zeros(n, dtype=bool)
        live[found] = comps.mrs.latest_live(mrs_rid[found])
        kind[live] = 1
        rowid[live] = mrs_rid[live]
        for j, fz in enumerate(comps.frozen):
            rid = fz.find(keys)
            f = rid >= 0
            lv = np.zeros(n, dtype=bool)
            lv[f] = fz.latest_live(rid[f])
            lv &= kind == 0
            kind[lv] = 2
            which[lv] = j
            rowid[lv] = rid[lv]
        if not len(comps.drss):
            return kind, which, rowid, mrs_rid
        durable = np.zeros(n, dtype=bool)  # the chosen DRS already holds op i (replay)
        pending = np.flatnonzero(kind == 0)
        if not len(pending):
            return kind, which, rowid, mrs_rid
        pk = keys[pending]
        order = np.argsort(pk)
        spk = pk[order]
        hashes = None
        for drs, a, b in comps.tree.bulk_candidates(spk):
            sub = order[a:b]
            if hashes is None:
                hashes = hash_keys(pk)
            rid = drs.find_keys(pk[sub], hashes[sub])
            f = rid >= 0
            if not f.any():
                continue
            lv = np.zeros(len(sub), dtype=bool)
            if replay is None:
                lv[f] = ~drs.latest_dead()[rid[f]]
            else:
                lv[f] = drs.live_at(rid[f], replay[1], replay[2])
            tgt = pending[sub]
            if replay is None:
                lv &= kind[tgt] == 0
            else:
                this_durable = drs.flushed_index >= replay[0]
                lv &= (kind[tgt] == 0) | (durable[tgt] & (not this_durable))
            tgt = tgt[lv]
            kind[tgt] = 3
            which[tgt] = comps.drss.index(drs)
            rowid[tgt] = rid[lv]
            if replay is not None:
                durable[tgt] = drs.flushed_index >= replay[0]
        return kind, which, rowid, mrs_rid

    def _apply_round(self, idx: np.ndarray, ops: np.ndarray, keys: np.ndarray,
                     phys: dict[int, pa.Array], ts: int, seq: int, bad: dict,
                     replay_index: int | None = None) -> int:
        comps = self._components
        kind, which, rowid, mrs_rid = self._locate(
            keys, comps, None if replay_index is None else (replay_index, ts, seq))
        is_live = kind > 0
        ins = ops == OpType.INSERT
        ups = ops == OpType.UPSERT
        upd = ops == OpType.UPDATE
        dele = ops == OpType.DELETE
        for i in np.flatnonzero(ins & is_live):
            bad[int(idx[i])] = (RowErrorCode.ALREADY_PRESENT.value, "key already present")
        for i in np.flatnonzero((upd | dele) & ~is_live):
            bad[int(idx[i])] = (RowErrorCode.NOT_FOUND.value, "key not found")
        do_insert = (ins | ups) & ~is_live
        do_update = (upd | ups) & is_live
        do_delete = dele & is_live
        # Inserts: brand-new keys append MRS rows; keys dead in the active MRS are REINSERTs.
        reinsert = do_insert & (mrs_rid >= 0)
        new_rows = do_insert & (mrs_rid < 0)
        if replay_index is not None and replay_index <= self._mrs_flushed_index:
            reinsert[:] = False  # already in a DiskRowSet (see _bootstrap)
            new_rows[:] = False
        mrs = comps.mrs
        if new_rows.any():
            sel = idx[new_rows]
            batch = self._full_rows(sel, phys)
            mrs.insert(keys[new_rows], batch, ts, seq)
        if reinsert.any():
            sel = idx[reinsert]
            full = self._full_rows(sel, phys)
            values = {c.id: full.column(self.schema.index_of(c.name)) for c in self._non_key}
            rids = mrs_rid[reinsert]
            mrs.append_mutations(DeltaBatch.uniform(rids, ts, seq, MutationKind.REINSERT,
                                                    values), np.ones(len(rids), dtype=bool))
        present = [c for c in self._non_key if c.id in phys]
        for mask, mkind in ((do_update, MutationKind.UPDATE), (do_delete, MutationKind.DELETE)):
            if not mask.any():
                continue
            for k in (1, 2, 3):
                kmask = mask & (kind == k)
                if not kmask.any():
                    continue
                targets = [(None, kmask)] if k == 1 else [
                    (w, kmask & (which == w)) for w in np.unique(which[kmask])]
                for w, tmask in targets:
                    sel = idx[tmask]
                    values = None
                    if mkind is MutationKind.UPDATE:
                        if not present:
                            continue
                        psel = pa.array(sel)
                        values = {c.id: phys[c.id].take(psel) for c in present}
                    batch = DeltaBatch.uniform(rowid[tmask], ts, seq, mkind, values)
                    if k == 1:
                        mrs.append_mutations(batch, None if mkind is MutationKind.UPDATE
                                             else np.zeros(len(sel), dtype=bool))
                    elif k == 2:
                        comps.frozen[int(w)].append_mutations(
                            batch, None if mkind is MutationKind.UPDATE
                            else np.zeros(len(sel), dtype=bool))
                    else:
                        drs = comps.drss[int(w)]
                        if replay_index is not None and replay_index <= drs.flushed_index:
                            continue  # already in this rowset's files (see _bootstrap)
                        drs.mutate(batch)
        return int(new_rows.sum() + reinsert.sum() + do_update.sum() + do_delete.sum())

    def _full_rows(self, sel: np.ndarray, phys: dict[int, pa.Array]) -> pa.RecordBatch:
        """Physical rows for inserts: given columns, else each column's default (or NULL)."""
        psel = pa.array(sel)
        m = len(sel)
        arrays = []
        for col in self.schema.columns:
            if col.id in phys:
                arrays.append(phys[col.id].take(psel))
            else:
                arrays.append(default_array(col, m))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(
            [pa.field(c.name, c.physical_type) for c in self.schema.columns]))

    # -- reads -------------------------------------------------------------------------
    def ancient_history_mark(self) -> int:
        """The ancient history mark: reads at timestamps below it are refused, and history
        at or before it may be collected (a read exactly at the mark needs none of it)."""
        age = self.config.history_max_age_s
        if self.clock.is_hybrid:
            now = physical_micros(self.clock.now())
            return max(0, from_micros(max(0, now - int(age * 1_000_000))))
        return max(0, self.mvcc.last_committed() - int(age))

    def history_gc_mark(self) -> int:
        """History at or before this may be dropped by compactions and UNDO GC.

        The ancient history mark, but never past the oldest op the WAL may still replay:
        replay decides what each op saw from the rowsets' history (see `_locate`), so that
        history must outlive the log entries that need it.
        """
        anchor_ts = self.log.ts_at_or_before(self._anchor_index())
        ahm = self.ancient_history_mark()
        return ahm if anchor_ts is None else min(ahm, anchor_ts - 1)

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
        # Make the read repeatable: no later op may take a timestamp <= ts, and every op
        # that already holds one must finish first (Kudu waits for "safe time").
        self.clock.update(ts)
        self.mvcc.wait_for_safe(ts)
        return MvccSnapshot.at(ts)

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

    # -- maintenance -------------------------------------------------------------------
    def flush_mrs(self) -> int:
        """Flush the MemRowSet to DiskRowSets; returns the number of rows flushed."""
        with self._flush_lock:
            with self._write_lock:
                comps = self._components
                old = comps.mrs
                if old.empty():
                    return 0
                old.frozen = True
                self._components = _Components(self._new_mrs(), comps.frozen + (old,),
                                               comps.tree, comps.schema)
                # Ops up to `flush_index` (timestamps <= flush_ts) have applied to `old`;
                # later ops insert into the new MRS and their mutations of old rows are
                # caught up below.
                flush_index, flush_ts = self.log.last_index, self._last_ts
            self.mvcc.wait_for_safe(flush_ts)
            snap = MvccSnapshot.at(flush_ts)
            new_drss, remap = self._write_flush(old, snap, flush_index)
            with self._write_lock:
                self._catch_up(old, snap, remap, new_drss)
                comps = self._components
                self._components = _Components(
                    comps.mrs, tuple(f for f in comps.frozen if f is not old),
                    self._tree(list(comps.drss) + new_drss), comps.schema)
                self._mrs_flushed_index = max(self._mrs_flushed_index, flush_index)
                self._persist_metadata()
            return len(old)

    def _write_flush(self, mrs: MemRowSet, snap: MvccSnapshot, flush_index: int
                     ) -> tuple[list[DiskRowSet], tuple[np.ndarray, np.ndarray]]:
        # An MRS always has the tablet's schema: alter_schema flushes every MRS first, and
        # it cannot run while a flush does (both hold _flush_lock).
        assert mrs.schema is self.schema
        n, insert_ts, redo = mrs.capture()
        keys, order = mrs.sorted_rowids()
        data = mrs.table(n).take(pa.array(order))
        inv = np.empty(n, dtype=np.int64)
        inv[order] = np.arange(n, dtype=np.int64)
        committed = redo.select(snap.is_committed_array(redo.ts)) if len(redo) else redo
        redo_out = committed.remap_rowids(inv).sorted() if len(committed) else committed
        base = {c.id: data.column(c.name).combine_chunks() for c in self._non_key}
        new_base, undo, kept = fold_history(n, base, insert_ts[order], redo_out, self._non_key,
                                            insert_seq=mrs.insert_seqs(n)[order])
        arrays = [data.column(c.name).combine_chunks() if c.id in self._key_ids
                  else new_base[c.id] for c in self.schema.columns]
        full = pa.Table.from_arrays(arrays, schema=data.schema)
        new_drss, drs_of, local = self._write_rowsets(keys, full, undo, kept, flush_index)
        # mrs rowid -> (new drs index, rowid in it)
        return new_drss, (drs_of[inv], local[inv])

    def _write_rowsets(self, keys: np.ndarray, full: pa.Table, undo: DeltaBatch,
                       kept: DeltaBatch, flushed_index: int
                       ) -> tuple[list[DiskRowSet], np.ndarray, np.ndarray]:
        """Write key-sorted rows as DiskRowSets rolled every drs_target_bytes (in-memory
        size as the estimate); returns them and each row's (rowset index, rowid)."""
        n = full.num_rows
        per_row = max(full.nbytes / max(n, 1), 1)
        rows_per = max(int(self.config.drs_target_bytes // per_row), self.config.page_rows)
        drs_of = np.empty(n, dtype=np.int64)
        local = np.empty(n, dtype=np.int64)
        new_drss = []
        for j, a in enumerate(range(0, n, rows_per)):
            b = min(a + rows_per, n)
            self._next_rowset_id += 1
            rid = self._next_rowset_id
            d = os.path.join(self.path, "rowsets", f"{rid:08d}")
            meta = write_diskrowset(d, rid, self.schema, full.slice(a, b - a), keys[a:b],
                                    _shift(undo.slice_rows(a, b), a),
                                    _shift(kept.slice_rows(a, b), a), self.config,
                                    flushed_index)
            new_drss.append(DiskRowSet(d, self.schema, meta, self.cache, self.config))
            drs_of[a:b] = j
            local[a:b] = np.arange(b - a)
        return new_drss, drs_of, local

    def _catch_up(self, mrs: MemRowSet, snap: MvccSnapshot,
                  remap: tuple[np.ndarray, np.ndarray], new_drss: list[DiskRowSet]) -> None:
        """Move mutations of the frozen MRS made after the flush snapshot to the new DMSs."""
        _, _, redo = mrs.capture()
        if not len(redo):
            return
        late = redo.select(~snap.is_committed_array(redo.ts))
        if not len(late):
            return
        drs_of, local = remap
        target = drs_of[late.rowid]
        for j in np.unique(target):
            part = late.select(target == j)
            new_drss[int(j)].mutate(part.remap_rowids(local).sorted())

    def flush_dms(self) -> int:
        """Flush every DeltaMemStore to a REDO DeltaFile; returns records flushed."""
        with self._flush_lock:
            with self._write_lock:
                pending = [(d, d.begin_dms_flush()) for d in self._components.drss]
                index, ts = self.log.last_index, self._last_ts
            self.mvcc.wait_for_safe(ts)
            total = 0
            for d, old in pending:
                if old is not None:
                    total += len(old)
                    d.finish_dms_flush(old, self.config.fsync, index)
            if total:
                with self._write_lock:
                    self._persist_metadata()
            return total


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
        with ColumnNotFound, also when it raced with the alter (`_write_at`).
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
                self._components = _Components(mrs, (), comps.tree, new_schema)
            return version

    # -- the maintenance manager's view -------------------------------------------------
    def maintenance_ops(self) -> list:
        """Candidate maintenance ops with scores (see maintenance_manager.py)."""
        cfg = self.config
        comps = self._components
        ops = []
        pressure = self.memory_bytes() / max(cfg.memory_limit_bytes, 1)
        under_pressure = pressure >= cfg.memory_soft_fraction
        log_boost = self.log.size_bytes() / (64 * (1 << 20))

        def flush_score(due: float, bias: float) -> float:
            """Memory pressure first, then WAL retention, then the store's own size/age;
            `bias` keeps an MRS flush ahead of a DMS flush at equal urgency."""
            if under_pressure:
                return 99 + bias + 10 * pressure
            if log_boost >= 1:
                return 39 + bias + log_boost
            return 29 + bias + due if due >= 1 else 0.0

        mrs = comps.mrs
        if not mrs.empty():
            due = max(mrs.nbytes / cfg.mrs_flush_bytes, mrs.age_s() / cfg.mrs_flush_age_s)
            ops.append(MaintenanceOp("FlushMRS", flush_score(due, 1), self.flush_mrs))
        dms_bytes = sum(d.dms.nbytes for d in comps.drss)
        if dms_bytes:
            oldest = max(d.dms_age_s() for d in comps.drss)
            due = max(dms_bytes / cfg.dms_flush_bytes, oldest / cfg.dms_flush_age_s)
            ops.append(MaintenanceOp("FlushDMS", flush_score(due, 0), self.flush_dms))
        ahm = self.history_gc_mark()
        for d in comps.drss:
            ratio = d.redo_file_records() / max(d.num_rows, 1)
            if ratio >= cfg.major_compact_min_ratio:
                ops.append(MaintenanceOp("MajorDeltaCompaction", 10 + ratio,
                                         lambda d=d: self.major_delta_compact(d)))
            elif d.redo_file_count() >= cfg.minor_compact_min_files:
                ops.append(MaintenanceOp("MinorDeltaCompaction",
                                         5 + d.redo_file_count() / cfg.minor_compact_min_files,
                                         lambda d=d: self.minor_delta_compact(d)))
            gc = d.undo_gc_candidates(ahm)
            if gc:
                ops.append(MaintenanceOp("UndoDeltaBlockGC",
                                         1 + sum(f.count for f in gc) / 1e6,
                                         self.gc_undo_deltas))
        pick = self.pick_compaction()
        if pick:
            ids, score = pick
            ops.append(MaintenanceOp("MergingCompaction", 2 + 10 * score,
                                     lambda ids=ids: self.compact_rowsets(ids)))
        return ops

    def pick_compaction(self) -> tuple[list[int], float] | None:
        """Rowsets the budgeted knapsack policy would merge, with its score."""
        drss = self._components.drss
        if len(drss) < 2:
            return None
        infos = [RowSetInfo(d.id, d.base_bytes, d.min_key, d.max_key) for d in drss
                 if not d.compact_lock.locked()]
        sel = select_rowsets_to_compact(infos, CompactionPolicyConfig(
            budget_bytes=self.config.compaction_budget_bytes,
            target_rowset_bytes=self.config.drs_target_bytes))
        if not sel.ids:
            return None
        return list(sel.ids), sel.score

    # -- delta compactions and history GC ---------------------------------------------
    def _after_rowset_change(self) -> None:
        """Persist metadata naming the new files, then delete the files it no longer names
        (in that order: a crash between the two leaves only garbage, never a hole)."""
        with self._write_lock:
            self._persist_metadata()
        for d in self._components.drss:
            delete_obsolete(d)

    def minor_delta_compact(self, drs: DiskRowSet) -> int:
        n = drs.minor_delta_compact()
        if n:
            self._after_rowset_change()
        return n

    def major_delta_compact(self, drs: DiskRowSet) -> int:
        n = drs.major_delta_compact(self.history_gc_mark())
        if n:
            self._after_rowset_change()
        return n

    def gc_undo_deltas(self) -> int:
        """UndoDeltaBlockGC over every rowset; returns UNDO records dropped."""
        ahm = self.history_gc_mark()
        n = sum(d.gc_undo(ahm) for d in self._components.drss)
        if n:
            self._after_rowset_change()
        return n

    def compact_rowsets(self, ids: Sequence[int]) -> int:
        """Merging compaction of the DiskRowSets with these ids (Kudu's CompactRowSetsOp).

        The inputs' DMSs are flushed first (so every op up to index G is in their files),
        then their rows are merged by key — ghost versions of a key become one row whose
        history is all of theirs — rows deleted at or before the ancient history mark are
        dropped, histories are folded again into base + UNDO, and new rowsets are written
        with flushed_index G. Mutations that arrived meanwhile (ops after G, in the inputs'
        new DMSs) are moved to the outputs under the write lock, then the rowsets swap.
        Returns the number of input rows.
        """
        with self._flush_lock:
            comps = self._components
            inputs = [d for d in comps.drss if d.id in set(ids)]
            if len(inputs) < 2:
                return 0
            locked = []
            try:
                for d in inputs:
                    if not d.compact_lock.acquire(blocking=False):
                        return 0
                    locked.append(d)
                with self._write_lock:
                    pending = [(d, d.begin_dms_flush()) for d in inputs]
                    index, ts = self.log.last_index, self._last_ts
                self.mvcc.wait_for_safe(ts)
                for d, old in pending:
                    if old is not None:
                        d.finish_dms_flush(old, self.config.fsync, index)
                ahm = self.history_gc_mark()
                keys_l, ts_l, seq_l, fwd_l = [], [], [], []
                vals_l = {c.id: [] for c in self.schema.columns}
                offset = 0
                offsets = []
                for d in inputs:
                    st = d._stores
                    readers = st[3]
                    n = d.num_rows
                    keys_l.append(binary_to_fixed(d._read_column_raw(KEY_COLUMN)))
                    base = {c.id: d._read_column(c, readers) for c in self.schema.columns}
                    undo = DeltaBatch.concat([f.records() for f in st[0]])
                    redo = DeltaBatch.concat([f.records() for f in st[1]])
                    its, iseq, ivals, fwd = unfold_history(n, base, undo, redo, self._non_key)
                    ts_l.append(its)
                    seq_l.append(iseq)
                    for c in self.schema.columns:
                        vals_l[c.id].append(ivals[c.id] if c.id in ivals else base[c.id])
                    fwd_l.append(_shift(fwd, -offset))
                    offsets.append(offset)
                    offset += n
                keys = np.concatenate(keys_l)
                values = {cid: pa.concat_arrays(v) for cid, v in vals_l.items()}
                out_keys, out_of, base, out_ts, out_seq, merged, firsts = merge_histories(
                    keys, np.concatenate(ts_l), np.concatenate(seq_l), values,
                    DeltaBatch.concat(fwd_l), ahm, self._non_key)
                new_base, undo, kept = fold_history(len(out_keys), base, out_ts, merged,
                                                    self._non_key, insert_seq=out_seq)
                if len(undo):
                    undo = undo.select(undo.ts > ahm)
                pf = pa.array(firsts)
                arrays = [values[c.id].take(pf) if c.id in self._key_ids else new_base[c.id]
                          for c in self.schema.columns]
                full = pa.Table.from_arrays(arrays, schema=pa.schema(
                    [pa.field(c.name, c.physical_type) for c in self.schema.columns]))
                outputs, drs_of, local = self._write_rowsets(out_keys, full, undo, kept, index) \
                    if len(out_keys) else ([], np.empty(0, np.int64), np.empty(0, np.int64))
                with self._write_lock:
                    for d, off in zip(inputs, offsets):
                        late = DeltaBatch.concat([m.view() for m in d._stores[2]])
                        if not len(late):
                            continue
                        rows = out_of[late.rowid + off]
                        late = late.select(rows >= 0)
                        rows = rows[rows >= 0]
                        for j in np.unique(drs_of[rows]):
                            part = late.select(drs_of[rows] == j)
                            outputs[int(j)].mutate(part.remap_rowids(
                                np.where(drs_of == j, local, -1)[out_of[np.arange(
                                    d.num_rows) + off]]).sorted())
                    comps = self._components
                    drss = [x for x in comps.drss if x not in inputs] + outputs
                    self._components = _Components(comps.mrs, comps.frozen, self._tree(drss),
                                                   comps.schema)
                    self._persist_metadata()
                for d in inputs:
                    d.delete_files()
                return offset
            finally:
                for d in locked:
                    d.compact_lock.release()

    def compact_deltas(self) -> int:
        """Major-compact every rowset with REDO files (tests and benchmarks)."""
        return sum(self.major_delta_compact(d) for d in self._components.drss)


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


def _remove_orphans(path: str, meta: dict) -> None:
    """Delete files a crash left behind: rowsets and delta files the metadata does not name,
    and half-written `.tmp` files. They were never visible, so removing them loses nothing."""
    rs_dir = os.path.join(path, "rowsets")
    live = {f"{m['id']:08d}": m for m in meta.get("rowsets", [])}
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
    for name in os.listdir(path):
        if name.endswith(".tmp"):
            os.unlink(os.path.join(path, name))


def _shift(batch: DeltaBatch, offset: int) -> DeltaBatch:
    if not len(batch) or offset == 0:
        return batch
    return DeltaBatch(batch.rowid - offset, batch.ts, batch.seq, batch.kind, batch.columns)


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
