"""Converting input values to a column's type: the one conversion every write path uses.

Vectorised casts first; only when one fails does the error path convert row by row, to
report each offending row (Kudu reports per-row errors, never a whole-batch failure).
"""

from __future__ import annotations

import decimal

import numpy as np

import pyarrow as pa
import pyarrow.compute as pc

from engine.key_encoding import physical_value
from engine.schema import ColumnSchema
from engine.types import INTEGER_RANGES, DataType, invalid_value_message, to_physical


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
    if pa.types.is_decimal(target) and pa.types.is_integer(arr.type) and target.scale <= 19:
        # Arrow refuses int64 -> DECIMAL(p, s) unless p >= 19 + s whatever the values are;
        # going through DECIMAL(38, s) checks each value against p instead.
        arr = arr.cast(pa.decimal128(38, target.scale))
    try:
        return arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _cast_rows(arr, col, target, bad)

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
