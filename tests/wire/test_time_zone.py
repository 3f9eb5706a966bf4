"""The session's TimeZone over the wire (issue 27): SET TIME ZONE, a TimeZone startup
parameter and RESET reach the statements (wire/backend.py hands the setting to
Session.set_time_zone), text results and COPY TO print timestamptz in that zone,
ParameterStatus and SHOW report it, binary results stay UTC instants. The values as
PostgreSQL 15 prints them are checked character by character by the text oracle
(tests/sql/pgoracle/corpus_text.py); these are the protocol's side of it."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from psycopg.types.string import TextLoader

NY = "America/New_York"
INSTANT = dt.datetime(2026, 3, 8, 16, 0, tzinfo=dt.timezone.utc)


def _text(conn) -> None:
    for name in ("timestamptz", "interval"):
        conn.adapters.register_loader(name, TextLoader)


@pytest.fixture()
def conn(server):
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        _text(c)
        yield c


def one(conn, sql, params=None):
    return conn.execute(sql, params).fetchone()


def test_set_time_zone_reaches_statements_and_text_results(conn):
    sql = "SELECT timestamptz '2026-03-08 16:00+00', (timestamptz '2026-03-08 16:00+00')::text"
    assert one(conn, sql) == ("2026-03-08 16:00:00+00", "2026-03-08 16:00:00+00")
    conn.execute("SET TIME ZONE 'America/New_York'")
    assert conn.info.parameter_status("TimeZone") == NY
    assert one(conn, "SHOW TimeZone") == (NY,)
    assert one(conn, sql) == ("2026-03-08 12:00:00-04", "2026-03-08 12:00:00-04")
    # read in the zone: a literal without an offset is New York's local time
    assert one(conn, "SELECT timestamptz '2026-01-01 00:00'") == ("2026-01-01 00:00:00-05",)
    conn.execute("SET TIME ZONE 'Asia/Kolkata'")
    assert one(conn, "SELECT timestamptz '2026-03-08 16:00:00.5+00'") == (
        "2026-03-08 21:30:00.5+05:30",)
    conn.execute("RESET TIME ZONE")
    assert conn.info.parameter_status("TimeZone") == "UTC"
    assert one(conn, sql)[0] == "2026-03-08 16:00:00+00"


def test_a_big_result_is_encoded_in_the_zone_too(conn):
    # past the small-batch path (wire/datarows.py SMALL_BATCH_ROWS) and in several batches
    conn.execute("SET TIME ZONE 'America/New_York'")
    got = conn.execute("SELECT timestamptz '2026-03-08 00:00+00' + g * interval '1 hour' "
                       "FROM generate_series(0, 9999) g ORDER BY 1").fetchall()
    assert len(got) == 10000
    assert got[0] == ("2026-03-07 19:00:00-05",) and got[7] == ("2026-03-08 03:00:00-04",)
    assert got[-1] == ("2027-04-28 11:00:00-04",)


def test_binary_results_stay_utc_instants(server):
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.execute("SET TIME ZONE 'America/New_York'")
        cur = c.cursor(binary=True)
        got = cur.execute("SELECT timestamptz '2026-03-08 16:00+00'").fetchone()[0]
        assert got == INSTANT
        # and the text path parses to the same instant
        assert c.execute("SELECT timestamptz '2026-03-08 16:00+00'").fetchone()[0] == INSTANT


def test_a_startup_time_zone_applies_from_the_first_statement(server):
    with psycopg.connect(server.dsn(), autocommit=True,
                         options="-c TimeZone=Europe/Berlin") as c:
        _text(c)
        assert c.info.parameter_status("TimeZone") == "Europe/Berlin"
        assert one(c, "SELECT timestamptz '2026-07-01 00:00+00'") == (
            "2026-07-01 02:00:00+02",)
    with pytest.raises(psycopg.OperationalError, match="TimeZone"):
        psycopg.connect(server.dsn(), options="-c TimeZone=Nowhere/Zone")


def test_a_bad_zone_is_22023_and_changes_nothing(conn):
    conn.execute("SET TIME ZONE 'Europe/Berlin'")
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match='invalid value for parameter "TimeZone": "Mars/Base"'):
        conn.execute("SET TIME ZONE 'Mars/Base'")
    assert conn.info.parameter_status("TimeZone") == "Europe/Berlin"
    assert one(conn, "SELECT timestamptz '2026-07-01 00:00+00'") == ("2026-07-01 02:00:00+02",)


def test_a_prepared_plan_follows_the_zone(conn):
    # extended protocol with a parameter: the plan cache's path (Session.set_time_zone
    # drops the plans that folded the zone)
    sql = "SELECT (timestamptz '2026-01-01 00:00' + %s * interval '1 hour')"
    assert one(conn, sql, (1,)) == ("2026-01-01 01:00:00+00",)
    conn.execute("SET TIME ZONE 'Europe/Berlin'")
    assert one(conn, sql, (1,)) == ("2026-01-01 01:00:00+01",)
    assert one(conn, sql, (2,)) == ("2026-01-01 02:00:00+01",)


def test_set_in_the_same_query_string_applies_to_what_follows(server):
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.adapters.register_loader("timestamptz", TextLoader)
        cur = c.cursor()
        cur.execute("SET TIME ZONE 'Asia/Tokyo'; SELECT timestamptz '2026-01-01 00:00+00'",
                    prepare=False)
        assert cur.nextset()
        assert cur.fetchone() == ("2026-01-01 09:00:00+09",)


def test_copy_to_prints_the_zone(conn):
    conn.execute("SET TIME ZONE 'America/Los_Angeles'")
    with conn.cursor().copy("COPY (SELECT timestamptz '2026-06-01 00:00+00' AS t, "
                            "interval '-1 day 2 hours' AS i) TO STDOUT WITH (FORMAT csv)"
                            ) as copy:
        data = b"".join(bytes(b) for b in copy)
    assert data == b"2026-05-31 17:00:00-07,-1 days +02:00:00\n"


def test_now_is_an_instant_and_local_time_is_the_zones(conn):
    conn.execute("SET TIME ZONE 'Pacific/Kiritimati'")        # UTC+14
    now, local, today = one(conn, "SELECT now()::text, localtimestamp::text, "
                                  "current_date::text")
    assert now.endswith("+14")
    assert local[:19] == now[:19] and today == now[:10]
    assert one(conn, "SELECT pg_typeof(now()), pg_typeof(localtimestamp)") == (
        "timestamp with time zone", "timestamp without time zone")


def test_cached_point_reads_and_key_writes_run_in_the_zone(conn):
    """A point read by primary key or an UPDATE by key, run again from the plan cache
    (Session.execute_point, key_write_rows: on the event loop, outside Session.execute)
    evaluates its select list / SET values in the session's zone, as the first run did."""
    conn.execute("DROP TABLE IF EXISTS tzp")
    conn.execute("CREATE TABLE tzp (k INT PRIMARY KEY, ts TIMESTAMP, s TEXT)")
    conn.execute("INSERT INTO tzp VALUES (1, '2026-01-01 02:00:00', NULL)")
    conn.execute("SET TIME ZONE 'Asia/Tokyo'")
    read = "SELECT ts::timestamptz::text, ts::timestamptz FROM tzp WHERE k = %s"
    write = "UPDATE tzp SET s = ts::timestamptz::text WHERE k = %s"
    for prepare in (False, True):
        for _ in range(3):          # planned, then from the plan cache
            assert conn.execute(read, (1,), prepare=prepare).fetchone() == (
                "2026-01-01 02:00:00+09", "2026-01-01 02:00:00+09")
            conn.execute("UPDATE tzp SET s = NULL WHERE k = 1")
            conn.execute(write, (1,), prepare=prepare)
            assert one(conn, "SELECT s FROM tzp WHERE k = 1") == ("2026-01-01 02:00:00+09",)
