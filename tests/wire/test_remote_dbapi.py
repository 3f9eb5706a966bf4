"""kudusql.connect("postgresql://...") - the remote DB-API form - against the real server."""

import decimal

import pytest

import kudusql


def test_remote_connect_execute_fetch_and_errors(server):
    dsn = f"postgresql://kudusql@127.0.0.1:{server.port}/kudusql"
    with kudusql.connect(dsn) as conn:
        cur = conn.cursor()
        cur.execute("CREATE TABLE rem (k BIGINT PRIMARY KEY, v STRING, m DECIMAL(8,2)) "
                    "PARTITION BY HASH (k) PARTITIONS 2")
        cur.execute("INSERT INTO rem VALUES (%s, %s, %s)", (1, "a", decimal.Decimal("1.50")))
        assert cur.rowcount == 1
        cur.executemany("INSERT INTO rem VALUES (%s, %s, %s)",
                        [(2, "b", decimal.Decimal("2.00")), (3, None, None)])
        cur.execute("SELECT k, v, m FROM rem WHERE k >= %(lo)s ORDER BY k", {"lo": 2})
        assert [d[0] for d in cur.description] == ["k", "v", "m"]
        assert cur.fetchall() == [(2, "b", decimal.Decimal("2.00")), (3, None, None)]
        t = cur.execute("SELECT k FROM rem ORDER BY k").fetch_arrow_table()
        assert t.column("k").to_pylist() == [1, 2, 3]
        cur.execute("SELECT 1; SELECT 2")          # several statements, simple protocol
        with pytest.raises(kudusql.ProgrammingError) as ei:
            cur.execute("SELECT nope FROM rem")
        assert ei.value.sqlstate == "42703" and ei.value.position == 8
        with pytest.raises(kudusql.IntegrityError) as ei:
            cur.execute("INSERT INTO rem VALUES (4, 'd', 0), (1, 'dup', 0)")
        assert ei.value.sqlstate == "23505"
        cur.execute("SELECT count(*) FROM rem")
        assert cur.fetchone() == (4,)             # the good row of the failed batch applied
