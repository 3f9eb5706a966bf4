"""A target row deleted after an UPDATE / DELETE's snapshot is skipped, even if a row of its
key was inserted since - as PostgreSQL's READ COMMITTED does it (planner/dml.py,
engine/tablet/row_check.py GONE); a row only *updated* since is read again and written.

PostgreSQL's behaviour, which each test runs on a real PostgreSQL 15 and compares with:

  - session A: BEGIN; DELETE FROM t WHERE k = 1; INSERT INTO t VALUES (1, 100)
  - session B: UPDATE t SET n = n + 1 WHERE k = 1   -- its snapshot sees the old (1, 0);
                                                     -- it waits for A's row lock
  - A: COMMIT. B finds the tuple it waited for *deleted* (not updated: no newer version to
    follow), skips it: UPDATE 0. The row A inserted is another tuple, which B's snapshot
    does not see. (1, 100) stays. The same for B's DELETE: DELETE 0, (1, 100) stays.
  - had A *updated* the row (n = n + 10), B would follow the update chain, re-check its
    WHERE on the newest version and write n = 11: UPDATE 1.

kudusql has no row locks: B reads at S, A's statements commit, B's write finds the row
deleted since S (its precondition fails as NOT_FOUND) and skips it, or updated since S
(CHANGED) and reads it again. The interleaving is made deterministic by running A's
statements just before B's first write (a wrapper of planner/dml.py's apply functions).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time

import psycopg
import pytest

import kudusql
from bench.wire_bench import Postgres, find_postgres
from kudusql.dbapi import Connection
from planner import dml

A_DELETES_AND_REINSERTS = ["DELETE FROM t WHERE k = 1", "INSERT INTO t VALUES (1, 100)"]
A_UPDATES = ["UPDATE t SET n = n + 10 WHERE k = 1"]
B_UPDATE = "UPDATE t SET n = n + 1 WHERE k = 1"
B_DELETE = "DELETE FROM t WHERE k = 1"
SETUP = ["CREATE TABLE t (k BIGINT PRIMARY KEY, n BIGINT)", "INSERT INTO t VALUES (1, 0)"]


@pytest.fixture(scope="module")
def pg():
    bindir = find_postgres()
    if bindir is None:
        pytest.skip("PostgreSQL binaries not installed")
    root = tempfile.mkdtemp(prefix="kudusql-pg-lost-updates-")
    server = Postgres(root, bindir)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _pg_run(pg, a_statements: list[str], b_statement: str) -> tuple[int, list]:
    """(B's rowcount, the rows after) on PostgreSQL: A's statements in an open transaction,
    B's statement started and blocked on A's row lock, then A commits."""
    kw = {"host": pg.kw["host"], "port": pg.kw["port"], "user": pg.kw["user"],
          "dbname": pg.kw["database"]}
    a = psycopg.connect(**kw)
    b = psycopg.connect(**kw, autocommit=True)
    watch = psycopg.connect(**kw, autocommit=True)  # outside A's transaction: a fresh
    try:                                            # pg_stat_activity each time
        with a.transaction():
            a.execute("DROP TABLE IF EXISTS t")
            for s in SETUP:
                a.execute(s)
        for s in a_statements:          # A's transaction stays open
            a.execute(s)
        out = {}
        bpid = b.info.backend_pid
        th = threading.Thread(target=lambda: out.update(n=b.execute(b_statement).rowcount))
        th.start()
        deadline = time.monotonic() + 30
        while True:                     # B waits for A's row lock
            waiting = watch.execute("SELECT wait_event_type FROM pg_stat_activity "
                                    "WHERE pid = %s", (bpid,)).fetchone()
            if waiting and waiting[0] == "Lock":
                break
            assert time.monotonic() < deadline, "B never waited for A's lock"
            time.sleep(0.02)
        a.commit()
        th.join(30)
        rows = a.execute("SELECT k, n FROM t ORDER BY k").fetchall()
        a.commit()
        return out["n"], rows
    finally:
        a.close()
        b.close()
        watch.close()


def _kudusql_run(tmp_path, monkeypatch, a_statements: list[str], b_statement: str
                 ) -> tuple[int, list]:
    """The same on kudusql: A's statements commit between B's read and B's first write."""
    c = kudusql.connect(str(tmp_path / "db"))
    other = Connection(c.database, owns=False)
    try:
        cur = c.cursor()
        for s in SETUP:
            cur.execute(s)
        inner = []

        def racing(real):
            def write(*args, **kw):
                if not inner:               # B's first write: A goes first
                    inner.append(1)
                    for s in a_statements:
                        other.cursor().execute(s)
                return real(*args, **kw)
            return write
        monkeypatch.setattr(dml, "apply_update", racing(dml.apply_update))
        monkeypatch.setattr(dml, "apply_delete", racing(dml.apply_delete))
        cur.execute(b_statement)
        assert inner, "A's statements did not run between B's read and write"
        n = cur.rowcount
        monkeypatch.undo()
        cur.execute("SELECT k, n FROM t ORDER BY k")
        return n, [tuple(r) for r in cur.fetchall()]
    finally:
        other.close()
        c.close()


@pytest.mark.parametrize("b_statement", [B_UPDATE, B_DELETE], ids=["update", "delete"])
def test_row_deleted_and_reinserted_since_the_snapshot_is_skipped(pg, tmp_path,
                                                                  monkeypatch, b_statement):
    theirs = _pg_run(pg, A_DELETES_AND_REINSERTS, b_statement)
    assert theirs == (0, [(1, 100)])        # PostgreSQL skips it (module docstring)
    assert _kudusql_run(tmp_path, monkeypatch, A_DELETES_AND_REINSERTS, b_statement) == theirs


def test_row_updated_since_the_snapshot_is_written_again(pg, tmp_path, monkeypatch):
    theirs = _pg_run(pg, A_UPDATES, B_UPDATE)
    assert theirs == (1, [(1, 11)])         # PostgreSQL follows the update
    assert _kudusql_run(tmp_path, monkeypatch, A_UPDATES, B_UPDATE) == theirs
