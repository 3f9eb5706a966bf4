"""Schema rules (engine/schema.py) and logical <-> physical type mapping (engine/types.py)."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import errors
from engine.schema import ColumnSchema, Schema
from engine.types import (
    DataType,
    INTEGER_RANGES,
    MAX_VARCHAR_LENGTH,
    arrow_type,
    physical_type,
    to_logical,
    to_physical,
)


def col(name, typ, **kw):
    return ColumnSchema(name, typ, **kw)


def basic() -> Schema:
    return Schema([col("v", DataType.STRING), col("k2", DataType.INT32),
                   col("k1", DataType.STRING, nullable=True), col("w", DataType.DOUBLE)],
                  key=["k1", "k2"])


# -- construction ------------------------------------------------------------------------------


def test_key_columns_first_in_key_order_and_not_null():
    s = basic()
    assert s.names == ["k1", "k2", "v", "w"]
    assert s.key_names == ["k1", "k2"]
    assert s.num_key_columns == 2
    assert all(not c.nullable for c in s.key_columns)
    assert s.column("v").nullable
    assert s.is_key("k1") and s.is_key("k2") and not s.is_key("v")
    assert s.index_of("w") == 3
    # ids are assigned in the final column order, unique
    assert len({c.id for c in s.columns}) == 4
    for c in s.columns:
        assert s.column_by_id(c.id) is c
        assert s.has_column_id(c.id)
    assert not s.has_column_id(99)


def test_num_key_columns_form():
    s = Schema([col("a", DataType.INT64), col("b", DataType.INT64)], num_key_columns=1)
    assert s.key_names == ["a"]
    assert not s.column("a").nullable


@pytest.mark.parametrize("typ", [DataType.BOOL, DataType.FLOAT, DataType.DOUBLE])
def test_bool_float_double_keys_refused(typ):
    with pytest.raises(errors.InvalidArgument):
        Schema([col("k", typ), col("v", DataType.INT32)], key=["k"])
    with pytest.raises(errors.InvalidArgument):
        Schema([col("a", DataType.INT32), col("k", typ)], key=["a", "k"])
    # fine as a non-key column
    Schema([col("a", DataType.INT32), col("k", typ)], key=["a"])


@pytest.mark.parametrize("typ", [t for t in DataType if t.key_allowed])
def test_key_allowed_types(typ):
    kw = {"precision": 10, "scale": 2} if typ is DataType.DECIMAL else (
        {"length": 5} if typ is DataType.VARCHAR else {})
    s = Schema([col("k", typ, **kw)], key=["k"])
    assert s.key_names == ["k"]


def test_duplicate_and_missing_columns():
    with pytest.raises(errors.InvalidArgument):
        Schema([col("a", DataType.INT32), col("b", DataType.INT64), col("b", DataType.STRING)],
               key=["a"])
    with pytest.raises(errors.InvalidArgument):
        Schema([col("a", DataType.INT32), col("a", DataType.INT64)], num_key_columns=1)
    with pytest.raises(errors.InvalidArgument):
        Schema([col("a", DataType.INT32)], key=["nope"])
    with pytest.raises(errors.InvalidArgument):
        Schema([col("a", DataType.INT32), col("b", DataType.INT32)], key=["a", "a"])
    with pytest.raises(errors.InvalidArgument):
        Schema([col("a", DataType.INT32)], key=[])
    with pytest.raises(errors.InvalidArgument):
        Schema([col("a", DataType.INT32)])


def test_duplicate_key_column_name_refused():
    with pytest.raises(errors.InvalidArgument):
        Schema([col("a", DataType.INT32), col("a", DataType.INT64)], key=["a"])
    with pytest.raises(errors.InvalidArgument):
        Schema([col("a", DataType.INT32), col("b", DataType.STRING), col("a", DataType.STRING)],
               key=["a"])


def test_names_are_case_sensitive():
    s = Schema([col("a", DataType.INT32), col("A", DataType.INT32)], key=["a"])
    assert s.names == ["a", "A"]
    with pytest.raises(errors.ColumnNotFound) as ei:
        s.index_of("b")
    assert ei.value.sqlstate == "42703"
    with pytest.raises(errors.ColumnNotFound):
        s.column("B")
    assert not s.has_column("B")


@pytest.mark.parametrize("p,s,ok", [
    (1, 0, True), (38, 38, True), (38, 0, True), (9, None, True), (18, 18, True),
    (None, 0, False), (0, 0, False), (39, 2, False), (10, 11, False), (10, -1, False),
])
def test_decimal_validation(p, s, ok):
    if ok:
        c = col("d", DataType.DECIMAL, precision=p, scale=s)
        assert c.scale == (s or 0)
        assert c.type_sql() == f"DECIMAL({p},{s or 0})"
    else:
        with pytest.raises(errors.InvalidArgument):
            col("d", DataType.DECIMAL, precision=p, scale=s)


@pytest.mark.parametrize("n,ok", [(1, True), (MAX_VARCHAR_LENGTH, True), (None, False),
                                  (0, False), (MAX_VARCHAR_LENGTH + 1, False), (-3, False)])
def test_varchar_validation(n, ok):
    if ok:
        assert col("s", DataType.VARCHAR, length=n).type_sql() == f"VARCHAR({n})"
    else:
        with pytest.raises(errors.InvalidArgument):
            col("s", DataType.VARCHAR, length=n)


def test_encoding_and_compression_validation():
    col("a", DataType.INT32, encoding="BIT_SHUFFLE", compression="LZ4")
    with pytest.raises(errors.InvalidArgument):
        col("a", DataType.INT32, encoding="ZSTD_MAGIC")
    with pytest.raises(errors.InvalidArgument):
        col("a", DataType.INT32, compression="SNAPPY")


# -- evolution ---------------------------------------------------------------------------------


def test_add_column_rules():
    s = basic()
    ids = {c.id for c in s.columns}
    with pytest.raises(errors.InvalidArgument):
        s.add_column(col("v", DataType.INT32))
    with pytest.raises(errors.InvalidArgument):
        s.add_column(col("n", DataType.INT32, nullable=False))
    s2 = s.add_column(col("n", DataType.INT32, nullable=False, default=7))
    n = s2.column("n")
    assert n.id not in ids and n.id == s.next_column_id
    assert s2.names == s.names + ["n"]
    assert s2.key_names == s.key_names
    s3 = s2.add_column(col("m", DataType.STRING))
    assert s3.column("m").nullable and s3.column("m").id == n.id + 1
    # the original schema is unchanged (schemas are values)
    assert not s.has_column("n")


def test_drop_column_rules():
    s = basic()
    for k in s.key_names:
        with pytest.raises(errors.InvalidArgument):
            s.drop_column(k)
    with pytest.raises(errors.ColumnNotFound):
        s.drop_column("nope")
    s2 = s.drop_column("v")
    assert s2.names == ["k1", "k2", "w"]
    assert s2.column("w").id == s.column("w").id
    # ids are never reused: a column added back after a drop gets a fresh id
    s3 = s2.add_column(col("v", DataType.STRING))
    assert s3.column("v").id not in {c.id for c in s.columns}


def test_rename_column_rules():
    s = basic()
    with pytest.raises(errors.InvalidArgument):
        s.rename_column("v", "w")
    with pytest.raises(errors.ColumnNotFound):
        s.rename_column("nope", "x")
    s2 = s.rename_column("v", "x")
    assert s2.names == ["k1", "k2", "x", "w"]
    assert s2.column("x").id == s.column("v").id
    assert not s2.has_column("v")
    s3 = s.rename_column("k1", "kk")
    assert s3.key_names == ["kk", "k2"]
    assert s3.column("kk").id == s.column("k1").id


# -- persistence and Arrow ---------------------------------------------------------------------


def _rich_schema(defaults: bool = False) -> Schema:
    d = (lambda v: v) if defaults else (lambda v: None)
    return Schema([
        col("k", DataType.INT64),
        col("s", DataType.VARCHAR, length=10, default=d("abc")),
        col("d", DataType.DECIMAL, precision=20, scale=3, nullable=False,
            encoding="PLAIN_ENCODING"),
        col("i8", DataType.INT8, default=d(3)),
        col("f", DataType.FLOAT, compression="LZ4"),
        col("b", DataType.BOOL, default=d(True)),
        col("dt", DataType.DATE),
        col("ts", DataType.TIMESTAMP),
        col("bin", DataType.BINARY),
        col("dbl", DataType.DOUBLE, default=d(1.5)),
    ], key=["k"])


@pytest.mark.parametrize("defaults", [False, True])
def test_to_dict_from_dict_round_trip(defaults):
    s = _rich_schema(defaults).drop_column("i8").add_column(col("z", DataType.INT16))
    d = s.to_dict()
    s2 = Schema.from_dict(json.loads(json.dumps(d)))
    assert s2 == s
    assert s2.next_column_id == s.next_column_id
    assert [c.id for c in s2.columns] == [c.id for c in s.columns]
    assert s2.columns == s.columns
    assert repr(s2) == repr(s)
    # the next added column still gets a never-used id
    assert s2.add_column(col("q", DataType.INT8)).column("q").id == s.next_column_id


def test_to_dict_json_round_trip_with_logical_defaults():
    s = Schema([col("k", DataType.INT64),
                col("d", DataType.DECIMAL, precision=9, scale=2, default=decimal.Decimal("1.50")),
                col("dt", DataType.DATE, default=dt.date(2020, 1, 2)),
                col("ts", DataType.TIMESTAMP, default=dt.datetime(2020, 1, 2, 3, 4, 5)),
                col("bin", DataType.BINARY, default=b"\x00\xff")], key=["k"])
    s2 = Schema.from_dict(json.loads(json.dumps(s.to_dict())))
    assert s2 == s


def test_schema_equality():
    assert basic() == basic()
    assert basic() != basic().rename_column("v", "x")
    assert basic() != "not a schema"


def test_arrow_schema_mapping():
    s = _rich_schema()
    a = s.arrow_schema()
    assert a.names == s.names
    expected = {"k": pa.int64(), "s": pa.string(), "d": pa.decimal128(20, 3), "i8": pa.int8(),
                "f": pa.float32(), "b": pa.bool_(), "dt": pa.date32(),
                "ts": pa.timestamp("us"), "bin": pa.binary(), "dbl": pa.float64()}
    for f in a:
        assert f.type == expected[f.name], f.name
        assert f.nullable == s.column(f.name).nullable
    assert not a.field("k").nullable and not a.field("d").nullable
    sub = s.arrow_schema(["ts", "k"])
    assert sub.names == ["ts", "k"]
    with pytest.raises(errors.ColumnNotFound):
        s.arrow_schema(["nope"])
    phys = {c.name: c.physical_type for c in s.columns}
    assert phys["d"] == pa.binary(16) and phys["s"] == pa.binary() and phys["dt"] == pa.int32()
    assert phys["ts"] == pa.int64() and phys["bin"] == pa.binary()


@pytest.mark.parametrize("p,phys", [(1, pa.int32()), (9, pa.int32()), (10, pa.int64()),
                                    (18, pa.int64()), (19, pa.binary(16)),
                                    (38, pa.binary(16))])
def test_decimal_physical_widths(p, phys):
    assert physical_type(DataType.DECIMAL, p) == phys
    assert arrow_type(DataType.DECIMAL, p, 0) == pa.decimal128(p, 0)


# -- to_physical / to_logical ------------------------------------------------------------------


def _round_trip(values, dtype, precision=None, scale=None):
    logical = pa.array(values, type=arrow_type(dtype, precision, scale))
    phys = to_physical(logical, dtype, precision)
    assert phys.type == physical_type(dtype, precision)
    assert phys.null_count == logical.null_count
    back = to_logical(phys, dtype, precision, scale)
    assert back.type == logical.type
    assert back.to_pylist() == values
    assert back.equals(logical)
    # slices (nonzero offset) convert the same way
    if len(values) > 2:
        sl = logical.slice(1, len(values) - 2)
        back2 = to_logical(to_physical(sl, dtype, precision), dtype, precision, scale)
        assert back2.to_pylist() == values[1:-1]
    # chunked input is accepted
    chunked = pa.chunked_array([logical])
    assert to_physical(chunked, dtype, precision).to_pylist() == phys.to_pylist()
    return phys


def _dec(u, s):
    return decimal.Decimal(f"{u}E-{s}")


@pytest.mark.parametrize("dtype", [DataType.INT8, DataType.INT16, DataType.INT32,
                                   DataType.INT64])
def test_round_trip_integers(dtype):
    lo, hi = INTEGER_RANGES[dtype]
    phys = _round_trip([lo, None, 0, hi, -1, None, 1], dtype)
    assert phys.to_pylist() == [lo, None, 0, hi, -1, None, 1]


def test_round_trip_other_types():
    _round_trip([1.5, None, -0.0, float("inf")], DataType.FLOAT)
    _round_trip([1e300, None, -2.5, 0.0], DataType.DOUBLE)
    _round_trip([True, None, False, True], DataType.BOOL)
    p = _round_trip(["", None, "a\x00b", "\u00e9\U0001f600", "x"], DataType.STRING)
    assert p.to_pylist()[3] == "\u00e9\U0001f600".encode()
    _round_trip(["abc", None, "", "d"], DataType.VARCHAR)
    _round_trip([b"", None, b"\x00\xff", b"z"], DataType.BINARY)
    p = _round_trip([dt.date(1970, 1, 2), None, dt.date(1, 1, 1), dt.date(9999, 12, 31),
                     dt.date(1969, 12, 31)], DataType.DATE)
    assert p.to_pylist()[0] == 1 and p.to_pylist()[4] == -1
    p = _round_trip([dt.datetime(1970, 1, 1, 0, 0, 0, 1), None, dt.datetime(1, 1, 1),
                     dt.datetime(9999, 12, 31, 23, 59, 59, 999999)], DataType.TIMESTAMP)
    assert p.to_pylist()[0] == 1


@pytest.mark.parametrize("p,s", [(1, 0), (5, 5), (9, 2), (10, 0), (15, 2), (18, 18), (18, 4),
                                 (19, 0), (20, 3), (38, 10), (38, 0), (38, 38)])
def test_round_trip_decimals_near_limits(p, s):
    lim = 10 ** p - 1
    unscaled = [lim, -lim, None, 0, 1, -1, lim - 1, None, -(lim // 3)]
    values = [None if u is None else _dec(u, s) for u in unscaled]
    phys = _round_trip(values, DataType.DECIMAL, p, s)
    if p <= 18:
        assert phys.to_pylist() == unscaled  # unscaled ints, sign preserved
    else:
        got = [None if b is None else int.from_bytes(b, "little", signed=True)
               for b in phys.to_pylist()]
        assert got == unscaled


@pytest.mark.parametrize("p,s", [(9, 2), (15, 2), (18, 0)])
def test_round_trip_decimals_all_non_negative(p, s):
    """No negative value (the conversion's one-write case): high words 0, NULLs kept."""
    lim = 10 ** p - 1
    for unscaled in ([0, 1, lim, 7], [lim, None, 0, None, 12], [None, 5]):
        values = [None if u is None else _dec(u, s) for u in unscaled]
        _round_trip(values, DataType.DECIMAL, p, s)
        phys = pa.array(unscaled, pa.int32() if p <= 9 else pa.int64())
        back = to_logical(phys, DataType.DECIMAL, p, s)
        words = np.frombuffer(back.buffers()[1], np.int64)
        assert back.to_pylist() == values and not words[1::2].any()


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([(9, 2), (18, 6), (38, 10)]).flatmap(
    lambda ps: st.tuples(st.just(ps), st.lists(st.one_of(
        st.none(), st.integers(-(10 ** ps[0]) + 1, 10 ** ps[0] - 1)), max_size=30))))
def test_round_trip_decimals_random(data):
    (p, s), unscaled = data
    values = [None if u is None else _dec(u, s) for u in unscaled]
    logical = pa.array(values, type=pa.decimal128(p, s))
    back = to_logical(to_physical(logical, DataType.DECIMAL, p), DataType.DECIMAL, p, s)
    assert back.to_pylist() == values


def test_decimal_to_physical_from_other_decimal_type():
    # a decimal128 of a narrower precision but the same scale converts too
    arr = pa.array([_dec(-12345, 2), None], type=pa.decimal128(7, 2))
    assert to_physical(arr, DataType.DECIMAL, 9).to_pylist() == [-12345, None]
    assert to_physical(arr, DataType.DECIMAL, 15).to_pylist() == [-12345, None]
