"""Scan predicates (Kudu's ColumnPredicate) and their evaluation over physical arrays.

Kinds, as in Kudu: RANGE (covers =, <, <=, >, >=), IN_LIST, IS_NULL, IS_NOT_NULL; a scan's
predicates are a conjunction. There is no NOT_EQUAL: the SQL layer evaluates `!=` itself.
MEMBER (`ColumnPredicate.member`, in-process scans only: it holds an object, not values) is
a runtime join filter, as Impala hands a hash join's build side to its Kudu scans: an object
with `mask(physical array) -> numpy bool` and `may_match(vmin, vmax, null_count, num_rows)`
over an integer-like column's physical values, so blocks it rules out are skipped by their
zone maps and the other columns are decoded only at the rows it keeps.

Predicates are bound once to a column (`bind`): the bounds are converted to the column's
*physical* representation (unscaled decimal ints, days, micros, UTF-8 bytes) so a page is
evaluated with one pyarrow kernel on the physical array and can be skipped with its
min/max without decoding. DECIMAL(p>18) is compared in its logical form.

FLOAT and DOUBLE compare in SQL's (PostgreSQL's) total order, not IEEE's: -0.0 = 0.0, NaN =
NaN, and NaN is above every other value, so `d > 1` holds for a NaN and `d < 1` does not.
IEEE comparisons give every NaN comparison false and Arrow's hashed IN tells -0.0 from 0.0;
`BoundPredicate` corrects both (`_nan`: whether a NaN passes, fails or alone passes). A
page's min/max (cfile.py) leave NaN out, so a page is never skipped for a predicate a NaN
could pass.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import errors
from engine.key_encoding import (
    DECIMAL_CONTEXT,
    decimal_unscaled_exact,
    encode_key_prefix,
    physical_value,
    successor_prefix,
)
from engine.schema import ColumnSchema, Schema
from engine.types import INTEGER_RANGES, DataType, sql_literal, to_logical


@dataclasses.dataclass(frozen=True)
class ColumnPredicate:
    column: str
    kind: str  # "range" | "in" | "is_null" | "is_not_null"
    lower: Any = None
    upper: Any = None
    lower_inclusive: bool = True
    upper_inclusive: bool = False
    values: tuple = ()

    @staticmethod
    def equal(column: str, value: Any) -> "ColumnPredicate":
        return ColumnPredicate(column, "range", value, value, True, True)

    @staticmethod
    def range(column: str, lower: Any = None, upper: Any = None, lower_inclusive: bool = True,
              upper_inclusive: bool = False) -> "ColumnPredicate":
        return ColumnPredicate(column, "range", lower, upper, lower_inclusive, upper_inclusive)

    @staticmethod
    def less(column: str, v: Any) -> "ColumnPredicate":
        return ColumnPredicate.range(column, upper=v, upper_inclusive=False)

    @staticmethod
    def less_equal(column: str, v: Any) -> "ColumnPredicate":
        return ColumnPredicate.range(column, upper=v, upper_inclusive=True)

    @staticmethod
    def greater(column: str, v: Any) -> "ColumnPredicate":
        return ColumnPredicate.range(column, lower=v, lower_inclusive=False)

    @staticmethod
    def greater_equal(column: str, v: Any) -> "ColumnPredicate":
        return ColumnPredicate.range(column, lower=v, lower_inclusive=True)

    @staticmethod
    def in_list(column: str, values: Sequence[Any]) -> "ColumnPredicate":
        return ColumnPredicate(column, "in", values=tuple(values))

    @staticmethod
    def member(column: str, test: Any) -> "ColumnPredicate":
        """Rows whose physical value `test` keeps (see the module docstring)."""
        return ColumnPredicate(column, "member", values=(test,))

    @staticmethod
    def is_null(column: str) -> "ColumnPredicate":
        return ColumnPredicate(column, "is_null")

    @staticmethod
    def is_not_null(column: str) -> "ColumnPredicate":
        return ColumnPredicate(column, "is_not_null")

    def __str__(self) -> str:
        c = self.column
        match self.kind:
            case "is_null":
                return f"{c} IS NULL"
            case "is_not_null":
                return f"{c} IS NOT NULL"
            case "in":
                return f"{c} IN ({', '.join(map(sql_literal, self.values))})"
            case "member":
                return f"{c} IN runtime filter"
        if self.lower is not None and self.lower == self.upper and self.lower_inclusive \
                and self.upper_inclusive:
            return f"{c} = {sql_literal(self.lower)}"
        parts = []
        if self.lower is not None:
            parts.append(f"{c} {'>=' if self.lower_inclusive else '>'} "
                         f"{sql_literal(self.lower)}")
        if self.upper is not None:
            parts.append(f"{c} {'<=' if self.upper_inclusive else '<'} "
                         f"{sql_literal(self.upper)}")
        return " AND ".join(parts) or f"{c} IS NOT NULL"


_FLOAT_TYPES = (DataType.FLOAT, DataType.DOUBLE)

# BoundPredicate._nan for FLOAT / DOUBLE columns: how a NaN value fares
NAN_FAILS = "fails"     # IEEE's answer is SQL's: a NaN never passes (e.g. `d < 1`, `d = 1`)
NAN_PASSES = "passes"   # a NaN passes whatever the finite bounds say (`d > 1`, `d <= 'NaN'`)
NAN_ONLY = "only"       # only NaN passes (`d = 'NaN'`, `d >= 'NaN'`)


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and v != v


_INTEGRAL_TYPES = (DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64,
                   DataType.DATE, DataType.TIMESTAMP, DataType.DECIMAL)


def _limits(col: ColumnSchema) -> tuple[int, int]:
    if col.type is DataType.DECIMAL:
        m = 10 ** col.precision - 1
        return -m, m
    if col.type is DataType.DATE:
        return INTEGER_RANGES[DataType.INT32]
    if col.type is DataType.TIMESTAMP:
        return INTEGER_RANGES[DataType.INT64]
    return INTEGER_RANGES[col.type]


def _exact(v: Any, col: ColumnSchema) -> decimal.Decimal:
    """A literal as an exact number in the column's physical units (may be fractional)."""
    if col.type is DataType.DECIMAL:
        return decimal_unscaled_exact(v, col.scale)
    if col.type is DataType.DATE and isinstance(v, _dt.datetime):
        # A DATE compared with a timestamp: days since the epoch, with the time of day
        # as a fraction (so `d < '1994-01-01 12:00'` includes 1994-01-01).
        delta = v.replace(tzinfo=None) - _dt.datetime(1970, 1, 1)
        return decimal.Decimal(delta.days) + decimal.Decimal(
            delta.seconds * 1_000_000 + delta.microseconds) / decimal.Decimal(86_400_000_000)
    if col.type in (DataType.DATE, DataType.TIMESTAMP) and not isinstance(v, (int, float,
                                                                             decimal.Decimal)):
        return decimal.Decimal(physical_value(v, col))
    if isinstance(v, bool) or not isinstance(v, (int, float, decimal.Decimal)):
        raise errors.InvalidArgument(
            f"cannot compare column {col.name} ({col.type_sql()}) with {v!r}")
    return decimal.Decimal(v if not isinstance(v, float) else repr(v))


class BoundPredicate:
    """A predicate bound to a column, evaluated on that column's physical arrays.

    For integer-like columns (integers, DATE, TIMESTAMP, DECIMAL) the literals are first
    normalised to *inclusive integer bounds in physical units*, exactly: `d < 1.234` on a
    DECIMAL(9,2) column becomes `unscaled <= 123`, `i8 = 1000` is always false and
    `i8 < 1000` has no upper bound. No literal is ever rounded into a wrong answer.
    """

    def __init__(self, pred: ColumnPredicate, col: ColumnSchema):
        self.pred = pred
        self.col = col
        self.col_id = col.id
        self.kind = pred.kind
        self.logical = col.type is DataType.DECIMAL and col.precision > 18
        typ = col.arrow_type if self.logical else col.physical_type
        self._typ = typ
        self.lower_inclusive = pred.lower_inclusive
        self.upper_inclusive = pred.upper_inclusive
        self.lower = self.upper = self.values = None
        self.always_false = False
        self._np_bounds = None
        self._nan: str | None = None     # FLOAT / DOUBLE only: NAN_FAILS / PASSES / ONLY
        self._in_nan = False             # FLOAT / DOUBLE IN list that holds a NaN
        # a dictionary-coded page may be tested once per entry, then gathered by code:
        # true for predicates whose answer on a value is a function of the value alone,
        # NULL failing (not IS [NOT] NULL; not floats, whose pages are never coded)
        self.on_dictionary = pred.kind in ("range", "in") and col.type not in _FLOAT_TYPES
        if pred.kind == "member":
            if col.type not in _INTEGRAL_TYPES or col.type is DataType.DECIMAL:
                raise errors.InvalidArgument(
                    f"a runtime filter needs an integer-like column, not {col.name} "
                    f"({col.type_sql()})")
            self.test = pred.values[0]
            return
        if col.type in _FLOAT_TYPES:
            pred = self._float_order(pred)
        try:
            if col.type in _INTEGRAL_TYPES:
                self._bind_integral(pred, col)
            else:
                self._bind_plain(pred, col)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError,
                OverflowError, decimal.InvalidOperation) as e:
            raise errors.InvalidArgument(
                f"invalid literal for column {col.name} ({col.type_sql()}): {e}") from None
        if self._nan == NAN_ONLY and pred.kind == "in":
            self.always_false = False       # IN ('NaN'): no finite value, NaN passes
        numeric = pa.types.is_integer(typ) or pa.types.is_floating(typ)
        if pred.kind == "range" and numeric and (self.lower is not None or
                                                 self.upper is not None):
            self._np_bounds = (None if self.lower is None else self.lower.as_py(),
                               None if self.upper is None else self.upper.as_py())
        if pred.kind == "range" and self.lower is not None and self.upper is not None:
            lo, hi = self.lower.as_py(), self.upper.as_py()
            if lo > hi or (lo == hi and not (self.lower_inclusive and self.upper_inclusive)):
                self.always_false = True

    def _float_order(self, pred: ColumnPredicate) -> ColumnPredicate:
        """SQL's float order on IEEE kernels: NaN bounds become `_nan` modes, leaving only
        finite (or infinite) bounds for the kernels; -0.0 in an IN list becomes 0.0."""
        if pred.kind == "in":
            vals = [v for v in pred.values if v is not None]
            self._in_nan = any(_is_nan(v) for v in vals)
            finite = tuple(0.0 if v == 0 else v for v in vals if not _is_nan(v))
            self._nan = NAN_ONLY if self._in_nan and not finite else NAN_FAILS
            return dataclasses.replace(pred, values=finite)
        if pred.kind != "range":
            return pred
        lower, upper = pred.lower, pred.upper
        lower_inclusive = pred.lower_inclusive
        self._nan = NAN_FAILS if upper is not None and not _is_nan(upper) else NAN_PASSES
        if _is_nan(upper):
            if not pred.upper_inclusive:
                self._nan = NAN_FAILS          # `< NaN`: every number, no NaN
            upper = None
        if _is_nan(lower):
            # `>= NaN` holds for NaN alone (and needs an upper bound NaN also passes);
            # `> NaN` holds for nothing
            if not pred.lower_inclusive or self._nan == NAN_FAILS:
                self.always_false = True
            self._nan = NAN_ONLY
            lower, lower_inclusive = None, True
        return dataclasses.replace(pred, lower=lower, upper=upper,
                                   lower_inclusive=lower_inclusive)

    def _float_nan(self, arr: pa.Array, m: np.ndarray) -> np.ndarray:
        """Mask `m` of the finite bounds corrected for the NaNs of float `arr`."""
        if self._nan is None or self.kind not in ("range", "in"):
            return m
        nan = np.asarray(pc.fill_null(pc.is_nan(arr), False)) if len(arr) else \
            np.zeros(0, dtype=bool)
        if self._nan == NAN_ONLY:
            return nan
        if self.kind == "in":
            return (m | nan) if self._in_nan else m
        if self._nan == NAN_PASSES:
            return m | nan
        return m & ~nan

    def _scalar(self, unscaled: int) -> pa.Scalar:
        if self.logical:
            v = decimal.Decimal(unscaled).scaleb(-self.col.scale, context=DECIMAL_CONTEXT)
            return pa.scalar(v, type=self._typ)
        return pa.scalar(unscaled, type=self._typ)

    def _bind_integral(self, pred: ColumnPredicate, col: ColumnSchema) -> None:
        lo_lim, hi_lim = _limits(col)
        if pred.kind == "in":
            vals = []
            for v in pred.values:
                if v is None:
                    continue
                x = _exact(v, col)
                if x == x.to_integral_value() and lo_lim <= x <= hi_lim:
                    vals.append(int(x))
            if self.logical:
                self.values = pa.array([self._scalar(v).as_py() for v in vals], type=self._typ)
            else:
                self.values = pa.array(vals, type=self._typ)
            self.always_false = not vals
            return
        if pred.kind != "range":
            return
        lower = upper = None
        if pred.lower is not None:
            x = _exact(pred.lower, col)
            lower = int(x.to_integral_value(rounding=decimal.ROUND_CEILING)) if (
                pred.lower_inclusive or x != x.to_integral_value()) else int(x) + 1
        if pred.upper is not None:
            x = _exact(pred.upper, col)
            upper = int(x.to_integral_value(rounding=decimal.ROUND_FLOOR)) if (
                pred.upper_inclusive or x != x.to_integral_value()) else int(x) - 1
        if (lower is not None and lower > hi_lim) or (upper is not None and upper < lo_lim) or (
                lower is not None and upper is not None and lower > upper):
            self.always_false = True
            return
        self.lower_inclusive = self.upper_inclusive = True
        if lower is not None and lower > lo_lim:
            self.lower = self._scalar(lower)
        if upper is not None and upper < hi_lim:
            self.upper = self._scalar(upper)

    def _bind_plain(self, pred: ColumnPredicate, col: ColumnSchema) -> None:
        typ = self._typ

        def conv(v):
            if v is None:
                return None
            return pa.scalar(physical_value(v, col) if _needs_physical(col) else v, type=typ)

        self.lower = conv(pred.lower)
        self.upper = conv(pred.upper)
        if pred.kind == "in":
            vals = [physical_value(v, col) if _needs_physical(col) else v
                    for v in pred.values if v is not None]
            self.values = pa.array(vals, type=typ)
            self.always_false = len(self.values) == 0

    def evaluate(self, arr: pa.Array) -> np.ndarray:
        """Boolean numpy mask over a physical array (NULL never matches except IS NULL)."""
        if self._nan is not None and not self.always_false:
            return self._float_nan(arr, self._evaluate(arr))
        return self._evaluate(arr)

    def _evaluate(self, arr: pa.Array) -> np.ndarray:
        if self.always_false:
            return np.zeros(len(arr), dtype=bool)
        if self.kind == "member":
            return self.test.mask(arr)
        if self.logical:
            arr = to_logical(arr, self.col.type, self.col.precision, self.col.scale)
        if self._np_bounds is not None and arr.null_count == 0 and len(arr):
            # Fixed-width values without nulls: numpy compares a zero-copy view directly,
            # cheaper than several Arrow kernel calls plus a boolean conversion.
            v = arr.to_numpy(zero_copy_only=True)
            lo, hi = self._np_bounds
            m = None
            if lo is not None:
                m = (v >= lo) if self.lower_inclusive else (v > lo)
            if hi is not None:
                u = (v <= hi) if self.upper_inclusive else (v < hi)
                m = u if m is None else (m & u)
            return m if m is not None else np.ones(len(v), dtype=bool)
        match self.kind:
            case "is_null":
                return np.asarray(arr.is_null())
            case "is_not_null":
                return np.asarray(arr.is_valid())
            case "in":
                if self._nan is not None:
                    # -0.0 hashes apart from 0.0: adding 0.0 turns it into 0.0
                    arr = pc.add(arr, pa.scalar(0.0, arr.type))
                m = pc.is_in(arr, value_set=self.values, skip_nulls=True)
            case _:
                m = None
                if self.lower is not None:
                    m = (pc.greater_equal if self.lower_inclusive else pc.greater)(
                        arr, self.lower)
                if self.upper is not None:
                    u = (pc.less_equal if self.upper_inclusive else pc.less)(arr, self.upper)
                    m = u if m is None else pc.and_(m, u)
                if m is None:
                    return np.asarray(arr.is_valid())
        if m.null_count:
            m = m.fill_null(False)
        return m.to_numpy(zero_copy_only=False)

    def may_match(self, vmin: Any, vmax: Any, null_count: int, num_rows: int) -> bool:
        """Zone-map test: can any row of a page with these stats match? (physical values)"""
        if self.always_false:
            return False
        if self.kind == "member":
            return self.test.may_match(vmin, vmax, null_count, num_rows)
        if self.kind == "is_null":
            return null_count > 0
        if null_count == num_rows:
            return False
        if self.kind == "is_not_null" or self.logical or vmin is None or vmax is None:
            return True
        if self._nan is not None and (self._nan != NAN_FAILS or self._in_nan
                                      or _is_nan(vmin) or _is_nan(vmax)):
            return True     # the page's min/max leave its NaNs out, and a NaN could pass
        if self.kind == "in":
            return any(vmin <= v <= vmax for v in self.values.to_pylist())
        if self.lower is not None:
            lo = self.lower.as_py()
            if vmax < lo or (vmax == lo and not self.lower_inclusive):
                return False
        if self.upper is not None:
            hi = self.upper.as_py()
            if vmin > hi or (vmin == hi and not self.upper_inclusive):
                return False
        return True


def _needs_physical(col: ColumnSchema) -> bool:
    return col.type in (DataType.DECIMAL, DataType.DATE, DataType.TIMESTAMP, DataType.STRING,
                        DataType.VARCHAR, DataType.BINARY)


def key_bounds(schema: Schema, preds: Sequence[ColumnPredicate]) -> tuple[bytes | None,
                                                                          bytes | None]:
    """Conservative encoded-key bounds [lower, upper) implied by predicates on a key prefix.

    Equality on key columns 0..j-1 plus a range (or equality) on column j narrows the scan to
    a key range; rows outside it cannot match. The predicates are still evaluated on every
    row, so the bounds only need to be conservative, never exact.
    """
    by_col: dict[str, list[ColumnPredicate]] = {}
    for p in preds:
        by_col.setdefault(p.column, []).append(p)
    key_cols = schema.key_columns
    prefix: list[Any] = []
    lower = upper = None
    for col in key_cols:
        eq = lo = hi = None
        for p in by_col.get(col.name, []):
            if p.kind == "range":
                if p.lower is not None and p.lower == p.upper:
                    eq = p.lower
                if p.lower is not None:
                    lo = p.lower if lo is None else max(lo, p.lower)
                if p.upper is not None:
                    hi = p.upper if hi is None else min(hi, p.upper)
            elif p.kind == "in" and p.values and None not in p.values:
                vals = sorted(p.values)
                lo = vals[0] if lo is None else max(lo, vals[0])
                hi = vals[-1] if hi is None else min(hi, vals[-1])
        try:
            if eq is not None:
                prefix.append(eq)
                continue
            if lo is not None:
                lower = encode_key_prefix(prefix + [lo], key_cols)
            elif prefix:
                lower = encode_key_prefix(prefix, key_cols)
            if hi is not None:
                upper = successor_prefix(encode_key_prefix(prefix + [hi], key_cols))
            elif prefix:
                upper = successor_prefix(encode_key_prefix(prefix, key_cols))
            return lower, upper
        except Exception:  # a bound the column cannot hold: no narrowing, rows still filtered
            return None, None
    if prefix:
        try:
            lower = encode_key_prefix(prefix, key_cols)
            return lower, successor_prefix(lower)
        except Exception:
            return None, None
    return None, None
