"""Converting values between what users write and what columns store.

In: `cast_column` and `table_from_pydict` turn input (Arrow columns, dicts of Python
lists) into a column's type: the one conversion every write path uses. Vectorised casts
first; only when one fails does the error path convert row by row, to report each
offending row (Kudu reports per-row errors, never a whole-batch failure).

Out: `python_converter` turns one stored (physical) value back into the Python value of
its logical type (point lookups, partition bounds in messages); a DATE or TIMESTAMP
outside Python's years 1-9999 (PostgreSQL's range is wider, and date arithmetic reaches it)
stays its physical int (days / microseconds since 1970), which pyarrow reads back into a
date32 / timestamp column. `default_array` is what a row reads for a column it was
written without.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from typing import Any

import numpy as np

import pyarrow as pa
import pyarrow.compute as pc

from engine import errors
from engine.key_encoding import DECIMAL_CONTEXT, physical_value
from engine.schema import ColumnSchema, Schema
from engine.types import (INTEGER_RANGES, DataType, decimal_to_float, invalid_value_message,
                          real_range_lost, to_physical)


def default_array(col: ColumnSchema, n: int) -> pa.Array:
    """n copies of a column's DEFAULT (NULL when it has none), as a physical array.

    What a row reads for a column it was written without: an INSERT that leaves the column
    out, and every row of a rowset written before ALTER TABLE ADD COLUMN (the MemRowSet and
    DiskRowSets match columns by id and fill the ones they lack with this).
    """
    if col.default is None:
        return pa.nulls(n, type=col.physical_type)
    try:
        one = to_physical(pa.array([col.default], type=col.arrow_type), col.type,
                          col.precision)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        # a default stored as its physical value (DATE days, TIMESTAMP micros)
        one = pa.array([physical_value(col.default, col)], type=col.physical_type)
    return one.take(pa.array(np.zeros(n, dtype=np.int64)))


def cast_column(arr: pa.Array, col: ColumnSchema, bad: dict) -> pa.Array:
    """An input Arrow column -> the column's logical Arrow type, as every write path
    converts it (so the catalog routes a row by exactly the key the tablet stores).

    Rows that cannot be converted are recorded in `bad` as {row: (code, message)} and
    become NULL; VARCHAR(n) values are truncated (Kudu), nanosecond timestamps truncated
    to microseconds.
    """
    target = col.arrow_type
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if col.type in (DataType.STRING, DataType.VARCHAR) and (
            pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        try:
            arr = arr.cast(pa.string())  # validates UTF-8
        except pa.ArrowInvalid:
            return _cast_rows(arr, col, target, bad)
    if col.type is DataType.VARCHAR and (pa.types.is_string(arr.type) or
                                         pa.types.is_large_string(arr.type) or
                                         pa.types.is_string_view(arr.type)):
        arr = arr.cast(pa.string())
        # Kudu truncates VARCHAR values to their declared length (in characters).
        if pc.any(pc.greater(pc.utf8_length(arr), col.length)).as_py():
            arr = pc.utf8_slice_codeunits(arr, 0, col.length)
        return arr
    if col.type is DataType.TIMESTAMP and pa.types.is_timestamp(arr.type):
        if arr.type.tz is not None:
            arr = arr.cast(pa.timestamp(arr.type.unit))
        # Sub-microsecond input is truncated to microseconds (Kudu's resolution).
        return arr.cast(target, safe=False) if arr.type.unit == "ns" else arr.cast(target)
    if arr.type == target:
        return arr
    if pa.types.is_float32(target) and (pa.types.is_floating(arr.type) or
                                        pa.types.is_decimal(arr.type) or
                                        pa.types.is_string(arr.type)):
        try:
            return _to_real(arr, col, bad)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):     # text that is no number
            return _cast_rows(arr, col, target, bad)
    if pa.types.is_floating(target) and pa.types.is_decimal(arr.type):
        return decimal_to_float(arr, target)        # correctly rounded (engine/types.py)
    if pa.types.is_decimal(target) and pa.types.is_integer(arr.type) and target.scale <= 19:
        # Arrow refuses int64 -> DECIMAL(p, s) unless p >= 19 + s whatever the values are;
        # going through DECIMAL(38, s) checks each value against p instead.
        arr = arr.cast(pa.decimal128(38, target.scale))
    try:
        return arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _cast_rows(arr, col, target, bad)

def _to_real(arr: pa.Array, col: ColumnSchema, bad: dict) -> pa.Array:
    """DOUBLE / DECIMAL / text -> REAL: a finite value past REAL's range (it would become
    Infinity) or a non-zero one below it (0) is a per-row 'out of range' error, as
    PostgreSQL's float4 refuses it (22003); Arrow's cast rounds both silently."""
    wide = decimal_to_float(arr, pa.float64()) if pa.types.is_decimal(arr.type) \
        else arr.cast(pa.float64())
    out = decimal_to_float(arr, pa.float32()) if pa.types.is_decimal(arr.type) \
        else wide.cast(pa.float32(), safe=False)
    lost = pc.or_(*real_range_lost(wide, out))
    rows = np.flatnonzero(lost.fill_null(False).to_numpy(zero_copy_only=False))
    for i in rows.tolist():            # error path only: the offending rows
        bad.setdefault(i, ("INVALID", invalid_value_message(
            col.name, col.type_sql(), wide[i].as_py(), ValueError("out of range"))))
    if len(rows):
        out = pc.if_else(lost, pa.scalar(None, pa.float32()), out)
    return out


def _cast_rows(arr: pa.Array, col: ColumnSchema, target: pa.DataType, bad: dict) -> pa.Array:
    """Error path only: convert row by row to report each offending row (a Python loop
    per row is acceptable here: it runs only when the vectorised cast has failed)."""
    good = []
    for i in range(len(arr)):
        try:
            v = arr[i].as_py()
        except Exception as e:  # noqa: BLE001 - reported as a per-row error
            bad.setdefault(i, ("INVALID", invalid_value_message(col.name, col.type_sql(),
                                                                ..., e)))
            good.append(None)
            continue
        if v is None:
            good.append(None)
            continue
        try:
            if col.type in INTEGER_RANGES:
                good.append(physical_value(v, col))
            elif col.type in (DataType.STRING, DataType.VARCHAR) and isinstance(v, bytes):
                good.append(v.decode("utf-8"))
            elif col.type is DataType.DECIMAL and isinstance(v, (int, float, decimal.Decimal)):
                good.append(_decimal_value(v, target))
            else:
                good.append(pa.scalar(v).cast(target, safe=True).as_py())
        except Exception as e:  # noqa: BLE001 - reported as a per-row error
            bad.setdefault(i, ("INVALID", invalid_value_message(col.name, col.type_sql(),
                                                                v, e)))
            good.append(None)
    out = pa.array(good, type=target)
    if col.type is DataType.VARCHAR:
        out = pc.utf8_slice_codeunits(out, 0, col.length)
    return out


def _decimal_value(v, target: pa.DataType) -> decimal.Decimal:
    """One value for DECIMAL(p, s), exactly (Kudu refuses rather than rounds; the SQL layer
    rounds before it gets here): 'out of range' when it needs more than p digits."""
    d = decimal.Decimal(repr(v)) if isinstance(v, float) else decimal.Decimal(v)
    q = d.quantize(decimal.Decimal(1).scaleb(-target.scale), rounding=decimal.ROUND_HALF_UP)
    if q != d:
        raise ValueError(f"{d} does not fit scale {target.scale}")
    if len(q.as_tuple().digits) > target.precision and q != 0:
        raise ValueError(f"numeric value out of range for DECIMAL({target.precision},"
                         f"{target.scale})")
    return q


def table_from_pydict(schema: Schema, rows: dict) -> tuple[pa.Table, dict, list]:
    """dict of Python lists -> (Arrow table, {row: (code, message)}, raw keys of those rows):
    values no Arrow column can hold become NULL and their rows are reported as INVALID
    (the error path converts value by value)."""
    n = len(next(iter(rows.values()))) if rows else 0
    cols, bad = {}, {}
    for name, values in rows.items():
        values = list(values)
        if len(values) != n:
            raise errors.InvalidArgument("columns of the rows have different lengths")
        target = schema.column(name).arrow_type if schema.has_column(name) \
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
                col = schema.column(name) if schema.has_column(name) else None
                bad.setdefault(i, ("INVALID", invalid_value_message(
                    name, col.type_sql() if col is not None else None, v, e)))
                good.append(None)
        cols[name] = pa.array(good, type=target)
    key_names = schema.key_names
    raw_keys = [tuple(rows[k][i] if k in rows else None for k in key_names)
                for i in range(n)] if bad else []
    return pa.table(cols) if cols else pa.table({}), bad, raw_keys


_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_DT = _dt.datetime(1970, 1, 1)


def identity(v: Any) -> Any:
    """`python_converter` of a column whose physical value is its Python value."""
    return v


def _python_date(v):
    if v is None:
        return None
    try:
        return _EPOCH_DATE + _dt.timedelta(days=v)
    except OverflowError:       # outside Python's years: the physical value (docstring)
        return v


def _python_timestamp(v):
    if v is None:
        return None
    try:
        return _EPOCH_DT + _dt.timedelta(microseconds=v)
    except OverflowError:
        return v


def python_converter(col: ColumnSchema):
    """A function: physical scalar (int/bytes/None) -> Python value of the logical type."""
    match col.type:
        case DataType.DATE:
            return _python_date
        case DataType.TIMESTAMP:
            return _python_timestamp
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
    return identity
