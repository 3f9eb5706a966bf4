"""PostgreSQL behaviours a psql / psycopg user expects (issue 15, item 5): SQL-level
PREPARE / EXECUTE / DEALLOCATE and pg_prepared_statements, SHOW in PostgreSQL's units,
now() named `now` and typed timestamptz, psql's caret under a syntax error, \\di."""

from __future__ import annotations

import shutil
import subprocess

import psycopg
import pytest

import kudusql
from wire.settings import format_ms


@pytest.fixture(scope="module")
def conn(server):
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.execute("CREATE TABLE pb (k INT PRIMARY KEY, v STRING, ts TIMESTAMP) "
                  "PARTITION BY HASH (k) PARTITIONS 2")
        c.execute("INSERT INTO pb VALUES (1, 'a', '2026-01-01'), (2, 'b', '2026-01-02')")
        yield c


def test_prepare_execute_deallocate_over_the_wire(conn):
    conn.execute("PREPARE byk (int) AS SELECT v FROM pb WHERE k = $1")
    assert conn.execute("EXECUTE byk (2)").fetchall() == [("b",)]
    assert conn.execute("EXECUTE byk ('1')").fetchall() == [("a",)]     # coerced to int
    cur = conn.execute("EXECUTE byk (1)")
    assert [d.name for d in cur.description] == ["v"]
    conn.execute("PREPARE ins AS INSERT INTO pb (k, v) VALUES ($1, $2)")
    cur = conn.execute("EXECUTE ins (3, 'c')")
    assert cur.statusmessage == "INSERT 0 1"
    rows = conn.execute("SELECT name, statement, parameter_types, from_sql "
                        "FROM pg_prepared_statements ORDER BY name").fetchall()
    assert rows == [
        ("byk", "PREPARE byk (int) AS SELECT v FROM pb WHERE k = $1", ["integer"], True),
        ("ins", "PREPARE ins AS INSERT INTO pb (k, v) VALUES ($1, $2)", ["integer", "text"],
         True)]
    with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
        conn.execute("PREPARE byk AS SELECT 1")
    with pytest.raises(psycopg.errors.SyntaxError) as ei:
        conn.execute("EXECUTE byk")
    assert ei.value.diag.message_detail == "Expected 1 parameters but got 0."
    assert conn.execute("DEALLOCATE byk").statusmessage == "DEALLOCATE"
    with pytest.raises(psycopg.errors.InvalidSqlStatementName):
        conn.execute("EXECUTE byk (1)")
    assert conn.execute("DEALLOCATE PREPARE ALL").statusmessage == "DEALLOCATE ALL"
    assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
    conn.execute("DELETE FROM pb WHERE k = 3")


def test_prepared_statements_are_per_session(server, conn):
    conn.execute("PREPARE mine AS SELECT 1")
    with psycopg.connect(server.dsn(), autocommit=True) as other:
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            other.execute("EXECUTE mine")
        other.execute("PREPARE mine AS SELECT 2")
        assert other.execute("EXECUTE mine").fetchone() == (2,)
    assert conn.execute("EXECUTE mine").fetchone() == (1,)
    conn.execute("DEALLOCATE mine")


def test_prepare_in_the_embedded_driver(tmp_path):
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE t (k INT PRIMARY KEY, ts TIMESTAMP)")
        cur.execute("PREPARE put (int, timestamp) AS INSERT INTO t VALUES ($1, $2)")
        cur.execute("EXECUTE put (1, '2026-05-05 10:00:00')")
        cur.execute("PREPARE get AS SELECT k FROM t WHERE ts > $1")
        assert cur.execute("EXECUTE get ('2026-01-01')").fetchall() == [(1,)]
        with pytest.raises(kudusql.ProgrammingError) as ei:
            cur.execute("PREPARE bad AS SELECT nosuch FROM t")
        assert ei.value.sqlstate == "42703" and ei.value.position == \
            len("PREPARE bad AS SELECT ") + 1


@pytest.mark.parametrize("value, shown", [
    ("'1s'", "1s"), ("500", "500ms"), ("'90s'", "90s"), ("'1min'", "1min"), ("0", "0"),
    ("'2h'", "2h"), ("'1500ms'", "1500ms")])
def test_show_statement_timeout_in_postgres_units(conn, value, shown):
    conn.execute(f"SET statement_timeout = {value}")
    assert conn.execute("SHOW statement_timeout").fetchone() == (shown,)
    conn.execute("RESET statement_timeout")


def test_time_settings_format_and_pg_settings_unit(conn):
    assert [format_ms(x) for x in (0, 1, 999, 1000, 60_000, 61_000, 3_600_000, 86_400_000)] \
        == ["0", "1ms", "999ms", "1s", "1min", "61s", "1h", "1d"]
    conn.execute("SET lock_timeout = '2s'")
    assert conn.execute("SHOW lock_timeout").fetchone() == ("2s",)
    conn.execute("SET statement_timeout = '1s'")
    assert conn.execute("SELECT setting, unit FROM pg_settings WHERE name = "
                        "'statement_timeout'").fetchone() == ("1000", "ms")
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("SET statement_timeout = 'soon'")
    conn.execute("RESET ALL")


def test_now_is_named_now_and_has_a_time_zone(conn):
    cur = conn.execute("SELECT now(), current_timestamp, now() AS t, localtimestamp")
    assert [d.name for d in cur.description] == ["now", "current_timestamp", "t",
                                                 "localtimestamp"]
    assert [d.type_code for d in cur.description] == [1184, 1184, 1184, 1114]
    row = cur.fetchone()
    assert row[0].utcoffset() is not None and row[3].tzinfo is None
    # inside expressions timestamps stay comparable with the table's columns
    assert conn.execute("SELECT count(*) FROM pb WHERE ts < now()").fetchone() == (2,)


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql not installed")
def test_psql_draws_the_caret_under_the_offending_token(server, conn):
    r = subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U",
                        "kudusql", "-d", "kudusql", "-c", "SELECT k FROM pb WHERE k = 1 AND"],
                       capture_output=True, text=True, timeout=60)
    lines = r.stderr.splitlines()
    assert lines[0] == "ERROR:  syntax error at end of input", r.stderr
    assert lines[1] == "LINE 1: SELECT k FROM pb WHERE k = 1 AND"
    assert lines[2].index("^") == len("LINE 1: SELECT k FROM pb WHERE k = 1 AND")
    r = subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U",
                        "kudusql", "-d", "kudusql", "-c", "SELEC * FROM pb"],
                       capture_output=True, text=True, timeout=60)
    assert r.stderr.splitlines()[:3] == ['ERROR:  syntax error at or near "SELEC"',
                                         "LINE 1: SELEC * FROM pb", "        ^"], r.stderr


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql not installed")
def test_psql_di_lists_the_primary_key_index_of_each_table_only(server, conn):
    """The model (docs/wire.md): a table's primary key is its one index, `<table>_pkey`, a
    unique btree over the key columns (Kudu keeps rows sorted by key with a B-tree key
    index per rowset); there are no other indexes, and system views have none."""
    r = subprocess.run(["psql", "-X", "-A", "-t", "-h", "127.0.0.1", "-p", str(server.port),
                        "-U", "kudusql", "-d", "kudusql", "-c", "\\di"],
                       capture_output=True, text=True, timeout=60)
    names = sorted(ln.split("|")[1] for ln in r.stdout.splitlines() if "|" in ln)
    tables = sorted(t for (t,) in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall())
    assert names == [f"{t}_pkey" for t in tables], (names, r.stderr)
    assert "PRIMARY KEY, btree (k)" in subprocess.run(
        ["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "kudusql", "-d",
         "kudusql", "-c", "\\d pb"], capture_output=True, text=True, timeout=60).stdout
