"""extra_float_digits as PostgreSQL 15 applies it to float text output: >= 1 the shortest
exact form; <= 0 C's %.*g with 15 + extra_float_digits significant digits (float4: 6 +),
at least one. The expected texts were recorded from PostgreSQL 15.18 (initdb'ed in a temp
dir, psycopg reading the raw text values of the same SELECT; bench/wire_bench.py's way of
starting it): DataRows (simple and extended query, the point-read fast path's statement)
and COPY TO.
"""

from __future__ import annotations

import struct

import psycopg
import pytest

import wire.fastpath as fastpath
from tests.wire.conftest import record_answers
from tests.wire.raw_client import INT8, SYNC, Raw, bind, describe_statement, execute, parse

VALUES = ("0.1::float8, (1/3::float8), 1e100::float8, 123456789.123::float8, "
          "1.5e-7::float8, (2/3::float8)*1e15, 0.1::float4, (1/3::float4), "
          "123456.7::float4, 1234567.8::float4, 'NaN'::float8, '-0'::float8, 100::float8, "
          "1e15::float8, 1e14::float8")

SHORTEST = ["0.1", "0.3333333333333333", "1e+100", "123456789.123", "1.5e-07",
            "666666666666666.6", "0.1", "0.3333333333333333", "123456.7", "1.2345678e+06",
            "NaN", "-0", "100", "1e+15", "100000000000000"]
PG15 = {
    3: SHORTEST, 1: SHORTEST,
    0: ["0.1", "0.333333333333333", "1e+100", "123456789.123", "1.5e-07", "666666666666667",
        "0.1", "0.333333333333333", "123457", "1.23457e+06", "NaN", "-0", "100", "1e+15",
        "100000000000000"],
    -1: ["0.1", "0.33333333333333", "1e+100", "123456789.123", "1.5e-07",
         "6.6666666666667e+14", "0.1", "0.33333333333333", "1.2346e+05", "1.2346e+06",
         "NaN", "-0", "100", "1e+15", "1e+14"],
    -5: ["0.1", "0.3333333333", "1e+100", "123456789.1", "1.5e-07", "6.666666667e+14",
         "0.1", "0.3333333333", "1e+05", "1e+06", "NaN", "-0", "100", "1e+15", "1e+14"],
    -15: ["0.1", "0.3", "1e+100", "1e+08", "1e-07", "7e+14", "0.1", "0.3", "1e+05",
          "1e+06", "NaN", "-0", "1e+02", "1e+15", "1e+14"],
}


def _connect(server):
    return psycopg.connect(host="127.0.0.1", port=server.thread.port, user="kudusql",
                           dbname="kudusql", autocommit=True)


def _texts(cur) -> list[str]:
    r = cur.pgresult
    return [r.get_value(0, i).decode() for i in range(r.nfields)]


@pytest.mark.parametrize("efd", sorted(PG15))
def test_float_text_follows_extra_float_digits(server, efd):
    with _connect(server) as c:
        c.execute(f"SET extra_float_digits = {efd}")
        assert _texts(c.execute(f"SELECT {VALUES}")) == PG15[efd]           # extended
        cur = c.cursor()
        cur.execute(f"SELECT {VALUES}", prepare=False)
        raw = c.pgconn.exec_(f"SELECT {VALUES}".encode())                   # simple query
        assert [raw.get_value(0, i).decode() for i in range(raw.nfields)] == PG15[efd]
        copied = []
        with c.cursor().copy(f"COPY (SELECT {VALUES}) TO STDOUT") as cp:
            for row in cp:
                copied.append(bytes(row).decode())
        assert copied == ["\t".join(PG15[efd]) + "\n"]


def _row_texts(replies) -> list[str]:
    """The text values of the one DataRow among raw-client replies."""
    body = next(b for kind, b, *_ in replies if kind == "D")
    n, p, out = struct.unpack_from("!h", body)[0], 2, []
    for _ in range(n):
        ln = struct.unpack_from("!i", body, p)[0]
        out.append(body[p + 4:p + 4 + ln].decode())
        p += 4 + ln
    return out


def test_a_table_scan_and_a_prepared_point_read(server, monkeypatch):
    """Floats read from a table, through the ordinary path and a warm prepared point read
    (the wire's fast path, which prints the default's form only and so declines when the
    setting is lower): both follow the setting."""
    answered = record_answers(monkeypatch, fastpath, "point_read")
    c = Raw(server.thread.port)
    try:
        c.query("DROP TABLE IF EXISTS fd")
        c.query("CREATE TABLE fd (k INT8 PRIMARY KEY, d DOUBLE PRECISION, r REAL)")
        c.query("INSERT INTO fd VALUES (1, 1/3::float8, 123456.7)")
        c.run(parse("sel", "SELECT d, r FROM fd WHERE k = $1", (INT8,)) +
              describe_statement("sel") + SYNC)
        read = bind("sel", ["1"]) + execute() + SYNC
        for _ in range(3):          # warm: the later runs are the fast path's
            assert _row_texts(c.run(read)) == ["0.3333333333333333", "123456.7"]
        assert any(answered), "the warm point read never took the fast path"
        c.query("SET extra_float_digits = 0")
        assert _row_texts(c.run(read)) == ["0.333333333333333", "123457"]
        assert _row_texts(c.query("SELECT d, r FROM fd")) == ["0.333333333333333", "123457"]
        c.query("RESET extra_float_digits")
        assert _row_texts(c.run(read)) == ["0.3333333333333333", "123456.7"]
    finally:
        c.close()


def test_out_of_range_is_refused(server):
    with _connect(server) as c:
        with pytest.raises(psycopg.errors.InvalidParameterValue,
                           match=r"-16 is outside the valid range for parameter "
                                 r'"extra_float_digits" \(-15 \.\. 3\)'):
            c.execute("SET extra_float_digits = -16")
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            c.execute("SET extra_float_digits = 'x'")


@pytest.mark.parametrize("efd", sorted(PG15))
def test_a_text_cast_follows_extra_float_digits(server, efd):
    """`::text` of a float is float8out / float4out in PostgreSQL, so it follows the setting as
    the results do (the same recorded texts), in a select list and over a table's column."""
    texts = ", ".join(f"({v})::text" for v in VALUES.split(", "))
    with _connect(server) as c:
        c.execute(f"SET extra_float_digits = {efd}")
        assert list(c.execute(f"SELECT {texts}").fetchone()) == PG15[efd]
        c.execute("DROP TABLE IF EXISTS fdt")
        c.execute("CREATE TABLE fdt (k INT8 PRIMARY KEY, d DOUBLE PRECISION, r REAL)")
        c.execute("INSERT INTO fdt VALUES (1, 1/3::float8, 123456.7), (2, NULL, NULL)")
        got = c.execute("SELECT d::text, r::text, concat('x', d) FROM fdt ORDER BY k").fetchall()
        want = {e: (PG15[e][1], PG15[e][8]) for e in PG15}[efd]
        assert got == [(want[0], want[1], "x" + want[0]), (None, None, "x")]


def test_a_cached_plan_does_not_keep_the_old_setting(server):
    """The same statement after a SET, as a repeated simple query and as a prepared statement,
    shows the new setting: nothing cached (plans, psycopg's prepared statements) keeps the
    old text of a constant float."""
    sql = "SELECT (1/3::float8)::text, (123456.7::float4)::text"
    with _connect(server) as c:
        cur = c.cursor()
        for _ in range(3):          # warm both the plan cache and psycopg's prepared one
            assert cur.execute(sql, prepare=True).fetchone() == ("0.3333333333333333",
                                                                 "123456.7")
            assert cur.execute(sql, prepare=False).fetchone() == ("0.3333333333333333",
                                                                  "123456.7")
        c.execute("SET extra_float_digits = 0")
        assert cur.execute(sql, prepare=True).fetchone() == ("0.333333333333333", "123457")
        assert cur.execute(sql, prepare=False).fetchone() == ("0.333333333333333", "123457")
        c.execute("RESET extra_float_digits")
        assert cur.execute(sql, prepare=True).fetchone() == ("0.3333333333333333", "123456.7")
