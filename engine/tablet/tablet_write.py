"""The tablet's write pipeline (Kudu's WriteOp: decode -> start -> apply -> commit).

`TabletWriter` is the write path of one `Tablet`, an object of its own: the tablet makes
one (`tablet.writer`) and its write methods (`t.write(...)`, `t.apply(op, ts, index=i)`,
...) are this object's. What it uses of its tablet is the tablet's public interface,
nothing private (tests/engine/test_tablet_interfaces.py holds that): `schema`, `path`,
`clock`, `mvcc`, `write_lock`, `components`, `mrs_flushed_index`, `admit_write()` /
`admission_would_wait()` (memory back-pressure) and the op phases `start_op(...)` /
`finish_op(...)`. What it derives from the schema for writes (key columns, the small-write
layout and converters) is its own, refreshed by `set_schema` when the tablet's changes.

Write path (`write`): one call is one op with one timestamp. Rows are applied on their own
(Kudu semantics), vectorised in rounds of distinct keys (row_ops.py). Writers are
serialised by the tablet's `write_lock` (Python gives no parallel speed-up here; it also
makes "the latest state" the write path consults well-defined). The op commits in MVCC
before the lock is released, so its effects appear to readers atomically.

Apply (`apply(op, timestamp=None, index=None)`): the one path every write takes. `write`
validates the rows and applies memory back-pressure, then calls `apply(WriteOp)`: the
tablet picks the timestamp (clock, under the write lock, so timestamp order is log order),
appends the op to the WAL, applies it, waits for durability and commits it in MVCC. WAL
replay calls `apply(op, ts, index=i)` with the logged timestamp and index: nothing is
logged again and rows already in flushed files are skipped (tablet_bootstrap.py). A
replicated tablet applies a committed Raft entry the same way, with its leader's
timestamp, so embedded and replicated tablets share one apply path.

Small writes (`prepare_small` + `apply_small_deferred`; `write_small` is both, falling
back to the general path; `write_one` is both for a one-row op, in one call, which a
Table's single-row write uses): an op of at most SMALL_MAX_ROWS rows of plain Python values
skips the Arrow machinery (small_write.py): values converted one by one, keys probed
directly, a compact WAL record (write_op.py); timestamp, WAL append, MVCC and durability
exactly as in `apply_deferred`. An op it cannot
take with certainty of the same outcome is refused (None) before anything is done, and
the caller writes it the general way. Replay and Raft followers apply compact records
through the general `apply` (they decode to the Arrow op the general path would log).

One op pipeline (Kudu's WriteOp: start -> apply -> commit): both apply paths,
`apply_deferred` (Arrow ops: writes, replay, Raft) and `apply_small_deferred` (small
writes), start an op with `Tablet.start_op` under the write lock (timestamp, MVCC start,
WAL append), apply it to the stores their own way (`RowOps.apply` / `apply_small`), and
end it with `Tablet.finish_op` (wait for durability, commit in MVCC, build the result).
The public entry points (insert / upsert / update / delete / write / write_small, and
write_deferred) only validate and convert before reaching one of the two.

Threads: a writer applies its op on its own thread under the write lock (held for the
apply only, never across the fsync) and then waits in `Log.wait_durable`, where
concurrent writers of the tablet share one fsync (group commit: the first waiter syncs
everything appended so far, the others wait for it). No pool hop and no hand-off between
threads on the single-tablet path.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from engine import errors
from engine.convert import cast_column, table_from_pydict
from engine.key_encoding import compile_key_encoder, encode_keys
from engine.schema import Schema
from engine.tablet.row_check import read_ts_values
from engine.tablet.row_ops import RowOps
from engine.tablet.small_write import (
    SMALL_MAX_ROWS,
    Ineligible,
    SmallLayout,
    SmallPlan,
    apply_small,
    convert_rows,
    value_converter,
)
from engine.tablet.write_op import (
    READ_TS_COLUMN,
    OpType,
    RowError,
    RowErrorCode,
    WriteOp,
    WriteResult,
    encode_small,
    encode_small_head,
)
from engine.types import to_physical

# `apply_small_deferred(..., never_block=True)`: the tablet is busy, nothing was done
BUSY = object()


class TabletWriter:
    """The write pipeline of one Tablet (see the module docstring): `Tablet` makes one,
    as `tablet.writer`, and its write methods are this object's."""

    def __init__(self, tablet) -> None:
        # `tablet`: the Tablet (its type is not imported here: tablet.py imports this)
        self._tablet = tablet
        self.small_writes = 0     # ops that took the small-write path
        # Physical -> small-write converters by column id (ids are never reused, so those
        # of every schema the tablet has had can live in one dict).
        self._small_converters: dict[int, Any] = {}
        self._encode_key = compile_key_encoder(tablet.schema.key_columns)
        # compact WAL heads of small writes carrying READ_TS_COLUMN, by column names
        self._read_heads: dict[tuple, bytes] = {}
        # the schema-derived members: set by the tablet's first `set_schema` call

    @property
    def schema(self) -> Schema:
        """The tablet's schema (the one writes are checked and converted against)."""
        return self._tablet.schema

    def set_schema(self, schema: Schema) -> None:
        """What the write path derives from the tablet's schema: called by the tablet
        when its schema is set (at creation; by alter_schema under the write lock)."""
        self._key_cols = schema.key_columns  # same ids and types in every schema; names
        # may change (a catalog RENAME COLUMN reaches the tablet with its next alter)
        self._key_ids = {c.id for c in schema.key_columns}
        self._non_key = list(schema.non_key_columns)
        for c in schema.columns:
            if c.id not in self._small_converters:
                self._small_converters[c.id] = value_converter(c)
        # the small-write path's view of this schema, replaced as one: (schema, layout,
        # {column names: SmallPlan})
        self._small = (schema, SmallLayout(schema), {})

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

    def write_small(self, ops: Sequence[int], columns: Sequence[str],
                    rows: Sequence[Sequence]) -> WriteResult:
        """Write a few rows given as Python values (`rows`: one tuple per row, values in
        `columns` order; `ops`: one OpType per row): the small-write path
        (small_write.py: `prepare_small` then `apply_small_deferred`) when the op is
        eligible, else the general path with the rows as a dict of columns. Same
        outcomes either way."""
        prepared = self.prepare_small(ops, columns, rows)
        finish = None if prepared is None else self.apply_small_deferred(prepared)
        if finish is None:
            finish = self.write_deferred(list(ops), {name: [r[j] for r in rows]
                                                     for j, name in enumerate(columns)})
        return finish()

    def prepare_small(self, ops: Sequence[int], columns: Sequence[str],
                      rows: Sequence[Sequence], keys: Sequence[bytes] | None = None):
        """The first half of a small write, without the lock: the rows checked and
        converted and the compact WAL body built; None, having done nothing, when the op
        is not for the small path (more than SMALL_MAX_ROWS rows, a value whose
        conversion is not certain, a repeated key...: small_write.py), and the caller
        then writes it the general way.
        `Table` prepares every tablet's share before it applies any, so a write goes the
        small way or the general way as a whole. `keys`: the rows' keys encoded by the
        tablet's key encoder, if the caller has them (Table's routing does)."""
        n = len(ops)
        if not 0 < n <= SMALL_MAX_ROWS or len(rows) != n:
            return None
        schema, layout, plans = self._small
        names = tuple(columns)
        all_names, all_rows, read_ts = names, rows, None
        if READ_TS_COLUMN in names:     # a read precondition (row_check.py): not a column
            j = names.index(READ_TS_COLUMN)
            read_ts = [r[j] for r in rows]
            if not all(type(v) is int for v in read_ts):
                return None
            names = names[:j] + names[j + 1:]
            rows = [tuple(r[:j]) + tuple(r[j + 1:]) for r in rows]
        try:
            plan = plans.get(names) or self._small_plan(names)
            conv = convert_rows(ops, rows, plan, self._encode_key, keys)
            if read_ts is None:
                body = encode_small(ops, names, rows, plan.head)
            else:                     # logged with the precondition column
                body = encode_small(ops, all_names, all_rows, self._read_head(all_names))
        except (Ineligible, TypeError, ValueError):
            return None
        return schema, layout, conv, body, read_ts

    def _small_plan(self, names: tuple) -> SmallPlan:
        """The SmallPlan of a column list, made and cached (prepare_small, write_one)."""
        schema, layout, plans = self._small
        if len(plans) > 64:              # many column lists (ad hoc writes): start over
            plans.clear()
        plan = plans[names] = SmallPlan(schema, layout, names, self._small_converters)
        return plan

    def _read_head(self, names: tuple) -> bytes:
        """The compact record head of a column list with the read-precondition column."""
        heads = self._read_heads
        head = heads.get(names)
        if head is None:
            if len(heads) > 64:
                heads.clear()
            head = heads[names] = encode_small_head(names)
        return head

    def write_one(self, op: int, columns: tuple, row: Sequence, key: bytes | None,
                  never_block: bool = False) -> Callable[[], WriteResult] | None:
        """`prepare_small` then `apply_small_deferred` of a one-row op in one call (the
        single-row write every front end's key write and row insert is: `Table`'s
        `SmallWrites._write_one`): the same checks, conversion, compact record and apply,
        without the two-phase hand-over (no op list, row list or prepared tuple). `columns`
        a tuple of names, `row` the values in that order, `key` the row's key encoded by
        the tablet's key encoder (routing made it) or None. Returns what
        `apply_small_deferred` returns: the finisher, BUSY (`never_block`), or None,
        having done nothing, when the op is not for the small path or an ALTER TABLE
        switched the schema meanwhile - the caller then writes it the general way."""
        schema, layout, plans = self._small
        ops = (op,)
        names, values, read_ts = columns, row, None
        if READ_TS_COLUMN in columns:   # a read precondition (row_check.py): not a column
            j = columns.index(READ_TS_COLUMN)
            if type(row[j]) is not int:
                return None
            read_ts = [row[j]]
            names = columns[:j] + columns[j + 1:]
            values = tuple(row[:j]) + tuple(row[j + 1:])
        try:
            plan = plans.get(names) or self._small_plan(names)
            conv = convert_rows(ops, (values,), plan, self._encode_key,
                                None if key is None else (key,))
            if read_ts is None:
                body = encode_small(ops, names, (values,), plan.head)
            else:                     # logged with the precondition column
                body = encode_small(ops, columns, (row,), self._read_head(columns))
        except (Ineligible, TypeError, ValueError):
            return None
        return self._apply_small(schema, layout, conv, body, read_ts, never_block)

    def apply_small_deferred(self, prepared, never_block: bool = False
                             ) -> Callable[[], WriteResult] | None:
        """The second half: as `apply_deferred`, under the write lock the timestamp, the
        WAL append (the compact record) and the stores (small_write.py `apply_small`);
        the returned call waits for durability and commits in MVCC. None, having done
        nothing, if an ALTER TABLE switched the schema since `prepare_small`.
        `never_block` (a caller on an event loop): BUSY, having done nothing, instead of
        sleeping in memory back-pressure (`admit_write`) or waiting for the write lock
        that maintenance holds while it persists metadata."""
        return self._apply_small(*prepared, never_block)

    def _apply_small(self, schema, layout, conv, body, read_ts, never_block: bool
                     ) -> Callable[[], WriteResult] | None:
        """`apply_small_deferred` of a prepared op's parts (`prepare_small`'s tuple)."""
        tablet = self._tablet
        lock = tablet.write_lock
        if never_block:
            if tablet.admission_would_wait() or not lock.acquire(blocking=False):
                return BUSY
        else:
            tablet.admit_write()
            lock.acquire()
        try:
            if tablet.schema is not schema:      # an alter_schema ran since the conversion
                return None
            ts, index = tablet.start_op(None, None, body)
            try:
                applied, bad = apply_small(tablet.components, layout, conv, ts) \
                    if read_ts is None else \
                    apply_small(tablet.components, layout, conv, ts, read_ts)
            except BaseException:
                tablet.mvcc.abort_op(ts)
                raise
        finally:
            lock.release()
        self.small_writes += 1
        if not bad:
            return tablet.finish_op(ts, index, True, WriteResult(ts, applied, []))
        return tablet.finish_op(ts, index, True, lambda: WriteResult(ts, applied, [
            RowError(i, code, msg, conv.key_values[i])
            for i, (code, msg) in sorted(bad.items())]))

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
            if name != READ_TS_COLUMN:      # a read precondition (row_check.py)
                self.schema.index_of(name)  # raises ColumnNotFound
        for c in self._key_cols:
            if c.name not in table.column_names:
                raise errors.InvalidArgument(f"key column {c.name!r} missing from the rows")
        self._tablet.admit_write()
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

    def first_failure(self, op: WriteOp, converted: list | None = None
                      ) -> tuple[int, str, str] | None:
        """(row, code, message) of the first row of `op` that `apply` would reject now, or
        None when every row would apply; changes nothing. INSERT / UPSERT ops only (the
        in-order writes of `Table.write(..., in_order=True)`); the caller holds the write
        lock, so the answer stays true until it applies the op. `converted` (a list):
        when every row would apply, the op's converted values are appended to it, for
        `apply_deferred(op, converted=...)` of the same op under the same lock hold, which
        then does not convert them again.

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
            comps = self._tablet.components
            kind = RowOps(comps, self.schema, self._key_cols, self._non_key,
                          self._tablet.mrs_flushed_index).locate(keys[ins], comps)[0]
            fails = ins[(kind > 0) | repeat[ins]]
            if len(fails):
                return int(fails[0]), RowErrorCode.ALREADY_PRESENT.value, "key already present"
        if first < len(ops):
            return first, *bad[first]
        if converted is not None:
            converted.append((op, self.schema, phys))
        return None

    def apply(self, op: WriteOp, timestamp: int | None = None, *,
              index: int | None = None) -> WriteResult:
        """Apply one write op: the single path of every write (see "Apply" in the module
        docstring). Returns once the op is committed in MVCC (visible to new readers).
        It is `apply_deferred(...)()`; see there for the arguments."""
        return self.apply_deferred(op, timestamp, index=index)()

    def apply_deferred(self, op: WriteOp, timestamp: int | None = None, *,
                       index: int | None = None, converted: tuple | None = None
                       ) -> Callable[[], WriteResult]:
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
        `converted`: what `first_failure(op, converted)` found for this same op object (every
        row converts): its values are used instead of converting them again (the schema
        check above still applies).
        """
        if index is not None and timestamp is None:
            raise errors.InvalidArgument("an op already in the log must come with its timestamp")
        op_arr, table = op.ops, op.rows
        if timestamp is not None:
            self._tablet.clock.update(timestamp)
        schema = self.schema
        bad: dict[int, tuple[str, str]] = {}
        if converted is not None and converted[0] is op and converted[1] is schema:
            phys = converted[2]         # first_failure's: every row converted, none bad
        else:
            phys = self._convert(table, op_arr, bad)
        body = op.encode_for_log() if index is None else None
        with self._tablet.write_lock:
            if self.schema is not schema:  # an alter_schema ran since the conversion
                for name in table.column_names:
                    if name != READ_TS_COLUMN:
                        self.schema.index_of(name)  # raises ColumnNotFound
                bad = {}
                phys = self._convert(table, op_arr, bad)
            replay_index = index
            ts, index = self._tablet.start_op(timestamp, index, body)
            try:
                applied = RowOps(self._tablet.components, self.schema, self._key_cols,
                                 self._non_key, self._tablet.mrs_flushed_index).apply(
                    op_arr, phys, ts, bad, replay_index, read_ts_values(table))
            except BaseException:
                self._tablet.mvcc.abort_op(ts)
                raise

        def result() -> WriteResult:
            errs = []
            if bad:
                key_cols = [table.column(c.name) for c in self._key_cols]
                for i in sorted(bad):
                    code, msg = bad[i]
                    key = tuple(col[i].as_py() for col in key_cols)
                    errs.append(RowError(i, code, msg, key))
            return WriteResult(ts, applied, errs)
        return self._tablet.finish_op(ts, index, replay_index is None, result)

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
