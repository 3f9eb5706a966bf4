"""Point reads (planner/point_read.py): a parameterised statement that reads one row by its full
primary key, executed again, skips the planner. Every answer it gives must be the one the
planner would give: each case runs once to be cached, then with the values under test, and
is compared with a fresh session (no cache) running the same values."""

import datetime as dt
import decimal

import pytest

from kudusql.session import Database
from planner.errors import SqlError


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    db = Database.open(str(tmp_path_factory.mktemp("point") / "db"))
    s = db.session()
    s.execute("CREATE TABLE kv (k BIGINT PRIMARY KEY, v BIGINT, s STRING, d DECIMAL(10,2)) "
              "PARTITION BY HASH (k) PARTITIONS 3")
    s.execute("INSERT INTO kv VALUES (1, 10, 'one', 1.50), (2, NULL, 'two', NULL), "
              "(3, 30, NULL, 3.25)")
    s.execute("CREATE TABLE small (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) "
              "PARTITIONS 2")
    s.execute("INSERT INTO small VALUES (1, 'a'), (2147483647, 'max')")
    s.execute("CREATE TABLE comp (host STRING, ts TIMESTAMP, metric INT, val DOUBLE, "
              "PRIMARY KEY (host, ts, metric)) PARTITION BY HASH (host) PARTITIONS 2, "
              "RANGE (ts) (PARTITION VALUES < '2030-01-01')")
    s.execute("INSERT INTO comp VALUES ('h1', '2024-01-01 10:00:00', 1, 0.5), "
              "('h1', '2024-01-01 10:00:00', 2, 1.5), ('h2', '2025-06-01 00:00:00', 1, 2.5)")
    yield db
    db.close()


@pytest.fixture
def s(tmp_path):
    """A session on a database of its own."""
    db = Database.open(str(tmp_path / "db"))
    yield db.session()
    db.close()


def _rows(session, sql, params):
    (r,) = session.execute(sql, params)
    t = r.table
    return t.schema, t.to_pylist()


def _answer(session, sql, params):
    """The rows with their schema, or the error's SQLSTATE."""
    try:
        return _rows(session, sql, params)
    except SqlError as e:
        return e.sqlstate


def _compare(database, sql, warm, cases):
    cached = database.session()
    cached.execute(sql, warm)                       # planned, cached, compiled
    for params in cases:
        fresh = database.session()
        assert _answer(cached, sql, params) == _answer(fresh, sql, params), params
    return cached


CASES = [
    ("SELECT v, s FROM kv WHERE k = $1", [1], [[2], [3], [4], [None], [2 ** 70], ["3"]]),
    ("SELECT * FROM kv WHERE k = $1", [1], [[1], [2], [99]]),
    ("SELECT s AS x, v AS y, s AS z FROM kv WHERE $1 = k", [1], [[2], [3]]),
    ("SELECT v + 1, upper(s), d * 2, k FROM kv WHERE k = $1", [1], [[2], [3], [77]]),
    ("SELECT v + $2, s FROM kv WHERE k = $1", [1, 5], [[1, 7], [3, -30], [2, 1]]),
    ("SELECT 1 FROM kv WHERE k = $1", [1], [[1], [5]]),
    ("SELECT v FROM small WHERE k = $1", [1], [[2147483647], [2 ** 31], [-2 ** 40], [1.0],
                                              [1.5]]),
    ("SELECT val FROM comp WHERE host = $1 AND ts = $2 AND metric = $3",
     ["h1", dt.datetime(2024, 1, 1, 10), 1],
     [["h1", dt.datetime(2024, 1, 1, 10), 2], ["h2", dt.datetime(2025, 6, 1), 1],
      ["h1", dt.datetime(2024, 1, 1, 10), 3], ["h3", dt.datetime(2024, 1, 1), 1]]),
    ("SELECT val FROM comp WHERE host = 'h1' AND metric = $2 AND ts = $1",
     [dt.datetime(2024, 1, 1, 10), 1], [[dt.datetime(2024, 1, 1, 10), 2]]),
    ("SELECT k, d FROM kv WHERE k = $1 AND d = $2", [1, decimal.Decimal("1.50")],
     [[3, decimal.Decimal("3.25")], [3, decimal.Decimal("3.00")]]),
    ("SELECT v, d FROM kv WHERE k = $1", [1], [[1], [2], [True], [1.0], [2 ** 63],
                                              [-2 ** 63], [decimal.Decimal("3")]]),
    ("SELECT host, metric, ts, val FROM comp WHERE host = $1 AND ts = $2 AND metric = $3",
     ["h1", dt.datetime(2024, 1, 1, 10), 1],
     [["h1", "2024-01-01 10:00:00", 2], ["h2", dt.date(2025, 6, 1), 1],
      ["h1", dt.datetime(2024, 1, 1, 10, tzinfo=dt.timezone.utc), 1], [5, None, 1]]),
]


@pytest.mark.parametrize("sql, warm, cases", CASES)
def test_point_reads_answer_like_the_planner(database, sql, warm, cases):
    _compare(database, sql, warm, cases)


@pytest.mark.parametrize("sql, warm, cases",   # (`AND d = $2`: no point read)
                         [c for c in CASES if "AND d =" not in c[0]])
@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_execute_point_answers_like_the_planner(database, sql, warm, cases, zone):
    """`Session.execute_point` (plain columns and a key of plain values without a clock
    or zone, everything else under both): where it answers, what a fresh plan answers;
    in another TimeZone too (a timestamptz key parameter is read in it)."""
    cached = database.session()
    cached.execute(f"SET TIME ZONE '{zone}'")
    cached.execute(sql, warm)
    answered = 0
    for params in [warm] + cases:
        fresh = database.session()
        fresh.execute(f"SET TIME ZONE '{zone}'")
        try:
            r = cached.execute_point(sql, params)
            got = None if r is None else (r.table.schema, r.table.to_pylist())
        except SqlError as e:
            got = e.sqlstate
        if got is not None:
            answered += 1
            assert got == _answer(fresh, sql, params), params
    assert answered


def test_a_full_key_equality_is_compiled_and_other_shapes_are_not(database):
    s = database.session()
    compiled = ["SELECT v FROM kv WHERE k = $1",
                "SELECT v + 1 FROM kv WHERE k = $1",
                "SELECT val FROM comp WHERE metric = $3 AND ts = $2 AND host = $1"]
    not_compiled = ["SELECT v FROM kv WHERE k = $1 AND v > 0",       # a residual filter
                    "SELECT val FROM comp WHERE host = $1 AND metric = $2",   # key prefix
                    "SELECT v FROM kv WHERE k = $1 + 1",             # expression of a param
                    "SELECT count(*) FROM kv WHERE k = $1",          # aggregate on top
                    "SELECT v FROM kv WHERE k = $1 OR k = 2"]
    params = {compiled[2]: ["h1", dt.datetime(2024, 1, 1, 10), 1],
              not_compiled[1]: ["h1", 1]}
    for sql in compiled + not_compiled:
        p = params.get(sql, [1])
        s.execute(sql, p)
        assert (s._plans.point_read(s.catalog, sql, p) is not None) == (sql in compiled), sql


def test_cached_point_reads_see_new_writes_and_ddl(s):
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) "
              "PARTITIONS 2")
    sql = "SELECT * FROM t WHERE k = $1"
    assert _rows(s, sql, [1])[1] == []
    s.execute("INSERT INTO t VALUES (1, 'a')")
    assert _rows(s, sql, [1])[1] == [{"k": 1, "v": "a"}]
    s.execute("UPDATE t SET v = 'b' WHERE k = 1")
    assert _rows(s, sql, [1])[1] == [{"k": 1, "v": "b"}]
    s.execute("ALTER TABLE t ADD COLUMN w INT DEFAULT 7")
    assert _rows(s, sql, [1])[1] == [{"k": 1, "v": "b", "w": 7}]
    s.execute("DROP TABLE t")
    with pytest.raises(SqlError) as e:
        s.execute(sql, [1])
    assert e.value.sqlstate == "42P01"
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, x DOUBLE) PARTITION BY HASH (k) "
              "PARTITIONS 2")
    s.execute("INSERT INTO t VALUES (1, 2.5)")
    assert _rows(s, sql, [1])[1] == [{"k": 1, "x": 2.5}]


def test_time_travel_reads_are_not_served_from_the_latest_rows(s):
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT) PARTITION BY HASH (k) PARTITIONS 2")
    s.execute("INSERT INTO t VALUES (1, 1)")
    (r,) = s.execute("SELECT now()")
    before = r.table.column(0)[0].as_py()
    s.execute("UPDATE t SET v = 2 WHERE k = 1")
    sql = "SELECT v FROM t FOR SYSTEM_TIME AS OF $2 WHERE k = $1"
    for _ in range(2):
        assert _rows(s, sql, [1, before])[1] == [{"v": 1}]


def test_repeated_updates_and_deletes_by_key_use_their_cached_plans(s):
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT, s STRING) PARTITION BY HASH (k) "
              "PARTITIONS 2")
    s.execute("INSERT INTO t VALUES (1, 0, 'a'), (2, 0, 'b'), (3, 0, 'c')")
    inc = "UPDATE t SET v = v + 1 WHERE k = $1"
    for k in (1, 1, 2, 1, 9):
        (r,) = s.execute(inc, [k])
        assert r.rowcount == (0 if k == 9 else 1)
    setv = "UPDATE t SET s = $2, v = v * $3 WHERE k = $1"
    s.execute(setv, [1, "x", 10])
    s.execute(setv, [2, "y", 5])
    for k, deleted in ((3, 1), (3, 0), (42, 0)):
        (r,) = s.execute("DELETE FROM t WHERE k = $1", [k])
        assert r.rowcount == deleted
    assert _rows(s, "SELECT * FROM t ORDER BY k", None)[1] == [
        {"k": 1, "v": 30, "s": "x"}, {"k": 2, "v": 5, "s": "y"}]
    assert s._plans.point_read(s.catalog, "\x00matching\x00" + inc, [1]) is not None
    # an error in the SET expression still arrives with its SQLSTATE on the cached path
    with pytest.raises(SqlError) as e:
        s.execute("UPDATE t SET v = v / $2 WHERE k = $1", [1, 0])
    with pytest.raises(SqlError) as e2:
        s.execute("UPDATE t SET v = v / $2 WHERE k = $1", [2, 0])
    assert e.value.sqlstate == e2.value.sqlstate == "22012"


def test_one_value_array_equals_pa_array():
    """The point read's result columns built from buffers (planner.point_read
    `one_value_array`) equal `pa.array([v], type)` for every value kind it builds."""
    import math

    import pyarrow as pa

    from planner.point_read import one_value_array
    cases = [(pa.int64(), [0, -2**63, 2**63 - 1, None]), (pa.int8(), [-128, 127, None]),
             (pa.int16(), [-5]), (pa.int32(), [2**31 - 1]), (pa.uint64(), [2**64 - 1]),
             (pa.float32(), [0.1, 1e30, -0.0, None]), (pa.float64(), [0.1, math.inf, None]),
             (pa.string(), ["", "h\u00e9llo", "a\x00b", None]), (pa.bool_(), [True, None]),
             (pa.date32(), [None])]
    for t, values in cases:
        make = one_value_array(t)
        for v in values:
            got = make(v)
            got.validate(full=True)
            assert got.equals(pa.array([v], t)), (t, v)


def test_update_and_delete_leave_the_shared_parse_untouched(s):
    """UPDATE / DELETE run on the parse cache's shared node without a copy (the session
    relies on planner.dml reading it only): after every kind of them, cached and fresh
    parses of the text must still be equal, and a second run must do the same again."""
    from session.frontdoor import _parse_cached, _parse_one
    s.execute("CREATE TABLE kv (k BIGINT PRIMARY KEY, v BIGINT DEFAULT 5, s STRING) "
              "PARTITION BY HASH (k) PARTITIONS 2")
    s.execute("INSERT INTO kv VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')")
    cases = [("UPDATE kv SET v = v + 1 WHERE k = $1", [1]),
             ("UPDATE kv SET v = $1, s = upper(s) WHERE k = $2", [7, 2]),
             ("UPDATE kv AS t SET v = DEFAULT WHERE t.k = $1", [3]),
             ("UPDATE kv SET v = (SELECT max(v) FROM kv) WHERE k IN (SELECT k FROM kv "
              "WHERE v > $1)", [0]),
             ("WITH m AS (SELECT 2 AS k) UPDATE kv SET s = 'w' WHERE k IN (SELECT k FROM m)",
              None),
             ("DELETE FROM kv WHERE k = $1 AND v > -1", [3]),
             ("DELETE FROM kv WHERE s = 'nothing'", None)]
    for sql, params in cases:
        first = [r.rowcount for r in s.execute(sql, params)]
        assert _parse_cached(sql) == _parse_one(sql), sql
        assert [r.rowcount for r in s.execute(sql, params)] == first or "DELETE" in sql
        assert _parse_cached(sql) == _parse_one(sql), sql


@pytest.mark.parametrize("sql,params", [
    ("UPDATE kv SET v = $1 WHERE k = $2", [[7, 1], [None, 2], [2.5, 3], [-2**63, 1], [5, 99]]),
    ("UPDATE kv SET s = $1, v = $2 WHERE k = $3", [["x", 1, 1], [None, None, 2], ["é", 3, 4]]),
    ("UPDATE kv SET d = $1 WHERE k = $2", [[decimal.Decimal("2.345"), 1], [3, 2], ["1.5", 3]]),
    ("UPDATE kv SET v = v + $1 WHERE k = $2", [[1, 1], [2, 2]]),
    ("DELETE FROM kv WHERE k = $1", [[1], [5]]),
])
def test_key_write_matching_reads_equal_the_executor(tmp_path, sql, params):
    """The matching read of a key write whose items are columns and bare parameters is
    answered without the executor (PointRead `direct`): its rows must equal the executor
    path's (`direct` off) for the same parameters, and the writes the same table states
    as a fresh session's (no cache) running the same statements."""
    import dataclasses

    from planner.dml import MATCHING_KEY

    states = []
    for cached in (True, False):
        db = Database.open(str(tmp_path / f"db{cached}"))
        try:
            s = db.session()
            s.execute("CREATE TABLE kv (k BIGINT PRIMARY KEY, v BIGINT, s STRING, "
                      "d DECIMAL(10,2)) PARTITION BY HASH (k) PARTITIONS 3")
            s.execute("INSERT INTO kv VALUES (1, 10, 'one', 1.50), (2, NULL, 'two', NULL), "
                      "(3, 30, NULL, 3.25), (4, 40, 'four', 4)")
            out = []
            if cached:              # planned and cached on a key that is not there
                s.execute(sql, params[0][:-1] + [999])
            for p in params:
                if not cached:
                    s = db.session()
                else:
                    fast = s._plans.point_read(db.catalog, MATCHING_KEY + sql, p)
                    if fast is not None and fast.direct is not None:
                        slow = dataclasses.replace(fast, direct=None, _makers=None)
                        a = fast.run(db.catalog, p)
                        b = slow.run(db.catalog, p)
                        assert a is not None and a.equals(b), (sql, p, a, b)
                try:
                    out.append([r.rowcount for r in s.execute(sql, p)])
                except SqlError as e:
                    out.append(e.sqlstate)
            (r,) = s.execute("SELECT * FROM kv ORDER BY k")
            states.append((out, r.table.to_pylist()))
        finally:
            db.close()
    assert states[0] == states[1]


def test_execute_point_follows_partitions_and_renames(s):
    """`Session.execute_point` (the loop's in-memory point read: the table resolved once per
    catalog version, Table.lookup_now) after each DDL answers as a fresh plan does."""
    s.execute("CREATE TABLE r (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) "
              "PARTITIONS 2, RANGE (k) (PARTITION VALUES < 10)")
    s.execute("INSERT INTO r VALUES (1, 'a')")
    sql = "SELECT v FROM r WHERE k = $1"

    def point(k):
        s.execute(sql, [k])                     # cached (again, after a DDL)
        r = s.execute_point(sql, [k])
        assert r is not None
        return r.table.to_pylist()
    assert point(1) == [{"v": "a"}] and point(15) == []
    s.execute("ALTER TABLE r ADD RANGE PARTITION 10 <= VALUES < 20")
    s.execute("INSERT INTO r VALUES (15, 'b')")
    assert point(15) == [{"v": "b"}]
    s.execute("ALTER TABLE r DROP RANGE PARTITION 10 <= VALUES < 20")
    assert point(15) == []
    s.execute("ALTER TABLE r RENAME COLUMN v TO w")
    assert s.execute_point(sql, [1]) is None    # the cached plan is no longer valid
    with pytest.raises(SqlError) as e:
        s.execute(sql, [1])
    assert e.value.sqlstate == "42703"
    s.execute("ALTER TABLE r RENAME COLUMN w TO v")
    assert point(1) == [{"v": "a"}]
    s.execute("ALTER TABLE r RENAME TO r2")
    assert s.execute_point(sql, [1]) is None
    s.execute("CREATE TABLE r (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) "
              "PARTITIONS 2")
    s.execute("INSERT INTO r VALUES (1, 'other')")
    assert point(1) == [{"v": "other"}]


@pytest.mark.parametrize("sql, warm, cases",   # (`AND d = $2`: no point read)
                         [c for c in CASES if "AND d =" not in c[0]])
def test_read_plain_equals_plain_key_then_run(database, sql, warm, cases):
    """`PointRead.read_plain` (execute_point's one-call plain read) gives what the chain it
    stands for gives: `plain_key`, then `run(now=True, key=...)` on the facade - the same
    table, or None exactly where `plain_key` declines (a bool, a float, an int out of the
    key column's range, a str for an integer key, a datetime, NULL)."""
    s = database.session()
    s.execute(sql, warm)
    fast = s._plans.point_read(database.catalog, sql, warm)
    assert fast is not None
    for params in [warm] + cases:
        got = fast.read_plain(params)
        key = fast.plain_key(params)
        if key is None:
            assert got is None, params
            continue
        want = fast.run(database.catalog, params, fast.facade(database.catalog), now=True,
                        key=key)
        assert got is not None and got.table.equals(want) and \
            got.table.schema == want.schema, params
        # the row it carries is the table's row (where it answers for the DB-API)
        rows = got.plain_rows()
        assert rows is None or rows == [tuple(r.values()) for r in want.to_pylist()], params


def test_dbapi_point_reads_return_the_planners_rows(tmp_path):
    """The DB-API's cached point read (`Session._run` -> `PointRead.read_plain`: a
    PointResult carrying the row) returns exactly the rows, Python types and description a
    fresh plan returns, for every column type: the carried tuple where its types give the
    table's values (integers, DOUBLE, text, bool), the table otherwise (REAL as PostgreSQL
    prints it, dates, timestamps, decimals, bytes). Where it answers from the tuple, no
    Arrow table is made."""
    import kudusql
    from kudusql.dbapi import Connection
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE ty (k BIGINT PRIMARY KEY, b BOOLEAN, i1 TINYINT, i2 SMALLINT, "
                "i4 INT, i8 BIGINT, f4 REAL, f8 DOUBLE, s STRING, vc VARCHAR(8), "
                "by BINARY, d DATE, ts TIMESTAMP, dec DECIMAL(12,3)) "
                "PARTITION BY HASH (k) PARTITIONS 3")
    cur.execute("INSERT INTO ty VALUES (1, true, -128, 32767, -2147483648, "
                "9223372036854775807, 3.9, 0.1, 'ünï', 'abc', '\\x00ff'::bytea, "
                "'2024-02-29', '2024-01-01 10:00:00.123456', 123456789.125), "
                "(2, false, 0, 0, 0, -9223372036854775808, -0.0, -1e300, '', '', "
                "''::bytea, '0001-01-01', '1970-01-01 00:00:00', -0.001), "
                "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                "NULL, NULL)")
    cur.execute("UPDATE ty SET f8 = 2.5, s = 'upd' WHERE k = 2")   # a REDO record
    sqls = ["SELECT b, i1, i2, i4, i8, f8, s, vc FROM ty WHERE k = %s",     # plain types
            "SELECT * FROM ty WHERE k = %s",
            "SELECT f4, d, ts FROM ty WHERE k = %s",
            "SELECT s, by, dec, k FROM ty WHERE k = %s"]
    for sql in sqls:
        cur.execute(sql, (1,))                      # planned and cached
        for k in (1, 2, 3, 4, 1):
            cur.execute(sql, (k,))
            assert type(cur._result).__name__ == "PointResult", sql   # the row path
            desc = cur.description
            got = cur.fetchall()
            plain = cur._point is not None and cur._point._table is None
            fresh = Connection(conn.database, owns=False).cursor()
            fresh.execute(sql, (k,))                # a fresh session: planned, no cache
            assert type(fresh._result).__name__ != "PointResult"
            want = fresh.fetchall()
            assert got == want, (sql, k)
            assert [tuple(map(type, r)) for r in got] == \
                [tuple(map(type, r)) for r in want], (sql, k)
            assert desc == fresh.description, (sql, k)
            assert plain == (sql == sqls[0]), (sql, k)
        # the Arrow table of a point read is the planner's
        cur.execute(sql, (2,))
        fresh = Connection(conn.database, owns=False).cursor()
        fresh.execute(sql, (2,))
        assert cur.fetch_arrow_table().equals(fresh.fetch_arrow_table())
    conn.close()
