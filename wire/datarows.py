"""DataRow messages, a batch at a time (`data_rows`), and the per-value encoders.

`data_rows(batch, formats)`: each column becomes a binary array of wire fields (int32
length, -1 for NULL, then the value), and `join_rows` glues a per-row header and the
fields of every column into one buffer with `binary_join_element_wise`. Below
`SMALL_BATCH_ROWS` rows a batch is encoded value by value (`value_encoder`): Arrow's
fixed cost per kernel call dominates there.

`data_row(row, columns, codes, encoders)`: the DataRow of one row of Python values (the
point-read fast path's, wire/fastpath.py), compiled in native/_wire.pyx; its twin
`data_row_py` is the specification. `value_code` tells the kernel which columns it may
encode itself (text as UTF-8, binary int2/int4/int8/float8) when a value has exactly the
expected Python type; every other value goes through its column's `value_encoder`.
"""
from __future__ import annotations

import datetime as _dt
import functools
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import native

from wire.type_oids import INT2, INT4, INT8, _PG_EPOCH_DATE, _PG_EPOCH_DT, _UTC, type_oid
from wire.text_codec import _as_binary, encode_text, _fixed, _numpy, _pg_float_repr
from wire.binary_codec import encode_binary, _numeric_value


# -- rows -------------------------------------------------------------------------------------
_NULL_LEN = pa.scalar(b"\xff\xff\xff\xff", pa.binary())
_EMPTY = pa.scalar(b"", pa.binary())


def _fields(values: pa.Array) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """(length prefixes, values with nulls as b'', wire size of each field)."""
    values = _as_binary(values)
    lens = pc.binary_length(values)
    ln = _numpy(lens, -1).astype(np.int64)
    prefix = _fixed(ln.astype(">i4"), None)
    if values.null_count:
        values = values.fill_null(_EMPTY)
    return prefix, values, 4 + np.maximum(ln, 0)


def join_rows(columns: list[pa.Array], header: bytes, with_length: bool,
              with_sizes: bool = False):
    """One message per row: `header` (+ int32 length counting itself and what follows
    when `with_length`) + int16 column count + each column's wire field. With
    `with_sizes`, also each row's size in bytes."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return (b"", np.zeros(0, np.int64)) if with_sizes else b""
    parts: list[pa.Array] = []
    size = np.full(n, 2, np.int64)
    for col in columns:
        prefix, values, sz = _fields(col)
        parts.append(prefix)
        parts.append(values)
        size += sz
    h = np.empty((n, len(header) + (4 if with_length else 0) + 2), np.uint8)
    h[:, :len(header)] = np.frombuffer(header, np.uint8)
    at = len(header)
    if with_length:
        h[:, at:at + 4] = (size + 4).astype(">i4").view(np.uint8).reshape(n, 4)
        at += 4
    h[:, at:at + 2] = np.frombuffer(struct.pack("!h", len(columns)), np.uint8)
    head = pa.FixedSizeBinaryArray.from_buffers(pa.binary(h.shape[1]), n,
                                                [None, pa.py_buffer(h)]).cast(pa.binary())
    if not parts:
        joined = head
    else:
        joined = pc.binary_join_element_wise(head, *parts, b"")
    offs = np.frombuffer(joined.buffers()[1], np.int32, n + 1, joined.offset * 4)
    data = memoryview(joined.buffers()[2])[offs[0]:offs[-1]].tobytes()
    if with_sizes:
        return data, size + len(header) + (4 if with_length else 0)
    return data


def encode_columns(batch: pa.RecordBatch | pa.Table, formats: list[int],
                   zone: str = "UTC") -> list[pa.Array]:
    """Each column in its format; `zone`: the session's TimeZone (text timestamptz)."""
    cols = []
    for col, fmt in zip(batch.columns, formats):
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        cols.append(encode_binary(col) if fmt == 1 else encode_text(col, zone))
    return cols


# -- small batches --------------------------------------------------------------------------
# Below this many rows a batch is encoded value by value in Python: each Arrow kernel call
# costs microseconds of fixed overhead, and the vectorised path makes about a dozen per
# column (~150 us for a one-row, five-column batch against ~15 us value by value). Point
# queries return one row. tests/wire/test_pg_types.py checks both paths give the same bytes.
SMALL_BATCH_ROWS = 8
_S16, _S32, _S64 = struct.Struct("!h"), struct.Struct("!i"), struct.Struct("!q")
_SF32, _SF64 = struct.Struct("!f"), struct.Struct("!d")
_US = _dt.timedelta(microseconds=1)


@functools.lru_cache(maxsize=512)
def _small_encoder(t: pa.DataType, fmt: int):
    """A function Python value -> wire bytes for a column of type `t`, or None when this
    type takes the vectorised path."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return str.encode
    if pa.types.is_null(t):
        return lambda v: None
    if pa.types.is_signed_integer(t) or (pa.types.is_unsigned_integer(t) and t.bit_width <= 16):
        if fmt == 0:
            return lambda v: str(v).encode()
        oid = type_oid(t)[0]
        st = {INT2: _S16, INT4: _S32, INT8: _S64}[oid]
        return st.pack
    if pa.types.is_floating(t) and not pa.types.is_float16(t):
        single = pa.types.is_float32(t)
        if fmt == 0:
            return lambda v: _pg_float_repr(v, single).encode()
        return (_SF32 if single else _SF64).pack
    if pa.types.is_boolean(t):
        if fmt == 0:
            return lambda v: b"t" if v else b"f"
        return lambda v: b"\1" if v else b"\0"
    if pa.types.is_decimal(t):
        scale = t.scale
        if fmt == 0:
            return lambda v: format(v, "f").encode()
        return lambda v: _numeric_value(v, scale)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        if fmt == 0:
            return lambda v: b"\\x" + v.hex().encode()
        return bytes
    if pa.types.is_date32(t):
        if fmt == 0:
            return _or_physical(t, fmt, lambda v: v.isoformat().encode())
        return _or_physical(t, fmt, lambda v: _S32.pack((v - _PG_EPOCH_DATE).days))
    if pa.types.is_timestamp(t) and t.unit == "us":
        tz = t.tz is not None
        if fmt == 0:
            def text(v):
                if isinstance(v, int):
                    return _physical(v, t, fmt)
                if tz:
                    v = v.astimezone(_UTC).replace(tzinfo=None)
                s = v.isoformat(sep=" ")
                if v.microsecond:
                    s = s.rstrip("0")
                return (s + "+00").encode() if tz else s.encode()
            return text
        def binary(v):
            if isinstance(v, int):
                return _physical(v, t, fmt)
            if tz:
                v = v.astimezone(_UTC).replace(tzinfo=None)
            return _S64.pack((v - _PG_EPOCH_DT) // _US)
        return binary
    return None


def _physical(v: int, t: pa.DataType, fmt: int) -> bytes:
    """A date / timestamp outside Python's years, as a point lookup gives it (its physical
    int, engine/convert.py): encoded by the vectorised encoder, so both paths agree."""
    return encode_columns(pa.table({"v": pa.array([v], t)}), [fmt])[0][0].as_py()


def _or_physical(t: pa.DataType, fmt: int, enc):
    return lambda v: _physical(v, t, fmt) if isinstance(v, int) else enc(v)


def value_encoder(t: pa.DataType, fmt: int):
    """A function Python value (as `to_pylist` gives it) -> the wire bytes of a column of
    type `t` in format `fmt`, or None for types only the vectorised encoder handles (the
    point-read fast path, wire/fastpath.py, builds its DataRow with these). None for a
    timestamptz in text: its text depends on the session's TimeZone, which this function
    does not know (tables hold no timestamptz column, so a point read never has one)."""
    if fmt == 0 and pa.types.is_timestamp(t) and t.tz is not None:
        return None
    return _small_encoder(t, fmt)


def value_code(t: pa.DataType, fmt: int) -> int:
    """The compiled `data_row`'s code for a column of type `t` in format `fmt`: 1 text
    (`str` as UTF-8, either format), 2 / 3 / 4 binary int8 / int4 / int2 (`int`), 5 binary
    float8 (`float`), 0 its encoder always. The twin ignores the codes: they only say
    which `value_encoder` the kernel may stand in for, with exactly its bytes."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return 1
    if fmt != 1:
        return 0
    if pa.types.is_signed_integer(t) or (pa.types.is_unsigned_integer(t) and t.bit_width <= 16):
        return {INT8: 2, INT4: 3, INT2: 4}[type_oid(t)[0]]
    if pa.types.is_float64(t):
        return 5
    return 0


def data_row_py(row: dict, columns, codes, encoders) -> bytes:
    """The DataRow message of one row (`row[c]` for each of `columns`): NULL for None (or
    an encoder's None), else the column's encoder's bytes. `codes` are the compiled
    kernel's (`value_code`) and change nothing here."""
    return _data_row(_S16.pack(len(columns)), encoders, [row[c] for c in columns])


def _data_row(head: bytes, encoders, values) -> bytes:
    """One DataRow from a row's values: `head` (the column count), then each value's
    length and its encoder's bytes, or -1 for NULL (None, or an encoder's None)."""
    parts = [head]
    for enc, v in zip(encoders, values):      # a loop per column of one row
        b = None if v is None else enc(v)
        if b is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_S32.pack(len(b)))
            parts.append(b)
    body = b"".join(parts)
    return b"D" + _S32.pack(len(body) + 4) + body


def _data_rows_small(batch, formats: list[int], zone: str = "UTC") -> bytes | None:
    encoders = []
    for col, fmt in zip(batch.columns, formats):
        t = col.type
        if fmt == 0 and zone != "UTC" and pa.types.is_timestamp(t) and t.tz is not None:
            return None             # shown in the session's zone: the vectorised encoder
        enc = _small_encoder(t, fmt)
        if enc is None:
            return None
        encoders.append(enc)
    try:
        cols = [col.to_pylist() for col in batch.columns]
    except OverflowError:       # a date or timestamp outside Python's years 1-9999: the
        return None             # vectorised encoder writes them (PostgreSQL's range is wider)
    head = _S16.pack(len(cols))
    # a loop per row: this path serves small batches only (the vectorised one the rest)
    rows = zip(*cols) if cols else [()] * batch.num_rows     # SELECT with no columns
    return b"".join([_data_row(head, encoders, row) for row in rows])


def data_rows(batch: pa.RecordBatch | pa.Table, formats: list[int],
              zone: str = "UTC") -> bytes:
    """The DataRow messages of every row of `batch`, columns in the given formats;
    timestamptz text in `zone` (the session's TimeZone, a PostgreSQL zone name)."""
    if batch.num_rows == 0:
        return b""
    if batch.num_rows <= SMALL_BATCH_ROWS:
        out = _data_rows_small(batch, formats, zone)
        if out is not None:
            return out
    return join_rows(encode_columns(batch, formats, zone), b"D", True)


data_row = native.kernel("_wire", "data_row", data_row_py, "fallback_data_row")
