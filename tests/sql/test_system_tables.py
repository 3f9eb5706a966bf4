"""kudu_system.servers / kudu_system.replicas in embedded mode (one server, every tablet's
one replica); the cluster side is tests/cluster/test_ops.py."""

from __future__ import annotations

import pytest

import kudusql


@pytest.fixture
def conn(tmp_path):
    c = kudusql.connect(str(tmp_path / "db"))
    try:
        yield c
    finally:
        c.close()


def _rows(conn, sql):
    cur = conn.cursor()
    cur.execute(sql)
    return cur.fetchall()


def test_embedded_server_and_replicas(conn):
    cur = conn.cursor()
    cur.execute("CREATE TABLE a (k BIGINT PRIMARY KEY, v TEXT) PARTITION BY HASH (k) "
                "PARTITIONS 3")
    cur.execute("CREATE TABLE b (k INT PRIMARY KEY)")
    assert _rows(conn, "SELECT uuid, role, rpc_addr, live, replicas, leaders "
                       "FROM kudu_system.servers") == [("embedded", "embedded", None, True, 4, 4)]
    reps = _rows(conn, "SELECT table_name, partition, server_uuid, role, state "
                       "FROM kudu_system.replicas ORDER BY table_name, partition")
    assert [(r[0], r[1]) for r in reps] == [("a", "HASH(k): 0"), ("a", "HASH(k): 1"),
                                            ("a", "HASH(k): 2"), ("b", "UNPARTITIONED")]
    assert {(r[2], r[3]) for r in reps} == {("embedded", "LEADER")}
    assert {r[4] for r in reps} <= {"RUNNING", "CLOSED"}
    cur.execute("INSERT INTO b VALUES (1)")   # opens b's tablet
    assert _rows(conn, "SELECT state FROM kudu_system.replicas WHERE table_name = 'b'") == \
        [("RUNNING",)]
    # tablet ids agree with SHOW TABLETS, whose embedded output is unchanged
    show = {r[0] for r in _rows(conn, "SHOW TABLETS a")}
    assert show == {r[0] for r in _rows(
        conn, "SELECT tablet_id FROM kudu_system.replicas WHERE table_name = 'a'")}


def test_system_tables_are_read_only_and_named(conn):
    cur = conn.cursor()
    cases = [("SELECT * FROM kudu_system.nothing", "42P01"),
             ("DROP TABLE kudu_system.servers", "42501"),
             ("INSERT INTO kudu_system.servers (uuid) VALUES ('x')", "42809"),
             ("DELETE FROM kudu_system.replicas", "42809")]
    for sql, state in cases:
        with pytest.raises(kudusql.Error) as e:
            cur.execute(sql)
        assert e.value.sqlstate == state, (sql, e.value)
        assert "System" not in str(e.value) and "Error" not in str(e.value)
    # a user table may be called `servers`: a bare name never means the system table
    cur.execute("CREATE TABLE servers (k INT PRIMARY KEY)")
    assert _rows(conn, "SELECT count(*) FROM servers") == [(0,)]
    assert _rows(conn, "SELECT count(*) FROM kudu_system.servers") == [(1,)]
