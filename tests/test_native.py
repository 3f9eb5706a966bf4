"""The compiled core against its pure-Python twins (native/__init__.py).

Each kernel is compared with the twin that specifies it on generated inputs (random keys of
every length around the 8-byte word boundaries, trailing NULs, seeds, real bloom filters
of several shapes), and chosen test files are run again in a subprocess with
KUDUSQL_PURE_PYTHON=1, so both implementations stay tested. When the extension is not
built the comparisons are skipped, unless KUDUSQL_REQUIRE_NATIVE=1 (`make test`) makes
that an error: a broken build must not hide behind the fallback."""

from __future__ import annotations

import os
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest

import native
from engine.catalog.partition import bucket_hash_py, bucket_hashes
from engine.cfile.bloom import BloomFilter, hash_key_py, hash_keys

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def kernels():
    if os.environ.get("KUDUSQL_REQUIRE_NATIVE", "") not in ("", "0"):
        mod = native.load("_hashing")
        assert mod is not None, "KUDUSQL_REQUIRE_NATIVE=1 but KUDUSQL_PURE_PYTHON is set"
        return mod
    mod = native.load("_hashing")
    if mod is None:
        pytest.skip("the compiled core is not built (pip install -e . builds it)")
    return mod


def _keys(rng: random.Random, n: int) -> list[bytes]:
    out = [b"", b"\x00", b"\x00" * 9, b"\xff" * 8, b"\xff" * 17]
    for _ in range(n):
        k = bytes(rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
                  for _ in range(rng.choice([0, 1, 7, 8, 9, 15, 16, 17, rng.randrange(64)])))
        if rng.random() < 0.2:
            k += b"\x00" * rng.randrange(1, 10)           # trailing NULs are not the key
        out.append(k)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_hash_key_matches_its_twin(kernels, seed):
    rng = random.Random(seed)
    keys = _keys(rng, 3000)
    for k in keys:
        want = hash_key_py(k)
        assert kernels.hash_key(k) == want, k
        assert kernels.hash_key(bytearray(k)) == want
        assert kernels.hash_key(memoryview(k)) == want
        assert kernels.hash_key(np.bytes_(k)) == want
    # and the vectorised hash of the same keys (the bloom filters' persisted form)
    arr = np.array(keys, dtype=f"S{max(len(k) for k in keys) or 1}")
    assert [kernels.hash_key(k) for k in keys] == hash_keys(arr).tolist()


@pytest.mark.parametrize("seed", range(3))
def test_bucket_hash_matches_its_twin(kernels, seed):
    rng = random.Random(100 + seed)
    keys = _keys(rng, 2000)
    for k in keys:
        s = rng.choice([0, 1, 7, 2 ** 31, 2 ** 32 - 1, 2 ** 64 + 5, -3])
        assert kernels.bucket_hash(k, s) == bucket_hash_py(k, s), (k, s)
    arr = np.array([k.rstrip(b"\x00") for k in keys], dtype="S64")
    assert [kernels.bucket_hash(k, 5) for k in keys] == bucket_hashes(arr, 5).tolist()


@pytest.mark.parametrize("seed", range(3))
def test_bloom_probe_matches_its_twin(kernels, seed):
    rng = random.Random(200 + seed)
    present = _keys(rng, rng.choice([10, 500, 5000]))
    arr = np.array(present, dtype="S64")
    f = BloomFilter.build(hash_keys(arr), fp_rate=rng.choice([0.5, 0.01, 0.0001]))
    again = BloomFilter.from_bytes(f.to_bytes())          # the zero-copy form DiskRowSets use
    probes = [hash_key_py(k) for k in present + _keys(rng, 3000)] + \
        [rng.getrandbits(64) for _ in range(3000)] + [0, 2 ** 64 - 1]
    for h in probes:
        want = f.may_contain_one_py(h)
        assert kernels.bloom_probe(f._mv, f.n_blocks, f.k, h) == want
        assert again.may_contain_one(h) == want
    assert all(f.may_contain_one(hash_key_py(k)) for k in present)   # no false negatives


@pytest.mark.parametrize("seed", range(3))
def test_find_sorted_matches_its_twin(kernels, seed):
    from engine.key_encoding import find_sorted_py
    rng = random.Random(900 + seed)
    for _ in range(300):
        w = rng.choice([1, 2, 7, 8, 9, 16])
        n = rng.choice([0, 1, 2, 5, 100])
        vals = [bytes(rng.choice([0, 1, 0x61, 0xFF, rng.randrange(256)])
                      for _ in range(rng.randrange(w + 1))) for _ in range(n)]
        arr = np.sort(np.array(vals, dtype=f"S{w}"))
        forms = [arr, arr[::2], arr[:0]]
        if rng.random() < 0.2:
            forms.append(np.arange(4))            # not a key array: the twin's answer
        probes = [v.rstrip(b"\x00") for v in vals] + _keys(rng, 20) + [b"", b"\x00"]
        probes += [np.bytes_(b"a"), bytearray(b"a"), 7]
        for a in forms:
            for k in probes:
                want = _either(find_sorted_py, a, k)
                assert _either(kernels.find_sorted, a, k) == want, (a, k)


def test_the_checks_bite(kernels):
    """A twin that differs in one bit is caught (the comparisons above are not vacuous)."""
    k = b"kudusql-key"
    assert kernels.hash_key(k) != hash_key_py(k) ^ 1
    assert kernels.bucket_hash(k, 3) != bucket_hash_py(k, 4)
    arr = np.array([b"a", b"b"], dtype="S2")
    assert kernels.find_sorted(arr, b"b") == 1 and kernels.find_sorted(arr, b"b\x00") == -1


def test_pure_python_twins_pass_the_key_and_partition_tests():
    """The same engine tests with the compiled core switched off."""
    if native.pure_python():
        pytest.skip("already running the pure-Python twins")
    files = ["tests/engine/test_bloom.py", "tests/engine/catalog/test_partition.py",
             "tests/engine/catalog/test_table.py", "tests/sql/test_point_reads.py"]
    files = [f for f in files if (ROOT / f).exists()]
    env = {**os.environ, "KUDUSQL_PURE_PYTHON": "1", "KUDUSQL_REQUIRE_NATIVE": "0"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        *files], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


# -- the wire codec's kernels (native/_wire.pyx; twins in wire/protocol.py) -------------------
@pytest.fixture(scope="module")
def wire_kernels():
    mod = native.load("_wire")
    if mod is None:
        if os.environ.get("KUDUSQL_REQUIRE_NATIVE", "") not in ("", "0"):
            raise AssertionError("KUDUSQL_REQUIRE_NATIVE=1 but native._wire is not loaded")
        pytest.skip("the compiled core is not built (pip install -e . builds it)")
    return mod


def _outcome(fn, *args):
    """A call's result, or its ProtocolViolation as comparable fields."""
    from wire.protocol import ProtocolViolation
    try:
        return ("ok", fn(*args))
    except ProtocolViolation as e:
        return ("violation", e.message, e.sqlstate, e.fatal, e.kind)


def _name(rng: random.Random) -> bytes:
    return rng.choice([b"", b"p", b"stmt_1", "n\u00e4me".encode(), b"\xff\xfe", b"a" * 70])


def _bind_body(rng: random.Random) -> bytes:
    import struct
    nf = rng.choice([0, 1, 2, 3])
    nv = rng.choice([0, 1, 2, 3, 11])
    body = _name(rng) + b"\0" + _name(rng) + b"\0"
    body += struct.pack(f"!h{nf}h", nf, *[rng.choice([0, 1, 2, -1]) for _ in range(nf)])
    body += struct.pack("!h", nv)
    for _ in range(nv):
        v = rng.choice([None, b"", b"42", bytes(rng.randrange(256) for _ in range(9))])
        body += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    nr = rng.choice([0, 1, 2])
    return body + struct.pack(f"!h{nr}h", nr, *[rng.choice([0, 1, 7]) for _ in range(nr)])


def _damaged(rng: random.Random, body: bytes) -> bytes:
    r = rng.random()
    if r < 0.3 or not body:
        return body
    b = bytearray(body)
    if r < 0.5:
        return bytes(b[:rng.randrange(len(b))])                 # truncated
    if r < 0.8:
        for _ in range(rng.randrange(1, 4)):                     # flipped bytes
            b[rng.randrange(len(b))] = rng.choice([0, 0xFF, 0x80, rng.randrange(256)])
        return bytes(b)
    return bytes(b) + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5)))


@pytest.mark.parametrize("seed", range(3))
def test_decode_bind_matches_its_twin(wire_kernels, seed):
    from wire.protocol import decode_bind_py
    rng = random.Random(300 + seed)
    seen = set()
    for _ in range(4000):
        body = _damaged(rng, _bind_body(rng))
        pre, post = bytes(rng.randrange(256) for _ in range(rng.randrange(4))), b"\0\1"
        buf = pre + body + post
        a, b = len(pre), len(pre) + len(body)
        want = _outcome(decode_bind_py, buf, a, b)
        seen.add(want[0] if want[0] == "ok" else want[1:3])
        for form in (buf, bytearray(buf)):
            assert _outcome(wire_kernels.decode_bind, form, a, b) == want, (body, form)
    assert "ok" in seen and len(seen) > 5, seen          # valid and several kinds of error


@pytest.mark.parametrize("seed", range(3))
def test_scan_matches_its_twin(wire_kernels, seed):
    import struct

    from wire.protocol import scan_py
    rng = random.Random(400 + seed)
    for _ in range(4000):
        startup = rng.random() < 0.3
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
        if startup:
            n = rng.choice([len(body) + 4, 0, 7, 8, 10000, 10001, -5])
            frame = struct.pack("!i", n) + body
        else:
            kind = rng.choice(b"QPBDCESHXdcfpFZa\0")
            n = rng.choice([len(body) + 4, 3, 0, 4, 1 << 30, -1, 200])
            frame = bytes([kind]) + struct.pack("!i", n) + body
        pre = bytes(rng.randrange(256) for _ in range(rng.randrange(3)))
        buf = pre + frame[:rng.randrange(len(frame) + 1)] if rng.random() < 0.3 else \
            pre + frame + b"S\0\0\0\4"
        limit = rng.choice([1 << 16, 100, (1 << 30) - 1])
        want = _outcome(scan_py, buf, len(pre), startup, limit)
        for form in (buf, bytearray(buf)):
            assert _outcome(wire_kernels.scan, form, len(pre), startup, limit) == want


def _run_buffer(rng: random.Random) -> tuple:
    """A pipelined run as a driver sends it ([Parse] Bind [Describe P] Execute items of
    one statement), then something that ends it or not (Sync, another statement's Bind,
    a damaged frame, nothing: cut anywhere); and the frames `scan_run` expects."""
    import struct
    portal = rng.choice(["", "p1"])
    stmt = rng.choice(["", "s1"])
    pe, se = portal.encode() + b"\0", stmt.encode() + b"\0"
    parse = b"P" + struct.pack("!i", 4 + len(se) + 9) + se + b"q\0\0\0" if \
        rng.random() < 0.5 else b""
    describe = b"D" + struct.pack("!i", len(pe) + 5) + b"P" + pe
    execute = b"E" + struct.pack("!i", len(pe) + 8) + pe

    def bind(p_name: bytes, s_name: bytes) -> bytes:
        body = _bind_body(rng)
        z = body.index(b"\0")
        z2 = body.index(b"\0", z + 1)
        body = p_name + s_name + body[z2 + 1:]
        return b"B" + struct.pack("!i", len(body) + 4) + body
    out = b""
    for _ in range(rng.randrange(1, 7)):
        if parse and rng.random() < 0.7:
            out += parse
        out += bind(pe, se)
        if rng.random() < 0.5:
            out += describe
        out += execute + struct.pack("!i", rng.choice([0, 1, 5]))
    r = rng.random()
    if r < 0.3:
        out += b"S\0\0\0\4"
    elif r < 0.45:
        out += bind(pe, b"other\0")
    elif r < 0.6:
        out += _damaged(rng, bind(pe, se))
    elif r < 0.75:
        out = out[:rng.randrange(len(out) + 1)]
    return out, portal, stmt, parse, describe, execute


@pytest.mark.parametrize("seed", range(3))
def test_scan_run_matches_its_twin(wire_kernels, seed):
    from wire.protocol import decode_bind_py, scan_run_py
    rng = random.Random(500 + seed)
    seen = set()
    for _ in range(1500):
        buf, portal, stmt, parse, describe, execute = _run_buffer(rng)
        pre = bytes(rng.randrange(256) for _ in range(rng.randrange(3)))
        buf = pre + buf
        base = len(pre)
        fields, bind_end, p = None, 0, base
        if rng.random() < 0.5 and buf.startswith(b"B", base + len(parse)) and parse:
            pass                     # a Parse first: start at the item
        elif rng.random() < 0.5 and buf.startswith(b"B", base):
            try:                     # the first Bind already decoded (fastpath's case)
                end = base + 1 + int.from_bytes(buf[base + 1:base + 5], "big")
                fields, bind_end = decode_bind_py(buf, base + 5, end), end
            except Exception:  # noqa: BLE001 - not decodable: start at the item
                fields = None
        limit = rng.choice([1, 3, 8192])
        outcomes = []
        for fn, form in ((scan_run_py, buf), (wire_kernels.scan_run, buf),
                         (wire_kernels.scan_run, bytearray(buf))):
            items: list = []
            try:
                r = fn(form, p, fields, bind_end, portal, stmt, parse, describe, execute,
                       base, items, limit, 1 << 20)
            except Exception as e:  # noqa: BLE001 - compared
                r = repr(e)
            outcomes.append((r, items))
        assert outcomes[1] == outcomes[0] and outcomes[2] == outcomes[0], buf
        seen.add((outcomes[0][0], len(outcomes[0][1]) > 1))
    assert len(seen) >= 4, seen          # complete and not, with several items and fewer


@pytest.mark.parametrize("seed", range(3))
def test_batch_replies_matches_its_twin(wire_kernels, seed):
    """The replies of a batch's applied items (`batch_replies`): the runs `scan_run`
    finds, with spans cut at an item's end, inside a frame, or past the buffer."""
    from wire.protocol import batch_replies_py
    rng = random.Random(700 + seed)
    replies = (b"1\0\0\0\4", b"2\0\0\0\4", b"n\0\0\0\4", b"C\0\0\0\x0fINSERT 0 1\0")
    seen = set()
    for _ in range(1500):
        buf, *_ = _run_buffer(rng)
        pre = bytes(rng.randrange(256) for _ in range(rng.randrange(3)))
        buf = pre + buf
        p = len(pre)
        end = rng.choice([len(buf), rng.randrange(p, len(buf) + 1), len(buf) + 3])
        outcomes = []
        for fn, form in ((batch_replies_py, buf), (wire_kernels.batch_replies, buf),
                         (wire_kernels.batch_replies, bytearray(buf))):
            try:
                r = fn(form, p, end, *replies)
            except Exception as e:  # noqa: BLE001 - compared
                r = repr(e)
            outcomes.append(r)
        assert outcomes[1] == outcomes[0] and outcomes[2] == outcomes[0], buf
        seen.add(type(outcomes[0]))
    assert seen == {bytes, str}, seen         # spans of whole frames and cut ones


def test_batch_replies_answers_each_frame():
    """One reply per frame, in the frames' order (Parse, Bind, Describe, Execute)."""
    from wire import protocol as P
    frames = [b"P\0\0\0\x08q\0\0\0", b"B\0\0\0\x06xy", b"D\0\0\0\x06P\0",
              b"E\0\0\0\x09\0\0\0\0\0"]
    buf = b"".join(frames[1:]) + b"".join(frames)
    want = b"bndC" + b"pbndC"
    for fn in (P.batch_replies_py, P.batch_replies):
        assert fn(buf, 0, len(buf), b"p", b"b", b"n", b"dC") == want


def _row_cases(rng: random.Random):
    """(row, columns, codes, encoders): a generated one-row result as the point read
    gives it (Python values per column), with the encoders and codes of its column types
    and result formats, and values that do not fit the code (wrong Python type, out of
    the column's range, surrogates) mixed in."""
    import datetime as dt
    import decimal

    import pyarrow as pa

    from wire import pg_types as T
    values = {
        pa.int64(): [0, -1, 2**63 - 1, -2**63, 7, 2**63, -2**63 - 1, True, 1.5],
        pa.int32(): [0, 2**31 - 1, -2**31, 2**31, -2**31 - 1, 123456],
        pa.int16(): [0, 32767, -32768, 32768, -32769, 5],
        pa.int8(): [0, 127, -128, 12],
        pa.float64(): [0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"), 1e300,
                       5e-324, 3],
        pa.float32(): [0.5, 1.25, -3.0],
        pa.string(): ["", "abc", "\u00fcn\u00ef", "x" * 300, "\U0001f600", "\ud800", "a\0b"],
        pa.bool_(): [True, False],
        pa.decimal128(10, 2): [decimal.Decimal("12.50"), decimal.Decimal("-0.01")],
        pa.date32(): [dt.date(2024, 2, 29), dt.date(1, 1, 1)],
        pa.timestamp("us"): [dt.datetime(2001, 1, 1, 0, 0, 0, 5)],
        pa.binary(): [b"", b"\x00\xff"],
    }
    types = list(values)
    n = rng.choice([0, 1, 2, 3, 5, 11, 64, 65, 70])
    row, columns, codes, encoders = {}, [], [], []
    for i in range(n):
        t = rng.choice(types)
        fmt = rng.choice([0, 1])
        col = f"c{i}"
        columns.append(col)
        codes.append(T.value_code(t, fmt))
        encoders.append(T.value_encoder(t, fmt))
        r = rng.random()
        row[col] = None if r < 0.15 else rng.choice(values[t])
    if columns and rng.random() < 0.2:         # a repeated column
        columns.append(columns[0])
        codes.append(codes[0])
        encoders.append(encoders[0])
    return row, tuple(columns), tuple(codes), tuple(encoders)


def _row_outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - compared: the same error type and message
        return ("error", type(e).__name__, str(e))


@pytest.mark.parametrize("seed", range(3))
def test_data_row_matches_its_twin(wire_kernels, seed):
    """The compiled DataRow encoder gives its twin's bytes or its twin's error for every
    generated row; and for rows of plain values, the bytes of the ordinary path's encoder
    of a one-row Arrow batch (`data_rows`)."""
    import pyarrow as pa

    from wire import pg_types as T
    rng = random.Random(700 + seed)
    seen = set()
    for _ in range(3000):
        row, columns, codes, encoders = _row_cases(rng)
        want = _row_outcome(T.data_row_py, row, columns, codes, encoders)
        got = _row_outcome(wire_kernels.data_row, row, columns, codes, encoders)
        assert got == want, (row, columns, codes)
        seen.add((want[0], len(columns) > 64))
    assert seen >= {("ok", False), ("ok", True), ("error", False)}, seen
    # against the batch encoder, on columns of exactly their Arrow type
    cols = {"a": pa.array([5], pa.int64()), "b": pa.array(["h\u00e9"], pa.string()),
            "c": pa.array([-7], pa.int32()), "d": pa.array([2.5], pa.float64()),
            "e": pa.array([None], pa.int16()), "f": pa.array([-3], pa.int16())}
    batch = pa.record_batch(list(cols.values()), names=list(cols))
    row = {k: v[0].as_py() for k, v in cols.items()}
    for fmt in (0, 1):
        encs = [T.value_encoder(a.type, fmt) for a in cols.values()]
        codes = [T.value_code(a.type, fmt) for a in cols.values()]
        assert wire_kernels.data_row(row, list(cols), codes, encs) == T.join_rows(
            T.encode_columns(batch, [fmt] * len(cols)), b"D", True)


def _numeric_value(rng: random.Random):
    """A binary NUMERIC as a driver sends it, or near misses: digits past 9999, padding
    that is not zero, more than 8 digits, special signs, wrong lengths, not bytes."""
    import struct
    r = rng.random()
    if r < 0.05:
        return None
    if r < 0.08:
        return rng.choice([b"", b"\0\0", bytearray(b"\0" * 8), "12"])
    nd = rng.choice([0, 1, 2, 3, 4, 8, 9])
    weight = rng.randrange(-6, 12)
    sign = rng.choice([0, 0x4000, 0x4000, 0, 0xC000, 0xD000, 0xF000, 0x1234])
    dscale = rng.choice([0, 1, 2, 3, 4, 5, 8, 20, -1, -3, 0x3FFF])
    digits = [rng.choice([0, 1, 9999, 10000, 65535, rng.randrange(10000)]) if
              rng.random() < 0.1 else rng.randrange(10000) for _ in range(nd)]
    b = struct.pack("!hhHh", nd, weight, sign, dscale) + struct.pack(f"!{nd}H", *digits)
    if rng.random() < 0.05:
        b = b[:rng.randrange(len(b) + 1)] if rng.random() < 0.5 else b + b"\0"
    return b


@pytest.mark.parametrize("seed", range(3))
def test_numeric_column_matches_its_twin(wire_kernels, seed):
    """The compiled NUMERIC column decoder appends the twin's Decimals (value, sign and
    exponent: compared as their text and tuple) and raises the twin's error at the same
    value, having appended the same ones before it."""
    from wire.params import numeric_column_py
    rng = random.Random(900 + seed)
    seen = set()
    for _ in range(2000):
        raw = [_numeric_value(rng) for _ in range(rng.choice([1, 3, 10]))]
        outs = []
        for fn in (numeric_column_py, wire_kernels.numeric_column):
            out = []
            try:
                fn(raw, out)
                err = None
            except Exception as e:  # noqa: BLE001 - compared: type and message
                err = (type(e).__name__, str(e), getattr(e, "sqlstate", None))
            outs.append(([None if d is None else (str(d), d.as_tuple()) for d in out], err))
        assert outs[1] == outs[0], raw
        seen.add(outs[0][1] is None)
    assert seen == {True, False}


_S64 = __import__("struct").Struct("!q")


def test_wire_checks_bite(wire_kernels):
    """A kernel off by one is caught: its frame end is not the twin's."""
    from wire.protocol import scan_py
    buf = b"S\0\0\0\4Q\0\0\0\5\0"
    assert wire_kernels.scan(buf, 0, False, 100) == scan_py(buf, 0, False, 100)
    assert wire_kernels.scan(buf, 0, False, 100) != (83, 5, 6)
    # a DataRow kernel that wrote its ints little-endian would differ from the twin
    from wire.pg_types import data_row_py
    row = {"a": 1}
    assert wire_kernels.data_row(row, ("a",), (2,), (_S64.pack,)) == data_row_py(
        row, ("a",), (2,), (_S64.pack,))
    assert wire_kernels.data_row(row, ("a",), (2,), (_S64.pack,))[-8:] != (1).to_bytes(
        8, "little")


def test_pure_python_twins_pass_the_wire_tests():
    """The wire's codec, hot cases and stream-splitting tests with the kernels off."""
    if native.pure_python():
        pytest.skip("already running the pure-Python twins")
    files = ["tests/wire/test_protocol.py", "tests/wire/test_split_stream.py",
             "tests/wire/test_fastpath.py", "tests/wire/test_pipelined_batch.py",
             "tests/wire/test_fastpath_writes.py"]
    env = {**os.environ, "KUDUSQL_PURE_PYTHON": "1", "KUDUSQL_REQUIRE_NATIVE": "0"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        *files], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


# -- the small write's byte formats (native/_write.pyx; twins in engine/tablet/write_op.py
# and engine/consensus/log.py) -----------------------------------------------------------------
@pytest.fixture(scope="module")
def write_kernels():
    mod = native.load("_write")
    if mod is None:
        if os.environ.get("KUDUSQL_REQUIRE_NATIVE", "") not in ("", "0"):
            raise AssertionError("KUDUSQL_REQUIRE_NATIVE=1 but native._write is not loaded")
        pytest.skip("the compiled core is not built (pip install -e . builds it)")
    return mod


def _either(fn, *args):
    """A call's result, or its exception as (type, text)."""
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - the twin's errors are part of its answer
        return ("error", type(e), str(e))


def _small_value(rng: random.Random):
    import datetime as dt
    import decimal
    return rng.choice([
        None, 0, 1, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 63, -2 ** 63 - 1, 2 ** 70,
        rng.randrange(-2 ** 63, 2 ** 63), rng.randrange(-300, 300), True, False,
        0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"), rng.random() * 1e300,
        "", "value-7", "n\u00e4me \u20ac \U0001f600", "x" * rng.randrange(300), "\ud800",
        b"", b"\x00\xff", bytes(rng.randrange(256) for _ in range(rng.randrange(40))),
        dt.date(2024, 2, 29), dt.datetime(2001, 1, 2, 3, 4, 5, 6),
        decimal.Decimal("12.50"), np.int64(5), np.float64(2.5), bytearray(b"ab"), [1]])


@pytest.mark.parametrize("seed", range(3))
def test_encode_small_matches_its_twin(write_kernels, seed):
    from engine.tablet.write_op import OpType, encode_small_head, encode_small_py
    rng = random.Random(700 + seed)
    for _ in range(1500):
        ncols = rng.choice([1, 2, 3, 5, 9])
        nrows = rng.choice([1, 1, 2, 8, 9])
        cols = [f"c{j}" for j in range(ncols)]
        ops = [rng.choice([1, 2, 3, 5, 257, -1]) for _ in range(nrows)]
        if rng.random() < 0.1:
            ops[0] = rng.choice([OpType.UPDATE, 2 ** 70, np.int8(1)])
        if rng.random() < 0.1:
            ops = tuple(ops)
        plain = rng.random() < 0.5     # the common case: every value one the kernel takes
        rows = []
        for _ in range(nrows):
            row = [rng.choice([None, 7, -2 ** 63, 1.25, "s\u00e4", b"b", True])
                   if plain else _small_value(rng) for _ in range(ncols)]
            if rng.random() < 0.05:
                row.append(1)                          # a row of the wrong length
            rows.append(tuple(row) if rng.random() < 0.5 else row)
        head = encode_small_head(cols) if rng.random() < 0.95 else None
        want = _either(encode_small_py, ops, cols, rows, head)
        assert _either(write_kernels.encode_small, ops, cols, rows, head) == want, \
            (ops, rows)


@pytest.mark.parametrize("seed", range(3))
def test_wal_record_matches_its_twin(write_kernels, seed):
    from engine.consensus.log import WRITE, LogEntry, wal_record_py
    rng = random.Random(800 + seed)
    for _ in range(1000):
        index = rng.choice([0, 1, rng.randrange(2 ** 40), 2 ** 64 - 1, 2 ** 64, -1, True])
        ts = rng.choice([0, rng.randrange(2 ** 64), 2 ** 64 - 1, 2 ** 64, -5])
        body = rng.randbytes(rng.choice([0, 1, 33, 200, 3000]))
        if rng.random() < 0.05:
            body = bytearray(body)
        want = _either(wal_record_py, index, ts, body)
        assert _either(write_kernels.wal_record, index, ts, body) == want, (index, ts)
        if want[0] == "ok" and type(index) is int:
            assert want[1] == LogEntry(0, index, ts, WRITE, bytes(body)).encode()


def test_write_checks_bite(write_kernels):
    """A kernel that wrote its ints big-endian, or framed a record with another type, is
    caught by the comparisons above."""
    from engine.consensus.log import wal_record_py
    from engine.tablet.write_op import encode_small_head, encode_small_py
    head = encode_small_head(["k"])
    got = write_kernels.encode_small([2], ["k"], [(1,)], head)
    assert got == encode_small_py([2], ["k"], [(1,)], head)
    assert got[-8:] != (1).to_bytes(8, "big")
    rec = write_kernels.wal_record(5, 6, b"body")
    assert rec == wal_record_py(5, 6, b"body") and rec[32] == 1


def test_pure_python_twins_pass_the_small_write_tests():
    """The small write tests (and with KUDUSQL_LONG=1 the WAL's) with the compiled core
    switched off: `encode_small_py` and `wal_record_py` in use, as on a machine without
    the extension."""
    if native.pure_python():
        pytest.skip("already running the pure-Python twins")
    files = ["tests/engine/test_small_write.py"]
    if os.environ.get("KUDUSQL_LONG") == "1":
        files.append("tests/engine/test_wal.py")
    env = {**os.environ, "KUDUSQL_PURE_PYTHON": "1", "KUDUSQL_REQUIRE_NATIVE": "0"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        *files], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
