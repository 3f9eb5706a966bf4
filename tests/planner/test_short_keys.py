"""Short text GROUP BY keys hashed as int64 codes (planner/executor/kernels.pack_short,
used by the hash aggregation in executor/aggregates.py) and count(x) over x's validity only
(kernels.validity_only): the codes against the values they encode, and queries over random
text (empty strings, NULLs, multi-byte UTF-8, values one byte past what a code holds)
answering as DuckDB does - with the default morsels and many small ones, through the
fallback that aggregates again without codes when a later morsel holds a longer value."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

import kudusql
from planner import guard
from planner.executor import aggregates, kernels
from tests.planner.duck_match import same_answers

duckdb = pytest.importorskip("duckdb")

ALPHABET = ["a", "b", "Z", " ", "0", "é", "€", "\x7f", "ß"]


def _word(r: random.Random, max_bytes: int) -> str:
    """A random text of at most `max_bytes` UTF-8 bytes (0 included)."""
    out = ""
    for _ in range(r.randrange(0, max_bytes + 1)):
        c = r.choice(ALPHABET)
        if len((out + c).encode()) > max_bytes:
            break
        out += c
    return out


@pytest.fixture(autouse=True)
def packing_on(monkeypatch):
    """Packing is off by default (aggregates.PACK_SHORT_KEYS): these tests run it."""
    monkeypatch.setattr(aggregates, "PACK_SHORT_KEYS", True)


# -- the kernels ---------------------------------------------------------------------------
@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.binary(),
                                 pa.large_binary()])
def test_codes_round_trip_and_are_equal_exactly_when_the_values_are(typ):
    r = random.Random(3)
    for trial in range(30):
        n = r.randrange(1, 400)
        fixed = trial % 3 == 0      # all one width (the one-block path), else mixed widths
        width = r.randrange(0, kernels.SHORT_BYTES + 1)
        vals = []
        for _ in range(n):
            if r.random() < 0.1:
                vals.append(None)
            elif fixed:
                vals.append("".join(r.choice("abcXYZ09") for _ in range(width)))
            else:
                vals.append(_word(r, kernels.SHORT_BYTES))
        if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
            vals = [None if v is None else v.encode() for v in vals]
        arr = pa.array(vals, typ)
        start = r.randrange(0, n)
        a = arr.slice(start) if trial % 2 else pa.chunked_array([arr.slice(start)])
        codes = kernels.pack_short(a)
        assert codes is not None and codes.type == pa.int64()
        want = vals[start:]
        assert kernels.unpack_short(codes, typ).to_pylist() == want
        got = codes.to_pylist()
        assert [c is None for c in got] == [v is None for v in want]
        seen: dict = {}
        for c, v in zip(got, want):
            if v is not None:
                assert seen.setdefault(c, v) == v, (c, v)     # one value per code
        assert len(set(seen.values())) == len(seen)           # one code per value


def test_a_value_one_byte_too_long_is_refused_but_a_null_slot_is_not():
    assert kernels.pack_short(pa.array(["abcdefg", "x"])) is not None
    assert kernels.pack_short(pa.array(["abcdefgh", "x"])) is None
    assert kernels.pack_short(pa.array(["é" * 4])) is None            # 8 bytes, 4 chars
    # a NULL slot whose offsets span 9 bytes (Arrow leaves them undefined)
    data = pa.py_buffer(b"abcdefghi" + b"xy")
    offsets = pa.py_buffer(np.array([0, 9, 11], np.int32).tobytes())
    validity = pa.array([False, True]).buffers()[1]
    a = pa.Array.from_buffers(pa.string(), 2, [validity, offsets, data], null_count=1)
    codes = kernels.pack_short(a)
    assert codes is not None
    assert kernels.unpack_short(codes, pa.string()).to_pylist() == [None, "xy"]


def test_the_high_bytes_of_a_full_code_survive():
    vals = ["ééé\x7f", "\x7féé\x7f", "€€a", "ÿÿÿa"]       # 7 bytes each, top bits set
    codes = kernels.pack_short(pa.array(vals))
    assert len(set(codes.to_pylist())) == 4
    assert kernels.unpack_short(codes, pa.string()).to_pylist() == vals


@pytest.mark.parametrize("width", range(kernels.SHORT_BYTES + 1))
def test_fixed_width_codes_written_in_place_equal_the_shifted_ones(width, monkeypatch):
    r = random.Random(width)
    vals = ["".join(r.choice("aZ\x7f0") for _ in range(width)) if r.random() > 0.1 else None
            for _ in range(300)]
    in_place = kernels.pack_short(pa.array(vals))
    monkeypatch.setattr(kernels, "_LITTLE_ENDIAN", False)
    assert kernels.pack_short(pa.array(vals)).equals(in_place)
    assert kernels.unpack_short(in_place, pa.string()).to_pylist() == vals


def test_validity_only_keeps_the_nulls_and_nothing_else():
    for a in (pa.array([1, None, 3]), pa.chunked_array([[None], [2, None]], pa.int64()),
              pa.array([1, 2, 3]), pa.nulls(4), pa.array([], pa.int64()),
              pa.array(np.arange(300_000))):
        v = kernels.validity_only(a)
        assert v.type == pa.bool_() and len(v) == len(a)
        assert v.is_valid().to_pylist() == a.is_valid().to_pylist()


# -- queries against DuckDB ----------------------------------------------------------------
N = 4000
LONG_FROM = 3000        # s2 holds values of 8+ bytes only from this id on


def _rows(seed: int) -> list[tuple]:
    r = random.Random(seed)
    rows = []
    for i in range(N):
        s1 = None if r.random() < 0.07 else r.choice(["A", "N", "R", "", "é", "AB"])
        if r.random() < 0.05:
            s2 = None
        elif i >= LONG_FROM and r.random() < 0.3:
            s2 = r.choice(["abcdefgh", "abcdefg" + "é", "TRUCK AND RAIL"])
        else:
            s2 = _word(r, kernels.SHORT_BYTES)
        v = None if r.random() < 0.1 else r.randrange(-1000, 1000)
        d = None if r.random() < 0.1 else f"{r.randrange(-99999, 99999) / 100:.2f}"
        rows.append((i, s1, s2, v, d))
    return rows


def _lit(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    con = kudusql.connect(str(tmp_path_factory.mktemp("short_keys")))
    duck = duckdb.connect()
    cur = con.cursor()
    cols = "id INT NOT NULL, s1 VARCHAR, s2 VARCHAR, v INT, d DECIMAL(12,2)"
    cur.execute(f"CREATE TABLE t ({cols}, PRIMARY KEY (id)) PARTITION BY HASH (id) "
                "PARTITIONS 2")
    duck.execute(f"CREATE TABLE t ({cols})")
    rows = _rows(11)
    for i in range(0, len(rows), 500):
        values = ", ".join("(" + ", ".join(_lit(x) for x in row) + ")"
                           for row in rows[i:i + 500])
        cur.execute(f"INSERT INTO t VALUES {values}")
        duck.execute(f"INSERT INTO t VALUES {values}")
    yield con, duck
    con.close()
    duck.close()


PACKED = [
    "SELECT s1, count(*), count(v), sum(v), avg(d), count(d) FROM t GROUP BY s1",
    "SELECT s1, v % 3, count(*), min(s1), max(d) FROM t GROUP BY s1, v % 3",
    "SELECT s1 || 'x', count(DISTINCT v) FROM t GROUP BY s1 || 'x'",
    "SELECT s2, count(*) FROM t WHERE id < 3000 GROUP BY s2",
    "SELECT s1, s2, sum(d) FROM t WHERE id < 3000 GROUP BY s1, s2 HAVING count(*) > 0",
]
# s2 holds longer values only after the first morsels: aggregated again without codes
LONGER_LATER = [
    "SELECT s2, count(*), count(v), avg(v) FROM t GROUP BY s2",
    "SELECT s1, s2, sum(d), count(d) FROM t GROUP BY s1, s2",
]
# not over a scan (a join's output): the whole input, in morsels
OVER_A_JOIN = [
    "SELECT a.s1, b.s2, count(*), count(b.v) FROM t a JOIN t b ON a.id = b.id + 1 "
    "GROUP BY a.s1, b.s2",
    "SELECT a.s2, sum(b.d) FROM t a JOIN t b ON a.id = b.id GROUP BY a.s2",
]
QUERIES = PACKED + LONGER_LATER + OVER_A_JOIN


@pytest.fixture
def counted(monkeypatch):
    """Counts morsels whose keys went as codes, LongKeys raised (by each scan thread that
    met a longer value: prepare runs on the scan's threads, PrepareInScan) and the
    streamed inputs read (a redo reads the input again)."""
    calls = {"packed": 0, "long": 0, "streams": 0}
    pack = kernels.pack_short

    def spy_pack(a):
        codes = pack(a)
        if codes is not None:
            calls["packed"] += 1
        return codes

    def spy_long(self):
        calls["long"] += 1
        Exception.__init__(self)
        self.split = False
    streamed = aggregates.AggregateOperators._streamed

    def spy_streamed(self, node):
        calls["streams"] += 1
        return streamed(self, node)
    monkeypatch.setattr(aggregates, "pack_short", spy_pack)
    monkeypatch.setattr(aggregates.LongKeys, "__init__", spy_long)
    monkeypatch.setattr(aggregates.AggregateOperators, "_streamed", spy_streamed)
    return calls


@pytest.mark.parametrize("sql", QUERIES)
def test_with_the_default_morsels(dbs, sql):
    same_answers(*dbs, sql)


@pytest.mark.parametrize("sql", QUERIES)
def test_over_many_morsels(dbs, sql, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)
    same_answers(*dbs, sql)


@pytest.mark.parametrize("sql", PACKED)
def test_short_keys_are_hashed_as_codes(dbs, sql, counted, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)
    same_answers(*dbs, sql)
    assert counted["packed"] and not counted["long"]


@pytest.mark.parametrize("sql", LONGER_LATER)
def test_a_longer_value_later_redoes_the_aggregation_without_codes(dbs, sql, counted,
                                                                   monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)
    same_answers(*dbs, sql)
    # redone once: the input read twice (both scan threads may meet a longer value)
    assert counted["packed"] and counted["long"] >= 1 and counted["streams"] == 2


def test_explain_analyze_says_the_input_was_read_again(dbs, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)
    con, _ = dbs
    cur = con.cursor()
    cur.execute("EXPLAIN ANALYZE " + LONGER_LATER[0])
    text = "\n".join(r[0] for r in cur.fetchall())
    assert "a text key longer than its int64 code" in text, text
    scan = next(line for line in text.splitlines() if "Scan t" in line)
    assert f"rows={N} " in scan, text


def test_morsels_of_differing_decimal_types_join_into_one_that_holds_all():
    """avg(int) types each morsel by its own values: joined, no value may be cut (it was
    'Decimal value does not fit in precision 23', an internal error, with avg(v) over
    more groups than a morsel)."""
    import decimal as _d
    parts = [pa.array([_d.Decimal("1.2345678901234567")], pa.decimal128(17, 16)),
             pa.array([_d.Decimal("123456789")], pa.decimal128(9, 0)),
             pa.nulls(1, pa.null())]
    got = kernels.join_parts(parts)
    assert got.type == pa.decimal128(25, 16)
    assert got.to_pylist() == [_d.Decimal("1.2345678901234567"), _d.Decimal("123456789"),
                               None]
