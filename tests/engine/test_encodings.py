"""Round trips and contracts of engine.cfile.encodings (self-describing column pages)."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cfile import encodings as enc_mod
from engine.cfile.encodings import (
    HEADER_SIZE,
    Compression,
    Encoding,
    decode_page,
    encode_page,
    gather_page,
    page_encoding,
)
from engine.errors import Corruption

E = Encoding
INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
FLOATS = [pa.float32(), pa.float64()]
FSB = pa.binary(16)

SUPPORTED: dict[pa.DataType, list[Encoding]] = {
    **{t: [E.AUTO, E.PLAIN, E.FOR, E.RLE, E.BIT_SHUFFLE] for t in INTS},
    **{t: [E.AUTO, E.PLAIN, E.BIT_SHUFFLE] for t in FLOATS},
    pa.bool_(): [E.AUTO, E.PLAIN, E.RLE],
    pa.binary(): [E.AUTO, E.PLAIN, E.DICT, E.PREFIX],
    FSB: [E.AUTO, E.PLAIN, E.BIT_SHUFFLE],
}
COMBOS = [(t, e) for t, encs in SUPPORTED.items() for e in encs]
ALL_ENCODINGS = [E.PLAIN, E.PREFIX, E.RLE, E.DICT, E.BIT_SHUFFLE, E.FOR]

SHAPES = ["random", "runs", "narrow", "constant", "extremes", "sorted"]


def make_values(typ: pa.DataType, n: int, shape: str, rng: np.random.Generator):
    """n values of `typ` (numpy array or list of bytes) with a given statistical shape."""
    if pa.types.is_integer(typ):
        dt = np.dtype(typ.to_pandas_dtype())
        info = np.iinfo(dt)
        if shape == "random":
            v = rng.integers(info.min, info.max, n, endpoint=True, dtype=dt)
        elif shape == "runs":
            v = np.repeat(rng.integers(info.min, info.max, max(1, n // 7) + 1, endpoint=True,
                                       dtype=dt), 7)[:n]
        elif shape == "narrow":
            span = 300 if dt.itemsize > 1 else 50
            base = int(rng.integers(info.min, info.max - span, endpoint=True))
            v = (base + rng.integers(0, span, n)).astype(dt)
        elif shape == "constant":
            v = np.full(n, rng.integers(info.min, info.max, endpoint=True, dtype=dt), dt)
        elif shape == "extremes":
            v = rng.choice(np.array([info.min, info.max, 0, -1, 1], dt), n)
        else:
            v = np.sort(rng.integers(info.min, info.max, n, endpoint=True, dtype=dt))
        return v
    if pa.types.is_floating(typ):
        dt = np.dtype(typ.to_pandas_dtype())
        if shape == "extremes":
            pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, np.finfo(dt).max,
                             np.finfo(dt).tiny], dt)
            return rng.choice(pool, n)
        if shape in ("runs", "constant"):
            return np.repeat(rng.standard_normal(max(1, n // 5) + 1), 5)[:n].astype(dt)
        return (rng.standard_normal(n) * 1e6).astype(dt)
    if typ == pa.bool_():
        if shape in ("runs", "sorted", "constant"):
            return np.repeat(rng.random(max(1, n // 9) + 1) < 0.5, 9)[:n]
        return rng.random(n) < 0.5
    if typ == FSB:
        if shape in ("runs", "constant"):
            pool = [rng.bytes(16) for _ in range(3)]
            return [pool[i] for i in rng.integers(0, 3, n)]
        blob = rng.bytes(16 * n)
        return [blob[i:i + 16] for i in range(0, 16 * n, 16)]
    # binary
    if shape == "random":
        ends = np.cumsum(rng.integers(0, 12, n)).tolist()
        blob = rng.bytes(ends[-1] if n else 0)
        return [blob[a:b] for a, b in zip([0, *ends[:-1]], ends)]
    if shape == "extremes":  # empty strings and NUL bytes
        pool = [b"", b"\x00", b"\x00\x00x", b"x\x00", b"\xff" * 30]
        return [pool[i] for i in rng.integers(0, len(pool), n)]
    if shape == "constant":  # equal-length dictionary: the numpy fast path of DICT decode
        pool = [b"A", b"N", b"R"]
        return [pool[i] for i in rng.integers(0, 3, n)]
    if shape == "narrow":  # equal length > 8 (void-dtype gather)
        pool = [b"%011d" % i for i in range(5)]
        return [pool[i] for i in rng.integers(0, 5, n)]
    pool = [b"AIR", b"RAIL", b"SHIP", b"TRUCK", b"REG AIR", b""]
    vals = [pool[i] for i in rng.integers(0, len(pool), n)]
    return sorted(vals) if shape == "sorted" else vals


@st.composite
def page_inputs(draw, typ: pa.DataType):
    """(array, possibly a slice, with or without nulls) of `typ`."""
    n = draw(st.integers(0, 150))
    lead = draw(st.integers(0, 11))
    trail = draw(st.integers(0, 3))
    shape = draw(st.sampled_from(SHAPES))
    nulls = draw(st.sampled_from(["none", "some", "all"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    total = lead + n + trail
    values = make_values(typ, total, shape, rng)
    if nulls == "none":
        mask = None
    elif nulls == "all":
        mask = np.ones(total, bool)
    else:
        mask = rng.random(total) < 0.3
    arr = pa.array(values, typ, mask=mask)
    return arr.slice(lead, n) if (lead or trail) else arr


def assert_same(got: pa.Array, want: pa.Array) -> None:
    """Array equality that treats NaN as equal to itself (bitwise for floats)."""
    assert got.type == want.type and len(got) == len(want)
    if pa.types.is_floating(want.type):
        assert got.null_count == want.null_count
        assert got.is_valid().equals(want.is_valid())
        itype = pa.int32() if want.type == pa.float32() else pa.int64()
        g = np.asarray(got.fill_null(0).view(itype))
        w = np.asarray(want.fill_null(0).view(itype))
        assert np.array_equal(g, w)
    else:
        assert got.equals(want)


def positions_for(n: int, rng: np.random.Generator) -> np.ndarray:
    if n == 0:
        return np.zeros(0, np.int64)
    m = int(rng.integers(0, n + 1))
    return np.sort(rng.integers(0, n, m)).astype(np.int64)  # sorted, duplicates allowed


def check_page(arr: pa.Array, typ: pa.DataType, encoding: Encoding, comp: Compression,
               rng: np.random.Generator) -> bytes:
    page = encode_page(arr, encoding, comp)
    assert isinstance(page, bytes)
    used = page_encoding(page)
    if encoding == E.PREFIX:
        assert used == E.PLAIN
    elif encoding != E.AUTO:
        assert used == encoding
    else:
        assert used in SUPPORTED[typ] and used != E.AUTO

    out = decode_page(page, typ)
    assert out.type == typ
    out.validate(full=True)
    assert out.null_count == arr.null_count
    assert_same(out, arr)

    for pos in (positions_for(len(arr), rng), np.zeros(0, np.int64)):
        got = gather_page(page, typ, pos)
        got.validate(full=True)
        want = out.take(pa.array(pos))
        assert_same(got, want)
        asc = np.unique(pos)                 # a scan's selection: ascending positions
        got = gather_page(page, typ, asc, ascending=True)
        got.validate(full=True)
        assert_same(got, out.take(pa.array(asc)))
    return page


@pytest.mark.parametrize(("typ", "encoding"), COMBOS,
                         ids=lambda x: x.name if isinstance(x, Encoding) else str(x))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), comp=st.sampled_from(list(Compression)), seed=st.integers(0, 2**32 - 1))
def test_round_trip(typ, encoding, data, comp, seed):
    arr = data.draw(page_inputs(typ))
    check_page(arr, typ, encoding, comp, np.random.default_rng(seed))


@pytest.mark.parametrize("typ", list(SUPPORTED), ids=str)
@pytest.mark.parametrize("shape", ["random", "runs", "narrow"])
def test_full_size_pages(typ, shape):
    """64K-row pages (uint16 dictionary codes, many runs) in every supported encoding."""
    rng = np.random.default_rng(7)
    n = 65536
    mask = rng.random(n) < 0.05
    arr = pa.array(make_values(typ, n, shape, rng), typ, mask=mask)
    for encoding in SUPPORTED[typ]:
        check_page(arr, typ, encoding, Compression.NONE, rng)
    check_page(arr.slice(5, n - 10), typ, E.AUTO, Compression.LZ4, rng)


def test_many_distinct_strings_use_wide_codes():
    n = 70000  # > 65536 distinct values -> uint32 codes
    arr = pa.array([b"k%d" % i for i in range(n)], pa.binary())
    rng = np.random.default_rng(1)
    page = check_page(arr, pa.binary(), E.DICT, Compression.NONE, rng)
    assert page_encoding(page) == E.DICT


# --------------------------------------------------------------------------------------------
# AUTO choices
# --------------------------------------------------------------------------------------------


def auto(arr: pa.Array) -> Encoding:
    return page_encoding(encode_page(arr))


def test_auto_choices():
    rng = np.random.default_rng(3)
    n = 10000
    assert auto(pa.array(rng.integers(-2**62, 2**62, n))) == E.PLAIN
    small = pa.array(rng.integers(0, 1000, n) + 10**15)
    assert auto(small) == E.FOR
    assert len(encode_page(small)) < 0.3 * len(encode_page(small, E.PLAIN))
    assert auto(pa.array(np.repeat(rng.integers(-2**62, 2**62, 10), n // 10))) == E.RLE
    assert auto(pa.array(np.zeros(n, np.int8))) == E.RLE
    assert auto(pa.array(rng.standard_normal(n))) == E.PLAIN
    assert auto(pa.array(np.zeros(n))) == E.PLAIN
    assert auto(pa.array(rng.random(n) < 0.5)) == E.PLAIN
    assert auto(pa.array(np.repeat([True, False], n // 2))) == E.RLE
    words = [b"AIR", b"RAIL", b"SHIP", b"TRUCK"]
    assert auto(pa.array([words[i] for i in rng.integers(0, 4, n)], pa.binary())) == E.DICT
    assert auto(pa.array([b"Customer#%09d" % i for i in range(n)], pa.binary())) == E.PLAIN
    # high-cardinality at the start of the page but a few long values overall: the sample
    # probe is strided, so it still finds the dictionary
    vals = [b"%0100d" % (i % 50) for i in range(n)]
    assert auto(pa.array(vals, pa.binary())) == E.DICT
    assert auto(pa.array([bytes(16)] * n, FSB)) == E.PLAIN
    assert auto(pa.array([], pa.int32())) == E.PLAIN
    # nulls do not break runs or the FOR range
    masked = pa.array(np.full(n, 10**12), mask=rng.random(n) < 0.5)
    assert auto(masked) == E.RLE


# --------------------------------------------------------------------------------------------
# Zero-copy, buffers, compression
# --------------------------------------------------------------------------------------------


def _inside(arr: pa.Array, page: pa.Buffer) -> bool:
    bufs = [b for b in arr.buffers() if b is not None and b.size]
    return all(page.address <= b.address and b.address + b.size <= page.address + page.size
               for b in bufs)


@pytest.mark.parametrize("typ", [pa.int64(), pa.float32(), pa.binary(), pa.bool_(), FSB],
                         ids=str)
def test_plain_decode_is_zero_copy(typ):
    rng = np.random.default_rng(5)
    arr = pa.array(make_values(typ, 1000, "random", rng), typ, mask=rng.random(1000) < 0.1)
    page = encode_page(arr, E.PLAIN)
    pbuf = pa.py_buffer(page)
    out = decode_page(pbuf, typ)
    assert_same(out, arr)
    assert _inside(out, pbuf)


def test_plain_sections_are_aligned():
    arr = pa.array([b"x" * i for i in range(13)], pa.binary(), mask=[i % 3 == 0 for i in range(13)])
    pbuf = pa.py_buffer(encode_page(arr, E.PLAIN))
    out = decode_page(pbuf, pa.binary())
    for b in out.buffers():
        assert (b.address - pbuf.address) % 8 == 0


def test_buffer_kinds_and_unaligned_page():
    arr = pa.array(np.arange(-500, 500, dtype=np.int32), mask=np.arange(1000) % 7 == 0)
    page = encode_page(arr, E.FOR)
    blob = b"abc" + page + b"trailing junk"
    views = [page, memoryview(page), pa.py_buffer(page), bytearray(page),
             memoryview(blob)[3:3 + len(page)], pa.py_buffer(blob).slice(3)]
    pos = np.array([0, 7, 8, 999], np.int64)
    for view in views:
        assert decode_page(view, pa.int32()).equals(arr)
        assert gather_page(view, pa.int32(), pos).equals(arr.take(pa.array(pos)))
        assert page_encoding(view) == E.FOR
    # trailing bytes after an LZ4 page are ignored too (the stored size is in the header)
    zpage = encode_page(pa.array(np.zeros(5000, np.int64)), E.PLAIN, Compression.LZ4)
    assert decode_page(zpage + b"\xff" * 9, pa.int64()).equals(pa.array(np.zeros(5000, np.int64)))


def test_lz4_compresses_and_falls_back():
    compressible = pa.array(np.tile(np.arange(64, dtype=np.int64), 1000))
    plain = encode_page(compressible, E.PLAIN)
    packed = encode_page(compressible, E.PLAIN, Compression.LZ4)
    assert len(packed) < len(plain) // 4
    assert packed[2] == Compression.LZ4  # header byte 2 is the compression actually used
    noise = pa.array(np.random.default_rng(0).integers(-2**63, 2**63 - 1, 5000))
    page = encode_page(noise, E.PLAIN, Compression.LZ4)
    assert page[2] == Compression.NONE  # LZ4 did not help: stored raw, decodes zero-copy
    pbuf = pa.py_buffer(page)
    assert _inside(decode_page(pbuf, pa.int64()), pbuf)


def test_bit_shuffle_always_lz4_and_layout():
    arr = pa.array(np.arange(10000, dtype=np.int64) * 3)
    page = encode_page(arr, E.BIT_SHUFFLE)
    assert page[2] == Compression.LZ4
    assert len(page) < 0.25 * len(encode_page(arr, E.PLAIN))
    rng = np.random.default_rng(2)
    for n in (0, 1, 7, 8, 9, 100):
        for w in (1, 2, 4, 8, 16):
            mat = rng.integers(0, 256, (n, w), dtype=np.uint8)
            bits = np.unpackbits(mat, axis=1, bitorder="little")  # column 8j+b: bit b, byte j
            ref = np.packbits(np.ascontiguousarray(bits.T), axis=1, bitorder="little")
            got = enc_mod._bitshuffle(mat)
            assert np.array_equal(got.reshape(8 * w, -1), ref.reshape(8 * w, -1))
            assert np.array_equal(enc_mod._bitunshuffle(got.reshape(-1), n, w), mat)


def test_chunked_array_input():
    arr = pa.chunked_array([[1, 2, None], [4]], pa.int16())
    assert decode_page(encode_page(arr), pa.int16()).equals(arr.combine_chunks())


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("typ", list(SUPPORTED), ids=str)
def test_encoding_not_fitting_type_raises(typ):
    arr = pa.array(make_values(typ, 10, "random", np.random.default_rng(0)), typ)
    for encoding in ALL_ENCODINGS:
        if encoding in SUPPORTED[typ]:
            continue
        with pytest.raises(ValueError):
            encode_page(arr, encoding)


@pytest.mark.parametrize("typ", [pa.string(), pa.uint8(), pa.date32(), pa.large_binary(),
                                 pa.binary(8), pa.timestamp("us"), pa.decimal128(10, 2)],
                         ids=str)
def test_non_physical_types_rejected(typ):
    arr = pa.nulls(3, typ)
    with pytest.raises(ValueError):
        encode_page(arr)


def test_wrong_decode_type_raises():
    page = encode_page(pa.array([1, 2, 3], pa.int32()))
    with pytest.raises(ValueError):
        decode_page(page, pa.int64())
    with pytest.raises(ValueError):
        gather_page(page, pa.date32(), np.array([0]))


def test_corrupt_pages_raise():
    page = encode_page(pa.array(np.arange(100, dtype=np.int64)), E.FOR)
    with pytest.raises(Corruption):
        decode_page(page[:10], pa.int64())
    with pytest.raises(Corruption):
        decode_page(page[:-5], pa.int64())
    with pytest.raises(Corruption):
        decode_page(b"\x00" + page[1:], pa.int64())
    with pytest.raises(Corruption):
        page_encoding(b"\x00" + page[1:])
    bad_enc = page[:1] + bytes([3]) + page[2:]
    with pytest.raises(Corruption):
        decode_page(bad_enc, pa.int64())
    lz = encode_page(pa.array(np.zeros(1000, np.int64)), E.PLAIN, Compression.LZ4)
    assert lz[2] == Compression.LZ4
    with pytest.raises(Corruption):
        decode_page(lz[:HEADER_SIZE] + b"\xff" * (len(lz) - HEADER_SIZE), pa.int64())
    # RLE run ends that do not cover the page
    rle = bytearray(encode_page(pa.array(np.repeat([1, 2], 50).astype(np.int64)), E.RLE))
    (runs,) = struct.unpack_from("<I", rle, HEADER_SIZE)
    ends_at = HEADER_SIZE + 8 + runs * 8
    struct.pack_into("<I", rle, ends_at + 4 * (runs - 1), 99)
    with pytest.raises(Corruption):
        decode_page(bytes(rle), pa.int64())


def test_gather_out_of_range_raises():
    for encoding in (E.PLAIN, E.FOR, E.RLE):
        page = encode_page(pa.array(np.arange(10, dtype=np.int64)), encoding)
        for bad in ([10], [-1], [0, 10]):
            with pytest.raises(IndexError):
                gather_page(page, pa.int64(), np.array(bad, np.int64))
            with pytest.raises(IndexError):        # ascending positions: first and last
                gather_page(page, pa.int64(), np.array(bad, np.int64), ascending=True)
        with pytest.raises(IndexError):
            gather_page(page, pa.int64(), np.array([-1, 3], np.int64), ascending=True)


@pytest.mark.parametrize("null_rate", [0.0, 0.02, 0.5, 0.97, 1.0])
def test_null_fill_is_forward_fill(null_rate):
    """Both fill strategies (sparse: searchsorted, dense: running max) give a forward fill."""
    rng = np.random.default_rng(int(null_rate * 100))
    for n in (0, 1, 2, 50, 333):
        valid = rng.random(n) >= null_rate
        v = rng.integers(-100, 100, n)
        got = enc_mod._ffill(v, valid)
        want = np.zeros(n, v.dtype)
        if valid.any():
            last = v[np.argmax(valid)]
            for i in range(n):
                last = v[i] if valid[i] else last
                want[i] = last
        assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64])
@pytest.mark.parametrize("mean_run", [1, 2, 4, 9, 11, 50])
def test_rle_runs_short_and_long_expand_exactly(dtype, mean_run):
    """_rle_expand's running sum of run-start differences (short runs) and np.repeat (long
    ones) give the same slots, with differences that wrap around the type's range."""
    rng = np.random.default_rng(mean_run)
    info = np.iinfo(dtype)
    runs = 400
    values = rng.integers(info.min, info.max, runs, dtype=dtype, endpoint=True)
    values[::7] = info.min
    values[3::7] = info.max
    lengths = rng.integers(1, 2 * mean_run, runs) if mean_run > 1 else np.ones(runs, int)
    ends = np.cumsum(lengths).astype(np.uint32)
    expected = np.repeat(values, lengths)
    assert np.array_equal(enc_mod._rle_expand(values, ends, int(ends[-1])), expected)
    if np.issubdtype(dtype, np.signedinteger):        # the column types pages hold
        page = encode_page(pa.array(expected), E.RLE)
        assert decode_page(page, pa.from_numpy_dtype(dtype)).equals(pa.array(expected))


def test_rle_page_with_an_empty_run_still_decodes():
    values = np.array([5, 6, 7], np.int64)
    ends = np.array([2, 2, 4], np.uint32)        # the run of 6 is empty
    assert enc_mod._rle_expand(values, ends, 4).tolist() == [5, 5, 7, 7]
