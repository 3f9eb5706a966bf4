"""Tablet.alter_schema: ALTER TABLE ADD / DROP COLUMN on a tablet that holds data.

Rows of every storage state — MemRowSet, DiskRowSet base data, DeltaMemStore, REDO and UNDO
files — must read an added column as its DEFAULT (or NULL) at every snapshot (PostgreSQL
semantics: the current schema applies to old snapshots too), through scans, predicates,
lookups and diff scans, before and after flushes and compactions; a dropped column must be
gone from reads and writes while its data waits in old files for a compaction; a re-added
name is a new column. The schema swap is crash safe (killed before or after the metadata
write) and WAL replay after it replays only ops logged under the new schema.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import threading

import pyarrow as pa
import pytest

from engine import errors
from engine.cfile.cfile import CFileReader
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import ColumnPredicate as P
from engine.tablet import Tablet, TabletConfig
from engine.types import DataType as T

CFG = TabletConfig(page_rows=4, drs_target_bytes=2048, fsync=False, wal_sync="never",
                   history_max_age_s=1e15)


def C(name, typ, **kw):
    return ColumnSchema(name, typ, **kw)


def base_schema() -> Schema:
    return Schema([C("k", T.INT64), C("v", T.INT64), C("s", T.STRING)], key=["k"])


def new_tablet(tmp_path, schema=None) -> Tablet:
    return Tablet.create(str(tmp_path / "t"), schema or base_schema(), CFG, LogicalClock())


def reopen(t: Tablet) -> Tablet:
    t.close()
    return Tablet.open(t.path, CFG, LogicalClock())


def rows_of(t: Tablet, **kw) -> list[dict]:
    return sorted(t.scan_table(**kw).to_pylist(), key=lambda r: r["k"])


def populate(t: Tablet) -> dict[str, int]:
    """Rows in every state; returns timestamps of interesting points.

    k 0..19   inserted, flushed to DiskRowSets (base data + UNDO)
    k 1, 2    updated in REDO files (flushed DMS); k 2 again in the DMS
    k 3       deleted (REDO DELETE in the DMS)
    k 4       deleted and re-inserted (ghost in a DRS, live row in the MRS)
    k 100..104 in the MemRowSet; k 101 updated there
    """
    ts = {}
    ts["insert"] = t.insert({"k": list(range(20)), "v": list(range(20)),
                             "s": [f"s{i}" for i in range(20)]}).timestamp
    t.flush_mrs()
    t.update({"k": [1, 2], "v": [10, 20]})
    t.flush_dms()
    ts["upd2"] = t.update({"k": [2], "s": ["two"]}).timestamp
    t.delete({"k": [3, 4]})
    t.insert({"k": [4], "v": [44], "s": ["again"]})
    t.insert({"k": list(range(100, 105)), "v": list(range(100, 105))})
    ts["last"] = t.update({"k": [101], "s": ["mrs-upd"]}).timestamp
    return ts


def expected_base() -> dict[int, dict]:
    out = {i: {"k": i, "v": i, "s": f"s{i}"} for i in range(20)}
    out[1]["v"] = 10
    out[2].update(v=20, s="two")
    del out[3]
    out[4] = {"k": 4, "v": 44, "s": "again"}
    for i in range(100, 105):
        out[i] = {"k": i, "v": i, "s": None}
    out[101]["s"] = "mrs-upd"
    return out


def with_col(rows: dict[int, dict], name: str, value) -> list[dict]:
    return [{**r, name: value} for _, r in sorted(rows.items())]


def without(rows: dict[int, dict], name: str) -> list[dict]:
    return [{c: x for c, x in r.items() if c != name} for _, r in sorted(rows.items())]


# -- ADD COLUMN ----------------------------------------------------------------------------


@pytest.mark.parametrize("col,default", [
    (C("w", T.STRING), None),
    (C("w", T.STRING, nullable=False, default="dflt"), "dflt"),
    (C("w", T.INT32, default=-7), -7),
    (C("w", T.DECIMAL, precision=38, scale=2, default=decimal.Decimal("1.50")),
     decimal.Decimal("1.50")),
    (C("w", T.TIMESTAMP, default=dt.datetime(2020, 1, 2, 3, 4, 5)),
     dt.datetime(2020, 1, 2, 3, 4, 5)),
    (C("w", T.DATE, default=dt.date(2021, 5, 6)), dt.date(2021, 5, 6)),
    (C("w", T.BOOL, default=True), True),
])
def test_add_column_every_storage_state(tmp_path, col, default):
    t = new_tablet(tmp_path)
    ts = populate(t)
    want = expected_base()
    assert t.alter_schema(t.schema.add_column(col)) == 1
    assert t.schema.names == ["k", "v", "s", "w"] and t.schema_version == 1
    assert rows_of(t) == with_col(want, "w", default)
    assert t.lookup((2,)) == {**want[2], "w": default}
    assert t.lookup((101,), ["w", "s"]) == {"w": default, "s": "mrs-upd"}
    assert t.lookup((3,)) is None
    # predicates on the new column, in every rowset (no file has it: no zone map)
    pred = P.is_null("w") if default is None else P.equal("w", default)
    assert t.count_rows() == len(want) == t.scan_table([], [pred]).num_rows
    # time travel to before the ALTER: the current columns, the default in old rows
    old = rows_of(t, snapshot=ts["insert"])
    assert old == [{"k": i, "v": i, "s": f"s{i}", "w": default} for i in range(20)]
    assert t.lookup((2,), snapshot=ts["upd2"] - 1) == {"k": 2, "v": 20, "s": "s2", "w": default}
    # a diff scan across the ALTER
    d = t.diff_scan(ts["insert"], ts["last"], ["w"])
    assert d.column_names == ["k", "w", "is_deleted"]
    assert sorted(d.column("k").to_pylist()) == [1, 2, 3, 4, 100, 101, 102, 103, 104]
    assert set(d.column("w").to_pylist()) == {default}


def test_add_column_then_writes_flushes_and_compactions(tmp_path):
    t = new_tablet(tmp_path)
    ts = populate(t)
    want = expected_base()
    t.alter_schema(t.schema.add_column(C("w", T.INT64, nullable=False, default=5)))
    ts_alter = t.current_timestamp()
    # writes with the new column: into DMSs of old rowsets and the (new) MRS
    t.update({"k": [0, 2, 101], "w": [50, 52, 151]})
    t.insert({"k": [200], "v": [1]})  # w takes its default
    t.upsert({"k": [201, 5], "w": [9, 55]})
    with pytest.raises(errors.ColumnNotFound):
        t.insert({"k": [300], "nope": [1]})
    r = t.update({"k": [6], "w": [None]})
    assert [e.code for e in r.row_errors] == ["NOT_NULL"]
    exp = {k: {**r, "w": 5} for k, r in want.items()}
    for k, w in ((0, 50), (2, 52), (101, 151), (5, 55)):
        exp[k]["w"] = w
    exp[200] = {"k": 200, "v": 1, "s": None, "w": 5}
    exp[201] = {"k": 201, "v": None, "s": None, "w": 9}
    expect = [exp[k] for k in sorted(exp)]
    before_alter = [{"k": i, "v": i, "s": f"s{i}", "w": 5} for i in range(20)]

    def check(what):
        assert rows_of(t) == expect, what
        assert rows_of(t, snapshot=ts["insert"]) == before_alter, what
        assert t.lookup((2,), snapshot=ts_alter) == {**want[2], "w": 5}, what
        assert t.lookup((0,)) == exp[0], what
        assert t.count_rows(snapshot=ts["last"]) == len(want), what
        assert t.scan_table(["k"], [P.greater("w", 5)]).num_rows == 5, what

    check("after writes")
    t.flush_mrs()
    check("after flush_mrs")
    t.flush_dms()
    check("after flush_dms")
    for d in list(t._components.drss):
        t.minor_delta_compact(d)
    t.compact_deltas()  # major: writes a column file for w with the folded values
    check("after major delta compaction")
    t.compact_rowsets([i["id"] for i in t.rowsets_info()])  # merging: w in base data
    check("after merging compaction")
    drs = t._components.drss[0]
    w_id = t.schema.column("w").id
    assert f"c{w_id}" in CFileReader(os.path.join(drs.dir, "base.cf")).columns
    t = reopen(t)
    check("after reopen")


# -- DROP COLUMN ---------------------------------------------------------------------------


def test_drop_column_every_storage_state(tmp_path):
    t = new_tablet(tmp_path)
    ts = populate(t)
    want = expected_base()
    v_id = t.schema.column("v").id
    t.alter_schema(t.schema.drop_column("v"))
    assert t.schema.names == ["k", "s"]
    assert rows_of(t) == without(want, "v")
    assert rows_of(t, snapshot=ts["insert"]) == [{"k": i, "s": f"s{i}"} for i in range(20)]
    assert t.lookup((1,)) == {"k": 1, "s": "s1"}
    d = t.diff_scan(ts["insert"], ts["last"])
    assert d.column_names == ["k", "s", "is_deleted"]
    for bad in (lambda: t.scan_table(["v"]), lambda: t.lookup((1,), ["v"]),
                lambda: t.scan_table(predicates=[P.equal("v", 1)]),
                lambda: t.update({"k": [1], "v": [2]}),
                lambda: t.insert({"k": [999], "v": [2]}),
                lambda: t.diff_scan(0, ts["last"], ["v"])):
        with pytest.raises(errors.ColumnNotFound):
            bad()
    assert t.lookup((999,)) is None
    # the data stays in the old files until a merging compaction rewrites the rowsets
    drs = t._components.drss[0]
    assert f"c{v_id}" in CFileReader(os.path.join(drs.dir, "base.cf")).columns
    t.update({"k": [1, 2], "s": ["x1", "x2"]})
    t.flush_mrs()
    t.flush_dms()
    t.compact_deltas()
    t.compact_rowsets([i["id"] for i in t.rowsets_info()])
    for drs in t._components.drss:
        assert f"c{v_id}" not in CFileReader(os.path.join(drs.dir, "base.cf")).columns
    want[1]["s"], want[2]["s"] = "x1", "x2"
    assert rows_of(t) == without(want, "v")
    assert rows_of(reopen(t)) == without(want, "v")


def test_readded_name_is_a_new_column(tmp_path):
    """Data of the dropped column — base data, REDO files, DMS records, MRS rows — must not
    show through a re-added column of the same name."""
    t = new_tablet(tmp_path)
    ts = populate(t)
    want = expected_base()
    old_id = t.schema.column("v").id
    t.alter_schema(t.schema.drop_column("v"))
    t.alter_schema(t.schema.add_column(C("v", T.INT64)))
    assert t.schema.column("v").id != old_id and t.schema_version == 2
    assert rows_of(t) == [{**r, "v": None} for r in without(want, "v")]
    assert t.count_rows() == t.scan_table([], [P.is_null("v")]).num_rows
    assert t.lookup((1,)) == {"k": 1, "s": "s1", "v": None}
    assert rows_of(t, snapshot=ts["insert"])[1] == {"k": 1, "s": "s1", "v": None}
    t.update({"k": [1], "v": [77]})
    for step in (t.flush_dms, t.compact_deltas,
                 lambda: t.compact_rowsets([i["id"] for i in t.rowsets_info()])):
        step()
        assert t.lookup((1,)) == {"k": 1, "s": "s1", "v": 77}
        assert t.lookup((2,)) == {"k": 2, "s": "two", "v": None}
    t = reopen(t)
    assert t.scan_table(["k"], [P.is_not_null("v")]).column("k").to_pylist() == [1]


# -- validation and idempotency ---------------------------------------------------------------


def test_alter_rules(tmp_path):
    t = new_tablet(tmp_path)
    s = t.schema
    cols = list(s.columns)
    bad = [
        Schema([C("k", T.INT32)] + cols[1:], num_key_columns=1,
               next_column_id=s.next_column_id),  # key type changed
        Schema([cols[0], C("v", T.STRING, id=cols[1].id), cols[2]], num_key_columns=1,
               next_column_id=s.next_column_id),  # type changed
        Schema(cols[:2] + [C("x", T.INT32, id=2)], num_key_columns=1,
               next_column_id=s.next_column_id),  # an id used before (by "s")
        Schema(cols[:2], num_key_columns=1, next_column_id=2),  # next_column_id going back
        Schema(cols + [C("n", T.INT32, nullable=False, id=s.next_column_id)],
               num_key_columns=1),  # NOT NULL without default
    ]
    for b in bad:
        with pytest.raises(errors.InvalidArgument):
            t.alter_schema(b)
    assert t.schema == s and t.schema_version == 0
    # renames of kept columns are allowed (the catalog's RENAME COLUMN reaches tablets so)
    renamed = s.rename_column("v", "val").rename_column("k", "key")
    t.insert({"k": [1], "v": [2]})
    assert t.alter_schema(renamed, 3) == 3
    assert t.lookup((1,)) == {"key": 1, "val": 2, "s": None}
    # an alter to a version the tablet has is a no-op (the catalog may re-send it)
    assert t.alter_schema(s.add_column(C("zz", T.INT32)), 3) == 3
    assert t.schema == renamed
    t = reopen(t)
    assert t.schema == renamed and t.schema_version == 3
    assert t.insert({"key": [5], "val": [6]}).ok
    t = reopen(t)  # replays the insert (written under the new names)
    assert rows_of_key(t) == [{"key": 1, "val": 2, "s": None}, {"key": 5, "val": 6, "s": None}]


def rows_of_key(t):
    return sorted(t.scan_table().to_pylist(), key=lambda r: r["key"])


# -- WAL replay and crashes -------------------------------------------------------------------


def test_wal_replay_after_alter(tmp_path):
    """Ops after the ALTER are replayed with the new schema; ops before it are never
    replayed (they were flushed by the ALTER)."""
    t = new_tablet(tmp_path)
    populate(t)
    want = expected_base()
    t.alter_schema(t.schema.drop_column("s").add_column(C("s", T.INT32, default=0)))
    # unflushed writes after the ALTER; "s" is now an INT32 column
    t.update({"k": [0, 101], "s": [10, 11]})
    t.insert({"k": [500], "v": [5], "s": [12]})
    t.delete({"k": [1]})
    exp = {k: {**r, "s": 0} for k, r in want.items()}
    exp[0]["s"], exp[101]["s"] = 10, 11
    exp[500] = {"k": 500, "v": 5, "s": 12}
    del exp[1]
    before = rows_of(t)
    assert before == [exp[k] for k in sorted(exp)]
    t.log.close()  # "crash": no close(), so nothing more is flushed or persisted
    t2 = Tablet.open(t.path, CFG, LogicalClock())
    assert t2.replayed_ops == 3  # only the ops after the ALTER
    assert rows_of(t2) == before


class _Crash(BaseException):
    pass


def test_crash_before_metadata_swap_keeps_old_schema(tmp_path, monkeypatch):
    t = new_tablet(tmp_path)
    populate(t)
    want = expected_base()
    real = Tablet.persist_metadata

    def persist(self, schema=None):
        if schema is not None:
            raise _Crash()  # killed just before the new schema reaches the disk
        return real(self, schema)
    monkeypatch.setattr(Tablet, "persist_metadata", persist)
    with pytest.raises(_Crash):
        t.alter_schema(t.schema.add_column(C("w", T.INT32)))
    monkeypatch.undo()
    assert t.schema.names == ["k", "v", "s"]  # unchanged in memory too
    t.log.close()
    t2 = Tablet.open(t.path, CFG, LogicalClock())
    assert t2.schema.names == ["k", "v", "s"] and t2.schema_version == 0
    assert rows_of(t2) == [want[k] for k in sorted(want)]
    assert t2.replayed_ops == 0  # the ALTER's flushes made every op durable in files
    t2.alter_schema(t2.schema.add_column(C("w", T.INT32)))  # and it can be run again
    assert rows_of(t2) == with_col(want, "w", None)


def test_crash_after_metadata_swap_has_new_schema(tmp_path, monkeypatch):
    t = new_tablet(tmp_path)
    populate(t)
    want = expected_base()

    def crash(self, schema):
        raise _Crash()  # killed right after tablet-meta.json was replaced
    monkeypatch.setattr(Tablet, "_set_schema", crash)
    with pytest.raises(_Crash):
        t.alter_schema(t.schema.add_column(C("w", T.STRING, nullable=False, default="d")))
    monkeypatch.undo()
    with open(os.path.join(t.path, "tablet-meta.json")) as f:
        assert json.load(f)["schema_version"] == 1
    t.log.close()
    t2 = Tablet.open(t.path, CFG, LogicalClock())
    assert t2.schema.names == ["k", "v", "s", "w"] and t2.schema_version == 1
    assert rows_of(t2) == with_col(want, "w", "d")


def test_crash_in_the_first_flush_of_an_alter(tmp_path, monkeypatch):
    """Killed while the ALTER flushes: the old schema, every acknowledged write."""
    t = new_tablet(tmp_path)
    populate(t)
    want = expected_base()
    monkeypatch.setattr(Tablet, "flush_dms", lambda self: (_ for _ in ()).throw(_Crash()))
    with pytest.raises(_Crash):
        t.alter_schema(t.schema.drop_column("v"))
    monkeypatch.undo()
    t.log.close()
    t2 = Tablet.open(t.path, CFG, LogicalClock())
    assert t2.schema.names == ["k", "v", "s"]
    assert rows_of(t2) == [want[k] for k in sorted(want)]
    assert t2.replayed_ops > 0  # the DMS mutations came back from the WAL


# -- concurrency ------------------------------------------------------------------------------


def test_scan_opened_before_alter_keeps_its_columns(tmp_path):
    t = new_tablet(tmp_path)
    populate(t)
    want = expected_base()
    scan = t.scan(snapshot=None)
    first = next(scan)
    t.alter_schema(t.schema.drop_column("v").add_column(C("w", T.INT32, default=1)))
    t.update({"k": [0], "w": [2]})
    t.compact_rowsets([i["id"] for i in t.rowsets_info()])  # rewrites files it reads
    batches = [first] + list(scan)
    assert all(b.schema.names == ["k", "v", "s"] for b in batches)
    got = sorted(pa.Table.from_batches(batches).to_pylist(), key=lambda r: r["k"])
    assert got == [want[k] for k in sorted(want)]


def test_concurrent_scans_and_writes_during_alters(tmp_path):
    """Scans running while ADD / DROP COLUMN alternate each see one schema (the column
    sets before or after) and every row; writers never lose an applied row."""
    t = new_tablet(tmp_path)
    t.insert({"k": list(range(300)), "v": list(range(300))})
    t.flush_mrs()
    stop = threading.Event()
    problems: list = []
    schemas_seen: set = set()
    next_key = [1000]

    def scanner():
        while not stop.is_set():
            tbl = t.scan_table()
            names = tuple(tbl.column_names)
            schemas_seen.add(names)
            if names not in (("k", "v", "s"), ("k", "v", "s", "x")):
                problems.append(names)
            ks = set(tbl.column("k").to_pylist())
            if not set(range(300)) <= ks:
                problems.append(("missing rows", len(ks)))
            if "x" in names and set(tbl.column("x").to_pylist()) - {None, 1, 2}:
                problems.append(("x values", names))

    def writer():
        while not stop.is_set():
            k = next_key[0]
            next_key[0] += 1
            try:
                r = t.insert({"k": [k], "v": [k], "x": [2]})
            except errors.ColumnNotFound:
                r = t.insert({"k": [k], "v": [k]})
            if not r.ok:
                problems.append(r.row_errors)

    threads = [threading.Thread(target=scanner), threading.Thread(target=writer)]
    for th in threads:
        th.start()
    try:
        for _ in range(5):
            t.alter_schema(t.schema.add_column(C("x", T.INT32, default=1)))
            t.alter_schema(t.schema.drop_column("x"))
    finally:
        stop.set()
        for th in threads:
            th.join()
    assert not problems, problems[:5]
    assert ("k", "v", "s") in schemas_seen
    assert t.count_rows() == 300 + next_key[0] - 1000
    assert reopen(t).count_rows() == 300 + next_key[0] - 1000
