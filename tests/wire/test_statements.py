"""Statements the wire layer answers itself (settings, cursors, transaction control, users,
connect-time queries) and COPY's formats, through psycopg's simple and extended query."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest

from planner.dialect import parse_sql


@pytest.fixture(scope="module")
def conn(server):
    s = server.db.session()
    s.execute("CREATE TABLE st (k INT PRIMARY KEY, v STRING, f DOUBLE, ok BOOLEAN, d DATE, "
              "by BINARY) PARTITION BY HASH (k) PARTITIONS 2")
    s.execute("INSERT INTO st VALUES (1, 'a', 0.5, true, DATE '2024-01-02', NULL), "
              "(2, 'b', NULL, false, NULL, NULL), (3, NULL, 1e300, NULL, NULL, NULL)")
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        yield c


def test_set_show_reset(conn):
    assert conn.execute("SHOW server_version").fetchone()[0].startswith("15.")
    conn.execute("SET application_name = 'tests'")
    assert conn.info.parameter_status("application_name") == "tests"
    assert conn.execute("SHOW application_name").fetchone() == ("tests",)
    conn.execute("SET TIME ZONE 'Europe/Paris'")
    assert conn.execute("SHOW TimeZone").fetchone() == ("Europe/Paris",)
    conn.execute("SET search_path TO public, other")
    assert conn.execute("SELECT current_setting('search_path')").fetchone() == (
        "public, other",)
    conn.execute("RESET ALL")
    assert conn.execute("SHOW timezone").fetchone() == ("UTC",)
    with pytest.raises(psycopg.errors.UndefinedObject):
        conn.execute("SHOW no_such_setting")
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("SET client_encoding = 'LATIN1'")
    with pytest.raises(psycopg.errors.CantChangeRuntimeParam):
        conn.execute("SET server_version = '1'")
    names = [r[0] for r in conn.execute("SHOW ALL").fetchall()]
    assert "statement_timeout" in names and "DateStyle" in names


def test_connect_time_queries(conn):
    row = conn.execute("SELECT version(), current_database(), current_user, "
                       "current_schema()").fetchone()
    assert row[0].startswith("PostgreSQL 15.") and row[1:] == ("kudusql", "kudusql", "public")
    assert conn.execute("select pg_catalog.version() AS v").fetchone()[0].startswith(
        "PostgreSQL")
    assert conn.execute("SELECT current_setting('jit') AS cur, "
                        "set_config('jit', 'off', false) AS new").fetchone() == ("off", "off")


def test_sql_cursors_and_fetch_directions(conn):
    with conn.transaction():
        conn.execute("DECLARE c SCROLL CURSOR FOR SELECT k FROM st ORDER BY k")
        assert conn.execute("FETCH NEXT FROM c").fetchall() == [(1,)]
        assert conn.execute("FETCH 5 FROM c").fetchall() == [(2,), (3,)]
        assert conn.execute("FETCH ABSOLUTE 1 FROM c").fetchall() == [(1,)]
        assert conn.execute("FETCH FORWARD ALL IN c").fetchall() == [(2,), (3,)]
        assert conn.execute("FETCH BACKWARD 2 FROM c").fetchall() == [(2,), (1,)]
        cur = conn.execute("MOVE FIRST IN c")
        assert cur.statusmessage == "MOVE 1"
        conn.execute("CLOSE c")
        with pytest.raises(psycopg.errors.InvalidCursorName):
            conn.execute("FETCH 1 FROM c")
    with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
        conn.execute("DECLARE d CURSOR FOR SELECT 1")
    conn.execute("DECLARE h CURSOR WITH HOLD FOR SELECT k FROM st WHERE k > 1 ORDER BY k")
    assert conn.execute("FETCH ALL FROM h").fetchall() == [(2,), (3,)]
    conn.execute("CLOSE ALL")


def test_a_cursor_is_declared_for_a_query_only_and_nothing_else_runs(conn):
    """DECLARE ... FOR <not a SELECT / VALUES> is PostgreSQL's syntax error, refused before
    the statement runs: a DELETE (or EXPLAIN ANALYZE of one) was performed, then refused."""
    conn.execute("CREATE TABLE dc (k INT PRIMARY KEY)")
    conn.execute("INSERT INTO dc VALUES (1), (2)")
    for q in ("DELETE FROM dc", "EXPLAIN ANALYZE DELETE FROM dc", "  INSERT INTO dc VALUES (3)"):
        with conn.transaction():
            with pytest.raises(psycopg.errors.SyntaxError) as e:
                conn.execute(f"DECLARE c CURSOR FOR {q}")
        word = q.split()[0]
        assert f'at or near "{word}"' in str(e.value)
        assert e.value.diag.statement_position == str(len("DECLARE c CURSOR FOR ") +
                                                      q.index(word) + 1)
    assert conn.execute("SELECT count(*) FROM dc").fetchone() == (2,)
    conn.execute("DROP TABLE dc")


def test_savepoints_and_warnings(conn):
    notices = []
    conn.add_notice_handler(lambda d: notices.append((d.severity, d.message_primary)))
    try:
        conn.execute("COMMIT")
        assert notices[-1] == ("WARNING", "there is no transaction in progress")
        with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
            conn.execute("SAVEPOINT s1")
        conn.execute("BEGIN")
        conn.execute("SAVEPOINT s1")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            conn.execute("SELECT nope FROM st")
        conn.execute("ROLLBACK TO SAVEPOINT s1")          # back to a usable block
        assert conn.execute("SELECT count(*) FROM st").fetchone() == (3,)
        with pytest.raises(psycopg.errors.InvalidSavepointSpecification):
            conn.execute("RELEASE SAVEPOINT nope")
        conn.execute("ROLLBACK")
        assert any("not undo" in m for s, m in notices if s == "WARNING")
    finally:
        conn.remove_notice_handler(conn._notice_handlers[0])


def test_row_failures_name_each_row(conn):
    with pytest.raises(psycopg.errors.UniqueViolation) as ei:
        conn.execute("INSERT INTO st (k, v) VALUES (10, 'x'), (1, 'dup'), (11, 'y'), (2, 'd')")
    e = ei.value
    assert "row 2" in e.diag.message_primary and "(and 1 more failed row)" in str(e)
    # the detail lists the other failures, not the first again, and counts what was applied
    assert "row 4" in e.diag.message_detail and "row 2" not in e.diag.message_detail
    assert "2 rows were applied" in e.diag.message_detail
    assert conn.execute("SELECT count(*) FROM st WHERE k IN (10, 11)").fetchone() == (2,)


def test_one_row_failure_detail_is_singular_and_not_a_repeat(conn):
    with pytest.raises(psycopg.errors.UniqueViolation) as ei:
        conn.execute("INSERT INTO st (k, v) VALUES (9020, 'x'), (1, 'dup')")
    e = ei.value
    assert "more failed" not in str(e)
    assert e.diag.message_detail == "1 row was applied (each row is applied on its own)."
    conn.execute("DELETE FROM st WHERE k = 9020")


def test_copy_formats_round_trip(conn):
    cur = conn.cursor()
    with cur.copy("COPY st (k, v, f, ok, d, by) TO STDOUT") as cp:
        text = b"".join(cp)
    lines = sorted(ln for ln in text.splitlines() if ln[:1] in (b"1", b"2", b"3")
                   and ln[1:2] == b"\t")
    assert lines == [b"1\ta\t0.5\tt\t2024-01-02\t\\N", b"2\tb\t\\N\tf\t\\N\t\\N",
                     b"3\t\\N\t1e+300\t\\N\t\\N\t\\N"]
    with cur.copy("COPY (SELECT k, v FROM st WHERE k < 3 ORDER BY k) TO STDOUT "
                  "WITH CSV HEADER DELIMITER ';' FORCE QUOTE *") as cp:
        assert b"".join(cp) == b'k;v\n"1";"a"\n"2";"b"\n'
    # text format with escapes, \N, a custom NULL and the \. end marker psql sends
    with cur.copy("COPY st (k, v, by) FROM STDIN") as cp:
        cp.write(b"20\tline\\nbreak\t\\\\x00ff\n21\t\\N\t\\N\n\\.\n22\tignored\t\\N\n")
    with cur.copy("COPY st (k, v) FROM STDIN (FORMAT csv, NULL 'NS', HEADER true)") as cp:
        cp.write(b'k,v\n30,"quoted, with ""quotes"""\n31,NS\n32,""\n33,"multi\nline"\n')
    rows = conn.execute("SELECT k, v, by FROM st WHERE k >= 20 ORDER BY k").fetchall()
    assert rows == [(20, "line\nbreak", b"\x00\xff"), (21, None, None),
                    (30, 'quoted, with "quotes"', None), (31, None, None), (32, "", None),
                    (33, "multi\nline", None)]
    with pytest.raises(psycopg.errors.BadCopyFileFormat) as ei, \
            cur.copy("COPY st (k, v) FROM STDIN") as cp:
        cp.write(b"40\tok\n41\ttoo\tmany\n42\n")
    assert "line 2: extra data" in ei.value.diag.message_primary      # the first failure
    assert "line 3: missing data" in ei.value.diag.message_detail     # the others
    assert conn.execute("SELECT count(*) FROM st WHERE k BETWEEN 40 AND 42").fetchone() == (1,)


def _copy_spec(sql: str):
    """The CopySpec of a COPY statement, as the dialect parses it (planner/commands.py)."""
    (node,) = parse_sql(sql)
    return node.args["spec"]


def test_copy_statement_parsing():
    s = _copy_spec("COPY public.t (a, \"B\") FROM STDIN WITH (FORMAT 'csv', HEADER, "
                     "DELIMITER '|', QUOTE '''', NULL '')")
    assert (s.table, s.columns, s.format, s.delimiter, s.quote, s.escape, s.header) == \
        ("t", ("a", "B"), "csv", "|", "'", "'", True)
    s = _copy_spec("COPY  ( select * from t ) TO STDOUT ")
    assert s.query == "select * from t" and s.direction == "to"
    s = _copy_spec("copy t from stdin binary")
    assert s.format == "binary"
    for bad in ("COPY t FROM '/etc/passwd'", "COPY t TO PROGRAM 'ls'",
                "COPY t FROM STDIN (FORMAT json)", "COPY t FROM STDIN (FORCE_QUOTE *)"):
        with pytest.raises(Exception) as ei:
            _copy_spec(bad)
        assert getattr(ei.value, "sqlstate", None) in ("0A000", "22023", "42601")


def test_extended_protocol_with_dates_and_nulls(conn):
    cur = conn.cursor()
    cur.execute("SELECT k, d FROM st WHERE d = %s", (dt.date(2024, 1, 2),))
    assert cur.fetchall() == [(1, dt.date(2024, 1, 2))]
    cur.execute("SELECT k FROM st WHERE v = %s OR %s IS NULL ORDER BY k LIMIT 1", ("b", None))
    assert cur.fetchall() == [(1,)]


def test_cursor_and_copy_queries_may_use_any_operator(conn):
    """The command grammars read their own words only: DECLARE's query and COPY's (query)
    are the dialect's. Before, the grammars' tokenizer read the whole statement and failed
    on operators it did not know: `DECLARE c CURSOR FOR SELECT v || 'x' ...` and
    `COPY (SELECT v || 'x' ...) TO STDOUT` were 'syntax error at or near "|"'."""
    conn.execute("BEGIN")
    try:
        conn.execute("DECLARE ops CURSOR FOR SELECT v || '!' FROM st WHERE k = 1")
        assert conn.execute("FETCH ALL FROM ops").fetchall() == [("a!",)]
    finally:
        conn.execute("ROLLBACK")
    cur = conn.cursor()
    with cur.copy("COPY (SELECT v || ')', v ~ '^a' FROM st WHERE k = 1) TO STDOUT") as cp:
        assert b"".join(cp) == b"a)\tt\n"
