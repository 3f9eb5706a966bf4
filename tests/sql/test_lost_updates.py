"""No lost updates: UPDATE / DELETE re-read rows changed since their read (planner/dml.py,
engine/tablet/row_check.py), as PostgreSQL's READ COMMITTED does.

Real concurrency: several threads, each with its own DB-API connection to one embedded
database, run many `UPDATE t SET n = n + 1 WHERE k = $1` on a few hot keys (prepared, so
the point-read route runs, and with a WHERE that is not a point read, so the scan route
runs); the final n of every key must equal the number of updates acknowledged with
rowcount 1 for it. A history check follows the same increments through the table's
change feed: every acknowledged increment is one committed version, n+1 over the last.
"""

from __future__ import annotations

import random
import threading

import pytest

import kudusql
from kudusql.dbapi import Connection
from planner import dml

THREADS = 6
PER_THREAD = 60
KEYS = [1, 2, 3]


@pytest.fixture
def db(tmp_path):
    c = kudusql.connect(str(tmp_path / "db"))
    c.cursor().execute("CREATE TABLE t (k BIGINT PRIMARY KEY, n BIGINT NOT NULL, tag STRING) "
                       "PARTITION BY HASH (k) PARTITIONS 2")
    c.cursor().execute("INSERT INTO t VALUES (1, 0, 'a'), (2, 0, 'a'), (3, 0, 'b')")
    yield c
    c.close()


def _other(c):
    """Another connection (its own session) to the same embedded database."""
    return Connection(c.database, owns=False)


def _hammer(main, statements, seed, acked, errors):
    rng = random.Random(seed)
    c = _other(main)
    try:
        cur = c.cursor()
        for _ in range(PER_THREAD):
            k = rng.choice(KEYS)
            sql, params = rng.choice(statements)(k)
            try:
                cur.execute(sql, params)
            except kudusql.Error as e:        # 40001 after the re-read rounds: not acked
                errors.append(getattr(e, "sqlstate", None))
                continue
            acked[k] += cur.rowcount
    finally:
        c.close()


def _run(main, statements):
    acked = {k: 0 for k in KEYS}
    errors: list = []
    threads = [threading.Thread(target=_hammer, args=(main, statements, i, acked_i, errors))
               for i, acked_i in enumerate([dict.fromkeys(KEYS, 0) for _ in range(THREADS)])]
    per = [t._args[3] for t in threads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in per:
        for k in KEYS:
            acked[k] += p[k]
    return acked, errors


def _final(c) -> dict:
    cur = c.cursor()
    cur.execute("SELECT k, n FROM t")
    return dict(cur.fetchall())


POINT = lambda k: ("UPDATE t SET n = n + 1 WHERE k = %s", (k,))            # noqa: E731
SCAN = lambda k: ("UPDATE t SET n = n + 1 WHERE k = %s AND tag IS NOT NULL", (k,))  # noqa
LITERAL = lambda k: (f"UPDATE t SET n = n + 1 WHERE k IN ({k})", None)        # noqa: E731


@pytest.mark.parametrize("statements", [[POINT], [SCAN], [POINT, SCAN, LITERAL]],
                         ids=["point", "scan", "mixed"])
def test_concurrent_increments_are_not_lost(db, statements):
    c = db
    acked, errors = _run(c, statements)
    assert set(errors) <= {"40001"}
    assert sum(acked.values()) + len(errors) == THREADS * PER_THREAD
    assert _final(c) == acked


def test_increments_leave_a_history_of_one_step_each(db):
    """History check: the change feed holds one committed version per acknowledged
    increment of each key, each n one more than the one before."""
    c = db
    t = c.database.catalog.table("t")
    start = t.current_timestamp()
    acked, _ = _run(c, [POINT])
    changes = t.changes(start, t.current_timestamp(), ["n"])
    assert not any(changes.column("is_deleted").to_pylist())
    for k in KEYS:
        ns = [n for kk, n, _ in sorted(zip(changes.column("k").to_pylist(),
                                           changes.column("n").to_pylist(),
                                           changes.column("commit_ts").to_pylist()),
                                       key=lambda r: r[2]) if kk == k]
        # in commit order: 1, 2, ..., acked - one version per acknowledged increment
        assert ns == list(range(1, acked[k] + 1))


def test_concurrent_delete_and_update(db):
    """UPDATEs racing DELETEs and re-INSERTs of the same keys: an UPDATE counted 1 has
    written n + 1 over the version it found; a deleted row is skipped, not counted."""
    c = db
    stop = threading.Event()
    deleted = {k: 0 for k in KEYS}

    def churn():
        cc = _other(c)
        rng = random.Random(99)
        cur = cc.cursor()
        try:
            while not stop.is_set():
                k = rng.choice(KEYS)
                cur.execute("DELETE FROM t WHERE k = %s", (k,))
                deleted[k] += cur.rowcount
                cur.execute("INSERT INTO t VALUES (%s, 0, 'c')", (k,))
        finally:
            cc.close()

    th = threading.Thread(target=churn)
    th.start()
    try:
        acked, errors = _run(c, [POINT, SCAN])
    finally:
        stop.set()
        th.join()
    assert set(errors) <= {"40001"}
    final = _final(c)
    # every key ends live (the churn re-inserts it) with n = the increments acknowledged
    # after its last re-insertion: at most what was acknowledged in all
    for k in KEYS:
        assert 0 <= final[k] <= acked[k]


def test_changed_rows_are_read_again_and_rechecked(tmp_path, monkeypatch):
    """Deterministic: another session changes the row between this UPDATE's read and its
    write; the write is refused (CHANGED), the row is read again, its WHERE checked again
    on the new version (no longer matching: skipped, not counted) or SET recomputed."""
    c = kudusql.connect(str(tmp_path / "db"))
    other = _other(c)
    cur = c.cursor()
    cur.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, n BIGINT, tag STRING)")
    cur.execute("INSERT INTO t VALUES (1, 0, 'a'), (2, 0, 'a')")
    real = dml.apply_update
    calls, inner = [], []

    def racing(table, tnode, names, rows, read_ts=None, *rest):
        if inner:               # the other session's own UPDATE
            return real(table, tnode, names, rows, read_ts, *rest)
        if not calls:           # this UPDATE's first write: another statement commits first
            inner.append(1)
            other.cursor().execute("UPDATE t SET n = n + 10, tag = 'b' WHERE k = 1")
            inner.clear()
        calls.append(rows.num_rows)
        return real(table, tnode, names, rows, read_ts, *rest)

    monkeypatch.setattr(dml, "apply_update", racing)
    cur.execute("UPDATE t SET n = n + 1 WHERE tag = 'a'")
    assert cur.rowcount == 1            # k = 1 no longer has tag 'a': skipped on re-read
    assert calls == [2]
    assert _final(c) == {1: 10, 2: 1}
    calls.clear()
    cur.execute("UPDATE t SET n = n + 1 WHERE k >= 1")   # SET recomputed on the new row
    assert cur.rowcount == 2 and calls == [2, 1]
    assert _final(c) == {1: 21, 2: 2}
    other.close()
    c.close()


def test_rows_that_keep_changing_fail_with_40001(tmp_path, monkeypatch):
    c = kudusql.connect(str(tmp_path / "db"))
    other = _other(c)
    cur = c.cursor()
    cur.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, n BIGINT)")
    cur.execute("INSERT INTO t VALUES (1, 0)")
    real = dml.apply_update
    monkeypatch.setattr(dml, "MAX_REREAD_ROUNDS", 3)

    inner = []

    def always_racing(table, tnode, names, rows, read_ts=None, *rest):
        if not inner:           # before each of this UPDATE's writes, another commits
            inner.append(1)
            try:
                other.cursor().execute("UPDATE t SET n = n + 100 WHERE k = 1")
            finally:
                inner.clear()
        return real(table, tnode, names, rows, read_ts, *rest)

    monkeypatch.setattr(dml, "apply_update", always_racing)
    with pytest.raises(kudusql.Error) as ei:
        cur.execute("UPDATE t SET n = n + 1 WHERE k = 1")
    assert ei.value.sqlstate == "40001"
    assert "could not serialize access due to concurrent update" in str(ei.value)
    assert _final(c) == {1: 300}        # the other session's three updates, not ours
    other.close()
    c.close()
