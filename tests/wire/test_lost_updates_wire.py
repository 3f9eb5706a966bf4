"""No lost updates over the wire (psycopg against the real server): concurrent
`UPDATE t SET n = n + 1 WHERE k = $1` from several connections, prepared (extended
protocol), in autocommit and inside BEGIN ... COMMIT blocks; the final n of each key
equals the updates acknowledged for it. In autocommit the key-write fast path
(wire/fastpath.py `key_write`) takes them: its write carries the snapshot its point
read used as the row's read precondition, and a row changed meanwhile (an earlier
increment still waiting for its fsync is in flight, not in that snapshot) goes back to
the ordinary path, which re-reads it (planner/dml.py); the test asserts both happened."""

from __future__ import annotations

import random
import threading

import psycopg
import pytest

from session.frontdoor import Statement
from tests.wire.conftest import record_answers
from wire import fastpath

THREADS = 5
PER_THREAD = 40
KEYS = [1, 2]


@pytest.fixture(scope="module")
def table(server):
    s = server.db.session()
    s.execute("CREATE TABLE lu (k BIGINT PRIMARY KEY, n BIGINT NOT NULL, v STRING) "
              "PARTITION BY HASH (k) PARTITIONS 2")
    return "lu"


def _reset(server):
    s = server.db.session()
    s.execute("UPSERT INTO lu VALUES (1, 0, 'x'), (2, 0, 'x')")


def _final(server) -> dict:
    r = server.db.session().execute_one("SELECT k, n FROM lu")
    return dict(zip(r.table.column("k").to_pylist(), r.table.column("n").to_pylist()))


def _hammer(dsn, seed, acked, errors, in_tx: bool):
    rng = random.Random(seed)
    with psycopg.connect(dsn, autocommit=not in_tx, prepare_threshold=0) as c:
        for _ in range(PER_THREAD // (2 if in_tx else 1)):
            ks = [rng.choice(KEYS) for _ in range(2 if in_tx else 1)]
            counts = []
            try:
                for k in ks:
                    cur = c.execute("UPDATE lu SET n = n + 1 WHERE k = %s", (k,))
                    counts.append(cur.rowcount)
                if in_tx:
                    c.commit()
            except psycopg.Error as e:
                errors.append(e.sqlstate)
                if in_tx:
                    c.rollback()     # statements that ran stay applied (docs/sql.md)
                for k, n in zip(ks, counts):
                    acked[k] += n
                continue
            for k, n in zip(ks, counts):
                acked[k] += n


def _count_fallbacks(monkeypatch) -> list:
    """Wrap the fast path's reply step: one entry per key write it handed back to the
    ordinary path because the row changed since its read."""
    fallbacks: list = []
    real = fastpath._key_write_done

    def counting(be, *args):
        yield from real(be, *args)
        if be.batch_off:
            fallbacks.append(1)
    monkeypatch.setattr(fastpath, "_key_write_done", counting)
    return fallbacks


@pytest.mark.parametrize("in_tx", [False, True], ids=["autocommit", "transaction"])
def test_concurrent_increments_over_the_wire(server, table, in_tx, monkeypatch):
    _reset(server)
    taken = record_answers(monkeypatch, fastpath, "key_write")
    fallbacks = _count_fallbacks(monkeypatch)
    per = [dict.fromkeys(KEYS, 0) for _ in range(THREADS)]
    errors: list = []
    threads = [threading.Thread(target=_hammer, args=(server.dsn(), i, per[i], errors, in_tx))
               for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(errors) <= {"40001"}
    acked = {k: sum(p[k] for p in per) for k in KEYS}
    assert _final(server) == acked
    if not in_tx:       # the fast path took increments, and handed changed rows back
        assert any(taken) and fallbacks, (sum(taken), len(fallbacks))


def test_key_write_fast_path_takes_writes_that_read_the_row():
    """The key-write fast path takes `SET n = n + 1` (it writes under a read precondition
    and leaves a changed row to the ordinary path); a subquery goes the ordinary way."""
    def shape(sql):
        return Statement(sql, 0).key_write_shape()
    assert shape("UPDATE lu SET v = $2 WHERE k = $1") == ("UPDATE", ["v"])
    assert shape("UPDATE lu SET v = DEFAULT WHERE k = $1") == ("UPDATE", ["v"])
    assert shape("UPDATE lu SET n = n + 1 WHERE k = $1") == ("UPDATE", ["n"])
    assert shape("UPDATE lu SET n = (SELECT max(n) FROM lu) WHERE k = $1") is None
    assert shape("DELETE FROM lu WHERE k = $1") == ("DELETE", [])
