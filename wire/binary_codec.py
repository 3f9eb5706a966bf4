"""Result columns in PostgreSQL's binary format, a whole column at a time (`encode_binary`).

Fixed-width types big-endian through numpy, numeric as base-10000 digits, dates and
timestamps relative to 2000-01-01, intervals as (microseconds, days, months), one-
dimensional arrays with their header; types without a binary form go out as text.
"""
from __future__ import annotations

import decimal
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from wire.type_oids import (
    INT2,
    INT4,
    INT8,
    NUMERIC,
    PG_EPOCH_DAYS,
    PG_EPOCH_US,
    TEXT,
    _array_element,
    ParamError,
    type_oid,
)
from wire.text_codec import _as_binary, encode_text, _fixed, _interval_fields, _numpy, _valid
from wire.params import parse_text


def _numeric_value(v: decimal.Decimal | None, scale: int) -> bytes:
    """numeric's binary form of one value (int16 ndigits, weight, sign, dscale, digits)."""
    if v is None:
        return b""
    if v.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    if v.is_infinite():
        return struct.pack("!hhHh", 0, 0, 0xF000 if v < 0 else 0xD000, 0)
    sign, digits, exp = v.as_tuple()
    dscale = max(-exp, 0) if scale < 0 else scale
    s = "".join(map(str, digits))
    # integer digits and fraction digits as decimal strings, fraction padded to 4
    if exp >= 0:
        ip, fp = s + "0" * exp, ""
    else:
        ip, fp = (s[:exp] if len(s) > -exp else ""), s[exp:].rjust(-exp, "0")
    ip = ip.lstrip("0")
    ip = ip.rjust((len(ip) + 3) // 4 * 4, "0")
    fp = fp.ljust((len(fp) + 3) // 4 * 4, "0")
    groups = [int(ip[i:i + 4]) for i in range(0, len(ip), 4)] + \
             [int(fp[i:i + 4]) for i in range(0, len(fp), 4)]
    weight = len(ip) // 4 - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f"!hhHh{len(groups)}H", len(groups), weight,
                       0x4000 if sign and groups else 0, dscale, *groups)


def _numeric_binary(arr: pa.Array) -> pa.Array:
    """decimal128 -> numeric binary. Vectorised in base 10000 with numpy when the values
    fit in uint64 after aligning the scale to whole base-10000 groups; otherwise (p > 18,
    rare) one value at a time."""
    t = arr.type
    p, s = t.precision, t.scale
    pad = (4 - s % 4) % 4
    n = len(arr)
    if not pa.types.is_decimal128(t) or p > 18 or s + pad > 19 or n == 0:
        return pa.array([_numeric_value(v, s) if v is not None else None
                         for v in arr.to_pylist()], pa.binary())
    raw = np.frombuffer(arr.buffers()[1], np.int64, 2 * n, arr.offset * 16)[0::2]
    neg = raw < 0
    a = np.abs(raw).astype(np.uint64)
    ip = a // np.uint64(10 ** s)
    fp = (a % np.uint64(10 ** s)) * np.uint64(10 ** pad)
    ki = 5                                   # 10^18 < 10000^5
    kf = (s + pad) // 4
    cols = [(ip // np.uint64(10000 ** (ki - 1 - k))) % np.uint64(10000) for k in range(ki)]
    cols += [(fp // np.uint64(10000 ** (kf - 1 - k))) % np.uint64(10000) for k in range(kf)]
    g = np.stack(cols, axis=1).astype(np.int16) if cols else np.zeros((n, 0), np.int16)
    nz = g != 0
    anynz = nz.any(axis=1)
    width = g.shape[1]
    first = np.where(anynz, nz.argmax(axis=1), 0)
    last = np.where(anynz, width - 1 - nz[:, ::-1].argmax(axis=1), -1)
    ndig = np.where(anynz, last - first + 1, 0)
    weight = np.where(anynz, ki - 1 - first, 0)
    m = np.empty((n, 4 + width), ">i2")
    m[:, 0] = ndig
    m[:, 1] = weight
    m[:, 2] = np.where(neg & anynz, 0x4000, 0).astype(np.int16)
    m[:, 3] = s
    m[:, 4:] = g
    col = np.arange(width)
    mask = np.empty((n, 4 + width), bool)
    mask[:, :4] = True
    mask[:, 4:] = (col >= first[:, None]) & (col <= last[:, None])
    data = m[mask].view(np.uint8)
    lens = (4 + ndig) * 2
    offs = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offs[1:])
    out = pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offs),
                                                        pa.py_buffer(data.tobytes())])
    if arr.null_count:
        out = pc.if_else(arr.is_valid(), out, pa.scalar(None, pa.binary()))
    return out


def parse_array_text(s: str) -> list[str | None]:
    """Elements of a one-dimensional array literal '{a,"b c",NULL}' (as text)."""
    s = s.strip()
    if not (s.startswith("{") and s.endswith("}")):
        raise ParamError(f'malformed array literal: "{s}"')
    out: list[str | None] = []
    i, n = 1, len(s) - 1
    while i < n:
        if s[i] == '"':
            j, buf = i + 1, []
            while j < n and s[j] != '"':
                if s[j] == "\\" and j + 1 < n:
                    j += 1
                buf.append(s[j])
                j += 1
            out.append("".join(buf))
            i = j + 1
        else:
            j = s.find(",", i)
            j = n if j < 0 else j
            v = s[i:j].strip()
            out.append(None if v.upper() == "NULL" else v)
            i = j
        if i < n and s[i] == ",":
            i += 1
    return out


def _array_binary(arr: pa.Array, elem: pa.DataType) -> pa.Array:
    """One-dimensional arrays in binary form (int32 ndim, has-nulls, element oid, length,
    lower bound 1, then each element as int32 length + bytes). Arrays appear in catalog
    results (a few rows), so rows are parsed from their text form one by one."""
    eoid = type_oid(elem)[0]
    out = []
    for v in arr.storage.to_pylist():
        if v is None:
            out.append(None)
            continue
        items = parse_array_text(v)
        if not items:
            out.append(struct.pack("!iiI", 0, 0, eoid))
            continue
        vals = pa.array([None if x is None else parse_text(x, eoid) for x in items], elem) \
            if eoid != TEXT else pa.array(items, pa.string())
        enc = encode_binary(vals).to_pylist()
        body = b"".join(struct.pack("!i", -1) if e is None else
                        struct.pack("!i", len(e)) + bytes(e) for e in enc)
        out.append(struct.pack("!iiIii", 1, int(None in items), eoid, len(items), 1) + body)
    return pa.array(out, pa.binary())


def encode_binary(arr: pa.Array) -> pa.Array:
    """A column in PostgreSQL's binary format (as described by `type_oid`)."""
    t = arr.type
    elem = _array_element(t)
    if elem is not None:
        return _array_binary(arr, elem)
    if isinstance(t, pa.ExtensionType):
        return encode_binary(arr.storage)
    if pa.types.is_dictionary(t):
        return encode_binary(arr.dictionary_decode())
    v = _valid(arr)
    if pa.types.is_integer(t):
        oid, _ = type_oid(t)
        if oid == NUMERIC:
            return _numeric_binary(arr.cast(pa.decimal128(20, 0)))
        dt = {INT2: ">i2", INT4: ">i4", INT8: ">i8"}[oid]
        return _fixed(_numpy(arr).astype(dt), v)
    if pa.types.is_float32(t):
        return _fixed(_numpy(arr).astype(">f4"), v)
    if pa.types.is_floating(t):
        return _fixed(_numpy(arr.cast(pa.float64())).astype(">f8"), v)
    if pa.types.is_boolean(t):
        return _fixed(_numpy(arr, False).astype(np.uint8), v)
    if pa.types.is_date(t):
        days = _numpy(arr.cast(pa.date32()).cast(pa.int32())).astype(np.int64) - PG_EPOCH_DAYS
        return _fixed(days.astype(">i4"), v)
    if pa.types.is_timestamp(t):
        a = arr.cast(pa.timestamp("us", tz=t.tz), safe=False).cast(pa.int64())
        return _fixed((_numpy(a) - PG_EPOCH_US).astype(">i8"), v)
    if pa.types.is_time(t):
        a = arr.cast(pa.time64("us")).cast(pa.int64())
        return _fixed(_numpy(a).astype(">i8"), v)
    if pa.types.is_interval(t):         # int64 microseconds, int32 days, int32 months
        m, d, us = _interval_fields(arr)
        rec = np.empty(len(arr), np.dtype([("us", ">i8"), ("days", ">i4"), ("months", ">i4")]))
        rec["us"], rec["days"], rec["months"] = us, d, m
        return _fixed(rec, v)
    if pa.types.is_decimal(t):
        return _numeric_binary(arr)
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.binary())
    if pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or \
            pa.types.is_large_binary(t) or pa.types.is_string_view(t) or \
            pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return _as_binary(arr)
    return _as_binary(encode_text(arr))
