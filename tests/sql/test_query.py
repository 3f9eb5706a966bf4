"""SELECT through the DB-API: joins, subqueries, aggregates, set operations, ordering, time
travel, table_changes and EXPLAIN, each checked against DuckDB on the same rows where the
answer is not obvious."""

import time

import duckdb
import pyarrow as pa
import pytest

import kudusql


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("q") / "db"
    c = kudusql.connect(str(path))
    cur = c.cursor()
    cur.execute("CREATE TABLE emp (id INT PRIMARY KEY, name STRING, dept INT, salary DECIMAL(10,2),"
                " boss INT) PARTITION BY HASH (id) PARTITIONS 3")
    cur.execute("CREATE TABLE dept (id INT PRIMARY KEY, dname STRING) "
                "PARTITION BY RANGE (id) (PARTITION VALUES < 10, PARTITION 10 <= VALUES < 100)")
    cur.execute("INSERT INTO dept VALUES (1, 'eng'), (2, 'ops'), (3, 'empty'), (50, 'far')")
    cur.execute("INSERT INTO emp VALUES "
                "(1, 'ann', 1, 100.50, NULL), (2, 'bob', 1, 80.25, 1), (3, 'cat', 2, 70.00, 1),"
                "(4, 'dan', 2, NULL, 3), (5, 'eve', NULL, 60.00, 3), (6, 'fay', 1, 80.25, 2)")
    yield c
    c.close()


def q(db, sql, params=None):
    cur = db.cursor()
    cur.execute(sql, params)
    return cur.fetchall()


def duck(db, sql):
    con = duckdb.connect()
    for t in ("emp", "dept"):
        arrow = db.cursor().execute(f"SELECT * FROM {t}").fetch_arrow_table()
        con.register(t, arrow)
    return con.execute(sql).fetchall()


CASES = [
    "SELECT dept, count(*), sum(salary), min(name), max(salary), count(salary) FROM emp "
    "GROUP BY dept",
    "SELECT e.name, d.dname FROM emp e JOIN dept d ON e.dept = d.id",
    "SELECT e.name, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.id",
    "SELECT d.dname, count(e.id) FROM dept d LEFT JOIN emp e ON e.dept = d.id GROUP BY d.dname",
    "SELECT e.name, b.name FROM emp e, emp b WHERE e.boss = b.id AND b.salary > 75",
    "SELECT name FROM emp WHERE dept IN (SELECT id FROM dept WHERE dname LIKE 'e%')",
    "SELECT name FROM emp WHERE dept NOT IN (SELECT id FROM dept WHERE dname = 'ops')",
    "SELECT name FROM emp WHERE boss NOT IN (SELECT boss FROM emp)",
    "SELECT dname FROM dept d WHERE EXISTS (SELECT * FROM emp e WHERE e.dept = d.id)",
    "SELECT dname FROM dept d WHERE NOT EXISTS (SELECT * FROM emp e WHERE e.dept = d.id "
    "AND e.salary > 75)",
    "SELECT name FROM emp e WHERE salary > (SELECT avg(salary) FROM emp e2 "
    "WHERE e2.dept = e.dept)",
    "SELECT name FROM emp WHERE salary = (SELECT max(salary) FROM emp)",
    "SELECT name FROM emp e WHERE EXISTS (SELECT 1 FROM emp o WHERE o.dept = e.dept "
    "AND o.id <> e.id)",
    "SELECT dept, avg(salary) FROM emp GROUP BY dept HAVING count(*) > 1",
    "SELECT count(DISTINCT salary), count(*) FROM emp",
    "SELECT name, CASE WHEN salary >= 80 THEN 'high' WHEN salary IS NULL THEN 'none' "
    "ELSE 'low' END FROM emp",
    "SELECT id FROM emp UNION SELECT id FROM dept",
    "SELECT id FROM emp UNION ALL SELECT id FROM dept",
    "SELECT id FROM emp INTERSECT SELECT id FROM dept",
    "SELECT id FROM emp EXCEPT SELECT id FROM dept",
    "WITH s AS (SELECT dept, sum(salary) AS tot FROM emp GROUP BY dept) "
    "SELECT d.dname, s.tot FROM s JOIN dept d ON d.id = s.dept",
    "SELECT DISTINCT dept FROM emp",
    "SELECT upper(name), length(name), substring(name from 2 for 1) FROM emp",
    "SELECT coalesce(dept, -1), coalesce(salary, 0) * 2 FROM emp",
    "SELECT x.d, x.c FROM (SELECT dept AS d, count(*) AS c FROM emp GROUP BY dept) x "
    "WHERE x.c >= 2",
]


def same_rows(ours, theirs) -> bool:
    """Multiset equality with DECIMALs compared as floats (DuckDB returns doubles for some)."""
    def norm(rs):
        return sorted((tuple(float(v) if hasattr(v, "as_tuple") else v for v in r)
                       for r in rs), key=repr)
    return norm(ours) == norm(theirs)


@pytest.mark.parametrize("sql", CASES)
def test_matches_duckdb(db, sql):
    assert same_rows(q(db, sql), duck(db, sql))


def test_order_by_limit_offset(db):
    assert q(db, "SELECT name FROM emp ORDER BY salary DESC NULLS LAST, name LIMIT 3") == \
        [("ann",), ("bob",), ("fay",)]
    assert q(db, "SELECT name FROM emp ORDER BY salary DESC, name LIMIT 2 OFFSET 1") == \
        [("ann",), ("bob",)]   # NULL first for DESC, like PostgreSQL
    assert q(db, "SELECT name, salary AS s FROM emp ORDER BY s, 1 LIMIT 2") == \
        [("eve", 60), ("cat", 70)]
    assert q(db, "SELECT dept, count(*) FROM emp GROUP BY dept ORDER BY count(*) DESC, dept "
                 "NULLS FIRST") == [(1, 3), (2, 2), (None, 1)]


def test_select_without_from_and_empty_aggregates(db):
    assert q(db, "SELECT 1 + 1, 'a' || 'b'") == [(2, "ab")]
    assert q(db, "SELECT count(*), sum(salary) FROM emp WHERE id > 100") == [(0, None)]
    assert q(db, "SELECT dept FROM emp WHERE id > 100 GROUP BY dept") == []


def test_time_travel_and_table_changes(tmp_path):
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE h (k INT PRIMARY KEY, v STRING) "
                    "PARTITION BY HASH (k) PARTITIONS 2")
        cur.execute("INSERT INTO h VALUES (1, 'a'), (2, 'b')")
        time.sleep(0.01)
        mid = c.database.catalog.clock.now()
        time.sleep(0.01)
        cur.execute("UPDATE h SET v = 'B' WHERE k = 2")
        cur.execute("DELETE FROM h WHERE k = 1")
        cur.execute("INSERT INTO h VALUES (3, 'c')")
        end = c.database.catalog.clock.now()
        cur.execute("SELECT k, v FROM h FOR SYSTEM_TIME AS OF %s ORDER BY k", (mid,))
        assert cur.fetchall() == [(1, "a"), (2, "b")]
        cur.execute("SELECT k, v FROM h ORDER BY k")
        assert cur.fetchall() == [(2, "B"), (3, "c")]
        cur.execute("SELECT k, v, is_deleted FROM table_changes('h', %s, %s) ORDER BY k",
                    (mid, end))
        assert cur.fetchall() == [(1, "a", True), (2, "B", False), (3, "c", False)]


def test_explain_shows_pushdown_and_pruning(db):
    cur = db.cursor()
    cur.execute("EXPLAIN SELECT name FROM emp WHERE id = 3 AND name LIKE 'c%'")
    plan = "\n".join(r[0] for r in cur.fetchall())
    assert "Scan emp" in plan
    assert "tablets: 1 of 3" in plan
    assert "LIKE" in plan
    cur.execute("EXPLAIN ANALYZE SELECT d.dname, count(*) FROM emp e JOIN dept d "
                "ON e.dept = d.id WHERE d.id < 10 GROUP BY d.dname")
    plan = "\n".join(r[0] for r in cur.fetchall())
    assert "rows=" in plan and "scanned:" in plan and "lazy materialization" in plan
    assert "tablets: 1 of 2" in plan     # the range partition 10 <= id < 100 is pruned


def test_explain_of_writes_plans_them_and_analyze_performs_them(tmp_path):
    """EXPLAIN of INSERT / UPSERT / UPDATE / DELETE shows the plan of the rows written
    (it was 0A000); EXPLAIN ANALYZE performs the write, as PostgreSQL does, and reports
    the rows written and refused."""
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE w (k INT PRIMARY KEY, v STRING) "
                    "PARTITION BY HASH (k) PARTITIONS 2")
        cur.execute("INSERT INTO w VALUES (1, 'a'), (2, 'b'), (3, 'c')")

        def plan(sql):
            cur.execute(sql)
            return "\n".join(r[0] for r in cur.fetchall())
        p = plan("EXPLAIN UPDATE w SET v = 'x' WHERE k > 1")
        assert p.startswith("Update on w (SET v)") and "pushed: k > 1" in p
        assert "Output: k, v" in p and "rows=" not in p
        assert "Delete on w" in plan("EXPLAIN DELETE FROM w WHERE v = 'a'")
        assert plan("EXPLAIN UPSERT INTO w VALUES (3, 'u')").startswith("Upsert on w")
        cur.execute("SELECT k, v FROM w ORDER BY k")
        assert cur.fetchall() == [(1, "a"), (2, "b"), (3, "c")]   # plain EXPLAIN: no write
        p = plan("EXPLAIN ANALYZE UPDATE w SET v = v || 'y' WHERE k > 1")
        assert "rows=2" in p and "Rows written: 2" in p
        p = plan("EXPLAIN ANALYZE INSERT INTO w VALUES (3, 'dup'), (4, 'd')")
        assert p.startswith("Insert on w") and "Rows written: 1, 1 refused (23505)" in p
        assert "Rows written: 4" in plan("EXPLAIN ANALYZE DELETE FROM w")
        cur.execute("SELECT count(*) FROM w")
        assert cur.fetchall() == [(0,)]
        # a plain EXPLAIN has the statement's shape errors, as PostgreSQL's does
        for bad, state in (("EXPLAIN INSERT INTO w VALUES (3, 'c', 99)", "42601"),
                           ("EXPLAIN INSERT INTO w (v) VALUES ('x')", "23502"),
                           ("EXPLAIN INSERT INTO w (k, v) VALUES (5)", "42601")):
            with pytest.raises(kudusql.Error) as e:
                cur.execute(bad)
            assert e.value.sqlstate == state, bad
        with pytest.raises(kudusql.NotSupportedError) as e:
            cur.execute("EXPLAIN CREATE TABLE u (k INT PRIMARY KEY)")
        assert e.value.sqlstate == "0A000"
        with pytest.raises(kudusql.Error) as e:
            cur.execute("EXPLAIN UPDATE w SET k = 1")
        assert e.value.sqlstate == "0A000" and "primary key" in str(e.value)


def test_pg_typeof_names_the_type(tmp_path):
    """pg_typeof(x) (it was 42883): PostgreSQL's type names, kudusql's declared types (an
    integer literal is integer, and integer + integer integer, as in PostgreSQL)."""
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE ty (k INT PRIMARY KEY, d DECIMAL(10,2), s STRING, "
                    "ts TIMESTAMP, r REAL, b BOOLEAN)")
        cur.execute("INSERT INTO ty VALUES (1, 1.5, 'a', TIMESTAMP '2024-01-01', 1.5, true)")
        cur.execute("SELECT pg_typeof(k), pg_typeof(d), pg_typeof(s), pg_typeof(ts), "
                    "pg_typeof(r), pg_typeof(b), pg_typeof(NULL), pg_typeof(ARRAY['x']), "
                    "pg_typeof(k + 1), pg_typeof(sum(k) OVER ()) FROM ty")
        assert cur.fetchall() == [("integer", "numeric", "text", "timestamp without time zone",
                                   "real", "boolean", "unknown", "text[]", "integer",
                                   "bigint")]
        with pytest.raises(kudusql.Error) as e:
            cur.execute("SELECT pg_typeof(1, 2)")
        assert e.value.sqlstate == "42883"


def test_decimal_arithmetic_is_exact(db):
    (r,) = q(db, "SELECT sum(salary * (1 - 0.05) * (1 + 0.08)) FROM emp")
    import decimal
    assert r[0] == sum(decimal.Decimal(x) * decimal.Decimal("0.95") * decimal.Decimal("1.08")
                       for x in ("100.50", "80.25", "70.00", "60.00", "80.25"))


def test_arrow_results(db):
    t = db.cursor().execute("SELECT id, salary FROM emp WHERE id <= 2 ORDER BY id") \
        .fetch_arrow_table()
    assert t.schema.field(1).type == pa.decimal128(10, 2)
    assert t.column(0).to_pylist() == [1, 2]


def test_streamed_results_match_and_stop_early(tmp_path):
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE big (k INT PRIMARY KEY, v STRING) "
                    "PARTITION BY HASH (k) PARTITIONS 2")
        cur.executemany("INSERT INTO big VALUES (%s, %s)", [(i, str(i)) for i in range(50_000)])
        s = c._session
        (r,) = list(s.execute_iter("SELECT k, v || '!' AS w FROM big WHERE k % 2 = 0"))
        assert r.table is None and r.schema.names == ["k", "w"]
        got = pa.Table.from_batches(list(r.stream))
        assert got.num_rows == 25_000 and sorted(got.column("k").to_pylist())[:2] == [0, 2]
        (r,) = list(s.execute_iter("SELECT k FROM big LIMIT 7"))
        assert sum(b.num_rows for b in r.stream) == 7
        # non-streamable plans still come back as batches
        (r,) = list(s.execute_iter("SELECT count(*) FROM big"))
        assert [b.to_pylist() for b in r.batches()] == [[{"count": 50_000}]]


WINDOW_CASES = [
    "SELECT id, row_number() OVER (PARTITION BY dept ORDER BY salary, id), "
    "rank() OVER (PARTITION BY dept ORDER BY salary), dense_rank() OVER (ORDER BY salary) "
    "FROM emp",
    "SELECT id, sum(salary) OVER (PARTITION BY dept), sum(salary) OVER (PARTITION BY dept "
    "ORDER BY salary), count(*) OVER (), count(salary) OVER (PARTITION BY dept ORDER BY id "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM emp",
    "SELECT id, lag(salary) OVER (PARTITION BY dept ORDER BY id), lead(id, 1, -1) OVER "
    "(ORDER BY id), first_value(name) OVER (PARTITION BY dept ORDER BY id DESC) FROM emp",
    "SELECT id, avg(salary) OVER (PARTITION BY dept), min(salary) OVER (PARTITION BY dept "
    "ORDER BY id), max(salary) OVER () FROM emp",
    "SELECT dept, sum(salary), rank() OVER (ORDER BY sum(salary) DESC) FROM emp GROUP BY dept",
]


@pytest.mark.parametrize("sql", WINDOW_CASES)
def test_window_functions_match_duckdb(db, sql):
    assert same_rows(q(db, sql), duck(db, sql))


def test_identifiers_fold_like_postgresql_and_names(tmp_path):
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute('CREATE TABLE TT (K INT PRIMARY KEY, "V" INT, w INT)')
        cur.execute("INSERT INTO tt VALUES (1, 2, 3)")
        cur.execute('SELECT 1 + k, K, "V", 1, count(*) FROM Tt GROUP BY k, "V"')
        assert [d[0] for d in cur.description] == ["?column?", "k", "V", "?column?", "count"]
        assert cur.fetchall() == [(2, 1, 2, 1, 1)]
        cur.execute("SELECT * FROM tt")
        assert [d[0] for d in cur.description] == ["k", "V", "w"]
        s = c._session
        (r,) = s.execute("SELECT $1,$2", [1, "a"])     # no space after the comma
        assert r.table.to_pylist() == [{"?column?": 1}] or r.table.num_columns == 2


def test_parameterised_plans_are_reused_and_invalidated_by_ddl(tmp_path):
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE p (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) "
                    "PARTITIONS 2")
        cur.executemany("INSERT INTO p VALUES (%s, %s)", [(i, f"v{i}") for i in range(20)])
        sql = "SELECT v FROM p WHERE k = %s"
        assert [cur.execute(sql, (i,)).fetchall() for i in (3, 4, 99)] == \
            [[("v3",)], [("v4",)], []]
        assert len(c._session._plans._entries) == 1          # one plan, three executions
        cur.execute("ALTER TABLE p ADD COLUMN w INT DEFAULT 7")
        cur.execute("SELECT * FROM p WHERE k = %s", (5,))
        assert cur.fetchall() == [(5, "v5", 7)]
        assert cur.execute(sql, (5,)).fetchall() == [("v5",)]  # re-planned after the DDL
        cur.execute("SELECT v FROM p WHERE k > %s ORDER BY k LIMIT %s", (17, 5))
        assert cur.fetchall() == [("v18",), ("v19",)]
        cur.execute("SELECT v FROM p WHERE k > %s ORDER BY k LIMIT %s", (15, 1))
        assert cur.fetchall() == [("v16",)]                   # LIMIT $2 is never cached


def test_cross_joins_count_right_and_can_be_cancelled(tmp_path):
    import threading
    with kudusql.connect(str(tmp_path / "db")) as c:
        cur = c.cursor()
        cur.execute("CREATE TABLE a (k INT PRIMARY KEY)")
        cur.executemany("INSERT INTO a VALUES (%s)", [(i,) for i in range(3000)])
        cur.execute("SELECT count(*) FROM a x, a y WHERE x.k < 3")    # column-less inputs
        assert cur.fetchone() == (9000,)
        timer = threading.Timer(0.3, c.cancel)
        timer.start()
        with pytest.raises(kudusql.OperationalError) as ei:
            cur.execute("SELECT count(*) FROM a x, a y, a z WHERE x.k + y.k + z.k < 0 "
                        "AND z.k < 4")
        timer.cancel()
        assert ei.value.sqlstate == "57014"


def test_a_quoted_mixed_case_table_name_qualifies_its_columns(tmp_path):
    """`SELECT "Users".id FROM "Users"` (what SQLAlchemy writes for a mixed-case table) was
    42703: the implicit alias became `users`. Also in joins, UPDATE ... FROM and
    DELETE ... USING with RETURNING."""
    import kudusql
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute('CREATE TABLE "Users" (id INT PRIMARY KEY, "Name" TEXT)')
    cur.execute('CREATE TABLE "Mixed" ("Key" INT PRIMARY KEY, v INT)')
    cur.execute("INSERT INTO \"Users\" VALUES (1, 'a'), (2, 'b')")
    cur.execute('INSERT INTO "Mixed" VALUES (1, 10)')
    cur.execute('SELECT "Users".id, "Users"."Name" FROM "Users" ORDER BY "Users".id')
    assert cur.fetchall() == [(1, "a"), (2, "b")]
    cur.execute('SELECT "Users".id, "Mixed".v FROM "Users" JOIN "Mixed" '
                'ON "Mixed"."Key" = "Users".id')
    assert cur.fetchall() == [(1, 10)]
    cur.execute('UPDATE "Mixed" SET v = 3 FROM "Users" WHERE "Users".id = "Mixed"."Key" '
                'RETURNING "Mixed".v')
    assert cur.fetchall() == [(3,)]
    cur.execute('DELETE FROM "Users" USING "Mixed" WHERE "Mixed"."Key" = "Users".id '
                'RETURNING "Users"."Name"')
    assert cur.fetchall() == [("a",)]
    conn.close()
