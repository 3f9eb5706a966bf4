"""PostgreSQL types on the wire: OIDs, Arrow <-> OID mapping, and the value codecs.

Result columns are Arrow arrays; they go out as whole columns, never value by value:

    Arrow type          OID   name         text format              binary format
    int8, int16         21    int2         pc.cast -> string        >i2
    int32               23    int4         pc.cast -> string        >i4
    int64               20    int8         pc.cast -> string        >i8
    float32 / float64   700 / 701          shortest round trip,     >f4 / >f8
                                           PostgreSQL's exponent
                                           rule (see _float_text)
    decimal128(p, s)    1700  numeric      pc.cast -> string        base-10000 digits
                              typmod ((p << 16) | s) + 4            (numpy, p <= 18)
    string              25    text         as is                    UTF-8 bytes
    binary              17    bytea        \\x + hex (numpy)         raw bytes
    bool                16    bool         t / f                    1 byte
    date32              1082  date         YYYY-MM-DD               >i4 days since 2000-01-01
    timestamp[us]       1114  timestamp    YYYY-MM-DD HH:MM:SS[.f]  >i8 us since 2000-01-01
    timestamp[us, tz]   1184  timestamptz  ... +00 (UTC)            same
    null                25    text         NULL                     NULL
    anything else       25    text         pc.cast -> string        as text

`data_rows(batch, formats)` turns a RecordBatch into the bytes of its DataRow messages in
one go: each column becomes a binary array of wire fields (int32 length, -1 for NULL, then
the value), and `binary_join_element_wise` glues a per-row header ('D', length, column
count) and the fields of every column into one buffer (~100 ns a row for three columns;
measured in bench/wire_bench.py). COPY TO's binary rows are the same fields behind an int16
column count.

Parameters arrive one value at a time (`decode_param`): text or binary, by OID, into the
Python values `Session.execute` binds. When a parameter's OID is 0 (unspecified) the type
the statement implies (`Session.describe`) decides; with neither, the text stays a str.

Intervals go out as interval (1186): PostgreSQL's text form ('1 year 2 mons 3 days
04:05:06') or its binary form (int64 microseconds, int32 days, int32 months).

Not done: arrays for asyncpg (it introspects array types with a WITH RECURSIVE query over
pg_catalog, which kudusql refuses), times as results beyond their text form, BC dates
(PostgreSQL prints "0044-03-15 BC", we print Arrow's "-0043-03-15").
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import math
import struct
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from wire.protocol import FieldDescription

BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID = 16, 17, 18, 19, 20, 21, 23, 25, 26
JSON, FLOAT4, FLOAT8, UNKNOWN, BPCHAR, VARCHAR = 114, 700, 701, 705, 1042, 1043
DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC, UUID, JSONB = (
    1082, 1083, 1114, 1184, 1186, 1700, 2950, 3802)
VOID = 2278

# oid -> (type name, typlen)
TYPES: dict[int, tuple[str, int]] = {
    BOOL: ("bool", 1), BYTEA: ("bytea", -1), CHAR: ("char", 1), NAME: ("name", 64),
    INT8: ("int8", 8), INT2: ("int2", 2), INT4: ("int4", 4), TEXT: ("text", -1),
    OID: ("oid", 4), JSON: ("json", -1), FLOAT4: ("float4", 4), FLOAT8: ("float8", 8),
    UNKNOWN: ("unknown", -2), BPCHAR: ("bpchar", -1), VARCHAR: ("varchar", -1),
    DATE: ("date", 4), TIME: ("time", 8), TIMESTAMP: ("timestamp", 8),
    TIMESTAMPTZ: ("timestamptz", 8), INTERVAL: ("interval", 16), NUMERIC: ("numeric", -1),
    UUID: ("uuid", 16), JSONB: ("jsonb", -1), VOID: ("void", 4),
}

PG_EPOCH_DAYS = 10957                       # 2000-01-01 - 1970-01-01 in days
PG_EPOCH_US = PG_EPOCH_DAYS * 86400 * 10**6
_PG_EPOCH_DATE = _dt.date(2000, 1, 1)
_PG_EPOCH_DT = _dt.datetime(2000, 1, 1)
_UTC = _dt.UTC


class ParamError(Exception):
    """A parameter value that cannot be decoded (22P02 / 22P03 / 0A000)."""

    def __init__(self, message: str, sqlstate: str = "22P02"):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate


# element oid -> array oid
ARRAY_OF = {BOOL: 1000, BYTEA: 1001, CHAR: 1002, NAME: 1003, INT2: 1005, INT4: 1007,
            TEXT: 1009, VARCHAR: 1015, INT8: 1016, OID: 1028, FLOAT4: 1021, FLOAT8: 1022,
            TIMESTAMP: 1115, DATE: 1182, TIMESTAMPTZ: 1185, NUMERIC: 1231}
ELEMENT_OF = {a: e for e, a in ARRAY_OF.items()}


def _array_element(t: pa.DataType) -> pa.DataType | None:
    """The element type of a SQL array column (planner.expr.ArrayType: an extension type
    `kudusql.array` stored as PostgreSQL's array text form), else None."""
    if isinstance(t, pa.ExtensionType) and t.extension_name == "kudusql.array":
        return t.value_type
    return None


# -- Arrow -> OID -----------------------------------------------------------------------------
@functools.lru_cache(maxsize=512)
def type_oid(t: pa.DataType) -> tuple[int, int]:
    """(oid, typmod) a column of Arrow type `t` is described with (cached: asked for every
    column of every result)."""
    elem = _array_element(t)
    if elem is not None:
        return ARRAY_OF.get(type_oid(elem)[0], 1009), -1
    if pa.types.is_integer(t):
        if t.bit_width <= 16 and (pa.types.is_signed_integer(t) or t.bit_width == 8):
            return INT2, -1
        if t.bit_width <= 32 and (pa.types.is_signed_integer(t) or t.bit_width == 16):
            return INT4, -1
        if pa.types.is_signed_integer(t) or t.bit_width == 32:
            return INT8, -1
        return NUMERIC, -1
    if pa.types.is_float32(t):
        return FLOAT4, -1
    if pa.types.is_floating(t):
        return FLOAT8, -1
    if pa.types.is_decimal(t):
        return NUMERIC, ((t.precision << 16) | t.scale) + 4
    if pa.types.is_boolean(t):
        return BOOL, -1
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or \
            pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return BYTEA, -1
    if pa.types.is_date(t):
        return DATE, -1
    if pa.types.is_timestamp(t):
        return (TIMESTAMPTZ if t.tz else TIMESTAMP), -1
    if pa.types.is_time(t):
        return TIME, -1
    if pa.types.is_interval(t):
        return INTERVAL, -1
    return TEXT, -1


def arrow_type_for(oid: int, typmod: int = -1) -> pa.DataType | None:
    """The Arrow type values of `oid` decode to (None: keep whatever they are)."""
    match oid:
        case 16:
            return pa.bool_()
        case 17:
            return pa.binary()
        case 20 | 26:
            return pa.int64()
        case 21:
            return pa.int16()
        case 23:
            return pa.int32()
        case 700:
            return pa.float32()
        case 701:
            return pa.float64()
        case 1082:
            return pa.date32()
        case 1114:
            return pa.timestamp("us")
        case 1184:
            return pa.timestamp("us", tz="UTC")
        case 1700:
            if typmod >= 4:
                return pa.decimal128((typmod - 4) >> 16, (typmod - 4) & 0xFFFF)
            return None
        case 18 | 19 | 25 | 1042 | 1043 | 114 | 3802 | 2950 | 705:
            return pa.string()
    return None


def field_descriptions(schema: pa.Schema, formats: list[int] | None = None,
                       oids: list[tuple[int, int]] | None = None) -> list[FieldDescription]:
    """RowDescription fields of a result schema with per-column formats (0 text, 1 binary)."""
    out = []
    for i, f in enumerate(schema):
        oid, mod = oids[i] if oids is not None else type_oid(f.type)
        fmt = formats[i] if formats else 0
        out.append(FieldDescription(f.name, oid, TYPES.get(oid, ("", -1))[1], mod, fmt))
    return out


def result_formats(codes: tuple[int, ...] | list[int], ncols: int) -> list[int]:
    """Bind's result-format codes for `ncols` columns: none = all text, one = for all."""
    if not codes:
        return [0] * ncols
    if len(codes) == 1:
        return [codes[0]] * ncols
    if len(codes) != ncols:
        raise ParamError(f"bind message has {len(codes)} result formats but query has "
                         f"{ncols} columns", "08P01")
    return list(codes)


def conform(table: pa.Table | pa.RecordBatch, oids: list[tuple[int, int]]):
    """Cast the columns whose Arrow type would be described differently from the OIDs a
    client was already given (Describe before execution) to a type that matches them."""
    cols, changed = [], False
    for col, (oid, mod) in zip(table.columns, oids):
        if type_oid(col.type)[0] == oid:
            cols.append(col)
            continue
        target = arrow_type_for(oid, mod)
        if target is None:
            target = pa.decimal128(38, 10) if oid == NUMERIC else pa.string()
        cols.append(col.cast(target))
        changed = True
    if not changed:
        return table
    if isinstance(table, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(cols, names=table.schema.names)
    return pa.Table.from_arrays(cols, names=table.column_names)


# -- column encoders --------------------------------------------------------------------------
def _fixed(values: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """Binary array from an (n,) numpy array of fixed-width big-endian values."""
    n = len(values)
    raw = np.ascontiguousarray(values).view(np.uint8)
    w = raw.size // n if n else 0
    arr = pa.FixedSizeBinaryArray.from_buffers(pa.binary(w), n, [None, pa.py_buffer(raw)])
    arr = arr.cast(pa.binary())
    if valid is not None and not valid.all():
        arr = pc.if_else(pa.array(valid), arr, pa.scalar(None, pa.binary()))
    return arr


def _valid(arr: pa.Array) -> np.ndarray | None:
    if arr.null_count == 0:
        return None
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _numpy(arr: pa.Array, fill=0) -> np.ndarray:
    if arr.null_count:
        arr = arr.fill_null(fill)
    return arr.to_numpy(zero_copy_only=False)


def _as_binary(arr: pa.Array) -> pa.Array:
    t = arr.type
    if pa.types.is_binary(t):
        return arr
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t) \
            or pa.types.is_string_view(t) or pa.types.is_binary_view(t) \
            or pa.types.is_fixed_size_binary(t):
        return arr.cast(pa.binary())
    raise TypeError(f"not a binary-like type: {t}")


_HEX = np.array([ord(c) for c in "0123456789abcdef"], np.uint8)
_HEX_PAIRS = np.stack([_HEX[np.arange(256) >> 4], _HEX[np.arange(256) & 15]], axis=1)


def _bytea_text(arr: pa.Array) -> pa.Array:
    """bytea's hex output, '\\x0a1b...', vectorised through a 256-entry table."""
    b = _as_binary(arr)
    if pa.types.is_binary(b.type) and b.null_count:
        b = pc.if_else(b.is_valid(), b, pa.scalar(b"", pa.binary()))
    n = len(b)
    offs = np.frombuffer(b.buffers()[1], np.int32, n + 1, b.offset * 4).astype(np.int64)
    data = np.frombuffer(b.buffers()[2], np.uint8) if b.buffers()[2] is not None else \
        np.empty(0, np.uint8)
    hexed = _HEX_PAIRS[data[offs[0]:offs[-1]]].reshape(-1)
    new_offs = ((offs - offs[0]) * 2).astype(np.int32)
    if new_offs[-1] > np.iinfo(np.int32).max:
        raise OverflowError("bytea result too large for one batch")
    h = pa.StringArray.from_buffers(n, pa.py_buffer(new_offs), pa.py_buffer(hexed))
    out = pc.binary_join_element_wise(pa.scalar("\\x"), h, "")
    if arr.null_count:
        out = pc.if_else(arr.is_valid(), out, pa.scalar(None, pa.string()))
    return out


def _pg_float_repr(v: float, single: bool) -> str:
    """One float in PostgreSQL's output form (shortest round trip, extra_float_digits=1):
    exponent form when the decimal exponent is < -4 or >= 15 (float4: >= 6)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0" if math.copysign(1.0, v) < 0 else "0"
    s = np.format_float_scientific(np.float32(v) if single else v, unique=True, trim="-")
    mant, e = s.split("e")
    exp = int(e)
    digits = mant.replace(".", "").lstrip("-")
    neg = mant.startswith("-")
    if exp < -4 or exp >= (6 if single else 15):
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        out = f"{m}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    elif exp >= 0:
        if len(digits) <= exp + 1:
            out = digits + "0" * (exp + 1 - len(digits))
        else:
            out = digits[:exp + 1] + "." + digits[exp + 1:]
    else:
        out = "0." + "0" * (-exp - 1) + digits
    return "-" + out if neg else out


def _float_text(arr: pa.Array) -> pa.Array:
    """Arrow prints the same shortest digits as PostgreSQL but picks the exponent form
    by a different rule (|x| >= 1e10 or < 1e-6 vs PostgreSQL's 1e15 / 1e-4, float4 1e6),
    writes 'inf'/'nan' and one-digit exponents. Fix those vectorised; only values in the
    bands where the two rules disagree are formatted one by one."""
    single = pa.types.is_float32(arr.type)
    s = pc.cast(arr, pa.string())
    # one-digit exponents get a leading zero (RE2 rewrite: \1, a literal 0, \2)
    s = pc.replace_substring_regex(s, r"e([+-])(\d)$", r"e\10\2")
    x = _numpy(arr.cast(pa.float64()), 1.0)
    has_e = _numpy(pc.match_substring(s, "e"), False)
    with np.errstate(invalid="ignore"):
        ax = np.abs(x)
        finite = np.isfinite(x)
        want_exp = finite & (ax != 0) & ((ax < 1e-4) | (ax >= (1e6 if single else 1e15)))
    odd = ~finite | (want_exp != has_e)
    if arr.null_count:
        odd &= arr.is_valid().to_numpy(zero_copy_only=False)
    idx = np.flatnonzero(odd)
    if len(idx):
        vals = [_pg_float_repr(float(x[i]), single) for i in idx.tolist()]
        s = pc.replace_with_mask(s, pa.array(odd), pa.array(vals, pa.string()))
    return s


def _timestamp_text(arr: pa.Array) -> pa.Array:
    tz = arr.type.tz
    if arr.type.unit != "us":
        arr = arr.cast(pa.timestamp("us", tz=tz), safe=False)
    if tz:
        arr = arr.cast(pa.timestamp("us"))
    s = pc.cast(arr, pa.string())     # always 'YYYY-MM-DD HH:MM:SS.ffffff'
    s = pc.utf8_rtrim(pc.utf8_rtrim(s, characters="0"), characters=".")
    if tz:
        s = pc.binary_join_element_wise(s, pa.scalar("+00"), "")
    return s


def _interval_fields(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MonthDayNano intervals -> (months, days, microseconds) from the values buffer."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    rec = np.frombuffer(arr.buffers()[1], dtype=np.dtype(
        [("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]))
    rec = rec[arr.offset:arr.offset + len(arr)]
    return rec["months"], rec["days"], rec["nanos"] // 1000


def _interval_text(arr: pa.Array) -> pa.Array:
    """interval's output (IntervalStyle postgres): '1 year 2 mons -3 days 04:05:06.5', each
    field with its own sign. A loop per value: interval results are rare and short, and
    the plural forms and signs make a vectorised form longer than it is worth."""
    out = []
    for (m, d, us), ok in zip(zip(*_interval_fields(arr)), arr.is_valid().to_pylist()):
        if not ok:
            out.append(None)
            continue
        m, d, us = int(m), int(d), int(us)
        parts = []
        years, mons = int(m / 12), m - 12 * int(m / 12)
        for n, unit in ((years, "year"), (mons, "mon"), (d, "day")):
            if n:
                parts.append(f"{n} {unit}{'s' if abs(n) != 1 else ''}")
        if us or not parts:
            secs, frac = divmod(abs(us), 1_000_000)
            text = (f"{'-' if us < 0 else ''}{secs // 3600:02d}:{secs // 60 % 60:02d}:"
                    f"{secs % 60:02d}")
            parts.append(text + (f".{frac:06d}".rstrip("0") if frac else ""))
        out.append(" ".join(parts))
    return pa.array(out, pa.string())


def _decimal_text(arr: pa.Array) -> pa.Array:
    """numeric's output: all `scale` fraction digits, never an exponent. Arrow's cast
    writes '7.15E-16' / '0E-18' for small values at large scales, so p <= 18 is formatted
    from the unscaled int64 (vectorised), larger precisions fix those rows one by one."""
    t = arr.type
    p, s = t.precision, t.scale
    n = len(arr)
    if pa.types.is_decimal128(t) and p <= 18 and n:
        raw = np.frombuffer(arr.buffers()[1], np.int64, 2 * n, arr.offset * 16)[0::2]
        a = np.abs(raw).astype(np.uint64)
        ip = pc.cast(pa.array(a // np.uint64(10 ** s)), pa.string())
        sign = pc.if_else(pa.array(raw < 0), pa.scalar("-"), pa.scalar(""))
        if s == 0:
            out = pc.binary_join_element_wise(sign, ip, "")
        else:
            fp = pc.utf8_lpad(pc.cast(pa.array(a % np.uint64(10 ** s)), pa.string()), s, "0")
            out = pc.binary_join_element_wise(sign, ip, pa.scalar("."), fp, "")
        if arr.null_count:
            out = pc.if_else(arr.is_valid(), out, pa.scalar(None, pa.string()))
        return out
    out = pc.cast(arr, pa.string())
    odd = _numpy(pc.match_substring(out, "E"), False)
    if odd.any():
        vals = [format(v, "f") for v, o in zip(arr.to_pylist(), odd) if o]
        out = pc.replace_with_mask(out, pa.array(odd), pa.array(vals, pa.string()))
    return out


def encode_text(arr: pa.Array) -> pa.Array:
    """A column in PostgreSQL's text output format: a string/binary array, nulls kept."""
    t = arr.type
    if isinstance(t, pa.ExtensionType):
        return encode_text(arr.storage)      # arrays: stored as their text form
    if pa.types.is_dictionary(t):
        return encode_text(arr.dictionary_decode())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(arr, pa.scalar("t"), pa.scalar("f"))
    if pa.types.is_floating(t):
        return _float_text(arr)
    if pa.types.is_timestamp(t):
        return _timestamp_text(arr)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t) \
            or pa.types.is_fixed_size_binary(t):
        return _bytea_text(arr)
    if pa.types.is_decimal(t):
        return _decimal_text(arr)
    if pa.types.is_interval(t):
        return _interval_text(arr)
    try:
        return pc.cast(arr, pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return pa.array([None if v is None else str(v) for v in arr.to_pylist()], pa.string())


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


def encode_columns(batch: pa.RecordBatch | pa.Table, formats: list[int]) -> list[pa.Array]:
    cols = []
    for col, fmt in zip(batch.columns, formats):
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        cols.append(encode_binary(col) if fmt == 1 else encode_text(col))
    return cols


# -- small batches --------------------------------------------------------------------------
# Below this many rows a batch is encoded value by value in Python: each Arrow kernel call
# costs microseconds of fixed overhead, and the vectorised path makes about a dozen per
# column (~150 us for a one-row, five-column batch against ~15 us value by value). Point
# queries return one row. tests/wire/test_types.py checks both paths give the same bytes.
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
    point-read fast path, wire/fastpath.py, builds its DataRow with these)."""
    return _small_encoder(t, fmt)


def _data_rows_small(batch, formats: list[int]) -> bytes | None:
    encoders = []
    for col, fmt in zip(batch.columns, formats):
        enc = _small_encoder(col.type, fmt)
        if enc is None:
            return None
        encoders.append(enc)
    try:
        cols = [col.to_pylist() for col in batch.columns]
    except OverflowError:       # a date or timestamp outside Python's years 1-9999: the
        return None             # vectorised encoder writes them (PostgreSQL's range is wider)
    head = _S16.pack(len(cols))
    out = []
    for r in range(batch.num_rows):
        parts = [head]
        for enc, vals in zip(encoders, cols):
            v = vals[r]
            b = None if v is None else enc(v)
            if b is None:
                parts.append(b"\xff\xff\xff\xff")
            else:
                parts.append(_S32.pack(len(b)))
                parts.append(b)
        body = b"".join(parts)
        out.append(b"D" + _S32.pack(len(body) + 4) + body)
    return b"".join(out)


def data_rows(batch: pa.RecordBatch | pa.Table, formats: list[int]) -> bytes:
    """The DataRow messages of every row of `batch`, columns in the given formats."""
    if batch.num_rows == 0:
        return b""
    if batch.num_rows <= SMALL_BATCH_ROWS:
        out = _data_rows_small(batch, formats)
        if out is not None:
            return out
    return join_rows(encode_columns(batch, formats), b"D", True)


# -- parameters -------------------------------------------------------------------------------
_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}


def parse_bool(s: str) -> bool:
    v = s.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ParamError(f'invalid input syntax for type boolean: "{s}"')


def parse_bytea(s: str) -> bytes:
    if s.startswith("\\x"):
        try:
            return bytes.fromhex(s[2:])
        except ValueError:
            raise ParamError("invalid hexadecimal data") from None
    out = bytearray()
    i = 0
    raw = s.encode("utf-8")
    while i < len(raw):
        c = raw[i]
        if c == 0x5C:
            if raw[i + 1:i + 2] == b"\\":
                out.append(0x5C)
                i += 2
                continue
            oct3 = raw[i + 1:i + 4]
            if len(oct3) == 3 and all(48 <= d <= 55 for d in oct3):
                out.append(int(oct3, 8))
                i += 4
                continue
            raise ParamError("invalid input syntax for type bytea")
        out.append(c)
        i += 1
    return bytes(out)


def _parse_timestamp(s: str, tz: bool):
    s = s.strip()
    try:
        v = _dt.datetime.fromisoformat(s)
    except ValueError:
        try:
            v = _dt.datetime.combine(_dt.date.fromisoformat(s), _dt.time())
        except ValueError:
            raise ParamError(f'invalid input syntax for type timestamp: "{s}"') from None
    if v.tzinfo is not None:
        v = v.astimezone(_UTC).replace(tzinfo=None)
    return v


def parse_text(s: str, oid: int, arrow: pa.DataType | None = None):
    """A text-format parameter of type `oid` (or, for oid 0, of Arrow type `arrow`)."""
    if oid in (0, UNKNOWN) and arrow is not None:
        oid = type_oid(arrow)[0]
    try:
        match oid:
            case 16:
                return parse_bool(s)
            case 17:
                return parse_bytea(s)
            case 20 | 21 | 23 | 26:
                return int(s.strip())
            case 700 | 701:
                return float(s.strip())
            case 1700:
                v = decimal.Decimal(s.strip())
                return v
            case 1082:
                return _dt.date.fromisoformat(s.strip())
            case 1114 | 1184:
                return _parse_timestamp(s, oid == 1184)
            case 1083:
                return _dt.time.fromisoformat(s.strip())
            case _ if oid in _ARRAY_OIDS:
                raise ParamError("array parameters are not supported", "0A000")
            case _:
                return s
    except ParamError:
        raise
    except (ValueError, ArithmeticError):
        name = TYPES.get(oid, ("?",))[0]
        raise ParamError(f'invalid input syntax for type {name}: "{s}"') from None


def _numeric_from_binary(b: bytes) -> decimal.Decimal:
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHh", b)
    if sign == 0xC000:
        return decimal.Decimal("NaN")
    if sign == 0xD000:
        return decimal.Decimal("Infinity")
    if sign == 0xF000:
        return decimal.Decimal("-Infinity")
    if len(b) != 8 + 2 * ndigits or ndigits < 0:
        raise ParamError("invalid numeric binary value", "22P03")
    digits = struct.unpack_from(f"!{ndigits}H", b, 8)
    v = 0
    for d in digits:
        v = v * 10000 + d
    ctx = decimal.Context(prec=4000)
    r = decimal.Decimal((1 if sign == 0x4000 else 0, tuple(map(int, str(v))),
                         (weight - ndigits + 1) * 4))
    return ctx.quantize(r, decimal.Decimal((0, (1,), -dscale)))


def parse_binary(b: bytes, oid: int, arrow: pa.DataType | None = None):
    """A binary-format parameter of type `oid` (oid 0: the Arrow type decides)."""
    if oid in (0, UNKNOWN) and arrow is not None:
        oid = type_oid(arrow)[0]
    try:
        match oid:
            case 16:
                if len(b) != 1:
                    raise ParamError("invalid binary bool", "22P03")
                return b != b"\0"
            case 17:
                return bytes(b)
            case 21:
                return struct.unpack("!h", b)[0]
            case 23:
                return struct.unpack("!i", b)[0]
            case 20:
                return struct.unpack("!q", b)[0]
            case 26:
                return struct.unpack("!I", b)[0]
            case 700:
                return struct.unpack("!f", b)[0]
            case 701:
                return struct.unpack("!d", b)[0]
            case 1700:
                return _numeric_from_binary(b)
            case 1082:
                return _PG_EPOCH_DATE + _dt.timedelta(days=struct.unpack("!i", b)[0])
            case 1114 | 1184:
                return _PG_EPOCH_DT + _dt.timedelta(microseconds=struct.unpack("!q", b)[0])
            case 1083:
                us = struct.unpack("!q", b)[0]
                return (_dt.datetime.min + _dt.timedelta(microseconds=us)).time()
            case 2950:
                return str(uuid.UUID(bytes=bytes(b)))
            case 3802:
                return b[1:].decode("utf-8")
            case 25 | 1043 | 1042 | 19 | 18 | 114 | 0 | 705:
                return b.decode("utf-8")
            case _ if oid in _ARRAY_OIDS:
                raise ParamError("array parameters are not supported", "0A000")
            case _:
                raise ParamError(f"binary format for type oid {oid} is not supported",
                                 "0A000")
    except struct.error:
        raise ParamError(f"incorrect binary data format in parameter of type oid {oid}",
                         "22P03") from None
    except UnicodeDecodeError:
        raise ParamError('invalid byte sequence for encoding "UTF8"', "22021") from None
    except OverflowError:
        raise ParamError("value out of range", "22008") from None


def decode_param(data: bytes | None, fmt: int, oid: int, arrow: pa.DataType | None = None):
    if data is None:
        return None
    if fmt == 1:
        return parse_binary(data, oid, arrow)
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ParamError('invalid byte sequence for encoding "UTF8"', "22021") from None
    return parse_text(s, oid, arrow)


# array type OIDs of the built-in types (reject, not misread as text)
_ARRAY_OIDS = {1000, 1001, 1002, 1003, 1005, 1007, 1009, 1014, 1015, 1016, 1021, 1022, 1028,
               1115, 1182, 1183, 1185, 1187, 1231, 1270, 2951, 3807, 199}
