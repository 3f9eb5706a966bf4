"""The small-write path (engine/tablet/small_write.py) against the general path.

Model-based / differential: random sequences of small ops (every op type, repeated and
absent keys, NULLs, defaults, values of every eligible type and some that are not:
wrong types, out of range, too long, a float32 column) go to two tablets, one through
`Tablet.write_small` (small path when eligible), one through the general `Tablet.write`;
flushes and compactions run at the same points on both. Every op must give the same
result (applied count, row errors with index, code, message and key), every state the
same rows, and so must both tablets reopened from their WALs (compact records replayed
through the general `apply`). The compact WAL body round-trips and old Arrow bodies stay
readable.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import random

import numpy as np
import pyarrow as pa
import pytest

from engine.config import TabletConfig
from engine.schema import ColumnSchema, Schema
from engine.tablet import Tablet
from engine.tablet.small_write import SMALL_MAX_ROWS
from engine.tablet.write_op import (
    COMPACT_TAG,
    OpType,
    WriteOp,
    decode_write,
    encode_small,
)
from engine.types import DataType

CFG = TabletConfig(page_rows=8, drs_target_bytes=2048, fsync=False, wal_sync="never")
OPS = [OpType.INSERT, OpType.INSERT, OpType.UPDATE, OpType.DELETE, OpType.UPSERT]


def C(name, typ, **kw):
    return ColumnSchema(name, typ, **kw)


def schema() -> Schema:
    return Schema([
        C("k1", DataType.INT32, nullable=False), C("k2", DataType.STRING, nullable=False),
        C("v", DataType.INT64), C("n", DataType.INT16, nullable=False, default=7),
        C("d", DataType.DOUBLE), C("vc", DataType.VARCHAR, length=4),
        C("dt", DataType.DATE), C("ts", DataType.TIMESTAMP),
        C("dec", DataType.DECIMAL, precision=9, scale=2), C("b", DataType.BOOL),
        C("bin", DataType.BINARY), C("f", DataType.FLOAT),
    ], key=["k1", "k2"])


def value(rng: random.Random, name: str):
    """Mostly eligible values, sometimes not (the general path must then take the op)."""
    r = rng.random()
    if r < 0.1:
        return None
    odd = r < 0.13
    match name:
        case "v":
            return rng.choice(["12", 1.5, 2**70, True]) if odd else rng.randint(-5, 5)
        case "n":
            return rng.choice([40000, "3"]) if odd else rng.randint(-3, 3)
        case "d":
            return rng.choice([3, "x"]) if odd else rng.choice([0.5, -1.25, 1e300])
        case "vc":
            return rng.choice(["toolong", b"ab"]) if odd else rng.choice(["", "ab", "\u00e9\u20ac"])
        case "dt":
            return "2020-01-01" if odd else dt.date(2000, 1, 1) + dt.timedelta(rng.randint(0, 9))
        case "ts":
            if odd:
                return dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
            return dt.datetime(2020, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**9))
        case "dec":
            if odd:
                return rng.choice([decimal.Decimal("1.234"), decimal.Decimal("1e10"), 2])
            return decimal.Decimal(rng.randint(-999, 999)).scaleb(-rng.randint(0, 2))
        case "b":
            return 1 if odd else rng.random() < 0.5
        case "bin":
            return "s" if odd else rng.choice([b"", b"\x00\x01", b"xyz"])
        case "f":
            return 0.5
    raise AssertionError(name)


def random_op(rng: random.Random, names: list[str]):
    n = rng.randint(1, SMALL_MAX_ROWS if rng.random() < 0.2 else 2)
    op = rng.choice(OPS)
    ops = [op if rng.random() < 0.8 else rng.choice(OPS) for _ in range(n)]
    cols = ["k1", "k2"] + [c for c in names if rng.random() < (0.03 if c == "f" else 0.3)]
    rows = []
    for _ in range(n):
        k1 = rng.randint(0, 12) if rng.random() > 0.02 else rng.choice([None, "7"])
        row = [k1, rng.choice(["a", "b\x00", ""])]
        row += [value(rng, c) for c in cols[2:]]
        rows.append(tuple(row))
    return ops, cols, rows


def state(t: Tablet, snapshot=None) -> list:
    rows = t.scan_table(snapshot=snapshot).to_pylist()
    return sorted(rows, key=lambda r: (r["k1"], r["k2"]))


def lookups(t: Tablet, keys, snapshot=None, columns=None) -> list:
    return [t.lookup(k, columns, snapshot=snapshot) for k in keys]


def result(r) -> tuple:
    return r.num_applied, [(e.index, e.code, e.message, e.key) for e in r.row_errors]


def general(t: Tablet, ops, cols, rows):
    return t.write([int(o) for o in ops], {c: [r[j] for r in rows] for j, c in enumerate(cols)})


def small_write(t: Tablet, ops, cols, rows):
    """`Tablet.write_small`, or for a one-row op `Tablet.write_one` (what a Table's
    single-row write calls), falling back to the general path as `Table` does."""
    if len(rows) == 1:
        fin = t.write_one(int(ops[0]), tuple(cols), rows[0], None)
        return general(t, ops, cols, rows) if fin is None else fin()
    return t.write_small([int(o) for o in ops], cols, rows)


def run(tmp_path, seed: int, steps: int) -> int:
    rng = random.Random(seed)
    sch = schema()
    names = [c.name for c in sch.columns if c.name not in ("k1", "k2")]
    a = Tablet.create(str(tmp_path / "small"), sch, CFG)
    b = Tablet.create(str(tmp_path / "general"), sch, CFG)
    small = 0
    stamps: list[tuple[int, int]] = []    # each op's timestamp on a and on b
    keys: set = set()
    try:
        for step in range(steps):
            ops, cols, rows = random_op(rng, names)
            ra = small_write(a, ops, cols, rows)
            rb = general(b, ops, cols, rows)
            assert result(ra) == result(rb), (seed, step, ops, cols, rows)
            stamps.append((ra.timestamp, rb.timestamp))
            # point lookups of the op's keys now, and of some keys at an older snapshot
            # (the state after an earlier op): the stores' row records (single-row
            # writes as plain values) must answer as the general path's Arrow records
            mine = [r[:2] for r in rows if r[0] is not None and r[1] is not None]
            keys.update(k for k in mine if type(k[0]) is int and type(k[1]) is str)
            mine = [k for k in mine if k in keys]
            assert lookups(a, mine) == lookups(b, mine), (seed, step, "lookup")
            some = rng.sample(sorted(keys), min(4, len(keys)))
            sa, sb = stamps[rng.randrange(len(stamps))]
            cols_ = rng.choice([None, ["v"], ["n", "vc", "k2"]])
            assert lookups(a, some, sa, cols_) == lookups(b, some, sb, cols_), \
                (seed, step, "old lookup")
            if step % 20 == 0:
                assert state(a, sa) == state(b, sb), (seed, step, "old snapshot")
            r = rng.random()
            if r < 0.04:
                a.flush_mrs(), b.flush_mrs()
            elif r < 0.07:
                a.flush_dms(), b.flush_dms()
            elif r < 0.08 and a.num_rowsets() > 1:
                a.compact_rowsets([x["id"] for x in a.rowsets_info()])
                b.compact_rowsets([x["id"] for x in b.rowsets_info()])
            if step % 25 == 0 or step == steps - 1:
                assert state(a) == state(b), (seed, step)
            if step == steps // 2 or step == steps - 1:      # replay both WALs
                small += a.small_writes
                a.close(), b.close()
                a = Tablet.open(a.path, CFG)
                b = Tablet.open(b.path, CFG)
                assert state(a) == state(b), (seed, step, "after reopen")
        return small
    finally:
        a.close(), b.close()


@pytest.mark.parametrize("seed", range(3))
def test_small_path_matches_general_path(tmp_path, seed):
    small = run(tmp_path, seed, 120)
    assert small > 40, "the small path was hardly taken: the test would not bite"


def test_small_ops_are_logged_compact_and_replayed(tmp_path):
    sch = schema()
    t = Tablet.create(str(tmp_path / "t"), sch, CFG)
    r = t.write_small([OpType.INSERT], ["k1", "k2", "v", "dec"],
                      [(1, "a", 5, decimal.Decimal("1.5"))])
    assert r.ok and t.small_writes == 1
    bodies = [e.body for e in t.log.read_range(1, t.log.last_index)]
    assert bodies[-1].startswith(COMPACT_TAG)
    t.close()
    t = Tablet.open(t.path, CFG)
    assert t.replayed_ops == 1
    assert t.lookup([1, "a"], ["v", "n", "dec"]) == {"v": 5, "n": 7,
                                                      "dec": decimal.Decimal("1.50")}
    t.close()


def test_compact_body_round_trip_and_old_bodies():
    vals = [(1, -2.5, "h\u00e9", b"\x00", True, dt.date(1969, 12, 31),
             dt.datetime(1900, 1, 1, 0, 0, 0, 1), decimal.Decimal("-0.05"), None)]
    cols = [f"c{i}" for i in range(9)]
    ops, table = decode_write(encode_small([OpType.UPSERT], cols, vals))
    assert ops.tolist() == [int(OpType.UPSERT)]
    assert [tuple(r.values()) for r in table.to_pylist()] == vals
    with pytest.raises((TypeError, ValueError)):
        encode_small([1], ["a"], [(np.int64(1),)])
    with pytest.raises((TypeError, ValueError)):
        encode_small([1], ["a"], [(2**64,)])
    # an Arrow body (every record written before the compact one existed) still decodes
    old = WriteOp(np.array([1, 3], dtype=np.int8), pa.table({"k": [1, 2], "s": ["x", None]}))
    ops, table = decode_write(old.encode())
    assert ops.tolist() == [1, 3] and table.equals(old.rows)


def test_checker_bites(tmp_path, monkeypatch):
    """Break the small path on purpose (an UPDATE of a live row reported NOT_FOUND
    would be one line wrong in apply_small): the differential run must notice."""
    from engine.tablet import small_write

    real = small_write.apply_small

    def broken(comps, layout, rows, ts):
        applied, bad = real(comps, layout, rows, ts)
        for i, op in enumerate(rows.ops):
            if op == int(OpType.UPDATE) and i not in bad:
                bad[i] = ("NOT_FOUND", "key not found")
                applied -= 1
        return applied, bad
    monkeypatch.setattr("engine.tablet.tablet_write.apply_small", broken)
    with pytest.raises(AssertionError):
        run(tmp_path, 0, 120)


def test_ineligible_ops_take_the_general_path(tmp_path):
    sch = schema()
    t = Tablet.create(str(tmp_path / "t"), sch, CFG)
    cases = [
        ([OpType.INSERT], ["k1", "k2", "v"], [(1, "a", "5")]),          # str for BIGINT
        ([OpType.INSERT], ["k1", "k2", "n"], [(1, "a", None)]),          # NULL, NOT NULL
        ([OpType.INSERT] * 2, ["k1", "k2"], [(1, "a"), (1, "a")]),       # repeated key
        ([OpType.INSERT], ["k1", "k2", "f"], [(1, "a", 0.5)]),           # float32
        ([OpType.INSERT] * (SMALL_MAX_ROWS + 1), ["k1", "k2"],
         [(i, "a") for i in range(SMALL_MAX_ROWS + 1)]),                 # too many rows
    ]
    for ops, cols, rows in cases:
        assert t.prepare_small([int(o) for o in ops], cols, rows) is None
        if len(rows) == 1:
            assert t.write_one(int(ops[0]), tuple(cols), rows[0], None) is None
    assert t.small_writes == 0
    t.close()
