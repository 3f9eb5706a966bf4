"""Order-preserving primary-key encoding (engine/key_encoding.py).

The whole engine relies on "memcmp order of encoded keys == tuple order of the keys": the
MemRowSet key index, DiskRowSet key pages, the rowset tree, scan bounds and the write
path's duplicate detection all compare encoded keys only. These tests check that property
for random keys over schemas mixing every key-capable type, both for the vectorised form
(`encode_keys`, numpy ``S<w>`` arrays) and the scalar form (`encode_key`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import errors
from engine.key_encoding import (
    compile_key_encoder,
    encode_key,
    encode_key_prefix,
    encode_keys,
    physical_value,
    successor_prefix,
)
from engine.schema import ColumnSchema
from engine.types import DataType, INTEGER_RANGES, to_physical

# -- strategies -------------------------------------------------------------------------------

KEY_TYPES = [
    ("int8", dict(type=DataType.INT8)),
    ("int16", dict(type=DataType.INT16)),
    ("int32", dict(type=DataType.INT32)),
    ("int64", dict(type=DataType.INT64)),
    ("date", dict(type=DataType.DATE)),
    ("timestamp", dict(type=DataType.TIMESTAMP)),
    ("dec9", dict(type=DataType.DECIMAL, precision=9, scale=2)),
    ("dec18", dict(type=DataType.DECIMAL, precision=18, scale=4)),
    ("dec38", dict(type=DataType.DECIMAL, precision=38, scale=10)),
    ("dec38s0", dict(type=DataType.DECIMAL, precision=38, scale=0)),
    ("string", dict(type=DataType.STRING)),
    ("binary", dict(type=DataType.BINARY)),
]

# Strings biased towards the hard cases: NUL bytes anywhere, empty, prefixes of each other,
# non-ASCII (UTF-8 byte order == code point order).
_ALPHABET = st.sampled_from(["\x00", "\x01", "a", "b", "\xff", "\u00e9", "\u4e2d", "\U0001f600",
                             "\x7f"])
_TEXT = st.one_of(st.text(_ALPHABET, max_size=5), st.text(max_size=6))
_BYTES = st.one_of(st.lists(st.sampled_from([0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF]), max_size=5)
                   .map(bytes), st.binary(max_size=6))


def _dec(unscaled: int, scale: int) -> decimal.Decimal:
    # Built from a string: exact whatever the decimal context precision is.
    return decimal.Decimal(f"{unscaled}E-{scale}")


def _int_values(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1, 1, lo + 1, hi - 1]))


def value_strategy(col: ColumnSchema, max_digits: int | None = None) -> st.SearchStrategy:
    t = col.type
    if t in INTEGER_RANGES:
        return _int_values(*INTEGER_RANGES[t])
    if t is DataType.DATE:
        return st.dates()
    if t is DataType.TIMESTAMP:
        return st.datetimes()
    if t is DataType.DECIMAL:
        digits = col.precision if max_digits is None else min(col.precision, max_digits)
        lim = 10 ** digits - 1
        return _int_values(-lim, lim).map(lambda u: _dec(u, col.scale))
    if t is DataType.STRING:
        return _TEXT
    if t is DataType.BINARY:
        return _BYTES
    raise AssertionError(t)


def make_cols(names: list[str]) -> list[ColumnSchema]:
    spec = dict(KEY_TYPES)
    return [ColumnSchema(f"k{i}", nullable=False, id=i, **spec[n]) for i, n in enumerate(names)]


@st.composite
def schema_and_rows(draw, min_rows=1, max_rows=40, max_digits=None):
    names = draw(st.lists(st.sampled_from([n for n, _ in KEY_TYPES]), min_size=1, max_size=4))
    cols = make_cols(names)
    row = st.tuples(*[value_strategy(c, max_digits) for c in cols])
    # Few distinct values per column so duplicates and shared prefixes are common.
    pool = draw(st.lists(row, min_size=1, max_size=8))
    rows = draw(st.lists(st.one_of(row, st.sampled_from(pool),
                                   st.sampled_from(pool).flatmap(
                                       lambda r: _mutate_last(r, cols, max_digits))),
                         min_size=min_rows, max_size=max_rows))
    return cols, rows


def _mutate_last(r: tuple, cols: list[ColumnSchema], max_digits) -> st.SearchStrategy:
    """Same prefix, a new value in the last column."""
    return value_strategy(cols[-1], max_digits).map(lambda v: r[:-1] + (v,))


def physical_arrays(cols: list[ColumnSchema], rows: list[tuple]) -> list[pa.Array]:
    out = []
    for i, c in enumerate(cols):
        logical = pa.array([r[i] for r in rows], type=c.arrow_type)
        out.append(to_physical(logical, c.type, c.precision))
    return out


def cmp(a, b) -> int:
    return (a > b) - (a < b)


FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# -- vectorised encoding: order and equality ---------------------------------------------------


@FAST
@given(schema_and_rows())
def test_encoded_order_matches_tuple_order(data):
    cols, rows = data
    enc = encode_keys(physical_arrays(cols, rows), cols)
    assert enc.dtype.kind == "S" and len(enc) == len(rows)
    # Sorting the encoded keys gives the same order as sorting the tuples.
    order = np.argsort(enc, kind="stable")
    assert [rows[i] for i in order] == sorted(rows)
    # Pairwise: numpy comparison of the S array elements == tuple comparison.
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert cmp(enc[i], enc[j]) == cmp(rows[i], rows[j]), (rows[i], rows[j])
            # bytes objects read back from the array compare the same way (memcmp).
            assert cmp(bytes(enc[i]), bytes(enc[j])) == cmp(rows[i], rows[j])


@FAST
@given(schema_and_rows())
def test_equal_iff_tuples_equal_and_unique_works(data):
    cols, rows = data
    enc = encode_keys(physical_arrays(cols, rows), cols)
    assert len(np.unique(enc)) == len(set(rows))
    # searchsorted on the sorted encoded keys finds each key exactly
    s = np.sort(enc)
    for i in range(len(rows)):
        pos = np.searchsorted(s, enc[i])
        assert s[pos] == enc[i]


@FAST
@given(schema_and_rows())
def test_scalar_encode_key_equals_vectorised(data):
    cols, rows = data
    enc = encode_keys(physical_arrays(cols, rows), cols)
    compiled = compile_key_encoder(cols)
    for i, r in enumerate(rows):
        k = encode_key(r, cols)
        assert k == bytes(enc[i]), r
        assert compiled(r) == k, r  # the specialised point-lookup encoder agrees
        # canonical form: no trailing zero bytes
        assert not k.endswith(b"\x00")


@FAST
@given(schema_and_rows(max_rows=10))
def test_encode_keys_on_sliced_arrays(data):
    """Arrays with a nonzero offset (slices of bigger batches) encode like fresh ones."""
    cols, rows = data
    pad = rows[:1] * 3
    arrs = physical_arrays(cols, pad + rows + pad)
    sliced = [a.slice(3, len(rows)) for a in arrs]
    fresh = encode_keys(physical_arrays(cols, rows), cols)
    got = encode_keys(sliced, cols)
    assert [bytes(x) for x in got] == [bytes(x) for x in fresh]


# -- scalar path -------------------------------------------------------------------------------


def test_scalar_examples():
    cols = make_cols(["int32"])
    assert encode_key((0,), cols) == b"\x80"  # 80 00 00 00, trailing zeros dropped
    assert encode_key((-1,), cols) == b"\x7f\xff\xff\xff"
    assert encode_key((1,), cols) == b"\x80\x00\x00\x01"
    cols = make_cols(["string", "string"])
    assert encode_key(("a\x00b", "c"), cols) == b"a\x00\x01b\x00\x00c"
    assert encode_key(("", ""), cols) == b""
    cols = make_cols(["string", "int8"])
    assert encode_key(("", -128), cols) == b""  # 00 00 | 00, all dropped
    assert encode_key(("", 0), cols) == b"\x00\x00\x80"


def test_encode_key_rejects_wrong_arity_and_out_of_range():
    cols = make_cols(["int8", "string"])
    with pytest.raises(errors.InvalidArgument):
        encode_key((1,), cols)
    with pytest.raises(errors.InvalidArgument):
        encode_key((128, "x"), cols)
    with pytest.raises(errors.InvalidArgument):
        encode_key((True, "x"), cols)  # bool is not an integer key value
    with pytest.raises(errors.InvalidArgument):
        encode_key(("1", "x"), cols)
    compiled = compile_key_encoder(cols)
    for bad in [(1,), (128, "x"), (True, "x"), ("1", "x"), (-129, "x")]:
        with pytest.raises(errors.InvalidArgument):
            compiled(bad)
    assert compiled((np.int8(5), "x")) == encode_key((5, "x"), cols)
    dcols = make_cols(["dec9"])  # DECIMAL(9, 2)
    with pytest.raises(errors.InvalidArgument):
        encode_key((decimal.Decimal("10000000.00"),), dcols)
    assert encode_key((decimal.Decimal("9999999.99"),), dcols) == bytes(encode_keys(
        physical_arrays(dcols, [(decimal.Decimal("9999999.99"),)]), dcols)[0])


def test_physical_value_logical_types():
    cols = {n: c for n, c in zip([n for n, _ in KEY_TYPES], make_cols([n for n, _ in KEY_TYPES]))}
    assert physical_value(dt.date(1970, 1, 2), cols["date"]) == 1
    assert physical_value(dt.date(1969, 12, 31), cols["date"]) == -1
    assert physical_value(dt.datetime(1970, 1, 1, 0, 0, 1, 5), cols["timestamp"]) == 1_000_005
    assert physical_value(dt.datetime(1969, 12, 31, 23, 59, 59), cols["timestamp"]) == -1_000_000
    aware = dt.datetime(1970, 1, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert physical_value(aware, cols["timestamp"]) == 0
    assert physical_value(decimal.Decimal("-1.5"), cols["dec9"]) == -150
    assert physical_value("\u00e9", cols["string"]) == "\u00e9".encode()
    assert physical_value(b"\x00", cols["binary"]) == b"\x00"


def test_decimal38_scalar_exact_up_to_28_digits():
    cols = make_cols(["dec38s0"])
    v = _dec(10 ** 27 + 1, 0)
    assert physical_value(v, cols[0]) == 10 ** 27 + 1


def test_decimal38_scalar_exact_with_38_digits():
    cols = make_cols(["dec38s0"])
    big = 12345678901234567890123456789012345678
    v = _dec(big, 0)
    assert physical_value(v, cols[0]) == big
    assert encode_key((v,), cols) == bytes(encode_keys(physical_arrays(cols, [(v,)]), cols)[0])
    nines = _dec(10 ** 38 - 1, 10)
    assert physical_value(nines, make_cols(["dec38"])[0]) == 10 ** 38 - 1


# -- prefix bounds -----------------------------------------------------------------------------


@FAST
@given(schema_and_rows(max_rows=20), st.data())
def test_prefix_bounds(data, draw):
    cols, rows = data
    enc = encode_keys(physical_arrays(cols, rows), cols)
    # Prefixes from existing rows (shared prefixes) and fresh ones.
    j = draw.draw(st.integers(1, len(cols)))
    base = draw.draw(st.sampled_from(rows))
    prefix = draw.draw(st.one_of(
        st.just(base[:j]),
        st.tuples(*[value_strategy(c) for c in cols[:j]])))
    lower = encode_key_prefix(prefix, cols)
    succ = successor_prefix(lower)
    if j == len(cols):
        assert lower == encode_key(prefix, cols)
    for i, r in enumerate(rows):
        k = bytes(enc[i])
        # The prefix encoding is an exact inclusive lower bound / exclusive upper bound on
        # the key prefix (the tablet relies on this for lower_key / upper_key).
        assert (k >= lower) == (r[:j] >= prefix), (r, prefix)
        assert (enc[i] >= lower) == (r[:j] >= prefix)
        # [lower, successor) holds every key that starts with the prefix (conservative).
        if r[:j] == prefix:
            assert k >= lower
            assert succ is None or k < succ


def test_successor_prefix():
    assert successor_prefix(b"") is None
    assert successor_prefix(b"\xff\xff") is None
    assert successor_prefix(b"a") == b"b"
    assert successor_prefix(b"a\xff") == b"b"
    assert successor_prefix(b"a\x00") == b"a\x01"
    for p in [b"a", b"a\x00", b"\x01\xfe\xff", b"\x00"]:
        s = successor_prefix(p)
        for ext in [b"", b"\x00", b"\xff" * 5, b"zz"]:
            assert p + ext < s
        assert s > p


def test_string_prefix_of_non_last_column():
    cols = make_cols(["string", "int32"])
    rows = [("a", 5), ("a\x00", -7), ("ab", 0), ("", 1), ("a", -2 ** 31)]
    enc = encode_keys(physical_arrays(cols, rows), cols)
    lo = encode_key_prefix(("a",), cols)
    hi = successor_prefix(lo)
    inside = {rows[i] for i in range(len(rows)) if lo <= bytes(enc[i]) < hi}
    assert {("a", 5), ("a", -2 ** 31)} <= inside
    assert ("", 1) not in inside


@functools.lru_cache
def _all_cols():
    return make_cols([n for n, _ in KEY_TYPES])


def test_all_types_in_one_key():
    cols = _all_cols()
    lo_row = (-128, -2 ** 15, -2 ** 31, -2 ** 63, dt.date(1, 1, 1), dt.datetime(1, 1, 1),
              _dec(-999999999, 2), _dec(-10 ** 18 + 1, 4), _dec(-10 ** 27, 10),
              _dec(-10 ** 27, 0), "", b"")
    hi_row = (127, 2 ** 15 - 1, 2 ** 31 - 1, 2 ** 63 - 1, dt.date(9999, 12, 31),
              dt.datetime(9999, 12, 31, 23, 59, 59, 999999), _dec(999999999, 2),
              _dec(10 ** 18 - 1, 4), _dec(10 ** 27, 10), _dec(10 ** 27, 0), "\U0001f600",
              b"\xff\x00")
    mid = tuple(0 if isinstance(v, int) else v for v in lo_row)
    rows = [hi_row, lo_row, mid]
    enc = encode_keys(physical_arrays(cols, rows), cols)
    assert list(np.argsort(enc)) == [1, 2, 0]
    for i, r in enumerate(rows):
        assert encode_key(r, cols) == bytes(enc[i])


def test_empty_input():
    cols = make_cols(["string"])
    enc = encode_keys([pa.array([], type=pa.binary())], cols)
    assert len(enc) == 0
    cols = make_cols(["int32", "int64"])
    enc = encode_keys([pa.array([], type=pa.int32()), pa.array([], type=pa.int64())], cols)
    assert len(enc) == 0
