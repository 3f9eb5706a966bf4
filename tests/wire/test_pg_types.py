"""wire.pg_types: Arrow columns to PostgreSQL's text and binary forms, checked against bytes a
real PostgreSQL 15 produced (../shared/reference/pg-clients traces and psql), and
parameters back."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct

import numpy as np
import pyarrow as pa
import pytest

from wire import pg_types as T


def text(arr):
    return T.encode_text(arr).to_pylist()


def binary(arr):
    return [None if v is None else bytes(v) for v in T.encode_binary(arr).to_pylist()]


def test_oids_and_typmods():
    schema = pa.schema([("a", pa.int8()), ("b", pa.int16()), ("c", pa.int32()),
                        ("d", pa.int64()), ("e", pa.float32()), ("f", pa.float64()),
                        ("g", pa.decimal128(10, 2)), ("h", pa.string()), ("i", pa.binary()),
                        ("j", pa.bool_()), ("k", pa.date32()), ("l", pa.timestamp("us")),
                        ("m", pa.null())])
    f = T.field_descriptions(schema, [0] * 13)
    assert [(x.type_oid, x.type_len, x.type_mod) for x in f] == [
        (21, 2, -1), (21, 2, -1), (23, 4, -1), (20, 8, -1), (700, 4, -1), (701, 8, -1),
        (1700, -1, 655366), (25, -1, -1), (17, -1, -1), (16, 1, -1), (1082, 4, -1),
        (1114, 8, -1), (25, -1, -1)]


def test_binary_values_match_postgresql():
    assert binary(pa.array([1.5])) == [b"\x3f\xf8" + b"\0" * 6]
    assert binary(pa.array([dt.date(2024, 1, 2)], pa.date32())) == [struct.pack("!i", 8767)]
    ts = pa.array([dt.datetime(2024, 1, 2, 3, 4, 5)], pa.timestamp("us"))
    assert binary(ts) == [struct.pack("!q", 757479845000000)]
    dec = pa.array([decimal.Decimal("1.50"), decimal.Decimal("9.99"), decimal.Decimal("0.00"),
                    decimal.Decimal("-12345.67"), None], pa.decimal128(10, 2))
    assert binary(dec) == [struct.pack("!hhHhHH", 2, 0, 0, 2, 1, 5000),
                           struct.pack("!hhHhHH", 2, 0, 0, 2, 9, 9900),
                           struct.pack("!hhHh", 0, 0, 0, 2),
                           struct.pack("!hhHhHHH", 3, 1, 0x4000, 2, 1, 2345, 6700), None]
    assert binary(pa.array([True, False, None])) == [b"\1", b"\0", None]
    assert binary(pa.array([7], pa.int8())) == [b"\0\7"]


def test_text_values_match_postgresql():
    assert text(pa.array([True, False, None])) == ["t", "f", None]
    assert text(pa.array([b"\x00\x01", b""], pa.binary())) == ["\\x0001", "\\x"]
    assert text(pa.array([dt.datetime(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5, 500000)],
                         pa.timestamp("us"))) == ["2024-01-02 00:00:00",
                                                  "2024-01-02 03:04:05.5"]
    assert text(pa.array([dt.datetime(2024, 1, 2)], pa.timestamp("us", tz="UTC"))) == \
        ["2024-01-02 00:00:00+00"]
    tiny = pa.array([decimal.Decimal("7.15E-16"), decimal.Decimal(0)], pa.decimal128(18, 18))
    assert text(tiny) == ["0.000000000000000715", "0.000000000000000000"]   # not 7.15E-16
    # psql/PostgreSQL 15 outputs (extra_float_digits = 1: shortest round trip)
    floats = [0.1, 1.5, 100.0, 1e15, 123456789012345.0, 1e-5, 1e-4, 1.5e10, 1e22, -0.0,
              math.inf, -math.inf, math.nan, 2.5e-7, None]
    assert text(pa.array(floats)) == [
        "0.1", "1.5", "100", "1e+15", "123456789012345", "1e-05", "0.0001", "15000000000",
        "1e+22", "-0", "Infinity", "-Infinity", "NaN", "2.5e-07", None]
    assert text(pa.array([1e6, 123456.0, 0.5], pa.float32())) == ["1e+06", "123456", "0.5"]


def test_data_rows_framing():
    batch = pa.record_batch([pa.array([1, None], pa.int32()), pa.array(["ab", "c"])],
                            names=["a", "b"])
    data = T.data_rows(batch, [1, 0])
    row1 = b"\0\2" + struct.pack("!i", 4) + b"\0\0\0\1" + struct.pack("!i", 2) + b"ab"
    row2 = b"\0\2" + struct.pack("!i", -1) + struct.pack("!i", 1) + b"c"
    assert data == b"D" + struct.pack("!i", len(row1) + 4) + row1 + \
        b"D" + struct.pack("!i", len(row2) + 4) + row2


def test_numeric_binary_vectorised_matches_the_scalar_encoder():
    rng = np.random.default_rng(3)
    for p, s in [(15, 2), (18, 0), (18, 18), (9, 4), (5, 5), (38, 10)]:
        vals = [decimal.Decimal(int(v)).scaleb(-s) for v in
                rng.integers(-(10 ** min(p, 18) - 1), 10 ** min(p, 18) - 1, 300)]
        vals += [decimal.Decimal(0).scaleb(-s)]
        arr = pa.array([str(v) for v in vals]).cast(pa.decimal128(p, s))
        got = binary(arr)
        want = [T._numeric_value(v, s) for v in arr.to_pylist()]
        assert got == want, (p, s)
        back = [T.parse_binary(b, T.NUMERIC) for b in got]
        assert back == arr.to_pylist()


@pytest.mark.parametrize("oid,fmt,data,want", [
    (T.INT2, 1, b"\0)", 41),
    (T.INT4, 1, b"\xff\xff\xff\xfe", -2),
    (T.INT8, 0, b" 42 ", 42),
    (T.FLOAT8, 1, b"?\xf8\0\0\0\0\0\0", 1.5),
    (T.NUMERIC, 0, b"1.50", decimal.Decimal("1.50")),
    (T.NUMERIC, 1, struct.pack("!hhHhHH", 2, 0, 0x4000, 2, 9, 9900), decimal.Decimal("-9.99")),
    (T.BOOL, 0, b"t", True),
    (T.BOOL, 1, b"\0", False),
    (T.BYTEA, 0, b"\\x0001", b"\x00\x01"),
    (T.DATE, 1, b'\x00\x00"?', dt.date(2024, 1, 2)),
    # timestamptz: an instant (aware, UTC); without an offset the session's local time
    (T.TIMESTAMPTZ, 1, b"\x00\x02\xb0\xe9\xf2\xc0\xa0\x00",
     dt.datetime(2024, 1, 2, tzinfo=dt.UTC)),
    (T.TIMESTAMPTZ, 0, b"2024-01-02 03:00:00+01", dt.datetime(2024, 1, 2, 2, tzinfo=dt.UTC)),
    (T.TIMESTAMPTZ, 0, b"2024-01-02 03:00:00", dt.datetime(2024, 1, 2, 3)),
    # timestamp: an offset in the text is ignored, as PostgreSQL's timestamp input does
    (1114, 0, b"2024-01-02 03:00:00+01", dt.datetime(2024, 1, 2, 3)),
    (1114, 1, b"\x00\x02\xb0\xe9\xf2\xc0\xa0\x00", dt.datetime(2024, 1, 2)),
    (T.TEXT, 0, "h\u00e9".encode(), "h\u00e9"),
    (0, 0, b"x", "x"),
])
def test_decode_param(oid, fmt, data, want):
    got = T.decode_param(data, fmt, oid)
    assert got == want and type(got) is type(want)
    if isinstance(want, dt.datetime):       # naive and aware never compare equal, but
        assert got.tzinfo == want.tzinfo    # say so


def test_decode_param_by_inferred_type_and_errors():
    assert T.decode_param(b"7", 0, 0, pa.int64()) == 7
    assert T.decode_param(b"2024-02-29", 0, 0, pa.date32()) == dt.date(2024, 2, 29)
    with pytest.raises(T.ParamError) as ei:
        T.decode_param(b"abc", 0, T.INT4)
    assert ei.value.sqlstate == "22P02"
    with pytest.raises(T.ParamError) as ei:
        T.decode_param(b"\0", 1, T.INT8)
    assert ei.value.sqlstate == "22P03"
    with pytest.raises(T.ParamError) as ei:
        T.decode_param(b"{1,2}", 0, 1007)
    assert ei.value.sqlstate == "0A000"


def test_conform_casts_to_what_was_announced():
    t = pa.table({"a": pa.array([1, 2], pa.int64()), "b": pa.nulls(2)})
    out = T.conform(t, [(T.INT4, -1), (T.TEXT, -1)])
    assert out.schema.types == [pa.int32(), pa.null()]   # NULLs are text already
    assert T.conform(t, [(T.INT8, -1), (T.TEXT, -1)]).schema.types[0] == pa.int64()


def test_small_batch_path_gives_the_same_bytes_as_the_vectorised_one():
    rng = np.random.default_rng(11)
    n = 200
    floats = rng.standard_normal(n) * 10.0 ** rng.integers(-12, 20, n)
    floats[:4] = [0.0, -0.0, math.inf, math.nan]
    cols = {
        "i8": pa.array(rng.integers(-128, 127, n), pa.int8()),
        "i16": pa.array(rng.integers(-30000, 30000, n), pa.int16()),
        "i32": pa.array(rng.integers(-2**31, 2**31 - 1, n), pa.int32()),
        "i64": pa.array(rng.integers(-2**62, 2**62, n), pa.int64()),
        "f32": pa.array(floats.astype(np.float32)),
        "f64": pa.array(floats),
        "dec": pa.array([str(decimal.Decimal(int(v)).scaleb(-3)) for v in
                         rng.integers(-10**12, 10**12, n)]).cast(pa.decimal128(15, 3)),
        "dec38": pa.array([str(decimal.Decimal(int(v)).scaleb(-10)) for v in
                           rng.integers(-10**15, 10**15, n)]).cast(pa.decimal128(38, 10)),
        "s": pa.array([f"s{v}\u00e9" for v in rng.integers(0, 1000, n)]),
        "b": pa.array([bytes(rng.integers(0, 256, k).astype(np.uint8)) for k in
                       rng.integers(0, 5, n)], pa.binary()),
        "ok": pa.array(rng.integers(0, 2, n).astype(bool)),
        "d": pa.array(rng.integers(-719000, 2900000, n).astype(np.int32), pa.int32())
        .cast(pa.date32()),
        "ts": pa.array(rng.integers(-2 * 10**16, 2 * 10**17, n) // (z := 10**rng.integers(
            0, 7, n)) * z, pa.timestamp("us")),           # trailing zeros in the fraction
        "tz": pa.array(rng.integers(0, 2 * 10**15, n), pa.timestamp("us", tz="UTC")),
        "nul": pa.nulls(n),
    }
    mask = rng.random(n) < 0.2
    table = pa.table({k: (pa.array(v.to_pylist(), v.type, mask=mask) if k != "nul" else v)
                      for k, v in cols.items()})
    for fmt in (0, 1):
        fmts = [fmt] * table.num_columns
        for start in range(0, n, 7):
            batch = table.slice(start, 7).combine_chunks().to_batches()[0]
            small = T._data_rows_small(batch, fmts)
            assert small is not None
            assert small == T.join_rows(T.encode_columns(batch, fmts), b"D", True), \
                (fmt, start)


def test_binary_numeric_parameter_fast_decoder_equals_its_definition():
    """wire/params.py decodes a binary NUMERIC parameter from its coefficient as text when
    no rounding is needed; it must give the very Decimal (digits, exponent, sign) that the
    definition (`_numeric_rounded`: quantize at 4000 digits) gives, errors included."""
    import random

    from wire import params
    rng = random.Random(25)
    fast_cases = 0

    def outcome(fn, b):
        try:
            d = fn(b)
            return ("ok", d.as_tuple())
        except Exception as e:  # noqa: BLE001 - compared
            return ("error", type(e).__name__, str(e))
    for _ in range(20000):
        nd = rng.choice([0, 1, 2, 3, 4, 5, 8, 9])
        weight = rng.choice([-3, -2, -1, 0, 1, 2, 3, 7, 20, 300])
        sign = rng.choice([0, 0, 0x4000, 0xC000, 0xD000, 0xF000, 0x1234])
        dscale = rng.choice([0, 1, 2, 4, 5, 8, 12, 40, -1])
        digits = [rng.choice([0, 1, 9999, rng.randrange(10000), 10000, 65535])
                  for _ in range(nd)]
        b = struct.pack(f"!hhHh{nd}H", nd, weight, sign, dscale, *digits)
        r = rng.random()
        if r < 0.05:
            b = b[:rng.randrange(len(b))]
        elif r < 0.08:
            b += b"\0\1"
        want = outcome(params._numeric_rounded, b)
        assert outcome(params.numeric_from_binary, b) == want, b
        fast_cases += want[0] == "ok" and sign in (0, 0x4000) and nd <= 8 and \
            (weight - nd + 1) * 4 > -dscale - 4
    assert fast_cases > 3000
    # values drivers send: 1234.50 and -0.07 (dscale 2; the last digit padded with zeros)
    b = struct.pack("!hhHh2H", 2, 0, 0, 2, 1234, 5000)
    assert params.numeric_from_binary(b).as_tuple() == decimal.Decimal("1234.50").as_tuple()
    b = struct.pack("!hhHh1H", 1, -1, 0x4000, 2, 700)
    assert params.numeric_from_binary(b).as_tuple() == decimal.Decimal("-0.07").as_tuple()
