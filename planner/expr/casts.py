"""CAST: `cast(v, to, node)` looks up `CASTS[(source kind, target kind)]` (arrays add their
casts to the table) with PostgreSQL's rounding, accepted spellings and errors (22P02 for bad
input, 22003 for out of range); `arrow_type` maps a SQL type name to the Arrow type (shared
with CREATE TABLE ... AS and PREPARE's declared types).
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.types import decimal_to_float, pg_era_text, real_range_lost
from planner.errors import SqlError, UndefinedObject
from planner.expr.arrow_values import any_true, combine, per_array, Value, view_as
from planner.expr.located import error_at, node_position
from planner.expr.float_text import current_float_digits, float_digits_text
from planner.expr.decimal_types import (
    as_decimal_width,
    cap_precision,
    DEFAULT_NUMERIC,
    HALF_AWAY,
    int_as_decimal_type,
    MAX_PRECISION,
    MAX_PRECISION_256,
)
from planner.expr.interval_values import (
    interval_parts,
    interval_scalar,
    interval_text,
    parse_interval,
)
from planner.expr.sqltypes import (
    ArrayType,
    INTERVAL,
    kind_of,
    named_type,
    null_of,
    pg_name,
    TIMESTAMP,
)
from planner.expr.core import EvalContext, eval_node, handles
from planner.expr import intervals, timezones


# -- casts -----------------------------------------------------------------------------------

_TRUE_WORDS = ["t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"]
_FALSE_WORDS = ["f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0"]
_PARSE_FAILURE = re.compile(r"Failed to parse string: '(.*)' as a scalar", re.DOTALL)


def cast(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """SQL CAST of `v` to Arrow type `to` with PostgreSQL's rounding and errors."""
    src = v.type
    if src == to:
        return v
    ks, kt = kind_of(src), kind_of(to)
    if ks == "null":
        return null_of(to) if isinstance(v, pa.Scalar) else pa.nulls(len(v), to)
    if (kt == "timestamp" and to.tz) or (ks == "timestamp" and src.tz):
        return _zoned_cast(v, to, node)
    fn = CASTS.get((ks, kt))
    if fn is None:
        raise error_at(f"cannot cast type {pg_name(src)} to {pg_name(to)}", "42846", node)
    out = fn(v, to, node)
    if pa.types.is_float32(to) and ks in ("float", "decimal", "string"):
        _check_real(fn(v, pa.float64(), node), out, node)
    return out


def _zoned_cast(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """Casts to and from timestamptz, in the session's time zone (planner.expr.timezones):
    a timestamp or date is a local time there, a timestamptz shows its local time and
    offset as text ('2026-01-01 00:00:00-05')."""
    ks, kt = kind_of(v.type), kind_of(to)
    try:
        if kt == "timestamp" and to.tz:
            if ks == "timestamp" and v.type.tz:
                return v.cast(to)
            if ks in ("timestamp", "date"):
                return timezones.to_utc(v.cast(TIMESTAMP) if ks == "date" or v.type.unit != "us"
                                        else v)
            if ks == "string":
                return _string_to_timestamptz(v, node)
        else:
            local = timezones.to_local(v)
            if kt == "timestamp":
                return local
            if kt == "date":
                return _timestamp_to_date(local, pa.date32(), node)
            if kt == "time":
                return _timestamp_to_time(local, TIME, node)
            if kt == "string":
                text = to_text(local, pa.string(), node)
                offset = timezones.offset_text(v)
                return pc.binary_join_element_wise(text, offset, "")
    except SqlError as e:
        raise error_at(e.message, e.sqlstate, node) from None
    raise error_at(f"cannot cast type {pg_name(v.type)} to {pg_name(to)}", "42846", node)


# a timestamptz's text: the local time, then an ISO offset or a zone name (or none: the
# session's zone)
_ZONED_TEXT = re.compile(r"^\s*(?P<ts>-?\d+-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}"
                         r"(?::\d{2}(?:\.\d*)?)?)?)\s*(?P<zone>[Zz]|UTC|utc|GMT|gmt|"
                         r"[+-]\d{1,2}(?::?\d{2})?|[A-Za-z][A-Za-z_]*(?:/[A-Za-z_+-]+)+)?"
                         r"\s*$")


def _string_to_timestamptz(v: Value, node: exp.Expr | None) -> Value:
    """Text -> instants: the zone the text names (an ISO offset '+02', 'Z', 'UTC', a zone
    name), else the session's; each distinct zone once, vectorised over its rows."""
    if isinstance(v, pa.Scalar):
        return _string_to_timestamptz(pa.array([v.as_py()], pa.string()), node)[0]
    a = combine(v)
    m = pc.extract_regex(a, _ZONED_TEXT.pattern)
    local_text = pc.if_else(pc.is_valid(m), pc.struct_field(m, "ts"), a)
    local = _string_to_timestamp(local_text, TIMESTAMP, node)
    zones = pc.struct_field(m, "zone")
    out = timezones.to_utc(local)                        # no zone given: the session's
    present = pc.fill_null(pc.and_(pc.is_valid(zones), pc.not_equal(zones, "")), False)
    if not pc.any(present).as_py():
        return out
    for z in pc.unique(pc.filter(zones, present)).to_pylist():
        rows = pc.fill_null(pc.equal(zones, z), False)
        om = re.fullmatch(r"([+-])(\d{1,2})(?::?(\d{2}))?", z)
        if om:                  # ISO: '+02' is east of Greenwich
            zone = f"{om.group(1)}{int(om.group(2)):02d}:{om.group(3) or '00'}"
        else:
            zone = timezones.arrow_zone(z)
        out = pc.if_else(rows, timezones.to_utc(local, zone), out)
    return out


def _check_real(wide: Value, out: Value, node: exp.Expr | None) -> None:
    """PostgreSQL's float4 refuses a finite value that becomes Infinity (overflow) and a
    non-zero one that becomes 0 (underflow): 22003 (engine.types.real_range_lost)."""
    for lost, what in zip(real_range_lost(wide, out), ("overflow", "underflow")):
        if any_true(lost):
            raise error_at(f"value out of range: {what}", "22003", node)


def cast_checked(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    try:
        return v.cast(to)
    except pa.ArrowInvalid:
        raise _out_of_range(to, node) from None


def _out_of_range(t: pa.DataType, node: exp.Expr | None) -> SqlError:
    if kind_of(t) == "int":
        return error_at(f"{pg_name(t)} out of range", "22003", node)
    if kind_of(t) == "decimal":
        return error_at("numeric field overflow", "22003", node)
    return error_at(f"{pg_name(t)} out of range", "22008" if kind_of(t) in ("date", "timestamp")
                else "22003", node)


def round_digits(v: Value, ndigits: int, mode: str = HALF_AWAY) -> Value:
    """pc.round; a decimal first gains an integer digit, as Arrow wants room for a carry."""
    t = v.type
    if kind_of(t) == "decimal":
        if t.bit_width == 128 and t.precision < MAX_PRECISION:
            v = view_as(v, pa.decimal128(t.precision + 1, t.scale))
        elif t.precision < MAX_PRECISION_256:
            v = as_decimal_width(v, 256)
            v = view_as(v, pa.decimal256(t.precision + 1, t.scale))
    return pc.round(v, ndigits=ndigits, round_mode=mode)


def decimal_to_decimal(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    if to.scale < v.type.scale:
        v = round_digits(v, to.scale)
    if (to.scale == v.type.scale and to.precision >= v.type.precision
            and to.bit_width == v.type.bit_width):
        return view_as(v, to)
    return cast_checked(v, to, node)


def _int_to_decimal_cast(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    # Arrow's int -> decimal cast wants room for the type's full range; check values instead.
    return decimal_to_decimal(v.cast(int_as_decimal_type(v.type)), to, node)


def _decimal_to_int(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    return cast_checked(round_digits(v, 0), to, node)


def _float_to_int(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    _check_finite(v, to, node)
    return cast_checked(round_digits(v, 0, "half_to_even"), to, node)  # PostgreSQL uses rint()


def _float_to_decimal(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    _check_finite(v, to, node)
    v = round_digits(to_float64(v), to.scale)
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
    text = m.group(1) if m else first_valid_text(v)
    kind = kind_of(to)
    if kind == "int" and re.fullmatch(r"\s*[+-]?\d+\s*", text):
        return error_at(f'value "{text}" is out of range for type {pg_name(to)}', "22003", node)
    if kind in ("date", "timestamp"):
        if re.fullmatch(r"\s*\d{4}-\d{1,2}-\d{1,2}([ T].*)?", text):
            return error_at(f'date/time field value out of range: "{text}"', "22008", node)
        return error_at(f'invalid input syntax for type {pg_name(to)}: "{text}"', "22007", node)
    return error_at(f'invalid input syntax for type {pg_name(to)}: "{text}"', "22P02", node)


def first_valid_text(v: Value) -> str:
    if isinstance(v, pa.Scalar):
        return str(v.as_py())
    valid = pc.drop_null(v)
    return str(valid[0].as_py()) if len(valid) else ""


def _string_to_number(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    t = _trimmed(v)
    if kind_of(to) == "decimal":
        try:
            wide = t.cast(pa.decimal256(MAX_PRECISION_256, MAX_PRECISION))
        except pa.ArrowInvalid as e:
            raise _bad_input(to, e, v, node) from None
        return decimal_to_decimal(wide, to, node)
    if kind_of(to) == "int":      # '+7' is 7 (Arrow's integer parser refuses the sign)
        t = pc.replace_substring_regex(t, pattern=r"^\+(\d)", replacement=r"\1")
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
    return pc.if_else(pc.is_valid(t), is_true, null_of(pa.bool_()))


_DATE_FORMATS = ("%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")
_TIMESTAMP_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d")


def _strptime(v: Value, formats: tuple[str, ...], to: pa.DataType,
              node: exp.Expr | None) -> Value:
    """The first of `formats` each text parses with (accepts "1994-1-5", "1994-1-5 1:2:3.5");
    else 22007/22008. strptime's %S takes no fraction: it is parsed apart and added."""
    t = _trimmed(v)
    # a fraction of the seconds: only after a time (`1:2:3.5`; '2024-1-5.5' stays wrong)
    frac = pc.struct_field(pc.extract_regex(t, pattern=r":\d+\.(?P<f>\d+)$"), [0])
    t = pc.replace_substring_regex(t, pattern=r"(:\d+)\.\d+$", replacement=r"\1")
    parsed = [pc.strptime(t, format=f, unit="us", error_is_null=True) for f in formats]
    r = pc.coalesce(*parsed)
    # strptime rolls 1994-02-30 over to March 2nd: the fields must read back unchanged.
    fields = pc.extract_regex(t, pattern=r"^(?P<y>\d+)-(?P<m>\d+)-(?P<d>\d+)")
    same = pc.and_(pc.and_(
        pc.equal(pc.year(r), pc.struct_field(fields, [0]).cast(pa.int64())),
        pc.equal(pc.month(r), pc.struct_field(fields, [1]).cast(pa.int64()))),
        pc.equal(pc.day(r), pc.struct_field(fields, [2]).cast(pa.int64())))
    _reject(v, pc.and_(pc.is_valid(t), pc.invert(pc.fill_null(same, False))), to, node)
    # microseconds as PostgreSQL computes them: rint(fraction * 1e6) in double precision
    seconds = pc.cast(pc.binary_join_element_wise(pa.scalar("0."), frac, pa.scalar("")),
                      pa.float64())
    micros = pc.fill_null(pc.cast(pc.round(pc.multiply(seconds, 1e6),
                                           round_mode="half_to_even"), pa.int64()), 0)
    return pc.add(r, pc.cast(micros, pa.duration("us")))


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


def _float_text(v: Value) -> Value:
    """float8 / float4 as PostgreSQL writes them under the session's extra_float_digits
    (planner/expr/float_text.py; at 0 or less `float_digits_text`), by default the
    shortest digits that read back (Arrow's
    text has them), exponential when the decimal exponent is below -4 or at least 15 (6 for
    real), with a two-digit exponent: 1e-05, 1.6777216e+07, 100000000000000. Vectorised
    except for the values outside Arrow's agreement (a Python call each: tiny, huge or
    non-finite values)."""
    extra = current_float_digits()
    if extra < 1:       # the session's extra_float_digits asks for fewer digits (%g)
        if isinstance(v, pa.Scalar):
            return pa.scalar(float_digits_text(pa.array([v.as_py()], v.type), extra)[0]
                             .as_py(), pa.string())
        return float_digits_text(v.combine_chunks() if isinstance(v, pa.ChunkedArray)
                                 else v, extra)
    limit = 6 if pa.types.is_float32(v.type) else 15
    text = v.cast(pa.string())
    if isinstance(text, pa.Scalar):
        return pa.scalar(None if not text.is_valid else _pg_float(text.as_py(), limit))
    if isinstance(text, pa.ChunkedArray):
        text, v = text.combine_chunks(), v.combine_chunks()
    # Arrow's fixed-point text is PostgreSQL's for 1e-4 <= |x| < 10^limit; only the values
    # outside that (or written with an exponent, or not finite) are rewritten, in Python
    size = pc.abs(v.cast(pa.float64()))
    odd = pc.or_(pc.or_(pc.less(size, 1e-4), pc.greater_equal(size, 10.0 ** limit)),
                 pc.or_(pc.match_substring(text, "e"), pc.invert(pc.is_finite(size))))
    odd = pc.fill_null(pc.and_(odd, pc.not_equal(size, 0.0)), False)
    if not pc.any(odd).as_py():
        return text
    rows = pc.indices_nonzero(odd)
    fixed = pa.array([_pg_float(t, limit) for t in pc.take(text, rows).to_pylist()],
                     pa.string())
    return pc.replace_with_mask(text, odd, fixed)


def _pg_float(text: str, limit: int) -> str:
    if text in ("nan", "inf", "-inf"):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[text]
    d = decimal.Decimal(text)
    if d == 0:
        return "-0" if d.is_signed() else "0"
    sign, digits, exp_ = d.normalize().as_tuple()
    e = len(digits) + exp_ - 1               # the first digit's decimal exponent
    if e < -4 or e >= limit:
        mant = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1
                                 else "")
        return f"{'-' if sign else ''}{mant}e{'-' if e < 0 else '+'}{abs(e):02d}"
    return format(d.normalize(), "f")


def _string_to_interval(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    if not isinstance(v, pa.Scalar):
        try:
            return intervals.parse_text(v, node)
        except SqlError as e:
            raise error_at(e.message, e.sqlstate, node) from None
    if not v.is_valid:
        return null_of(INTERVAL)
    return interval_scalar(*parse_interval(v.as_py(), None, node))


TIME = pa.time64("us")
_US_PER_DAY = 86_400_000_000


def _string_to_time(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """Text -> time of day: read as the time of a timestamp on 1970-01-01 (so '10:30',
    '10:30:00.25', ' 7:05:01 ' read as PostgreSQL reads them)."""
    text = _trimmed(v)
    padded = pc.replace_substring_regex(text, pattern=r"^(\d):", replacement=r"0\1:")
    day = pc.binary_join_element_wise(pa.scalar("1970-01-01 "), padded, pa.scalar(""))
    try:
        ts = _string_to_timestamp(day, TIMESTAMP, None)
    except SqlError:
        bad = next((x for x in (text.to_pylist() if not isinstance(text, pa.Scalar)
                                else [text.as_py()])      # the error path: find the value
                    if x is not None and _one_time(x) is None), None)
        if bad is not None and re.fullmatch(r"\d{1,2}:\d{1,2}(:\d{1,2}(\.\d*)?)?", bad.strip()):
            raise error_at(f'date/time field value out of range: "{bad}"', "22008",
                           node) from None      # a time's shape, a field out of range
        raise error_at(f'invalid input syntax for type time: "{bad}"', "22007", node) \
            from None
    return _timestamp_to_time(ts, to, node)


def _one_time(text: str):
    text = re.sub(r"^(\d):", r"0\1:", text.strip())
    try:
        return _string_to_timestamp(pa.scalar(f"1970-01-01 {text}"), TIMESTAMP, None)
    except SqlError:
        return None


def _timestamp_to_time(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """The time of day of a timestamp (microseconds since its midnight)."""
    us = v.cast(TIMESTAMP).cast(pa.int64()) if v.type != TIMESTAMP else v.cast(pa.int64())
    # in integers (a float quotient overflows the cast back for years far from 1970):
    # the remainder of a truncating division, moved up a day when negative
    rest = pc.subtract(us, pc.multiply(pc.divide(us, _US_PER_DAY), _US_PER_DAY))
    return pc.if_else(pc.less(rest, 0), pc.add(rest, _US_PER_DAY), rest).cast(TIME)


def time_to_text(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """'10:30:00', '10:30:00.25' (PostgreSQL's: no trailing zeros, no empty fraction)."""
    s = v.cast(TIME).cast(pa.string())
    s = pc.replace_substring_regex(s, pattern=r"\.(\d*?)0+$", replacement=r".\1")
    return pc.replace_substring_regex(s, pattern=r"\.$", replacement="")


def _timestamp_to_date(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    return pc.floor_temporal(v, unit="day").cast(pa.date32(), safe=False)


def to_text(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    k = kind_of(v.type)
    if k == "timestamp":
        s = pc.strftime(v.cast(TIMESTAMP) if v.type.unit != "us" else v, format="%Y-%m-%d %H:%M:%S")
        s = pc.replace_substring_regex(s, pattern=r"\.(\d*?)0+$", replacement=r".\1")
        s = pc.replace_substring_regex(s, pattern=r"\.$", replacement="")
        s = pg_era_text(s, pc.year(v))
    elif k == "date":
        s = pg_era_text(v.cast(pa.string()), pc.year(v))
    elif k == "float":
        s = _float_text(v)
    elif k == "interval":
        if not isinstance(v, pa.Scalar):
            return per_array(intervals.format_text, v)
        s = pa.scalar(None if not v.is_valid else interval_text(*interval_parts(v)))
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


def _decimal_to_float(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """DECIMAL -> REAL / DOUBLE, correctly rounded (engine.types.decimal_to_float)."""
    return decimal_to_float(v, to)


def to_float64(v: Value) -> Value:
    """A number as float64 (large integers round, as in PostgreSQL's casts)."""
    if pa.types.is_decimal(v.type):
        return _decimal_to_float(v, pa.float64(), None)
    return v.cast(pa.float64(), safe=False)


def _bytea_in(text: str, node: exp.Expr | None) -> bytes:
    """PostgreSQL's bytea input: the hex format `\\x0aff` (pairs of hex digits, spaces
    between pairs allowed), else the escape format (`\\\\` a backslash, `\\ooo` an octal
    byte, any other character its UTF-8 bytes)."""
    if text.startswith("\\x"):
        digits = "".join(text[2:].split())
        if len(digits) % 2:
            raise error_at("invalid hexadecimal data: odd number of digits", "22023", node)
        try:
            return bytes.fromhex(digits)
        except ValueError:
            bad = next(c for c in digits if c not in "0123456789abcdefABCDEF")
            raise error_at(f'invalid hexadecimal digit: "{bad}"', "22023", node) from None
    out, i = bytearray(), 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out += c.encode()
            i += 1
        elif text[i + 1:i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", text[i + 1:i + 4]):
            out.append(int(text[i + 1:i + 4], 8))
            i += 4
        else:
            raise error_at("invalid input syntax for type bytea", "22P02", node)
    return bytes(out)


def _string_to_bytea(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """text -> bytea as PostgreSQL reads it (`_bytea_in`). A loop per value: casting text
    to bytea is rare and the values short; Arrow's cast would keep the text's own bytes."""
    if isinstance(v, pa.Scalar):
        return pa.scalar(_bytea_in(v.as_py(), node) if v.is_valid else None, to)
    a = v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v
    return pa.array([None if t is None else _bytea_in(t, node) for t in a.to_pylist()], to)


def _bytea_to_text(v: Value, to: pa.DataType, node: exp.Expr | None) -> Value:
    """bytea -> text in PostgreSQL's output format (bytea_output = hex): `\\x` + hex."""
    if isinstance(v, pa.Scalar):
        return pa.scalar("\\x" + v.as_py().hex() if v.is_valid else None, to)
    a = v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v
    return pa.array([None if b is None else "\\x" + b.hex() for b in a.to_pylist()], to)


CASTS: dict[tuple[str, str], Callable[[Value, pa.DataType, exp.Expr | None], Value]] = {
    ("int", "int"): cast_checked,
    ("int", "float"): _numeric_cast,
    ("int", "decimal"): _int_to_decimal_cast,
    ("int", "bool"): lambda v, to, node: pc.not_equal(v, 0),
    ("bool", "int"): cast_checked,
    ("float", "float"): _numeric_cast,
    ("float", "int"): _float_to_int,
    ("float", "decimal"): _float_to_decimal,
    ("decimal", "float"): _decimal_to_float,
    ("decimal", "int"): _decimal_to_int,
    ("decimal", "decimal"): decimal_to_decimal,
    ("string", "int"): _string_to_number,
    ("string", "float"): _string_to_number,
    ("string", "decimal"): _string_to_number,
    ("string", "bool"): _string_to_bool,
    ("string", "date"): _string_to_date,
    ("string", "timestamp"): _string_to_timestamp,
    ("string", "interval"): _string_to_interval,
    ("string", "string"): lambda v, to, node: v.cast(to),
    ("string", "binary"): _string_to_bytea,
    ("binary", "binary"): lambda v, to, node: v.cast(to),
    ("date", "timestamp"): lambda v, to, node: v.cast(to),
    ("timestamp", "date"): _timestamp_to_date,
    ("timestamp", "timestamp"): lambda v, to, node: v.cast(to),
    **{(k, "string"): to_text for k in ("int", "float", "decimal", "bool", "date",
                                         "timestamp", "interval")},
    ("binary", "string"): _bytea_to_text,
    ("string", "time"): _string_to_time,
    ("timestamp", "time"): _timestamp_to_time,
    ("time", "string"): time_to_text,
    ("time", "time"): lambda v, to, node: v.cast(to),
}   # planner.expr.arrays adds the array casts (string <-> list, list -> list)


def arrow_type(dt: exp.DataType, source: pa.DataType | None, node: exp.Expr) -> pa.DataType:
    """The Arrow type of a SQL type name; NUMERIC without (p, s) adapts to `source`."""
    T = exp.DataType.Type
    if isinstance(dt, exp.ObjectIdentifier):        # oid, regclass, regtype, ...
        return named_type(dt.name, node)
    t = dt.this
    if t == T.USERDEFINED:                          # pg_catalog.text, "char", int2vector
        kind = dt.args.get("kind")
        return named_type(kind.name if kind is not None else dt.sql(), node)
    if t == T.ARRAY and dt.expressions:
        elem = arrow_type(dt.expressions[0], source.value_type if source is not None and
                           kind_of(source) == "list" else None, node)
        return ArrayType(elem)
    if t == T.NAME:
        return pa.string()
    simple = {
        T.TINYINT: pa.int8(), T.SMALLINT: pa.int16(), T.INT: pa.int32(), T.BIGINT: pa.int64(),
        T.FLOAT: pa.float32(), T.DOUBLE: pa.float64(), T.BOOLEAN: pa.bool_(),
        T.DATE: pa.date32(), T.TIMESTAMP: TIMESTAMP, T.TIMESTAMPTZ: timezones.TIMESTAMPTZ,
        T.DATETIME: TIMESTAMP,
        T.TIMESTAMPNTZ: TIMESTAMP, T.TIME: TIME,
        T.VARBINARY: pa.binary(), T.BINARY: pa.binary(),
        T.BLOB: pa.binary(), T.INTERVAL: INTERVAL,
        T.TEXT: pa.string(), T.VARCHAR: pa.string(), T.CHAR: pa.string(),
        T.NCHAR: pa.string(), T.NVARCHAR: pa.string(),
    }
    if t in simple:
        return simple[t]
    if t in (T.DECIMAL, T.BIGDECIMAL):
        params = [int(p.this.this) for p in dt.expressions]
        if params:
            p, s = params[0], params[1] if len(params) > 1 else 0
            if not 1 <= p <= MAX_PRECISION:
                raise error_at(f"NUMERIC precision {p} must be between 1 and 38", "22023", node)
            if not 0 <= s <= p:
                raise error_at(f"NUMERIC scale {s} must be between 0 and precision {p}", "22023",
                           node)
            return pa.decimal128(p, s)
        if source is not None and kind_of(source) == "decimal":
            return source if source.bit_width == 128 else \
                cap_precision(source.precision, source.scale)
        if source is not None and kind_of(source) == "int":
            return int_as_decimal_type(source)
        return DEFAULT_NUMERIC
    raise UndefinedObject(f'type "{dt.sql(dialect="postgres").lower()}" does not exist',
                          position=node_position(node))


@handles(exp.Cast)
def _cast_node(node: exp.Cast, ctx: EvalContext) -> Value:
    v = eval_node(node.this, ctx)
    dt = node.args["to"]
    to = arrow_type(dt, v.type, node)
    r = cast(v, to, node.this)
    T = exp.DataType.Type
    if dt.this in (T.VARCHAR, T.CHAR, T.NCHAR, T.NVARCHAR) and dt.expressions:
        r = pc.utf8_slice_codeunits(r, 0, int(dt.expressions[0].this.this))
    return r
