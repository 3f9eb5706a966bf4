"""Bind parameters: one value at a time, text or binary, by OID, into Python values.

`decode_param(data, format, oid, arrow)` gives what `Session.execute` binds; when the OID
is 0 (unspecified) the Arrow type the statement implies decides, and with neither the text
stays a str. Array OIDs are refused rather than misread as text (0A000).
"""
from __future__ import annotations

import datetime as _dt
import decimal
import struct
import uuid

import pyarrow as pa

import native

from wire.type_oids import _PG_EPOCH_DATE, _PG_EPOCH_DT, TYPES, UNKNOWN, _UTC, ParamError, type_oid


# -- parameters -------------------------------------------------------------------------------
BOOL_TRUE_WORDS = {"t", "true", "y", "yes", "on", "1"}
BOOL_FALSE_WORDS = {"f", "false", "n", "no", "off", "0"}


def parse_bool(s: str) -> bool:
    v = s.strip().lower()
    if v in BOOL_TRUE_WORDS:
        return True
    if v in BOOL_FALSE_WORDS:
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
    if v.tzinfo is None:
        return v
    # timestamptz with an offset: the instant, aware (the session reads a naive value in
    # its TimeZone, as PostgreSQL reads text without an offset); timestamp (without time
    # zone) ignores a written offset, as PostgreSQL's timestamp input does
    return v.astimezone(_UTC) if tz else v.replace(tzinfo=None)


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


_NUMERIC_HEAD = struct.Struct("!hhHh")
_DIGITS = [struct.Struct(f"!{n}H") for n in range(9)]


def numeric_from_binary(b: bytes) -> decimal.Decimal:
    """A binary NUMERIC (base-10000 digits) as a Decimal with `dscale` fraction digits:
    `parse_binary` of OID 1700 (whose errors wrap this one's; wire/fastpath.py decodes a
    batch's NUMERIC column with it, value by value).
    The common case - digits that need no rounding to dscale, at most 8 of them - is
    built from its integer coefficient and exponent as text (exact, no context); the
    rest by `_numeric_rounded`, the definition, which it equals (tests/wire/
    test_params.py compares them)."""
    if len(b) < 8:
        return _numeric_rounded(b)          # its error
    ndigits, weight, sign, dscale = _NUMERIC_HEAD.unpack_from(b)
    shift = (weight - ndigits + 1) * 4 + dscale     # coefficient = digits * 10**shift
    if not 0 <= ndigits <= 8 or len(b) != 8 + 2 * ndigits or not -4 < shift <= 60 or \
            sign not in (0, 0x4000):
        return _numeric_rounded(b)
    v = 0
    for d in _DIGITS[ndigits].unpack_from(b, 8):   # a loop over at most 8 digits
        if d > 9999:
            return _numeric_rounded(b)
        v = v * 10000 + d
    if shift >= 0:
        v *= 10 ** shift
    else:               # the last base-10000 digit's padding: exact only if it is zeros
        v, rest = divmod(v, 10 ** -shift)
        if rest:
            return _numeric_rounded(b)
    return decimal.Decimal(f"{'-' if sign else ''}{v}E{-dscale}")


def numeric_column_py(raw, out: list) -> None:
    """Each of `raw` (binary NUMERIC values, None for NULL) as `numeric_from_binary`
    decodes it, appended to `out` in order: a value that fails raises its error, the
    values before it appended (a pipelined batch's NUMERIC column, wire/fastpath.py).
    Compiled in native/_wire.pyx (`numeric_column`)."""
    for v in raw:           # the twin: a loop per value
        out.append(None if v is None else numeric_from_binary(v))


def _numeric_rounded(b: bytes) -> decimal.Decimal:
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
                return numeric_from_binary(b)
            case 1082:
                return _PG_EPOCH_DATE + _dt.timedelta(days=struct.unpack("!i", b)[0])
            case 1114:
                return _PG_EPOCH_DT + _dt.timedelta(microseconds=struct.unpack("!q", b)[0])
            case 1184:          # an instant: microseconds since 2000-01-01 00:00 UTC
                return (_PG_EPOCH_DT + _dt.timedelta(
                    microseconds=struct.unpack("!q", b)[0])).replace(tzinfo=_UTC)
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


numeric_column = native.kernel("_wire", "numeric_column", numeric_column_py, "fallback_numeric",
                               numeric_from_binary, decimal.Decimal)
