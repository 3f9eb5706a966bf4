"""Timestamp parameters in a session TimeZone, run by real clients (asyncpg: binary;
psycopg: text and binary) against any server: tests/wire/test_tz_params.py runs them
against kudusql (fast paths on and off) and compares the answers with PostgreSQL 15's,
recorded in tz_params_expected.json by

    .venv/bin/python -m tests.wire.tz_param_cases \
        'host=127.0.0.1 port=P user=postgres dbname=postgres'

(a scratch PostgreSQL: bench/wire_bench.py's `Postgres` starts one).

Each scenario sets the zone, then: parameters typed timestamptz / timestamp / untyped
text cast in SELECT expressions (::text, extract, + interval), WHERE on a TIMESTAMP key
column (the point-read fast path once the statement is cached), INSERT of one row (the
single-row insert fast path), executemany (pipelined batch path), UPDATE by key (the
key-write fast path), and the table read back as text. Answers are text (`str` of what
the client gives, the same client on both sides) so that a value compares exactly."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sys

import asyncpg
import psycopg

ZONES = ("Asia/Kolkata", "America/New_York", "UTC")
CLIENTS = ("asyncpg", "psycopg-text", "psycopg-binary")
EXPECTED = os.path.join(os.path.dirname(__file__), "tz_params_expected.json")

UTC = dt.UTC
PLUS5 = dt.timezone(dt.timedelta(hours=5))
MINUS330 = dt.timezone(-dt.timedelta(hours=3, minutes=30))
# instants around New York's DST change (2020-03-08 07:00 UTC) and Kolkata's midnight
AWARE = [dt.datetime(2020, 1, 1, 0, 0, tzinfo=UTC),
         dt.datetime(2020, 3, 8, 6, 30, tzinfo=UTC),
         dt.datetime(2020, 3, 8, 7, 30, 0, 250000, tzinfo=UTC),
         dt.datetime(2020, 6, 1, 3, 0, tzinfo=PLUS5),
         dt.datetime(2020, 11, 1, 1, 15, tzinfo=MINUS330)]
NAIVE = [dt.datetime(2020, 1, 1, 0, 0), dt.datetime(2020, 3, 8, 2, 30),
         dt.datetime(2021, 7, 4, 23, 59, 59, 999999)]
TEXTS = ["2020-01-01 00:00:00+00", "2020-06-01 00:00:00+05", "2020-03-08 02:30:00-05",
         "2020-12-31 23:30:00+05:30", "2020-03-08 02:30:00"]

DDL = ["DROP TABLE IF EXISTS tzp",
       "CREATE TABLE tzp (k TIMESTAMP NOT NULL, v TIMESTAMP, n INT, PRIMARY KEY (k))"]

# (SQL, parameter lists); the parameter kind a client sends follows the Python value:
# psycopg sends an aware datetime as timestamptz, a naive one as timestamp, a str
# untyped; asyncpg sends what the statement's parameter type is (binary)
SELECTS = [
    ("SELECT CAST($1 AS TIMESTAMPTZ)::text", [[v] for v in AWARE]),
    ("SELECT CAST($1 AS TIMESTAMPTZ)", [[v] for v in AWARE]),
    ("SELECT extract(hour FROM $1::timestamptz), extract(day FROM $1::timestamptz)",
     [[v] for v in AWARE]),
    ("SELECT ($1::timestamptz + interval '1 day')::text, "
     "($1::timestamptz + interval '1 month')::text", [[v] for v in AWARE]),
    ("SELECT $1::timestamptz::timestamp::text, $1::timestamptz::date::text",
     [[v] for v in AWARE]),
    ("SELECT $1::timestamp::text, ($1::timestamp + interval '1 hour')::text",
     [[v] for v in NAIVE]),
    ("SELECT CAST($1 AS TIMESTAMPTZ) = $2::timestamp",
     [[a, n] for a in AWARE[:2] for n in NAIVE[:2]]),
]
# untyped text: psycopg sends a str with no type, PostgreSQL reads it in the cast's type
TEXT_SELECTS = [
    ("SELECT CAST($1 AS TIMESTAMPTZ)::text", [[t] for t in TEXTS]),
    ("SELECT CAST($1 AS TIMESTAMP)::text", [[t] for t in TEXTS]),
    ("SELECT $1::timestamptz::text, ($1::timestamptz + interval '1 hour')::text",
     [[t] for t in TEXTS]),
]

# psycopg types each parameter by its Python value: one statement text gets timestamp and
# timestamptz parameters in turn (a plan cached for one must not answer the other)
_MIX = [[NAIVE[0]], [AWARE[3]], [NAIVE[1]], [AWARE[1]], [AWARE[0]], [NAIVE[0]]]
MIXED = [
    ("SELECT $1::text, extract(hour FROM $1)", _MIX),
    ("SELECT ($1 + interval '1 hour')::text", _MIX),
]


def _norm(row) -> list[str]:
    out = []
    for v in row:
        if isinstance(v, dt.datetime) and v.tzinfo is not None:
            v = v.astimezone(UTC)           # an instant: the client's zone is its own
        out.append(None if v is None else str(v))
    return out


class _Psycopg:
    def __init__(self, dsn: str, binary: bool):
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.binary = binary

    async def run(self, sql: str, params=None):
        with self.conn.cursor(binary=self.binary) as cur:
            cur.execute(sql.replace("$1", "%(a)s").replace("$2", "%(b)s").replace(
                "$3", "%(c)s"), None if params is None else dict(zip("abc", params)),
                prepare=True)
            return [_norm(r) for r in cur.fetchall()] if cur.description else None

    async def many(self, sql: str, rows):
        with self.conn.cursor(binary=self.binary) as cur:
            cur.executemany(sql.replace("$1", "%s").replace("$2", "%s").replace("$3", "%s"),
                            rows)

    async def close(self):
        self.conn.close()


class _Asyncpg:
    def __init__(self, conn):
        self.conn = conn

    async def run(self, sql: str, params=None):
        rows = await self.conn.fetch(sql, *(params or ()))
        return [_norm(r) for r in rows]

    async def many(self, sql: str, rows):
        await self.conn.executemany(sql, rows)

    async def close(self):
        await self.conn.close()


async def _connect(client: str, dsn: str):
    if client == "asyncpg":
        kw = dict(p.split("=", 1) for p in dsn.split())
        kw["database"] = kw.pop("dbname")
        return _Asyncpg(await asyncpg.connect(**kw))
    return _Psycopg(dsn, client == "psycopg-binary")


async def _answer(c, sql, params):
    try:
        return await c.run(sql, params)
    except (psycopg.Error, asyncpg.PostgresError) as e:
        state = getattr(e, "sqlstate", None)
        return ["error", state]


async def scenario(client: str, dsn: str, zone: str) -> dict:
    """Every answer of one client in one zone, by step name."""
    c = await _connect(client, dsn)
    out: dict = {}
    try:
        for s in DDL:
            await c.run(s)
        await c.run(f"SET TIME ZONE '{zone}'")
        cases = SELECTS + (TEXT_SELECTS + MIXED if client != "asyncpg" else [])
        for sql, param_sets in cases:
            for i, params in enumerate(param_sets):
                out[f"{sql} #{i}"] = await _answer(c, sql, params)
        # writes: a timestamptz parameter into TIMESTAMP columns is the session's local
        # time; a timestamp parameter is kept as it is
        ins = "INSERT INTO tzp (k, v, n) VALUES ($1::timestamptz, $2::timestamptz, $3)"
        for i, a in enumerate(AWARE[:3]):
            out[f"insert tz #{i}"] = await _answer(c, ins, [a, AWARE[-1 - i], i])
        ins_plain = "INSERT INTO tzp (k, v, n) VALUES ($1, $2, $3)"
        for i, n in enumerate(NAIVE):
            out[f"insert naive #{i}"] = await _answer(c, ins_plain, [n, n, 10 + i])
        if client != "asyncpg":       # psycopg: aware values are typed timestamptz
            for i, a in enumerate(AWARE[3:]):
                out[f"insert aware untyped #{i}"] = await _answer(c, ins_plain,
                                                                  [a, a, 20 + i])
        # executemany: the pipelined batch
        many_tz = [[a + dt.timedelta(days=400 + d), a, 100 + d]
                   for d in range(3) for a in AWARE]
        many_naive = [[n + dt.timedelta(days=800 + d), n, 200 + d]
                      for d in range(3) for n in NAIVE]
        try:
            await c.many(ins, many_tz)
            await c.many("INSERT INTO tzp (k, v, n) VALUES ($1::timestamp, $2, $3)",
                         many_naive)
            if client != "asyncpg":   # typed timestamptz by psycopg, plain $n: batched
                await c.many(ins_plain, [[a + dt.timedelta(days=1200 + d), a, 300 + d]
                                         for d in range(3) for a in AWARE])
            out["executemany"] = "ok"
        except (psycopg.Error, asyncpg.PostgresError) as e:
            out["executemany"] = ["error", getattr(e, "sqlstate", None)]
        # WHERE on the key: a timestamptz parameter compares in the session's zone; run
        # each twice so that the second run is the cached point read
        for sql in ("SELECT n, k::text FROM tzp WHERE k = $1::timestamptz",
                    "SELECT n, v::text FROM tzp WHERE k = $1::timestamp"):
            for rnd in range(2):
                for i, a in enumerate(AWARE + NAIVE):
                    p = a if ("timestamptz" in sql) == (a.tzinfo is not None) else \
                        (a.replace(tzinfo=UTC) if a.tzinfo is None else a.replace(tzinfo=None))
                    out[f"{sql} #{rnd}.{i}"] = await _answer(c, sql, [p])
        # plain columns by the key: the point-read fast path (wire/fastpath.py) from the
        # second run; psycopg sends the key as timestamp or timestamptz, same text
        keys = _MIX if client != "asyncpg" else [[n] for n in NAIVE]
        for sql in ("SELECT n, k FROM tzp WHERE k = $1", "SELECT n, v, k FROM tzp WHERE k = $1"):
            for rnd in range(3):
                for i, (p,) in enumerate(keys):
                    out[f"{sql} #{rnd}.{i}"] = await _answer(c, sql, [p])
        # UPDATE by key (the key-write fast path from its second run)
        upd = "UPDATE tzp SET v = $2::timestamptz, n = n + 1000 WHERE k = $1::timestamptz"
        for rnd in range(2):
            for i, a in enumerate(AWARE):
                out[f"update tz #{rnd}.{i}"] = await _answer(
                    c, upd, [a, a + dt.timedelta(minutes=7 * i + rnd)])
        upd1 = "UPDATE tzp SET v = $2::timestamptz, n = n + 3000 WHERE k = $1"
        for rnd in range(2):
            for i, n in enumerate(NAIVE):
                out[f"update tz set #{rnd}.{i}"] = await _answer(
                    c, upd1, [n, AWARE[i + rnd]])
        upd1 = "UPDATE tzp SET v = $2::timestamptz + interval '1 minute' WHERE k = $1"
        for rnd in range(3):
            for i, n in enumerate(NAIVE):
                out[f"update tz set only #{rnd}.{i}"] = await _answer(
                    c, upd1, [n, AWARE[i + rnd]])
        upd2 = "UPDATE tzp SET v = $2, n = n + 5000 WHERE k = $1"
        for rnd in range(2):
            for i, n in enumerate(NAIVE):
                out[f"update naive #{rnd}.{i}"] = await _answer(
                    c, upd2, [n, n + dt.timedelta(hours=i + rnd)])
        if client != "asyncpg":       # the key-write fast path, either kind of key
            for rnd in range(3):
                for i, (p,) in enumerate(_MIX):
                    out[f"update mixed key #{rnd}.{i}"] = await _answer(
                        c, "UPDATE tzp SET n = n + 7 WHERE k = $1", [p])
        out["table"] = await c.run("SELECT k::text, v::text, n FROM tzp ORDER BY k")
        out["count"] = await c.run("SELECT count(*) FROM tzp")
    finally:
        await c.close()
    return out


async def run_all(dsn: str) -> dict:
    return {f"{client} {zone}": await scenario(client, dsn, zone)
            for zone in ZONES for client in CLIENTS}


if __name__ == "__main__":
    got = asyncio.run(run_all(sys.argv[1]))
    with open(EXPECTED, "w") as f:
        json.dump(got, f, indent=0, sort_keys=True)
        f.write("\n")
    print(f"recorded {sum(len(v) for v in got.values())} answers in {EXPECTED}")
