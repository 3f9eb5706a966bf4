"""The small-write path: an op of a few rows of plain Python values, applied row by row.

A single-row INSERT or UPDATE through the general path (`Tablet.apply`: Arrow columns,
vectorised conversion, key encoding, rounds of numpy lookups, an Arrow IPC WAL record)
pays ~0.5 ms of fixed cost in dozens of numpy / pyarrow calls, whatever the row count.
For a few rows, plain Python is cheaper: each value is checked and converted on its own,
each key encoded by the tablet's compiled key encoder and probed in the stores' key
indexes directly (`MemRowSet.find_one`, the rowset tree and `DiskRowSet.find_key`), and
the op is logged as a compact record (write_op.py `encode_small`).

Same outcomes as the general path, by construction and by test
(tests/engine/test_small_write.py runs random small ops through both paths):

- `convert_rows` takes only values whose conversion is unambiguous and cannot fail:
  `int` in the column's range for integer columns, `float` for DOUBLE, `bool` for BOOL,
  `str` (at most n characters for VARCHAR(n)) for strings, `bytes` for BINARY,
  `datetime.date` for DATE, a naive `datetime.datetime` for TIMESTAMP, a `Decimal` that
  fits exactly for DECIMAL(p <= 18), None for a nullable non-key column. Anything else
  (another type that SQL's or Arrow's casts might accept or reject, a NULL key or NULL in
  a NOT NULL column, a missing NOT NULL column, a value too long, a key repeated in the
  op) raises `Ineligible`, and the caller writes the op the general way, which reports
  exactly what it always did. So every per-row error this path itself reports is a
  key-state one: ALREADY_PRESENT or NOT_FOUND.
- `apply_small` decides each row as `RowOps._apply_round` does (keys are distinct, so
  there is one round, seq 0): INSERT of a live key is ALREADY_PRESENT; of a key dead in
  the active MemRowSet a REINSERT there; else a new MemRowSet row. UPDATE / DELETE of a
  key not live is NOT_FOUND; else a delta in the store holding the live version (active
  MemRowSet, a frozen one being flushed, or a DiskRowSet's DeltaMemStore). UPSERT is
  UPDATE of the given columns if live, else INSERT.
- No Arrow or numpy call per row: a mutation (UPDATE, DELETE, REINSERT) is a row record
  of plain values in the DeltaMemStore of the store holding the row
  (`DeltaMemStore.append_row`), a new row a tuple on the MemRowSet's tail
  (`MemRowSet.insert_row`); both become Arrow only when a reader needs it (their
  modules' docstrings). `SmallLayout` holds what this needs of a schema (physical
  types, defaults, sizes), computed once per schema.
- Timestamp, WAL append, MVCC start / commit and durability are those of
  `Tablet.apply_deferred` (tablet_write.py `apply_small_deferred`), and WAL replay of a
  compact record goes through the general `apply` like any other record: its decoded
  rows are what the general path would have logged, and its rows are at seq 0 either
  way, so replay sees the same op.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from typing import Sequence

import pyarrow as pa

from engine.convert import default_array
from engine.schema import ColumnSchema
from engine.tablet.delta import MutationKind
from engine.tablet.row_check import changed_since, row_error
from engine.tablet.tablet_metadata import TabletComponents
from engine.tablet.write_op import OpType, RowErrorCode, encode_small_head
from engine.types import INTEGER_RANGES, DataType

SMALL_MAX_ROWS = 8          # ops of at most this many rows may take the small path
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_US = _dt.timedelta(microseconds=1)
_DELETE = int(OpType.DELETE)
_INSERT = int(OpType.INSERT)
_UPSERT = int(OpType.UPSERT)
_UPDATE = int(OpType.UPDATE)
_MUPDATE = int(MutationKind.UPDATE)
_MDELETE = int(MutationKind.DELETE)
_REINSERT = int(MutationKind.REINSERT)


class Ineligible(Exception):
    """The op is not for the small path (see the module docstring): write it generally."""


def value_converter(col: ColumnSchema):
    """A function: logical Python value -> physical Python value for `col`, raising
    Ineligible for anything whose conversion is not certain (module docstring)."""
    t = col.type
    nullable = col.nullable

    def null():
        if not nullable:
            raise Ineligible
        return None

    if t in INTEGER_RANGES:
        lo, hi = INTEGER_RANGES[t]

        def conv(v):
            if type(v) is int and lo <= v <= hi:
                return v
            return null() if v is None else _no()
    elif t is DataType.DOUBLE:
        def conv(v):
            if type(v) is float:
                return v
            return null() if v is None else _no()
    elif t is DataType.BOOL:
        def conv(v):
            if type(v) is bool:
                return v
            return null() if v is None else _no()
    elif t in (DataType.STRING, DataType.VARCHAR):
        limit = col.length if t is DataType.VARCHAR else None

        def conv(v):
            if type(v) is str and (limit is None or len(v) <= limit):
                try:
                    return v.encode("utf-8")
                except UnicodeEncodeError:
                    raise Ineligible from None
            return null() if v is None else _no()
    elif t is DataType.BINARY:
        def conv(v):
            if type(v) is bytes:
                return v
            return null() if v is None else _no()
    elif t is DataType.DATE:
        def conv(v):
            if type(v) is _dt.date:
                return v.toordinal() - _EPOCH_ORDINAL
            return null() if v is None else _no()
    elif t is DataType.TIMESTAMP:
        def conv(v):
            if type(v) is _dt.datetime and v.tzinfo is None:
                return (v - _EPOCH) // _US
            return null() if v is None else _no()
    elif t is DataType.DECIMAL and col.precision <= 18:
        scale, bound = col.scale, 10 ** col.precision
        ctx = decimal.Context(prec=80)

        def conv(v):
            if type(v) is decimal.Decimal and v.is_finite():
                u = ctx.scaleb(v, scale)
                if u == u.to_integral_value() and -bound < u < bound:
                    return int(u)
                raise Ineligible
            return null() if v is None else _no()
    else:                       # FLOAT (float32 rounding), DECIMAL(p > 18): general path
        def conv(v):
            raise Ineligible
    return conv


def _no():
    raise Ineligible


class SmallPlan:
    """What checking and applying an op needs of the columns it names, for one schema:
    computed once per (schema, column names) and kept by the tablet (`small_plan`), so a
    single-row write does not look its columns up, find its key columns or scan the
    schema for NOT NULL columns it lacks every time."""

    __slots__ = ("schema", "columns", "convs", "key_pos", "inserts_ok", "present",
                 "new_row", "reinsert", "head")

    def __init__(self, schema, layout: SmallLayout, columns: tuple, converters: dict
                 ) -> None:
        try:
            cols = [schema.column(n) for n in columns]
        except Exception:      # an unknown column: the general path raises its error
            raise Ineligible from None
        given = {c.id: i for i, c in enumerate(cols)}
        if len(given) != len(cols):          # a column named twice: the general path's
            raise Ineligible
        key_cols = schema.key_columns
        if any(k.id not in given for k in key_cols):
            raise Ineligible
        self.schema = schema
        self.columns = columns
        self.convs = [converters[c.id] for c in cols]
        self.key_pos = [given[k.id] for k in key_cols]
        # an INSERT / UPSERT lacking a NOT NULL column without default: the general path
        self.inserts_ok = all(c.id in given or c.nullable or c.default is not None
                              for c in schema.columns)
        # an UPDATE's (an UPSERT of a live key's) values: (column id, position given)
        self.present = [(c.id, given[c.id]) for c in schema.non_key_columns
                        if c.id in given]
        # a new row's values in schema order: (position given, or -1 and the default)
        self.new_row = [(given.get(cid, -1), d) for cid, d in layout.order]
        # a REINSERT's values (every non-key column): (column id, position given or -1,
        # default)
        self.reinsert = [(cid, given.get(cid, -1), d) for cid, d in layout.defaults.items()]
        self.head = encode_small_head(columns)   # the compact WAL body's column part


class SmallRows:
    """An op's rows converted for the small path (`convert_rows`)."""

    __slots__ = ("ops", "keys", "key_values", "plan", "phys")

    def __init__(self, ops, keys, key_values, plan, phys):
        self.ops = ops                  # int op type per row
        self.keys = keys                # encoded key per row (distinct)
        self.key_values = key_values    # the key as given (Python values) per row
        self.plan = plan                # the SmallPlan of the op's columns
        self.phys = phys                # physical Python values per row, given columns


def convert_rows(ops: Sequence[int], rows: Sequence[Sequence], plan: SmallPlan,
                 encode_key, keys: Sequence[bytes] | None = None) -> SmallRows:
    """Check and convert an op's rows (values in `plan.columns` order) for `apply_small`;
    Ineligible if the general path must take it. `keys`: each row's key already encoded
    by the tablet's key encoder (`PartitionSchema.route_key` made them routing), else
    they are encoded here."""
    if not plan.inserts_ok and (_INSERT in ops or _UPSERT in ops):
        raise Ineligible
    convs = plan.convs
    key_pos = plan.key_pos
    key_values, phys = [], []
    for row in rows:   # a loop per value: a few rows (SMALL_MAX_ROWS)
        # every value, a DELETE's too: the general path ignores a DELETE's other values
        # given as Arrow, but reports them given as a dict; eligible values are never
        # reported, so requiring them leaves no case where the two could differ
        if len(row) != len(convs):
            raise Ineligible
        phys.append([f(v) for f, v in zip(convs, row)])
        kv = tuple([row[i] for i in key_pos])
        if None in kv:
            raise Ineligible
        key_values.append(kv)
    if keys is None:
        keys = [encode_key(kv) for kv in key_values]
    if len(keys) > 1 and len(set(keys)) != len(keys):
        raise Ineligible       # rounds, seq numbers: the general path's business
    return SmallRows(ops, keys, key_values, plan, phys)


class SmallLayout:
    """What `apply_small` needs of one schema, computed once per schema (the tablet keeps
    the current one): each column's physical Arrow type by id, each non-key column's
    default as a physical Python value, and the fixed byte width of each fixed-width
    column (for the stores' `nbytes`, as Arrow would count the record)."""

    __slots__ = ("schema", "types", "defaults", "widths", "order")

    def __init__(self, schema) -> None:
        self.schema = schema
        self.types = {c.id: c.physical_type for c in schema.columns}
        key_ids = {c.id for c in schema.key_columns}
        self.defaults = {c.id: default_array(c, 1)[0].as_py() for c in schema.columns
                         if c.id not in key_ids}
        self.widths = {cid: None if pa.types.is_binary(t) else max(1, t.bit_width // 8)
                       for cid, t in self.types.items()}
        # (column id, default physical value) in schema order: a new row's values
        self.order = [(c.id, self.defaults.get(c.id)) for c in schema.columns]

    def row_bytes(self, values: tuple) -> int:
        """A new row's bytes (its values in schema order) as Arrow would count them."""
        n = 0
        for (cid, _), v in zip(self.order, values):
            w = self.widths[cid]
            n += w if w is not None else 4 + (len(v) if v is not None else 0)
        return n

    def record_bytes(self, values: dict | None) -> int:
        """A record's bytes as `DeltaBatch.nbytes` counts them (25 + mask + values)."""
        n = 25
        if values:
            widths = self.widths
            for cid, v in values.items():
                w = widths[cid]
                n += 1 + (w if w is not None else 4 + (len(v) if v is not None else 0))
        return n


def apply_small(comps: TabletComponents, layout: SmallLayout, rows: SmallRows, ts: int,
                read_ts: list | None = None) -> tuple[int, dict]:
    """Apply converted rows to the stores (caller holds the write lock, has taken `ts` and
    logged the op): (rows applied, {row: (code, message)} for the others). Mutations go
    to the stores as row records of plain values (`DeltaMemStore.append_row`): no Arrow
    or numpy call per row; new rows go to the MemRowSet's tail as plain values
    (`MemRowSet.insert_row`), Arrow only once a reader needs it. `read_ts`: each row's
    read precondition (row_check.py), or None: an UPDATE / DELETE whose row changed
    since is CHANGED (NOT_FOUND if deleted since), as `RowOps._check_reads` decides it."""
    mrs = comps.mrs
    frozen = comps.frozen
    drss = comps.drss
    types = layout.types
    bad: dict[int, tuple[str, str]] = {}
    applied = 0
    new_rows: list[int] = []
    plan = rows.plan
    present = plan.present
    for i, (op, key) in enumerate(zip(rows.ops, rows.keys)):   # a few rows (module doc)
        # where the key is live: the active MemRowSet, a frozen one, or a DiskRowSet
        rid = mrs.find_one(key)
        target = None                       # (store, rowid, kind) of the live version
        if rid >= 0 and mrs.latest_live_one(rid):
            target = (mrs, rid, 1)
        else:
            for fz in frozen:
                r = fz.find_one(key)
                if r >= 0 and fz.latest_live_one(r):
                    target = (fz, r, 2)
                    break
            if target is None and drss:
                for drs in comps.tree.containing(key):
                    r = drs.find_key(key)
                    if r >= 0 and not drs.latest_dead()[r]:
                        target = (drs, r, 3)
                        break
        if op == _INSERT or (op == _UPSERT and target is None):
            if target is not None:
                bad[i] = (RowErrorCode.ALREADY_PRESENT.value, "key already present")
                continue
            if rid >= 0:                     # dead in the active MemRowSet: REINSERT
                phys = rows.phys[i]
                values = {cid: (phys[j] if j >= 0 else d) for cid, j, d in plan.reinsert}
                mrs.append_mutation_row(rid, ts, _REINSERT, values, types,
                                        layout.record_bytes(values), True)
            else:
                new_rows.append(i)
            applied += 1
            continue
        if target is None:                   # UPDATE / DELETE of a key not live
            bad[i] = (RowErrorCode.NOT_FOUND.value, "key not found")
            continue
        store, r, kind = target
        if read_ts is not None and op != _UPSERT and read_ts[i] >= 0:
            change = changed_since(store, kind, r, read_ts[i], ts)
            if change:                       # CHANGED, or NOT_FOUND if deleted since
                bad[i] = row_error(change)
                continue
        applied += 1
        if op == _DELETE:
            values = None
            mkind = _MDELETE
            live_after = False
        else:                                # UPDATE, or UPSERT of a live key
            if not present:
                continue
            phys = rows.phys[i]
            values = {cid: phys[j] for cid, j in present}
            mkind = _MUPDATE
            live_after = None
        if kind == 3:
            store.mutate_row(r, ts, mkind, values, types, layout.record_bytes(values))
        else:
            store.append_mutation_row(r, ts, mkind, values, types,
                                      layout.record_bytes(values), live_after)
    if new_rows:             # new rows: plain values on the MemRowSet's tail
        new_row = plan.new_row
        for i in new_rows:
            phys = rows.phys[i]
            values = tuple([phys[j] if j >= 0 else d for j, d in new_row])
            mrs.insert_row(rows.keys[i], values, ts, layout.row_bytes(values))
    return applied, bad
