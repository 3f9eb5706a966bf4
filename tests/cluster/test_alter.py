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
