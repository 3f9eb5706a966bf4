"""ALTER TABLE on a real cluster (master, 3 tablet servers, SQL front end as processes):
properties and comments, range partitions, columns. Every wait is bounded; the cluster is
stopped (and every process killed) whatever happens."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.cluster.conftest import LocalCluster, _run


@pytest.fixture(scope="module")
def mcluster(tmp_path_factory):
    """One cluster for the module (starting one costs seconds on a loaded machine)."""
    yield from _run(LocalCluster(str(tmp_path_factory.mktemp("alter") / "cluster")))


def _show_create(conn, table: str) -> str:
    return conn.execute(f"SHOW CREATE TABLE {table}").fetchone()[0]


def _error(conn, sql: str) -> psycopg.Error:
    try:
        conn.execute(sql)
    except psycopg.Error as e:
        return e
    raise AssertionError(f"accepted: {sql}")


def test_properties_and_comment(mcluster):
    from kudusql.cluster import remote_catalog_for
    with mcluster.connect() as conn:
        conn.execute("CREATE TABLE p (k BIGINT PRIMARY KEY, v TEXT) "
                     "PARTITION BY HASH (k) PARTITIONS 2 WITH (replication_factor = 3)")
        conn.execute("INSERT INTO p VALUES (1, 'a')")
        conn.execute("ALTER TABLE p SET TBLPROPERTIES ('a' = '1', 'b' = '2')")
        conn.execute("COMMENT ON TABLE p IS 'hello'")
        conn.execute("ALTER TABLE p UNSET TBLPROPERTIES ('a')")
        text = _show_create(conn, "p")
        assert "COMMENT 'hello'" in text and "'b'='2'" in text and "'a'=" not in text
        e = _error(conn, "ALTER TABLE p UNSET TBLPROPERTIES ('nope')")
        assert e.sqlstate == "42704"
        e = _error(conn, "ALTER TABLE nope SET TBLPROPERTIES ('a' = '1')")
        assert e.sqlstate == "42P01"
        e = _error(conn, "ALTER TABLE p SET TBLPROPERTIES ('kudu.num_tablet_replicas' = '1')")
        assert e.sqlstate == "0A000"
        assert conn.execute("SELECT v FROM p").fetchall() == [("a",)]
    # another client (as another front end would) reads the master's entry
    cat = remote_catalog_for(mcluster.dir, timeout_s=10)
    try:
        meta = cat.get_table("p")
        assert meta.comment == "hello"
        assert meta.properties.get("b") == "2" and "a" not in meta.properties
    finally:
        cat.close()
    with mcluster.connect() as conn:
        conn.execute("ALTER TABLE p UNSET TBLPROPERTIES ('comment')")
        assert "COMMENT" not in _show_create(conn, "p")


def _tserver_tablets(c: LocalCluster) -> dict[str, set[str]]:
    """tablet id -> uuids of the tablet servers holding a replica (their own status)."""
    from kudusql.cluster import rpc_client_for
    rpc = rpc_client_for(c.dir, 5)
    out: dict[str, set[str]] = {}
    try:
        for p in c.processes():
            if p["role"] == "tserver":
                st = rpc.call(p["addr"], "status", timeout_s=5)
                for tid in st["tablets"]:
                    out.setdefault(tid, set()).add(st["uuid"])
    finally:
        rpc.close()
    return out


def _embedded_error(tmp_path, statements: list[str], failing: str) -> tuple[str, str]:
    """(sqlstate, message) of `failing` run embedded after `statements`."""
    import tempfile
    import kudusql
    conn = kudusql.connect(tempfile.mkdtemp(dir=tmp_path))
    try:
        cur = conn.cursor()
        for s in statements:
            cur.execute(s)
        try:
            cur.execute(failing)
        except kudusql.dbapi.Error as e:
            return e.sqlstate, str(e)
        raise AssertionError(f"embedded accepted {failing}")
    finally:
        conn.close()


RANGED = ("CREATE TABLE r (k BIGINT PRIMARY KEY, v TEXT) PARTITION BY HASH (k) PARTITIONS 2, "
          "RANGE (k) (PARTITION 0 <= VALUES < 100)")


def test_add_and_drop_range_partition(mcluster, tmp_path):
    from kudusql.cluster import remote_catalog_for
    c = mcluster
    with c.connect() as conn:
        conn.execute(RANGED + " WITH (replication_factor = 3)")
        conn.execute("INSERT INTO r SELECT x, 'a' FROM generate_series(0, 99) g(x)")
        # a key no range covers: the same per-row error as embedded
        want = _embedded_error(tmp_path, [RANGED], "INSERT INTO r VALUES (150, 'x')")
        e = _error(conn, "INSERT INTO r VALUES (150, 'x')")
        assert (e.sqlstate, want[0]) == (want[0], e.sqlstate)
        assert "no range partition" in str(e) and "no range partition" in want[1]
        old_tablets = {row[0] for row in conn.execute("SHOW TABLETS r").fetchall()}
        assert len(old_tablets) == 2
        conn.execute("ALTER TABLE r ADD RANGE PARTITION 100 <= VALUES < 200")
        conn.execute("INSERT INTO r SELECT x, 'b' FROM generate_series(100, 199) g(x)")
        assert conn.execute("SELECT count(*), min(k), max(k) FROM r").fetchone() == (200, 0, 199)
        rows = conn.execute("SHOW TABLETS r").fetchall()
        assert len({row[0] for row in rows}) == 4 and len(rows) == 12  # 4 tablets x RF 3
        assert sum(1 for row in rows if row[5] == "LEADER") == 4
        assert _error(conn, "ALTER TABLE r ADD RANGE PARTITION 100 <= VALUES < 200"
                      ).sqlstate == "42710"
        conn.execute("ALTER TABLE r ADD IF NOT EXISTS RANGE PARTITION 100 <= VALUES < 200")
        e = _error(conn, "ALTER TABLE r ADD RANGE PARTITION 150 <= VALUES < 250")
        assert "conflicts" in str(e)
        # a front end holding the table from before the DROP (another process would)
        other = remote_catalog_for(c.dir, timeout_s=15)
        try:
            stale = other.table("r")
            assert stale.count_rows() == 200
            conn.execute("ALTER TABLE r DROP RANGE PARTITION 0 <= VALUES < 100")
            assert conn.execute("SELECT count(*), min(k) FROM r").fetchone() == (100, 100)
            want = _embedded_error(tmp_path, [RANGED, "ALTER TABLE r DROP RANGE PARTITION "
                                                      "0 <= VALUES < 100"],
                                   "INSERT INTO r VALUES (5, 'x')")
            e = _error(conn, "INSERT INTO r VALUES (5, 'x')")
            assert e.sqlstate == want[0] and "no range partition" in str(e)
            # the stale Table routes a row to a dropped tablet: a clear error, nothing
            # written; the statement run again (metadata refreshed) gets the per-row error
            t0 = time.monotonic()
            with pytest.raises(Exception) as ei:
                stale.insert({"k": [7], "v": ["stale"]})
            assert getattr(ei.value, "sqlstate", None) == "40001", ei.value
            assert "dropped" in str(ei.value) and time.monotonic() - t0 < 10
            r = other.table("r").insert({"k": [7], "v": ["fresh"]})
            assert not r.ok and "no range partition" in r.row_errors[0].message
        finally:
            other.close()
        assert _error(conn, "ALTER TABLE r DROP RANGE PARTITION 0 <= VALUES < 100"
                      ).sqlstate == "42704"
        conn.execute("ALTER TABLE r DROP IF EXISTS RANGE PARTITION 0 <= VALUES < 100")
        assert conn.execute("SELECT count(*) FROM r").fetchone() == (100,)
    # the dropped range's replicas leave the tablet servers
    deadline = time.monotonic() + 20
    while True:
        held = _tserver_tablets(c)
        if not any(t in held for t in old_tablets):
            break
        assert time.monotonic() < deadline, f"replicas of dropped tablets remain: {held}"
        time.sleep(0.3)
    with c.connect() as conn:  # a range added again is empty
        conn.execute("ALTER TABLE r ADD RANGE PARTITION 0 <= VALUES < 100")
        conn.execute("INSERT INTO r VALUES (5, 'again')")
        assert conn.execute("SELECT k, v FROM r WHERE k < 100").fetchall() == [(5, "again")]
