"""Table: one table's reads and writes over its tablets (Kudu's client-side routing).

A Table is a light facade bound to a table *id* in a Catalog (so it follows RENAME and ADD /
DROP RANGE PARTITION). Every call reads the table's current immutable TableMetadata once
and uses it throughout, and takes references on the tablets it touches for its duration
(a `TabletLease`, see leases.py): a concurrent DDL never changes the partitioning under a
running op. Table uses the catalog only through the `TableCatalog` contract of leases.py,
so it runs unchanged over the embedded Catalog and, later, a remote catalog client.

Writes (`write(ops, rows)`; insert/upsert/update/delete) all run one pipeline,
`run_write(route, apply)` (write_pipeline.py: route -> hold -> apply -> release ->
merge; one open tablet is pinned, several leased: `_hold`); the small, general, pydict
and in-order writes are its strategies (a route and an apply each), the coalescer a
wrapper of the general one. The partition of every row is
computed vectorised (`PartitionSchema.physical_columns` + `partition_indexes`); rows are
grouped by partition with one stable argsort (so rows of one key stay in batch order) and
each tablet gets *one* engine op with its share. Tablets are written in parallel on the
catalog's thread pool when the batch is large enough to pay for it (WAL fsyncs and numpy /
Arrow kernels release the GIL). Per-row errors of each tablet are mapped back to the rows'
indexes in the caller's batch. Rows no range partition covers get a `NO_PARTITION` row
error naming the key (Kudu: "No tablet covering the requested range partition"; Impala
counts it as a row error, Postgres reports SQLSTATE 23514 "no partition of relation found
for row"); rows whose key cannot be converted (NULL, out of range) get the tablet's codes,
NOT_NULL / INVALID, without being sent anywhere.

Small writes (table_small_writes.py): up to SMALL_MAX_ROWS (8) rows of plain Python values
(a dict of lists, or an Arrow table read out with `to_pylist`) are routed row by row
(`PartitionSchema.partition_index_for_key_values`, as `lookup` routes) and each tablet's share is
applied on the tablet's small-write path (engine/tablet/small_write.py): no Arrow
conversion, no coalescer, no thread-pool hop for one tablet. Every share is prepared
(values checked and converted, the compact WAL record built) before any is applied; if
one is not eligible (a value whose conversion is not certain, a key that needs routing's
error reports, a repeated key), nothing was done and the write takes the general path
below, so outcomes never depend on the path. Larger writes of up to COALESCE_MAX_ROWS
rows go through the coalescer (engine/catalog/coalesce.py). As in Kudu a batch is not atomic, and
across tablets it is not even one timestamp: each tablet's share commits at its own
timestamp (`TableWriteResult.tablet_timestamps`); `timestamp` is the largest, a client's
"read your writes" token.

Reads. `scan` prunes partitions with the predicates (`PartitionSchema.prune`), opens a scan
on every remaining tablet at ONE snapshot timestamp, and returns a `TableScan`
(table_scanner.py: how the snapshot is chosen, how tablet scans run in parallel): an
iterator of RecordBatches (unordered, Kudu's UNORDERED scan) carrying the snapshot
(`timestamp`) and statistics for EXPLAIN (`stats`: tablets pruned / scanned, rows scanned /
returned). `lookup` reads one row by its key under a lease; `lookup_now` is the same read
for an event loop: routing kept per table version, one tablet pinned
(`TableCatalog.pin_tablet`), NOT_NOW instead of any wait.

Column renames: tablets keep the names their schema had when they were created; the
table schema is authoritative and names are mapped by column id on the way in and out
(`TabletHandle.column_renames`), which is what makes RENAME COLUMN metadata-only.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import time
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from engine import errors
from engine.catalog import table_small_writes as _small
from engine.catalog.leases import TableCatalog, TabletHandle
from engine.catalog.metadata import TableMetadata
from engine.catalog.table_scanner import TableScan, TableScanStats, pick_snapshot
from engine.catalog.write_pipeline import (Routed, TableWriteResult, carry_durable_at,
                                           merge_results)
from engine.clock import from_micros
from engine.tablet.diskrowset import ScanStats
from engine.tablet.mvcc import MvccSnapshot
from engine.tablet.scan_spec import BoundPredicate, ColumnPredicate
from engine.tablet.write_op import READ_TS_COLUMN, OpType, RowError, RowErrorCode, WriteOp
from engine.types import sql_literal


NO_PARTITION = "NO_PARTITION"
# `Table.lookup_now`: the lookup would have to wait (nothing was done)
NOT_NOW = object()
# Below this many rows a multi-tablet write runs tablet by tablet in the caller's thread.
PARALLEL_WRITE_MIN_ROWS = 512
# writes of at most this many rows may be applied together with concurrent ones (coalesce)
COALESCE_MAX_ROWS = 256


@dataclasses.dataclass(frozen=True)
class PartitionRowError(RowError):
    """A row no range partition covers (code NO_PARTITION)."""

    @property
    def sqlstate(self) -> str:
        return "23514"


def _route(meta, table: pa.Table) -> tuple[np.ndarray, dict]:
    """Each row's partition index under `meta` (-2: its key could not be read, the reason in
    `bad` by row; -1: no partition covers it), after checking the columns against the
    schema (ColumnNotFound; a missing key column is InvalidArgument)."""
    schema = meta.schema
    for name in table.column_names:
        if name != READ_TS_COLUMN:      # a row's read precondition (row_check.py)
            schema.index_of(name)  # raises ColumnNotFound
    for c in schema.key_columns:
        if c.name not in table.column_names:
            raise errors.InvalidArgument(f"key column {c.name!r} missing from the rows")
    ps = meta.partition_schema
    phys, bad = ps.physical_columns(table)
    part = ps.partition_indexes(phys, table.num_rows)
    if bad:
        part[np.fromiter(bad, dtype=np.int64)] = -2
    return part, bad


def _key_text(key: tuple) -> str:
    return "(" + ", ".join(sql_literal(v) for v in key) + ")"


def _as_arrow(rows) -> pa.Table | None:
    """Rows as an Arrow table; None for a dict Arrow cannot convert (the slow path)."""
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    if isinstance(rows, pa.Table):
        return _without_views(rows)
    if isinstance(rows, dict):
        lens = {len(v) for v in rows.values()}
        if len(lens) > 1:
            raise errors.InvalidArgument("columns of the rows have different lengths")
        try:
            return pa.table({k: pa.array(list(v)) for k, v in rows.items()}) if rows \
                else pa.table({})
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            return None
    if isinstance(rows, list):
        return pa.Table.from_pylist(rows)
    raise errors.InvalidArgument(f"cannot write rows of type {type(rows).__name__}")


def _without_views(t: pa.Table) -> pa.Table:
    """string_view/binary_view columns (parquet readers produce them) as string/binary:
    routing splits rows with `take`, which pyarrow lacks for view types."""
    fix = {i: (pa.string() if pa.types.is_string_view(f.type) else pa.binary())
           for i, f in enumerate(t.schema)
           if pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type)}
    for i, typ in fix.items():
        t = t.set_column(i, t.schema.field(i).name, t.column(i).cast(typ))
    return t


def _op_array(ops, n: int) -> np.ndarray:
    if np.isscalar(ops) or isinstance(ops, OpType):
        return np.full(n, int(ops), dtype=np.int8)
    arr = np.asarray(ops if isinstance(ops, np.ndarray) else [int(o) for o in ops],
                     dtype=np.int8)
    if len(arr) != n:
        raise errors.InvalidArgument(f"{len(arr)} op types for {n} rows")
    return arr


class Table:
    # writes of at most SMALL_MAX_ROWS rows of plain values take the small-write path
    # (table_small_writes.py); tests switch it off to compare both paths
    small_writes = True
    # scans run in this process: they take ColumnPredicate.member (runtime join filters)
    member_predicates = True

    def __init__(self, catalog: TableCatalog, table_id: str):
        self.catalog = catalog
        self.id = table_id
        self._small = _small.SmallWrites(self)   # the small-write strategy (its caches)
        # `lookup_now`: (metadata, {columns: checked}) of the version it last routed with
        self._point: tuple | None = None

    # -- metadata --------------------------------------------------------------------------
    @property
    def metadata(self) -> TableMetadata:
        return self.catalog.table_metadata(self.id)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def schema(self):
        return self.metadata.schema

    @property
    def partition_schema(self):
        return self.metadata.partition_schema

    def __repr__(self) -> str:
        m = self.metadata
        return f"Table({m.name!r}, {len(m.tablet_ids)} tablets, {m.partition_schema})"

    def _open(self, slots: Sequence[TabletHandle]) -> list:
        """Open tablets (in parallel when several are still closed)."""
        closed = [s for s in slots if not s.is_open]
        if len(closed) > 1:
            list(self.catalog.executor.map(lambda s: s.tablet(), closed))
        return [s.tablet() for s in slots]

    def tablets_open(self) -> bool:
        """True when every tablet of the table is open and no ALTER is under way: a
        `lookup` then opens no files and waits for nothing (an event loop checks this before
        it runs a lookup itself rather than in a worker thread)."""
        return self.catalog.tablets_ready(self.id)

    def prune(self, predicates: Sequence[ColumnPredicate] = ()) -> list:
        """The partitions a scan with these predicates reads (EXPLAIN)."""
        ps = self.partition_schema
        return [ps.partitions[i] for i in ps.prune(predicates)]

    def current_timestamp(self) -> int:
        """A timestamp at or after every write acknowledged so far on this table."""
        lease = self.catalog.lease_tablets(self.id, lambda m: m.tablet_ids)
        slots = lease.handles
        try:
            return max((t.current_timestamp() for t in self._open(slots)), default=0)
        finally:
            lease.release()

    def committed_timestamp(self) -> int:
        """The latest commit of this table's own tablets: `current_timestamp` without the
        timestamps a cluster client saw on other tables (RemoteTablet), so that
        `committed_timestamp() <= T` means no write of this table committed after T."""
        lease = self.catalog.lease_tablets(self.id, lambda m: m.tablet_ids)
        try:
            return max((getattr(t, "committed_timestamp", t.current_timestamp)()
                        for t in self._open(lease.handles)), default=0)
        finally:
            lease.release()

    def change_counts(self, start_ts: int, end_ts: int, retained: bool = False
                      ) -> tuple[np.ndarray, np.ndarray]:
        """`Tablet.change_counts` over the table's tablets: (sorted distinct commit
        timestamps in (start_ts, end_ts], records each, summed over the tablets). Local
        tablets only (a cluster client's RemoteTablet has no such RPC: NotSupported)."""
        lease = self.catalog.lease_tablets(self.id, lambda m: m.tablet_ids)
        try:
            ts, counts = [], []
            for t in self._open(lease.handles):
                if not hasattr(t, "change_counts"):
                    raise errors.NotSupported(
                        "a change stream's maxRowsPerTrigger needs the table's tablets in "
                        "the endpoint's process (not yet on a cluster's tablet servers)")
                a, c = t.change_counts(start_ts, end_ts, retained)
                ts.append(a)
                counts.append(c)
        finally:
            lease.release()
        if not ts:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        u, inv = np.unique(np.concatenate(ts), return_inverse=True)
        return u, np.bincount(inv, weights=np.concatenate(counts),
                              minlength=len(u)).astype(np.int64)

    def clock_now(self) -> int:
        """Now as a HybridTime: the catalog's clock (embedded), or this process's wall
        clock (a cluster's client has no clock of its own)."""
        clock = getattr(self.catalog, "clock", None)
        return clock.now() if clock is not None else from_micros(time.time_ns() // 1000)

    def safe_now(self) -> int:
        """A fresh timestamp T, made safe on every tablet of the table: every write at or
        below T has committed (or failed) and is visible to a read at T, and every later
        write gets a timestamp above T - on a cluster through the tablet leaders' snapshot
        barrier (`wait_safe` RPC, TabletReplica.wait_safe), as a READ_AT_SNAPSHOT scan's.
        T is the catalog's clock (embedded) or this process's wall clock as a HybridTime (a
        cluster's client has no clock; the servers accept it within their maximum clock
        error), never below `current_timestamp()`. A change stream on an idle table moves
        its offset here (wire.flight.changes_plan), so its windows stay above the
        ancient history mark."""
        ts = self.clock_now()
        lease = self.catalog.lease_tablets(self.id, lambda m: m.tablet_ids)
        try:
            tablets = self._open(lease.handles)
            ts = max([ts, *(t.current_timestamp() for t in tablets)])
            for t in tablets:
                t.wait_safe(ts)
        finally:
            lease.release()
        return ts

    # -- writes ----------------------------------------------------------------------------
    def insert(self, rows, in_order: bool = False) -> TableWriteResult:
        return self.write(OpType.INSERT, rows, in_order)

    def upsert(self, rows, in_order: bool = False) -> TableWriteResult:
        return self.write(OpType.UPSERT, rows, in_order)

    def update(self, rows) -> TableWriteResult:
        return self.write(OpType.UPDATE, rows)

    def delete(self, rows) -> TableWriteResult:
        return self.write(OpType.DELETE, rows)

    def write(self, ops, rows, in_order: bool = False) -> TableWriteResult:
        """Apply row operations, each routed to its partition's tablet (see module doc).
        Small writes that arrive concurrently are applied together (engine.catalog.coalesce).

        `in_order` (INSERT / UPSERT rows given as Arrow): the rows behave as if written one
        after another, stopping at the first that fails: the rows before it are applied,
        it and every row after it are not, and `row_errors` holds its error alone (see
        `_write_in_order`). A driver's pipelined batch of one prepared INSERT is this."""
        if not in_order and self.small_writes:
            done = self._small.write(ops, rows)
            if done is not None:
                return done
        table = _as_arrow(rows)
        if in_order:
            if table is None:
                raise errors.InvalidArgument("an in-order write takes Arrow rows")
            return self._write_in_order(_op_array(ops, table.num_rows), table)
        if table is None:
            return self._write_pydict(ops, rows)
        op_arr = _op_array(ops, table.num_rows)
        if 0 < table.num_rows <= COALESCE_MAX_ROWS:
            return self.catalog.write_coalescer(self.id).write(op_arr, table, self._write_now)
        return self._write_now(op_arr, table)

    def write_small(self, ops, rows) -> TableWriteResult | None:
        """`write` when it takes the small-write path (table_small_writes.py); None, having
        done nothing, when it would not (the caller may then write the general way, or
        not at all). A front end that must know its write cannot fail beyond
        ALREADY_PRESENT / NOT_FOUND (the wire's key-write fast path) uses this."""
        return self._small.write(ops, rows)

    def write_small_deferred(self, ops, rows, never_block: bool = False
                             ) -> Callable[[], TableWriteResult] | None:
        """`write_small` up to its wait for durability (table_small_writes.py
        `SmallWrites.write_deferred`): None, having done nothing, or the call - to be made
        exactly once, soon, on any thread - that waits for the WAL fsyncs, commits and
        returns the TableWriteResult (a one-tablet write's call names the WAL position
        it waits for, `durable_at`: Tablet.finish_op). The wire server applies a key
        write on its event loop and waits for the fsync on its WAL sync thread
        (wire/server.py), with
        `never_block`: None rather than sleep in memory back-pressure or wait for a
        tablet's write lock on the loop (the ordinary path then writes it on a pool
        thread)."""
        return self._small.write_deferred(ops, rows, never_block)

    def run_write(self, route, apply) -> TableWriteResult:
        """The write pipeline every write strategy runs (module docstring, "Writes"):
        hold the tablets `route(meta)` (a `Routed`) picks under the current metadata
        (`_hold`), `apply(meta, shares)` with shares = [(tablet handle, row indexes)] in
        routing order, returning ([(handle, row indexes, WriteResult)], extra row
        errors), release them, and merge (`merge_results`). An exception of `route` or
        `apply` leaves through here, the tablets released."""
        meta, routed, shares, release = self._hold(route)
        try:
            results, extra = apply(meta, shares)
        finally:
            release()
        return merge_results(results, routed.errors + extra if extra else routed.errors)

    def run_write_deferred(self, route, apply) -> Callable[[], TableWriteResult]:
        """`run_write` for a strategy whose `apply` stops before the wait for durability:
        it returns ([(handle, row indexes, finisher)], extra row errors), and this returns
        the call that runs the finishers (`finish_all`), releases the tablets and merges -
        to be made exactly once, on any thread. The tablets stay held until then. For
        one tablet the call carries its tablet finisher's `durable_at` (the WAL position
        it waits for, Tablet.finish_op), so a caller can wait for that elsewhere."""
        meta, routed, shares, release = self._hold(route)
        try:
            pending, extra = apply(meta, shares)
        except BaseException:
            release()
            raise
        errs = routed.errors + extra if extra else routed.errors

        if len(pending) == 1:            # one tablet (every single-row write)
            slot, idx, fin = pending[0]

            def finish() -> TableWriteResult:
                try:
                    r = fin()
                finally:
                    release()
                return merge_results([(slot, idx, r)], errs)
            return carry_durable_at(finish, fin)

        def finish_all() -> TableWriteResult:
            try:
                results = self.finish_all([f for _, _, f in pending])
            finally:
                release()
            return merge_results([(slot, idx, r) for (slot, idx, _), r in
                                  zip(pending, results)], errs)
        return finish_all

    def pin_partition(self, meta, part: int):
        """A pin (`TableCatalog.pin_tablet`) on the open tablet of partition `part` under
        `meta`, or None (nothing taken): a catalog without pins, `meta` no longer
        current, a DDL under way, the tablet not open. Give it back with `unpin`. The
        small writes' one-row path (table_small_writes.py `_write_one`) holds its
        tablet so, as `_hold` does for a write routed to one tablet."""
        pin = getattr(self.catalog, "pin_tablet", None)
        return None if pin is None else pin(meta, meta.tablet_ids[part])

    def unpin(self, slot) -> None:
        """Give back a `pin_partition` pin."""
        self.catalog.unpin_tablet(slot)

    def _hold(self, route):
        """(metadata, Routed, shares, release): the tablets `route(meta)` picks under the
        current metadata held until `release()`, shares = [(tablet handle, row indexes)]
        in routing order. One open tablet is pinned (`TableCatalog.pin_tablet`: one
        version check, no lease object; every single-row write); anything else - several
        tablets, one not open, a DDL under way or racing, a catalog without pins - is
        leased (`lease_tablets`, which routes again under the metadata it leases with,
        unless that is the very metadata object routed under here: metadata objects are
        replaced, never changed, so the routing stands and a bulk write is not hashed and
        sorted twice)."""
        cat = self.catalog
        pin = getattr(cat, "pin_tablet", None)
        first: tuple | None = None
        if pin is not None:
            meta = cat.table_metadata(self.id)
            routed = route(meta)
            if len(routed.groups) == 1:
                p, idx = routed.groups[0]
                slot = pin(meta, meta.tablet_ids[p])
                if slot is not None:
                    return meta, routed, [(slot, idx)], lambda: cat.unpin_tablet(slot)
            first = (meta, routed)
        state: dict = {}

        def pick(meta):
            r = state["routed"] = first[1] if first is not None and first[0] is meta \
                else route(meta)
            return [meta.tablet_ids[p] for p, _ in r.groups]

        lease = cat.lease_tablets(self.id, pick)
        routed = state["routed"]
        return (lease.metadata, routed,
                list(zip(lease.handles, [idx for _, idx in routed.groups])), lease.release)

    def _write_now(self, op_arr: np.ndarray, table: pa.Table) -> TableWriteResult:
        """The general strategy: rows routed vectorised (`_route`), one tablet op per
        share (`_write_groups`: in parallel when large)."""
        def route(meta) -> Routed:
            part, bad = _route(meta, table)
            routed = np.flatnonzero(part >= 0)
            if not len(routed):
                return Routed([], self._key_errors(meta, table, part, bad))
            pr = part[routed]
            # rows grouped by tablet, each group in row order: partition indexes are few,
            # so a stable sort of them as int16 is numpy's radix sort (O(n)), and the
            # groups' sizes come from a count, not from sorting again (np.unique)
            counts = np.bincount(pr)
            key = pr.astype(np.int16) if len(counts) <= np.iinfo(np.int16).max else pr
            order = routed[np.argsort(key, kind="stable")]
            parts = np.flatnonzero(counts)
            groups = np.split(order, np.cumsum(counts[parts])[:-1])
            return Routed(list(zip(parts.tolist(), groups)),
                          self._key_errors(meta, table, part, bad))

        def apply(meta, shares):
            return self._write_groups(meta, [slot for slot, _ in shares],
                                      [(op_arr[idx], idx) for _, idx in shares], table), []
        return self.run_write(route, apply)

    def _write_in_order(self, op_arr: np.ndarray, table: pa.Table) -> TableWriteResult:
        """`write(..., in_order=True)`: the rows up to the first failing one, in one op per
        tablet.

        The first failure is decided and the rows before it applied with the write locks
        of every tablet involved held (taken in tablet-id order, so two in-order writes
        cannot deadlock; everything else takes one tablet's write lock at a time): no
        concurrent writer can make a row fail, or succeed, between the check
        (`Tablet.first_failure`) and the apply. Tablets are then applied one after the
        other on this thread (a pool thread could not take the locks held here); a tablet
        whose rows all apply hands its check's converted values to its apply
        (`first_failure(op, converted)`), so they are converted once. Memory
        back-pressure (`Tablet.admit_write`) runs before the locks are taken: it may wait
        for a flush, which needs the write lock."""
        n = table.num_rows
        if n == 0:
            return TableWriteResult(0, 0, [], {})
        state: dict = {}

        def route(meta) -> Routed:
            part, bad = _route(meta, table)
            state.update(part=part, bad=bad)
            parts = np.unique(part[part >= 0]).tolist()
            # no errors here: the first failing row alone is reported, found by `apply`
            return Routed([(p, np.flatnonzero(part == p)) for p in parts], [])

        def apply(meta, shares):
            part, bad = state["part"], state["bad"]
            unrouted = np.flatnonzero(part < 0)
            first = int(unrouted[0]) if len(unrouted) else n
            error: RowError | None = None
            jobs = []
            for slot, idx in sorted(shares, key=lambda j: j[0].tablet_id):
                t = slot.tablet()
                if not getattr(t, "in_order_writes", True):
                    raise errors.NotSupported("in-order batch writes are not supported on "
                                              "this table's tablets")
                t.admit_write()
                jobs.append((slot, t, idx, WriteOp(op_arr[idx],
                                                   _tablet_rows(meta, slot, table, idx))))
            locked, pending = [], []
            try:
                try:
                    for _, t, _, _ in jobs:
                        t.write_lock.acquire()
                        locked.append(t)
                    # each tablet's check hands back its op's converted values when all
                    # of its rows apply: its apply, under the same locks, reuses them
                    converted: dict[int, tuple] = {}
                    for j, (_, t, idx, op) in enumerate(jobs):
                        conv: list = []
                        f = t.first_failure(op, conv)
                        if conv:
                            converted[j] = conv[0]
                        if f is not None and int(idx[f[0]]) < first:
                            first = int(idx[f[0]])
                            error = RowError(first, f[1], f[2], _row_key(meta, table, first))
                    for j, (slot, t, idx, op) in enumerate(jobs):
                        m = int(np.searchsorted(idx, first))   # idx ascending: rows < first
                        if m == 0:
                            continue
                        if m < len(idx):    # a prefix: a new op, converted afresh
                            op = WriteOp(op.ops[:m], op.rows.slice(0, m))
                        pending.append((slot, t, idx, t.apply_deferred(
                            op, converted=converted.get(j))))
                finally:
                    for t in reversed(locked):
                        t.write_lock.release()
            finally:
                results = self.finish_all([f for _, _, _, f in pending])
            for (slot, t, _, _), r in zip(pending, results):
                if r.row_errors:  # cannot happen: first_failure said they all apply
                    raise errors.EngineError(
                        f"tablet {t.path}: an in-order write failed a row its check "
                        f"passed ({r.row_errors[0].message})")
            if error is None and first < n:      # the first failure is a routing one
                error = self._key_errors(meta, table.slice(first, 1),
                                         part[first:first + 1],
                                         {0: bad[first]} if first in bad else {})[0]
                error = dataclasses.replace(error, index=first)
            return ([(slot, idx, r) for (slot, _, idx, _), r in zip(pending, results)],
                    [] if error is None else [error])
        return self.run_write(route, apply)

    def _key_errors(self, meta, table: pa.Table, part: np.ndarray, bad: dict) -> list:
        """Row errors for rows that were not routed (error path: a loop over those rows)."""
        unrouted = np.flatnonzero(part < 0)
        if not len(unrouted):
            return []
        key_names = meta.schema.key_names
        keys = table.select(key_names).take(pa.array(unrouted)).to_pylist()
        out = []
        for i, kd in zip(unrouted.tolist(), keys):
            key = tuple(kd[k] for k in key_names)
            if i in bad:
                code, msg = bad[i]
                out.append(RowError(i, code, msg, key))
            else:
                out.append(PartitionRowError(
                    i, NO_PARTITION, f'no range partition of table "{meta.name}" covers key '
                    f'{_key_text(key)} (no tablet covering the requested range partition)',
                    key))
        return out

    def _write_groups(self, meta, slots, groups, table: pa.Table) -> list:
        """One tablet op per (slot, group); parallel when worthwhile."""
        def one(slot, ops, idx):
            return slot, idx, slot.tablet().write(ops, _tablet_rows(meta, slot, table, idx))

        jobs = [(slot, ops, idx) for slot, (ops, idx) in zip(slots, groups)]
        if len(jobs) <= 1:
            return [one(*j) for j in jobs]
        if table.num_rows < PARALLEL_WRITE_MIN_ROWS:
            # small shares: applied one after the other here, their fsyncs waited for
            # together (Tablet.write_deferred)
            pending = []
            try:
                for slot, ops, idx in jobs:
                    pending.append((slot, idx, slot.tablet().write_deferred(
                        ops, _tablet_rows(meta, slot, table, idx))))
            finally:
                results = self.finish_all([f for _, _, f in pending])
            return [(slot, idx, r) for (slot, idx, _), r in zip(pending, results)]
        futures = [self.catalog.executor.submit(one, *j) for j in jobs]
        cf.wait(futures)  # every tablet op ends before its tablet is released
        return [f.result() for f in futures]

    def finish_all(self, finishers: list) -> list:
        """Run the finishing calls of deferred tablet writes (`Tablet.apply_deferred`):
        each waits for its tablet's WAL fsync, so they run at once (one here, the others
        on the catalog's pool; fsync releases the GIL). Every one runs even if another
        raises (each commits an op in MVCC that readers would otherwise wait for); the
        first exception is raised after all have run."""
        if len(finishers) <= 1:
            return [f() for f in finishers]
        futures = [self.catalog.executor.submit(f) for f in finishers[1:]]
        first, error = None, None
        try:
            first = finishers[0]()
        except BaseException as e:  # noqa: BLE001 - raised once the others have run
            error = e
        cf.wait(futures)
        if error is not None:
            raise error
        return [first] + [f.result() for f in futures]

    def _write_pydict(self, ops, rows: dict) -> TableWriteResult:
        """Error path for dict input Arrow cannot convert (mixed types): rows are routed
        one by one and each tablet gets its share as a dict (it reports INVALID values)."""
        n = len(next(iter(rows.values())))
        op_arr = _op_array(ops, n)
        cols = {k: list(v) for k, v in rows.items()}

        def route(meta) -> Routed:
            for name in cols:
                meta.schema.index_of(name)
            key_names = meta.schema.key_names
            for k in key_names:
                if k not in cols:
                    raise errors.InvalidArgument(f"key column {k!r} missing from the rows")
            ps = meta.partition_schema
            part, errs = [], []
            for i in range(n):
                key = tuple(cols[k][i] for k in key_names)
                try:
                    if any(v is None for v in key):
                        raise errors.InvalidArgument("null key")
                    p = ps.partition_index_for_key(dict(zip(key_names, key)))
                except errors.EngineError as e:
                    null = next((k for k, v in zip(key_names, key) if v is None), None)
                    errs.append(RowError(i, RowErrorCode.NOT_NULL.value,
                                         f'null value in column "{null}" violates not-null '
                                         f'constraint', key) if null else
                                RowError(i, RowErrorCode.INVALID.value,
                                         f"invalid key {_key_text(key)}: {e}", key))
                    p = -2
                if p == -1:
                    errs.append(PartitionRowError(
                        i, NO_PARTITION, f'no range partition of table "{meta.name}" covers '
                        f'key {_key_text(key)} (no tablet covering the requested range '
                        f'partition)', key))
                part.append(p)
            part = np.asarray(part, dtype=np.int64)
            groups = {}
            for p in sorted(set(part.tolist()) - {-1, -2}):
                groups[p] = np.flatnonzero(part == p)
            return Routed(list(groups.items()), errs)

        def apply(meta, shares):
            results = []
            for slot, idx in shares:
                ren = slot.column_renames(meta.schema) or {}
                sub = {ren.get(k, k): [v[i] for i in idx.tolist()] for k, v in cols.items()}
                results.append((slot, idx, slot.tablet().write(op_arr[idx], sub)))
            return results, []
        return self.run_write(route, apply)

    # -- reads -----------------------------------------------------------------------------
    def scan(self, columns: Sequence[str] | None = None,
             predicates: Sequence[ColumnPredicate] = (), snapshot=None,
             lower_key=None, upper_key=None, lazy: bool = True) -> TableScan:
        """Scan the pruned tablets at one snapshot; bad input raises here, not later."""
        return self._scan(columns, predicates, snapshot, lower_key, upper_key, lazy, None)

    def scan_partition(self, index: int, columns: Sequence[str] | None = None,
                       predicates: Sequence[ColumnPredicate] = (), snapshot=None,
                       lazy: bool = True) -> TableScan:
        """`scan` restricted to one partition (`partition_schema.partitions[index]`, i.e.
        tablet `metadata.tablet_ids[index]`): one Spark / Flight partition per tablet, as in
        Kudu's Spark integration. The partition is still pruned by the predicates (then
        nothing is read); pass the same `snapshot` to every partition's scan for one
        consistent cut. An index outside the current partitions raises InvalidArgument."""
        return self._scan(columns, predicates, snapshot, None, None, lazy, int(index))

    def _scan(self, columns, predicates, snapshot, lower_key, upper_key, lazy,
              only: int | None) -> TableScan:
        state: dict = {}

        def pick(meta):
            schema = meta.schema
            names = list(columns) if columns is not None else schema.names
            for nm in names:
                schema.column(nm)
            for p in predicates:
                BoundPredicate(p, schema.column(p.column))  # raises on a bad literal
            keep = meta.partition_schema.prune(predicates)
            if only is not None:
                if not 0 <= only < len(meta.tablet_ids):
                    raise errors.InvalidArgument(
                        f'table "{meta.name}" has no partition {only} '
                        f'({len(meta.tablet_ids)} partitions)')
                keep = [i for i in keep if i == only]
            state.update(names=names, keep=keep)
            return [meta.tablet_ids[i] for i in keep]

        lease = self.catalog.lease_tablets(self.id, pick)
        meta, slots = lease.metadata, lease.handles
        try:
            tablets = self._open(slots)
            names = state["names"]
            stats = TableScanStats(len(meta.tablet_ids), len(slots),
                                   len(meta.tablet_ids) - len(slots))
            snap, ts = pick_snapshot(tablets, snapshot)
            out_schema = meta.schema.arrow_schema(names)
            iters = []
            renamed = False
            for slot, t in zip(slots, tablets):
                ren = slot.column_renames(meta.schema) or {}
                renamed |= bool(ren)
                st = stats.per_tablet[slot.tablet_id] = ScanStats()
                preds = [dataclasses.replace(p, column=ren[p.column]) if p.column in ren else p
                         for p in predicates]
                iters.append(t.scan([ren.get(c, c) for c in names], preds, snap,
                                    lower_key, upper_key, lazy, st))
        except BaseException:
            lease.release()
            raise

        if renamed and names:
            def fix(b: pa.RecordBatch) -> pa.RecordBatch:
                return pa.RecordBatch.from_arrays(b.columns, schema=out_schema)
        else:
            def fix(b: pa.RecordBatch) -> pa.RecordBatch:
                return b
        return TableScan(lease.release, iters, fix, ts, stats,
                         self.catalog.executor, self.catalog.parallelism)

    def scan_table(self, columns: Sequence[str] | None = None, *args, **kwargs) -> pa.Table:
        """`scan` collected into one table (an empty projection gives a count-only table)."""
        scan = self.scan(columns, *args, **kwargs)
        batches = list(scan)
        names = list(columns) if columns is not None else self.schema.names
        if not names:
            n = sum(b.num_rows for b in batches)
            return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])
        return pa.Table.from_batches(batches, schema=self.metadata.schema.arrow_schema(names))

    def count_rows(self, snapshot=None, predicates: Sequence[ColumnPredicate] = ()) -> int:
        return sum(b.num_rows for b in self.scan([], predicates, snapshot))

    def lookup(self, key: Sequence[Any], columns: Sequence[str] | None = None,
               snapshot=None) -> dict | None:
        """One row by its full primary key (routed to its one tablet), or None."""
        key = tuple(key)

        def pick(meta):
            p = meta.partition_schema.partition_index_for_key_values(key)
            return [] if p < 0 else [meta.tablet_ids[p]]

        lease = self.catalog.lease_tablets(self.id, pick)
        meta, slots = lease.metadata, lease.handles
        if not slots:
            return None
        try:
            if columns is not None:
                for c in columns:
                    meta.schema.column(c)
            return _read_row(slots[0], meta.schema, key, columns, snapshot)
        finally:
            lease.release()

    def lookup_now(self, key: Sequence[Any], columns: Sequence[str] | None = None,
                   read_ts: list | None = None):
        """`lookup` (current snapshot) for a caller that must not wait, an event loop: the
        row or None exactly as `lookup` gives them, or NOT_NOW (nothing done) when it would
        open a tablet or wait for a DDL, or the catalog cannot pin a tablet without a
        round trip (a remote one). The metadata is resolved once per table version, not
        per call: the routing and the column check use the version seen last, and
        `TableCatalog.pin_tablet` takes the tablet's reference only if that version is
        still the current one (else it is read again, once). `key`: a tuple.

        `read_ts` (a list): the read is made at one timestamp S, appended to it - the
        tablet's committed watermark less one (`MvccSnapshot.at(S)`: every op <= S has
        committed and is seen, none after it is, not even one committed above an op still
        in flight), never waiting; S is then a row's read precondition for a write of
        what was read (engine/tablet/row_check.py, the wire's key writes). A row changed
        above S is caught by that precondition, but a row written above S where S saw
        none is not: so when no row is seen at S while ops above S have committed (one
        of them may be the client's own acknowledged INSERT of the key), the answer is
        NOT_NOW, not None - the caller reads at the current snapshot instead (the
        ordinary path), and never reports "no such row" for a row its client wrote."""
        cat = self.catalog
        pin = getattr(cat, "pin_tablet", None)
        if pin is None:
            return NOT_NOW
        point = self._point
        slot = None
        for fresh in (False, True):
            if point is None or fresh:
                point = self._point = (self.catalog.table_metadata(self.id), {})
            meta = point[0]
            p, encoded = meta.partition_schema.route_key(key)
            if p < 0:
                if fresh or cat.table_metadata(self.id) is meta:
                    return None     # no partition covers the key (as `lookup`)
                continue
            slot = pin(meta, meta.tablet_ids[p])
            if slot is not None:
                break
        if slot is None:
            return NOT_NOW
        try:
            names = None if columns is None else tuple(columns)
            checked = point[1]
            if names not in checked:
                if names is not None:
                    for c in names:
                        meta.schema.column(c)   # ColumnNotFound, as `lookup` raises it
                checked[names] = True
            if read_ts is None:
                # `_read_row` with its no-rename case in line (a frame per point read)
                ren = slot.renames
                if ren is not None and ren[0] is meta.schema and not ren[1]:
                    return slot.tablet().lookup(key, names, None, encoded)
                return _read_row(slot, meta.schema, key, names, None, encoded)
            # the watermark: every timestamp below it has committed (or aborted), and no
            # op can take one <= it any more (mvcc.py): a snapshot at S needs no wait
            now = slot.tablet().mvcc.take_snapshot()
            s = now.all_committed_before - 1
            row = _read_row(slot, meta.schema, key, names, MvccSnapshot.at(s), encoded)
            if row is None and now.committed:
                return NOT_NOW      # a row committed above S is not seen (docstring)
            read_ts.append(s)
            return row
        finally:
            cat.unpin_tablet(slot)

    def _per_tablet(self, pick, columns: Sequence[str] | None, extra: list[str], read
                    ) -> tuple:
        """(schema, names, parts): `read(tablet, its column names)` on each tablet `pick`
        chooses (in parallel when several), under one lease; names are the key columns and
        `columns` (default all) in the table's current names, and each part's columns are
        renamed from the tablet's (an older schema's) names to them, `extra` kept."""
        lease = self.catalog.lease_tablets(self.id, pick)
        meta, slots = lease.metadata, lease.handles
        try:
            tablets = self._open(slots)
            schema = meta.schema
            names = list(columns) if columns is not None else schema.names
            for c in names:
                schema.column(c)
            names = [k for k in schema.key_names if k not in names] + names

            def one(slot_t):
                slot, t = slot_t
                ren = slot.column_renames(schema) or {}
                out = read(t, [ren.get(c, c) for c in names])
                return out.rename_columns(names + extra) if ren else out
            pairs = list(zip(slots, tablets))
            parts = list(self.catalog.executor.map(one, pairs)) if len(pairs) > 1 else [
                one(p) for p in pairs]
        finally:
            lease.release()
        return schema, names, parts

    def diff_scan(self, start_ts: int, end_ts: int,
                  columns: Sequence[str] | None = None) -> pa.Table:
        """Rows changed in (start_ts, end_ts] on every tablet, with `is_deleted`."""
        schema, names, parts = self._per_tablet(
            lambda m: m.tablet_ids, columns, ["is_deleted"],
            lambda t, cols: t.diff_scan(start_ts, end_ts, cols))
        out_schema = schema.arrow_schema(names).append(pa.field("is_deleted", pa.bool_()))
        if not parts:
            return out_schema.empty_table()
        return pa.concat_tables([p.cast(out_schema) for p in parts])

    def changes(self, start_ts: int, end_ts: int, columns: Sequence[str] | None = None,
                partitions: Sequence[int] | None = None, retained: bool = False
                ) -> pa.Table:
        """Every committed change in (start_ts, end_ts] (Tablet.changes): the key columns
        and `columns` (default all) as each commit left the row, `is_deleted`, `commit_ts`;
        in commit order per tablet (a key lives in one tablet, so per key). `partitions`:
        only these partition indexes (one change-stream partition per tablet). Local and
        remote tablets alike (a cluster's tablet servers answer the "changes" RPC).
        start_ts below a tablet's ancient history mark raises SnapshotTooOld: the history
        before it may be gone, and a change feed must not skip changes silently; with
        `retained` (a feed's "earliest") each tablet starts at its mark instead."""
        want = None if partitions is None else {int(i) for i in partitions}

        def pick(meta):
            return [tid for i, tid in enumerate(meta.tablet_ids)
                    if want is None or i in want]
        schema, names, parts = self._per_tablet(
            pick, columns, ["is_deleted", "commit_ts"],
            lambda t, cols: t.changes(start_ts, end_ts, cols, retained))
        out_schema = (schema.arrow_schema(names).append(pa.field("is_deleted", pa.bool_()))
                      .append(pa.field("commit_ts", pa.int64())))
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return out_schema.empty_table()
        return pa.concat_tables([p.cast(out_schema) for p in parts])

    def ancient_history_mark(self) -> int:
        """The largest ancient history mark of the table's tablets: the oldest timestamp a
        snapshot read, diff scan or change feed of the whole table may start at."""
        lease = self.catalog.lease_tablets(self.id, lambda m: m.tablet_ids)
        try:
            return max((t.ancient_history_mark() for t in self._open(lease.handles)),
                       default=0)
        finally:
            lease.release()


def _tablet_rows(meta, slot, table: pa.Table, idx) -> pa.Table:
    """A tablet's share of a write: rows `idx` of `table` (all of them as they are) under
    the tablet's column names (`column_renames`, where RENAME COLUMN has not reached
    it): what every strategy hands the tablet behind `slot`."""
    sub = table.take(pa.array(idx)) if len(idx) != table.num_rows else table
    ren = slot.column_renames(meta.schema)
    if ren:
        sub = sub.rename_columns([ren.get(c, c) for c in sub.column_names])
    return sub


def _row_key(meta, table: pa.Table, i: int) -> tuple:
    """Row i's primary key as Python values (an error report's key)."""
    return tuple(table.column(k)[i].as_py() for k in meta.schema.key_names)


def _read_row(slot, schema, key: tuple, columns, snapshot=None, encoded=None
              ) -> dict | None:
    """The row of `key` in the tablet behind `slot` (a held lease or pin), by the table
    schema's column names (`columns`, None for all): the tablet's own names where a
    rename has not reached it (`column_renames`), mapped back; or None. `encoded`: the
    key's encoding if routing made it (`PartitionSchema.route_key`)."""
    t = slot.tablet()
    ren = slot.column_renames(schema)
    if not ren:
        return t.lookup(key, columns, snapshot, encoded)
    names = list(columns) if columns is not None else schema.names
    row = t.lookup(key, [ren.get(c, c) for c in names], snapshot, encoded)
    return None if row is None else {c: row[ren.get(c, c)] for c in names}
