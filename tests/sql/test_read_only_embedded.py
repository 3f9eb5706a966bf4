"""READ ONLY transactions in process: the embedded DB-API driver (and so the shell, which
runs the same Session) refuses writes with 25006 as the wire server does
(tests/wire/test_read_only.py compares the wire with PostgreSQL 15); the check is the
session's (session/access_mode.py), so every path that writes through a Session gets it:
statements with and without parameters, executemany's one-batch insert, DDL.
"""

from __future__ import annotations

import pytest

import kudusql


@pytest.fixture
def conn(tmp_path):
    c = kudusql.connect(str(tmp_path / "db"))
    c.execute("CREATE TABLE ro (k INT NOT NULL, v INT, PRIMARY KEY (k))")
    c.execute("INSERT INTO ro VALUES (1, 1)")
    yield c
    c.close()


def _refused(conn, sql, params=None, tag=None):
    with pytest.raises(kudusql.DatabaseError) as e:
        conn.execute(sql, params)
    assert e.value.sqlstate == "25006", e.value
    word = tag or sql.split()[0].upper()
    assert str(e.value).startswith(f"cannot execute {word} in a read-only transaction"), \
        str(e.value)


def _keys(conn) -> list[int]:
    return [r[0] for r in conn.execute("SELECT k FROM ro ORDER BY k").fetchall()]


def test_begin_read_only_refuses_every_kind_of_write(conn):
    conn.execute("BEGIN READ ONLY")
    assert conn.execute("SELECT count(*) FROM ro").fetchone() == (1,)
    _refused(conn, "INSERT INTO ro VALUES (2, 2)")
    _refused(conn, "INSERT INTO ro VALUES (%s, %s)", (3, 3), "INSERT")   # bulk-insert path
    _refused(conn, "UPSERT INTO ro VALUES (4, 4)")
    _refused(conn, "UPDATE ro SET v = 9 WHERE k = 1")
    _refused(conn, "UPDATE ro SET v = %s WHERE k = %s", (9, 1), "UPDATE")
    _refused(conn, "DELETE FROM ro WHERE k = 1")
    _refused(conn, "CREATE TABLE x (k INT PRIMARY KEY)", tag="CREATE TABLE")
    _refused(conn, "DROP TABLE ro", tag="DROP TABLE")
    with pytest.raises(kudusql.DatabaseError) as e:    # executemany: one batch, refused
        conn.cursor().executemany("INSERT INTO ro VALUES (%s, %s)", [(5, 5), (6, 6)])
    assert e.value.sqlstate == "25006"
    conn.execute("COMMIT")
    assert _keys(conn) == [1]
    assert conn.execute("SELECT v FROM ro").fetchone() == (1,)
    conn.execute("INSERT INTO ro VALUES (2, 2)")        # the block is over
    assert _keys(conn) == [1, 2]


def test_default_transaction_read_only_and_session_characteristics(conn):
    conn.execute("SET default_transaction_read_only = on")
    _refused(conn, "INSERT INTO ro VALUES (2, 2)")
    conn.execute("BEGIN")                               # a block takes the default's mode
    _refused(conn, "INSERT INTO ro VALUES (2, 2)")
    conn.execute("ROLLBACK")
    conn.execute("BEGIN READ WRITE")                    # ... unless it says otherwise
    conn.execute("INSERT INTO ro VALUES (2, 2)")
    conn.execute("COMMIT")
    _refused(conn, "DELETE FROM ro")
    conn.execute("RESET default_transaction_read_only")
    conn.execute("INSERT INTO ro VALUES (3, 3)")
    conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    _refused(conn, "UPDATE ro SET v = 0")
    conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE")
    conn.execute("UPDATE ro SET v = 0 WHERE k = 3")
    conn.execute("SET default_transaction_read_only = true")
    conn.execute("RESET ALL")
    conn.execute("INSERT INTO ro VALUES (4, 4)")
    assert _keys(conn) == [1, 2, 3, 4]
    with pytest.raises(kudusql.DatabaseError) as e:
        conn.execute("SET default_transaction_read_only = maybe")
    assert e.value.sqlstate == "22023"


def test_set_transaction_read_only_in_a_block(conn):
    cur = conn.execute("SET TRANSACTION READ ONLY")     # outside a block: a warning only
    assert cur.notices == ["WARNING: SET TRANSACTION can only be used in transaction blocks"]
    conn.execute("INSERT INTO ro VALUES (2, 2)")
    conn.execute("BEGIN")
    conn.execute("SET TRANSACTION READ ONLY")
    _refused(conn, "INSERT INTO ro VALUES (3, 3)")
    with pytest.raises(kudusql.DatabaseError) as e:     # too late to go back
        conn.execute("SET TRANSACTION READ WRITE")
    assert e.value.sqlstate == "25001"
    conn.execute("COMMIT")
    conn.execute("BEGIN")
    conn.execute("SET transaction_read_only = on")
    conn.execute("SET transaction_read_only = off")     # before any query: allowed
    conn.execute("INSERT INTO ro VALUES (3, 3)")
    conn.execute("COMMIT")
    assert _keys(conn) == [1, 2, 3]


def test_the_shell_session_refuses_too(tmp_path):
    """The session itself (what `kudusql shell` and every front end run statements on)."""
    from planner.errors import SqlError
    from session.database import Database
    db = Database.open(str(tmp_path / "db"))
    try:
        s = db.session()
        s.execute("CREATE TABLE ro (k INT PRIMARY KEY)")
        s.execute("BEGIN READ ONLY")
        with pytest.raises(SqlError) as e:
            s.execute("INSERT INTO ro VALUES (1)")
        assert e.value.sqlstate == "25006"
        with pytest.raises(SqlError):
            s.execute_many("INSERT INTO ro VALUES ($1)", [[1], [2]])
        s.execute("COMMIT")
        assert s.execute("SELECT count(*) FROM ro")[0].table.column(0).to_pylist() == [0]
    finally:
        db.close()
