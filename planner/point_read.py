"""Point reads: cached plans that read one row by its full primary key, run without the
optimizer or the executor's operator tree.

A prepared `SELECT v, s FROM kv WHERE k = $1` (or the row-matching query of
`UPDATE kv SET v = v + 1 WHERE k = $1`) executed again with new values is the hot path of an
OLTP client. Planning it again costs far more than the lookup itself, so the plan cache
(planner.plan_cache) compiles such a plan once into a `PointRead`:

    Output(Project(MultiJoin([Scan]) | Filter(Scan) | Scan))
    where the conditions are exactly one equality `key column = constant or parameter` per
    primary-key column, on a catalog table read at the current time.

Contract:
- `PointRead.run(catalog, params)` (through PlanCache.point_result) gives the same rows,
  names and types as optimizing and executing the plan would (the project items are
  evaluated by the executor's own expression evaluator over the 0- or 1-row batch), or
  None when it cannot promise that: a parameter that does not convert losslessly to its
  key column's type (the optimizer would then keep the condition as a residual filter,
  with SQL comparison semantics).
  None means "run the ordinary plan", never "no rows".
- `compile_point_read` returns None for every other plan shape; it never guesses.
- The caller (the plan cache) checks that the table's catalog metadata is unchanged before
  using a PointRead, exactly as for the cached plan it was compiled from; while it is,
  `target` (the table's facade, resolved once at compile time) is that table.
- `now=True` (`run`) and `values` read with `Table.lookup_now`: on an event loop, never
  waiting; a lookup that would wait gives None ("run the ordinary plan") as well.
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pyarrow as pa
from sqlglot import exp

from engine.catalog.table import NOT_NOW
from planner import logical as L
from planner.logical import AvgOf, SubqueryRef
from planner.executor import Executor, as_chunked, empty_rows
from planner.result import PointResult
from planner.expr import (
    Const,
    SubPlan,
    coerce_literal_to,
    param_index,
    param_scalar,
    substitute_params,
)


@dataclasses.dataclass
class _KeyPart:
    column: str
    type: pa.DataType
    param: int | None          # parameter index, or None for a constant
    value: object = None       # the constant (already of the column's type)

    def __post_init__(self):
        t = self.type
        self.is_string = pa.types.is_string(t) or pa.types.is_large_string(t)
        self.bounds = None
        if pa.types.is_integer(t):
            info = np.iinfo(t.to_pandas_dtype())
            self.bounds = (int(info.min), int(info.max))

    def takes(self, v) -> bool:
        """`v` is already this key column's value, with no SQL conversion: a Python int
        in the integer column's range, or a str for a string column."""
        t = type(v)
        if t is int:
            return self.bounds is not None and self.bounds[0] <= v <= self.bounds[1]
        return t is str and self.is_string


@dataclasses.dataclass
class PointRead:
    table: str
    prefix: str                          # the scan's internal key prefix
    key: list[_KeyPart]                  # in primary-key order
    columns: list[str]                   # table columns the items read
    items: list[tuple[str, exp.Expression]]
    names: list[str]
    keys: list[str]
    plain: list[str] | None              # items that are plain columns: their column names
    param_items: bool                    # some item holds a parameter: substitute per run
    schema: pa.Schema                    # of the result (plain) or of the columns read
    # items that are all own columns or bare parameters: (key, column name or None,
    # parameter index or None, result type) each, evaluated without the executor
    direct: list | None = None
    # every item as plain Python (`values`): one `_ValueItem` per item, in `keys` order;
    # None when some item needs the executor
    value_items: list | None = None
    # the table's facade (engine Table) as compile_point_read resolved it: the table while
    # the plan cache finds the entry valid (the same metadata for the name)
    target: object = dataclasses.field(default=None, repr=False, compare=False)
    _makers: list | None = dataclasses.field(default=None, repr=False, compare=False)
    # `PointResult.plain_schema(schema)`, found with `_makers` by `read_plain`
    _plain_schema: bool | None = dataclasses.field(default=None, repr=False, compare=False)

    def facade(self, catalog):
        """The engine Table this point read reads: `target`, or the catalog's facade of
        `self.table` for a PointRead made without one."""
        return self.target if self.target is not None else catalog.table(self.table)

    def key_values(self, params) -> tuple | None:
        out = []
        for part in self.key:
            if part.param is None:
                out.append(part.value)
                continue
            v = params[part.param]
            # the common cases without Arrow (`takes`); anything else converts as the
            # optimizer would
            if part.takes(v):
                out.append(v)
                continue
            s = param_scalar(v)
            if s.type != part.type:
                c = Const(this=s)
                c.meta["param"] = part.param
                k = coerce_literal_to(c, part.type)
                if k is None:
                    return None
                s = k.this
            if not s.is_valid:
                return None        # `k = NULL` matches nothing; the ordinary plan says so
            out.append(s.as_py())
        return tuple(out)

    def plain_key(self, params) -> tuple | None:
        """`key_values` when this reads plain columns (`plain`) and every key parameter
        is a plain value - an int in its integer column's range, a str for a string
        column - so that neither the key nor the result needs SQL's conversions, the
        statement's time or the session's zone; else None (then `key_values`)."""
        if self.plain is None:
            return None
        out = []
        for part in self.key:
            if part.param is None:
                out.append(part.value)
                continue
            v = params[part.param]
            if not part.takes(v):
                return None
            out.append(v)
        return tuple(out)

    def read_plain(self, params):
        """`run(catalog, params, self.target, now=True, key=plain_key(params))` for the
        in-process point read (`Session.execute_point`, `Session.execute`'s cached point
        reads) in one call, as a `PointResult` carrying the row's Python values (its
        table made only when asked for); None when `plain_key` gives None (not plain
        columns, or a key parameter that needs SQL's conversions: the caller takes the
        general path), or NOT_NOW when the lookup would wait. Its own key loop and column
        list (no `plain_key`, `facade` and `run` layers per call): the same key, lookup
        and rows as that chain."""
        plain = self.plain
        table = self.target
        if plain is None or table is None:
            return None
        key = []
        for part in self.key:      # a loop per key column of one row
            if part.param is None:
                key.append(part.value)
                continue
            v = params[part.param]
            t = type(v)
            if t is int:
                b = part.bounds
                if b is None or not b[0] <= v <= b[1]:
                    return None
            elif t is not str or not part.is_string:
                return None
            key.append(v)
        row = table.lookup_now(tuple(key), self.columns or None)
        if row is NOT_NOW:
            return row
        makers = self._makers
        plain_types = self._plain_schema
        if makers is None or plain_types is None:
            makers = self._makers = [one_value_array(f.type) for f in self.schema]
            plain_types = self._plain_schema = PointResult.plain_schema(self.schema)
        return PointResult(None if row is None else tuple([row[c] for c in plain]),
                           self.schema, makers, plain_types)

    @staticmethod
    def ready(table) -> bool:
        """True when `run` on this table does only in-memory work now (Table.tablets_open)."""
        return getattr(table, "tablets_open", None) is not None and table.tablets_open()

    def run(self, catalog, params, table=None, now: bool = False,
            snapshot: int | None = None, read_ts: list | None = None,
            key: tuple | None = None) -> pa.Table | None:
        """The result for these parameters; `table` is the catalog's facade of `self.table`
        when the caller already has it. `now`: read with `Table.lookup_now` (None when the
        lookup would wait), at the timestamp it appends to `read_ts` when that is a list.
        `snapshot`: read at this timestamp (not with `now`). `key`: `key_values(params)`
        when the caller has it."""
        if key is None:
            key = self.key_values(params)
        if key is None:
            return None
        if table is None:
            table = catalog.table(self.table)
        if now:
            row = table.lookup_now(key, self.columns or None) if read_ts is None else \
                table.lookup_now(key, self.columns or None, read_ts)
            if row is NOT_NOW:
                return None
        else:
            row = table.lookup(key, self.columns or None, snapshot)
        if self.plain is not None:
            if row is None:
                return self.schema.empty_table()
            # Python values -> one Arrow row: one array per column straight from its
            # buffers (`one_value_array`), cheaper than pa.array or from_pylist
            makers = self._makers
            if makers is None:
                makers = self._makers = [one_value_array(f.type) for f in self.schema]
            return pa.Table.from_arrays([m(row[c]) for m, c in zip(makers, self.plain)],
                                        schema=self.schema)
        if self.direct is not None:
            return self._direct(row, params)
        if self.columns:
            batch = pa.Table.from_pylist([] if row is None else [
                {f.name: row[c] for c, f in zip(self.columns, self.schema)}],
                schema=self.schema)
        else:
            batch = empty_rows(0 if row is None else 1)
        ex = Executor(catalog)
        items = self.items
        if self.param_items:
            values = [param_scalar(p) for p in params]
            items = [(k, substitute_params(e, values)) for k, e in items]
        arrays = {k: as_chunked(ex.eval(e, batch), batch.num_rows) for k, e in items}
        return pa.Table.from_arrays([arrays[k] for k in self.keys], names=self.names)

    def values(self, params, table=None, read_ts: list | None = None) -> tuple | None:
        """The result's one row as plain Python values (items in `keys` order), NO_ROW
        when no row matches, or None when this cannot stand in for `run` (items that need
        the executor, parameters that need SQL's conversions, an integer result that
        might overflow: the caller then uses `run`; a lookup that would wait,
        `Table.lookup_now`). No Arrow: the wire's key writes read their matching row this
        way on the event loop (a column, a parameter, a literal, or an integer column plus
        or minus an integer literal: `v = v + 1`). `read_ts`: as `run`'s."""
        items = self.value_items
        if items is None:
            return None
        key = self.key_values(params)
        if key is None:
            return None
        if table is None:
            raise ValueError("PointRead.values needs the table")
        row = table.lookup_now(key, self.columns or None) if read_ts is None else \
            table.lookup_now(key, self.columns or None, read_ts)
        if row is NOT_NOW:
            return None
        if row is None:
            return NO_ROW
        out = []
        for it in items:        # a loop per item of one row
            kind = it.kind
            if kind == _COLUMN:
                out.append(row[it.column])
            elif kind == _PARAM:
                out.append(params[it.param])
            elif kind == _CONST:
                out.append(it.value)
            else:
                v = row[it.column]
                if v is not None:
                    v += it.value
                    if not it.bounds[0] <= v <= it.bounds[1]:
                        return None     # the ordinary plan raises its overflow error
                out.append(v)
        return tuple(out)

    def _direct(self, row: dict | None, params) -> pa.Table:
        """`run`'s result when every item is a column of the row or a bare parameter
        (`direct`): what the executor would give (a column: its value in the row's
        column type; `$n`: the parameter's scalar repeated per row), without building
        the row batch or evaluating expressions."""
        n = 0 if row is None else 1
        makers = self._makers
        if makers is None:
            makers = self._makers = [None if c is None else one_value_array(t)
                                     for _, c, _, t in self.direct]
        arrays = {}
        for (k, col, i, t), make in zip(self.direct, makers):
            if col is not None:
                arrays[k] = make(row[col]) if n else pa.array([], t)
            else:
                arrays[k] = pa.repeat(param_scalar(params[i]), n)
        return pa.Table.from_arrays([arrays[k] for k in self.keys], names=self.names)


NO_ROW = ()                # `PointRead.values`: no row matches
_COLUMN, _PARAM, _CONST, _PLUS = range(4)


@dataclasses.dataclass(frozen=True)
class _ValueItem:
    """One item of `PointRead.values`: a column of the row, a parameter, a constant, or
    an integer column plus a constant (`value`), which must stay within `bounds` (the
    column type's range: the arithmetic's type is at least that wide)."""
    kind: int
    column: str | None = None
    param: int | None = None
    value: object = None
    bounds: tuple[int, int] | None = None


def _int_literal(e: exp.Expression) -> int | None:
    """An integer literal's value (`7`, `-7`), else None."""
    sign = 1
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.Neg):
        sign, e = -1, e.this
    if not isinstance(e, exp.Literal) or e.is_string:
        return None
    v = e.this
    if type(v) is int:
        return sign * v
    if isinstance(v, str) and v.isascii() and v.isdigit():
        return sign * int(v)
    return None


def _value_item(scan: L.Scan, e: exp.Expression, types: dict) -> _ValueItem | None:
    """`e` as a `_ValueItem`, or None when it needs the executor."""
    while isinstance(e, exp.Paren):
        e = e.this
    i = param_index(e)
    if i is not None:
        return _ValueItem(_PARAM, param=i)
    if isinstance(e, exp.Column):
        col = _own_column(scan, e)
        return None if col is None else _ValueItem(_COLUMN, column=col)
    if isinstance(e, exp.Null):
        return _ValueItem(_CONST, value=None)
    if isinstance(e, exp.Literal) and e.is_string and isinstance(e.this, str):
        return _ValueItem(_CONST, value=e.this)
    n = _int_literal(e)
    if n is not None:
        return _ValueItem(_CONST, value=n)
    if isinstance(e, (exp.Add, exp.Sub)):
        a, b = e.this, e.expression
        while isinstance(a, exp.Paren):
            a = a.this
        col = _own_column(scan, a) if isinstance(a, exp.Column) else None
        n = _int_literal(b)
        if isinstance(e, exp.Add) and (col is None or n is None):   # 1 + v
            b2 = e.expression
            while isinstance(b2, exp.Paren):
                b2 = b2.this
            col = _own_column(scan, b2) if isinstance(b2, exp.Column) else None
            n = _int_literal(e.this)
        t = types.get(col)
        if col is None or n is None or t is None or not pa.types.is_integer(t):
            return None
        info = np.iinfo(t.to_pandas_dtype())
        return _ValueItem(_PLUS, column=col, value=n if isinstance(e, exp.Add) else -n,
                          bounds=(int(info.min), int(info.max)))
    return None


_PACK = {pa.int8(): "<b", pa.int16(): "<h", pa.int32(): "<i", pa.int64(): "<q",
         pa.uint8(): "<B", pa.uint16(): "<H", pa.uint32(): "<I", pa.uint64(): "<Q",
         pa.float32(): "<f", pa.float64(): "<d"}


def one_value_array(t: pa.DataType):
    """A function: Python value -> a one-element Array of type `t`, equal to
    `pa.array([value], t)`. Integers, floats and strings are built from their buffers
    (~1 us instead of ~2.3 us); NULL and the other types go through `pa.array`."""
    fmt = _PACK.get(t)
    if fmt is not None:
        packer = struct.Struct(fmt).pack

        def make(v):
            if v is None or type(v) is bool:
                return pa.array([v], t)
            return pa.Array.from_buffers(t, 1, [None, pa.py_buffer(packer(v))])
        return make
    if pa.types.is_string(t):
        def make_str(v):
            if type(v) is not str:
                return pa.array([v], t)
            d = v.encode("utf-8")
            return pa.Array.from_buffers(t, 1, [None, pa.py_buffer(_OFFSETS(0, len(d))),
                                                pa.py_buffer(d)])
        return make_str
    return lambda v: pa.array([v], t)


_OFFSETS = struct.Struct("<ii").pack


def compile_point_read(catalog, out: L.Output) -> PointRead | None:
    """A PointRead for a bound plan (parameters as marked Consts), or None. Not for a
    plan with `now()` columns (`Output.utc`: timestamp with time zone, which the general
    path gives them and a PointRead would not)."""
    if out.utc:
        return None
    proj = out.plan
    if not isinstance(proj, L.Project):
        return None
    node = proj.input
    conditions: list[exp.Expression] = []
    if isinstance(node, L.MultiJoin):
        if len(node.inputs) != 1:
            return None
        conditions += node.conditions
        node = node.inputs[0]
    elif isinstance(node, L.Filter):
        conditions.append(node.condition)
        node = node.input
    if not isinstance(node, L.Scan) or node.snapshot is not None or node.changes or \
            node.pushed:
        return None
    conditions += node.filters
    table = catalog.table(node.table)
    if getattr(table, "virtual", False) or getattr(table, "metadata", None) is None:
        return None
    flat: list[exp.Expression] = []
    for c in conditions:
        flat += _conjuncts(c)
    schema = table.schema
    found: dict[str, _KeyPart] = {}
    for c in flat:
        part = _key_equality(node, c, schema)
        if part is None or part.column in found:
            return None
        found[part.column] = part
    if set(found) != set(schema.key_names):
        return None
    key = [found[k] for k in schema.key_names]
    # the table columns the items read, in table order
    refs: set[str] = set()
    plain: list[str] | None = []
    param_items = False
    for _, e in proj.items:
        for n in e.walk():
            if isinstance(n, exp.Column):
                col = _own_column(node, n)
                if col is None:
                    return None        # a reference to something else (outer query, ...)
                refs.add(col)
            elif isinstance(n, (exp.Subquery, exp.Select, SubqueryRef, AvgOf, SubPlan)):
                return None            # needs the executor's context: the ordinary plan
            elif param_index(n) is not None:
                param_items = True
        col = _own_column(node, e) if isinstance(e, exp.Column) else None
        if plain is not None:
            if col is None:
                plain = None
            else:
                plain.append(col)
    item_keys = [k for k, _ in proj.items]
    if plain is not None and list(out.keys) != item_keys:
        plain = None                   # reordered or repeated keys: take the general path
    columns = [c.name for c in schema.columns if c.name in refs]
    if plain is not None:
        if len(set(out.names)) != len(out.names):
            plain = None               # duplicate output names: from_pylist cannot build it
    if plain is not None:
        rschema = pa.schema([pa.field(n, f.type) for n, f in
                             zip(out.names, schema.arrow_schema(plain))])
    else:
        rschema = pa.schema([pa.field(node.key(c), f.type) for c, f in
                             zip(columns, schema.arrow_schema(columns))])
    direct = []
    types = dict(zip(columns, schema.arrow_schema(columns))) if columns else {}
    for k, e in proj.items:
        col = _own_column(node, e) if isinstance(e, exp.Column) else None
        if col is not None:
            direct.append((k, col, None, types[col].type))
        elif param_index(e) is not None:
            direct.append((k, None, param_index(e), None))
        else:
            direct = None
            break
    by_key = dict(proj.items)
    col_types = {c.name: c.arrow_type for c in schema.columns}
    value_items = [_value_item(node, by_key[k], col_types) for k in out.keys] \
        if set(out.keys) <= set(by_key) else [None]
    return PointRead(node.table, node.prefix, key, columns, list(proj.items), list(out.names),
                     list(out.keys), plain, param_items, rschema,
                     direct if plain is None else None,
                     None if None in value_items else value_items, table)


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def _own_column(scan: L.Scan, e: exp.Expression) -> str | None:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.Column) and not e.table and e.name.startswith(scan.prefix + "."):
        col = e.name[len(scan.prefix) + 1:]
        return col if col in scan.columns else None
    return None


def _key_equality(scan: L.Scan, c: exp.Expression, schema) -> _KeyPart | None:
    """`key column = parameter or constant` (either side) -> its _KeyPart."""
    if not isinstance(c, exp.EQ):
        return None
    for a, b in ((c.this, c.expression), (c.expression, c.this)):
        col = _own_column(scan, a)
        if col is None or not schema.is_key(col):
            continue
        while isinstance(b, exp.Paren):
            b = b.this
        typ = schema.column(col).arrow_type
        i = param_index(b)
        if i is not None:
            return _KeyPart(col, typ, i)
        if any(param_index(n) is not None for n in b.walk()):
            return None            # an expression over a parameter: not compiled
        k = coerce_literal_to(b, typ)
        if k is None or not k.this.is_valid:
            return None
        return _KeyPart(col, typ, None, k.this.as_py())
    return None
