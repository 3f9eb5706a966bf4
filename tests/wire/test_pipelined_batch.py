"""Pipelined batches (wire/fastpath.py): a run of Bind/Execute of one prepared INSERT before
Sync is one engine write, with outcomes identical to running each Execute in order.

Differential: random pipelines of INSERT or UPSERT (good rows, duplicate keys - in the
pipeline and already in the table -, NULL in a NOT NULL column, values that do not decode
for the parameter's type or do not fit the column, optional Parse-per-row as JDBC sends
it, optional Describe of the portal) go over a raw protocol socket to two servers: one
batching (the default), one with `fast_paths=False` (every Execute on its own). Every
reply message (type, SQLSTATE, message text, command tag) and the final table must be the
same. Then the drivers that pipeline this way: asyncpg and psycopg `executemany`,
SQLAlchemy bulk insert (and JDBC `executeBatch` in test_jdbc.py)."""

from __future__ import annotations

import random
import struct

import pytest

from tests.wire.conftest import start_server, stop_server
from tests.wire.raw_client import (
    INT4,
    INT8,
    SYNC,
    TEXT,
    Raw,
    _cstr,
    _msg,
    bind,
    describe_portal,
    execute,
    parse,
)
DDL = ("CREATE TABLE t (k BIGINT NOT NULL, v INT NOT NULL, s TEXT, PRIMARY KEY (k)) "
       "PARTITION BY HASH (k) PARTITIONS 3")
INSERT = "INSERT INTO t VALUES ($1, $2, $3)"
UPSERT = "UPSERT INTO t VALUES ($1, $2, $3)"


def _binary(values: list) -> list:
    """(k, v, s) text values -> binary ones: int8, int4 (a value that does not fit or is
    not a number keeps a wrong size), text (sometimes invalid UTF-8)."""
    k, v, s = values
    out = [struct.pack("!q", int(k))]
    if v is None:
        out.append(None)
    elif v.isdigit() and int(v) < 2**31:
        out.append(struct.pack("!i", int(v)))
    else:
        out.append(v.encode()[:3])
    out.append(None if s is None else (b"\xff" if s == "x" and int(k) % 7 == 0 else
                                       s.encode()))
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipelined")
    batched = start_server(root / "a")
    one_by_one = start_server(root / "b", fast_paths=False)
    yield batched, one_by_one
    stop_server(batched)
    stop_server(one_by_one)


def _value(rng: random.Random) -> str | None:
    r = rng.random()
    if r < 0.03:
        return None                       # NULL into NOT NULL v
    if r < 0.05:
        return "abc"                      # does not decode as an integer (Bind fails)
    if r < 0.07:
        return str(2**40)                 # does not fit INT
    return str(rng.randrange(100))


def _pipeline(rng: random.Random, used: set, n: int) -> bytes:
    jdbc = rng.random() < 0.3             # the unnamed statement parsed again per row
    describe = rng.random() < 0.3
    oids = rng.choice([(INT8, INT4, TEXT), (), (INT8, 0, 0)])
    name = "" if jdbc else rng.choice(["", "ins"])
    binary = oids == (INT8, INT4, TEXT) and rng.random() < 0.5
    # UPSERT: a key repeated in the run is written again, the last value stays
    sql = UPSERT if rng.random() < 0.25 else INSERT
    data = parse(name, sql, oids)
    for i in range(n):
        k = rng.randrange(300) if rng.random() < 0.15 else rng.randrange(10**6)
        if rng.random() < 0.05:
            k = rng.choice(sorted(used)) if used else k
        used.add(k)
        if jdbc and i:
            data += parse(name, sql, oids)
        values = [str(k), _value(rng), rng.choice([None, "x", "é"])]
        data += bind(name, _binary(values), True) if binary else bind(name, values)
        if describe:
            data += describe_portal()
        data += execute()
    data += SYNC
    if name:
        data += _msg(b"C", b"S" + _cstr(name)) + SYNC
    return data


@pytest.mark.parametrize("seed", range(8))
def test_random_pipelines_batched_equal_one_by_one(pair, seed):
    rng = random.Random(seed)
    clients = [Raw(s.port) for s in pair]
    try:
        for c in clients:
            c.query(f"DROP TABLE IF EXISTS t; {DDL}")
            c.query("INSERT INTO t VALUES (1, 1, 'a'), (2, 2, 'b'), (250, 3, 'c')")
        used = {1, 2, 250}
        for _ in range(8):
            data = _pipeline(rng, used, rng.choice([1, 2, 5, 40, 200]))
            replies = [c.run(data) for c in clients]
            if data.endswith(SYNC + _msg(b"C", b"S" + _cstr("ins")) + SYNC):
                replies = [r + c.until_ready() for r, c in zip(replies, clients)]
            assert replies[0] == replies[1]
            tables = [c.query("SELECT k, v, s FROM t ORDER BY k") for c in clients]
            assert tables[0] == tables[1]
    finally:
        for c in clients:
            c.close()


def test_batching_happens(pair):
    """The batched server really writes a run as one statement (else the differential test
    compares the ordinary path with itself)."""
    batched, _ = pair
    c = Raw(batched.port)
    try:
        c.query(f"DROP TABLE IF EXISTS t; {DDL}")
        calls = []
        sess_cls = type(batched.db.session())
        real = sess_cls.execute_many

        def spy(self, sql, sets, in_order=False, columns=None):
            calls.append(len(columns[0]) if columns else len(sets))
            return real(self, sql, sets, in_order, columns)
        sess_cls.execute_many = spy
        try:
            data = parse("", INSERT, ()) + b"".join(
                bind("", [str(k), "1", "x"]) + execute() for k in range(50)) + SYNC
            replies = c.run(data)
        finally:
            sess_cls.execute_many = real
        assert calls and calls[0] == 50
        assert [r[0] for r in replies] == ["1"] + ["2", "C"] * 50 + ["Z"]
        # a duplicate in the middle: rows before it applied, it fails, none after it
        data = parse("", INSERT, ()) + b"".join(
            bind("", [str(k), "1", "x"]) + execute() for k in (100, 101, 5, 102)) + SYNC
        replies = c.run(data)
        assert [r[0] for r in replies] == ["1", "2", "C", "2", "C", "2", "E", "Z"]
        assert replies[-2][1] == "23505"
        keys = c.query("SELECT k FROM t WHERE k >= 100 ORDER BY k")
        assert [r[1] for r in keys if r[0] == "D"] == [b"\x00\x01\x00\x00\x00\x03100",
                                                     b"\x00\x01\x00\x00\x00\x03101"]
    finally:
        c.close()


# -- drivers ----------------------------------------------------------------------------------
def test_asyncpg_executemany(pair):
    import asyncio

    import asyncpg
    batched, _ = pair

    async def main():
        c = await asyncpg.connect(**batched.asyncpg_kw())
        try:
            await c.execute("DROP TABLE IF EXISTS am")
            await c.execute("CREATE TABLE am (k BIGINT NOT NULL, v INT, PRIMARY KEY (k)) "
                            "PARTITION BY HASH (k) PARTITIONS 2")
            await c.executemany("INSERT INTO am VALUES ($1, $2)",
                                [(i, i * 2) for i in range(3000)])
            assert await c.fetchval("SELECT count(*) FROM am") == 3000
            assert await c.fetchval("SELECT v FROM am WHERE k = 2999") == 5998
            with pytest.raises(asyncpg.UniqueViolationError):
                await c.executemany("INSERT INTO am VALUES ($1, $2)",
                                    [(5000, 1), (5001, 1), (7, 1), (5002, 1)])
            got = [r["k"] for r in await c.fetch("SELECT k FROM am WHERE k >= 5000 "
                                                 "ORDER BY k")]
            assert got == [5000, 5001]      # applied as they ran; none after the failure
            await c.executemany("UPSERT INTO am VALUES ($1, $2)", [(1, -1), (5003, -2)])
            assert await c.fetchval("SELECT v FROM am WHERE k = 1") == -1
        finally:
            await c.close()
    asyncio.run(main())


def test_psycopg_executemany(pair):
    import psycopg
    batched, _ = pair
    with psycopg.connect(batched.dsn(), autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS pm")
        c.execute("CREATE TABLE pm (k BIGINT NOT NULL, s TEXT, PRIMARY KEY (k)) "
                  "PARTITION BY HASH (k) PARTITIONS 2")
        with c.cursor() as cur:
            cur.executemany("INSERT INTO pm VALUES (%s, %s)",
                            [(i, f"s{i}") for i in range(2000)])
            assert c.execute("SELECT count(*) FROM pm").fetchone()[0] == 2000
            with pytest.raises(psycopg.errors.UniqueViolation):
                cur.executemany("INSERT INTO pm VALUES (%s, %s)",
                                [(3000, "a"), (4, "dup"), (3001, "b")])
        assert [r[0] for r in c.execute("SELECT k FROM pm WHERE k >= 3000")] == [3000]


def test_sqlalchemy_bulk_insert(pair):
    sa = pytest.importorskip("sqlalchemy")
    batched, _ = pair
    eng = sa.create_engine(f"postgresql+psycopg://kudusql@127.0.0.1:{batched.port}/kudusql")
    try:
        with eng.connect() as c:
            c.exec_driver_sql("DROP TABLE IF EXISTS sb")
            c.exec_driver_sql("CREATE TABLE sb (k BIGINT NOT NULL, s TEXT, PRIMARY KEY (k)) "
                              "PARTITION BY HASH (k) PARTITIONS 2")
            c.commit()
        md = sa.MetaData()
        sb = sa.Table("sb", md, sa.Column("k", sa.BigInteger, primary_key=True),
                      sa.Column("s", sa.Text))
        with eng.begin() as c:
            c.execute(sb.insert(), [{"k": i, "s": f"r{i}"} for i in range(1500)])
        with eng.connect() as c:
            assert c.execute(sa.text("SELECT count(*) FROM sb")).scalar() == 1500
            assert c.execute(sa.text("SELECT s FROM sb WHERE k = 1499")).scalar() == "r1499"
    finally:
        eng.dispose()


def test_asyncpg_executemany_numeric_batched_equals_one_by_one(pair):
    """Binary NUMERIC parameters of a batch (decoded value by value with
    `params.numeric_from_binary`, wire/fastpath.py `decode_columns`): the same table and
    the same error as the ordinary path, for values that round to the column's scale,
    trailing zeros, negatives, NULL, the edges of NUMERIC(12, 2), one past them and NaN."""
    import asyncio
    import decimal
    import random

    import asyncpg
    rng = random.Random(7)
    D = decimal.Decimal
    pool = [D("0"), D("-0.00"), D("1.005"), D("1.015"), D("-2.5"), D("123.450"),
            D("9999999999.99"), D("-9999999999.99"), D("0.001"), D("12345678.9"), None,
            D("1E+3"), D("5E-7")]
    batches = [[(k, rng.choice(pool)) for k in range(b * 100, b * 100 + 60)]
               for b in range(6)]
    batches.append([(900, D("1.5")), (901, D("10000000000.00")), (902, D("2"))])
    batches.append([(910, D("1.5")), (911, D("NaN")), (912, D("2"))])

    async def run(server):
        c = await asyncpg.connect(**server.asyncpg_kw())
        outcomes = []
        try:
            await c.execute("DROP TABLE IF EXISTS an")
            await c.execute("CREATE TABLE an (k BIGINT NOT NULL, n NUMERIC(12, 2), "
                            "PRIMARY KEY (k)) PARTITION BY HASH (k) PARTITIONS 2")
            for rows in batches:
                try:
                    await c.executemany("INSERT INTO an VALUES ($1, $2)", rows)
                    outcomes.append("ok")
                except asyncpg.PostgresError as e:
                    outcomes.append((e.sqlstate, str(e)))
            table = [tuple(r) for r in await c.fetch("SELECT k, n FROM an ORDER BY k")]
        finally:
            await c.close()
        return outcomes, table
    fast, slow = (asyncio.run(run(s)) for s in pair)
    assert fast == slow
    assert fast[0].count("ok") >= 6 and len(fast[1]) > 300


def test_decode_columns_stops_at_the_first_bind_of_another_shape():
    """`fastpath.decode_columns` covers the Binds before the first whose formats, value
    count or result formats differ from the first Bind's, and gives each parameter's
    values in order (the shapes are compared as a set, the values transposed by zip)."""
    import types

    import pyarrow as pa

    from wire.fastpath import decode_columns
    stmt = types.SimpleNamespace(param_oids=[INT8, TEXT], described=True,
                                 param_types=[pa.int64(), pa.string()])

    def b(k, s, formats=(1,), results=()):
        return ("", "", formats, (struct.pack("!q", k), s), results)
    binds = [b(1, b"a"), b(2, None), b(3, b"c")]
    odd = [b(4, b"d", formats=(0,)), ("", "", (1,), (struct.pack("!q", 5),), ()),
           b(6, b"f", results=(1,))]
    cols, n = decode_columns(stmt, binds, [1, "a"])
    assert n == 3 and [c.to_pylist() for c in cols] == [[1, 2, 3], ["a", None, "c"]]
    for other in odd:
        for at in (1, 2):
            run = binds[:at] + [other] + binds[at:]
            cols, n = decode_columns(stmt, run, [1, "a"])
            assert n == at, (other, at)
            assert [c.to_pylist() for c in cols] == [[1, 2][:at], ["a", None][:at]]
