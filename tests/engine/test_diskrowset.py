"""DiskRowSet (engine/tablet/diskrowset.py): key lookups, rowid ranges, delta stores, ghosts
of deleted-then-reinserted keys, lazy materialization and persistence.

Mostly driven through the Tablet (which writes the rowsets), reaching into its DiskRowSets
for the per-rowset contracts (find_key / find_keys / rowid_range / delta_stats).
"""

from __future__ import annotations

import bisect
import os
import random

import pyarrow as pa
import pytest

from engine import errors
from engine.clock import LogicalClock
from engine.key_encoding import encode_key, encode_keys
from engine.schema import ColumnSchema, Schema
from engine.tablet import ColumnPredicate, ScanStats, Tablet, TabletConfig
from engine.tablet.mvcc import MvccSnapshot
from engine.types import DataType

P = ColumnPredicate
CFG = TabletConfig(page_rows=4, drs_target_bytes=300, fsync=False)


def C(name, typ, **kw):
    return ColumnSchema(name, typ, **kw)


SCHEMA = Schema([C("a", DataType.STRING), C("b", DataType.INT32), C("v", DataType.INT64),
                 C("s", DataType.STRING)], key=["a", "b"])
KEYS = sorted({(random.Random(i).choice(["", "a", "a\x00", "b", "\u00e9"]), i % 13 - 6)
               for i in range(90)})


def make(tmp_path, config=CFG):
    t = Tablet.create(str(tmp_path / "t"), SCHEMA, config, LogicalClock())
    order = list(KEYS)
    random.Random(0).shuffle(order)
    t.insert({"a": [k[0] for k in order], "b": [k[1] for k in order],
              "v": [i for i in range(len(order))], "s": [f"s{i}" for i in range(len(order))]})
    return t


def enc(k):
    return encode_key(k, SCHEMA.key_columns)


def drss(t):
    return list(t._components.drss)


def rows_of(t, **kw):
    return sorted(tuple(r.values()) for r in t.scan_table(**kw).to_pylist())


def test_key_lookups_hit_the_right_rowset(tmp_path):
    t = make(tmp_path)
    t.flush_mrs()
    rowsets = drss(t)
    assert len(rowsets) >= 4
    keys_of = {}
    for d in rowsets:
        assert d.min_key <= d.max_key
    tree = t._components.tree
    for k in KEYS:
        e = enc(k)
        cands = tree.containing(e)
        hits = [(d, d.find_key(e)) for d in cands if d.find_key(e) >= 0]
        assert len(hits) == 1, k
        d, rid = hits[0]
        assert d.min_key <= e <= d.max_key
        keys_of.setdefault(d.id, []).append((rid, k))
    # rowids are dense positions in key order within each rowset
    for d in rowsets:
        got = sorted(keys_of[d.id])
        assert [r for r, _ in got] == list(range(d.num_rows))
        assert [k for _, k in got] == sorted(k for _, k in got)
    # absent keys: not found anywhere (bloom/range/page checks never invent a row)
    for k in [("", -7), ("a", 100), ("zz", 0), ("a\x00\x00", 0), ("a", -6)]:
        if k in KEYS:
            continue
        assert all(d.find_key(enc(k)) == -1 for d in rowsets)
        assert t.lookup(k) is None


def test_find_keys_matches_find_key(tmp_path):
    t = make(tmp_path)
    t.flush_mrs()
    probe = list(KEYS) + [("zz", 1), ("", 100), ("a\x00", 7), ("b", -100)]
    arr = encode_keys([pa.array([k[0].encode() for k in probe], pa.binary()),
                       pa.array([k[1] for k in probe], pa.int32())], SCHEMA.key_columns)
    for d in drss(t):
        vec = d.find_keys(arr)
        assert list(vec) == [d.find_key(bytes(x)) for x in arr]
    assert list(drss(t)[0].find_keys(arr[:0])) == []


def test_rowid_range_from_key_bounds(tmp_path):
    t = make(tmp_path)
    t.flush_mrs()
    rng = random.Random(4)
    bounds = [None] + [enc(k) for k in KEYS] + [b"", b"\xff", enc(("a", 3)), b"a\x00\x02"]
    for d in drss(t):
        keys = [enc(k) for k in KEYS if d.min_key <= enc(k) <= d.max_key]
        assert len(keys) == d.num_rows
        for _ in range(60):
            lo, hi = rng.choice(bounds), rng.choice(bounds)
            a, b = d.rowid_range(lo, hi)
            want_a = 0 if lo is None else bisect.bisect_left(keys, lo)
            want_b = len(keys) if hi is None else bisect.bisect_left(keys, hi)
            assert (a, b) == (want_a, max(want_a, want_b)), (lo, hi)


def test_updates_and_deletes_go_to_dms_and_survive_flush_dms(tmp_path):
    t = make(tmp_path)
    r0 = t.insert({"a": ["zzz"], "b": [0], "v": [0]})
    t.flush_mrs()
    before = rows_of(t)
    upd = KEYS[::7]
    r1 = t.update({"a": [k[0] for k in upd], "b": [k[1] for k in upd], "v": [-1] * len(upd)})
    assert r1.ok
    dels = KEYS[3::11]
    r2 = t.delete({"a": [k[0] for k in dels], "b": [k[1] for k in dels]})
    assert r2.ok
    assert t.mrs_rows() == 0  # nothing went to the MemRowSet
    stats = t.rowsets_info()
    assert sum(s["dms_records"] for s in stats) == len(upd) + len(dels)
    assert all(s["redo_files"] == 0 for s in stats)
    assert t.dms_bytes() > 0
    after = rows_of(t)
    assert len(after) == len(before) - len(set(dels))
    n = t.flush_dms()
    assert n == len(upd) + len(dels)
    stats = t.rowsets_info()
    assert sum(s["dms_records"] for s in stats) == 0
    assert sum(s["redo_records"] for s in stats) == n
    assert rows_of(t) == after
    assert rows_of(t, snapshot=r1.timestamp - 1) == before
    assert rows_of(t, snapshot=r0.timestamp - 1) == [r for r in before if r[0] != "zzz"]
    for k in upd:
        if k not in dels:
            assert t.lookup(k)["v"] == -1
            assert t.lookup(k, snapshot=r2.timestamp - 1)["v"] == -1
            assert t.lookup(k, snapshot=r1.timestamp - 1)["v"] != -1
    for k in dels:
        assert t.lookup(k) is None
        assert t.lookup(k, snapshot=r1.timestamp) is not None
    # updating a row twice in one op and again later: last one wins
    k = KEYS[1]
    t.update({"a": [k[0]] * 2, "b": [k[1]] * 2, "v": [5, 6]})
    t.update({"a": [k[0]], "b": [k[1]], "s": [None]})
    assert t.lookup(k)["v"] == 6 and t.lookup(k)["s"] is None
    t.flush_dms()
    assert t.lookup(k)["v"] == 6 and t.lookup(k)["s"] is None


def test_reinsert_after_delete_of_flushed_row(tmp_path):
    t = make(tmp_path)
    t.flush_mrs()
    k = KEYS[10]
    old = t.lookup(k)
    r_del = t.delete({"a": [k[0]], "b": [k[1]]})
    r_ins = t.insert({"a": [k[0]], "b": [k[1]], "v": [777], "s": ["new"]})
    assert r_ins.ok  # the ghost in the DiskRowSet does not make the key "present"
    assert t.mrs_rows() == 1

    def check():
        pred = [P.equal("a", k[0]), P.equal("b", k[1])]
        assert rows_of(t, predicates=pred) == [(k[0], k[1], 777, "new")]
        assert rows_of(t, predicates=pred, lazy=False) == [(k[0], k[1], 777, "new")]
        all_rows = rows_of(t)
        assert len(all_rows) == len(KEYS)
        assert len({(r[0], r[1]) for r in all_rows}) == len(KEYS)  # the key exactly once
        assert t.lookup(k) == {"a": k[0], "b": k[1], "v": 777, "s": "new"}
        assert t.lookup(k, snapshot=r_del.timestamp - 1) == old
        assert t.lookup(k, snapshot=r_del.timestamp) is None
        assert rows_of(t, predicates=pred, snapshot=r_del.timestamp - 1) == [tuple(old.values())]
        assert rows_of(t, predicates=pred, snapshot=r_del.timestamp) == []
        assert t.count_rows(snapshot=r_del.timestamp) == len(KEYS) - 1
        d = t.diff_scan(r_del.timestamp - 1, r_ins.timestamp).to_pylist()
        assert d == [{"a": k[0], "b": k[1], "v": 777, "s": "new", "is_deleted": False}]
        d = t.diff_scan(r_del.timestamp - 1, r_del.timestamp).to_pylist()
        assert d == [dict(old, is_deleted=True)]

    check()
    t.flush_dms()
    check()
    t.flush_mrs()  # now two DiskRowSets hold the key: a ghost and the live row
    assert sum(d.find_key(enc(k)) >= 0 for d in drss(t)) == 2
    check()
    # mutations go to the live version, not the ghost
    t.update({"a": [k[0]], "b": [k[1]], "v": [778]})
    assert t.lookup(k)["v"] == 778
    r = t.insert({"a": [k[0]], "b": [k[1]], "v": [1]})
    assert r.row_errors[0].code == "ALREADY_PRESENT"
    t.delete({"a": [k[0]], "b": [k[1]]})
    assert t.lookup(k) is None
    assert t.insert({"a": [k[0]], "b": [k[1]], "v": [2]}).ok
    assert t.lookup(k)["v"] == 2
    assert t.count_rows() == len(KEYS)


def test_ghost_key_update_upsert_and_diff_scan_projection(tmp_path):
    t = make(tmp_path)
    t.flush_mrs()
    k = KEYS[2]
    r0 = t.delete({"a": [k[0]], "b": [k[1]]})
    r = t.update({"a": [k[0]], "b": [k[1]], "v": [5]})  # the ghost is not live
    assert [e.code for e in r.row_errors] == ["NOT_FOUND"]
    r = t.upsert({"a": [k[0]], "b": [k[1]], "v": [6]})  # ... so UPSERT inserts
    assert r.ok and t.mrs_rows() == 1
    assert t.lookup(k) == {"a": k[0], "b": k[1], "v": 6, "s": None}
    d = t.diff_scan(r0.timestamp - 1, r.timestamp, columns=["s"])
    assert set(d.schema.names) == {"a", "b", "s", "is_deleted"}  # key columns added
    assert d.to_pylist() == [{"a": k[0], "b": k[1], "s": None, "is_deleted": False}]
    assert t.diff_scan(r.timestamp, r.timestamp).num_rows == 0


def test_diff_scan_adds_key_columns_in_key_order(tmp_path):
    t = make(tmp_path)
    r = t.update({"a": [KEYS[0][0]], "b": [KEYS[0][1]], "v": [1]})
    d = t.diff_scan(r.timestamp - 1, r.timestamp, columns=["s"])
    assert d.schema.names == ["a", "b", "s", "is_deleted"]


def test_lazy_and_eager_scans_agree_with_deltas(tmp_path):
    t = make(tmp_path)
    t.flush_mrs()
    rng = random.Random(9)
    for _ in range(6):
        ks = rng.sample(KEYS, 10)
        t.update({"a": [k[0] for k in ks], "b": [k[1] for k in ks],
                  "v": [rng.randint(-3, 3) for _ in ks],
                  "s": [rng.choice([None, "q", "s1"]) for _ in ks]})
        if rng.random() < 0.5:
            t.flush_dms()
    dels = rng.sample(KEYS, 8)
    t.delete({"a": [k[0] for k in dels], "b": [k[1] for k in dels]})
    snaps = [None, t.current_timestamp() - 3, 2]
    preds = [[P.less("v", 0)], [P.is_null("s")], [P.equal("s", "q"), P.greater_equal("v", 1)],
             [P.in_list("a", ["", "b"])], [P.range("b", -2, 2)], [P.greater("v", 100)]]
    for snap in snaps:
        for pr in preds:
            for cols in (None, ["s"], ["v", "a"]):
                s1, s2 = ScanStats(), ScanStats()
                lazy = sorted(map(repr, t.scan_table(columns=cols, predicates=pr, snapshot=snap,
                                                     lazy=True, stats=s1).to_pylist()))
                eager = sorted(map(repr, t.scan_table(columns=cols, predicates=pr,
                                                      snapshot=snap, lazy=False,
                                                      stats=s2).to_pylist()))
                assert lazy == eager, (snap, [str(p) for p in pr], cols)
                assert s1.rows_returned == s2.rows_returned == len(lazy)
    # a predicate nothing matches leaves the other columns unread in every block
    st = ScanStats()
    assert t.scan_table(columns=["s"], predicates=[P.equal("v", 10 ** 9)], stats=st).num_rows == 0
    assert st.blocks_skipped_lazy + st.blocks_skipped_zone_map > 0


def test_materialize_and_changed_rowids(tmp_path):
    t = make(tmp_path)
    t.flush_mrs()
    k = KEYS[0]
    r = t.update({"a": [k[0]], "b": [k[1]], "v": [42]})
    d = next(d for d in drss(t) if d.find_key(enc(k)) >= 0)
    rid = d.find_key(enc(k))
    assert list(d.changed_rowids(r.timestamp - 1, r.timestamp)) == [rid]
    assert list(d.changed_rowids(r.timestamp, r.timestamp + 5)) == []
    vcol = SCHEMA.column("v")
    blocks = list(d.materialize([vcol], MvccSnapshot.at(r.timestamp)))
    assert sum(len(b[1]) for b in blocks) == d.num_rows
    first, live, cols = blocks[rid // CFG.page_rows]
    assert live.all() and cols[vcol.id][rid - first].as_py() == 42
    assert d.lookup_row(rid, [vcol], MvccSnapshot.at(r.timestamp - 1))[vcol.id] != 42


def test_reopen_restores_rowsets_and_deltas(tmp_path):
    t = make(tmp_path)
    t.flush_mrs()
    k = KEYS[5]
    t.update({"a": [k[0]], "b": [k[1]], "v": [1234]})
    t.delete({"a": [KEYS[6][0]], "b": [KEYS[6][1]]})
    t.flush_dms()
    want = rows_of(t)
    ts = t.current_timestamp()
    t.close()
    t2 = Tablet.open(str(tmp_path / "t"), CFG, LogicalClock())
    assert rows_of(t2) == want
    assert t2.lookup(k)["v"] == 1234 and t2.lookup(KEYS[6]) is None
    assert rows_of(t2, snapshot=ts) == want
    assert [i["redo_records"] for i in t2.rowsets_info()] == [
        i["redo_records"] for i in t.rowsets_info()]
    # the write path knows about deletes that only exist in REDO files
    assert t2.insert({"a": [KEYS[6][0]], "b": [KEYS[6][1]], "v": [0]}).ok
    assert t2.insert({"a": [k[0]], "b": [k[1]], "v": [0]}).row_errors[0].code == "ALREADY_PRESENT"


def test_truncated_base_file_is_corruption(tmp_path):
    t = make(tmp_path)
    t.flush_mrs()
    t.close()
    d = drss(t)[0]
    base = os.path.join(d.dir, "base.cf")
    with open(base, "r+b") as f:
        f.truncate(os.path.getsize(base) // 2)
    with pytest.raises(errors.Corruption) as ei:
        Tablet.open(str(tmp_path / "t"), CFG, LogicalClock())
    assert base in str(ei.value)


def _ks(t, pred):
    return sorted(r["k"] for r in t.scan_table(predicates=[pred]).to_pylist())


def test_zone_map_with_long_strings_only(tmp_path):
    s = Schema([C("k", DataType.INT32), C("s", DataType.STRING)], key=["k"])
    t = Tablet.create(str(tmp_path / "z"), s, CFG, LogicalClock())
    t.insert({"k": [1, 2, 3], "s": ["z" * 70, "a" * 70, "b" * 70]})
    t.flush_mrs()
    assert _ks(t, P.greater("s", "b")) == [1, 3]
    assert _ks(t, P.in_list("s", ["c"])) == []


def test_zone_map_with_long_max_string(tmp_path):
    s = Schema([C("k", DataType.INT32), C("s", DataType.STRING)], key=["k"])
    t = Tablet.create(str(tmp_path / "z"), s, CFG, LogicalClock())
    t.insert({"k": [1, 2, 3], "s": ["a", "z" * 70, "c"]})
    t.flush_mrs()
    assert _ks(t, P.greater("s", "b")) == [2, 3]
    assert _ks(t, P.in_list("s", ["c"])) == [3]
    assert _ks(t, P.equal("s", "z" * 70)) == [2]


def test_predicates_on_dictionary_coded_pages(tmp_path):
    """String predicates on DICT pages are evaluated once per dictionary entry and gathered
    by code (DiskRowSet._matches): the same rows as the eager scan (which decodes the
    values) and as Python, with NULLs (whose codes are arbitrary) never matching, and on
    pages whose rows were updated since (patched values: the decoded path)."""
    schema = Schema([C("k", DataType.INT64), C("mode", DataType.STRING, nullable=True),
                     C("v", DataType.INT64)], key=["k"])
    cfg = TabletConfig(page_rows=256, fsync=False)
    t = Tablet.create(str(tmp_path / "d"), schema, cfg, LogicalClock())
    rng = random.Random(5)
    modes = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK", "", "é"]
    n = 2000
    vals = [None if rng.random() < 0.1 else rng.choice(modes) for _ in range(n)]
    t.insert({"k": list(range(n)), "mode": vals, "v": [rng.randrange(100) for _ in range(n)]})
    t.flush_mrs()
    d = drss(t)[0]
    reader = d.capture().readers[schema.column("mode").id]
    assert all(reader.dict_page(p) is not None for p in range(reader.num_pages))
    upd = rng.sample(range(256), 40)     # the first page's: the others stay unpatched
    for k in upd:
        vals[k] = rng.choice([None, "MAIL", "ZZZ"])
    t.update({"k": upd, "mode": [vals[k] for k in upd]})
    preds = [([P.in_list("mode", ["MAIL", "SHIP"])], lambda m, v: m in ("MAIL", "SHIP")),
             ([P.equal("mode", "")], lambda m, v: m == ""),
             ([P.range("mode", "FOB", "REG AIR")], lambda m, v: m is not None and
              "FOB" <= m < "REG AIR"),
             ([P.greater("mode", "SHIP")], lambda m, v: m is not None and m > "SHIP"),
             ([P.less("v", 30), P.in_list("mode", ["AIR", "é", "ZZZ"])],
              lambda m, v: v < 30 and m in ("AIR", "é", "ZZZ")),
             ([P.is_null("mode")], lambda m, v: m is None)]
    vs = {r["k"]: r["v"] for r in t.scan_table(columns=["k", "v"]).to_pylist()}
    for pr, want in preds:
        expect = sorted(k for k in range(n) if want(vals[k], vs[k]))
        lazy = sorted(r["k"] for r in t.scan_table(columns=["k"], predicates=pr).to_pylist())
        eager = sorted(r["k"] for r in t.scan_table(columns=["k"], predicates=pr,
                                                    lazy=False).to_pylist())
        assert lazy == eager == expect, [str(p) for p in pr]
