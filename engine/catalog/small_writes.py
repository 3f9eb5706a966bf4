"""Small writes of a Table: up to SMALL_MAX_ROWS rows of plain values, routed row by row.

`Table.write` (table.py) calls `write_small(table, ops, rows)` first for every write that
is not in-order; it returns None, having done nothing, when the write is not for this
path. Rows are routed one by one on their keys as given (which must be plain Python
values of the key columns' types: engine/tablet/small_write.py), as `Table.lookup` routes
(`PartitionSchema.partition_index_for_key_values`), and each tablet's share is prepared
(`Tablet.prepare_small`: values checked and converted, the compact WAL record built)
before any is applied (`Tablet.apply_small_deferred`), so a write goes the small way or
the general way as a whole and outcomes never depend on the path. No coalescer, no
thread-pool hop for one tablet; the fsyncs of several tablets are waited for together
(`Table._finish_all`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from engine import errors
from engine.tablet.small_write import SMALL_MAX_ROWS, Ineligible, value_converter
from engine.tablet.write_op import OpType, RowError


def write_small(self, ops, rows):
    """`self` (a Table) writes `rows` on the small-write path (module docstring):
    (timestamp, rows applied, row errors, tablet timestamps), the fields of a
    TableWriteResult, or None, having done nothing. If an ALTER TABLE switched a tablet's schema
    between prepare and apply, that share is written the general way (`_share`)."""
    if isinstance(rows, (pa.Table, pa.RecordBatch)):
        n = rows.num_rows
        if not 0 < n <= SMALL_MAX_ROWS:
            return None
        columns = list(rows.schema.names)
        try:
            values = list(zip(*[c.to_pylist() for c in rows.columns]))
        except OverflowError:   # a date / timestamp past Python's year 9999: the general way
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
    if np.isscalar(ops) or isinstance(ops, OpType):
        op_list = [int(ops)] * n
    else:
        op_list = [int(o) for o in ops]
        if len(op_list) != n:
            return None
    state: dict = {}

    def pick(meta):
        schema = meta.schema
        cached = self._small_keys
        if cached is None or cached[0] is not schema:
            cached = self._small_keys = (schema, [value_converter(k)
                                                  for k in schema.key_columns])
        key_names = schema.key_names
        try:
            pos = [columns.index(k) for k in key_names]
        except ValueError:
            raise Ineligible from None
        convs = cached[1]
        ps = meta.partition_schema
        groups: dict[int, list[int]] = {}
        for i, row in enumerate(values):   # a few rows (SMALL_MAX_ROWS)
            key = []
            for j, conv in zip(pos, convs):
                v = row[j]
                conv(v)                       # Ineligible unless plain and valid
                key.append(v)
            try:
                p = ps.partition_index_for_key_values(key)
            except errors.EngineError:
                raise Ineligible from None
            if p < 0:
                raise Ineligible            # NO_PARTITION: the general path reports it
            groups.setdefault(p, []).append(i)
        state["groups"] = list(groups.values())
        return [meta.tablet_ids[p] for p in groups]

    try:
        lease = self.catalog.lease_tablets(self.id, pick)
    except Ineligible:
        return None
    meta, slots = lease.metadata, lease.handles
    pending = []
    try:
        shares = []
        for slot, idx in zip(slots, state["groups"]):
            t = slot.tablet()
            ren = slot.column_renames(meta.schema)
            prep = getattr(t, "prepare_small", None)
            prepared = None if prep is None else prep(
                [op_list[i] for i in idx], [ren.get(c, c) for c in columns]
                if ren else columns, [values[i] for i in idx])
            if prepared is None:        # not for the small path: all goes generally
                return None
            shares.append((slot, idx, t, prepared, ren))
        try:
            for slot, idx, t, prepared, ren in shares:
                finish = t.apply_small_deferred(prepared)
                if finish is None:      # an ALTER TABLE meanwhile: this share
                    finish = t.write_deferred(   # the general way (a rare race)
                        np.asarray([op_list[i] for i in idx], dtype=np.int8),
                        _share(rows, columns, values, idx, ren))
                pending.append((slot, idx, finish))
        finally:
            results = self._finish_all([f for _, _, f in pending])
    finally:
        lease.release()
    errs: list[RowError] = []
    stamps: dict[str, int] = {}
    applied = 0
    for (slot, idx, _), r in zip(pending, results):
        applied += r.num_applied
        stamps[slot.tablet_id] = r.timestamp
        errs.extend(dataclasses.replace(e, index=idx[e.index]) for e in r.row_errors)
    errs.sort(key=lambda e: e.index)
    return (max(stamps.values(), default=0), applied, errs, stamps)

def _share(rows, columns, values, idx, ren):
    """Rows `idx` of a small write for one tablet's general `write_deferred`: Arrow
    rows as Arrow (their types decide the conversion), else a dict of lists."""
    names = [ren.get(c, c) for c in columns] if ren else columns
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    if isinstance(rows, pa.Table):
        return rows.take(pa.array(idx, type=pa.int64())).rename_columns(names)
    return {c: [values[i][j] for i in idx] for j, c in enumerate(names)}

