"""The scalar-expression evaluator: sqlglot expression trees over Arrow batches, vectorised.

The planner hands over a sqlglot tree whose aggregates and subqueries are already replaced by
column references, plus a `pa.Table` / `pa.RecordBatch`; `evaluate` returns one Arrow value
per row. Every operator is one or a few `pyarrow.compute` kernels (or numpy, for calendar
arithmetic) over whole columns; no Python code runs per row, with one exception below.

    evaluate(node, batch)
      └── _eval(node, ctx) ── _HANDLERS[type(node)](node, ctx) ──> Value
            Value = pa.Scalar (a constant: literals and whatever only depends on them)
                  | pa.Array | pa.ChunkedArray (one element per row)

Constants stay `pa.Scalar`s all the way up (kernels accept them), so `l_quantity < 24`
never materialises a column of 24s; `evaluate` broadcasts a constant result at the end.
A 0-row batch goes through the same code, which is how the planner learns result types.

Semantics are PostgreSQL's unless noted:

* NULL propagates; AND / OR / NOT are Kleene. `x IN (1, NULL)` is NULL when no match.
* Types. integer op integer -> int64 (checked: overflow is 22003, `/` truncates toward
  zero); any float -> float64; decimal with integer or decimal -> decimal128 following
  Spark's rules with precision capped at 38 (when capping, the scale shrinks but keeps at
  least min(scale, 6) digits):

      a + b, a - b   p = max(p1 - s1, p2 - s2) + max(s1, s2) + 1     s = max(s1, s2)
      a * b          p = p1 + p2 + 1                                 s = s1 + s2
      a / b          s = max(6, s1 + p2 + 1)                         p = p1 - s1 + s2 + s
      a % b          p = min(p1 - s1, p2 - s2) + max(s1, s2)         s = max(s1, s2)

  A kernel whose exact intermediate would not fit decimal128 runs on operands whose declared
  precision is first shrunk to the digits the data actually has (a zero-copy view after one
  `min_max` pass), and on decimal256 if that is still not enough; results are rounded half
  away from zero to the result scale. A value that does not fit its result type is 22003,
  never a silent wrap. Division and % work on the unscaled integers, so declared scales do
  not inflate the kernel's precision. The one per-row path: dividing two columns that both
  hold 38 significant digits (no Arrow kernel can), done with Python's decimal.
  Integer constants combine with decimals as decimal(digits, 0). Literals: `1` is int64,
  `0.06` is decimal(2, 2), `1e3` is float64.
* A bare string literal has PostgreSQL's "unknown" type: next to a typed operand it is cast
  to that type (`o_orderdate >= '1994-01-01'` compares dates; `'abc' + 1` fails with
  22P02 like PostgreSQL). Any other text operand stays text (`text = date` is 42883).
* Dates. date ± interval stays a DATE when the interval has no time part (DuckDB and
  PostgreSQL return a timestamp at midnight; the two compare equal, and a DATE constant
  pushes down to a DATE column), else a TIMESTAMP. Months are added first and clamp to the
  month end (2024-01-31 + 1 month = 2024-02-29), then days, then time. date - date is an
  int64 count of days, date ± integer is a date, timestamp - timestamp is an interval.
  DATE_TRUNC keeps the input type (a date truncates to a date).
* CASE / IIF / COALESCE and the right side of AND / OR are evaluated for all rows at once;
  if that raises a data exception (SQLSTATE class 22, e.g. `CASE WHEN x = 0 THEN 0 ELSE 1/x
  END`), the operand is re-evaluated on just the rows that reach it, so an error surfaces
  only when a row that needs the value has it.

`fold_constants` replaces every maximal constant subtree by a `Const` node holding the
evaluated `pa.Scalar` (its `.sql()` renders a literal such as `DATE '1998-09-02'`), so
`date '1998-12-01' - interval '90' day` is computed once per statement. Bare literals are
left as they are: folding gains nothing and would turn an "unknown" string into text.

Not supported (raise 0A000 or 42883): non-constant patterns and lengths for LIKE, SUBSTRING,
LEFT, RIGHT, LPAD/RPAD, REPLACE, POSITION and TRIM characters; multi-character pad strings;
arithmetic on interval *columns* (only constant intervals; timestamp - timestamp yields an
interval column that EXTRACT and CAST to text cannot yet read); SIMILAR TO, shifts,
multi-dimensional arrays and array slices; time zones (timestamps are naive UTC
microseconds). sqlglot itself keeps only the first `<n> <unit>` of an interval string that
mixes units with a time (`interval '1 day 02:00'` arrives as `interval '1' day`); `'1 day 2
hours'` is intact.

PostgreSQL compatibility for client catalog queries (see the sections at the end): arrays
(`ArrayType`: ARRAY[...], '{a,b}' literals, subscripts, = ANY / <> ALL, ||, array_to_string,
cardinality, ...), OPERATOR(pg_catalog.~), COLLATE (ignored: one byte-order collation),
E'...' strings, & | #, records of named fields, functions a host provides (`HostCall`, e.g.
the wire layer's catalog functions) and `SubPlan`s, the binder's fallback for subqueries
it cannot turn into joins.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot.generator
from sqlglot import exp

from planner.dialect import KuduNow
from planner.errors import FeatureNotSupported, SqlError, UndefinedObject

Value = pa.Scalar | pa.Array | pa.ChunkedArray

_MAX_PRECISION = 38
_MAX_PRECISION_256 = 76
_MIN_ADJUSTED_SCALE = 6
_US_PER_DAY = 86_400_000_000
_DECIMAL_CTX = decimal.Context(prec=200)
_DEFAULT_NUMERIC = pa.decimal128(38, 10)  # CAST(x AS NUMERIC) of a non-exact value
_HALF_AWAY = "half_towards_infinity"


# -- public API ------------------------------------------------------------------------------


def column_key(col: exp.Column) -> str:
    """The batch field name a column reference reads: `table.name`, or `name` unqualified."""
    return f"{col.table}.{col.name}" if col.table else col.name


class Const(exp.Expression):
    """A folded constant: `this` is a typed `pa.Scalar` (possibly null).

    `evaluate` broadcasts it; `.sql()` renders it as a SQL literal (`DATE '1998-09-02'`,
    `0.06`, `CAST(NULL AS INTEGER)`).
    """

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


def evaluate(node: exp.Expression, batch: pa.Table | pa.RecordBatch) -> pa.Array | pa.ChunkedArray:
    """Evaluate `node` over `batch`: exactly `batch.num_rows` Arrow values (constants broadcast).

    Raises SqlError with PostgreSQL's SQLSTATE for unknown columns (42703), functions or
    operators (42883), type mismatches (42804) and data errors (22xxx).
    """
    ctx = _Ctx(batch)
    return _broadcast(_eval(node, ctx), ctx.num_rows)


def evaluate_filter(node: exp.Expression,
                    batch: pa.Table | pa.RecordBatch) -> pa.Array | pa.ChunkedArray:
    """WHERE semantics: a boolean per row, NULL counted as false. Non-boolean is 42804."""
    ctx = _Ctx(batch)
    v = _eval(node, ctx)
    if _kind(v.type) == "null":
        return pa.repeat(pa.scalar(False), ctx.num_rows)
    if _kind(v.type) != "bool":
        raise SqlError(f"argument of WHERE must be type boolean, not type {_pg_name(v.type)}",
                       "42804", _position(node))
    if isinstance(v, pa.Scalar):
        return pa.repeat(pa.scalar(bool(v.as_py())), ctx.num_rows)
    return pc.fill_null(v, False)


def fold_constants(node: exp.Expression) -> exp.Expression:
    """`node` with each maximal constant subtree replaced by a `Const` (a copy; `node`
    itself when there is nothing to fold).

    A subtree is constant when it has no column, aggregate, subquery, parameter or
    non-deterministic function (random(); now() and current_date do fold). A constant
    subtree whose evaluation raises is left as it is: the error surfaces at execution, and
    only if a row reaches it. Bare literals, aliases and CASE's WHEN arms are never replaced.
    """
    memo: dict[int, bool] = {}
    if not any(_foldable(n, memo) and not _trivially_constant(n) and not _fixed_slot(n)
               for n in node.walk()):
        return node            # nothing to fold (the common case): no copy
    root = node.copy()
    memo = {}
    ctx = _Ctx(pa.table({}))

    def fold(n: exp.Expr) -> exp.Expr:
        if _foldable(n, memo) and not _trivially_constant(n) and not _fixed_slot(n):
            try:
                v = _eval(n, ctx)
            except SqlError:
                v = None
            if isinstance(v, pa.Scalar):
                c = Const(this=v)
                if n is not root:
                    n.replace(c)
                return c
        for child in list(n.iter_expressions()):
            fold(child)
        return n

    return fold(root)


def param_scalar(v: Any) -> pa.Scalar:
    """A statement parameter's value as a typed scalar. A Python int beyond BIGINT becomes
    NUMERIC (as in PostgreSQL, where such a literal is numeric); beyond 38 digits, 22003."""
    if isinstance(v, pa.Scalar):
        return v
    try:
        return pa.scalar(v)
    except OverflowError:
        if isinstance(v, int) and abs(v) < 10 ** 38:
            return pa.scalar(decimal.Decimal(v), pa.decimal128(38, 0))
        raise SqlError(f"parameter value {v} is out of range", "22003") from None


def param_index(node: exp.Expression) -> int | None:
    """The parameter index of a Const the binder made from `$n` (None for other nodes)."""
    if isinstance(node, Const) and node._meta:
        return node.meta.get("param")
    return None


def substitute_params(e: exp.Expression, scalars: list, copy: bool = True) -> exp.Expression:
    """`e` with every parameter Const replaced by the new value (`param_scalar`s) for its
    index: how a cached plan is reused with new parameters."""
    def fix(n):
        i = param_index(n)
        if i is None:
            return n
        c = Const(this=scalars[i])
        c.meta["param"] = i
        return c
    return e.transform(fix, copy=copy)


def constant_value(node: exp.Expression) -> tuple[bool, Any, pa.DataType | None]:
    """(True, python value, Arrow type) if `node` is a constant expression, else (False, None, None).

    Python values are what `pa.Scalar.as_py()` gives (int, Decimal, datetime.date, ...).
    A constant whose evaluation raises, or that has no Python value (a date past year
    9999), counts as not constant.
    """
    while isinstance(node, (exp.Alias, exp.Paren)):
        node = node.this
    s = _constant_scalar(node)
    if s is None:
        return False, None, None
    try:
        return True, s.as_py(), s.type
    except (OverflowError, ValueError):   # a date past year 9999: no Python value, so
        return False, None, None          # it is evaluated, not pushed down


def constant_scalar(node: exp.Expression) -> pa.Scalar | None:
    """The typed value of a constant expression (None if it is not one, or raises)."""
    while isinstance(node, (exp.Alias, exp.Paren)):
        node = node.this
    return _constant_scalar(node)


def coerce_literal_to(value_node: exp.Expression, target_type: pa.DataType) -> Const | None:
    """Cast a constant to a column's type for predicate pushdown, if that loses nothing.

    `'1994-01-01'` -> DATE, `24` -> DECIMAL(15,2), `5` -> INT32 succeed; `1.5` -> INT32,
    `3000000000` -> INT32, a text-typed (non-literal) string -> DATE give None. Comparing
    the column with the result is then equivalent to comparing it with the original value.
    """
    s = _constant_scalar(value_node)
    if s is None:
        return None
    if s.type == target_type:
        return Const(this=s)
    src_kind, dst_kind = _kind(s.type), _kind(target_type)
    if src_kind == "string" and dst_kind != "string" and not _is_unknown_literal(value_node):
        return None
    try:
        c = _cast(s, target_type, value_node)
    except SqlError:
        return None
    if src_kind not in ("string", "null"):
        try:
            back = _cast(c, s.type, value_node)
        except SqlError:
            return None
        if back.as_py() != s.as_py():
            return None
    return Const(this=c)


# -- evaluation context and dispatch ---------------------------------------------------------


class _Ctx:
    """The batch being evaluated and its name -> column index map."""

    __slots__ = ("batch", "index", "num_rows")

    def __init__(self, batch: pa.Table | pa.RecordBatch):
        self.batch = batch
        self.num_rows = batch.num_rows
        self.index: dict[str, int] = {}
        for i, name in enumerate(batch.schema.names):
            self.index.setdefault(name, i)

    def column(self, i: int) -> pa.Array | pa.ChunkedArray:
        return self.batch.column(i)

    def filtered(self, mask: Value) -> _Ctx:
        """The rows where `mask` is true (a scalar mask keeps all rows or none)."""
        if isinstance(mask, pa.Scalar):
            return self if mask.as_py() else _Ctx(self.batch.slice(0, 0))
        if isinstance(self.batch, pa.RecordBatch) and isinstance(mask, pa.ChunkedArray):
            mask = mask.combine_chunks()
        return _Ctx(self.batch.filter(mask))


Handler = Callable[[Any, _Ctx], Value]
_HANDLERS: dict[type, Handler] = {}


def _handles(*types: type) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for t in types:
            _HANDLERS[t] = fn
        return fn
    return register


def _eval(node: exp.Expr, ctx: _Ctx) -> Value:
    handler = _HANDLERS.get(type(node))
    if handler is None:
        _unsupported(node, ctx)
    try:
        return handler(node, ctx)
    except pa.ArrowException as e:
        raise _from_arrow(e, node) from None
    except OverflowError:
        raise SqlError("value out of range", "22003", _position(node)) from None


def _eval_where(node: exp.Expr, ctx: _Ctx, mask: Value | None) -> Value:
    """`node` over the rows where `mask` holds; other rows are unspecified (null or a value).

    Tries all rows first (one kernel call); only a data exception triggers the re-evaluation
    on the masked rows, scattered back into a full-length column.
    """
    try:
        return _eval(node, ctx)
    except SqlError as e:
        if mask is None or not e.sqlstate.startswith("22"):
            raise
        sub = ctx.filtered(mask)
        if sub.num_rows == ctx.num_rows:
            raise
        v = _eval(node, sub)
        if isinstance(v, pa.Scalar):
            return v
        return _scatter(mask, v, ctx.num_rows)


def _scatter(mask: Value, values: pa.Array | pa.ChunkedArray, n: int) -> pa.Array:
    mask = _combine(_broadcast(pc.fill_null(mask, False), n))
    return pc.replace_with_mask(pa.nulls(n, values.type), mask, _combine(values))


def _unsupported(node: exp.Expr, ctx: _Ctx) -> None:
    pos = _position(node)
    if isinstance(node, exp.AggFunc):
        raise SqlError(f"aggregate function {node.sql_name().lower()}() is not allowed here",
                       "42803", pos)
    if isinstance(node, (exp.Query, exp.Subquery)):
        raise FeatureNotSupported("subquery not expected in a scalar expression", position=pos)
    if isinstance(node, (exp.Parameter, exp.Placeholder)):
        raise SqlError(f"there is no parameter {node.sql()}", "42P02", pos)
    if isinstance(node, exp.Func):
        _no_function(node.sql_name(), list(node.iter_expressions()), ctx, pos)
    raise FeatureNotSupported(f"unsupported expression: {node.sql()}", position=pos)


def _no_function(name: str, args: list[exp.Expr] | None, ctx: _Ctx, pos: int | None) -> None:
    types = []
    for a in args or []:
        try:
            types.append(_pg_name(_eval(a, ctx).type))
        except SqlError:
            types.append("unknown")
    raise SqlError(f"function {name.lower()}({', '.join(types)}) does not exist", "42883", pos)


def _position(node: exp.Expr | None) -> int | None:
    """1-based character offset of the first located token under `node` (None if unknown)."""
    if node is None:
        return None
    starts = [n._meta["start"] for n in node.walk() if n._meta and "start" in n._meta]
    return min(starts) + 1 if starts else None


def _err(message: str, sqlstate: str, node: exp.Expr | None) -> SqlError:
    return SqlError(message, sqlstate, _position(node))


def _from_arrow(e: pa.ArrowException, node: exp.Expr) -> SqlError:
    msg = str(e)
    low = msg.lower()
    if "divide by zero" in low:
        return _err("division by zero", "22012", node)
    if "square root of negative" in low:
        return _err("cannot take square root of a negative number", "2201F", node)
    if "logarithm of zero" in low:
        return _err("cannot take logarithm of zero", "2201E", node)
    if "logarithm of negative" in low:
        return _err("cannot take logarithm of a negative number", "2201E", node)
    if any(w in low for w in ("overflow", "out of bounds", "does not fit", "out of range")):
        return _err("value out of range", "22003", node)
    if isinstance(e, (pa.ArrowNotImplementedError, pa.ArrowTypeError)):
        return _err(f"operator does not exist: {node.sql()}", "42883", node)
    return _err(msg, "22000", node)


# -- Arrow type helpers ----------------------------------------------------------------------

_INTERVAL = pa.month_day_nano_interval()
_TS = pa.timestamp("us")


def _kind(t: pa.DataType) -> str:
    """The SQL type family of an Arrow type."""
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if t == _INTERVAL:
        return "interval"
    if pa.types.is_time(t):
        return "time"
    if isinstance(t, ArrayType) or pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list"
    return "other"


_NUMERIC = ("int", "float", "decimal")


def _pg_name(t: pa.DataType) -> str:
    """PostgreSQL's name for an Arrow type (for error messages)."""
    k = _kind(t)
    if k == "int":
        return {8: "tinyint", 16: "smallint", 32: "integer", 64: "bigint"}[t.bit_width]
    if k == "float":
        return "real" if t.bit_width == 32 else "double precision"
    if k == "list":
        return _pg_name(t.value_type) + "[]"
    return {"null": "unknown", "bool": "boolean", "decimal": "numeric", "string": "text",
            "binary": "bytea", "date": "date", "timestamp": "timestamp without time zone",
            "interval": "interval", "time": "time without time zone"}.get(k, str(t))


def _sql_type(t: pa.DataType) -> str:
    """A SQL spelling of an Arrow type (for rendering typed constants)."""
    k = _kind(t)
    if k == "int":
        return {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}[t.bit_width]
    if k == "float":
        return "REAL" if t.bit_width == 32 else "DOUBLE PRECISION"
    if k == "decimal":
        return f"DECIMAL({t.precision}, {t.scale})"
    if k == "list":
        return _sql_type(t.value_type) + "[]"
    return {"bool": "BOOLEAN", "string": "TEXT", "binary": "BYTEA", "date": "DATE",
            "timestamp": "TIMESTAMP", "interval": "INTERVAL", "time": "TIME"}.get(k, str(t))


_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def _decimal_type(p: int, s: int) -> pa.DataType:
    return pa.decimal128(p, s) if p <= _MAX_PRECISION else pa.decimal256(p, s)


def _cap(p: int, s: int) -> pa.DataType:
    """Spark's precision cap: at most 38 digits, dropping scale but keeping min(s, 6)."""
    if p <= _MAX_PRECISION:
        return pa.decimal128(max(p, 1), s)
    int_digits = p - s
    s = max(_MAX_PRECISION - int_digits, min(s, _MIN_ADJUSTED_SCALE))
    return pa.decimal128(_MAX_PRECISION, s)


def _int_as_decimal_type(t: pa.DataType) -> pa.DataType:
    return pa.decimal128(_INT_DIGITS[t.bit_width], 0)


def _digits(n: int) -> int:
    return len(str(abs(n)))


def _int_to_decimal(v: Value) -> Value:
    """An integer value as a decimal: a constant gets exactly its digits, a column its width."""
    if isinstance(v, pa.Scalar):
        x = v.as_py()
        t = pa.decimal128(1 if x is None else _digits(x), 0)
        return pa.scalar(None if x is None else decimal.Decimal(x), t)
    return v.cast(_int_as_decimal_type(v.type))


def _supertype(types: list[pa.DataType]) -> pa.DataType | None:
    """The common type values of `types` are compared or combined in; None if there is none."""
    ts = [t for t in types if _kind(t) != "null"]
    if not ts:
        return pa.null()
    first = ts[0]
    if all(t == first for t in ts):
        return first
    kinds = {_kind(t) for t in ts}
    if kinds <= set(_NUMERIC):
        if "float" in kinds:
            return pa.float64()
        if "decimal" in kinds:
            decs = [_int_as_decimal_type(t) if _kind(t) == "int" else t for t in ts]
            int_digits = max(t.precision - t.scale for t in decs)
            scale = max(t.scale for t in decs)
            return _cap(int_digits + scale, scale)
        return max(ts, key=lambda t: t.bit_width)
    if kinds == {"string"}:
        return pa.large_string() if any(pa.types.is_large_string(t) for t in ts) else pa.string()
    if kinds <= {"date", "timestamp"}:
        return next((t for t in ts if _kind(t) == "timestamp"), _TS)
    if kinds <= {"string", "binary"}:
        return pa.binary()
    return None


def _broadcast(v: Value, n: int) -> pa.Array | pa.ChunkedArray:
    if not isinstance(v, pa.Scalar):
        return v
    if _kind(v.type) == "null":
        return pa.nulls(n)
    return pa.repeat(v, n)


def _combine(v: pa.Array | pa.ChunkedArray) -> pa.Array:
    return v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v


def _per_array(fn: Callable[[pa.Array], pa.Array], v: Value) -> Value:
    """Apply an Array -> Array function to a scalar (as a 1-element array), array or chunks."""
    if isinstance(v, pa.Scalar):
        return fn(pa.repeat(v, 1))[0]
    if isinstance(v, pa.ChunkedArray):
        if v.num_chunks == 0:
            return pa.chunked_array([], type=fn(pa.array([], type=v.type)).type)
        return pa.chunked_array([fn(c) for c in v.chunks])
    return fn(v)


def _view(v: Value, t: pa.DataType) -> Value:
    """Reinterpret a decimal's stored integers under another same-width decimal type (zero
    copy, unchecked: callers choose a precision the data fits, or know why it need not)."""
    if isinstance(v, pa.Scalar):
        return pa.repeat(v, 1).view(t)[0]
    if isinstance(v, pa.ChunkedArray):
        return pa.chunked_array([c.view(t) for c in v.chunks], type=t)
    return v.view(t)


def _null_of(t: pa.DataType) -> pa.Scalar:
    if isinstance(t, ArrayType):
        return pa.ExtensionScalar.from_storage(t, None)
    return pa.scalar(None, t)


def _is_unknown_literal(node: exp.Expr) -> bool:
    """A bare string literal: PostgreSQL's "unknown" type, resolved from its context."""
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal) and node.is_string


def _to_numpy(a: pa.Array, dtype: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Values (nulls as 0) and the null mask (None if no nulls) of an integer-like array."""
    mask = a.is_null().to_numpy(zero_copy_only=False) if a.null_count else None
    vals = pc.fill_null(a, 0) if a.null_count else a
    return vals.to_numpy(zero_copy_only=False).astype(dtype, copy=False), mask


# -- casts -----------------------------------------------------------------------------------

_TRUE_WORDS = ["t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"]
_FALSE_WORDS = ["f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0"]
_PARSE_FAILURE = re.compile(r"Failed to parse string: '(.*)' as a scalar", re.DOTALL)


def _cast(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """SQL CAST of `v` to Arrow type `to` with PostgreSQL's rounding and errors."""
    src = v.type
    if src == to:
        return v
    ks, kt = _kind(src), _kind(to)
    if ks == "null":
        return _null_of(to) if isinstance(v, pa.Scalar) else pa.nulls(len(v), to)
    fn = _CASTS.get((ks, kt))
    if fn is None:
        raise _err(f"cannot cast type {_pg_name(src)} to {_pg_name(to)}", "42846", node)
    return fn(v, to, node)


def _cast_checked(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    try:
        return v.cast(to)
    except pa.ArrowInvalid:
        raise _out_of_range(to, node) from None


def _out_of_range(t: pa.DataType, node: exp.Expr | None) -> SqlError:
    if _kind(t) == "int":
        return _err(f"{_pg_name(t)} out of range", "22003", node)
    if _kind(t) == "decimal":
        return _err("numeric field overflow", "22003", node)
    return _err(f"{_pg_name(t)} out of range", "22008" if _kind(t) in ("date", "timestamp")
                else "22003", node)


def _round(v: Value, ndigits: int, mode: str = _HALF_AWAY) -> Value:
    """pc.round; a decimal first gains an integer digit, as Arrow wants room for a carry."""
    t = v.type
    if _kind(t) == "decimal":
        if t.bit_width == 128 and t.precision < _MAX_PRECISION:
            v = _view(v, pa.decimal128(t.precision + 1, t.scale))
        elif t.precision < _MAX_PRECISION_256:
            v = _as_width(v, 256)
            v = _view(v, pa.decimal256(t.precision + 1, t.scale))
    return pc.round(v, ndigits=ndigits, round_mode=mode)


def _decimal_to_decimal(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    if to.scale < v.type.scale:
        v = _round(v, to.scale)
    if (to.scale == v.type.scale and to.precision >= v.type.precision
            and to.bit_width == v.type.bit_width):
        return _view(v, to)
    return _cast_checked(v, to, node)


def _int_to_decimal_cast(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    # Arrow's int -> decimal cast wants room for the type's full range; check values instead.
    return _decimal_to_decimal(v.cast(_int_as_decimal_type(v.type)), to, node)


def _decimal_to_int(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    return _cast_checked(_round(v, 0), to, node)


def _float_to_int(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    _check_finite(v, to, node)
    return _cast_checked(_round(v, 0, "half_to_even"), to, node)  # PostgreSQL uses rint()


def _float_to_decimal(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    _check_finite(v, to, node)
    v = _round(_f64(v), to.scale)
    bound = 10.0 ** (to.precision - to.scale)
    top = v.as_py() if isinstance(v, pa.Scalar) else pc.max(pc.abs(v)).as_py()
    if top is not None and abs(top) >= bound:
        raise _out_of_range(to, node)
    return v.cast(to, safe=False)


def _check_finite(v: Value, to: pa.DataType, node: exp.Expr | None) -> None:
    bad = pc.any(pc.invert(pc.is_finite(v))).as_py() if not isinstance(v, pa.Scalar) else (
        v.is_valid and not math.isfinite(v.as_py()))
    if bad:
        raise _out_of_range(to, node)


def _trimmed(v: Value) -> Value:
    return pc.utf8_trim(v, characters=" \t\n\r\f\v")


def _bad_input(to: pa.DataType, e: pa.ArrowInvalid | None, v: Value,
               node: exp.Expr | None) -> SqlError:
    m = _PARSE_FAILURE.search(str(e)) if e is not None else None
    text = m.group(1) if m else _first_valid_text(v)
    kind = _kind(to)
    if kind == "int" and re.fullmatch(r"\s*[+-]?\d+\s*", text):
        return _err(f'value "{text}" is out of range for type {_pg_name(to)}', "22003", node)
    if kind in ("date", "timestamp"):
        if re.fullmatch(r"\s*\d{4}-\d{1,2}-\d{1,2}([ T].*)?", text):
            return _err(f'date/time field value out of range: "{text}"', "22008", node)
        return _err(f'invalid input syntax for type {_pg_name(to)}: "{text}"', "22007", node)
    return _err(f'invalid input syntax for type {_pg_name(to)}: "{text}"', "22P02", node)


def _first_valid_text(v: Value) -> str:
    if isinstance(v, pa.Scalar):
        return str(v.as_py())
    valid = pc.drop_null(v)
    return str(valid[0].as_py()) if len(valid) else ""


def _string_to_number(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    t = _trimmed(v)
    if _kind(to) == "decimal":
        try:
            wide = t.cast(pa.decimal256(_MAX_PRECISION_256, _MAX_PRECISION))
        except pa.ArrowInvalid as e:
            raise _bad_input(to, e, v, node) from None
        return _decimal_to_decimal(wide, to, node)
    try:
        return t.cast(to)
    except pa.ArrowInvalid as e:
        raise _bad_input(to, e, v, node) from None


def _reject(v: Value, bad: Value, to: pa.DataType, node: exp.Expr | None) -> None:
    """Raise the input-syntax error for the first input where `bad` is true, if any."""
    if isinstance(bad, pa.Scalar):
        if bad.as_py():
            raise _bad_input(to, None, v, node)
    elif pc.any(bad).as_py():
        raise _bad_input(to, None, pc.filter(v, bad), node)


def _string_to_bool(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    t = pc.utf8_lower(_trimmed(v))
    is_true = pc.is_in(t, value_set=pa.array(_TRUE_WORDS))
    is_false = pc.is_in(t, value_set=pa.array(_FALSE_WORDS))
    _reject(v, pc.and_(pc.invert(pc.or_(is_true, is_false)), pc.is_valid(t)), to, node)
    return pc.if_else(pc.is_valid(t), is_true, _null_of(pa.bool_()))


_DATE_FORMATS = ("%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")
_TIMESTAMP_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d")


def _strptime(v: Value, formats: tuple[str, ...], to: pa.DataType,
              node: exp.Expr | None) -> Value:
    """The first of `formats` each text parses with (accepts '1994-1-5'); else 22007/22008."""
    t = _trimmed(v)
    parsed = [pc.strptime(t, format=f, unit="us", error_is_null=True) for f in formats]
    r = pc.coalesce(*parsed)
    # strptime rolls 1994-02-30 over to March 2nd: the fields must read back unchanged.
    fields = pc.extract_regex(t, pattern=r"^(?P<y>\d+)-(?P<m>\d+)-(?P<d>\d+)")
    same = pc.and_(pc.and_(
        pc.equal(pc.year(r), pc.struct_field(fields, [0]).cast(pa.int64())),
        pc.equal(pc.month(r), pc.struct_field(fields, [1]).cast(pa.int64()))),
        pc.equal(pc.day(r), pc.struct_field(fields, [2]).cast(pa.int64())))
    _reject(v, pc.and_(pc.is_valid(t), pc.invert(pc.fill_null(same, False))), to, node)
    return r


def _string_to_date(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    try:  # the common case: ISO dates, one kernel
        return _trimmed(v).cast(pa.date32())
    except pa.ArrowInvalid:
        return _timestamp_to_date(_strptime(v, _DATE_FORMATS, to, node), to, node)


def _string_to_timestamp(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    try:  # ISO timestamps, with fractions of a second
        return _trimmed(v).cast(to)
    except pa.ArrowInvalid:
        return _strptime(v, _TIMESTAMP_FORMATS, to, node).cast(to)


def _string_to_interval(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    if not isinstance(v, pa.Scalar):
        raise FeatureNotSupported("casting a text column to interval is not supported",
                                  position=_position(node))
    if not v.is_valid:
        return _null_of(_INTERVAL)
    return _interval_scalar(*_parse_interval(v.as_py(), None, node))


def _timestamp_to_date(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    return pc.floor_temporal(v, unit="day").cast(pa.date32(), safe=False)


def _to_text(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    k = _kind(v.type)
    if k == "timestamp":
        s = pc.strftime(v.cast(_TS) if v.type.unit != "us" else v, format="%Y-%m-%d %H:%M:%S")
        s = pc.replace_substring_regex(s, pattern=r"\.(\d*?)0+$", replacement=r".\1")
        s = pc.replace_substring_regex(s, pattern=r"\.$", replacement="")
    elif k == "float":
        s = v.cast(pa.string())
        s = pc.replace_substring_regex(s, pattern="^(-?)inf$", replacement=r"\1Infinity")
        s = pc.replace_substring(s, pattern="nan", replacement="NaN")
    elif k == "interval":
        if not isinstance(v, pa.Scalar):
            raise FeatureNotSupported("casting an interval column to text is not supported",
                                      position=_position(node))
        s = pa.scalar(None if not v.is_valid else _interval_text(*_interval_parts(v)))
    elif k == "decimal":
        # numeric's text has every scale digit and no exponent; Arrow writes '0E-10' for
        # small values at large scales, so those (rare) values are formatted one by one
        s = v.cast(pa.string())
        if isinstance(s, pa.Scalar):
            s = pa.scalar(format(v.as_py(), "f") if s.is_valid and "E" in s.as_py() else
                          s.as_py(), pa.string())
        else:
            if isinstance(s, pa.ChunkedArray):
                s = s.combine_chunks()
            odd = pc.fill_null(pc.match_substring(s, "E"), False)
            if pc.any(odd).as_py():
                vals = [format(x, "f") for x, o in zip(v.to_pylist(), odd.to_pylist()) if o]
                s = pc.replace_with_mask(s, odd, pa.array(vals, pa.string()))
    else:
        s = v.cast(pa.string())
    return s.cast(to) if s.type != to else s


def _numeric_cast(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    return v.cast(to, safe=False)


def _f64(v: Value) -> Value:
    """A number as float64 (large integers round, as in PostgreSQL's casts)."""
    return v.cast(pa.float64(), safe=False)


_CASTS: dict[tuple[str, str], Callable[[Value, pa.DataType, exp.Expr | None], Value]] = {
    ("int", "int"): _cast_checked,
    ("int", "float"): _numeric_cast,
    ("int", "decimal"): _int_to_decimal_cast,
    ("int", "bool"): lambda v, to, node: pc.not_equal(v, 0),
    ("bool", "int"): _cast_checked,
    ("float", "float"): _numeric_cast,
    ("float", "int"): _float_to_int,
    ("float", "decimal"): _float_to_decimal,
    ("decimal", "float"): _numeric_cast,
    ("decimal", "int"): _decimal_to_int,
    ("decimal", "decimal"): _decimal_to_decimal,
    ("string", "int"): _string_to_number,
    ("string", "float"): _string_to_number,
    ("string", "decimal"): _string_to_number,
    ("string", "bool"): _string_to_bool,
    ("string", "date"): _string_to_date,
    ("string", "timestamp"): _string_to_timestamp,
    ("string", "interval"): _string_to_interval,
    ("string", "string"): lambda v, to, node: v.cast(to),
    ("string", "binary"): lambda v, to, node: v.cast(to),
    ("binary", "binary"): lambda v, to, node: v.cast(to),
    ("date", "timestamp"): lambda v, to, node: v.cast(to),
    ("timestamp", "date"): _timestamp_to_date,
    ("timestamp", "timestamp"): lambda v, to, node: v.cast(to),
    **{(k, "string"): _to_text for k in ("int", "float", "decimal", "bool", "date",
                                         "timestamp", "interval", "binary")},
    ("string", "list"): lambda v, to, node: _parse_array_text(v, to, node),
    ("list", "string"): lambda v, to, node: array_text(_as_array(v)).cast(to),
    ("list", "list"): lambda v, to, node: _list_cast(v, to, node),
}


def _arrow_type(dt: exp.DataType, source: pa.DataType | None, node: exp.Expr) -> pa.DataType:
    """The Arrow type of a SQL type name; NUMERIC without (p, s) adapts to `source`."""
    T = exp.DataType.Type
    if isinstance(dt, exp.ObjectIdentifier):        # oid, regclass, regtype, ...
        return _named_type(dt.name, node)
    t = dt.this
    if t == T.USERDEFINED:                          # pg_catalog.text, "char", int2vector
        kind = dt.args.get("kind")
        return _named_type(kind.name if kind is not None else dt.sql(), node)
    if t == T.ARRAY and dt.expressions:
        elem = _arrow_type(dt.expressions[0], source.value_type if source is not None and
                           _kind(source) == "list" else None, node)
        return ArrayType(elem)
    if t == T.NAME:
        return pa.string()
    simple = {
        T.TINYINT: pa.int8(), T.SMALLINT: pa.int16(), T.INT: pa.int32(), T.BIGINT: pa.int64(),
        T.FLOAT: pa.float32(), T.DOUBLE: pa.float64(), T.BOOLEAN: pa.bool_(),
        T.DATE: pa.date32(), T.TIMESTAMP: _TS, T.TIMESTAMPTZ: _TS, T.DATETIME: _TS,
        T.TIMESTAMPNTZ: _TS, T.VARBINARY: pa.binary(), T.BINARY: pa.binary(),
        T.BLOB: pa.binary(), T.INTERVAL: _INTERVAL,
        T.TEXT: pa.string(), T.VARCHAR: pa.string(), T.CHAR: pa.string(),
        T.NCHAR: pa.string(), T.NVARCHAR: pa.string(),
    }
    if t in simple:
        return simple[t]
    if t in (T.DECIMAL, T.BIGDECIMAL):
        params = [int(p.this.this) for p in dt.expressions]
        if params:
            p, s = params[0], params[1] if len(params) > 1 else 0
            if not 1 <= p <= _MAX_PRECISION:
                raise _err(f"NUMERIC precision {p} must be between 1 and 38", "22023", node)
            if not 0 <= s <= p:
                raise _err(f"NUMERIC scale {s} must be between 0 and precision {p}", "22023",
                           node)
            return pa.decimal128(p, s)
        if source is not None and _kind(source) == "decimal":
            return source if source.bit_width == 128 else _cap(source.precision, source.scale)
        if source is not None and _kind(source) == "int":
            return _int_as_decimal_type(source)
        return _DEFAULT_NUMERIC
    raise UndefinedObject(f'type "{dt.sql(dialect="postgres").lower()}" does not exist',
                          position=_position(node))


@_handles(exp.Cast)
def _cast_node(node: exp.Cast, ctx: _Ctx) -> Value:
    v = _eval(node.this, ctx)
    dt = node.args["to"]
    to = _arrow_type(dt, v.type, node)
    r = _cast(v, to, node.this)
    T = exp.DataType.Type
    if dt.this in (T.VARCHAR, T.CHAR, T.NCHAR, T.NVARCHAR) and dt.expressions:
        r = pc.utf8_slice_codeunits(r, 0, int(dt.expressions[0].this.this))
    return r


# -- leaves ----------------------------------------------------------------------------------


@_handles(exp.Column)
def _column(node: exp.Column, ctx: _Ctx) -> Value:
    key = column_key(node)
    i = ctx.index.get(key)
    if i is None:
        if isinstance(node.this, exp.Star):
            raise FeatureNotSupported("* is not a scalar expression", position=_position(node))
        name = f"{node.table}.{node.name}" if node.table else f'"{node.name}"'
        raise _err(f"column {name} does not exist", "42703", node)
    return ctx.column(i)


@_handles(exp.Literal)
def _literal(node: exp.Literal, ctx: _Ctx) -> Value:
    text = node.this
    if node.is_string:
        return pa.scalar(text, pa.string())
    if re.fullmatch(r"[+-]?\d+", text):
        n = int(text)
        if -(2**63) <= n < 2**63:
            return pa.scalar(n, pa.int64())
        if _digits(n) > _MAX_PRECISION:
            raise _err("value out of range", "22003", node)
        return pa.scalar(decimal.Decimal(n), pa.decimal128(_digits(n), 0))
    if re.search(r"[eE]", text):
        return pa.scalar(float(text), pa.float64())
    d = decimal.Decimal(text)
    _, digits, exponent = d.as_tuple()
    scale = max(-exponent, 0)
    precision = max(len(digits), scale, 1)
    if precision > _MAX_PRECISION:
        raise _err("value out of range", "22003", node)
    return pa.scalar(d, pa.decimal128(precision, scale))


@_handles(exp.Null)
def _null(node: exp.Null, ctx: _Ctx) -> Value:
    return pa.scalar(None)


@_handles(exp.Boolean)
def _boolean(node: exp.Boolean, ctx: _Ctx) -> Value:
    return pa.scalar(bool(node.this))


@_handles(Const)
def _const(node: Const, ctx: _Ctx) -> Value:
    return node.this


@_handles(exp.Paren, exp.Alias)
def _child(node: exp.Expr, ctx: _Ctx) -> Value:
    return _eval(node.this, ctx)


# -- boolean logic and comparisons -----------------------------------------------------------


def _boolean_arg(v: Value, what: str, node: exp.Expr) -> Value:
    k = _kind(v.type)
    if k == "bool":
        return v
    if k == "null":
        return v.cast(pa.bool_())
    raise _err(f"argument of {what} must be type boolean, not type {_pg_name(v.type)}",
               "42804", node)


@_handles(exp.And, exp.Or)
def _and_or(node: exp.Connector, ctx: _Ctx) -> Value:
    is_and = isinstance(node, exp.And)
    what = "AND" if is_and else "OR"
    left = _boolean_arg(_eval(node.this, ctx), what, node.this)
    # The right side only matters where the left side did not decide the result.
    undecided = pc.fill_null(left if is_and else pc.invert(left), True)
    right = _boolean_arg(_eval_where(node.expression, ctx, undecided), what, node.expression)
    return (pc.and_kleene if is_and else pc.or_kleene)(left, right)


@_handles(exp.Not)
def _not(node: exp.Not, ctx: _Ctx) -> Value:
    return pc.invert(_boolean_arg(_eval(node.this, ctx), "NOT", node.this))


@_handles(exp.Is)
def _is(node: exp.Is, ctx: _Ctx) -> Value:
    v = _eval(node.this, ctx)
    target = node.expression
    if isinstance(target, exp.Null):
        r = pc.is_null(v)
    elif isinstance(target, exp.Boolean):
        b = _boolean_arg(v, "IS", node.this)
        r = pc.fill_null(b if target.this else pc.invert(b), False)
    else:
        raise FeatureNotSupported(f"unsupported IS test: {node.sql()}", position=_position(node))
    return pc.invert(r) if node.args.get("negate") else r


def _coerce_pair(a: Value, a_node: exp.Expr, b: Value, b_node: exp.Expr,
                 op: str, node: exp.Expr) -> tuple[Value, Value]:
    """Bring two operands of a comparison to one type (PostgreSQL's resolution, simplified)."""
    ka, kb = _kind(a.type), _kind(b.type)
    if _is_unknown_literal(a_node) and kb not in ("string", "null"):
        a, ka = _cast(a, b.type, a_node), kb
    elif _is_unknown_literal(b_node) and ka not in ("string", "null"):
        b, kb = _cast(b, a.type, b_node), ka
    if a.type == b.type:
        return a, b
    if ka == "null":
        return a.cast(b.type), b
    if kb == "null":
        return a, b.cast(a.type)
    if "decimal" in (ka, kb):
        if ka == "int" and isinstance(a, pa.Scalar):
            a = _int_to_decimal(a)
        if kb == "int" and isinstance(b, pa.Scalar):
            b = _int_to_decimal(b)
    t = _supertype([a.type, b.type])
    if t is None:
        raise _err(f"operator does not exist: {_pg_name(a.type)} {op} {_pg_name(b.type)}",
                   "42883", node)
    # A constant that fits the column's type exactly is cast instead of the column.
    if isinstance(b, pa.Scalar) and not isinstance(a, pa.Scalar) and a.type != t:
        narrowed = _narrow(b, a.type)
        if narrowed is not None:
            return a, narrowed
    if isinstance(a, pa.Scalar) and not isinstance(b, pa.Scalar) and b.type != t:
        narrowed = _narrow(a, b.type)
        if narrowed is not None:
            return narrowed, b
    return _widen(a, t, a_node), _widen(b, t, b_node)


def _narrow(s: pa.Scalar, t: pa.DataType) -> pa.Scalar | None:
    """`s` cast to `t` if the cast is exact (same family, value preserved), else None."""
    if _kind(s.type) != _kind(t) and {_kind(s.type), _kind(t)} != {"int", "decimal"}:
        return None
    try:
        c = s.cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return c if c.as_py() == s.as_py() else None


def _widen(v: Value, t: pa.DataType, node: exp.Expr | None) -> Value:
    """Cast to a supertype (exact for numbers except into float; date -> timestamp)."""
    if v.type == t:
        return v
    return _cast(v, t, node)


_COMPARISONS: dict[type, tuple[str, Callable[..., Value]]] = {
    exp.EQ: ("=", pc.equal), exp.NEQ: ("<>", pc.not_equal), exp.GT: (">", pc.greater),
    exp.GTE: (">=", pc.greater_equal), exp.LT: ("<", pc.less), exp.LTE: ("<=", pc.less_equal),
}


def _check_comparable(a: Value, op: str, b: Value, node: exp.Expr) -> None:
    if _kind(a.type) == _kind(b.type) == "interval":
        return
    if _kind(a.type) in ("interval", "other", "time") or _kind(b.type) in ("interval", "other"):
        raise _err(f"operator does not exist: {_pg_name(a.type)} {op} {_pg_name(b.type)}",
                   "42883", node)


@_handles(*_COMPARISONS)
def _comparison(node: exp.Binary, ctx: _Ctx) -> Value:
    op, fn = _COMPARISONS[type(node)]
    if _is_quantifier(node.expression):
        return _quantified(node, ctx, op, fn)
    a, b = _eval(node.this, ctx), _eval(node.expression, ctx)
    if "list" in (_kind(a.type), _kind(b.type)):
        return _list_equality(a, node.this, b, node.expression, op, node)
    a, b = _coerce_pair(a, node.this, b, node.expression, op, node)
    _check_comparable(a, op, b, node)
    if _kind(a.type) == "null":
        return _null_of(pa.bool_())
    if _kind(a.type) == "float":
        return _float_compare(op, fn, a, b)
    if _kind(a.type) == "interval":
        return _interval_compare(fn, a, b)
    return fn(a, b)


def _interval_span(v: Value) -> tuple[Value, Value]:
    """MonthDayNano -> (whole days with a month as 30, nanoseconds within the day) int64:
    PostgreSQL compares intervals by that span ('1 mon' = '30 days', '1 day' = '24:00')."""
    day = 86_400_000_000_000
    if isinstance(v, pa.Scalar):
        if not v.is_valid:
            return pa.scalar(None, pa.int64()), pa.scalar(None, pa.int64())
        m, d, ns = v.as_py()
        return pa.scalar(m * 30 + d + ns // day, pa.int64()), pa.scalar(ns % day, pa.int64())
    a = v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v
    rec = np.frombuffer(a.buffers()[1], dtype=np.dtype(
        [("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]))[a.offset:a.offset + len(a)]
    mask = a.is_null().to_numpy(zero_copy_only=False) if a.null_count else None
    days = rec["months"].astype(np.int64) * 30 + rec["days"] + rec["nanos"] // day
    return pa.array(days, mask=mask), pa.array(rec["nanos"] % day, mask=mask)


def _interval_compare(fn: Callable[..., Value], a: Value, b: Value) -> Value:
    (da, na), (db, nb) = _interval_span(a), _interval_span(b)
    return pc.if_else(pc.equal(da, db), fn(na, nb), fn(da, db))


def _float_compare(op: str, fn: Callable[..., Value], a: Value, b: Value) -> Value:
    """PostgreSQL's float comparison: NaN equals NaN and is greater than every other value
    (so that floats sort and group totally); IEEE, which Arrow follows, has NaN unordered."""
    r = fn(a, b)
    an, bn = pc.fill_null(pc.is_nan(a), False), pc.fill_null(pc.is_nan(b), False)
    if op in ("=", "<>"):
        fix = pc.and_(an, bn)                            # NaN = NaN
        value = op == "="
    elif op in (">", ">="):
        fix = pc.and_(an, pc.invert(bn)) if op == ">" else an
        value = True
    else:
        fix = pc.and_(bn, pc.invert(an)) if op == "<" else bn
        value = True
    fix = pc.and_(fix, pc.and_(pc.is_valid(a), pc.is_valid(b)))     # NULL stays NULL
    if isinstance(fix, pa.Scalar) and not fix.as_py():
        return r
    return pc.if_else(fix, pa.scalar(value), r)


@_handles(exp.NullSafeEQ, exp.NullSafeNEQ)
def _distinct_from(node: exp.Binary, ctx: _Ctx) -> Value:
    a, b = _coerce_pair(_eval(node.this, ctx), node.this, _eval(node.expression, ctx),
                        node.expression, "IS DISTINCT FROM", node)
    a_null, b_null = pc.is_null(a), pc.is_null(b)
    if _kind(a.type) == "null":
        same = pc.and_(a_null, b_null)
    else:
        same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(a_null, b_null))
    return same if isinstance(node, exp.NullSafeEQ) else pc.invert(same)


@_handles(exp.Between)
def _between(node: exp.Between, ctx: _Ctx) -> Value:
    x = _eval(node.this, ctx)
    lo_node, hi_node = node.args["low"], node.args["high"]
    x1, lo = _coerce_pair(x, node.this, _eval(lo_node, ctx), lo_node, ">=", node)
    x2, hi = _coerce_pair(x, node.this, _eval(hi_node, ctx), hi_node, "<=", node)
    if _kind(x1.type) == "null" or _kind(x2.type) == "null":
        return _null_of(pa.bool_())
    if _kind(x1.type) == "float" or _kind(x2.type) == "float":
        return pc.and_kleene(_float_compare(">=", pc.greater_equal, x1, lo),
                             _float_compare("<=", pc.less_equal, x2, hi))
    return pc.and_kleene(pc.greater_equal(x1, lo), pc.less_equal(x2, hi))


@_handles(exp.In)
def _in(node: exp.In, ctx: _Ctx) -> Value:
    if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
        raise FeatureNotSupported("IN (subquery) must be planned as a join",
                                  position=_position(node))
    x = _eval(node.this, ctx)
    items = node.expressions
    values = [_eval(e, ctx) for e in items]
    if not all(isinstance(v, pa.Scalar) for v in values):
        result: Value | None = None
        for v, e in zip(values, items):
            a, b = _coerce_pair(x, node.this, v, e, "=", node)
            eq = _null_of(pa.bool_()) if _kind(a.type) == "null" else pc.equal(a, b)
            result = eq if result is None else pc.or_kleene(result, eq)
        return result
    # All constants: one hash lookup per row. Literals take x's type; otherwise unify.
    if _kind(x.type) not in ("string", "null"):
        values = [_cast(v, x.type, e) if _is_unknown_literal(e) else v
                  for v, e in zip(values, items)]
    if _kind(x.type) == "decimal" or any(_kind(v.type) == "decimal" for v in values):
        values = [_int_to_decimal(v) if _kind(v.type) == "int" else v for v in values]
    # (x of type null - a bare NULL - narrows nothing: the list's type decides)
    narrowed = [v if v.type == x.type else _narrow(v, x.type) if v.is_valid
                else v.cast(x.type) for v in values] if _kind(x.type) != "null" else [None]
    if all(v is not None for v in narrowed):
        values = narrowed
    t = _supertype([x.type] + [v.type for v in values])
    if t is None:
        bad = next(v.type for v in values if _supertype([x.type, v.type]) is None)
        raise _err(f"operator does not exist: {_pg_name(x.type)} = {_pg_name(bad)}",
                   "42883", node)
    if _kind(t) == "null":
        return _null_of(pa.bool_())
    x = _widen(x, t, node.this)
    present = [_widen(v, t, None) for v in values if v.is_valid]
    has_null = len(present) < len(values)
    value_set = pa.array([v.as_py() for v in present], type=t)
    if _kind(t) == "float":       # -0.0 = 0.0, which the hash lookup does not know
        x, value_set = pc.add(x, pa.scalar(0.0, t)), pc.add(value_set, pa.scalar(0.0, t))
    found = pc.is_in(x, value_set=value_set, skip_nulls=True)
    no_answer = _null_of(pa.bool_())
    if has_null:  # no match against a list holding NULL is NULL
        return pc.if_else(found, True, no_answer)
    return pc.if_else(pc.is_null(x), no_answer, found)


def _like_pattern(pattern: str, escape: str | None, node: exp.Expr) -> str:
    """A LIKE pattern with escape character `escape` in Arrow's backslash-escape syntax."""
    if escape is None:
        escape = "\\"
    if len(escape) > 1:
        raise _err("invalid escape string", "22025", node)
    out = []
    chars = iter(pattern)
    for c in chars:
        if escape and c == escape:
            nxt = next(chars, None)
            if nxt is None:
                raise _err("LIKE pattern must not end with escape character", "22025", node)
            out.append("\\" + nxt if nxt in "%_\\" else nxt)
        elif c == "\\":
            out.append("\\\\")
        else:
            out.append(c)
    return "".join(out)


def _like(node: exp.Like | exp.ILike, ctx: _Ctx, escape: exp.Expr | None) -> Value:
    s = _eval(node.this, ctx)
    p = _eval(node.expression, ctx)
    op = "~~*" if isinstance(node, exp.ILike) else "~~"
    if _kind(s.type) not in ("string", "null") or _kind(p.type) not in ("string", "null"):
        raise _err(f"operator does not exist: {_pg_name(s.type)} {op} {_pg_name(p.type)}",
                   "42883", node)
    if not isinstance(p, pa.Scalar):
        raise FeatureNotSupported("LIKE with a non-constant pattern is not supported",
                                  position=_position(node.expression))
    esc = None
    if escape is not None:
        e = _eval(escape, ctx)
        if not isinstance(e, pa.Scalar) or _kind(e.type) not in ("string", "null"):
            raise FeatureNotSupported("ESCAPE must be a constant string",
                                      position=_position(escape))
        if not e.is_valid:
            return _null_of(pa.bool_())
        esc = e.as_py()
    if not p.is_valid or _kind(s.type) == "null":
        return _null_of(pa.bool_())
    r = pc.match_like(s, pattern=_like_pattern(p.as_py(), esc, node),
                      ignore_case=isinstance(node, exp.ILike))
    return pc.invert(r) if node.args.get("negate") else r


@_handles(exp.Like, exp.ILike)
def _like_node(node: exp.Like | exp.ILike, ctx: _Ctx) -> Value:
    return _like(node, ctx, None)


@_handles(exp.Escape)
def _escape(node: exp.Escape, ctx: _Ctx) -> Value:
    inner = node.this
    negate = False
    if isinstance(inner, exp.Not):
        inner, negate = inner.this, True
    if not isinstance(inner, (exp.Like, exp.ILike)):
        raise FeatureNotSupported(f"unsupported ESCAPE: {node.sql()}", position=_position(node))
    r = _like(inner, ctx, node.expression)
    return pc.invert(r) if negate else r


@_handles(exp.RegexpLike, exp.RegexpILike)
def _regexp(node: exp.Binary, ctx: _Ctx) -> Value:
    s = _string_arg(_eval(node.this, ctx), "~", node.this)
    p = _const_arg(_eval(node.expression, ctx), "regular expression", node.expression)
    if p is None or _kind(s.type) == "null":
        return _null_of(pa.bool_())
    return pc.match_substring_regex(s, pattern=p,
                                    ignore_case=isinstance(node, exp.RegexpILike))


# -- arithmetic ------------------------------------------------------------------------------


_ARITH_OPS = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%",
              exp.IntDiv: "//"}


@_handles(*_ARITH_OPS)
def _arith_node(node: exp.Binary, ctx: _Ctx) -> Value:
    op = _ARITH_OPS[type(node)]
    a_node, b_node = node.this, node.expression
    a, b = _eval(a_node, ctx), _eval(b_node, ctx)
    return _arith(op, a, a_node, b, b_node, node)


def _arith(op: str, a: Value, a_node: exp.Expr, b: Value, b_node: exp.Expr,
           node: exp.Expr) -> Value:
    ka, kb = _kind(a.type), _kind(b.type)
    # An unknown literal takes the other operand's type, as PostgreSQL first tries; only
    # date/timestamp + '...' (no date + date) reads it as an interval.
    if _is_unknown_literal(a_node) and kb not in ("string", "null"):
        a = _cast(a, _INTERVAL if kb in ("date", "timestamp") and op == "+" else b.type, a_node)
    elif _is_unknown_literal(b_node) and ka not in ("string", "null"):
        b = _cast(b, _INTERVAL if ka in ("date", "timestamp") and op == "+" else a.type, b_node)
    ka, kb = _kind(a.type), _kind(b.type)
    if ka == "null" and kb == "null":
        return pa.scalar(None)
    # NULL takes the other operand's type where that operator exists, as PostgreSQL first
    # tries (date - NULL is date - date: an integer; timestamp - NULL an interval), else
    # the type that makes it exist (date + NULL is date + integer).
    if ka == "null":
        a, ka = a.cast(b.type), kb
    elif kb == "null":
        partner = a.type if op == "-" else {"date": pa.int64(),
                                            "timestamp": _INTERVAL}.get(ka, a.type)
        b, kb = b.cast(partner), _kind(partner)
    if ka in _NUMERIC and kb in _NUMERIC:
        return _numeric_arith(op, a, b, node)
    fn = _TEMPORAL_ARITH.get((ka, op, kb))
    if fn is not None:
        return fn(a, b, node)
    raise _err(f"operator does not exist: {_pg_name(a.type)} {op if op != '//' else '/'} "
               f"{_pg_name(b.type)}", "42883", node)


_INT_KERNELS = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}
_FLOAT_KERNELS = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}


def _numeric_arith(op: str, a: Value, b: Value, node: exp.Expr) -> Value:
    kinds = {_kind(a.type), _kind(b.type)}
    if "float" in kinds:
        a, b = _f64(a), _f64(b)
        if op in _FLOAT_KERNELS:
            return _FLOAT_KERNELS[op](a, b)
        _check_nonzero(b, node)
        q = pc.divide(a, b)
        if op == "/":
            return q
        t = pc.trunc(q)
        return t if op == "//" else pc.subtract(a, pc.multiply(b, t))
    if "decimal" in kinds:
        if _kind(a.type) == "int":
            a = _int_to_decimal(a)
        if _kind(b.type) == "int":
            b = _int_to_decimal(b)
        return _decimal_arith(op, a, b, node)
    a, b = a.cast(pa.int64()), b.cast(pa.int64())
    if op in _INT_KERNELS:
        return _INT_KERNELS[op](a, b)
    q = pc.divide_checked(a, b)  # truncates toward zero; raises on a zero divisor
    return q if op in ("/", "//") else pc.subtract(a, pc.multiply(b, q))


def _check_nonzero(b: Value, node: exp.Expr) -> None:
    zero = (b.is_valid and b.as_py() == 0) if isinstance(b, pa.Scalar) else (
        pc.any(pc.equal(b, pa.scalar(0, b.type))).as_py())
    if zero:
        raise _err("division by zero", "22012", node)


def _max_unscaled_digits(v: Value) -> int:
    """Digits of the largest |unscaled value| in a decimal value (1 when all null)."""
    if isinstance(v, pa.Scalar):
        values = [v.as_py()]
    else:
        mm = pc.min_max(v)
        values = [mm["min"].as_py(), mm["max"].as_py()]
    scale = v.type.scale
    unscaled = [abs(int(d.scaleb(scale, context=_DECIMAL_CTX))) for d in values if d is not None]
    return max([_digits(u) for u in unscaled] + [1])


def _shrink(v: Value) -> Value:
    """Relabel a decimal with the smallest precision its data needs (no data is touched)."""
    t = v.type
    p = max(_max_unscaled_digits(v), t.scale, 1)
    if p >= t.precision:
        return v
    new = pa.decimal128(p, t.scale) if t.bit_width == 128 else pa.decimal256(p, t.scale)
    return _view(v, new)


def _decimal_result_type(op: str, t1: pa.DataType, t2: pa.DataType) -> pa.DataType:
    p1, s1, p2, s2 = t1.precision, t1.scale, t2.precision, t2.scale
    if op in "+-":
        s = max(s1, s2)
        return _cap(max(p1 - s1, p2 - s2) + s + 1, s)
    if op == "*":
        return _cap(p1 + p2 + 1, s1 + s2)
    if op == "/":
        s = max(_MIN_ADJUSTED_SCALE, s1 + p2 + 1)
        return _cap(p1 - s1 + s2 + s, s)
    if op == "//":
        return _cap(p1 - s1 + s2 + 1, 0)
    s = max(s1, s2)  # %
    return _cap(min(p1 - s1, p2 - s2) + s, s)


def _arrow_decimal_type(op: str, t1: pa.DataType, t2: pa.DataType) -> tuple[int, int]:
    """(precision, scale) Arrow's kernel gives (uncapped); see Arrow's decimal promotion."""
    p1, s1, p2, s2 = t1.precision, t1.scale, t2.precision, t2.scale
    if op in "+-":
        s = max(s1, s2)
        return max(p1 - s1, p2 - s2) + s + 1, s
    if op == "*":
        return p1 + p2 + 1, s1 + s2
    s = max(4, s1 + p2 - s2 + 1)  # divide
    return p1 - s1 + s2 + s, s


def _as_width(v: Value, bits: int) -> Value:
    t = v.type
    if t.bit_width == bits:
        return v
    return v.cast(pa.decimal256(t.precision, t.scale) if bits == 256
                  else pa.decimal128(t.precision, t.scale))


def _decimal_kernel(op: str, a: Value, b: Value, node: exp.Expr) -> Value:
    """Arrow's decimal kernel for + - * /, on widths where its exact result cannot overflow."""
    p, _ = _arrow_decimal_type(op, a.type, b.type)
    if p > _MAX_PRECISION:
        a, b = _shrink(a), _shrink(b)
        p, _ = _arrow_decimal_type(op, a.type, b.type)
    if p > _MAX_PRECISION_256:
        p_a, p_b = a.type.precision, b.type.precision
        if op == "*" and p_a + p_b <= _MAX_PRECISION_256:  # |a * b| < 10**76 always fits
            label = min(p_a, _MAX_PRECISION_256 - 2)
            return _unchecked_product(a, label, b, _MAX_PRECISION_256 - 1 - label)
        raise _err("numeric field overflow", "22003", node)
    bits = 128 if p <= _MAX_PRECISION else 256
    a, b = _as_width(a, bits), _as_width(b, bits)
    kernel = {"+": pc.add, "-": pc.subtract, "*": pc.multiply, "/": pc.divide}[op]
    return kernel(a, b)


def _decimal_arith(op: str, a: Value, b: Value, node: exp.Expr) -> Value:
    target = _decimal_result_type(op, a.type, b.type)
    if op in "+-*":
        return _decimal_to_decimal(_decimal_kernel(op, a, b, node), target, node)
    if op == "/":
        return _decimal_to_decimal(_decimal_quotient(a, b, target.scale + 1, node), target,
                                   node)
    # % and //: integer arithmetic on the unscaled values at the common scale s.
    s = max(a.type.scale, b.type.scale)
    ia, ib = _unscaled(_upscale(a, s, node)), _unscaled(_upscale(b, s, node))
    q = _decimal_quotient(ia, ib, 0, node)
    q = _round(q, 0, "towards_zero")
    q = _decimal_to_decimal(q, _decimal_type(max(q.type.precision - q.type.scale, 1), 0), node)
    if op == "//":
        return _decimal_to_decimal(q, target, node)
    r = _decimal_kernel("-", ia, _product_bounded_by(ib, q, node), node)
    return _decimal_to_decimal(_relabel(r, s, node), target, node)


def _product_bounded_by(b: Value, q: Value, node: exp.Expr) -> Value:
    """b * q for q = trunc(a / b), exact: |b * q| <= |a| row by row, although the largest b
    and the largest q (from different rows) may together exceed decimal256's 76 digits.

    Arrow's decimal kernels multiply the stored integers without checking them against the
    declared precision, so the operands are relabelled (unchecked views) with precisions
    whose sum fits; every actual product still fits, since |a| has at most 75 digits.
    """
    p, _ = _arrow_decimal_type("*", b.type, q.type)
    if p <= _MAX_PRECISION_256:
        return _decimal_kernel("*", b, q, node)
    return _unchecked_product(b, _MAX_PRECISION, q, _MAX_PRECISION_256 - _MAX_PRECISION - 1)


def _unchecked_product(a: Value, label_a: int, b: Value, label_b: int) -> Value:
    """a * b on decimal256 with the operands labelled precision label_a and label_b (sum 75),
    whatever digits they hold: the caller guarantees every product fits in 76 digits."""
    def relabel(v: Value, precision: int) -> Value:
        return _view(_as_width(v, 256), pa.decimal256(precision, v.type.scale))

    return pc.multiply(relabel(a, label_a), relabel(b, label_b))


def _upscale(v: Value, scale: int, node: exp.Expr) -> Value:
    t = v.type
    if t.scale >= scale:
        return v
    return _cast_checked(v, _decimal_type(t.precision + scale - t.scale, scale), node)


def _unscaled(v: Value) -> Value:
    """The unscaled integers of a decimal (a zero-copy view at scale 0), minimal precision."""
    t = v.type
    width = pa.decimal128 if t.bit_width == 128 else pa.decimal256
    return _shrink(_view(v, width(t.precision, 0)))


def _relabel(v: Value, scale: int, node: exp.Expr) -> Value:
    """The same unscaled integers read at another scale (the value times 10**(old - new))."""
    t = v.type
    p = max(t.precision, scale, 1)
    if p > _MAX_PRECISION_256:
        raise _err("numeric field overflow", "22003", node)
    if t.bit_width == 128 and p > _MAX_PRECISION:
        v = _as_width(v, 256)
    return _view(v, (pa.decimal128 if v.type.bit_width == 128 else pa.decimal256)(p, scale))


def _decimal_quotient(a: Value, b: Value, min_scale: int, node: exp.Expr) -> Value:
    """a / b truncated toward zero at a scale of at least `min_scale` (22012 on b = 0).

    Divides the unscaled integers, a / b = (A / B) * 10**(s2 - s1), so the declared scales
    do not inflate the precision of Arrow's kernel (whose quotient scale is max(4, pB + 1)
    for integer operands, and whose dividend it widens by that many digits).
    """
    _check_nonzero(b, node)
    shift = b.type.scale - a.type.scale
    ia, ib = _unscaled(a), _unscaled(b)
    need = max(min_scale + shift, shift, 0)  # scale of A / B
    k = need - (ib.type.precision + 1)
    if k > 0:
        ia = _upscale(ia, k, node)
    p, _ = _arrow_decimal_type("/", ia.type, ib.type)
    if p > _MAX_PRECISION_256:
        q = _python_quotient(ia, ib, need)
    else:
        q = _decimal_kernel("/", ia, ib, node)
    return _relabel(q, q.type.scale - shift, node)


def _python_quotient(a: Value, b: Value, scale: int) -> Value:
    """Truncated a / b with Python's decimal: only for operands that both carry 38
    significant digits, which no Arrow kernel can divide exactly (per row, but rare)."""
    quantum = decimal.Decimal(1).scaleb(-scale)
    t = pa.decimal256(_MAX_PRECISION_256, scale)

    def quotient(x: decimal.Decimal | None, y: decimal.Decimal | None) -> decimal.Decimal | None:
        if x is None or y is None:
            return None
        return _DECIMAL_CTX.divide(x, y).quantize(quantum, rounding=decimal.ROUND_DOWN,
                                                  context=_DECIMAL_CTX)

    if isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar):
        return pa.scalar(quotient(a.as_py(), b.as_py()), t)
    n = len(b) if isinstance(a, pa.Scalar) else len(a)
    xs, ys = _broadcast(a, n).to_pylist(), _broadcast(b, n).to_pylist()
    return pa.array([quotient(x, y) for x, y in zip(xs, ys)], t)


@_handles(exp.Neg)
def _neg(node: exp.Neg, ctx: _Ctx) -> Value:
    v = _eval(node.this, ctx)
    k = _kind(v.type)
    if k == "int":
        return pc.negate_checked(v.cast(pa.int64()))
    if k in ("float", "decimal"):
        return pc.negate(v)
    if k == "null":
        return v
    if k == "interval" and isinstance(v, pa.Scalar):
        m, d, us = _interval_parts(v)
        return _interval_scalar(-m, -d, -us)
    raise _err(f"operator does not exist: - {_pg_name(v.type)}", "42883", node)


# -- dates, timestamps and intervals ---------------------------------------------------------

_UNIT_ALIASES = {
    "y": "year", "yr": "year", "yrs": "year", "year": "year", "years": "year",
    "quarter": "quarter", "quarters": "quarter", "qtr": "quarter",
    "mon": "month", "mons": "month", "month": "month", "months": "month",
    "w": "week", "week": "week", "weeks": "week",
    "d": "day", "day": "day", "days": "day",
    "h": "hour", "hr": "hour", "hrs": "hour", "hour": "hour", "hours": "hour",
    "m": "minute", "min": "minute", "mins": "minute", "minute": "minute", "minutes": "minute",
    "s": "second", "sec": "second", "secs": "second", "second": "second", "seconds": "second",
    "ms": "millisecond", "msec": "millisecond", "millisecond": "millisecond",
    "milliseconds": "millisecond", "us": "microsecond", "usec": "microsecond",
    "microsecond": "microsecond", "microseconds": "microsecond",
    "decade": "decade", "decades": "decade", "century": "century", "centuries": "century",
    "millennium": "millennium", "millennia": "millennium", "millenniums": "millennium",
}

# unit -> (months, days, microseconds) per unit
_UNIT_SIZES = {
    "millennium": (12000, 0, 0), "century": (1200, 0, 0), "decade": (120, 0, 0),
    "year": (12, 0, 0), "quarter": (3, 0, 0), "month": (1, 0, 0), "week": (0, 7, 0),
    "day": (0, 1, 0), "hour": (0, 0, 3_600_000_000), "minute": (0, 0, 60_000_000),
    "second": (0, 0, 1_000_000), "millisecond": (0, 0, 1_000), "microsecond": (0, 0, 1),
}

_INTERVAL_TOKEN = re.compile(
    r"\s*(?:(?P<tsign>[+-]?)(?P<h>\d+):(?P<mi>\d+)(?::(?P<sec>\d+(?:\.\d*)?))?"
    r"|(?P<num>[+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*(?P<unit>[a-z]+)?|(?P<ago>ago))\s*")


def _parse_interval(text: str, unit: str | None, node: exp.Expr | None) -> tuple[int, int, int]:
    """PostgreSQL interval input ('3', unit MONTH; '1 year 2 mons'; '1 day 02:00') ->
    (months, days, microseconds). Fractions spill into smaller units as PostgreSQL does
    (a month is 30 days, a day 24 hours)."""
    def bad() -> SqlError:
        return _err(f'invalid input syntax for type interval: "{text}"', "22007", node)

    months = days = us = 0
    negate = False
    pos, s = 0, text.strip().lower()
    if not s:
        raise bad()
    while pos < len(s):
        m = _INTERVAL_TOKEN.match(s, pos)
        if m is None or m.end() == pos:
            raise bad()
        pos = m.end()
        if m.group("ago"):
            negate = True
        elif m.group("h") is not None:
            sign = -1 if m.group("tsign") == "-" else 1
            sec = decimal.Decimal(m.group("sec") or 0)
            us += sign * int((int(m.group("h")) * 3600 + int(m.group("mi")) * 60 + sec)
                             * 1_000_000)
        else:
            name = m.group("unit") or unit
            canonical = _UNIT_ALIASES.get((name or "second").lower())
            if canonical is None:
                raise bad()
            dm, dd, dus = _add_scaled(decimal.Decimal(m.group("num")),
                                      _UNIT_SIZES[canonical])
            months, days, us = months + dm, days + dd, us + dus
    if negate:
        months, days, us = -months, -days, -us
    return months, days, us


def _add_scaled(n: decimal.Decimal, size: tuple[int, int, int]) -> tuple[int, int, int]:
    m_size, d_size, us_size = size
    months = n * m_size
    whole_m = int(months)
    days = n * d_size + (months - whole_m) * 30
    whole_d = int(days)
    us = n * us_size + (days - whole_d) * _US_PER_DAY
    return whole_m, whole_d, int(us.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def _interval_scalar(months: int, days: int, us: int) -> pa.Scalar:
    return pa.scalar(pa.MonthDayNano([months, days, us * 1000]), _INTERVAL)


def _interval_parts(v: pa.Scalar) -> tuple[int, int, int]:
    mdn = v.as_py()
    return mdn.months, mdn.days, mdn.nanoseconds // 1000


def _interval_text(months: int, days: int, us: int) -> str:
    """PostgreSQL's output style: '1 year 2 mons 3 days 04:05:06'."""
    parts = []
    years, mons = int(months / 12), months - 12 * int(months / 12)
    for n, unit in ((years, "year"), (mons, "mon"), (days, "day")):
        if n:
            parts.append(f"{n} {unit}{'s' if abs(n) != 1 else ''}")
    if us or not parts:
        sign = "-" if us < 0 else ""
        secs, frac = divmod(abs(us), 1_000_000)
        text = f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
        parts.append(text + (f".{frac:06d}".rstrip("0") if frac else ""))
    return " ".join(parts)


@_handles(exp.Interval)
def _interval(node: exp.Interval, ctx: _Ctx) -> Value:
    v = node.this
    unit = node.args.get("unit")
    unit_name = unit.name if unit is not None else None
    if not isinstance(v, exp.Literal):
        raise FeatureNotSupported("INTERVAL needs a literal", position=_position(node))
    return _interval_scalar(*_parse_interval(str(v.this), unit_name, node))


# Calendar arithmetic runs on float64 arrays: numpy's int64 floor division is not vectorised
# and is ~10x slower, while every intermediate here is an integer far below 2**53, so float
# quotients floor exactly.


def _fdiv(a: np.ndarray, c: int) -> np.ndarray:
    return np.floor(a / c)


def _civil_from_days(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Days since 1970-01-01 -> proleptic Gregorian (year, month, day); H. Hinnant's algorithm."""
    z = z + 719_468.0
    era = _fdiv(z, 146_097)
    doe = z - era * 146_097
    yoe = _fdiv(doe - _fdiv(doe, 1460) + _fdiv(doe, 36_524) - _fdiv(doe, 146_096), 365)
    doy = doe - (365 * yoe + _fdiv(yoe, 4) - _fdiv(yoe, 100))
    mp = _fdiv(5 * doy + 2, 153)
    day = doy - _fdiv(153 * mp + 2, 5) + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    return yoe + era * 400 + (month <= 2), month, day


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    y = y - (m <= 2)
    era = _fdiv(y, 400)
    yoe = y - era * 400
    mp = np.where(m > 2, m - 3, m + 9)
    doy = _fdiv(153 * mp + 2, 5) + d - 1
    doe = yoe * 365 + _fdiv(yoe, 4) - _fdiv(yoe, 100) + doy
    return era * 146_097 + doe - 719_468


_MONTH_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.float64)


def _add_months_days(days: np.ndarray, months: int) -> np.ndarray:
    """Days since epoch (int64) + `months` calendar months, clamped to the month end."""
    y, m, d = _civil_from_days(days.astype(np.float64))
    total = y * 12 + (m - 1) + months
    y = _fdiv(total, 12)
    m = total - y * 12 + 1
    leap = (np.fmod(y, 4) == 0) & ((np.fmod(y, 100) != 0) | (np.fmod(y, 400) == 0))
    month_len = _MONTH_DAYS[(m - 1).astype(np.int64)] + ((m == 2) & leap)
    return _days_from_civil(y, m, np.minimum(d, month_len)).astype(np.int64)


def _shift_days_by_months(days: np.ndarray, months: int) -> np.ndarray:
    """`_add_months_days`, through a lookup table over the value range when that is shorter
    than the input (dates cluster: TPC-H's span 2,500 days for 6M rows)."""
    if not len(days):
        return days
    lo, hi = int(days.min()), int(days.max())
    if hi - lo >= len(days):
        return _add_months_days(days, months)
    table = _add_months_days(np.arange(lo, hi + 1, dtype=np.int64), months)
    return table[days - lo]


def _shift_dates(a: pa.Array, months: int, days: int) -> pa.Array:
    vals, mask = _to_numpy(a.cast(pa.int32()), "int64")
    if months:
        vals = _shift_days_by_months(vals, months)
    vals = vals + days
    if len(vals) and (vals.min() < -(2**31) or vals.max() >= 2**31):
        raise SqlError("date out of range", "22008")
    return pa.array(vals.astype(np.int32), mask=mask).cast(pa.date32())


def _shift_timestamps(a: pa.Array, months: int, days: int, us: int) -> pa.Array:
    unit_type = a.type
    vals, mask = _to_numpy(a.cast(pa.int64()), "int64")
    if months:
        day, tod = np.divmod(vals, _US_PER_DAY)
        vals = _shift_days_by_months(day, months) * _US_PER_DAY + tod
    vals = vals + (days * _US_PER_DAY + us)
    return pa.array(vals, mask=mask).cast(unit_type)


def _temporal_plus_interval(t: Value, iv: Value, node: exp.Expr, sign: int = 1) -> Value:
    if not isinstance(iv, pa.Scalar):
        raise FeatureNotSupported("arithmetic with an interval column is not supported",
                                  position=_position(node))
    if not iv.is_valid:
        return _null_of(t.type)
    months, days, us = (sign * x for x in _interval_parts(iv))
    if _kind(t.type) == "date" and us == 0:
        return _per_array(lambda a: _shift_dates(a, months, days), t)
    ts = t.cast(_TS) if _kind(t.type) == "date" or t.type.unit != "us" else t
    return _per_array(lambda a: _shift_timestamps(a, months, days, us), ts)


def _date_plus_int(d: Value, n: Value, node: exp.Expr, sign: int = 1) -> Value:
    n = n.cast(pa.int64())
    days = d.cast(pa.int32()).cast(pa.int64())
    r = pc.add_checked(days, n) if sign > 0 else pc.subtract_checked(days, n)
    return _cast_checked(r, pa.int32(), node).cast(pa.date32())


def _date_minus_date(a: Value, b: Value, node: exp.Expr) -> Value:
    return pc.subtract(a.cast(pa.int32()).cast(pa.int64()), b.cast(pa.int32()).cast(pa.int64()))


def _timestamp_minus_timestamp(a: Value, b: Value, node: exp.Expr) -> Value:
    """An interval of whole days plus time, both with the sign of the difference."""
    a, b = a.cast(_TS), b.cast(_TS)
    diff = pc.subtract_checked(a.cast(pa.int64()), b.cast(pa.int64()))

    def to_interval(arr: pa.Array) -> pa.Array:
        vals, mask = _to_numpy(arr, "int64")
        days = np.trunc(vals / _US_PER_DAY).astype(np.int64)
        rest = vals - days * _US_PER_DAY
        buf = np.zeros(len(vals), dtype=[("m", "<i4"), ("d", "<i4"), ("ns", "<i8")])
        buf["d"], buf["ns"] = days, rest * 1000
        validity = None if mask is None else pa.array(~mask).buffers()[1]
        return pa.Array.from_buffers(_INTERVAL, len(vals), [validity, pa.py_buffer(buf)])

    return _per_array(to_interval, diff)


def _interval_arith(op: str) -> Callable[[Value, Value, exp.Expr], Value]:
    def fn(a: Value, b: Value, node: exp.Expr) -> Value:
        if not (isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar)):
            raise FeatureNotSupported("arithmetic with an interval column is not supported",
                                      position=_position(node))
        if not (a.is_valid and b.is_valid):
            return _null_of(_INTERVAL)
        if op in "+-":
            sign = 1 if op == "+" else -1
            return _interval_scalar(*(x + sign * y for x, y in
                                      zip(_interval_parts(a), _interval_parts(b))))
        iv, n = (a, b) if _kind(a.type) == "interval" else (b, a)
        factor = decimal.Decimal(str(n.as_py()))
        if op == "/":
            if factor == 0:
                raise _err("division by zero", "22012", node)
            factor = 1 / factor
        m, d, us = _interval_parts(iv)
        dm, dd, dus = _add_scaled(factor * m, (1, 0, 0))
        em, ed, eus = _add_scaled(factor * d, (0, 1, 0))
        return _interval_scalar(dm + em, dd + ed, dus + eus + int(factor * us))
    return fn


_TEMPORAL_ARITH: dict[tuple[str, str, str], Callable[[Value, Value, exp.Expr], Value]] = {
    ("date", "+", "int"): _date_plus_int,
    ("int", "+", "date"): lambda a, b, node: _date_plus_int(b, a, node),
    ("date", "-", "int"): lambda a, b, node: _date_plus_int(a, b, node, -1),
    ("date", "-", "date"): _date_minus_date,
    ("date", "-", "timestamp"): _timestamp_minus_timestamp,
    ("timestamp", "-", "date"): _timestamp_minus_timestamp,
    ("timestamp", "-", "timestamp"): _timestamp_minus_timestamp,
    ("interval", "+", "interval"): _interval_arith("+"),
    ("interval", "-", "interval"): _interval_arith("-"),
    **{(k, op, n): _interval_arith(op) for k, op, n in
       [("interval", "*", "int"), ("interval", "*", "decimal"), ("interval", "*", "float"),
        ("int", "*", "interval"), ("decimal", "*", "interval"), ("float", "*", "interval"),
        ("interval", "/", "int"), ("interval", "/", "decimal"), ("interval", "/", "float")]},
    **{(k, "+", "interval"): _temporal_plus_interval for k in ("date", "timestamp")},
    **{("interval", "+", k): (lambda a, b, node: _temporal_plus_interval(b, a, node))
       for k in ("date", "timestamp")},
    **{(k, "-", "interval"): (lambda a, b, node: _temporal_plus_interval(a, b, node, -1))
       for k in ("date", "timestamp")},
}


def _temporal_arg(v: Value, node: exp.Expr, what: str) -> Value:
    """A date / timestamp / interval argument; an unknown literal is read as a timestamp."""
    if _is_unknown_literal(node):
        return _cast(v, _TS, node)
    if _kind(v.type) not in ("date", "timestamp", "interval", "null"):
        _no_function(what, [node], _Ctx(pa.table({})), _position(node))
    return v


def _interval_field(v: Value, unit: str, node: exp.Expr) -> Value:
    if not isinstance(v, pa.Scalar):
        def parts(a: pa.Array) -> pa.Array:
            raw = np.frombuffer(a.buffers()[1], dtype=[("m", "<i4"), ("d", "<i4"),
                                                       ("ns", "<i8")])[a.offset:a.offset + len(a)]
            out = _interval_field_np(raw["m"].astype(np.int64), raw["d"].astype(np.int64),
                                     raw["ns"] // 1000, unit, node)
            return pa.array(out, mask=a.is_null().to_numpy(zero_copy_only=False)
                            if a.null_count else None)
        return _per_array(parts, v)
    if not v.is_valid:
        return _null_of(pa.float64() if unit in ("epoch", "second") else pa.int64())
    m, d, us = _interval_parts(v)
    out = _interval_field_np(np.array([m]), np.array([d]), np.array([us]), unit, node)
    return pa.scalar(out[0].item())


def _interval_field_np(m: np.ndarray, d: np.ndarray, us: np.ndarray, unit: str,
                       node: exp.Expr) -> np.ndarray:
    years = np.trunc(m / 12).astype(np.int64)
    fields = {
        "year": lambda: years, "month": lambda: m - 12 * years, "day": lambda: d,
        "quarter": lambda: (m - 12 * years) // 3 + 1,
        "hour": lambda: np.trunc(us / 3_600_000_000).astype(np.int64),
        "minute": lambda: np.trunc(us / 60_000_000).astype(np.int64) % 60,
        "second": lambda: np.fmod(us, 60_000_000) / 1e6,
        "epoch": lambda: (years * 365.25 * 86400 + (m - 12 * years) * 30 * 86400
                          + d * 86400 + us / 1e6),
    }
    if unit not in fields:
        raise _err(f'unit "{unit}" not supported for type interval', "0A000", node)
    return np.asarray(fields[unit]())


_EXTRACT = {
    "year": pc.year, "month": pc.month, "day": pc.day, "quarter": pc.quarter,
    "hour": pc.hour, "minute": pc.minute, "week": pc.iso_week, "isoyear": pc.iso_year,
    "doy": pc.day_of_year,
    "dow": lambda v: pc.day_of_week(v, count_from_zero=True, week_start=7),
    "isodow": lambda v: pc.day_of_week(v, count_from_zero=False, week_start=1),
}
_EXTRACT_ALIASES = {"years": "year", "months": "month", "days": "day", "hours": "hour",
                    "minutes": "minute", "seconds": "second", "dayofweek": "dow",
                    "dayofyear": "doy", "weeks": "week", "quarters": "quarter",
                    "milliseconds": "millisecond", "microseconds": "microsecond"}


@_handles(exp.Extract)
def _extract(node: exp.Extract, ctx: _Ctx) -> Value:
    unit = node.this.name.lower()
    unit = _EXTRACT_ALIASES.get(unit, unit)
    arg = node.expression
    v = _temporal_arg(_eval(arg, ctx), arg, "extract")
    k = _kind(v.type)
    if k == "interval":
        return _interval_field(v, unit, node)
    if k == "null":
        return _null_of(pa.int64())
    if unit in _EXTRACT:
        return _EXTRACT[unit](v)
    if unit == "decade":
        return pc.divide(pc.year(v), 10)  # PostgreSQL floors; years here are positive
    if unit in ("century", "millennium"):
        span = 100 if unit == "century" else 1000
        return pc.add(pc.divide(pc.subtract(pc.year(v), 1), span), 1)
    ts = v.cast(_TS) if k == "date" else v
    micros = pc.add(pc.multiply(pc.second(ts).cast(pa.int64()), 1_000_000),
                    pc.add(pc.multiply(pc.millisecond(ts).cast(pa.int64()), 1000),
                           pc.microsecond(ts).cast(pa.int64())))
    if unit == "second":
        return pc.divide(micros.cast(pa.float64()), 1e6)
    if unit == "millisecond":
        return pc.divide(micros.cast(pa.float64()), 1e3)
    if unit == "microsecond":
        return micros
    if unit == "epoch":
        return pc.divide(ts.cast(_TS).cast(pa.int64()).cast(pa.float64()), 1e6)
    raise _err(f'unit "{unit}" not supported for type {_pg_name(v.type)}', "0A000", node)


_TRUNC_UNITS = {"microsecond": ("microsecond", 1), "millisecond": ("millisecond", 1),
                "second": ("second", 1), "minute": ("minute", 1), "hour": ("hour", 1),
                "day": ("day", 1), "week": ("week", 1), "month": ("month", 1),
                "quarter": ("quarter", 1), "year": ("year", 1), "decade": ("year", 10)}


@_handles(exp.TimestampTrunc, exp.DateTrunc)
def _date_trunc(node: exp.Expr, ctx: _Ctx) -> Value:
    unit = _UNIT_ALIASES.get(node.args["unit"].name.lower())
    v = _temporal_arg(_eval(node.this, ctx), node.this, "date_trunc")
    if unit not in _TRUNC_UNITS:
        raise _err(f'unit "{node.args["unit"].name.lower()}" not recognized', "22023", node)
    if _kind(v.type) == "null":
        return _null_of(_TS)
    arrow_unit, multiple = _TRUNC_UNITS[unit]
    return pc.floor_temporal(v, multiple=multiple, unit=arrow_unit, week_starts_monday=True)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


@_handles(exp.CurrentDate)
def _current_date(node: exp.Expr, ctx: _Ctx) -> Value:
    return pa.scalar(_now().date(), pa.date32())


@_handles(exp.CurrentTimestamp, KuduNow, exp.Localtimestamp, exp.CurrentDatetime)
def _current_timestamp(node: exp.Expr, ctx: _Ctx) -> Value:
    return pa.scalar(_now(), _TS)


@_handles(exp.CurrentTime, exp.Localtime)
def _current_time(node: exp.Expr, ctx: _Ctx) -> Value:
    return pa.scalar(_now().time(), pa.time64("us"))


# -- conditionals ----------------------------------------------------------------------------


def _unify(values: list[Value], nodes: list[exp.Expr], what: str,
           node: exp.Expr) -> tuple[list[Value], pa.DataType]:
    """Cast values to one type; unknown literals adopt the others' type (else text)."""
    typed = [v for v, n in zip(values, nodes)
             if not _is_unknown_literal(n) and _kind(v.type) != "null"]
    if any(_kind(v.type) == "decimal" for v in typed):
        typed = [_int_to_decimal(v) if _kind(v.type) == "int" and isinstance(v, pa.Scalar)
                 else v for v in typed]
    if typed:
        t = _supertype([v.type for v in typed])
        if t is None:
            a, b = _first_mismatch([v.type for v in typed])
            raise _err(f"{what} types {_pg_name(a)} and {_pg_name(b)} cannot be matched",
                       "42804", node)
    elif any(_is_unknown_literal(n) for n in nodes):
        t = pa.string()
    else:
        t = pa.null()
    return [_widen(v, t, n) for v, n in zip(values, nodes)], t


def _first_mismatch(types: list[pa.DataType]) -> tuple[pa.DataType, pa.DataType]:
    for i, a in enumerate(types):
        for b in types[i + 1:]:
            if _supertype([a, b]) is None:
                return a, b
    return types[0], types[-1]


def _conditional(node: exp.Expr, ctx: _Ctx, arms: list[tuple[exp.Expr, exp.Expr]],
                 default: exp.Expr | None, subject: exp.Expr | None) -> Value:
    """CASE: each arm's condition and value only for the rows still undecided."""
    remaining: Value | None = None
    conds: list[Value] = []
    values: list[Value] = []
    value_nodes: list[exp.Expr] = []
    subject_value = _eval(subject, ctx) if subject is not None else None
    for when, then in arms:
        if subject is not None:
            a, b = _coerce_pair(subject_value, subject, _eval_where(when, ctx, remaining), when,
                                "=", node)
            c = _null_of(pa.bool_()) if _kind(a.type) == "null" else pc.equal(a, b)
        else:
            c = _boolean_arg(_eval_where(when, ctx, remaining), "CASE/WHEN", when)
        c = pc.fill_null(c, False)
        if remaining is not None:
            c = pc.and_(c, remaining)
        conds.append(c)
        values.append(_eval_where(then, ctx, c))
        value_nodes.append(then)
        remaining = pc.invert(c) if remaining is None else pc.and_not(remaining, c)
    if default is not None:
        values.append(_eval_where(default, ctx, remaining))
        value_nodes.append(default)
    else:
        values.append(pa.scalar(None))
        value_nodes.append(exp.Null())
    values, t = _unify(values, value_nodes, "CASE", node)
    if isinstance(t, ArrayType):                    # choose among the arrays' text forms
        values = [_storage(v) for v in values]
    result = values[-1]
    if _kind(t) == "null":
        return result
    for c, v in zip(reversed(conds), reversed(values[:-1])):
        result = pc.if_else(c, v, result)
    return _wrap(result, t) if isinstance(t, ArrayType) else result


@_handles(exp.Case)
def _case(node: exp.Case, ctx: _Ctx) -> Value:
    arms = [(i.this, i.args["true"]) for i in node.args.get("ifs") or []]
    return _conditional(node, ctx, arms, node.args.get("default"), node.this)


@_handles(exp.If)
def _if(node: exp.If, ctx: _Ctx) -> Value:
    return _conditional(node, ctx, [(node.this, node.args["true"])], node.args.get("false"),
                        None)


@_handles(exp.Coalesce)
def _coalesce(node: exp.Coalesce, ctx: _Ctx) -> Value:
    nodes = [node.this, *node.expressions]
    values: list[Value] = []
    missing: Value | None = None  # rows where every argument so far is NULL
    for n in nodes:
        v = _eval_where(n, ctx, missing)
        values.append(v)
        missing = pc.is_null(v) if missing is None else pc.and_(missing, pc.is_null(v))
    values, t = _unify(values, nodes, "COALESCE", node)
    if _kind(t) == "null" or len(values) == 1:
        return values[0]
    if isinstance(t, ArrayType):
        return _wrap(pc.coalesce(*[_storage(v) for v in values]), t)
    return pc.coalesce(*values)


@_handles(exp.Nullif)
def _nullif(node: exp.Nullif, ctx: _Ctx) -> Value:
    a, b = _coerce_pair(_eval(node.this, ctx), node.this, _eval(node.expression, ctx),
                        node.expression, "=", node)
    if _kind(a.type) == "null":
        return a
    same = pc.fill_null(pc.equal(a, b), False)
    return pc.if_else(same, _null_of(a.type), a)


@_handles(exp.Greatest, exp.Least)
def _greatest_least(node: exp.Func, ctx: _Ctx) -> Value:
    nodes = [node.this, *node.expressions]
    name = "GREATEST" if isinstance(node, exp.Greatest) else "LEAST"
    values, t = _unify([_eval(n, ctx) for n in nodes], nodes, name, node)
    if _kind(t) == "null":
        return values[0]
    fn = pc.max_element_wise if isinstance(node, exp.Greatest) else pc.min_element_wise
    return fn(*values, skip_nulls=True)


# -- strings ---------------------------------------------------------------------------------


def _string_arg(v: Value, fn: str, node: exp.Expr) -> Value:
    if _kind(v.type) in ("string", "null"):
        return v
    raise _err(f"function {fn}({_pg_name(v.type)}) does not exist", "42883", node)


def _text(v: Value, node: exp.Expr) -> Value:
    """Any value as text (for || and CONCAT)."""
    k = _kind(v.type)
    if k == "string":
        return v
    if k == "null":
        return v.cast(pa.string())
    return _cast(v, pa.string(), node)


def _const_arg(v: Value, what: str, node: exp.Expr) -> Any:
    """The Python value of an argument that must be constant (None for NULL)."""
    if not isinstance(v, pa.Scalar):
        raise FeatureNotSupported(f"a non-constant {what} is not supported",
                                  position=_position(node))
    return v.as_py()


def _int_arg(v: Value, what: str, node: exp.Expr) -> int | None:
    if _kind(v.type) not in ("int", "null", "decimal", "float"):
        raise _err(f"{what} must be an integer, not type {_pg_name(v.type)}", "42804", node)
    x = _const_arg(v, what, node)
    return None if x is None else int(_cast(v, pa.int64(), node).as_py())


@_handles(exp.DPipe)
def _dpipe(node: exp.DPipe, ctx: _Ctx) -> Value:
    a, b = _eval(node.this, ctx), _eval(node.expression, ctx)
    if "list" in (_kind(a.type), _kind(b.type)):
        return _array_cat(a, node.this, b, node.expression, node)
    a, b = _text(a, node.this), _text(b, node.expression)
    return pc.binary_join_element_wise(a, b, "")


@_handles(exp.Concat)
def _concat(node: exp.Concat, ctx: _Ctx) -> Value:
    parts = [_text(_eval(e, ctx), e) for e in node.expressions]
    return pc.binary_join_element_wise(*parts, "", null_handling="replace",
                                       null_replacement="")


@_handles(exp.ConcatWs)
def _concat_ws(node: exp.ConcatWs, ctx: _Ctx) -> Value:
    sep, *rest = [_text(_eval(e, ctx), e) for e in node.expressions]
    if not rest:
        return sep
    joined = pc.binary_join_element_wise(*rest, sep, null_handling="skip")
    return pc.if_else(pc.is_null(sep), _null_of(pa.string()), joined)


def _slice(s: Value, start: int, stop: int | None) -> Value:
    if _kind(s.type) == "binary":
        return pc.binary_slice(s, start, stop)
    return pc.utf8_slice_codeunits(s, start, stop)


@_handles(exp.Substring)
def _substring(node: exp.Substring, ctx: _Ctx) -> Value:
    s = _eval(node.this, ctx)
    if _kind(s.type) not in ("string", "binary", "null"):
        s = _string_arg(s, "substring", node.this)
    start = _int_arg(_eval(node.args["start"], ctx), "substring start", node)
    length_node = node.args.get("length")
    length = (_int_arg(_eval(length_node, ctx), "substring length", node)
              if length_node is not None else None)
    out_type = pa.string() if _kind(s.type) == "null" else s.type
    if start is None or (length_node is not None and length is None) or \
            _kind(s.type) == "null":
        return _null_of(out_type)
    if length is not None and length < 0:
        raise _err("negative substring length not allowed", "22011", node)
    # 1-based [start, start + length) clipped to the string: start < 1 eats into length.
    begin = max(start - 1, 0)
    stop = None if length is None else max(start - 1 + length, begin)
    return _slice(s, begin, stop)


@_handles(exp.Left, exp.Right)
def _left_right(node: exp.Binary, ctx: _Ctx) -> Value:
    fn = "left" if isinstance(node, exp.Left) else "right"
    s = _string_arg(_eval(node.this, ctx), fn, node.this)
    n = _int_arg(_eval(node.expression, ctx), f"{fn} length", node)
    if n is None or _kind(s.type) == "null":
        return _null_of(pa.string())
    if isinstance(node, exp.Left):  # n < 0: all but the last |n| characters
        return _slice(s, 0, n)
    # n > 0: the last n characters (start -n); n < 0: all but the first |n| (start |n|)
    return _slice(s, -n, None) if n != 0 else _slice(s, 0, 0)


@_handles(exp.Upper, exp.Lower)
def _upper_lower(node: exp.Func, ctx: _Ctx) -> Value:
    fn = "upper" if isinstance(node, exp.Upper) else "lower"
    s = _string_arg(_eval(node.this, ctx), fn, node.this)
    if _kind(s.type) == "null":
        return s.cast(pa.string())
    return (pc.utf8_upper if isinstance(node, exp.Upper) else pc.utf8_lower)(s)


@_handles(exp.Initcap)
def _initcap(node: exp.Initcap, ctx: _Ctx) -> Value:
    s = _string_arg(_eval(node.this, ctx), "initcap", node.this)
    return pc.utf8_title(pc.utf8_lower(s)) if _kind(s.type) != "null" else s


@_handles(exp.Length)
def _length(node: exp.Length, ctx: _Ctx) -> Value:
    s = _eval(node.this, ctx)
    k = _kind(s.type)
    if k == "binary":
        return pc.binary_length(s)
    s = _string_arg(s, "length", node.this)
    return pc.utf8_length(s) if k != "null" else _null_of(pa.int32())


@_handles(exp.Trim)
def _trim(node: exp.Trim, ctx: _Ctx) -> Value:
    s = _string_arg(_eval(node.this, ctx), "trim", node.this)
    chars_node = node.args.get("expression")
    chars = " "
    if chars_node is not None:
        chars = _const_arg(_eval(chars_node, ctx), "trim character set", chars_node)
        if chars is None:
            return _null_of(pa.string())
    if _kind(s.type) == "null":
        return s.cast(pa.string())
    position = (node.args.get("position") or "BOTH").upper()
    fn = {"LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}.get(position, pc.utf8_trim)
    return fn(s, characters=chars)


@_handles(exp.Replace)
def _replace(node: exp.Replace, ctx: _Ctx) -> Value:
    s = _string_arg(_eval(node.this, ctx), "replace", node.this)
    old = _const_arg(_eval(node.expression, ctx), "replace pattern", node.expression)
    new_node = node.args["replacement"]
    new = _const_arg(_eval(new_node, ctx), "replacement", new_node)
    if old is None or new is None or _kind(s.type) == "null":
        return _null_of(pa.string())
    if old == "":
        return s
    return pc.replace_substring(s, pattern=old, replacement=new)


@_handles(exp.StrPosition)
def _strpos(node: exp.StrPosition, ctx: _Ctx) -> Value:
    if node.args.get("position") or node.args.get("occurrence"):
        raise FeatureNotSupported("POSITION with a start or occurrence is not supported",
                                  position=_position(node))
    s = _string_arg(_eval(node.this, ctx), "strpos", node.this)
    sub_node = node.args["substr"]
    sub = _const_arg(_eval(sub_node, ctx), "search string", sub_node)
    if sub is None or _kind(s.type) == "null":
        return _null_of(pa.int32())
    if sub == "":
        return pc.if_else(pc.is_valid(s), pa.scalar(1, pa.int32()), _null_of(pa.int32()))
    ascii_only = (pc.string_is_ascii(s).as_py() if isinstance(s, pa.Scalar)
                  else pc.all(pc.string_is_ascii(s)).as_py() is not False)
    if ascii_only:  # byte offsets are character offsets
        return pc.add(pc.find_substring(s, pattern=sub), 1).cast(pa.int32())
    parts = pc.split_pattern(s, pattern=sub, max_splits=1)
    found = pc.equal(pc.list_value_length(parts), 2)
    before = pc.utf8_length(pc.list_element(parts, 0))
    return pc.if_else(found, pc.add(before, pa.scalar(1, pa.int32())), pa.scalar(0, pa.int32()))


@_handles(exp.Pad)
def _pad(node: exp.Pad, ctx: _Ctx) -> Value:
    left = bool(node.args.get("is_left"))
    fn = "lpad" if left else "rpad"
    s = _string_arg(_eval(node.this, ctx), fn, node.this)
    width = _int_arg(_eval(node.expression, ctx), f"{fn} length", node)
    fill_node = node.args.get("fill_pattern")
    fill = " " if fill_node is None else _const_arg(_eval(fill_node, ctx), "pad string",
                                                    fill_node)
    if width is None or fill is None or _kind(s.type) == "null":
        return _null_of(pa.string())
    width = max(width, 0)
    if len(fill) > 1:
        raise FeatureNotSupported("a multi-character pad string is not supported",
                                  position=_position(fill_node))
    if fill:
        s = (pc.utf8_lpad if left else pc.utf8_rpad)(s, width=width, padding=fill)
    return _slice(s, 0, width)  # PostgreSQL truncates strings longer than the width


@_handles(exp.Reverse)
def _reverse(node: exp.Reverse, ctx: _Ctx) -> Value:
    s = _string_arg(_eval(node.this, ctx), "reverse", node.this)
    return pc.utf8_reverse(s) if _kind(s.type) != "null" else s.cast(pa.string())


@_handles(exp.StartsWith)
def _starts_with(node: exp.StartsWith, ctx: _Ctx) -> Value:
    s = _string_arg(_eval(node.this, ctx), "starts_with", node.this)
    prefix = _const_arg(_eval(node.expression, ctx), "prefix", node.expression)
    if prefix is None or _kind(s.type) == "null":
        return _null_of(pa.bool_())
    return pc.starts_with(s, pattern=prefix)


@_handles(exp.Repeat)
def _repeat(node: exp.Repeat, ctx: _Ctx) -> Value:
    s = _string_arg(_eval(node.this, ctx), "repeat", node.this)
    n = _eval(node.args["times"], ctx)
    if _kind(n.type) != "int":
        raise _err(f"function repeat(text, {_pg_name(n.type)}) does not exist", "42883", node)
    if _kind(s.type) == "null":
        return s.cast(pa.string())
    return pc.binary_repeat(s, pc.max_element_wise(n.cast(pa.int64()), 0))


# -- math ------------------------------------------------------------------------------------


def _numeric_arg(v: Value, fn: str, node: exp.Expr) -> Value:
    if _is_unknown_literal(node):
        return _cast(v, pa.float64(), node)
    if _kind(v.type) in _NUMERIC:
        return v
    if _kind(v.type) == "null":
        return v.cast(pa.float64())
    raise _err(f"function {fn}({_pg_name(v.type)}) does not exist", "42883", node)


@_handles(exp.Abs)
def _abs(node: exp.Abs, ctx: _Ctx) -> Value:
    v = _numeric_arg(_eval(node.this, ctx), "abs", node.this)
    return pc.abs_checked(v.cast(pa.int64()) if _kind(v.type) == "int" else v)


def _decimal_places(node: exp.Expr, key: str, ctx: _Ctx) -> int:
    arg = node.args.get(key)
    if arg is None:
        return 0
    n = _int_arg(_eval(arg, ctx), "number of decimal places", arg)
    return 0 if n is None else n


def _round_to(v: Value, n: int, mode: str) -> Value:
    """Round (or truncate) to n decimal places; decimals get scale max(min(n, s), 0)."""
    k = _kind(v.type)
    if k == "int":
        return v.cast(pa.int64()) if n >= 0 else _round(v.cast(pa.int64()), n, mode)
    if k == "float":
        return _round(_f64(v), n, mode)
    p, s = v.type.precision, v.type.scale
    if n >= s:
        return v
    new_scale = max(n, 0)
    carry = 0 if mode == "towards_zero" else 1
    target = _cap(p - s + new_scale + carry, new_scale)
    return _cast_checked(_round(v, n, mode), target, None)


@_handles(exp.Round)
def _round_node(node: exp.Round, ctx: _Ctx) -> Value:
    v = _numeric_arg(_eval(node.this, ctx), "round", node.this)
    return _round_to(v, _decimal_places(node, "decimals", ctx), _HALF_AWAY)


@_handles(exp.Trunc)
def _trunc(node: exp.Trunc, ctx: _Ctx) -> Value:
    v = _numeric_arg(_eval(node.this, ctx), "trunc", node.this)
    return _round_to(v, _decimal_places(node, "decimals", ctx), "towards_zero")


@_handles(exp.Floor, exp.Ceil)
def _floor_ceil(node: exp.Func, ctx: _Ctx) -> Value:
    is_floor = isinstance(node, exp.Floor)
    v = _numeric_arg(_eval(node.this, ctx), "floor" if is_floor else "ceil", node.this)
    k = _kind(v.type)
    if k == "int":
        return v.cast(pa.int64())
    r = _round(v, 0, "down" if is_floor else "up")
    if k == "float":
        return r
    p, s = v.type.precision, v.type.scale
    return _cast_checked(r, _cap(p - s + 1, 0), node)


@_handles(exp.Sign)
def _sign(node: exp.Sign, ctx: _Ctx) -> Value:
    return pc.sign(_numeric_arg(_eval(node.this, ctx), "sign", node.this))


def _float_fn(name: str, kernel: Callable[[Value], Value]) -> Handler:
    def handler(node: exp.Func, ctx: _Ctx) -> Value:
        v = _numeric_arg(_eval(node.this, ctx), name, node.this)
        return kernel(_f64(v))
    return handler


_FLOAT_FUNCTIONS: dict[type, tuple[str, Callable[[Value], Value]]] = {
    exp.Sqrt: ("sqrt", pc.sqrt_checked),
    exp.Ln: ("ln", pc.ln_checked),
    exp.Exp: ("exp", pc.exp),
    exp.Cbrt: ("cbrt", lambda v: pc.multiply(pc.sign(v), pc.power(pc.abs(v), 1 / 3))),
    exp.Degrees: ("degrees", lambda v: pc.multiply(v, 180 / math.pi)),
    exp.Radians: ("radians", lambda v: pc.multiply(v, math.pi / 180)),
}
for _cls, (_name, _kernel) in _FLOAT_FUNCTIONS.items():
    _HANDLERS[_cls] = _float_fn(_name, _kernel)


@_handles(exp.Log)
def _log(node: exp.Log, ctx: _Ctx) -> Value:
    if node.expression is None:  # PostgreSQL's one-argument log is base 10
        return pc.log10_checked(_f64(_numeric_arg(_eval(node.this, ctx), "log", node.this)))
    base = _f64(_numeric_arg(_eval(node.this, ctx), "log", node.this))
    x = _f64(_numeric_arg(_eval(node.expression, ctx), "log", node.expression))
    return pc.divide(pc.ln_checked(x), pc.ln_checked(base))


@_handles(exp.Pow)
def _pow(node: exp.Pow, ctx: _Ctx) -> Value:
    a = _f64(_numeric_arg(_eval(node.this, ctx), "power", node.this))
    b = _f64(_numeric_arg(_eval(node.expression, ctx), "power", node.expression))
    return pc.power(a, b)


@_handles(exp.Pi)
def _pi(node: exp.Pi, ctx: _Ctx) -> Value:
    return pa.scalar(math.pi)


@_handles(exp.Rand)
def _random(node: exp.Rand, ctx: _Ctx) -> Value:
    if node.this is not None:
        raise FeatureNotSupported("random(seed) is not supported", position=_position(node))
    return pc.random(ctx.num_rows)


# Functions sqlglot leaves as exp.Anonymous, by lower-case name.
_ANONYMOUS: dict[str, Callable[[exp.Anonymous, _Ctx], Value]] = {
    "octet_length": lambda node, ctx: pc.binary_length(
        _string_arg(_eval(node.expressions[0], ctx), "octet_length", node)),
    "transaction_timestamp": lambda node, ctx: _current_timestamp(node, ctx),
    "statement_timestamp": lambda node, ctx: _current_timestamp(node, ctx),
    "clock_timestamp": lambda node, ctx: _current_timestamp(node, ctx),
}
_NON_DETERMINISTIC = {"clock_timestamp"}


@_handles(exp.Anonymous)
def _anonymous(node: exp.Anonymous, ctx: _Ctx) -> Value:
    fn = _ANONYMOUS.get(node.name.lower())
    if fn is None:
        _no_function(node.name, node.expressions, ctx, _position(node))
    return fn(node, ctx)


# -- PostgreSQL compatibility: arrays, ANY / ALL, OPERATOR(), E'' strings ------------------
#
# A SQL array is an `ArrayType` column: an Arrow extension type whose storage is the
# array's PostgreSQL text form ('{1,2}', '{a,"b c",NULL}') and whose `value_type` is the
# element type. Text storage lets arrays pass through every executor operator (Acero's hash
# join carries no list columns) and go out on the wire as they are. Array functions work on
# Arrow list arrays: `_as_list` parses the text (one split kernel; a Python loop only for
# quoted elements), `_as_array` formats it back (`array_text`, vectorised). Arrays are
# one-dimensional with lower bound 1 (PostgreSQL's int2vector and oidvector start at 0;
# they are read as 1-based here). A bare string literal next to an array is an array literal
# ('{r,p,""}'), as PostgreSQL resolves the unknown type from its context.


def _type_from_str(text: str) -> pa.DataType:
    """An Arrow type from its str() (ArrayType's serialized element type): the aliases
    pyarrow knows, plus the parameterised decimal128(p, s) / timestamp[unit] / date32[day]
    it does not."""
    m = re.fullmatch(r"decimal128\((\d+), (\d+)\)", text)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"timestamp\[(\w+)\]", text)
    if m:
        return pa.timestamp(m.group(1))
    return pa.type_for_alias({"date32[day]": "date32", "date64[ms]": "date64"}.get(text, text))


class ArrayType(pa.ExtensionType):
    """A one-dimensional SQL array of `value_type` (storage: its text form)."""

    def __init__(self, value_type: pa.DataType):
        self.value_type = value_type
        super().__init__(pa.string(), "kudusql.array")

    def __arrow_ext_serialize__(self) -> bytes:
        return str(self.value_type).encode()

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes
                                  ) -> ArrayType:
        return cls(_type_from_str(serialized.decode()))

    def __reduce__(self):
        return ArrayType, (self.value_type,)

    def __hash__(self) -> int:
        return hash(("kudusql.array", str(self.value_type)))


pa.register_extension_type(ArrayType(pa.string()))

# SQL type names sqlglot leaves as user-defined or object identifiers (`x::oid`,
# `x::pg_catalog.text`, `x::"char"`): reg* values are OIDs, vectors are arrays.
_NAMED_TYPES: dict[str, pa.DataType] = {
    **dict.fromkeys(("text", "varchar", "character varying", "name", "char", "character",
                     "bpchar", "json", "jsonb", "pg_node_tree", "aclitem", "unknown",
                     "cstring", "uuid"), pa.string()),
    **dict.fromkeys(("int2", "smallint"), pa.int16()),
    **dict.fromkeys(("int4", "integer", "int"), pa.int32()),
    **dict.fromkeys(("int8", "bigint", "oid", "xid", "cid"), pa.int64()),
    # reg* values are OIDs that read and print as names: the catalog wrapper binds these
    # casts to its lookups (planner.binder.host_call); what is left, e.g. the type of a
    # parameter cast to regclass, is the name
    **dict.fromkeys(("regclass", "regtype", "regproc", "regprocedure", "regnamespace",
                     "regrole", "regoper", "regoperator", "regconfig", "regdictionary",
                     "regcollation"), pa.string()),
    **dict.fromkeys(("float4", "real"), pa.float32()),
    **dict.fromkeys(("float8", "double precision"), pa.float64()),
    **dict.fromkeys(("bool", "boolean"), pa.bool_()),
    "numeric": _DEFAULT_NUMERIC, "decimal": _DEFAULT_NUMERIC, "date": pa.date32(),
    "timestamp": _TS, "timestamptz": _TS, "bytea": pa.binary(), "interval": _INTERVAL,
    "int2vector": ArrayType(pa.int16()), "oidvector": ArrayType(pa.int64()),
}


def _named_type(name: str, node: exp.Expr) -> pa.DataType:
    n = name.strip().strip('"').lower()
    n = n.removeprefix("pg_catalog.")
    if n.endswith("[]"):
        return ArrayType(_named_type(n[:-2], node))
    t = _NAMED_TYPES.get(n)
    if t is None:
        raise UndefinedObject(f'type "{n}" does not exist', position=_position(node))
    return t


def parse_array_literal(text: str) -> list[str | None]:
    """The elements of a one-dimensional array literal: '{a,"b c",NULL}' -> ['a', 'b c',
    None]. Raises ValueError for anything else (nested arrays included)."""
    s = text.strip()
    if len(s) < 2 or s[0] != "{" or s[-1] != "}":
        raise ValueError(text)
    body, out, i = s[1:-1], [], 0
    if not body.strip():
        return out
    while True:
        while i < len(body) and body[i].isspace():
            i += 1
        buf: list[str] = []
        if i < len(body) and body[i] == '"':
            i += 1
            while i < len(body) and body[i] != '"':
                if body[i] == "\\" and i + 1 < len(body):
                    i += 1
                buf.append(body[i])
                i += 1
            if i >= len(body):
                raise ValueError(text)
            i += 1
            out.append("".join(buf))
        else:
            while i < len(body) and body[i] != ",":
                if body[i] in '{}"':
                    raise ValueError(text)
                if body[i] == "\\" and i + 1 < len(body):
                    i += 1
                buf.append(body[i])
                i += 1
            item = "".join(buf).strip()
            if not item:
                raise ValueError(text)
            out.append(None if item.upper() == "NULL" else item)
        while i < len(body) and body[i].isspace():
            i += 1
        if i >= len(body):
            return out
        if body[i] != ",":
            raise ValueError(text)
        i += 1


def _list_from_parts(lengths: np.ndarray, values: pa.Array, null_mask: Value | None
                     ) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    mask = None
    if null_mask is not None:
        mask = _combine(null_mask)
        if not mask.null_count and not pc.any(mask).as_py():
            mask = None
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=mask)


def _list_lengths(arr: pa.Array) -> np.ndarray:
    """Element counts of a list array, 0 for NULL lists."""
    return pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False) \
        .astype(np.int64)


def _is_array(v: Value) -> bool:
    return isinstance(v.type, ArrayType)


def _storage(v: Value) -> Value:
    """An array Value's text form (storage)."""
    if isinstance(v, pa.Scalar):
        return pa.scalar(v.value.as_py() if v.is_valid else None, pa.string())
    if isinstance(v, pa.ChunkedArray):
        return pa.chunked_array([c.storage for c in v.chunks], pa.string())
    return v.storage


def _wrap(v: Value, t: ArrayType) -> Value:
    """Text Value -> array Value of type `t` (the text must be in canonical form)."""
    if isinstance(v, pa.Scalar):
        return pa.ExtensionScalar.from_storage(t, v.as_py())
    if isinstance(v, pa.ChunkedArray):
        return pa.chunked_array([pa.ExtensionArray.from_storage(t, c) for c in v.chunks], t)
    return pa.ExtensionArray.from_storage(t, v)


def _as_array(v: Value) -> Value:
    """Arrow list Value -> ArrayType Value."""
    if isinstance(v.type, ArrayType):
        return v
    return _wrap(array_text(v), ArrayType(v.type.value_type))


def _text_to_list(text: pa.Array, elem: pa.DataType, node: exp.Expr | None) -> pa.Array:
    """Array literals (text) -> Arrow list array of `elem`."""
    inner = pc.utf8_slice_codeunits(pc.utf8_trim_whitespace(text), 1, -1)
    if not pc.any(pc.match_substring_regex(text, r'["\\]|^\s*[^{\s]|[^}\s]\s*$')).as_py():
        parts = pc.split_pattern(inner, pattern=",")          # the common case: no quotes
        empty = pc.fill_null(pc.equal(pc.utf8_trim_whitespace(inner), ""), True)
        lengths = np.where(empty.to_numpy(zero_copy_only=False), 0, _list_lengths(parts))
        keep = pc.invert(pc.take(empty, pc.list_parent_indices(parts)))
        items = pc.utf8_trim_whitespace(pc.list_flatten(parts).filter(keep))
        if pc.any(pc.equal(items, "")).as_py():
            raise _err(f'malformed array literal: "{_first_valid_text(text)}"', "22P02",
                       node)
        items = pc.if_else(pc.equal(pc.utf8_upper(items), "NULL"), _null_of(pa.string()),
                           items)
    else:
        lengths_list, flat = [], []
        for t in text.to_pylist():    # per row: only literals with quoted elements
            try:
                elems = parse_array_literal(t) if t is not None else []
            except ValueError:
                raise _err(f'malformed array literal: "{t}"', "22P02", node) from None
            lengths_list.append(len(elems))
            flat.extend(elems)
        lengths, items = np.array(lengths_list, dtype=np.int64), pa.array(flat, pa.string())
    return _list_from_parts(lengths, _cast(items, elem, node), pc.is_null(text))


def _as_list(v: Value, node: exp.Expr | None = None) -> Value:
    """ArrayType (or Arrow list) Value -> Arrow list Value."""
    if not isinstance(v.type, ArrayType):
        return v
    elem = v.type.value_type
    return _per_array(lambda a: _text_to_list(_combine(_storage(a)), elem, node), v)


def array_to_list(v: Value) -> Value:
    """An array Value (ArrayType) as an Arrow list Value."""
    return _as_list(v)


def list_to_array(v: Value) -> Value:
    """An Arrow list Value as an array Value (ArrayType)."""
    return _as_array(v)


def _parse_array_text(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """Text -> array (PostgreSQL's array input, to a canonical text form)."""
    return _as_array(_per_array(lambda a: _text_to_list(a, to.value_type, node), v))


_NEEDS_QUOTES = r'^$|[{}",\\\s]|^[Nn][Uu][Ll][Ll]$'


def array_text(v: Value) -> Value:
    """Arrays (Arrow lists or ArrayType) in PostgreSQL's text form: '{a,"b c",NULL}',
    booleans as t / f."""
    if isinstance(v.type, ArrayType):
        return _storage(v)

    def one(arr: pa.Array) -> pa.Array:
        elems = pc.list_flatten(arr)
        if _kind(elems.type) == "bool":
            texts = pc.if_else(elems, "t", "f")
        else:
            texts = _cast(elems, pa.string(), None)
        escaped = pc.replace_substring_regex(texts, pattern=r'(["\\])', replacement=r"\\\1")
        quoted = pc.binary_join_element_wise('"', escaped, '"', "")
        texts = pc.fill_null(pc.if_else(pc.match_substring_regex(texts, _NEEDS_QUOTES),
                                        quoted, texts), "NULL")
        joined = pc.binary_join(_list_from_parts(_list_lengths(arr), texts, None), ",")
        out = pc.binary_join_element_wise("{", joined, "}", "")
        return pc.if_else(pc.is_null(arr), _null_of(pa.string()), out)
    return _per_array(one, v)


def _map_elements(v: Value, fn: Callable[[pa.Array], pa.Array]) -> Value:
    """An array Value with `fn` applied to its elements (an Arrow list result)."""
    def one(arr: pa.Array) -> pa.Array:
        return _list_from_parts(_list_lengths(arr), fn(pc.list_flatten(arr)), pc.is_null(arr))
    return _per_array(one, _as_list(v))


def _list_cast(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    if isinstance(v.type, ArrayType) and v.type.value_type == to.value_type:
        return v
    return _as_array(_map_elements(v, lambda a: _cast(a, to.value_type, node)))


def _array_operand(v: Value, node: exp.Expr, elem: pa.DataType | None, what: str) -> Value:
    """`v` as an array: an unknown literal or untyped text parameter is an array literal."""
    k = _kind(v.type)
    if k == "list":
        return _as_array(v)
    t = ArrayType(elem if elem is not None and _kind(elem) not in ("null", "list")
                  else pa.string())
    if k == "null":
        return _null_of(t) if isinstance(v, pa.Scalar) else pa.nulls(len(v), t)
    if k == "string":
        return _parse_array_text(v, t, node)
    raise _err(f"{what} requires array on right side", "42809", node)


def _list_equality(a: Value, a_node: exp.Expr, b: Value, b_node: exp.Expr, op: str,
                   node: exp.Expr) -> Value:
    """Array = / <> array (compared by their canonical text forms)."""
    if _kind(a.type) != "list" and (_is_unknown_literal(a_node) or _kind(a.type) == "null"):
        a = _array_operand(a, a_node, b.type.value_type, op)
    if _kind(b.type) != "list" and (_is_unknown_literal(b_node) or _kind(b.type) == "null"):
        b = _array_operand(b, b_node, a.type.value_type, op)
    if _kind(a.type) != "list" or _kind(b.type) != "list" or op not in ("=", "<>"):
        raise _err(f"operator does not exist: {_pg_name(a.type)} {op} {_pg_name(b.type)}",
                   "42883", node)
    eq = pc.equal(array_text(_as_array(a)), array_text(_as_array(b)))
    return eq if op == "=" else pc.invert(eq)


def _is_quantifier(node: exp.Expr) -> bool:
    """ANY (...) / SOME (...) / ALL (...) on the right of a comparison (sqlglot reads
    `ALL (array)` as a function call)."""
    return isinstance(node, (exp.Any, exp.All)) or (
        isinstance(node, exp.Anonymous) and node.name.lower() in ("all", "any", "some")
        and len(node.expressions) == 1)


def _quantified(node: exp.Binary, ctx: _Ctx, op: str, fn: Callable[..., Value]) -> Value:
    """x op ANY (array) / x op ALL (array), with Kleene logic over the elements."""
    q = node.expression
    is_all = isinstance(q, exp.All) or (isinstance(q, exp.Anonymous) and q.name.lower() == "all")
    inner = q.expressions[0] if isinstance(q, exp.Anonymous) else q.this
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Query):
        raise FeatureNotSupported(f"{op} {'ALL' if is_all else 'ANY'} (subquery) is not "
                                  "supported here", position=_position(node))
    x = _eval(node.this, ctx)
    arr = _as_list(_array_operand(_eval(inner, ctx), inner, x.type,
                                  f"op {'ALL' if is_all else 'ANY'}"), inner)
    if isinstance(arr, pa.Scalar):
        if not arr.is_valid:
            return _null_of(pa.bool_())
        result: Value = pa.scalar(is_all)
        elements = arr.values
        for i in range(len(elements)):   # per element of one constant array, not per row
            a, b = _coerce_pair(x, node.this, elements[i], q, op, node)
            c = _null_of(pa.bool_()) if _kind(a.type) == "null" else fn(a, b)
            result = (pc.and_kleene if is_all else pc.or_kleene)(result, c)
        return result
    n = ctx.num_rows
    arr = _combine(arr)
    parent = pc.list_parent_indices(arr)
    xs = x if isinstance(x, pa.Scalar) else _combine(x).take(parent)
    a, b = _coerce_pair(xs, node.this, pc.list_flatten(arr), q, op, node)
    c = _null_of(pa.bool_()) if _kind(a.type) == "null" else fn(a, b)
    c = _broadcast(c, len(parent))
    decisive = pc.invert(c) if is_all else c          # one such element decides the row
    g = pa.table({"p": parent, "d": pc.fill_null(decisive, False), "u": pc.is_null(c)}) \
        .group_by("p").aggregate([("d", "any"), ("u", "any")])
    hit, unknown = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    rows = g.column("p").to_numpy()
    hit[rows] = g.column("d_any").to_numpy(zero_copy_only=False)
    unknown[rows] = g.column("u_any").to_numpy(zero_copy_only=False)
    out = pa.array(np.where(hit, not is_all, is_all))
    out = pc.if_else(pa.array(~hit & unknown), _null_of(pa.bool_()), out)
    return pc.if_else(pc.is_null(arr), _null_of(pa.bool_()), out)


@_handles(exp.Array)
def _array(node: exp.Array, ctx: _Ctx) -> Value:
    items = node.expressions
    if any(isinstance(i, exp.Query) for i in items):
        raise FeatureNotSupported("ARRAY(subquery) must be planned as a subquery",
                                  position=_position(node))
    if not items:
        return _wrap(pa.scalar("{}"), ArrayType(pa.string()))
    values, t = _unify([_eval(e, ctx) for e in items], items, "ARRAY", node)
    if _kind(t) == "null":
        values, t = [v.cast(pa.string()) for v in values], pa.string()
    if all(isinstance(v, pa.Scalar) for v in values):
        return _as_array(pa.scalar([v.as_py() for v in values], pa.list_(t)))
    n, k = ctx.num_rows, len(values)
    flat = pa.concat_arrays([_combine(_broadcast(v, n)) for v in values])
    order = (np.arange(n)[:, None] + np.arange(k)[None, :] * n).ravel()
    return _as_array(_list_from_parts(np.full(n, k, dtype=np.int64),
                                      flat.take(pa.array(order)), None))


@_handles(exp.Bracket)
def _subscript(node: exp.Bracket, ctx: _Ctx) -> Value:
    if len(node.expressions) != 1 or isinstance(node.expressions[0], exp.Slice):
        raise FeatureNotSupported("array slices are not supported", position=_position(node))
    arr = _eval(node.this, ctx)
    index_node = node.expressions[0]
    i = _eval(index_node, ctx)
    if _kind(arr.type) == "null":
        return arr
    if _kind(arr.type) != "list":
        raise _err(f"cannot subscript type {_pg_name(arr.type)} because it does not support "
                   "subscripting", "42804", node)
    arr = _as_list(arr, node.this)
    elem = arr.type.value_type
    if _kind(i.type) not in ("int", "null"):
        i = _cast(i, pa.int64(), index_node)
    i = i.cast(pa.int64())
    # sqlglot shifts a literal PostgreSQL subscript to 0-based while parsing (`a[1]` arrives
    # as `a[0]`); any other subscript arrives as written, 1-based.
    if isinstance(index_node, exp.Literal):
        i = pc.add(i, 1)
    if isinstance(arr, pa.Scalar) and isinstance(i, pa.Scalar):
        k = i.as_py()
        if not arr.is_valid or k is None or not 1 <= k <= len(arr.values):
            return _null_of(elem)
        return arr.values[k - 1]
    n = ctx.num_rows
    arr = _combine(_broadcast(arr, n))
    idx = _combine(_broadcast(i, n))
    if len(arr.values) == 0:
        return pa.nulls(n, elem)
    k = pc.fill_null(idx, 0).to_numpy(zero_copy_only=False)
    ok = (k >= 1) & (k <= _list_lengths(arr))
    starts = arr.offsets.to_numpy()[:-1]
    out = arr.values.take(pa.array(np.where(ok, starts + k - 1, 0)))
    return pc.if_else(pa.array(ok), out, _null_of(elem))


def _array_cat(a: Value, a_node: exp.Expr, b: Value, b_node: exp.Expr,
               node: exp.Expr) -> Value:
    """array || array, array || element, element || array (NULL arrays count as empty)."""
    if _kind(a.type) != "list":
        a = _array_operand(a, a_node, b.type.value_type, "||") if _is_unknown_literal(a_node) \
            or _kind(a.type) == "null" else _as_singleton(a, b.type.value_type, a_node)
    if _kind(b.type) != "list":
        b = _array_operand(b, b_node, a.type.value_type, "||") if _is_unknown_literal(b_node) \
            or _kind(b.type) == "null" else _as_singleton(b, a.type.value_type, b_node)
    t = _supertype([a.type.value_type, b.type.value_type])
    if t is None:
        raise _err(f"operator does not exist: {_pg_name(a.type)} || {_pg_name(b.type)}",
                   "42883", node)
    if _kind(t) == "null":
        t = pa.string()
    a = _as_list(_list_cast(a, ArrayType(t), a_node))
    b = _as_list(_list_cast(b, ArrayType(t), b_node))
    if isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar):
        if not a.is_valid and not b.is_valid:
            return _null_of(ArrayType(t))
        return _as_array(pa.scalar((a.as_py() or []) + (b.as_py() or []), pa.list_(t)))
    n = len(b) if isinstance(a, pa.Scalar) else len(a)
    A, B = _combine(_broadcast(a, n)), _combine(_broadcast(b, n))
    la, lb = _list_lengths(A), _list_lengths(B)
    total = la + lb
    rows = np.repeat(np.arange(n), total)
    out_starts = np.concatenate([[0], np.cumsum(total)])[:-1]
    within = np.arange(int(total.sum())) - np.repeat(out_starts, total)
    a_starts = np.concatenate([[0], np.cumsum(la)])[:-1]
    b_starts = np.concatenate([[0], np.cumsum(lb)])[:-1]
    flat_a = pc.list_flatten(A)
    take = np.where(within < la[rows], a_starts[rows] + within,
                    len(flat_a) + b_starts[rows] + within - la[rows])
    values = pa.concat_arrays([flat_a, pc.list_flatten(B)]).take(pa.array(take, pa.int64()))
    return _as_array(_list_from_parts(total, values, pc.and_(pc.is_null(A), pc.is_null(B))))


def _as_singleton(v: Value, elem: pa.DataType, node: exp.Expr) -> Value:
    v = _widen(v, elem, node) if _supertype([v.type, elem]) == elem else v
    if isinstance(v, pa.Scalar):
        return _as_array(pa.scalar([v.as_py()], pa.list_(v.type)))
    return _as_array(_list_from_parts(np.ones(len(v), dtype=np.int64), _combine(v), None))


@_handles(exp.ArrayToString)
def _array_to_string(node: exp.ArrayToString, ctx: _Ctx) -> Value:
    arr = _as_list(_array_operand(_eval(node.this, ctx), node.this, None, "array_to_string"))
    sep = _const_arg(_eval(node.expression, ctx), "delimiter", node.expression)
    null_node = node.args.get("null")
    null_text = _const_arg(_eval(null_node, ctx), "null string", null_node) \
        if null_node is not None else None
    if sep is None:
        return _null_of(pa.string())

    def one(a: pa.Array) -> pa.Array:
        texts = _cast(pc.list_flatten(a), pa.string(), node)
        lengths = _list_lengths(a)
        if null_text is not None:
            texts = pc.fill_null(texts, null_text)
        else:                       # NULL elements are skipped
            keep = pc.is_valid(texts)
            counts = pa.table({"p": pc.list_parent_indices(a).filter(keep)}) \
                .group_by("p").aggregate([("p", "count")])
            lengths = np.zeros(len(a), dtype=np.int64)
            lengths[counts.column("p").to_numpy()] = counts.column("p_count").to_numpy()
            texts = texts.filter(keep)
        return pc.binary_join(_list_from_parts(lengths, texts, pc.is_null(a)), sep)
    return _per_array(one, arr)


def _array_length_fn(fn: str) -> Callable[[exp.Expr, _Ctx], Value]:
    """array_length / array_upper (n), array_lower (1), cardinality; NULL for an empty array
    or another dimension (cardinality of an empty array is 0)."""
    def handler(node: exp.Expr, ctx: _Ctx) -> Value:
        args = node.expressions if isinstance(node, exp.Anonymous) else \
            [node.this] + ([node.expression] if node.expression is not None else [])
        if len(args) != (1 if fn == "cardinality" else 2):
            _no_function(fn, args, ctx, _position(node))
        arr = _as_list(_array_operand(_eval(args[0], ctx), args[0], None, fn))
        if isinstance(arr, pa.Scalar):
            lengths: Value = pa.scalar(len(arr.values) if arr.is_valid else None, pa.int32())
        else:
            lengths = pc.list_value_length(arr).cast(pa.int32())
        if fn == "cardinality":
            return lengths
        first_dim = pc.equal(_eval(args[1], ctx).cast(pa.int64()), 1)
        value = pa.scalar(1, pa.int32()) if fn == "array_lower" else lengths
        ok = pc.fill_null(pc.and_(pc.fill_null(first_dim, False), pc.greater(lengths, 0)),
                          False)
        return pc.if_else(ok, value, _null_of(pa.int32()))
    return handler


_HANDLERS[exp.ArraySize] = _array_length_fn("array_length")


@_handles(exp.StringToArray)
def _string_to_array(node: exp.StringToArray, ctx: _Ctx) -> Value:
    s = _string_arg(_eval(node.this, ctx), "string_to_array", node.this)
    sep_node = node.expression
    sep = _const_arg(_eval(sep_node, ctx), "delimiter", sep_node) if sep_node is not None \
        else None
    if sep is None or _kind(s.type) == "null":
        raise FeatureNotSupported("string_to_array needs a constant delimiter",
                                  position=_position(node))
    if sep == "":
        return _as_singleton(s, pa.string(), node)
    return _as_array(pc.split_pattern(s, pattern=sep))


def _json_build_object(node: exp.Anonymous, ctx: _Ctx) -> Value:
    import json
    args = node.expressions
    if len(args) % 2:
        raise _err("argument list must have even number of elements", "22023", node)
    values = [_eval(a, ctx) for a in args]
    n = 1 if all(isinstance(v, pa.Scalar) for v in values) else ctx.num_rows
    cols = [_combine(_broadcast(v, n)).to_pylist() for v in values]
    out = []
    for r in range(n):   # per row: only client catalog queries build JSON objects
        obj = {str(cols[i][r]): _json_value(cols[i + 1][r]) for i in range(0, len(cols), 2)}
        out.append(json.dumps(obj, separators=(", ", " : ")))
    if all(isinstance(v, pa.Scalar) for v in values):
        return pa.scalar(out[0], pa.string())
    return pa.array(out, pa.string())


def _json_value(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    return v


_ANONYMOUS.update({
    "array_upper": _array_length_fn("array_upper"),
    "array_lower": _array_length_fn("array_lower"),
    "cardinality": _array_length_fn("cardinality"),
    "json_build_object": _json_build_object,
})

_BITWISE = {exp.BitwiseAnd: pc.bit_wise_and, exp.BitwiseOr: pc.bit_wise_or,
            exp.BitwiseXor: pc.bit_wise_xor}


@_handles(*_BITWISE)
def _bitwise(node: exp.Binary, ctx: _Ctx) -> Value:
    a, b = _eval(node.this, ctx), _eval(node.expression, ctx)
    if _kind(a.type) not in ("int", "null") or _kind(b.type) not in ("int", "null"):
        raise _err(f"operator does not exist: {_pg_name(a.type)} & {_pg_name(b.type)}",
                   "42883", node)
    t = _supertype([a.type, b.type])
    if _kind(t) == "null":
        return _null_of(pa.int32())
    return _BITWISE[type(node)](_widen(a, t, node.this), _widen(b, t, node.expression))


@_handles(exp.Struct)
def _struct(node: exp.Struct, ctx: _Ctx) -> Value:
    """A record of named fields (`information_schema._pg_expandarray`'s (x, n))."""
    names, values = [], []
    for i, e in enumerate(node.expressions):
        if isinstance(e, (exp.PropertyEQ, exp.Alias)):
            names.append(e.this.name if isinstance(e, exp.PropertyEQ) else e.alias)
            e = e.expression if isinstance(e, exp.PropertyEQ) else e.this
        else:
            names.append(f"f{i + 1}")
        values.append(_eval(e, ctx))
    if all(isinstance(v, pa.Scalar) for v in values):
        return pa.scalar({n: v.as_py() for n, v in zip(names, values)},
                         pa.struct([pa.field(n, v.type) for n, v in zip(names, values)]))
    n = ctx.num_rows
    return pc.make_struct(*[_combine(_broadcast(v, n)) for v in values], field_names=names)


@_handles(exp.Dot)
def _field(node: exp.Dot, ctx: _Ctx) -> Value:
    """(record).field"""
    v = _eval(node.this, ctx)
    if not pa.types.is_struct(v.type):
        raise FeatureNotSupported(f"unsupported expression: {node.sql()}",
                                  position=_position(node))
    name = node.name
    names = [v.type.field(i).name for i in range(v.type.num_fields)]
    match = [n for n in names if n.lower() == name.lower()]
    if not match:
        raise _err(f'column "{name}" not found in data type record', "42703", node)
    if isinstance(v, pa.Scalar):
        return v[match[0]] if v.is_valid else _null_of(v.type.field(match[0]).type)
    return pc.struct_field(v, match[0])


@_handles(exp.ByteString)
def _escape_string(node: exp.ByteString, ctx: _Ctx) -> Value:
    """E'...': the tokenizer has already resolved the backslash escapes."""
    return pa.scalar(node.this, pa.string())


@_handles(exp.Collate)
def _collate(node: exp.Collate, ctx: _Ctx) -> Value:
    return _eval(node.this, ctx)       # one collation: byte order (C)


# OPERATOR(schema.op) -> the node the plain operator parses to
_OPERATORS: dict[str, Callable[[exp.Expr, exp.Expr], exp.Expr]] = {
    "~": lambda a, b: exp.RegexpLike(this=a, expression=b),
    "~*": lambda a, b: exp.RegexpILike(this=a, expression=b),
    "!~": lambda a, b: exp.Not(this=exp.RegexpLike(this=a, expression=b)),
    "!~*": lambda a, b: exp.Not(this=exp.RegexpILike(this=a, expression=b)),
    "~~": lambda a, b: exp.Like(this=a, expression=b),
    "~~*": lambda a, b: exp.ILike(this=a, expression=b),
    "!~~": lambda a, b: exp.Not(this=exp.Like(this=a, expression=b)),
    "!~~*": lambda a, b: exp.Not(this=exp.ILike(this=a, expression=b)),
    "=": lambda a, b: exp.EQ(this=a, expression=b),
    "<>": lambda a, b: exp.NEQ(this=a, expression=b),
    "!=": lambda a, b: exp.NEQ(this=a, expression=b),
    "<": lambda a, b: exp.LT(this=a, expression=b),
    "<=": lambda a, b: exp.LTE(this=a, expression=b),
    ">": lambda a, b: exp.GT(this=a, expression=b),
    ">=": lambda a, b: exp.GTE(this=a, expression=b),
    "||": lambda a, b: exp.DPipe(this=a, expression=b),
    "+": lambda a, b: exp.Add(this=a, expression=b),
    "-": lambda a, b: exp.Sub(this=a, expression=b),
    "*": lambda a, b: exp.Mul(this=a, expression=b),
    "/": lambda a, b: exp.Div(this=a, expression=b),
}


@_handles(exp.Operator)
def _operator(node: exp.Operator, ctx: _Ctx) -> Value:
    name = str(node.args["operator"]).strip()
    name = name.rsplit(".", 1)[-1] if "." in name and not name.endswith(".") else name
    make = _OPERATORS.get(name)
    if make is None:
        raise _err(f"operator does not exist: {name}", "42883", node)
    return _eval(make(node.this, node.expression), ctx)


# -- host functions and subplans -------------------------------------------------------------


class HostFunction:
    """A SQL function implemented by the host of the planner, e.g. the wire layer's catalog
    (format_type, pg_get_indexdef, ::regclass): `fn(args, num_rows)` takes the argument
    Values (scalars or arrays) and returns one Value. Shared, never copied, by the plan
    nodes that call it. `volatile` functions are not folded at planning time."""

    def __init__(self, name: str, fn: Callable[[list[Value], int], Value], *,
                 volatile: bool = False):
        self.name = name
        self.fn = fn
        self.volatile = volatile

    def __deepcopy__(self, memo: dict) -> HostFunction:
        return self

    def __repr__(self) -> str:
        return f"HostFunction({self.name})"


class HostCall(exp.Expression, exp.Func):
    """A call of a HostFunction: `this` is its name, `fn` the function."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": False, "fn": True}


@_handles(HostCall)
def _host_call(node: HostCall, ctx: _Ctx) -> Value:
    values = [_eval(a, ctx) for a in node.expressions]
    return node.args["fn"].fn(values, ctx.num_rows)


class SubPlan(exp.Expression):
    """A subquery run once per distinct combination of the outer values it reads (what
    PostgreSQL calls a SubPlan): the fallback for correlated subqueries the binder cannot
    turn into joins, ARRAY(subquery) and ordered aggregates (array_agg, string_agg).

    `expressions` are the outer values; `plan` has `run(values: list[pa.Scalar],
    schema_only: bool) -> pa.Table` (one column) which binds and runs the subquery with those
    values as constants; `kind` says what the rows become:
        scalar     the one value (NULL without rows; 21000 with more than one)
        exists     whether there is a row
        array      the column as an array ('{}' without rows)
        array_agg  the column as an array, NULL without rows
    """

    arg_types: ClassVar[dict[str, bool]] = {"plan": True, "expressions": False, "kind": True}


@_handles(SubPlan)
def _subplan(node: SubPlan, ctx: _Ctx) -> Value:
    plan, kind = node.args["plan"], node.args["kind"]
    values = [_eval(e, ctx) for e in node.expressions]
    if all(isinstance(v, pa.Scalar) for v in values):
        v = _subplan_value(plan, kind, values, node)[0]
        return _as_array(v) if _kind(v.type) == "list" else v
    n = ctx.num_rows
    cols = [_combine(_broadcast(v, n)) for v in values]
    if n == 0:
        t = _subplan_value(plan, kind, [_null_of(c.type) for c in cols], node, True)[1]
        return pa.nulls(0, ArrayType(t.value_type) if _kind(t) == "list" else t)
    # One run per distinct outer tuple; the row -> tuple mapping is a Python loop over the
    # rows (each run binds and executes a plan, which dominates).
    groups: dict[tuple, int] = {}
    inverse = np.empty(n, dtype=np.int64)
    for r, key in enumerate(zip(*[c.to_pylist() for c in cols])):
        inverse[r] = groups.setdefault(key, len(groups))
    firsts = np.unique(inverse, return_index=True)[1]
    results, t = [], None
    for first in firsts:
        v, t = _subplan_value(plan, kind, [c[int(first)] for c in cols], node)
        results.append(v)
    if isinstance(t, ArrayType):
        arr = _wrap(pa.array([_storage(r).as_py() for r in results], pa.string()), t)
    else:
        arr = pa.array([r.as_py() for r in results], t)
    arr = arr.take(pa.array(inverse))
    return _as_array(arr) if _kind(t) == "list" else arr


class InSubPlan(exp.Expression):
    """`x IN (subquery)` where it cannot be a semi join (outside a WHERE conjunct: in an OR,
    a CASE, the SELECT list): `this` is x, `expression` a SubPlan of kind "set" whose rows
    are the set. The subquery runs once per distinct tuple of the outer values it reads
    (once when uncorrelated), and x is tested against its column with PostgreSQL's NULL
    logic, vectorised over the rows: TRUE on a match, else NULL if x is NULL (and the set
    is not empty) or the set holds a NULL, else FALSE."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True}


@_handles(InSubPlan)
def _in_subplan(node: InSubPlan, ctx: _Ctx) -> Value:
    sub: SubPlan = node.expression
    plan = sub.args["plan"]
    x = _eval(node.this, ctx)
    values = [_eval(e, ctx) for e in sub.expressions]
    if all(isinstance(v, pa.Scalar) for v in values):
        return _in_set(x, node.this, _subplan_set(plan, values, node), node)
    n = ctx.num_rows
    cols = [_combine(_broadcast(v, n)) for v in values]
    xs = _combine(_broadcast(x, n))
    # One run per distinct outer tuple (a Python loop over the rows to group them, as in
    # _subplan: each run binds and executes a plan, which dominates).
    groups: dict[tuple, list[int]] = {}
    for r, key in enumerate(zip(*[c.to_pylist() for c in cols])):
        groups.setdefault(key, []).append(r)
    parts, order = [], []
    for rows in groups.values():
        idx = pa.array(rows, pa.int64())
        first = rows[0]
        part = _in_set(xs.take(idx), node.this,
                       _subplan_set(plan, [c[first] for c in cols], node), node)
        parts.append(_combine(_broadcast(part, len(rows))).cast(pa.bool_()))
        order.append(idx)
    if not parts:
        return pa.nulls(0, pa.bool_())
    result = pa.concat_arrays(parts)
    inverse = pc.sort_indices(pa.concat_arrays(order))
    return result.take(inverse)


def _subplan_set(plan: Any, values: list[pa.Scalar], node: exp.Expr) -> pa.Array:
    t = plan.run(values, False)
    if t.num_columns != 1:
        raise _err("subquery has too many columns", "42601", node)
    return _combine(t.column(0))


def _in_set(x: Value, x_node: exp.Expr, col: pa.Array, node: exp.Expr) -> Value:
    """x IN (the values of `col`) with SQL's NULL logic."""
    if len(col) == 0:
        return pa.scalar(False) if isinstance(x, pa.Scalar) else pa.array(
            np.zeros(len(x), dtype=bool))
    has_null = col.null_count > 0
    present = pc.drop_null(col)
    if _kind(present.type) == "null":
        present = present.cast(x.type) if _kind(x.type) != "null" else present
    a, b = _coerce_pair(x, x_node, present, exp.Column(), "=", node)
    _check_comparable(a, "=", b, node)
    if _kind(a.type) == "null":
        return _null_of(pa.bool_())
    b = _combine(b)
    if _kind(a.type) == "float":  # -0.0 = 0.0, which the hash lookup does not know
        a, b = pc.add(a, pa.scalar(0.0, a.type)), pc.add(b, pa.scalar(0.0, b.type))
    found = pc.is_in(a, value_set=b, skip_nulls=True)
    unknown = pc.is_null(a)
    if has_null:
        unknown = pc.or_(unknown, pa.scalar(True))
    return pc.if_else(found, True, pc.if_else(unknown, _null_of(pa.bool_()), False))


def _subplan_value(plan: Any, kind: str, values: list[pa.Scalar], node: SubPlan,
                   schema_only: bool = False) -> tuple[pa.Scalar, pa.DataType]:
    t = plan.run(values, schema_only)
    if t.num_columns != 1 and kind != "exists":
        raise _err("subquery must return only one column", "42601", node)
    col = t.column(0) if t.num_columns else pa.chunked_array([], pa.null())
    if kind == "exists":
        return pa.scalar(t.num_rows > 0), pa.bool_()
    if kind == "scalar":
        if t.num_rows > 1:
            raise _err("more than one row returned by a subquery used as an expression",
                       "21000", node)
        return (col[0] if t.num_rows else _null_of(col.type)), col.type
    lt = pa.list_(col.type if _kind(col.type) != "null" else pa.string())
    if kind == "array_agg" and t.num_rows == 0:
        return _null_of(lt), lt
    return pa.scalar(col.to_pylist(), lt), lt


def _subplan_sql(self: sqlglot.generator.Generator, e: SubPlan) -> str:
    args = ", ".join(self.sql(x) for x in e.expressions)
    return f"(subplan {e.args['kind']} {id(e.args['plan']):x}({args}))"


def _host_call_sql(self: sqlglot.generator.Generator, e: HostCall) -> str:
    return f"{e.name}({', '.join(self.sql(x) for x in e.expressions)})"


# -- constants: folding and rendering --------------------------------------------------------

_NEUTRAL = (exp.DataType, exp.DataTypeParam, exp.Var)  # parts of a node, not values


def _foldable(node: exp.Expr, memo: dict[int, bool]) -> bool:
    """Whether `node` is an evaluable expression that depends on no row and no state."""
    key = id(node)
    if key in memo:
        return memo[key]
    t = type(node)
    ok = t in _HANDLERS and t not in (exp.Column, exp.Rand, exp.Alias, SubPlan) and not (
        t is exp.Anonymous and node.name.lower() in _NON_DETERMINISTIC) and not (
        t is HostCall and node.args["fn"].volatile)
    if ok:
        for child in node.iter_expressions():
            if not (isinstance(child, _NEUTRAL) or _foldable(child, memo)):
                ok = False
                break
    memo[key] = ok
    return ok


def _trivially_constant(node: exp.Expr) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, (exp.Literal, exp.Null, exp.Boolean, Const))


def _fixed_slot(node: exp.Expr) -> bool:
    """A node whose place in its parent needs that node type (CASE's WHEN arms)."""
    return isinstance(node, exp.If) and isinstance(node.parent, exp.Case) and \
        node.arg_key == "ifs"


def _constant_scalar(node: exp.Expr) -> pa.Scalar | None:
    if not _foldable(node, {}):
        return None
    try:
        v = _eval(node, _Ctx(pa.table({})))
    except SqlError:
        return None
    return v if isinstance(v, pa.Scalar) else None


def _sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _scalar_sql(s: pa.Scalar) -> str:
    """A SQL literal for a scalar; typed NULLs and special floats as CASTs."""
    k = _kind(s.type)
    if not s.is_valid:
        return "NULL" if k == "null" else f"CAST(NULL AS {_sql_type(s.type)})"
    v = s.as_py()
    if k == "bool":
        return "TRUE" if v else "FALSE"
    if k == "int":
        return str(v)
    if k == "decimal":
        return format(v, "f")
    if k == "float":
        text = repr(v) if math.isfinite(v) else {"inf": "'Infinity'", "-inf": "'-Infinity'",
                                                 "nan": "'NaN'"}[repr(v)]
        return f"CAST({text} AS {_sql_type(s.type)})"
    if k == "string":
        return _sql_string(v)
    if k == "date":
        return f"DATE '{v.isoformat()}'"
    if k == "timestamp":
        return f"TIMESTAMP {_sql_string(_to_text(s, pa.string(), None).as_py())}"
    if k == "interval":
        return f"INTERVAL {_sql_string(_interval_text(*_interval_parts(s)))}"
    if k == "binary":
        return f"CAST('\\x{bytes(v).hex()}' AS BYTEA)"
    if k == "list":
        return f"CAST({_sql_string(_storage(s).as_py())} AS {_sql_type(s.type)})"
    return _sql_string(str(v))


def _const_sql(self: sqlglot.generator.Generator, e: Const) -> str:
    return _scalar_sql(e.this)


# sqlglot dispatches on `<key>_sql` methods it collects per generator class (and caches);
# registering the method on the base class reaches every dialect, including caches built
# before this module was imported.
def _in_subplan_sql(self: sqlglot.generator.Generator, e: InSubPlan) -> str:
    return f"{self.sql(e.this)} IN {self.sql(e.expression)}"


for _cls, _render in ((Const, _const_sql), (SubPlan, _subplan_sql), (HostCall, _host_call_sql),
                      (InSubPlan, _in_subplan_sql)):
    setattr(sqlglot.generator.Generator, f"{_cls.key}_sql", _render)
    exp.EXPR_CLASSES.setdefault(_cls.key, _cls)
    for _dispatch in getattr(sqlglot.generator, "_DISPATCH_CACHE", {}).values():
        _dispatch.setdefault(_cls, _render)
