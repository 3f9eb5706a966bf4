"""No lost updates on an RF=3 cluster: concurrent `UPDATE t SET n = n + 1 WHERE k = $1`
through the SQL front end (psycopg, several connections) on a few hot keys; the final n
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
