"""Result columns in PostgreSQL's text format, a whole column at a time (`encode_text`).

Integers and decimals by pyarrow casts, floats with PostgreSQL's shortest round-trip and
exponent rule (`_float_text`; with extra_float_digits <= 0
planner/expr/float_text.py's `float_digits_text`, which
`apply_float_digits` puts in a batch's text-format float columns before encoding), bytea
as \\x + hex (numpy), booleans t / f, dates and timestamps in ISO form (years before 1 AD
as PostgreSQL writes them: '0001-12-02 BC'), timestamptz in the session's TimeZone with
its offset, intervals in PostgreSQL's style (IntervalStyle postgres, the one `::text`
uses); anything else through a cast to string.
Also the small numpy helpers the binary codec and the DataRow builder share.
"""
from __future__ import annotations

import decimal
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.types import pg_era_text
from planner.expr import timezones
from planner.expr.float_text import float_digits_text
from planner.expr.interval_values import interval_text


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


def apply_float_digits(batch, formats: list[int], extra: int):
    """`batch` with its float columns sent as text replaced by their text under
    extra_float_digits = `extra` (<= 0; the batch as it is otherwise), so every encoder
    after it (DataRows, COPY) sends those strings as they are."""
    if extra >= 1:
        return batch
    cols, changed = [], False
    for i, col in enumerate(batch.columns):
        t = col.type
        if pa.types.is_floating(t) and not pa.types.is_float16(t) and \
                (formats[i] if i < len(formats) else 0) == 0:
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            col, changed = float_digits_text(col, extra), True
        cols.append(col)
    if not changed:
        return batch
    names = batch.schema.names
    return pa.RecordBatch.from_arrays(cols, names) if isinstance(batch, pa.RecordBatch) \
        else pa.Table.from_arrays(cols, names)


def _timestamp_text(arr: pa.Array, zone: str = "UTC") -> pa.Array:
    """'2026-03-08 12:00:00.5' (fraction digits trimmed, none when zero); a timestamptz
    as its local time in `zone` (a PostgreSQL zone name: the session's TimeZone) and that
    zone's UTC offset then, '2026-03-08 12:00:00-04', '+05:30' (planner/expr/timezones.py
    `offset_text`), as PostgreSQL 15 prints with DateStyle ISO."""
    tz = arr.type.tz
    if arr.type.unit != "us":
        arr = arr.cast(pa.timestamp("us", tz=tz), safe=False)
    offset = None
    if tz:
        arrow = timezones.arrow_zone(zone)
        if arrow == "UTC":
            arr = arr.cast(pa.timestamp("us"))
        else:
            offset = timezones.offset_text(arr, arrow)
            arr = timezones.to_local(arr, arrow)
    s = pc.cast(arr, pa.string())     # always 'YYYY-MM-DD HH:MM:SS.ffffff'
    s = pc.utf8_rtrim(pc.utf8_rtrim(s, characters="0"), characters=".")
    if tz:
        s = pc.binary_join_element_wise(s, pa.scalar("+00") if offset is None else offset,
                                         "")
    return pg_era_text(s, pc.year(arr))


def _interval_fields(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MonthDayNano intervals -> (months, days, microseconds) from the values buffer."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    rec = np.frombuffer(arr.buffers()[1], dtype=np.dtype(
        [("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]))
    rec = rec[arr.offset:arr.offset + len(arr)]
    return rec["months"], rec["days"], rec["nanos"] // 1000


def _interval_text(arr: pa.Array) -> pa.Array:
    """interval's output, IntervalStyle postgres, as `::text` gives it (one formatter:
    planner/expr/interval_values.py `interval_text`): '1 year 2 mons -3 days +04:05:06.5'.
    A loop per value: interval results are rare and short, and the plural forms and
    carried signs make a vectorised form longer than it is worth."""
    return pa.array([interval_text(int(m), int(d), int(us)) if ok else None
                     for m, d, us, ok in zip(*_interval_fields(arr),
                                             arr.is_valid().to_pylist())], pa.string())


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


def encode_text(arr: pa.Array, zone: str = "UTC") -> pa.Array:
    """A column in PostgreSQL's text output format: a string/binary array, nulls kept.
    `zone`: the session's TimeZone, which timestamptz values are shown in."""
    t = arr.type
    if isinstance(t, pa.ExtensionType):
        return encode_text(arr.storage)      # arrays: stored as their text form
    if pa.types.is_dictionary(t):
        return encode_text(arr.dictionary_decode(), zone)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(arr, pa.scalar("t"), pa.scalar("f"))
    if pa.types.is_floating(t):
        return _float_text(arr)
    if pa.types.is_timestamp(t):
        return _timestamp_text(arr, zone)
    if pa.types.is_date(t):
        return pg_era_text(pc.cast(arr, pa.string()), pc.year(arr))
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
