"""Kudu column types and their mapping to Arrow.

Every column has a *logical* type (what the user declared) and a *physical* Arrow type
(what the storage layer encodes in pages). The scan path returns the logical Arrow type:

    logical            Arrow (scan result)        physical (pages)
    INT8..INT64        int8..int64                same
    FLOAT / DOUBLE     float32 / float64          same
    BOOL               bool                       same
    DECIMAL(p,s)       decimal128(p, s)           int32 (p<=9), int64 (p<=18), fsb(16) (p>18)
    STRING, VARCHAR(n) string                     binary
    BINARY             binary                     binary
    DATE               date32                     int32 (days since epoch)
    TIMESTAMP          timestamp('us')            int64 (unix micros, UTC)

DECIMAL keeps Kudu's DECIMAL32/64/128 storage sizes so TPC-H money columns (DECIMAL(15,2))
cost 8 bytes a cell on disk, not 16. Conversions between logical and physical arrays are
zero-copy or a single vectorised kernel (`to_physical`, `to_logical`).

`sql_literal(value)` writes one value as a SQL literal (TIMESTAMP '2026-01-05 10:00:00',
DATE '...', 1.50, 'it''s', '\\x00ff'::bytea, NULL): the one way every user-facing message
and EXPLAIN line shows a value (never Python's repr), and, untyped, how SHOW CREATE TABLE
writes DEFAULTs and range bounds.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import enum
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class DataType(enum.Enum):
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT = "float"
    DOUBLE = "double"
    DECIMAL = "decimal"
    STRING = "string"
    VARCHAR = "varchar"
    BINARY = "binary"
    BOOL = "bool"
    DATE = "date"
    TIMESTAMP = "timestamp"

    @property
    def is_integer(self) -> bool:
        return self in _INTEGER_TYPES

    @property
    def key_allowed(self) -> bool:
        """Kudu forbids BOOL, FLOAT and DOUBLE in the primary key."""
        return self not in (DataType.BOOL, DataType.FLOAT, DataType.DOUBLE)


_INTEGER_TYPES = {DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64}

INTEGER_RANGES = {
    DataType.INT8: (-(2**7), 2**7 - 1),
    DataType.INT16: (-(2**15), 2**15 - 1),
    DataType.INT32: (-(2**31), 2**31 - 1),
    DataType.INT64: (-(2**63), 2**63 - 1),
}

MAX_DECIMAL_PRECISION = 38
MAX_VARCHAR_LENGTH = 65535


def decimal_physical_type(precision: int) -> pa.DataType:
    if precision <= 9:
        return pa.int32()
    if precision <= 18:
        return pa.int64()
    return pa.binary(16)


def arrow_type(dtype: DataType, precision: int | None = None, scale: int | None = None) -> pa.DataType:
    """The Arrow type a scan returns for a column of this logical type."""
    match dtype:
        case DataType.INT8:
            return pa.int8()
        case DataType.INT16:
            return pa.int16()
        case DataType.INT32:
            return pa.int32()
        case DataType.INT64:
            return pa.int64()
        case DataType.FLOAT:
            return pa.float32()
        case DataType.DOUBLE:
            return pa.float64()
        case DataType.BOOL:
            return pa.bool_()
        case DataType.DECIMAL:
            return pa.decimal128(precision, scale)
        case DataType.STRING | DataType.VARCHAR:
            return pa.string()
        case DataType.BINARY:
            return pa.binary()
        case DataType.DATE:
            return pa.date32()
        case DataType.TIMESTAMP:
            return pa.timestamp("us")
    raise ValueError(f"unknown type {dtype}")


def physical_type(dtype: DataType, precision: int | None = None) -> pa.DataType:
    """The Arrow type the page encoders see for a column of this logical type."""
    match dtype:
        case DataType.DECIMAL:
            return decimal_physical_type(precision)
        case DataType.STRING | DataType.VARCHAR | DataType.BINARY:
            return pa.binary()
        case DataType.DATE:
            return pa.int32()
        case DataType.TIMESTAMP:
            return pa.int64()
    return arrow_type(dtype)


def to_physical(arr: pa.Array, dtype: DataType, precision: int | None = None) -> pa.Array:
    """Logical Arrow array -> physical Arrow array (zero-copy except for DECIMAL)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    phys = physical_type(dtype, precision)
    if dtype is DataType.DECIMAL:
        return _decimal_to_unscaled(arr, phys)
    if arr.type == phys:
        return arr
    return arr.view(phys) if _same_width(arr.type, phys) else arr.cast(phys)


def to_logical(arr: pa.Array, dtype: DataType, precision: int | None = None,
               scale: int | None = None) -> pa.Array:
    """Physical Arrow array -> the logical Arrow array a scan returns."""
    logical = arrow_type(dtype, precision, scale)
    if dtype is DataType.DECIMAL:
        return _unscaled_to_decimal(arr, logical)
    if arr.type == logical:
        return arr
    return arr.view(logical)


def _same_width(a: pa.DataType, b: pa.DataType) -> bool:
    binaryish = (pa.types.is_binary(a) or pa.types.is_string(a)) and (
        pa.types.is_binary(b) or pa.types.is_string(b))
    if binaryish:
        return True
    try:
        return a.bit_width == b.bit_width
    except ValueError:
        return False


def _decimal_to_unscaled(arr: pa.Array, phys: pa.DataType) -> pa.Array:
    """decimal128 -> int32/int64 unscaled values (vectorised: reads the low 64-bit word)."""
    if pa.types.is_fixed_size_binary(phys):
        return arr.view(pa.binary(16)) if arr.type.bit_width == 128 else arr.cast(pa.binary(16))
    if not pa.types.is_decimal128(arr.type):
        arr = arr.cast(pa.decimal128(38, arr.type.scale))
    n = len(arr)
    words = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=2 * (arr.offset + n))
    low = words[2 * arr.offset::2][:n]
    values = low.astype(phys.to_pandas_dtype(), copy=True)
    if arr.null_count == 0:
        return pa.array(values, type=phys)
    mask = arr.is_null().to_numpy(zero_copy_only=False)
    return pa.array(values, type=phys, mask=mask)


def _unscaled_to_decimal(arr: pa.Array, logical: pa.DataType) -> pa.Array:
    """int32/int64 unscaled -> decimal128 by sign-extending into 128-bit words (vectorised)."""
    if pa.types.is_fixed_size_binary(arr.type):
        return arr.view(logical)
    n = len(arr)
    vals = (arr.fill_null(0) if arr.null_count else arr).to_numpy(zero_copy_only=False)
    vals = vals.astype(np.int64, copy=False)
    if n and vals.min() >= 0:
        # (prices, quantities: the high words are all 0, so one strided write, not two -
        # a third of the conversion a scan of DECIMAL columns pays per value)
        words = np.zeros((n, 2), dtype=np.int64)
        words[:, 0] = vals
    else:
        words = np.empty((n, 2), dtype=np.int64)
        words[:, 0] = vals
        words[:, 1] = vals >> 63
    validity = None
    if arr.null_count:
        validity = pc.is_valid(arr).buffers()[1]
    return pa.Array.from_buffers(logical, n, [validity, pa.py_buffer(words)],
                                 null_count=arr.null_count)


def real_range_lost(wide, real):
    """(overflow, underflow) masks of float64 values `wide` cast to REAL as `real`: a
    finite value that became Infinity, a non-zero one that became 0. PostgreSQL's float4
    refuses both (22003); Arrow's cast rounds them silently. Casts, writes and sum(real)
    check with it."""
    over = pc.and_(pc.is_finite(wide), pc.invert(pc.is_finite(real)))
    under = pc.and_(pc.not_equal(wide, 0), pc.equal(real, 0))
    return over, under


def decimal_to_float(v, to: pa.DataType):
    """A DECIMAL array or scalar as REAL / DOUBLE `to`, correctly rounded (as PostgreSQL's
    cast): Arrow's own decimal -> float cast scales in binary and is not (0.3 became
    0.30000000000000004, 0.1 as float32 0.099999994); the decimal text parses to the
    nearest float of `to` (Arrow's parser is correctly rounded). The one rule for the
    planner's casts and the engine's writes."""
    return v.cast(pa.string()).cast(to)


def pg_era_text(text, years):
    """ISO text of dates / timestamps (`text`, from an Arrow cast) in PostgreSQL's form for
    years before 1 AD: Arrow writes astronomical years (1 BC is '0000', 2 BC '-0001'),
    PostgreSQL writes '0001-12-02 BC' (the time and zone stay before ' BC'). `years` is
    `pc.year` of the values; arrays, chunked arrays and scalars alike, vectorised."""
    if isinstance(years, pa.Scalar):
        if not years.is_valid or years.as_py() > 0:
            return text
    elif not pc.any(pc.less_equal(years, 0)).as_py():
        return text
    rest = pc.replace_substring_regex(text, pattern=r"^-?\d+", replacement="")
    year = pc.utf8_lpad(pc.cast(pc.subtract(pa.scalar(1, pa.int64()),
                                            pc.cast(years, pa.int64())), pa.string()),
                        width=4, padding="0")
    return pc.if_else(pc.less_equal(years, 0),
                      pc.binary_join_element_wise(year, rest, pa.scalar(" BC"), ""), text)


def sql_literal(value: Any, typed: bool = True) -> str:
    """`value` as a SQL literal that reads back as the same value.

    Typed (messages, EXPLAIN): TIMESTAMP '2026-01-05 10:00:00', DATE '2026-01-05',
    INTERVAL '...', '\\x0a1b'::bytea. Untyped (SHOW CREATE TABLE's DEFAULTs and range
    bounds, where the column gives the type): the quoted text alone. Numbers, booleans and
    NULL are bare; strings are single-quoted with '' for a quote; NaN and infinities are
    the quoted strings PostgreSQL reads ('NaN', 'Infinity'); lists are ARRAY[...]. Arrow and
    numpy scalars are first turned into their Python values."""
    if isinstance(value, pa.Scalar):
        value = value.as_py()
    elif isinstance(value, np.generic):
        value = value.item()
    match value:
        case None:
            return "NULL"
        case bool():
            return "TRUE" if value else "FALSE"
        case int():
            return str(value)
        case float():
            if math.isfinite(value):
                return repr(value)
            text = "'NaN'" if math.isnan(value) else \
                ("'Infinity'" if value > 0 else "'-Infinity'")
            return text + ("::double precision" if typed else "")
        case decimal.Decimal():
            if value.is_finite():
                return format(value, "f")
            return "'NaN'" + ("::numeric" if typed else "")
        case _dt.datetime():
            text = _quote(value.isoformat(sep=" ", timespec="microseconds"
                                          if value.microsecond else "seconds"))
            if not typed:
                return text
            return ("TIMESTAMPTZ " if value.tzinfo is not None else "TIMESTAMP ") + text
        case _dt.date():
            return ("DATE " if typed else "") + _quote(value.isoformat())
        case _dt.time():
            return ("TIME " if typed else "") + _quote(value.isoformat())
        case _dt.timedelta():
            return ("INTERVAL " if typed else "") + _quote(_interval_text(value))
        case bytes() | bytearray() | memoryview():
            text = _quote("\\x" + bytes(value).hex())
            return text + ("::bytea" if typed else "")
        case list() | tuple():
            return "ARRAY[" + ", ".join(sql_literal(v, typed) for v in value) + "]"
    return _quote(str(value))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _interval_text(td: _dt.timedelta) -> str:
    """A timedelta as PostgreSQL's interval text: `3 days 04:05:06.5`."""
    us = td.days * 86_400_000_000 + td.seconds * 1_000_000 + td.microseconds
    sign = "-" if us < 0 else ""
    days, rest = divmod(abs(us), 86_400_000_000)
    h, rest = divmod(rest, 3_600_000_000)
    m, rest = divmod(rest, 60_000_000)
    sec, frac = divmod(rest, 1_000_000)
    clock = f"{h:02d}:{m:02d}:{sec:02d}" + (f".{frac:06d}".rstrip("0") if frac else "")
    out = f"{sign}{days} day{'s' if days != 1 else ''} " if days else ""
    return out + (f"{sign}{clock}" if clock != "00:00:00" or not days else "").rstrip()


def invalid_value_message(column: str, type_sql: str | None, value: Any,
                          err: BaseException | None = None) -> str:
    """The per-row error for a value a column cannot hold, in SQL's words:
    `invalid value for column n of type TINYINT: 300 (out of range)`. The reason is kept
    only where it says something in SQL's terms; Arrow's and Python's own wording (cast
    kernels, Python type names) is not shown."""
    text = f"invalid value for column {column}"
    if type_sql:
        text += f" of type {type_sql}"
    if value is not ...:                        # ...: the value could not be read
        text += f": {sql_literal(value)}"
    why = str(err or "").lower()
    if any(w in why for w in ("out of range", "not in range", "overflow", "too big",
                              "too large", "would overflow", "precision")):
        return text + " (out of range)"
    if "truncated" in why or "not an integer" in why:
        return text + " (not an integer)"
    if "utf" in why or "decode" in why:
        return text + " (not valid UTF-8)"
    return text
