"""Views over the wire: psql's \\dv, \\d view and \\d+ view (libpq 15, the catalog queries
psql sends), pg_views, information_schema.views / .tables / .columns, pg_class relkind 'v',
and PostgreSQL's errors through psycopg."""

from __future__ import annotations

import os
import shutil
import subprocess

import psycopg
import pytest

PSQL = shutil.which("psql")


def psql(server, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PGCONNECT_TIMEOUT="10", PSQLRC="/dev/null")
    return subprocess.run([PSQL, "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U",
                           "kudusql", *args], capture_output=True, text=True, env=env,
                          timeout=30, check=False)


@pytest.fixture(scope="module")
def conn(server):
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.execute("CREATE TABLE readings (host STRING, ts TIMESTAMP, v DOUBLE, "
                  "PRIMARY KEY (host, ts))")
        c.execute("INSERT INTO readings VALUES ('a', '2026-01-01 00:10', 1), "
                  "('a', '2026-01-01 00:50', 3), ('b', '2026-01-01 01:05', 7)")
        c.execute("CREATE VIEW hourly AS SELECT host, date_trunc('hour', ts) AS hour, "
                  "avg(v) AS avg_v, count(*) AS n FROM readings GROUP BY 1, 2")
        yield c


def test_view_reads_through_the_wire(conn):
    rows = conn.execute("SELECT host, hour, avg_v, n FROM hourly ORDER BY host").fetchall()
    assert [(r[0], r[2], r[3]) for r in rows] == [("a", 2.0, 2), ("b", 7.0, 1)]


def test_catalogs_show_the_view(conn):
    assert conn.execute("SELECT relkind, relnatts FROM pg_class WHERE relname = 'hourly'"
                        ).fetchall() == [("v", 4)]
    (viewname, definition), = conn.execute(
        "SELECT viewname, definition FROM pg_views WHERE schemaname = 'public'").fetchall()
    assert viewname == "hourly" and "date_trunc('hour', ts)" in definition
    assert conn.execute("SELECT table_name, is_updatable FROM information_schema.views"
                        ).fetchall() == [("hourly", "NO")]
    assert conn.execute("SELECT table_type FROM information_schema.tables "
                        "WHERE table_name = 'hourly'").fetchall() == [("VIEW",)]
    assert conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                        "WHERE table_name = 'hourly' ORDER BY ordinal_position").fetchall() \
        == [("host", "text"), ("hour", "timestamp without time zone"),
            ("avg_v", "double precision"), ("n", "bigint")]
    assert conn.execute("SELECT pg_get_viewdef('hourly'::regclass)").fetchone()[0] \
        .strip().startswith("SELECT host")


def test_errors_in_postgresqls_words(conn):
    with pytest.raises(psycopg.errors.DependentObjectsStillExist) as e:
        conn.execute("DROP TABLE readings")
    assert str(e.value).startswith("cannot drop table readings because other objects "
                                   "depend on it")
    assert e.value.diag.message_detail == "view hourly depends on table readings"
    assert e.value.diag.message_hint == \
        "Use DROP ... CASCADE to drop the dependent objects too."
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="cannot insert "
                       'into view "hourly"'):
        conn.execute("INSERT INTO hourly VALUES ('x', now(), 1, 1)")
    with pytest.raises(psycopg.errors.DuplicateTable):
        conn.execute("CREATE VIEW readings AS SELECT 1")
    with pytest.raises(psycopg.errors.WrongObjectType, match='"hourly" is not a table'):
        conn.execute("DROP TABLE hourly")


@pytest.mark.skipif(PSQL is None, reason="psql is not installed")
def test_psql_dv_and_d_view(server, conn):
    r = psql(server, "-c", "\\dv")
    assert r.returncode == 0, r.stderr
    assert " public | hourly | view | kudusql" in r.stdout
    r = psql(server, "-c", "\\d")
    assert " public | hourly   | view  | kudusql" in r.stdout
    assert " public | readings | table | kudusql" in r.stdout
    r = psql(server, "-c", "\\d hourly")
    assert r.returncode == 0, r.stderr
    assert 'View "public.hourly"' in r.stdout
    assert " avg_v  | double precision            |           |          | " in r.stdout
    r = psql(server, "-c", "\\d+ hourly")
    assert r.returncode == 0, r.stderr
    assert "View definition:" in r.stdout and "GROUP BY 1, 2;" in r.stdout


def test_parameters_against_view_columns_are_typed(server, conn):
    """A $n compared with a view's column takes the column's type (asyncpg sends an int)."""
    import asyncio

    import asyncpg

    async def go():
        c = await asyncpg.connect(**server.asyncpg_kw())
        try:
            return await c.fetch("SELECT host FROM hourly WHERE n = $1 ORDER BY host", 2)
        finally:
            await c.close()
    assert [r["host"] for r in asyncio.run(go())] == ["a"]
