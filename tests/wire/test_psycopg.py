"""psycopg 3 against the real server: non-autocommit transactions (BEGIN sent by the driver,
25P02 after an error), server-side binding with int2/text/OID-0 parameters, prepared
statements after the threshold, binary cursors, server-side (DECLARE) cursors, COPY in
all three formats, conn.cancel()."""

from __future__ import annotations

import datetime as dt
import decimal
import threading
import time

import numpy as np
import psycopg
import pyarrow as pa
import pytest
from psycopg import pq


@pytest.fixture(scope="module")
def table(server):
    s = server.db.session()
    s.execute("CREATE TABLE pc (a INT PRIMARY KEY, b STRING, d DATE, m DECIMAL(12,2), "
              "f DOUBLE, ok BOOLEAN, by BINARY, ts TIMESTAMP) PARTITION BY HASH (a) PARTITIONS 2")
    return "pc"


def test_transactions_parameters_and_status(server, table):
    with psycopg.connect(server.dsn()) as c:
        assert c.info.parameter_status("server_version").startswith("15.")
        assert c.info.parameter_status("integer_datetimes") == "on"
        cur = c.cursor()
        cur.execute("INSERT INTO pc (a, b, d, m, f, ok) VALUES (%s, %s, %s, %s, %s, %s)",
                    (1, "one", dt.date(2024, 1, 2), decimal.Decimal("1.50"), 0.5, True))
        assert c.info.transaction_status == pq.TransactionStatus.INTRANS
        cur.execute("SELECT a, b, d, m, f, ok FROM pc WHERE b = %s", ("one",))
        assert cur.fetchone() == (1, "one", dt.date(2024, 1, 2), decimal.Decimal("1.50"), 0.5,
                                  True)
        cur.execute("SELECT %s::int + 1, %s, %s", (41, "x", None))
        assert cur.fetchone() == (42, "x", None)
        for i in range(7):                     # past psycopg's prepare threshold (5)
            cur.execute("SELECT b FROM pc WHERE a = %s", (1,))
            assert cur.fetchone() == ("one",)
        c.commit()
        assert c.info.transaction_status == pq.TransactionStatus.IDLE
        with pytest.raises(psycopg.errors.UndefinedTable) as ei:
            cur.execute("SELECT * FROM nosuch")
        assert ei.value.diag.statement_position == "15"
        assert c.info.transaction_status == pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            cur.execute("SELECT 1")
        c.rollback()
        with c.transaction(), c.transaction():   # nested: SAVEPOINT / RELEASE
            cur.execute("SELECT 1")
        cur.execute("SELECT count(*) FROM pc")
        assert cur.fetchone() == (1,)


def test_binary_cursor_and_server_side_cursor(server, table):
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.execute("INSERT INTO pc (a, b) VALUES (10, 'ten'), (11, 'eleven'), (12, NULL)")
        with c.cursor(binary=True) as bc:
            bc.execute("SELECT a, b FROM pc WHERE a >= %s ORDER BY a", (10,))
            assert bc.fetchall() == [(10, "ten"), (11, "eleven"), (12, None)]
        with c.transaction(), c.cursor(name="sc") as sc:
            sc.execute("SELECT a, b FROM pc WHERE a >= %s ORDER BY a", (10,))
            assert sc.fetchone() == (10, "ten")
            assert sc.fetchmany(1) == [(11, "eleven")]
            assert sc.fetchall() == [(12, None)]
        with c.cursor(name="held", withhold=True) as sc:   # WITH HOLD outside a block
            sc.execute("SELECT a FROM pc WHERE a >= 10 ORDER BY a")
            assert [r[0] for r in sc] == [10, 11, 12]


def test_copy_text_csv_binary(server, table):
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        cur = c.cursor()
        with cur.copy("COPY pc (a, b, ts) FROM STDIN") as cp:
            cp.write_row((20, "tab\there", dt.datetime(2024, 5, 6, 7, 8, 9)))
            cp.write_row((21, None, None))
            cp.write_row((22, "back\\slash\nnewline", None))
        assert cur.rowcount == 3
        with cur.copy("COPY pc (a, b, f, by) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(["int4", "text", "float8", "bytea"])
            cp.write_row((30, "bin", 2.5, b"\x00\xff"))
            cp.write_row((31, None, None, None))
        cur.execute("SELECT a, b, ts, f, by FROM pc WHERE a IN (20, 21, 22, 30, 31) ORDER BY a")
        assert cur.fetchall() == [
            (20, "tab\there", dt.datetime(2024, 5, 6, 7, 8, 9), None, None),
            (21, None, None, None, None), (22, "back\\slash\nnewline", None, None, None),
            (30, "bin", None, 2.5, b"\x00\xff"), (31, None, None, None, None)]
        with cur.copy("COPY (SELECT a, b FROM pc WHERE a IN (20, 21, 22) ORDER BY a) "
                      "TO STDOUT") as cp:
            cp.set_types(["int4", "text"])
            assert list(cp.rows()) == [(20, "tab\there"), (21, None),
                                       (22, "back\\slash\nnewline")]
        with cur.copy("COPY (SELECT a, b FROM pc WHERE a IN (20, 21) ORDER BY a) TO STDOUT "
                      "(FORMAT CSV, HEADER)") as cp:
            data = b"".join(cp)
        assert data == b'a,b\n20,tab\there\n21,\n'
        with cur.copy("COPY (SELECT a, f, by FROM pc WHERE a = 30) TO STDOUT (FORMAT BINARY)") \
                as cp:
            cp.set_types(["int4", "float8", "bytea"])
            assert list(cp.rows()) == [(30, 2.5, b"\x00\xff")]
        # psycopg sends CopyFail (the server answers 57014) and re-raises the exception
        with pytest.raises(RuntimeError), cur.copy("COPY pc (a) FROM STDIN") as cp:
            cp.write_row((40,))
            raise RuntimeError("client abort")
        cur.execute("SELECT count(*) FROM pc WHERE a = 40")
        assert cur.fetchone() == (0,)


def test_copy_reports_every_failed_row_with_line_numbers(server, table):
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        cur = c.cursor()
        c.execute("INSERT INTO pc (a) VALUES (50), (52)")
        with pytest.raises(psycopg.errors.UniqueViolation) as ei, \
                cur.copy("COPY pc (a, b) FROM STDIN (FORMAT CSV)") as cp:
            cp.write(b"50,x\n51,y\n52,z\nabc,w\n53,v\n")
        e = ei.value
        assert "line 1:" in e.diag.message_primary and "(a)=(50)" in e.diag.message_primary
        assert "(and 2 more failed rows)" in e.diag.message_primary
        detail = e.diag.message_detail        # the other failures, then what was applied
        assert "line 1:" not in detail and "line 3:" in detail and "line 4:" in detail
        assert "abc" in detail and detail.endswith("2 rows were applied (each row is "
                                                   "applied on its own).")
        cur.execute("SELECT a, b FROM pc WHERE a BETWEEN 50 AND 53 ORDER BY a")
        assert cur.fetchall() == [(50, None), (51, "y"), (52, None), (53, "v")]


def test_cancel_gives_57014_and_connection_stays_usable(server):
    s = server.db.session()
    s.execute("CREATE TABLE IF NOT EXISTS big2 (k BIGINT PRIMARY KEY, s STRING) "
              "PARTITION BY HASH (k) PARTITIONS 2")
    n = 1_000_000
    server.db.catalog.table("big2").insert(pa.table({
        "k": np.arange(n), "s": pa.array(np.char.add("x", (np.arange(n) % 977).astype(str))
                                         .tolist())}))
    with psycopg.connect(server.dsn()) as c:
        backend = server.server.connections[c.info.backend_pid].backend

        def cancel_once_running():
            # a CancelRequest that arrives before the statement starts is a no-op (as in
            # PostgreSQL), so a fixed delay is a race on a loaded machine: wait until the
            # server runs it. cancel_safe: the same CancelRequest as cancel(), but libpq's
            # blocking PQcancel would hold the GIL and freeze this in-process server
            deadline = time.monotonic() + 10
            while not backend.running and time.monotonic() < deadline:
                time.sleep(0.01)
            c.cancel_safe()

        threading.Thread(target=cancel_once_running, daemon=True).start()
        t0 = time.time()
        with pytest.raises(psycopg.errors.QueryCanceled) as ei:
            c.execute("SELECT k, s, k + 1, s || s FROM big2").fetchall()
        assert ei.value.sqlstate == "57014" and "user request" in str(ei.value)
        assert time.time() - t0 < 5
        assert c.info.transaction_status == pq.TransactionStatus.INERROR
        c.rollback()
        assert c.execute("SELECT count(*) FROM big2").fetchone() == (n,)
