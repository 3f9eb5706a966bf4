"""Catalog: persistence, crash safety (orphan tablets), validation, and DDL on tablets."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from engine import errors
from engine.catalog import (
    Catalog,
    ColumnExists,
    HashBucketSchema,
    PartitionSchema,
    RangePartitionExists,
    RangeSpec,
    TableExists,
)
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import ColumnPredicate as P
from engine.tablet import Tablet, TabletConfig
from engine.types import DataType as T

CFG = TabletConfig(fsync=False, wal_sync="never", history_max_age_s=1e12)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def C(name, typ, **kw):
    return ColumnSchema(name, typ, **kw)


def schema() -> Schema:
    return Schema([C("id", T.INT64), C("s", T.STRING), C("v", T.INT32)], key=["id", "s"])


def hash_range(s: Schema, ranges=((0, 100), (100, 200))) -> PartitionSchema:
    return PartitionSchema.create(s, [HashBucketSchema(("s",), 2)], ["id"],
                                  [RangeSpec(lo, hi) for lo, hi in ranges])


def open_cat(path, **kw) -> Catalog:
    return Catalog.open(str(path), config=CFG, clock=LogicalClock(), **kw)


def tablet_dirs(path) -> set[str]:
    return set(os.listdir(os.path.join(str(path), "tablets")))


def rows(ids, v=0):
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "s": [f"s{i % 5}" for i in ids],
                     "v": pa.array([v] * len(ids), pa.int32())})


def test_create_persist_reopen(tmp_path):
    with open_cat(tmp_path) as cat:
        s = schema()
        m = cat.create_table("t", s, hash_range(s), comment="hello",
                             properties={"kudu.num_tablet_replicas": "1"})
        assert len(m.tablet_ids) == 4 and tablet_dirs(tmp_path) == set(m.tablet_ids)
        cat.create_table("u", Schema([C("k", T.STRING)], key=["k"]))  # unpartitioned
        assert cat.table("t").insert(rows(range(200))).num_applied == 200
        cat.rename_table("u", "u2")
        cat.set_properties("t", {"a": "b"})
    with open_cat(tmp_path) as cat:
        assert cat.list_tables() == ["t", "u2"]
        m2 = cat.get_table("t")
        assert m2 == m.__class__(m.id, "t", m.schema, m.partition_schema, 1, m.tablet_ids,
                                 "hello", {"kudu.num_tablet_replicas": "1", "a": "b"})
        assert m2.partition_schema == m.partition_schema
        assert cat.table("t").count_rows() == 200
        assert len(cat.get_table("u2").tablet_ids) == 1


def test_table_name_errors(tmp_path):
    with open_cat(tmp_path) as cat:
        cat.create_table("t", schema())
        with pytest.raises(TableExists, match='table "t" already exists') as e:
            cat.create_table("t", schema())
        assert e.value.sqlstate == "42P07" and isinstance(e.value, errors.AlreadyPresent)
        assert cat.create_table("t", schema(), if_not_exists=True) == cat.get_table("t")
        with pytest.raises(errors.NotFound, match='table "x" does not exist') as e:
            cat.get_table("x")
        assert e.value.sqlstate == "42P01"
        with pytest.raises(errors.NotFound):
            cat.drop_table("x")
        cat.drop_table("x", if_exists=True)
        cat.create_table("t2", schema())
        with pytest.raises(TableExists):
            cat.rename_table("t2", "t")
        with pytest.raises(errors.InvalidArgument, match="empty string not a valid identifier"):
            cat.create_table("", schema())
        with pytest.raises(errors.InvalidArgument, match="longer than maximum permitted length"):
            cat.create_table("x" * 257, schema())
        wide = Schema([C("k", T.INT32)] + [C(f"c{i}", T.INT32) for i in range(300)], key=["k"])
        with pytest.raises(errors.InvalidArgument, match="number of columns 301 is greater than "
                                                         "the permitted maximum 300"):
            cat.create_table("wide", wide)
        other = Schema([C("x", T.INT32)], key=["x"])
        with pytest.raises(errors.InvalidArgument, match="different primary key"):
            cat.create_table("z", schema(), PartitionSchema.create(other))


def test_replication_factor(tmp_path):
    with open_cat(tmp_path) as cat:
        assert cat.create_table("a", schema()).replication_factor == 1
        assert cat.create_table("b", schema(), replication_factor=1).replication_factor == 1
        cases = {3: r"replication factor 3 exceeds the number of tablet servers \(1\)",
                 2: r"illegal replication factor 2 \(replication factor must be odd\)",
                 0: r"illegal replication factor 0 \(replication factor must be positive\)",
                 -1: "must be positive",
                 9: r"illegal replication factor 9 \(max replication factor is 7\)"}
        for rf, msg in cases.items():
            with pytest.raises(errors.InvalidArgument, match=msg):
                cat.create_table(f"r{rf}", schema(), replication_factor=rf)
        assert not any(n.startswith("r") for n in cat.list_tables())
    with open_cat(tmp_path / "three", num_tablet_servers=3) as cat:
        assert cat.create_table("a", schema()).replication_factor == 3  # Kudu's default
        assert cat.create_table("b", schema(), replication_factor=3).replication_factor == 3
        with pytest.raises(errors.InvalidArgument, match="exceeds the number of tablet servers"):
            cat.create_table("c", schema(), replication_factor=5)


def test_too_many_tablets_at_creation(tmp_path):
    with open_cat(tmp_path, max_create_tablets_per_ts=4) as cat:
        s = schema()
        ps = PartitionSchema.create(s, [HashBucketSchema(("id",), 5)])
        with pytest.raises(errors.InvalidArgument, match=r"maximum permitted at creation time "
                                                         r"\(4\)\. Additional tablets may be"):
            cat.create_table("t", s, ps)
        assert tablet_dirs(tmp_path) == set()
        cat.create_table("t", s, hash_range(s))  # 4 tablets
        cat.add_range_partition("t", RangeSpec(200, 300))  # adding later is allowed
        assert len(cat.get_table("t").tablet_ids) == 6


def test_orphan_tablets_removed_on_open(tmp_path):
    with open_cat(tmp_path) as cat:
        m = cat.create_table("t", schema(), hash_range(schema()))
    orphan = os.path.join(str(tmp_path), "tablets", "deadbeef")
    Tablet.create(orphan, schema(), config=CFG).close()
    open(os.path.join(str(tmp_path), "catalog.json.tmp"), "w").write("{garbage")
    with open_cat(tmp_path) as cat:
        assert tablet_dirs(tmp_path) == set(m.tablet_ids)
        assert not os.path.exists(os.path.join(str(tmp_path), "catalog.json.tmp"))
        assert cat.table("t").count_rows() == 0


def _crash_child(path, patch: str, action: str) -> None:
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {ROOT!r})
        from engine.catalog import Catalog, HashBucketSchema, PartitionSchema, RangeSpec
        from engine.catalog import catalog as catmod
        from engine.clock import LogicalClock
        from engine.schema import ColumnSchema, Schema
        from engine.tablet import TabletConfig
        from engine.types import DataType as T
        cfg = TabletConfig(fsync=False, wal_sync="never")
        s = Schema([ColumnSchema("id", T.INT64), ColumnSchema("s", T.STRING)], key=["id", "s"])
        ps = PartitionSchema.create(s, [HashBucketSchema(("s",), 2)], ["id"], [RangeSpec(0, 9)])
        cat = Catalog.open({str(path)!r}, config=cfg, clock=LogicalClock())
        if not cat.has_table("keep"):
            cat.create_table("keep", s, ps)
        def crash(*a, **k):
            os._exit(0)
        {patch}
        {action}
        sys.exit(3)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_crash_between_tablets_and_catalog_write(tmp_path):
    # CREATE TABLE: the tablets exist, the catalog write never happens
    _crash_child(tmp_path, "catmod.Catalog._persist = crash",
                 "cat.create_table('t', s, ps)")
    assert len(tablet_dirs(tmp_path)) == 4  # "keep"'s 2 tablets and the orphans of "t"
    with open_cat(tmp_path) as cat:
        keep = cat.get_table("keep")
        assert cat.list_tables() == ["keep"]
        assert tablet_dirs(tmp_path) == set(keep.tablet_ids)
    # ADD RANGE PARTITION: same
    _crash_child(tmp_path, "catmod.Catalog._persist = crash",
                 "cat.add_range_partition('keep', RangeSpec(9, 20))")
    assert len(tablet_dirs(tmp_path)) == 4
    with open_cat(tmp_path) as cat:
        assert cat.get_table("keep") == keep and tablet_dirs(tmp_path) == set(keep.tablet_ids)
    # DROP TABLE: the catalog forgot the table, the tablets were not deleted yet
    _crash_child(tmp_path, "catmod.Catalog._drop_tablets = crash", "cat.drop_table('keep')")
    assert len(tablet_dirs(tmp_path)) == 2
    with open_cat(tmp_path) as cat:
        assert cat.list_tables() == [] and tablet_dirs(tmp_path) == set()


def test_failed_tablet_creation_leaves_nothing(tmp_path, monkeypatch):
    from engine.catalog import catalog as catmod

    real = Tablet.create
    calls = []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(*a, **k)
    with open_cat(tmp_path) as cat:
        monkeypatch.setattr(catmod.Tablet, "create", staticmethod(flaky))
        with pytest.raises(OSError, match="disk full"):
            cat.create_table("t", schema(), hash_range(schema()))
        assert cat.list_tables() == [] and tablet_dirs(tmp_path) == set()


def test_add_and_drop_range_partitions(tmp_path):
    with open_cat(tmp_path) as cat:
        s = schema()
        cat.create_table("t", s, hash_range(s))
        t = cat.table("t")
        assert t.insert(rows(range(0, 300))).num_applied == 200  # 200..299 not covered
        m1 = cat.get_table("t")
        m2 = cat.add_range_partition("t", RangeSpec(200, 300))
        assert len(m2.tablet_ids) == 6 and set(m1.tablet_ids) < set(m2.tablet_ids)
        assert tablet_dirs(tmp_path) == set(m2.tablet_ids)
        assert t.insert(rows(range(200, 300))).num_applied == 100
        with pytest.raises(errors.InvalidArgument,
                           match="new range partition conflicts with existing one: 100 <= "):
            cat.add_range_partition("t", RangeSpec(150, 250))
        with pytest.raises(RangePartitionExists):
            cat.add_range_partition("t", RangeSpec(200, 300))
        assert cat.add_range_partition("t", RangeSpec(200, 300), if_not_exists=True) == m2
        m3 = cat.drop_range_partition("t", RangeSpec(0, 100))
        assert len(m3.tablet_ids) == 4 and tablet_dirs(tmp_path) == set(m3.tablet_ids)
        assert t.count_rows() == 200  # the dropped range's rows are gone
        assert t.lookup((5, "s0")) is None and t.lookup((150, "s0")) is not None
        with pytest.raises(errors.InvalidArgument, match="no range partition to drop"):
            cat.drop_range_partition("t", RangeSpec(0, 100))
        assert cat.drop_range_partition("t", RangeSpec(0, 100), if_exists=True) == m3
        # a dropped range can be added again, empty
        cat.add_range_partition("t", RangeSpec(0, 100))
        assert t.count_rows(predicates=[P.less("id", 100)]) == 0
    with open_cat(tmp_path) as cat:
        assert [str(r) for r in cat.get_table("t").partition_schema.range_partitions] == [
            "0 <= VALUES < 100", "100 <= VALUES < 200", "200 <= VALUES < 300"]
        assert cat.table("t").count_rows() == 200


def test_schema_changes(tmp_path):
    with open_cat(tmp_path) as cat:
        s = schema()
        cat.create_table("t", s, hash_range(s))
        t = cat.table("t")
        old = cat.get_table("t").tablet_ids
        # ADD / DROP COLUMN alter the tablets in place (empty or not)
        m = cat.add_column("t", C("w", T.STRING, default="x"))
        assert m.schema.names == ["id", "s", "v", "w"] and m.tablet_ids == old
        assert (m.schema_version, m.pending_schema) == (1, None)
        assert tablet_dirs(tmp_path) == set(old)
        assert all(cat.tablet(tid).schema_version == 1 for tid in old)
        with pytest.raises(ColumnExists, match='column "w" of relation "t" already exists') as e:
            cat.add_column("t", C("w", T.INT32))
        assert e.value.sqlstate == "42701"
        assert cat.add_column("t", C("w", T.INT32), if_not_exists=True) == m
        with pytest.raises(errors.InvalidArgument, match="non-null column must have a default"):
            cat.add_column("t", C("nn", T.INT32, nullable=False))
        m = cat.drop_column("t", "v")
        assert m.schema.names == ["id", "s", "w"] and m.schema_version == 2
        with pytest.raises(errors.InvalidArgument, match="cannot drop primary key column"):
            cat.drop_column("t", "id")
        with pytest.raises(errors.ColumnNotFound):
            cat.drop_column("t", "nope")
        cat.drop_column("t", "nope", if_exists=True)
        # with rows: rows in MemRowSets, DiskRowSets and DeltaMemStores of every tablet
        assert t.insert({"id": [1, 150], "s": ["a", "b"]}).num_applied == 2
        assert t.lookup((1, "a")) == {"id": 1, "s": "a", "w": "x"}
        assert t.insert(pa.table({"id": pa.array(range(10, 60), pa.int64()),
                                  "s": [f"s{i % 5}" for i in range(50)],
                                  "w": [f"w{i}" for i in range(50)]})).ok
        for tid in old:
            cat.tablet(tid).flush_mrs()
        assert t.update({"id": [10], "s": ["s0"], "w": ["upd"]}).ok  # a DMS record
        assert t.insert({"id": [2], "s": ["c"], "w": ["mrs"]}).ok  # an MRS row
        ts_before = t.current_timestamp()
        m = cat.add_column("t", C("z", T.INT32, nullable=False, default=-1))
        assert m.tablet_ids == old and m.schema_version == 3
        assert t.count_rows() == 53
        assert t.count_rows(predicates=[P.equal("z", -1)]) == 53
        assert t.lookup((10, "s0")) == {"id": 10, "s": "s0", "w": "upd", "z": -1}
        assert t.lookup((2, "c")) == {"id": 2, "s": "c", "w": "mrs", "z": -1}
        # time travel before the ALTER reads the current columns (the default for z)
        assert t.lookup((10, "s0"), snapshot=ts_before) == {"id": 10, "s": "s0", "w": "upd",
                                                           "z": -1}
        assert t.insert({"id": [3], "s": ["q"], "z": [7]}).ok
        assert t.update({"id": [1], "s": ["a"], "z": [8]}).ok
        assert t.lookup((3, "q")) == {"id": 3, "s": "q", "w": "x", "z": 7}
        assert t.lookup((1, "a")) == {"id": 1, "s": "a", "w": "x", "z": 8}
        m = cat.drop_column("t", "w")
        assert m.schema.names == ["id", "s", "z"]
        with pytest.raises(errors.ColumnNotFound):
            t.update({"id": [1], "s": ["a"], "w": ["gone"]})
        with pytest.raises(errors.ColumnNotFound):
            t.scan_table(["w"])
        # a re-added name is a new column: the old data is not seen
        m = cat.add_column("t", C("w", T.STRING))
        assert t.count_rows(predicates=[P.is_not_null("w")]) == 0
        assert t.lookup((10, "s0"), ["w"]) == {"w": None}
        d = t.diff_scan(ts_before, t.current_timestamp(), ["w", "z"])
        assert sorted(d.column("id").to_pylist()) == [1, 3]
        assert set(d.column("w").to_pylist()) == {None}
    with open_cat(tmp_path) as cat:
        m2 = cat.get_table("t")
        assert m2 == m and m2.schema_version == 5
        t = cat.table("t")
        assert t.count_rows() == 54 and t.lookup((1, "a")) == {"id": 1, "s": "a", "z": 8,
                                                               "w": None}
        # new range partitions get tablets at the table's schema version
        m3 = cat.add_range_partition("t", RangeSpec(200, 300))
        new = set(m3.tablet_ids) - set(m.tablet_ids)
        assert [cat.tablet(tid).schema_version for tid in new] == [5, 5]
        assert t.insert({"id": [250], "s": ["n"], "w": ["new"]}).ok
        cat.drop_column("t", "z")
        assert t.lookup((250, "n")) == {"id": 250, "s": "n", "w": "new"}


def test_schema_change_renamed_columns_reach_tablets(tmp_path):
    """RENAME COLUMN is catalog-only; the next ADD / DROP gives the tablets the names."""
    with open_cat(tmp_path) as cat:
        s = schema()
        cat.create_table("t", s, hash_range(s))
        t = cat.table("t")
        t.insert(rows(range(100), v=3))
        cat.rename_column("t", "v", "val")
        cat.rename_column("t", "s", "str")  # a key column
        tid = cat.get_table("t").tablet_ids[0]
        assert cat.tablet(tid).schema.names == ["id", "s", "v"]
        cat.add_column("t", C("w", T.INT64, default=0))
        assert cat.tablet(tid).schema.names == ["id", "str", "val", "w"]
        assert t.lookup((7, "s2")) == {"id": 7, "str": "s2", "val": 3, "w": 0}
        assert t.update({"id": [7], "str": ["s2"], "val": [4], "w": [5]}).ok
    with open_cat(tmp_path) as cat:
        t = cat.table("t")
        assert t.lookup((7, "s2")) == {"id": 7, "str": "s2", "val": 4, "w": 5}
        assert t.count_rows(predicates=[P.equal("val", 3)]) == 99


def test_schema_change_waits_for_open_scans(tmp_path):
    """A scan opened before an ALTER holds it off (busy_timeout_s) and reads the old
    columns; operations started during the ALTER wait for it and see the new schema."""
    with open_cat(tmp_path, busy_timeout_s=0.2) as cat:
        s = schema()
        cat.create_table("t", s, hash_range(s))
        t = cat.table("t")
        t.insert(rows(range(200), v=1))
        scan = t.scan(["id", "v"])
        first = next(scan)
        with pytest.raises(errors.ServiceUnavailable, match="busy"):
            cat.drop_column("t", "v")
        assert cat.get_table("t").schema.names == ["id", "s", "v"]
        rest = [b for b in scan]
        assert sum(b.num_rows for b in [first] + rest) == 200
        assert all(b.column_names == ["id", "v"] for b in [first] + rest)
        cat.drop_column("t", "v")  # the scan is exhausted: no longer busy
        assert t.scan_table().column_names == ["id", "s"]


def test_schema_change_interleaved_with_scans_and_writes(tmp_path):
    """Threads scan and write while ADD / DROP COLUMN run: every scan returns one schema
    (all rows with the columns it asked for, values consistent), every write either
    applies or fails with ColumnNotFound for a column dropped meanwhile."""
    import threading

    with open_cat(tmp_path, busy_timeout_s=30) as cat:
        s = schema()
        cat.create_table("t", s, hash_range(s))
        t = cat.table("t")
        t.insert(rows(range(200), v=1))
        stop = threading.Event()
        problems: list = []

        def scanner():
            while not stop.is_set():
                try:
                    tbl = t.scan_table()
                except errors.ColumnNotFound:
                    continue
                if tbl.num_rows != 200:
                    problems.append(("rows", tbl.num_rows))
                names = tbl.column_names
                if "x" in names and set(tbl.column("x").to_pylist()) - {None, 5}:
                    problems.append(("x", names))

        def writer():
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    r = t.update({"id": [i % 200], "s": [f"s{i % 200 % 5}"], "x": [5]})
                    if not r.ok:
                        problems.append(("write", r.row_errors))
                except errors.ColumnNotFound:
                    pass

        threads = [threading.Thread(target=scanner), threading.Thread(target=writer)]
        for th in threads:
            th.start()
        try:
            for _ in range(4):
                cat.add_column("t", C("x", T.INT32))
                cat.drop_column("t", "x")
        finally:
            stop.set()
            for th in threads:
                th.join()
        assert not problems, problems[:5]
        assert cat.get_table("t").schema_version == 8


def test_crash_during_schema_change_rolls_forward(tmp_path):
    """Killed after the catalog recorded the pending ADD COLUMN and after one tablet was
    altered: `open` finishes the alter on the others (the one done skips it)."""
    code = ("real = catmod.Tablet.alter_schema\n"
            "        calls = []\n"
            "        def once(self, *a, **k):\n"
            "            calls.append(1)\n"
            "            if len(calls) == 2:\n"
            "                os._exit(0)\n"
            "            return real(self, *a, **k)\n"
            "        catmod.Tablet.alter_schema = once\n"
            "        cat._pool.shutdown(); cat.parallelism = 1\n"
            "        cat._pool = type(cat._pool)(max_workers=1)")
    _crash_child(tmp_path, code, "cat.table('keep').insert({'id': [1, 2, 3], 's': ['a', "
                 "'b', 'c']}); cat.add_column('keep', ColumnSchema('w', T.INT32, default=4))")
    import json

    with open(os.path.join(str(tmp_path), "catalog.json")) as f:
        doc = json.load(f)
    assert doc["tables"][0]["pending_schema"] is not None  # the crash hit mid-alter
    with open_cat(tmp_path) as cat:
        m = cat.get_table("keep")
        assert m.pending_schema is None and m.schema_version == 1
        assert m.schema.names == ["id", "s", "w"]
        assert [cat.tablet(tid).schema_version for tid in m.tablet_ids] == [1, 1]
        assert sorted(cat.table("keep").scan_table().to_pylist(), key=lambda r: r["id"]) == [
            {"id": i, "s": c, "w": 4} for i, c in ((1, "a"), (2, "b"), (3, "c"))]


@pytest.mark.parametrize("which", [1, 2])
def test_crash_at_catalog_writes_of_schema_change(tmp_path, which):
    """Killed at the 1st catalog write (nothing happened: old schema) or the 2nd (every
    tablet altered, the catalog still pending: rolled forward on open)."""
    patch = ("real = catmod.Catalog._persist\n"
             "        calls = []\n"
             "        def nth(self, *a, **k):\n"
             "            calls.append(1)\n"
             f"            if len(calls) == {which}:\n"
             "                os._exit(0)\n"
             "            return real(self, *a, **k)")
    _crash_child(tmp_path, "", "cat.table('keep').insert({'id': [1], 's': ['a']}); "
                 "cat.close(); os._exit(0)")
    _crash_child(tmp_path, patch + "\n        catmod.Catalog._persist = nth",
                 "cat.add_column('keep', ColumnSchema('w', T.STRING, default='d'))")
    with open_cat(tmp_path) as cat:
        m = cat.get_table("keep")
        assert m.pending_schema is None
        want = {"id": 1, "s": "a"} if which == 1 else {"id": 1, "s": "a", "w": "d"}
        assert m.schema.names == list(want) and m.schema_version == which - 1
        assert cat.table("keep").lookup((1, "a")) == want
        assert all(cat.tablet(t).schema_version == which - 1 for t in m.tablet_ids)
        # and the ALTER can be run (again)
        cat.add_column("keep", ColumnSchema("w2", T.INT32), if_not_exists=True)
        assert cat.table("keep").lookup((1, "a"))["w2"] is None


def test_failed_tablet_alter_stays_pending_and_is_retried(tmp_path, monkeypatch):
    with open_cat(tmp_path) as cat:
        s = schema()
        cat.create_table("t", s, hash_range(s))
        t = cat.table("t")
        t.insert(rows(range(200), v=2))
        real = Tablet.alter_schema
        calls = []

        def flaky(self, *a, **k):
            calls.append(1)
            if len(calls) == 3:
                raise OSError("disk full")
            return real(self, *a, **k)
        monkeypatch.setattr(Tablet, "alter_schema", flaky)
        cat._pool.shutdown()
        from concurrent.futures import ThreadPoolExecutor
        cat._pool = ThreadPoolExecutor(max_workers=1)
        with pytest.raises(OSError, match="disk full"):
            cat.drop_column("t", "v")
        assert cat.get_table("t").pending_schema is not None
        # the next use of the table finishes the alter first
        assert t.scan_table().column_names == ["id", "s"]
        m = cat.get_table("t")
        assert m.pending_schema is None and m.schema_version == 1
        assert t.count_rows() == 200


def test_rename_column_with_data(tmp_path):
    with open_cat(tmp_path) as cat:
        s = schema()
        cat.create_table("t", s, hash_range(s))
        t = cat.table("t")
        t.insert(rows(range(200), v=1))
        ts = t.current_timestamp()
        cat.rename_column("t", "v", "val")
        cat.rename_column("t", "s", "str")  # a key and partition column
        m = cat.get_table("t")
        assert m.partition_schema.hash_schemas[0].columns == ("str",)
        assert t.lookup((7, "s2")) == {"id": 7, "str": "s2", "val": 1}
        assert t.update({"id": [7], "str": ["s2"], "val": [5]}).ok
        got = t.scan_table(["str", "val"], [P.equal("str", "s2"), P.equal("val", 5)])
        assert got.column_names == ["str", "val"] and got.to_pylist() == [{"str": "s2", "val": 5}]
        d = t.diff_scan(ts, t.current_timestamp(), ["val"])
        assert d.column_names == ["id", "str", "val", "is_deleted"] and d.num_rows == 1
        with pytest.raises(ColumnExists):
            cat.rename_column("t", "val", "id")
        with pytest.raises(errors.ColumnNotFound):
            t.scan_table(["v"])
    with open_cat(tmp_path) as cat:
        t = cat.table("t")
        assert t.lookup((7, "s2"), ["val"]) == {"val": 5}
        assert t.count_rows(predicates=[P.equal("val", 1)]) == 199


def test_dropped_tablets_outlive_open_scans(tmp_path):
    with open_cat(tmp_path) as cat:
        s = schema()
        cat.create_table("t", s, hash_range(s))
        t = cat.table("t")
        t.insert(rows(range(200)))
        cat.tablet(cat.get_table("t").tablet_ids[0]).flush_mrs()
        scan = t.scan(["id"])
        first = next(scan)
        cat.drop_table("t")
        assert len(tablet_dirs(tmp_path)) == 4  # still being read
        with pytest.raises(errors.NotFound):
            t.count_rows()
        n = first.num_rows + sum(b.num_rows for b in scan)
        assert n == 200
        assert tablet_dirs(tmp_path) == set()  # deleted when the scan ended
        # an abandoned scan releases its tablets too (close, or garbage collection)
        cat.create_table("t", s, hash_range(s))
        scan = cat.table("t").scan()
        cat.drop_table("t")
        assert len(tablet_dirs(tmp_path)) == 4
        scan.close()
        assert tablet_dirs(tmp_path) == set()
