"""asyncpg against the real server: it prepares every statement (Parse/Describe/Flush),
asks for binary results, sends binary parameters typed by our ParameterDescription, and
uses cursors, executemany pipelines, binary COPY and CancelRequest."""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal

import asyncpg
import numpy as np
import pyarrow as pa
import pytest


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def big(server):
    """A 1M-row table: long enough to stream that a cancel lands mid-query."""
    s = server.db.session()
    s.execute("CREATE TABLE big (k BIGINT PRIMARY KEY, v BIGINT, s STRING) "
              "PARTITION BY HASH (k) PARTITIONS 2")
    n = 1_000_000
    server.db.catalog.table("big").insert(pa.table({
        "k": np.arange(n), "v": np.arange(n) % 1000,
        "s": pa.array(np.char.add("row", (np.arange(n) % 5000).astype(str)).tolist())}))
    return n


@pytest.fixture(scope="module")
def typed_table(server):
    s = server.db.session()
    s.execute("CREATE TABLE ty (id INT PRIMARY KEY, i2 SMALLINT, i8 BIGINT, f4 REAL, "
              "f8 DOUBLE, m DECIMAL(10,3), t STRING, ok BOOLEAN, d DATE, ts TIMESTAMP, "
              "by BINARY) PARTITION BY HASH (id) PARTITIONS 2")
    return "ty"


ROW = (1, 2, 4, 1.5, 2.25, decimal.Decimal("1.234"), "h\u00e9llo", True, dt.date(2024, 1, 2),
       dt.datetime(2024, 1, 2, 3, 4, 5, 6), b"\x00\x01")


def test_typed_parameters_and_results(server, typed_table):
    async def go():
        c = await asyncpg.connect(**server.asyncpg_kw())
        try:
            await c.execute("INSERT INTO ty (id, i2, i8, f4, f8, m, t, ok) "
                            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", *ROW[:8])
            await c.execute("UPDATE ty SET d = $1, ts = $2, by = $3 WHERE id = $4",
                            ROW[8], ROW[9], ROW[10], 1)
            rec = await c.fetchrow("SELECT * FROM ty WHERE id = $1", 1)
            assert tuple(rec) == ROW
            stmt = await c.prepare("SELECT i8, m FROM ty WHERE id = $1")
            assert [p.name for p in stmt.get_parameters()] == ["int4"]
            assert [a.type.name for a in stmt.get_attributes()] == ["int8", "numeric"]
            assert await stmt.fetchrow(1) == (4, decimal.Decimal("1.234"))
            assert await stmt.fetchval(2) is None
            assert await c.fetchval("SELECT $1::int + 1", 41) == 42
            assert await c.fetchval("SELECT count(*) FROM ty WHERE ts < $1",
                                    dt.datetime(2030, 1, 1)) == 1
        finally:
            await c.close()
    run(go())


def test_executemany_copy_records_and_cursor(server, typed_table):
    async def go():
        c = await asyncpg.connect(**server.asyncpg_kw())
        try:
            await c.executemany("INSERT INTO ty (id, t) VALUES ($1, $2)",
                                [(i, f"r{i}") for i in range(100, 150)])
            assert await c.fetchval("SELECT count(*) FROM ty WHERE id >= 100") == 50
            n = await c.copy_records_to_table("ty", records=[
                (200 + i, i, i * 10, 0.5, 1.5, decimal.Decimal(i), f"c{i}", i % 2 == 0,
                 dt.date(2020, 1, 1 + i), dt.datetime(2020, 1, 1, i), bytes([i]))
                for i in range(10)])
            assert n == "COPY 10"
            rows = await c.fetch("SELECT id, m, d, by FROM ty WHERE id >= 200 ORDER BY id")
            assert rows[3]["m"] == decimal.Decimal("3.000") and rows[3]["by"] == b"\x03"
            async with c.transaction():
                cur = await c.cursor("SELECT id FROM ty WHERE id >= 100 ORDER BY id")
                first = await cur.fetch(5)
                rest = await cur.fetch(1000)
                assert [r["id"] for r in first + rest] == \
                    list(range(100, 150)) + list(range(200, 210))
                got = [r["id"] async for r in c.cursor(
                    "SELECT id FROM ty WHERE id >= $1 ORDER BY id", 140, prefetch=3)]
                assert got == list(range(140, 150)) + list(range(200, 210))
        finally:
            await c.close()
    run(go())


def test_errors_carry_sqlstate_and_position(server, typed_table):
    async def go():
        c = await asyncpg.connect(**server.asyncpg_kw())
        try:
            with pytest.raises(asyncpg.UndefinedColumnError) as ei:
                await c.fetch("SELECT nosuch FROM ty")
            assert ei.value.sqlstate == "42703" and ei.value.position == "8"
            with pytest.raises(asyncpg.UniqueViolationError) as ei:
                await c.execute("INSERT INTO ty (id) VALUES (1), (9001), (2)")
            assert "row 1" in str(ei.value) and "9001" not in str(ei.value)
            assert await c.fetchval("SELECT count(*) FROM ty WHERE id = 9001") == 1
            with pytest.raises(asyncpg.PostgresSyntaxError):
                await c.execute("SELEC 1")
            assert await c.fetchval("SELECT 1") == 1
        finally:
            await c.close()
    run(go())


def test_cancel_long_query_then_connection_still_works(server, big):
    async def go():
        c = await asyncpg.connect(**server.asyncpg_kw())
        try:
            with pytest.raises(asyncio.TimeoutError):   # asyncpg sends a CancelRequest
                await c.fetch("SELECT k, v, s FROM big", timeout=0.2)
            assert await c.fetchval("SELECT 41 + 1") == 42
            task = asyncio.create_task(c.fetch("SELECT * FROM big"))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await c.fetchval("SELECT count(*) FROM big") == big
        finally:
            await c.close()
    run(go())


def test_statement_timeout(server, big):
    async def go():
        c = await asyncpg.connect(**server.asyncpg_kw(
            server_settings={"statement_timeout": "150"}))
        try:
            with pytest.raises(asyncpg.QueryCanceledError) as ei:
                await c.fetch("SELECT * FROM big")
            assert "statement timeout" in str(ei.value)
            await c.execute("SET statement_timeout = 0")
            assert await c.fetchval("SELECT count(*) FROM big WHERE v = 3") == big // 1000
        finally:
            await c.close()
    run(go())


def test_pool_reset_and_connect_time_queries(server):
    async def go():
        pool = await asyncpg.create_pool(**server.asyncpg_kw(), min_size=1, max_size=2)
        try:
            async with pool.acquire() as c:
                assert (await c.fetchval("select pg_catalog.version()")).startswith(
                    "PostgreSQL 15")
                assert await c.fetchval("select current_schema()") == "public"
                assert await c.fetchval("show transaction isolation level") == \
                    "read committed"
                assert await c.fetchrow(";") is None
            async with pool.acquire() as c:     # after the pool's RESET ALL / CLOSE ALL
                assert await c.fetchval("SELECT 2") == 2
        finally:
            await pool.close()
    run(go())


def test_repeated_point_reads_stay_right_while_cursors_and_writes_interleave(server):
    """A prepared primary-key read executed again runs on the server's event loop
    (Session.execute_point); its answers must not differ from the planner's: typed values,
    NULLs, misses, rows written meanwhile by another connection, and a cursor of the same
    connection suspended in the middle of its rows."""
    s = server.db.session()
    s.execute("CREATE TABLE pt (k INT PRIMARY KEY, v BIGINT, s STRING, d DECIMAL(8,2)) "
              "PARTITION BY HASH (k) PARTITIONS 3")
    s.execute("INSERT INTO pt SELECT k, k * 10, 'r' || k, k * 0.25 FROM generate_series(1, 200) "
              "AS g(k)")

    async def go():
        a = await asyncpg.connect(**server.asyncpg_kw())
        b = await asyncpg.connect(**server.asyncpg_kw())
        try:
            get = await a.prepare("SELECT s, v, d FROM pt WHERE k = $1")
            for k in (1, 2, 199, 500, -3, 2):
                row = await get.fetchrow(k)
                if 1 <= k <= 200:
                    assert tuple(row) == (f"r{k}", k * 10, decimal.Decimal(k) / 4)
                else:
                    assert row is None
            await b.execute("UPDATE pt SET v = NULL, s = 'changed' WHERE k = 2")
            await b.execute("INSERT INTO pt VALUES (500, 5, 'new', 1.25)")
            assert tuple(await get.fetchrow(2)) == ("changed", None, decimal.Decimal("0.50"))
            assert tuple(await get.fetchrow(500)) == ("new", 5, decimal.Decimal("1.25"))
            async with a.transaction():
                cur = await a.cursor("SELECT k FROM pt ORDER BY k")
                first = await cur.fetch(5)
                assert tuple(await get.fetchrow(3)) == ("r3", 30, decimal.Decimal("0.75"))
                rest = await cur.fetch(1000)
            assert [r["k"] for r in first + rest] == list(range(1, 201)) + [500]
            with pytest.raises(asyncpg.DataError):
                await get.fetchrow(2 ** 40)        # out of range for the int4 parameter
        finally:
            await a.close()
            await b.close()
    run(go())


def test_concurrent_single_row_writes_each_get_their_own_outcome(server):
    """Sixteen connections insert, upsert and update single rows at once; the server applies
    concurrent small writes together (engine/catalog/coalesce.py), and still every statement
    must get its own result: its duplicate key error (23505 with its key) or its row count,
    and every acknowledged row must be there."""
    s = server.db.session()
    s.execute("CREATE TABLE cw (k INT PRIMARY KEY, w INT, n INT) "
              "PARTITION BY HASH (k) PARTITIONS 3")
    s.execute("INSERT INTO cw SELECT g, -1, 0 FROM generate_series(0, 99) AS t(g)")

    async def worker(wid, conn):
        dups, inserted = [], []
        ins = await conn.prepare("INSERT INTO cw VALUES ($1, $2, 0)")
        upd = await conn.prepare("UPDATE cw SET n = n + 1, w = $2 WHERE k = $1")
        for i in range(40):
            # keys 0..99 exist already: every 4th insert is a duplicate, the rest are new
            k = (wid * 40 + i) % 100 if i % 4 == 0 else 1000 + wid * 40 + i
            try:
                await ins.fetch(k, wid)
                inserted.append(k)
            except asyncpg.UniqueViolationError as e:
                assert f"({k})" in str(e), str(e)
                dups.append(k)
            assert (await upd.fetch(2000 + wid, wid)) == []      # no such key: UPDATE 0
            status = await conn.execute("UPDATE cw SET n = n + 1 WHERE k = $1", k)
            assert status == "UPDATE 1"
        return dups, inserted

    async def go():
        conns = [await asyncpg.connect(**server.asyncpg_kw()) for _ in range(16)]
        try:
            return await asyncio.gather(*[worker(w, c) for w, c in enumerate(conns)])
        finally:
            for c in conns:
                await c.close()
    results = run(go())
    assert all(len(d) == 10 and len(i) == 30 for d, i in results)
    (r,) = s.execute("SELECT k, w FROM cw WHERE k >= 1000 ORDER BY k")
    got = {row["k"]: row["w"] for row in r.table.to_pylist()}
    assert got == {k: w for w, (_d, ins) in enumerate(results) for k in ins}
    (r,) = s.execute("SELECT count(*) AS c FROM cw")
    assert r.table.column(0)[0].as_py() == 100 + 16 * 30


def test_time_of_day_values_and_parameters_in_binary(server):
    """The time type (no storage: Kudu has none) in expressions: binary results and a
    binary time parameter, typed by the ParameterDescription of `$1::time`."""
    async def go():
        c = await asyncpg.connect(**server.asyncpg_kw())
        try:
            row = await c.fetchrow("SELECT TIME '07:05:01.25', $1::time + INTERVAL '90 minutes', "
                                   "extract(hour FROM $1::time), "
                                   "CAST(TIMESTAMP '2024-01-01 23:59:59' AS TIME) > $1::time",
                                   dt.time(23, 0))
            assert tuple(row) == (dt.time(7, 5, 1, 250000), dt.time(0, 30),
                                  decimal.Decimal(23), True)
        finally:
            await c.close()
    run(go())
