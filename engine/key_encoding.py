"""Order-preserving encoding of primary keys: byte order == key tuple order.

Each key column is encoded and the parts are concatenated (Kudu's scheme, §3.2 of the paper):

    signed integers (INT8..64, DATE, TIMESTAMP, DECIMAL unscaled)
        big-endian two's complement with the sign bit flipped, so memcmp sorts numerically
    STRING / VARCHAR / BINARY
        every 0x00 byte escaped as 0x00 0x01; a column that is not the last key column is
        terminated with 0x00 0x00, which sorts below any escaped or plain byte

Encoded keys of one schema are compared as bytes (memcmp). The vectorised form is a numpy
fixed-width bytes array (dtype ``S<w>``): numpy compares such arrays as if zero-padded and
strips trailing zero bytes on element access. Both are harmless here because no two distinct
keys differ only by trailing zero bytes: fixed-width parts have a fixed length, and escaping
guarantees the last string part never ends in a bare 0x00 (so the last string column needs
no terminator, exactly as in Kudu). Equality and ordering in numpy therefore match memcmp,
and ``np.searchsorted`` / ``np.unique`` work on encoded keys directly.

`encode_keys` is vectorised over Arrow arrays (no Python loop per row); `encode_key` encodes
one tuple for point lookups and scan bounds and returns the canonical form: the same bytes
with trailing zero bytes dropped, exactly what ``bytes(arr[i])`` gives for the array form.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import native
from engine import errors
from engine.schema import ColumnSchema
from engine.types import DataType, INTEGER_RANGES

_INT_WIDTH = {DataType.INT8: 1, DataType.INT16: 2, DataType.INT32: 4, DataType.INT64: 8,
              DataType.DATE: 4, DataType.TIMESTAMP: 8}
_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_DT = _dt.datetime(1970, 1, 1)
# DECIMAL(38) needs more than the default 28 significant digits; 80 covers any value a
# column or a predicate literal can hold, so scaling is exact.
DECIMAL_CONTEXT = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_UP)


def decimal_unscaled_exact(value: Any, scale: int) -> decimal.Decimal:
    """value * 10**scale computed exactly (may have a fractional part)."""
    d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(
        value if not isinstance(value, float) else repr(value))
    return d.scaleb(scale, context=DECIMAL_CONTEXT)


def _fixed_width(col: ColumnSchema) -> int | None:
    if col.type is DataType.DECIMAL:
        return 4 if col.precision <= 9 else 8 if col.precision <= 18 else 16
    return _INT_WIDTH.get(col.type)


def _int_matrix(values: np.ndarray, width: int) -> np.ndarray:
    """Signed ints -> (n, width) uint8 big-endian with the sign bit flipped."""
    m = values.astype(f">i{width}", copy=False).view(np.uint8).reshape(len(values), width).copy()
    m[:, 0] ^= 0x80
    return m


def _int128_matrix(arr: pa.Array) -> np.ndarray:
    """fixed_size_binary(16) little-endian two's complement -> big-endian, sign flipped."""
    n = len(arr)
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=16 * (arr.offset + n))
    m = raw[16 * arr.offset:].reshape(n, 16)[:, ::-1].copy()
    m[:, 0] ^= 0x80
    return m


def binary_to_fixed(arr: pa.Array) -> np.ndarray:
    """Arrow binary array (no nulls) -> numpy ``S<w>`` array, w = longest value (vectorised)."""
    n = len(arr)
    if n == 0:
        return np.empty(0, dtype="S1")
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.binary())
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=arr.offset + n + 1)[arr.offset:]
    lens = np.diff(offs)
    width = max(int(lens.max()), 1)
    out = np.zeros((n, width), dtype=np.uint8)
    data_buf = arr.buffers()[2]
    if data_buf is not None and offs[-1] > offs[0]:
        data = np.frombuffer(data_buf, dtype=np.uint8)[offs[0]:offs[-1]]
        # Boolean-mask assignment fills row-major, the order of Arrow's contiguous data.
        out[np.arange(width) < lens[:, None]] = data
    return out.view(f"S{width}").reshape(n)


def encode_keys(columns: Sequence[pa.Array], key_schema: Sequence[ColumnSchema]) -> np.ndarray:
    """Encode n rows of key columns (physical Arrow arrays, no nulls) -> ``S<w>`` array."""
    n = len(columns[0]) if columns else 0
    last = len(key_schema) - 1
    if all(_fixed_width(c) is not None for c in key_schema):
        parts = []
        for arr, col in zip(columns, key_schema):
            w = _fixed_width(col)
            if w == 16:
                parts.append(_int128_matrix(arr))
            else:
                parts.append(_int_matrix(arr.to_numpy(zero_copy_only=False), w))
        m = np.hstack(parts) if len(parts) > 1 else parts[0]
        return np.ascontiguousarray(m).view(f"S{m.shape[1]}").reshape(n)
    # Variable-width keys: build each part as an Arrow binary array and join them.
    pieces = []
    for i, (arr, col) in enumerate(zip(columns, key_schema)):
        w = _fixed_width(col)
        if w is None:
            b = arr.cast(pa.binary()) if not pa.types.is_binary(arr.type) else arr
            b = pc.replace_substring(b, pattern=b"\x00", replacement=b"\x00\x01")
            if i != last:
                b = pc.binary_join_element_wise(b, pa.scalar(b"\x00\x00"), pa.scalar(b""))
            pieces.append(b)
        else:
            m = (_int128_matrix(arr) if w == 16
                 else _int_matrix(arr.to_numpy(zero_copy_only=False), w))
            fsb = pa.FixedSizeBinaryArray.from_buffers(pa.binary(w), n, [None, pa.py_buffer(m)])
            pieces.append(fsb.cast(pa.binary()))
    joined = pieces[0] if len(pieces) == 1 else pc.binary_join_element_wise(
        *pieces, pa.scalar(b""))
    return binary_to_fixed(joined)


# -- scalar path ------------------------------------------------------------------------------

def physical_value(value: Any, col: ColumnSchema) -> Any:
    """A Python value of a column's logical type -> its physical value (int or bytes)."""
    t = col.type
    if t in (DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64):
        if isinstance(value, (float, np.floating, decimal.Decimal)) and value == int(value):
            value = int(value)  # 2.0 is a fine INT; 1.5 is not
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise errors.InvalidArgument(f"invalid value {value!r} for {t.name} column {col.name}")
        lo, hi = INTEGER_RANGES[t]
        if not lo <= int(value) <= hi:
            raise errors.InvalidArgument(f"value {value} out of range for {t.name}")
        return int(value)
    if t is DataType.DATE:
        if isinstance(value, _dt.datetime):
            value = value.date()
        if isinstance(value, _dt.date):
            return (value - _EPOCH_DATE).days
        return int(value)
    if t is DataType.TIMESTAMP:
        if isinstance(value, _dt.datetime):
            if value.tzinfo is not None:
                value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
            delta = value - _EPOCH_DT
            return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        return int(value)
    if t is DataType.DECIMAL:
        if isinstance(value, bool):
            raise errors.InvalidArgument(f"invalid value {value!r} for {col.type_sql()}")
        unscaled = int(decimal_unscaled_exact(value, col.scale).to_integral_value(
            rounding=decimal.ROUND_HALF_UP, context=DECIMAL_CONTEXT))
        if abs(unscaled) >= 10 ** col.precision:
            raise errors.InvalidArgument(f"value {value} out of range for {col.type_sql()}")
        return unscaled
    if t in (DataType.STRING, DataType.VARCHAR):
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise errors.InvalidArgument(f"invalid value {value!r} for {t.name} column {col.name}")
    if t is DataType.BINARY:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise errors.InvalidArgument(f"invalid value {value!r} for BINARY column {col.name}")
    raise errors.InvalidArgument(f"type {t.name} cannot be a key column")


def encode_key(values: Sequence[Any], key_schema: Sequence[ColumnSchema]) -> bytes:
    """Encode one full key tuple of Python (logical) values; same bytes as `encode_keys`,
    in canonical form: trailing zero bytes dropped, as numpy does on element access, so
    Python-level comparisons agree with values read back from ``S<w>`` arrays."""
    if len(values) != len(key_schema):
        raise errors.InvalidArgument(
            f"key has {len(values)} values, the primary key has {len(key_schema)} columns")
    return encode_key_prefix(values, key_schema)


def encode_key_prefix(values: Sequence[Any], key_schema: Sequence[ColumnSchema]) -> bytes:
    """Encode the first len(values) key columns (a scan bound on a key prefix).

    The result compares below every full key that starts with these values, so it is a valid
    inclusive lower bound; callers derive exclusive/upper bounds with `successor_prefix`.
    """
    if len(values) > len(key_schema):
        raise errors.InvalidArgument(
            f"key bound has {len(values)} values, the primary key has {len(key_schema)} columns")
    sub = list(key_schema[: len(values)])
    out = bytearray()
    for i, (v, col) in enumerate(zip(values, sub)):
        p = physical_value(v, col)
        w = _fixed_width(col)
        if w is None:
            out += p.replace(b"\x00", b"\x00\x01")
            if i != len(key_schema) - 1:
                out += b"\x00\x00"
        else:
            out += (p + (1 << (8 * w - 1))).to_bytes(w, "big")
    return bytes(out).rstrip(b"\x00")


def successor_prefix(prefix: bytes) -> bytes | None:
    """Smallest byte string greater than every string starting with `prefix` (None = +inf)."""
    b = bytearray(prefix)
    while b and b[-1] == 0xFF:
        b.pop()
    if not b:
        return None
    b[-1] += 1
    return bytes(b)


def compile_key_encoder(key_schema: Sequence[ColumnSchema]):
    """A function tuple -> canonical encoded key, specialised once per key schema.

    Same bytes as `encode_key`; integer columns (the common key type) skip the generic
    conversion, which matters on the point-lookup path.
    """
    parts = []
    last = len(key_schema) - 1
    for i, col in enumerate(key_schema):
        w = _fixed_width(col)
        if col.type in INTEGER_RANGES:
            lo, hi = INTEGER_RANGES[col.type]
            bias = 1 << (8 * w - 1)

            def enc_int(v, col=col, w=w, lo=lo, hi=hi, bias=bias):
                if type(v) is not int or not lo <= v <= hi:
                    v = physical_value(v, col)
                return (v + bias).to_bytes(w, "big")
            parts.append(enc_int)
        elif w is not None:
            bias = 1 << (8 * w - 1)
            parts.append(lambda v, col=col, w=w, bias=bias:
                         (physical_value(v, col) + bias).to_bytes(w, "big"))
        else:
            term = b"" if i == last else b"\x00\x00"
            parts.append(lambda v, col=col, term=term:
                         physical_value(v, col).replace(b"\x00", b"\x00\x01") + term)
    n = len(parts)
    if n == 1 and key_schema[0].type in INTEGER_RANGES:
        # one integer column, the most common key: no per-column call (point reads and
        # single-row writes encode their key on every op)
        col = key_schema[0]
        w = _fixed_width(col)
        lo, hi = INTEGER_RANGES[col.type]
        bias = 1 << (8 * w - 1)

        def encode_int(values: Sequence[Any]) -> bytes:
            if len(values) != 1:
                raise errors.InvalidArgument(
                    f"key has {len(values)} values, the primary key has 1 columns")
            v = values[0]
            if type(v) is not int or not lo <= v <= hi:
                v = physical_value(v, col)
            return (v + bias).to_bytes(w, "big").rstrip(b"\x00")
        return encode_int

    def encode(values: Sequence[Any]) -> bytes:
        if len(values) != n:
            raise errors.InvalidArgument(
                f"key has {len(values)} values, the primary key has {n} columns")
        return b"".join([f(v) for f, v in zip(parts, values)]).rstrip(b"\x00")
    return encode


def find_sorted_py(keys: np.ndarray, key: bytes) -> int:
    """The position of the encoded key `key` in `keys`, a key-sorted numpy array of
    fixed-width bytes (dtype S<w>), or -1: the point probe of a MemRowSet's key runs and
    a DiskRowSet's key page. The specification of the compiled `find_sorted`
    (native/_hashing.pyx), which hands it every call it does not decide itself;
    `find_sorted` is whichever of the two runs."""
    pos = int(keys.searchsorted(key))
    return pos if pos < len(keys) and keys[pos] == key else -1


find_sorted = native.kernel("_hashing", "find_sorted", find_sorted_py, "fallback_find")
