"""No lost updates on an RF=3 cluster: concurrent `UPDATE t SET n = n + 1 WHERE k = $1`
and `INSERT ... ON CONFLICT (k) DO UPDATE SET n = t.n + 1 RETURNING n` through the SQL
front end (psycopg, several connections) on a few hot keys; the final n
equals the acknowledged updates, and every replica holds the same value (the read
precondition travels in the Raft log and each replica decides it alike at apply:
engine/tablet/row_check.py)."""

from __future__ import annotations

import random
import threading

import psycopg

THREADS = 4
PER_THREAD = 25
KEYS = [1, 2]


def test_concurrent_increments_on_a_cluster(cluster):
    with cluster.connect() as c:
        c.execute("CREATE TABLE lu (k BIGINT PRIMARY KEY, n BIGINT NOT NULL) "
                  "PARTITION BY HASH (k) PARTITIONS 2 WITH (replication_factor = 3)")
        c.execute("INSERT INTO lu VALUES (1, 0), (2, 0)")
    per = [dict.fromkeys(KEYS, 0) for _ in range(THREADS)]
    errors: list = []

    def hammer(i):
        rng = random.Random(i)
        with cluster.connect() as c:
            c.prepare_threshold = 0
            for _ in range(PER_THREAD):
                k = rng.choice(KEYS)
                try:
                    if i % 2:       # PostgreSQL's upsert: planner/on_conflict.py's rounds
                        cur = c.execute("INSERT INTO lu VALUES (%s, 1) ON CONFLICT (k) DO "
                                        "UPDATE SET n = lu.n + 1 RETURNING n", (k,))
                        assert len(cur.fetchall()) == cur.rowcount
                    else:
                        cur = c.execute("UPDATE lu SET n = n + 1 WHERE k = %s", (k,))
                except psycopg.Error as e:
                    errors.append(e.sqlstate)
                    continue
                per[i][k] += cur.rowcount

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(errors) <= {"40001"}
    acked = {k: sum(p[k] for p in per) for k in KEYS}
    with cluster.connect() as c:
        final = dict(c.execute("SELECT k, n FROM lu").fetchall())
    assert final == acked
    assert sum(acked.values()) + len(errors) == THREADS * PER_THREAD


def test_checked_write_outcomes_on_a_cluster(cluster):
    """The read precondition's three outcomes through the client library on an RF=3 cluster
    (the code each row error carries over RPC, decided at apply from the Raft log): a row
    unchanged since S is written; one updated since S is CHANGED (read it again); one
    deleted and inserted again since S is NOT_FOUND, "row deleted since it was read" (the
    SQL layer skips it, as PostgreSQL does: tests/sql/test_lost_updates_pg.py)."""
    import pyarrow as pa

    from engine.tablet.write_op import READ_TS_COLUMN
    from kudusql.cluster import remote_catalog_for
    with cluster.connect() as c:
        c.execute("CREATE TABLE pc (k BIGINT PRIMARY KEY, n BIGINT) "
                  "PARTITION BY HASH (k) PARTITIONS 2 WITH (replication_factor = 3)")
        c.execute("INSERT INTO pc VALUES (1, 0), (2, 0), (3, 0)")
    cat = remote_catalog_for(cluster.dir, timeout_s=30)
    try:
        t = cat.table("pc")
        s = t.current_timestamp()
        with cluster.connect() as c:
            c.execute("UPDATE pc SET n = 5 WHERE k = 2")
            c.execute("DELETE FROM pc WHERE k = 3")
            c.execute("INSERT INTO pc VALUES (3, 9)")
        outcomes = {}
        for k in (1, 2, 3):
            r = t.update(pa.table({"k": pa.array([k], pa.int64()),
                                   "n": pa.array([100], pa.int64()),
                                   READ_TS_COLUMN: pa.array([s], pa.int64())}))
            outcomes[k] = (r.num_applied, [(e.code, e.message) for e in r.row_errors])
        assert outcomes == {1: (1, []), 2: (0, [("CHANGED", "row changed since it was read")]),
                            3: (0, [("NOT_FOUND", "row deleted since it was read")])}
        with cluster.connect() as c:
            assert dict(c.execute("SELECT k, n FROM pc").fetchall()) == {1: 100, 2: 5, 3: 9}
    finally:
        cat.close()
