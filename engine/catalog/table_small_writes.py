"""Small writes of a Table: up to SMALL_MAX_ROWS rows of plain values, routed row by row.

`Table.write` (table.py) asks its `SmallWrites` first for every write that is not
in-order; `write` returns None, having done nothing, when the write is not for this path.
It is a strategy of the Table's one write pipeline (write_pipeline.py): its route and
apply run inside `Table.run_write_deferred`, except that a one-row dict write to one open
tablet (every front end's key write and single-row insert) does the same steps in line
(`SmallWrites._write_one`: pin, the tablet's one-row `write_one` (prepare and apply in
one call), a finisher that waits, unpins and merges;
`write`, which waits at once, runs the tablet's finisher itself and makes no finisher of
its own) to spare the pipeline's closures. Rows are routed one by one on their keys as
given (which must be plain Python values of the key columns' types:
engine/tablet/small_write.py), as `Table.lookup` routes (`PartitionSchema.route_key`,
whose encoding of the whole key is handed to the tablet, which then does not encode it
again; a one-row write makes no group dict), and each tablet's share is prepared
(`Tablet.prepare_small`: values checked and converted, the compact WAL record built)
before any is applied (`Tablet.apply_small_deferred`), so a write goes the small way or
the general way as a whole and outcomes never depend on the path. No coalescer, no
thread-pool hop for one tablet; the fsyncs of several tablets are waited for together
(`Table.finish_all`). `write_deferred` stops before that wait and returns the call that
makes it (`Table.run_write_deferred`): the wire server applies a key write on its event
loop and waits for the fsync on its WAL sync thread (wire/server.py `WalSync`); the
one-row call carries the WAL position it waits for (`durable_at`, Tablet.finish_op), so
those threads wait once per WAL for a whole batch of writes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine import errors
from engine.catalog.write_pipeline import (
    Routed,
    TableWriteResult,
    carry_durable_at,
    merge_results,
)
from engine.tablet.small_write import SMALL_MAX_ROWS, Ineligible, value_converter
from engine.tablet.tablet_write import BUSY
from engine.tablet.write_op import OpType


class SmallWrites:
    """The small-write strategy of one Table (module docstring): `write(ops, rows)` is a
    TableWriteResult, or None having done nothing. It runs the Table's write pipeline
    (`Table.run_write`) with its own route (row by row on the keys as given) and apply
    (prepare every share, then apply each); it keeps the key converters of the current
    schema."""

    def __init__(self, table) -> None:
        self.table = table
        # (schema, column list, [(key column's position, its converter)]): `_key_convs`
        self._keys: tuple | None = None

    def _key_convs(self, schema, columns: list) -> list:
        """Each key column's position in `columns` and its value converter, in key order,
        cached for the last (schema, column list); Ineligible when a key column is not
        written (the general path reports that)."""
        cached = self._keys
        if cached is None or cached[0] is not schema or cached[1] != columns:
            try:
                pos = [columns.index(k) for k in schema.key_names]
            except ValueError:
                raise Ineligible from None
            cached = self._keys = (schema, columns, list(zip(
                pos, [value_converter(k) for k in schema.key_columns])))
        return cached[2]

    def write(self, ops, rows):
        """`Table.write` of `rows` on the small-write path, or None (nothing done). If an
        ALTER TABLE switched a tablet's schema between prepare and apply, that share is
        written the general way (`_share`)."""
        if type(rows) is dict and (type(ops) is OpType or type(ops) is int):
            done = self._write_one(ops, rows, False, True)   # waits: no finisher made
            if done is not _GENERAL:
                return done
        finish = self.write_deferred(ops, rows)
        return None if finish is None else finish()

    def write_deferred(self, ops, rows, never_block: bool = False):
        """`write` up to its wait for durability: None, having done nothing, or - the rows
        applied, not yet visible - the call that waits for the tablets' WAL fsyncs,
        commits, releases the tablets and returns the TableWriteResult. It must be called
        exactly once, soon, and may be called on another thread. `never_block` (a caller
        on an event loop): None, having done nothing, when the first tablet is busy
        (memory back-pressure, its write lock held by maintenance) rather than wait."""
        if type(rows) is dict and (type(ops) is OpType or type(ops) is int):
            done = self._write_one(ops, rows, never_block)   # one row, one pinned tablet
            if done is not _GENERAL:
                return done
        if isinstance(rows, (pa.Table, pa.RecordBatch)):
            n = rows.num_rows
            if not 0 < n <= SMALL_MAX_ROWS:
                return None
            columns = list(rows.schema.names)
            try:
                values = list(zip(*[c.to_pylist() for c in rows.columns]))
            except OverflowError:  # a date / timestamp past Python's year 9999: general
                return None
        elif isinstance(rows, dict) and rows:
            columns = list(rows)
            cols = [list(v) for v in rows.values()]
            n = len(cols[0])
            if not 0 < n <= SMALL_MAX_ROWS or any(len(c) != n for c in cols):
                return None
            values = list(zip(*cols))
        else:
            return None
        if isinstance(ops, OpType) or np.isscalar(ops):   # the enum first: cheaper
            op_list = [int(ops)] * n
        else:
            op_list = [int(o) for o in ops]
            if len(op_list) != n:
                return None
        table = self.table
        keys: list = []          # each row's key encoded by routing (None: not encoded)

        def route(meta) -> Routed:
            key_convs = self._key_convs(meta.schema, columns)
            route_key = meta.partition_schema.route_key
            keys.clear()
            try:
                if n == 1:                       # one row: one group, no dict
                    p, enc = route_key(_key(values[0], key_convs))
                    if p < 0:
                        raise Ineligible   # NO_PARTITION: the general path reports it
                    keys.append(enc)
                    return Routed([(p, _ONE)], [])
                groups: dict[int, list[int]] = {}
                for i, row in enumerate(values):   # a few rows (SMALL_MAX_ROWS)
                    p, enc = route_key(_key(row, key_convs))
                    if p < 0:
                        raise Ineligible
                    keys.append(enc)
                    groups.setdefault(p, []).append(i)
            except errors.EngineError:  # a key routing cannot take: the general path's
                raise Ineligible from None
            return Routed(list(groups.items()), [])

        def apply(meta, shares):
            """Every share prepared, then each applied: [(handle, rows, finisher)]."""
            prepared = []
            one = n == 1
            for slot, idx in shares:         # every share is prepared before any applies
                t = slot.tablet()
                ren = slot.column_renames(meta.schema)
                prep = getattr(t, "prepare_small", None)
                if prep is None:             # not for the small path: all goes generally
                    raise Ineligible
                names = [ren.get(c, c) for c in columns] if ren else columns
                if one:
                    p = prep(op_list, names, values, None if keys[0] is None else keys)
                else:
                    share_keys = [keys[i] for i in idx]
                    p = prep([op_list[i] for i in idx], names, [values[i] for i in idx],
                             None if None in share_keys else share_keys)
                if p is None:
                    raise Ineligible
                prepared.append((slot, idx, t, p, ren))
            pending = []
            try:
                for k, (slot, idx, t, p, ren) in enumerate(prepared):
                    # never_block declines only before anything is applied: a later
                    # tablet of a multi-tablet write is waited for
                    finish = t.apply_small_deferred(p, never_block=never_block and k == 0)
                    if finish is BUSY:
                        raise Ineligible
                    if finish is None:       # an ALTER TABLE meanwhile: this share
                        finish = t.write_deferred(   # the general way (a rare race)
                            np.asarray([op_list[i] for i in idx], dtype=np.int8),
                            _share(rows, columns, values, idx, ren))
                    pending.append((slot, idx, finish))
            except BaseException:
                table.finish_all([f for _, _, f in pending])   # what was applied commits
                raise
            return pending, []
        try:
            return table.run_write_deferred(route, apply)
        except Ineligible:
            return None

    def _write_one(self, op, rows: dict, never_block: bool, wait: bool = False):
        """`write_deferred` of a one-row dict of one-element lists routed to one open
        tablet: the write pipeline's steps (`Table.run_write_deferred`: hold, prepare and
        apply the share, a finisher that waits, releases and merges) done in line, with
        no route / apply closures, `Routed` or row lists - the key write and the
        single-row insert of every front end are this. The tablet's part is
        `Tablet.write_one`: `prepare_small` and `apply_small_deferred` in one call, the
        same checks and apply as any small write's (where each row's key state is
        decided: small_write.py `apply_small`). Returns what
        `write_deferred` returns, or _GENERAL, having done nothing, for anything else
        (more rows, a catalog without pins, a tablet not open, a DDL under way), which
        the general small route then takes. `wait` (`write`, which waits at once): the
        TableWriteResult itself, the tablet's finisher run here, with no finisher of
        the table's made around it."""
        columns = []
        row = []
        for c, v in rows.items():    # a loop per column: one row of a few values
            if (type(v) is not list and type(v) is not tuple) or len(v) != 1:
                return _GENERAL
            columns.append(c)
            row.append(v[0])
        if not columns:
            return _GENERAL
        table = self.table
        meta = table.metadata
        schema = meta.schema
        try:
            part, enc = meta.partition_schema.route_key(
                _key(row, self._key_convs(schema, columns)))
        except (Ineligible, errors.EngineError):   # the general path's, as route's
            return None
        if part < 0:
            return None                  # NO_PARTITION: the general path reports it
        slot = table.pin_partition(meta, part)
        if slot is None:
            return _GENERAL
        unpin = table.unpin
        try:
            t = slot.tablet()
            one = getattr(t, "write_one", None)
            ren = slot.column_renames(schema)
            names = tuple([ren.get(c, c) for c in columns] if ren else columns)
            # None: not for the small path, or an ALTER TABLE switched the tablet's
            # schema meanwhile (rare); either way nothing was done and the general path
            # writes the row
            fin = None if one is None else one(int(op), names, row, enc, never_block)
            if fin is None or fin is BUSY:
                unpin(slot)
                return None
        except BaseException:
            unpin(slot)
            raise
        if wait:
            try:
                r = fin()
            finally:
                unpin(slot)
            if not r.row_errors:    # merge_results of one tablet's clean result
                return TableWriteResult(r.timestamp, r.num_applied, [],
                                        {slot.tablet_id: r.timestamp})
            return merge_results([(slot, _ONE, r)], [])

        def finish():
            try:
                r = fin()
            finally:
                unpin(slot)
            return merge_results([(slot, _ONE, r)], [])
        return carry_durable_at(finish, fin)


_ONE = (0,)      # the row indexes of a one-row write's one share
_GENERAL = object()   # `_write_one`: nothing done, not its case


def _key(row, key_convs) -> list:
    """A row's key values in key order, each checked by its column's converter
    (Ineligible unless a plain value of the column's type: small_write.py)."""
    key = []
    for j, conv in key_convs:
        v = row[j]
        conv(v)
        key.append(v)
    return key


def _share(rows, columns, values, idx, ren):
    """Rows `idx` of a small write for one tablet's general `write_deferred`: Arrow
    rows as Arrow (their types decide the conversion), else a dict of lists."""
    names = [ren.get(c, c) for c in columns] if ren else columns
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    if isinstance(rows, pa.Table):
        return rows.take(pa.array(idx, type=pa.int64())).rename_columns(names)
    return {c: [values[i][j] for i in idx] for j, c in enumerate(names)}

