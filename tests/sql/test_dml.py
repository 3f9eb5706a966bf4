"""INSERT / UPSERT / UPDATE / DELETE through the DB-API: Kudu's per-row semantics, the
SQLSTATEs users see, parameters and errors with positions."""

import datetime
import decimal

import pytest

import kudusql


@pytest.fixture
def conn(tmp_path):
    c = kudusql.connect(str(tmp_path / "db"))
    cur = c.cursor()
    cur.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v STRING, n INT NOT NULL DEFAULT 7) "
                "PARTITION BY HASH (k) PARTITIONS 3")
    yield c
    c.close()


def rows(cur, sql, params=None):
    cur.execute(sql, params)
    return sorted(cur.fetchall())


def test_insert_values_and_select(conn):
    cur = conn.cursor()
    cur.execute("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)")
    assert cur.rowcount == 2
    assert cur.statusmessage == "INSERT 0 2"
    cur.execute("INSERT INTO t (k, v) VALUES (3, 'c')")
    assert rows(cur, "SELECT k, v, n FROM t") == [(1, "a", 1), (2, "b", 2), (3, "c", 7)]
    assert [d[0] for d in cur.description] == ["k", "v", "n"]


def test_duplicate_keys_report_every_row_and_apply_the_rest(conn):
    cur = conn.cursor()
    cur.execute("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)")
    with pytest.raises(kudusql.IntegrityError) as ei:
        cur.execute("INSERT INTO t VALUES (5, 'x', 0), (1, 'dup', 0), (6, 'y', 0), (2, 'dup', 0)")
    e = ei.value
    assert e.sqlstate == "23505"
    assert [(f.ordinal, f.sqlstate, f.key) for f in e.row_errors] == \
        [(2, "23505", (1,)), (4, "23505", (2,))]
    assert "row 2" in e.row_errors[0].message and "(k)=(1)" in e.row_errors[0].message
    assert e.rowcount == 2
    assert rows(cur, "SELECT k, v FROM t") == [(1, "a"), (2, "b"), (5, "x"), (6, "y")]


def test_on_conflict_do_nothing_and_upsert(conn):
    cur = conn.cursor()
    cur.execute("INSERT INTO t VALUES (1, 'a', 1)")
    cur.execute("INSERT INTO t VALUES (1, 'z', 9), (2, 'b', 2) ON CONFLICT DO NOTHING")
    assert cur.rowcount == 1
    cur.execute("UPSERT INTO t VALUES (1, 'A', 10), (3, 'c', 3)")
    assert cur.rowcount == 2
    assert rows(cur, "SELECT * FROM t") == [(1, "A", 10), (2, "b", 2), (3, "c", 3)]


def test_not_null_and_bad_values(conn):
    cur = conn.cursor()
    with pytest.raises(kudusql.IntegrityError) as ei:
        cur.execute("INSERT INTO t VALUES (1, 'a', NULL), (2, 'b', 2)")
    assert ei.value.sqlstate == "23502"
    assert [f.ordinal for f in ei.value.row_errors] == [1]
    assert ei.value.rowcount == 1
    with pytest.raises(kudusql.DataError) as ei:
        cur.execute("INSERT INTO t VALUES (10, 'a', 99999999999)")
    assert ei.value.sqlstate == "22003"
    with pytest.raises(kudusql.DataError) as ei:
        cur.execute("INSERT INTO t VALUES (11, 'a', 'abc')")
    assert ei.value.sqlstate == "22P02"


def test_update_and_delete(conn):
    cur = conn.cursor()
    cur.execute("INSERT INTO t SELECT k, 'v' || k, k * 10 FROM "
                "(VALUES (1), (2), (3), (4)) AS s(k)")
    assert cur.rowcount == 4
    cur.execute("UPDATE t SET n = n + 1, v = 'big' WHERE n >= 30")
    assert cur.rowcount == 2
    cur.execute("DELETE FROM t WHERE k = 1")
    assert cur.rowcount == 1
    cur.execute("DELETE FROM t WHERE k = 1")
    assert cur.rowcount == 0
    assert rows(cur, "SELECT k, v, n FROM t") == [(2, "v2", 20), (3, "big", 31), (4, "big", 41)]
    with pytest.raises(kudusql.NotSupportedError) as ei:
        cur.execute("UPDATE t SET k = 5 WHERE k = 2")
    assert ei.value.sqlstate == "0A000" and ei.value.position == 14


def test_parameters(conn):
    cur = conn.cursor()
    cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", [(1, "a%", 1), (2, "b", 2)])
    assert cur.rowcount == 2
    assert rows(cur, "SELECT v FROM t WHERE k = %(k)s", {"k": 1}) == [("a%",)]
    assert rows(cur, "SELECT v FROM t WHERE v LIKE 'a%%' AND k > %s", (0,)) == [("a%",)]


def test_errors_have_sqlstate_and_position(conn):
    cur = conn.cursor()
    with pytest.raises(kudusql.ProgrammingError) as ei:
        cur.execute("SELECT nope FROM t")
    assert ei.value.sqlstate == "42703" and ei.value.position == 8
    with pytest.raises(kudusql.ProgrammingError) as ei:
        cur.execute("SELECT * FROM missing")
    assert ei.value.sqlstate == "42P01" and ei.value.position == 15
    with pytest.raises(kudusql.ProgrammingError) as ei:
        cur.execute("SELECT 1; SELEC 2")
    assert ei.value.sqlstate == "42601" and ei.value.position >= 11
    with pytest.raises(kudusql.IntegrityError) as ei:
        cur.execute("INSERT INTO t (v) VALUES ('x')")
    assert ei.value.sqlstate == "23502"


def test_types_round_trip(tmp_path):
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE ty (id INT PRIMARY KEY, d DATE, ts TIMESTAMP, "
                    "m DECIMAL(12,2), f DOUBLE, b BOOLEAN, s VARCHAR(10)) "
                    "PARTITION BY HASH (id) PARTITIONS 2")
        cur.execute("INSERT INTO ty VALUES (1, DATE '2024-02-29', "
                    "TIMESTAMP '2024-01-01 10:00:00', 12.5, 1.5, true, 'x')")
        cur.execute("SELECT * FROM ty")
        assert cur.fetchone() == (1, datetime.date(2024, 2, 29),
                                  datetime.datetime(2024, 1, 1, 10), decimal.Decimal("12.50"),
                                  1.5, True, "x")


def test_rows_outside_every_range_partition(tmp_path):
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE r (k INT PRIMARY KEY, v STRING) PARTITION BY RANGE (k) "
                    "(PARTITION VALUES < 10, PARTITION 20 <= VALUES < 30)")
        with pytest.raises(kudusql.IntegrityError) as ei:
            cur.execute("INSERT INTO r VALUES (1, 'a'), (15, 'b'), (25, 'c'), (99, 'd')")
        e = ei.value
        assert e.sqlstate == "23514" and e.rowcount == 2
        assert [(f.ordinal, f.key) for f in e.row_errors] == [(2, (15,)), (4, (99,))]
        cur.execute("ALTER TABLE r ADD RANGE PARTITION 10 <= VALUES < 20")
        cur.execute("INSERT INTO r VALUES (15, 'b')")
        assert rows(cur, "SELECT k FROM r") == [(1,), (15,), (25,)]


def test_create_table_as_select(conn):
    cur = conn.cursor()
    cur.execute("INSERT INTO t VALUES (1, 'a', 1), (2, 'a', 2), (3, 'b', 5)")
    cur.execute("CREATE TABLE s PRIMARY KEY (v) PARTITION BY HASH (v) PARTITIONS 2 "
                "AS SELECT v, sum(n) AS total, count(*) AS cnt FROM t GROUP BY v")
    assert cur.rowcount == 2
    assert rows(cur, "SELECT * FROM s") == [("a", 3, 2), ("b", 5, 1)]
    cur.execute("DESCRIBE s")
    assert [(r[0], r[2]) for r in cur.fetchall()] == [("v", True), ("total", False),
                                                      ("cnt", False)]
    with pytest.raises(kudusql.ProgrammingError) as ei:
        cur.execute("CREATE TABLE s2 AS SELECT v FROM t")
    assert ei.value.sqlstate == "42P16"
    with pytest.raises(kudusql.IntegrityError) as ei:   # duplicate keys in the query's rows
        cur.execute("CREATE TABLE s3 PRIMARY KEY (v) AS SELECT v, k FROM t")
    assert ei.value.sqlstate == "23505" and ei.value.rowcount == 2


def test_describe_infers_parameter_and_result_types(conn):
    import pyarrow as pa
    s = conn._session
    params, schema = s.describe("SELECT v, n * 2 AS m FROM t WHERE k = $1 AND v LIKE $2 "
                                "LIMIT $3")
    assert params == [pa.int64(), pa.string(), pa.int64()]
    assert schema.names == ["v", "m"] and schema.field("v").type == pa.string()
    params, schema = s.describe("INSERT INTO t (v, k) VALUES ($1, $2)")
    assert params == [pa.string(), pa.int64()] and schema is None
    params, schema = s.describe("UPDATE t SET n = $1 WHERE k = $2")
    assert params == [pa.int32(), pa.int64()]


def test_unsupported_constructs_say_so(conn):
    cur = conn.cursor()
    with pytest.raises(kudusql.NotSupportedError) as ei:
        cur.execute("SELECT k, sum(n) OVER (ORDER BY k GROUPS BETWEEN 1 PRECEDING AND "
                    "1 FOLLOWING) FROM t")
    assert ei.value.sqlstate == "0A000" and ei.value.position == 11


def test_refused_returning_lists_and_default_values_write_nothing(conn):
    """A RETURNING list PostgreSQL refuses (aggregates 42803, an unknown column 42703) and
    UPSERT ... RETURNING (0A000) fail before anything is written; DEFAULT VALUES is 23502
    for the key column (it was XX000 from the binder)."""
    cur = conn.cursor()
    cur.execute("INSERT INTO t VALUES (1, 'a', 1)")
    for q, state in (("UPDATE t SET v = 'b' RETURNING count(*)", "42803"),
                     ("DELETE FROM t RETURNING nosuch", "42703"),
                     ("INSERT INTO t VALUES (2, 'b', 2) RETURNING sum(k)", "42803"),
                     ("UPSERT INTO t VALUES (1, 'c', 3) RETURNING k", "0A000")):
        with pytest.raises(kudusql.Error) as ei:
            cur.execute(q)
        assert ei.value.sqlstate == state, q
    for q in ("INSERT INTO t DEFAULT VALUES", "EXPLAIN INSERT INTO t DEFAULT VALUES"):
        with pytest.raises(kudusql.IntegrityError) as ei:
            cur.execute(q)
        assert ei.value.sqlstate == "23502" and '"k"' in str(ei.value), q
    assert rows(cur, "SELECT k, v, n FROM t") == [(1, "a", 1)]


def test_default_keyword_in_values_and_set(conn):
    """DEFAULT where a value goes (ORMs write it): the column's default, NULL without one
    (it was 0A000 `unsupported expression: DEFAULT` in VALUES and 42703 in UPDATE's SET)."""
    cur = conn.cursor()
    cur.execute("INSERT INTO t VALUES (1, DEFAULT, DEFAULT), (2, 'b', 3)")
    cur.execute("INSERT INTO t (k, n) VALUES (%s, DEFAULT)", (5,))
    assert rows(cur, "SELECT k, v, n FROM t") == [(1, None, 7), (2, "b", 3), (5, None, 7)]
    cur.execute("UPDATE t SET n = DEFAULT, v = DEFAULT WHERE k = 2")
    assert rows(cur, "SELECT k, v, n FROM t WHERE k = 2") == [(2, None, 7)]
    with pytest.raises(kudusql.IntegrityError):        # the key has no default
        cur.execute("INSERT INTO t VALUES (DEFAULT, 'x', 1)")


def test_executemany_inserts_one_batch_with_row_ordinals(conn):
    cur = conn.cursor()
    cur.execute("INSERT INTO t VALUES (3, 'x', 0)")
    rows_in = [(i, f"v{i}", i) for i in range(1, 2001)]
    with pytest.raises(kudusql.IntegrityError) as ei:
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", rows_in)
    assert ei.value.rowcount == 1999
    assert [(f.ordinal, f.key) for f in ei.value.row_errors] == [(3, (3,))]
    cur.executemany("UPSERT INTO t (k, v) VALUES (%(k)s, %(v)s)",
                    [{"k": 1, "v": "one"}, {"k": 5000, "v": "new"}])
    assert cur.rowcount == 2
    assert rows(cur, "SELECT k, v, n FROM t WHERE k IN (1, 3, 5000)") == \
        [(1, "one", 1), (3, "x", 0), (5000, "new", 7)]


def test_declared_column_order_is_the_sql_order(tmp_path):
    # the engine stores key columns first; SQL keeps the order the user declared
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE o (v STRING, k INT, w INT, PRIMARY KEY (k)) "
                    "PARTITION BY HASH (k) PARTITIONS 2")
        cur.execute("INSERT INTO o VALUES ('a', 1, 10)")
        cur.execute("SELECT * FROM o")
        assert [d[0] for d in cur.description] == ["v", "k", "w"]
        assert cur.fetchall() == [("a", 1, 10)]
        cur.execute("DESCRIBE o")
        assert [r[0] for r in cur.fetchall()] == ["v", "k", "w"]
        cur.execute("CREATE TABLE o2 PRIMARY KEY (k) AS SELECT w, k FROM o")
        cur.execute("SELECT * FROM o2")
        assert [d[0] for d in cur.description] == ["w", "k"]


def test_integer_and_mixed_literals_into_decimal(tmp_path):
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE d (k INT PRIMARY KEY, m DECIMAL(8,2))")
        cur.execute("INSERT INTO d VALUES (1, 0), (2, 5), (3, 1.255), (4, NULL)")
        assert rows(cur, "SELECT * FROM d") == [
            (1, decimal.Decimal("0.00")), (2, decimal.Decimal("5.00")),
            (3, decimal.Decimal("1.26")), (4, None)]
        with pytest.raises(kudusql.DataError) as ei:
            cur.execute("INSERT INTO d VALUES (5, 12345678), (6, 1)")
        assert ei.value.sqlstate == "22003" and ei.value.rowcount == 1


def test_engine_errors_reach_the_driver_as_pep249_errors(conn):
    cur = conn.cursor()
    with pytest.raises(kudusql.DataError) as ei:          # SnapshotTooOld
        cur.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF 1")
    assert ei.value.sqlstate == "22023" and "ancient history mark" in str(ei.value)
    with pytest.raises(kudusql.DataError) as ei:          # replication factor on one node
        cur.execute("CREATE TABLE n PRIMARY KEY (K) WITH (replication_factor = 3) "
                    "AS SELECT 1 AS k")
    assert ei.value.sqlstate == "22023" and "tablet servers" in str(ei.value)
    cur.execute("CREATE TABLE n2 PRIMARY KEY (K) AS SELECT 1 AS k")   # K folds to k
    assert rows(cur, "SELECT * FROM n2") == [(1,)]


def test_unquoted_names_fold_to_lower_case_in_writes(tmp_path):
    """As in queries (PostgreSQL's rule): `INSERT INTO Tab` / `UPDATE TAB SET V = ...` name
    the table created as `CREATE TABLE Tab (K ...)` (they were 42P01); quoted names keep
    their case, a quoted mixed-case key column included (UPDATE by it was 42703)."""
    c = kudusql.connect(str(tmp_path / "db"))
    cur = c.cursor()
    cur.execute("CREATE TABLE Tab (K INT PRIMARY KEY, V INT)")
    cur.execute("INSERT INTO Tab (K, V) VALUES (1, 2)")
    cur.execute("INSERT INTO TAB VALUES (2, 2)")
    cur.execute("UPDATE TAB SET V = 3 WHERE K = 1 RETURNING K, V")
    assert cur.fetchall() == [(1, 3)]
    cur.execute("DELETE FROM tAb WHERE k = 2")
    assert cur.rowcount == 1
    cur.execute("EXPLAIN INSERT INTO TAB VALUES (5, 5)")
    assert cur.fetchall()[0][0] == "Insert on tab"
    cur.execute('CREATE TABLE "Mixed" ("Key" INT PRIMARY KEY, v INT)')
    cur.execute('INSERT INTO "Mixed" VALUES (1, 1)')
    cur.execute('UPDATE "Mixed" SET v = 2 WHERE "Key" = 1')
    assert cur.rowcount == 1
    cur.execute('INSERT INTO "tab" VALUES (9, 9), (10, 10)')     # quoted: as written
    with pytest.raises(kudusql.ProgrammingError) as ei:
        cur.execute('INSERT INTO "TAB" VALUES (11, 11)')
    assert ei.value.sqlstate == "42P01"
    assert rows(cur, "SELECT k, v FROM tab") == [(1, 3), (9, 9), (10, 10)]
    c.close()
