"""Errors in SQL's words: a corpus of bad statements through the embedded DB-API and over
the wire (psycopg), every message, detail and hint scanned for Python leaking through
(class names, reprs, tracebacks, sqlglot's wording); syntax errors as PostgreSQL words them
with the token's position (the P field, the DB-API error's `position`); values in EXPLAIN
and in row errors (INSERT and COPY) written as SQL literals."""

from __future__ import annotations

import re

import psycopg
import pytest

import kudusql
from engine.types import sql_literal
from tests.wire.fuzz_scale import LEAKS

SETUP = [
    # every key type in one primary key, and a range partition to miss
    "CREATE TABLE kt (s STRING, ts TIMESTAMP, d DATE, n BIGINT, m DECIMAL(10,2), "
    "b BINARY, i8 TINYINT, v STRING, PRIMARY KEY (s, ts, d, n, m, b, i8)) "
    "PARTITION BY HASH (s) PARTITIONS 2, RANGE (ts) "
    "(PARTITION '2026-01-01' <= VALUES < '2027-01-01')",
    "INSERT INTO kt VALUES ('zz', '2026-09-10 10:00:00', '2026-09-10', 99999, 12.5, "
    "'ab'::bytea, 7, 'x')",
]

CORPUS = [
    # syntax errors at many positions
    "SELEC * FROM kt", "SELECT * FROM kt WHERE", "SELECT (1", "SELECT 'abc", "SELECT 1 +",
    "INSERT INTO kt VALUES (", "CREATE TABLE", "ALTER TABLE kt FROBNICATE x",
    "WITH x AS (SELECT 1) SELEC 1",
    "SELECT $$abc", "SELECT 1 2", 'SELECT "unterminated', "SELECT /* open",
    "CREATE TABLE t2 (a INT PRIMARY KEY) PARTITION BY HASH PARTITIONS",
    "CREATE TABLE t2 (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION VALUES)",
    "PREPARE p AS SELEC 1", "EXECUTE", "DEALLOCATE", "SELECT * FROM kt WHERE s = 'a' AND",
    "SELECT CASE WHEN THEN 1 END", "SELECT * FROM kt GROUP BY", "SELECT x FROM (SELECT 1",
    "INSERT INTO kt (s, ts VALUES (1)", "SELECT a.b.c.d.e FROM kt", "VALUES (1,",
    # unknown tables, columns, functions, statements
    "SELECT * FROM nosuch", "SELECT nosuchcol FROM kt", "SELECT nosuchfn(1)",
    "SELECT kt.zz FROM kt", "INSERT INTO nosuch VALUES (1)", "DROP TABLE nosuch",
    "ALTER TABLE nosuch ADD COLUMN c INT", "SHOW COLUMNS FROM nosuch", "EXECUTE nosuch",
    "DEALLOCATE nosuch", "EXPLAIN SELECT * FROM nosuch", "VACUUM kt", "SHOW nosuch",
    # type mismatches, bad casts, bad literals, arithmetic
    "SELECT 'a'::int + 1", "SELECT DATE '2026-01-01' + 'x'", "SELECT * FROM kt WHERE n = 'abc'",
    "SELECT CAST('abc' AS INT)", "SELECT CAST('2026-13-45' AS DATE)", "SELECT TIMESTAMP 'nope'",
    "SELECT 1/0", "SELECT 99999999999::decimal(5,2)", "SELECT sum(s) FROM kt", "SELECT abs('x')",
    "SELECT * FROM kt WHERE ts > 5", "SELECT m / 0 FROM kt", "SELECT s FROM kt LIMIT 'x'",
    "SELECT ARRAY[1, 'a']", "SELECT '{1,2'::int[]", "SELECT 1::numeric(50, 2)",
    # primary keys: duplicates of every key type, NULL keys, ranges, bad values
    "INSERT INTO kt VALUES ('zz', TIMESTAMP '2026-09-10 10:00:00', DATE '2026-09-10', 99999, "
    "12.5, 'ab'::bytea, 7, 'dup')",
    "INSERT INTO kt VALUES (NULL, '2026-02-01', '2026-02-01', 1, 1, '\\x00'::bytea, 1, 'x')",
    "INSERT INTO kt VALUES ('a', '2030-01-01', '2026-02-01', 1, 1, '\\x00'::bytea, 1, 'x')",
    "INSERT INTO kt VALUES ('a', '2026-02-01', '2026-02-01', 1, 1, '\\x00'::bytea, 300, 'x')",
    "INSERT INTO kt VALUES ('a', 'not a time', '2026-02-01', 1, 1, '\\x00'::bytea, 1, 'x')",
    "INSERT INTO kt VALUES ('a', '2026-02-01', '2026-02-01', 1, 123456789012.5, "
    "'\\x00'::bytea, 1, 'x')",
    "UPDATE kt SET s = 'b'", "INSERT INTO kt (s) VALUES ('only')",
    # DDL
    "CREATE TABLE kt (a INT PRIMARY KEY)", "CREATE TABLE t3 (a INT)",
    "CREATE TABLE t3 (a DOUBLE PRIMARY KEY)", "CREATE TABLE t3 (a INT PRIMARY KEY, b footype)",
    "CREATE TABLE t3 (a INT PRIMARY KEY) PARTITION BY HASH (b) PARTITIONS 2",
    "ALTER TABLE kt DROP COLUMN s", "ALTER TABLE kt ADD COLUMN n INT",
    "ALTER TABLE kt ADD RANGE PARTITION VALUES < 'x'",
    "ALTER TABLE kt ADD RANGE PARTITION '2026-06-01' <= VALUES < '2026-07-01'",
    "ALTER TABLE kt DROP RANGE PARTITION VALUES < '2020-01-01'",
    "CREATE TABLE t3 (a INT PRIMARY KEY) PARTITION BY RANGE (a) (PARTITION 5 <= VALUES < 1)",
    # prepared statements
    "EXECUTE p1 (1, 2)", "PREPARE kt AS CREATE TABLE x (a INT PRIMARY KEY)",
]

WIRE_ONLY = [
    # settings the wire server answers
    "SET statement_timeout = 'bogus'", "SET client_encoding = 'latin1'",
    "SET DateStyle = 'German'", "SET statement_timeout = '5 fortnights'",
]


def _leaks(texts: list[str | None]) -> list[str]:
    joined = " | ".join(t for t in texts if t)
    return [w for w in LEAKS if w in joined]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    conn = kudusql.connect(str(tmp_path_factory.mktemp("emb") / "db"))
    cur = conn.cursor()
    for sql in SETUP:
        cur.execute(sql)
    cur.execute("PREPARE p1 (int) AS SELECT $1")
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def wire(server):
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        for sql in SETUP:
            c.execute(sql)
        c.execute("PREPARE p1 (int) AS SELECT $1")
        yield c


def test_corpus_embedded_messages_are_sql_not_python(embedded):
    found = []
    for sql in CORPUS:
        with pytest.raises(kudusql.Error) as ei:
            embedded.cursor().execute(sql)
        e = ei.value
        texts = [e.message, e.detail, e.hint] + [f.message for f in e.row_errors]
        assert e.sqlstate and re.fullmatch(r"[0-9A-Z]{5}", e.sqlstate), (sql, e.sqlstate)
        if _leaks(texts):
            found.append((sql, _leaks(texts), texts))
    assert not found, "\n".join(map(repr, found))


def test_corpus_wire_messages_are_sql_not_python(wire):
    found = []
    for sql in CORPUS + WIRE_ONLY:
        with pytest.raises(psycopg.Error) as ei:
            wire.execute(sql)
        d = ei.value.diag
        texts = [d.message_primary, d.message_detail, d.message_hint, d.context]
        assert d.sqlstate, (sql, texts)
        if _leaks(texts):
            found.append((sql, _leaks(texts), texts))
    assert not found, "\n".join(map(repr, found))


def test_the_scan_bites():
    """The leak scan finds what it is for (a checker that cannot fail proves nothing)."""
    import datetime
    import decimal
    assert _leaks([repr(datetime.datetime(2026, 1, 5))]) == ["datetime."]
    assert "Decimal(" in _leaks([repr(decimal.Decimal("1.5"))])
    assert "<class" in _leaks([str(type(1))])


SYNTAX = [
    # (statement, the token PostgreSQL names, or None for "at end of input")
    ("SELEC * FROM kt", "SELEC"),
    ("SELECT * FROM kt WHERE", None),
    ("SELECT * FROM kt WHERE;", None),
    ("SELECT 1 2", "2"),
    ("SELECT (1", None),
    ("SELECT * FROM kt LIMIT 1 OFFSET 1 bogus", "bogus"),
    ("  SELECT\n  1 +", None),
    ("ALTER TABLE kt FROBNICATE x", "FROBNICATE"),
    ("select 1; selec 2", "selec"),
    ("PREPARE p9 AS SELEC 1", "SELEC"),
    ("SELECT * FROM kt ORDER", "ORDER"),                 # sqlglot took these as complete
    ("UPDATE kt SET", None),
    ("UPDATE kt SET WHERE n = 1", "WHERE"),
    ("SELECT s FROM kt GROUP BY", None),
    ("INSERT INTO kt", None),                            # found by tests/wire/fuzz_scale
    ("UPSERT kt", "kt"),                                 # (an internal error before)
    ("ALTER TABLE kt DROP COLUMN", None),
]


@pytest.mark.parametrize("sql, token", SYNTAX)
def test_syntax_errors_name_the_token_and_its_position(embedded, wire, sql, token):
    body = sql.rstrip(";")
    if token is None:
        message, position = "syntax error at end of input", len(body.rstrip()) + 1
    else:
        message, position = f'syntax error at or near "{token}"', sql.rindex(token) + 1
    with pytest.raises(kudusql.Error) as ei:
        embedded.cursor().execute(sql)
    assert (ei.value.message, ei.value.sqlstate, ei.value.position) == \
        (message, "42601", position)
    with pytest.raises(psycopg.errors.SyntaxError) as wi:
        wire.execute(sql)
    assert wi.value.diag.message_primary == message
    assert wi.value.diag.statement_position == str(position)


@pytest.mark.parametrize("sql, message, at", [
    ("SELECT 'abc", "unterminated quoted string at or near \"'abc\"", "'abc"),
    ('SELECT "abc', 'unterminated quoted identifier at or near ""abc"', '"abc'),
    ("SELECT $$abc", 'unterminated dollar-quoted string at or near "$$abc"', "$$abc"),
    ("SELECT 1 /* x", 'unterminated /* comment at or near "/* x"', "/* x"),
    ("SELECT E'a\\'", "unterminated quoted string at or near \"E'a\\'\"", "E'a"),
])
def test_unterminated_tokens(embedded, sql, message, at):
    with pytest.raises(kudusql.Error) as ei:
        embedded.cursor().execute(sql)
    assert (ei.value.message, ei.value.position) == (message, sql.index(at) + 1)


def test_grammar_expectation_is_the_hint_not_the_message(embedded):
    with pytest.raises(kudusql.Error) as ei:
        embedded.cursor().execute("CREATE TABLE t4 (a INT PRIMARY KEY) PARTITION BY foo")
    e = ei.value
    assert e.message == 'syntax error at or near "foo"' and "HASH or RANGE" in e.hint


LITERALS = [
    ("s", "'it''s'", "'it''s'"),
    ("ts", "TIMESTAMP '2026-01-05 10:00:00'", "TIMESTAMP '2026-01-05 10:00:00'"),
    ("ts", "TIMESTAMP '2026-01-05 10:00:00.25'", "TIMESTAMP '2026-01-05 10:00:00.250000'"),
    ("d", "DATE '2026-01-05'", "DATE '2026-01-05'"),
    ("n", "42", "42"),
    ("m", "12.50", "12.50"),
    ("i8", "-3", "-3"),
]


@pytest.mark.parametrize("col, literal, shown", LITERALS)
def test_explain_writes_values_as_sql_literals(embedded, col, literal, shown):
    cur = embedded.cursor()
    plan = "\n".join(r[0] for r in cur.execute(
        f"EXPLAIN SELECT v FROM kt WHERE {col} = {literal}").fetchall())
    assert f"{col} = {shown}" in plan, plan
    assert not _leaks([plan]), plan


def test_explain_of_every_literal_type_leaks_nothing(embedded):
    cur = embedded.cursor()
    plan = "\n".join(r[0] for r in cur.execute(
        "EXPLAIN SELECT v, n + 1.5, ts + INTERVAL '1 day', d - 1, b || '\\x01'::bytea, "
        "'NaN'::float8, TRUE FROM kt WHERE s IN ('a', 'b') AND ts < TIMESTAMP '2026-12-01' "
        "AND m >= 1.25 AND b = '\\x00ff'::bytea OR n * 2 = 4 OR d > DATE '2026-01-01' "
        "OR v IS NULL OR i8 BETWEEN -1 AND 100").fetchall())
    assert "s IN ('a', 'b')" in plan and "TIMESTAMP '2026-12-01 00:00:00'" in plan, plan
    assert not _leaks([plan]), plan


def test_sql_literal_writes_every_type():
    import datetime as dt
    import decimal
    assert [sql_literal(v) for v in (None, True, 3, 1.5, decimal.Decimal("1.50"),
                                     dt.datetime(2026, 1, 5, 10), dt.date(2026, 1, 5),
                                     b"\x00\xff", "it's", float("nan"))] == [
        "NULL", "TRUE", "3", "1.5", "1.50", "TIMESTAMP '2026-01-05 10:00:00'",
        "DATE '2026-01-05'", "'\\x00ff'::bytea", "'it''s'", "'NaN'::double precision"]


def test_row_errors_write_keys_as_sql_literals(embedded, wire):
    dup = ("INSERT INTO kt VALUES ('zz', TIMESTAMP '2026-09-10 10:00:00', DATE '2026-09-10', "
           "99999, 12.5, 'ab'::bytea, 7, 'dup')")
    with pytest.raises(kudusql.IntegrityError) as ei:
        embedded.cursor().execute(dup)
    assert "Key (s, ts, d, n, m, b, i8)=('zz', TIMESTAMP '2026-09-10 10:00:00', " \
           "DATE '2026-09-10', 99999, 12.50, '\\x6162'::bytea, 7) already exists" in \
        ei.value.message, ei.value.message
    # COPY: the same error from rows read as text
    cur = wire.cursor()
    with pytest.raises(psycopg.Error) as wi, \
            cur.copy("COPY kt FROM STDIN (FORMAT csv)") as cp:
        cp.write(b"zz,2026-09-10 10:00:00,2026-09-10,99999,12.5,\\x6162,7,dup\n"
                 b"zz,2030-09-10 00:00:00,2026-09-10,99999,12.5,\\x6162,7,far\n")
    d = wi.value.diag
    texts = [d.message_primary, d.message_detail]
    assert not _leaks(texts), texts
    assert "TIMESTAMP '2030-09-10 00:00:00'" in " ".join(t or "" for t in texts), texts


@pytest.mark.parametrize("sql, token, hint", [
    ("SET statement_timeout", None, "TO or ="),
    ("DECLARE c FOR SELECT 1", "FOR", "CURSOR"),
    ("COPY kt (s FROM STDIN", "FROM", ", or )"),
    ("FETCH 1 FROM", None, "FETCH"),
    ("CREATE USER u9 PASSWORD 5", "5", "PASSWORD"),
])
def test_statements_the_wire_server_reads_itself_word_syntax_errors_the_same(
        wire, sql, token, hint):
    with pytest.raises(psycopg.errors.SyntaxError) as ei:
        wire.execute(sql)
    d = ei.value.diag
    if token is None:
        assert d.message_primary == "syntax error at end of input"
        assert d.statement_position == str(len(sql) + 1)
    else:
        assert d.message_primary == f'syntax error at or near "{token}"'
        assert d.statement_position == str(sql.rindex(token) + 1)
    assert hint in d.message_hint


def test_remote_dbapi_errors_carry_position_detail_and_hint(server, wire):
    with kudusql.connect(f"postgresql://kudusql@127.0.0.1:{server.port}/kudusql") as c:
        with pytest.raises(kudusql.ProgrammingError) as ei:
            c.cursor().execute("SELEC 1")
        assert (ei.value.message, ei.value.position) == ('syntax error at or near "SELEC"', 1)
        with pytest.raises(kudusql.ProgrammingError) as ei:
            c.cursor().execute("CREATE TABLE t5 (a INT PRIMARY KEY) PARTITION BY foo")
        assert "HASH or RANGE" in ei.value.hint


def test_a_huge_parameter_number_is_an_error_not_an_unbounded_allocation(server, embedded):
    """Found by tests/wire/fuzz_scale (a damaged `$4` became `$9999999999` in a replayed
    Parse): describing it built a list of that many parameter types, the server's memory
    grew without bound and the connection never answered. PostgreSQL numbers parameters
    $1..$65535."""
    import socket
    import time

    from tests.wire.test_fuzz import msg, startup
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(startup() + msg(b"P", b"\0SELECT $9999999999\0\0\0") + msg(b"D", b"S\0")
                  + msg(b"S"))
        buf = b""
        while b"Z\0\0\0\5" not in buf[buf.find(b"E\0"):] if b"E\0" in buf else True:
            data = s.recv(65536)
            assert data
            buf += data
    assert b"C42P02\0" in buf and b"there is no parameter $9999999999" in buf
    assert time.monotonic() - t0 < 5
    with pytest.raises(kudusql.ProgrammingError) as ei:
        embedded.cursor().execute("PREPARE big AS SELECT $70000")
    assert ei.value.sqlstate == "42P02"
