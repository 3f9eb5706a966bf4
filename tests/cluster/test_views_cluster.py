"""Views on a cluster: stored in the masters' replicated sys catalog (put_view / drop_views
entries), so they outlive a kill -9 of the leader master and a restart of the cluster, and
the dependency rules (2BP01) are the master's."""

from __future__ import annotations

import os
import signal

import psycopg
import pytest


def test_views_survive_leader_master_failover_and_restart(cluster3m):
    c = cluster3m
    with c.connect() as conn:
        conn.execute("CREATE TABLE m (host STRING, ts TIMESTAMP, v DOUBLE, "
                     "PRIMARY KEY (host, ts)) WITH (replication_factor = 3)")
        conn.execute("INSERT INTO m VALUES ('a', '2026-01-01 00:10', 1), "
                     "('a', '2026-01-01 00:20', 3), ('b', '2026-01-01 02:00', 5)")
        conn.execute("CREATE VIEW hourly AS SELECT host, date_trunc('hour', ts) AS h, "
                     "sum(v) AS s FROM m GROUP BY 1, 2")
    masters = [p for p in c.status() if p["role"] == "master"]
    leader = next(p for p in masters if p.get("raft_role") == "LEADER")
    os.kill(leader["pid"], signal.SIGKILL)
    with c.connect() as conn:
        # the new leader master has the view; DDL on it goes through the new leader
        assert conn.execute("SELECT host, s FROM hourly ORDER BY host").fetchall() == \
            [("a", 4.0), ("b", 5.0)]
        conn.execute("CREATE VIEW busy AS SELECT host FROM hourly WHERE s > 4")
        with pytest.raises(psycopg.errors.DependentObjectsStillExist) as e:
            conn.execute("DROP TABLE m")
        assert e.value.diag.message_detail == "view hourly depends on table m"
        with pytest.raises(psycopg.errors.DuplicateTable):
            conn.execute("CREATE TABLE busy (k INT PRIMARY KEY)")
    c.stop()
    c.start(first=False)
    with c.connect() as conn:
        assert conn.execute("SELECT host FROM busy").fetchall() == [("b",)]
        assert conn.execute("SELECT viewname FROM pg_views ORDER BY 1").fetchall() == \
            [("busy",), ("hourly",)]
        conn.execute("DROP TABLE m CASCADE")
        assert conn.execute("SELECT count(*) FROM pg_views").fetchone()[0] == 0
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM busy")


def test_views_follow_a_table_rename_on_a_cluster(cluster):
    # the master commits the rename and the rewritten views in one sys catalog entry
    # (put_table with views); a restart replays it
    c = cluster
    with c.connect() as conn:
        conn.execute("CREATE TABLE m (host STRING PRIMARY KEY, v DOUBLE)")
        conn.execute("INSERT INTO m VALUES ('a', 1), ('b', 5)")
        conn.execute("CREATE VIEW big AS SELECT m.host FROM m WHERE m.v > 2")
        conn.execute("CREATE VIEW bigger AS SELECT host FROM big")
        conn.execute("ALTER TABLE m RENAME TO metrics")
        assert conn.execute("SELECT * FROM bigger").fetchall() == [("b",)]
        with pytest.raises(psycopg.errors.DependentObjectsStillExist) as e:
            conn.execute("DROP TABLE metrics")
        assert e.value.diag.message_detail == "view big depends on table metrics"
        with pytest.raises(psycopg.errors.DependentObjectsStillExist):
            conn.execute("ALTER TABLE metrics RENAME COLUMN v TO value")
    c.stop()
    c.start(first=False)
    with c.connect() as conn:
        assert conn.execute("SELECT * FROM big").fetchall() == [("b",)]
        assert "metrics" in conn.execute(
            "SELECT definition FROM pg_views WHERE viewname = 'big'").fetchone()[0]
