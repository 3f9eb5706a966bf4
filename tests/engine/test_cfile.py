"""CFile writer/reader (engine/cfile/cfile.py): pages, stats, value index, corruption."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import errors
from engine.cfile.cfile import MAGIC, CFileReader, CFileWriter
from engine.cfile.encodings import Compression, Encoding


def _values(typ: pa.DataType, n: int, rng: np.random.Generator) -> pa.Array:
    nulls = rng.random(n) < 0.2
    if pa.types.is_integer(typ):
        info = np.iinfo(typ.to_pandas_dtype())
        v = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=np.int64)
        v[: min(n, 3)] = [info.min, info.max, 0][: min(n, 3)]
        return pa.array(v.astype(typ.to_pandas_dtype()), type=typ, mask=nulls)
    if pa.types.is_floating(typ):
        v = rng.normal(size=n).astype(typ.to_pandas_dtype())
        return pa.array(v, type=typ, mask=nulls)
    if pa.types.is_boolean(typ):
        return pa.array(rng.random(n) < 0.5, mask=nulls)
    if typ == pa.binary(16):
        raw = [bytes(rng.integers(0, 256, 16, dtype=np.uint8)) for _ in range(n)]
        return pa.array([None if m else r for r, m in zip(raw, nulls)], type=typ)
    words = [b"", b"\x00", b"a", b"abc\x00", "\u00e9".encode(), b"z" * 70]
    return pa.array([None if m else words[i % len(words)] + bytes([i % 7])
                     for i, m in enumerate(nulls)], type=pa.binary())


PHYSICAL = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(),
            pa.bool_(), pa.binary(), pa.binary(16)]


@pytest.mark.parametrize("typ", PHYSICAL, ids=str)
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
def test_round_trip_every_physical_type(tmp_path, typ, compression):
    rng = np.random.default_rng(7)
    path = str(tmp_path / "f.cf")
    w = CFileWriter(path, fsync=False)
    a = _values(typ, 53, rng)
    b = _values(typ, 8, rng)
    w.add_column("a", a, page_rows=10, compression=compression)
    w.add_column("b", b, page_rows=8)  # exactly one full page
    w.add_column("empty", a.slice(0, 0), page_rows=10)
    size = w.finish({"num_rows": 53, "note": "x"})
    assert os.path.getsize(path) == size
    assert not os.path.exists(path + ".tmp")
    r = CFileReader(path)
    assert r.metadata == {"num_rows": 53, "note": "x"}
    ca = r.column("a")
    assert ca.type == typ and ca.num_rows == 53 and ca.num_pages == 6 and ca.page_rows == 10
    parts = [ca.decode(p) for p in range(ca.num_pages)]
    assert [len(p) for p in parts] == [10, 10, 10, 10, 10, 3]
    assert pa.concat_arrays(parts).equals(a)
    for p in range(ca.num_pages):
        lo, hi = ca.page_range(p)
        assert ca.page_of(lo) == p and ca.page_of(hi - 1) == p
        assert ca.null_counts[p] == a.slice(lo, hi - lo).null_count
        pos = np.array([hi - lo - 1, 0], dtype=np.int64)
        assert ca.gather(p, pos).equals(a.slice(lo, hi - lo).take(pa.array(pos)))
    assert list(ca.page_starts) == [0, 10, 20, 30, 40, 50]
    cb = r.column("b")
    assert cb.num_pages == 1 and cb.decode(0).equals(b)
    ce = r.column("empty")
    assert ce.num_rows == 0 and ce.num_pages == 0
    r.close()


@pytest.mark.parametrize("typ,encoding", [
    (pa.int32(), Encoding.PLAIN), (pa.int32(), Encoding.FOR), (pa.int64(), Encoding.RLE),
    (pa.int16(), Encoding.BIT_SHUFFLE), (pa.binary(), Encoding.DICT),
    (pa.binary(), Encoding.PREFIX), (pa.bool_(), Encoding.RLE),
    (pa.float64(), Encoding.BIT_SHUFFLE)], ids=str)
def test_explicit_encodings(tmp_path, typ, encoding):
    rng = np.random.default_rng(1)
    a = _values(typ, 40, rng)
    path = str(tmp_path / "f.cf")
    w = CFileWriter(path, fsync=False)
    w.add_column("c", a, page_rows=16, encoding=encoding)
    w.finish()
    c = CFileReader(path).column("c")
    assert pa.concat_arrays([c.decode(p) for p in range(c.num_pages)]).equals(a)


def test_page_stats(tmp_path):
    path = str(tmp_path / "f.cf")
    w = CFileWriter(path, fsync=False)
    ints = pa.array([5, 1, None, 9, None, None, None, None, -3, 7], type=pa.int64())
    w.add_column("i", ints, page_rows=4)
    strs = pa.array([b"b", b"a", b"z" * 65, b"c", None, b"\x00"], type=pa.binary())
    w.add_column("s", strs, page_rows=3)
    fl = pa.array([1.5, float("nan"), -2.0], type=pa.float64())
    w.add_column("f", fl, page_rows=3)
    w.add_column("d", pa.array([b"\x01" * 16, None], type=pa.binary(16)), page_rows=4)
    w.add_column("b", pa.array([True, None, True]), page_rows=4)
    w.finish()
    r = CFileReader(path)
    i = r.column("i")
    assert i.stats(0) == (1, 9, 1, 4)
    assert i.stats(1) == (None, None, 4, 4)  # all-null page: no min/max
    assert i.stats(2) == (-3, 7, 0, 2)
    s = r.column("s")
    # a value longer than 64 bytes makes that stat unknown (None), never wrong
    lo, hi, nulls, n = s.stats(0)
    assert lo == b"a" and hi is None and nulls == 0 and n == 3
    assert s.stats(1) == (b"\x00", b"c", 1, 3)
    f = r.column("f")
    lo, hi, _, _ = f.stats(0)
    # NaN must not produce a min/max that excludes the real values
    assert (lo is None or lo <= -2.0) and (hi is None or hi >= 1.5)
    assert r.column("d").stats(0)[:2] == (None, None)
    assert r.column("b").stats(0) == (True, True, 1, 3)


def _sorted_keys(rng, n):
    alphabet = [b"", b"\x00\x01", b"a", b"ab", b"b", b"\xff"]
    keys = set()
    while len(keys) < n:
        keys.add(b"".join(alphabet[j] for j in rng.integers(0, len(alphabet), 3)).rstrip(b"\0")
                 + bytes([int(rng.integers(1, 255))]))
    return sorted(keys)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 60), st.integers(1, 9), st.integers(0, 2 ** 32 - 1))
def test_value_index_find_page(tmp_path_factory, n, page_rows, seed):
    rng = np.random.default_rng(seed)
    keys = _sorted_keys(rng, n)
    path = str(tmp_path_factory.mktemp("vi") / "k.cf")
    w = CFileWriter(path, fsync=False)
    w.add_column("__key", pa.array(keys, type=pa.binary()), page_rows, Encoding.PLAIN,
                 value_index=True)
    w.finish()
    c = CFileReader(path).column("__key")
    assert c.first_values() == [keys[i] for i in range(0, n, page_rows)]
    probes = list(keys) + _sorted_keys(rng, 20) + [b"", b"\xff\xff\xff\xff"]
    for k in probes:
        page = c.find_page(k)
        if k in keys:
            assert page == keys.index(k) // page_rows
            assert k in c.decode(page).to_pylist()
        elif page >= 0:  # a miss may still name the one page whose range covers it
            lo, hi = c.page_range(page)
            assert keys[lo] < k < keys[hi - 1]
    arr = np.array(sorted(set(probes)), dtype=object).astype(bytes)
    want = [c.find_page(bytes(k)) for k in arr]
    assert list(c.pages_for_sorted(arr)) == want


def test_value_index_on_empty_column(tmp_path):
    path = str(tmp_path / "k.cf")
    w = CFileWriter(path, fsync=False)
    w.add_column("__key", pa.array([], type=pa.binary()), 4, value_index=True)
    w.finish()
    c = CFileReader(path).column("__key")
    assert c.find_page(b"a") == -1
    assert list(c.pages_for_sorted(np.array([b"a"], dtype="S1"))) == [-1]


def test_unsupported_type_and_abort(tmp_path):
    path = str(tmp_path / "f.cf")
    w = CFileWriter(path, fsync=False)
    with pytest.raises((errors.InvalidArgument, ValueError)):
        w.add_column("s", pa.array(["x"], type=pa.string()), 4)
    w.abort()
    assert not os.path.exists(path) and not os.path.exists(path + ".tmp")


# -- corruption --------------------------------------------------------------------------------


def _good_file(tmp_path) -> str:
    path = str(tmp_path / "good.cf")
    w = CFileWriter(path, fsync=False)
    w.add_column("i", pa.array(np.arange(100, dtype=np.int64)), 16, Encoding.PLAIN)
    w.add_column("s", pa.array([b"x%d" % i for i in range(100)]), 16, Encoding.PLAIN)
    w.finish({"k": 1})
    return path


def _write(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


def _expect_corruption(path):
    with pytest.raises(errors.Corruption) as ei:
        CFileReader(path)
    assert path in str(ei.value)
    assert ei.value.sqlstate == "XX001"


def test_truncated_and_garbage_files(tmp_path):
    good = open(_good_file(tmp_path), "rb").read()
    _expect_corruption(_write(str(tmp_path / "empty.cf"), b""))
    _expect_corruption(_write(str(tmp_path / "short.cf"), good[-5:]))
    for cut in (1, 11, len(good) // 2, len(good) - 1):
        _expect_corruption(_write(str(tmp_path / f"trunc{cut}.cf"), good[:cut]))
    _expect_corruption(_write(str(tmp_path / "magic.cf"), good[:-8] + b"XXXXXXXX"))
    # footer length pointing before the start of the file
    _expect_corruption(_write(str(tmp_path / "len.cf"),
                              good[:-12] + (10 ** 9).to_bytes(4, "little") + MAGIC))
    # footer bytes that are not JSON
    flen = int.from_bytes(good[-12:-8], "little")
    start = len(good) - 12 - flen
    bad = good[:start] + b"{" * flen + good[-12:]
    _expect_corruption(_write(str(tmp_path / "json.cf"), bad))
    _expect_corruption(str(tmp_path / "does-not-exist.cf"))


def test_corrupt_page_reports_path(tmp_path):
    path = _good_file(tmp_path)
    data = bytearray(open(path, "rb").read())
    r = CFileReader(path)
    c = r.column("s")
    off = c._offsets[1]
    data[off:off + 24] = b"\xee" * 24  # smash the header of page 1 of column s
    bad = _write(str(tmp_path / "badpage.cf"), bytes(data))
    rb = CFileReader(bad)
    assert rb.column("s").decode(0).to_pylist() == [b"x%d" % i for i in range(16)]
    with pytest.raises(errors.Corruption) as ei:
        rb.column("s").decode(1)
    assert bad in str(ei.value) and "s" in str(ei.value)


def _smashed_page_file(tmp_path) -> str:
    path = _good_file(tmp_path)
    data = bytearray(open(path, "rb").read())
    off = CFileReader(path).column("i")._offsets[2]
    data[off:off + 24] = b"\xee" * 24
    return _write(str(tmp_path / "badgather.cf"), bytes(data))


def test_corrupt_page_gather_raises_corruption(tmp_path):
    bad = _smashed_page_file(tmp_path)
    with pytest.raises(errors.Corruption):
        CFileReader(bad).column("i").gather(2, np.array([0, 1]))


def test_corrupt_page_gather_reports_path(tmp_path):
    bad = _smashed_page_file(tmp_path)
    with pytest.raises(errors.Corruption) as ei:
        CFileReader(bad).column("i").gather(2, np.array([0, 1]))
    assert bad in str(ei.value)


def test_flipped_bit_in_page_data_detected(tmp_path):
    path = _good_file(tmp_path)
    data = bytearray(open(path, "rb").read())
    off = CFileReader(path).column("i")._offsets[1]
    data[off + 24 + 8] ^= 0x01  # a value byte of row 17 (PLAIN int64, after the header)
    bad = _write(str(tmp_path / "flip.cf"), bytes(data))
    with pytest.raises(errors.Corruption) as ei:
        CFileReader(bad).column("i").decode(1)
    assert bad in str(ei.value)
