"""Protocol and SQL fuzzing at scale against a real `kudusql serve` process.

    python -m tests.wire.fuzz_scale --messages 1000000 --statements 100000 --workers 4

What runs (all against one server process on 127.0.0.1, started and stopped here):

- **Frontend messages.** Real client traffic (the decoded psql / psycopg / asyncpg / JDBC /
  pgcli / SQLAlchemy traces under /work/shared/reference/pg-clients/traces, turned back into
  bytes by `trace_units`) plus test_fuzz.CORPUS, cut into units that end at a Sync or a
  Query, strung together and damaged with test_fuzz's `mutate` (framing: bytes, lengths,
  truncation) and `mutate_bodies` (well-framed, damaged meaning), or replaced by random
  messages. Each connection sends a startup packet and ~50 messages, then a Sync and
  `SELECT 'alive'`; it must get that answer or be closed by the server within
  `--bound` seconds - after the bound the client half-closes its side (the server may be
  waiting, rightly, for the rest of a message whose length was damaged), and then the
  server must close within another bound. Neither = a hung connection.
- **SQL statements.** `SqlGen` writes statements from the dialect's statement kinds
  (SELECT with joins / GROUP BY / windows / set operations / subqueries, INSERT, UPSERT,
  UPDATE, DELETE, EXPLAIN, SHOW, SET, PREPARE / EXECUTE / DEALLOCATE, CREATE / ALTER /
  DROP TABLE, COPY ... TO STDOUT, cursors, transactions) and expression forms (literals of
  every type, operators, casts, CASE, IN, BETWEEN, LIKE, functions, aggregates), and
  near-valid ones (a valid statement with a token dropped, doubled, swapped, replaced or cut
  off). Each is sent as a simple Query on long-lived connections and must be answered with
  ReadyForQuery within the bound. Every ErrorResponse's message, detail and hint is scanned
  for Python leaks (`LEAKS`), and XX000 (internal) errors are counted.
- **Watchers.** A canary connection runs `SELECT count(*), sum(v) FROM canary` every 0.5 s
  and must get (100, 4950) every time within the bound; the server's RSS is sampled from
  /proc every 0.25 s; the process must be alive at the end and its log free of tracebacks.

The report (printed as JSON, returned by `run`) gives counts, rates, wall time, RSS max,
canary latency and every finding. tests/wire/test_fuzz.py runs a small slice in the default
suite and a larger one under KUDUSQL_LONG=1.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import multiprocessing as mp
import os
import random
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from tests.wire.test_fuzz import CORPUS, msg, mutate, mutate_bodies, split, startup

TRACES = "/work/shared/reference/pg-clients/traces"

# Python leaking into user-facing text (message, detail, hint)
LEAKS = ("<class", "datetime.", "Decimal(", "np.", "numpy", "pyarrow", "Traceback",
         "object at 0x", "sqlglot", "'this' missing", "Error(", "Exception", "NoneType",
         "self.", ".py\"", "exp.", "builtins.", "KeyError", "IndexError", "TypeError",
         "ValueError", "AttributeError", "AssertionError", "array(")

SETUP_SQL = [
    "CREATE TABLE canary (k INT PRIMARY KEY, v BIGINT) PARTITION BY HASH (k) PARTITIONS 2",
    "INSERT INTO canary SELECT g, g FROM generate_series(0, 99) AS t(g)",
    "CREATE TABLE fz (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) PARTITIONS 2",
    "INSERT INTO fz VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    "CREATE TABLE fa (k INT PRIMARY KEY, v STRING, n BIGINT, d DOUBLE, m DECIMAL(10,2), "
    "dt DATE, ts TIMESTAMP, b BOOLEAN, bin BINARY) PARTITION BY HASH (k) PARTITIONS 3",
    "INSERT INTO fa SELECT g, 'v' || g, g * 7, g / 3.0, g * 1.25, DATE '2026-01-01' + g, "
    "CAST(DATE '2026-01-01' + g AS TIMESTAMP), g % 2 = 0, NULL "
    "FROM generate_series(1, 60) AS t(g)",
    "CREATE TABLE fb (k INT, s STRING, x DOUBLE, PRIMARY KEY (k, s)) "
    "PARTITION BY HASH (k) PARTITIONS 2, RANGE (k) (PARTITION VALUES < 50, "
    "PARTITION 50 <= VALUES < 1000)",
    "INSERT INTO fb SELECT g % 97, 's' || (g % 5), g * 0.5 FROM generate_series(1, 80) AS t(g)",
    "CREATE TABLE books (id INT PRIMARY KEY, title STRING, author_id INT)",
    "CREATE TABLE authors (id INT PRIMARY KEY, name STRING)",
]


# -- the message corpus ----------------------------------------------------------------------

_LINE = re.compile(r"^\[(\d+)\] F> (\w+(?:/\w+)?)\s*(.*)$")


def _cstr(s: str) -> bytes:
    return s.encode() + b"\0"


def _encode(kind: str, rest: str) -> bytes | None:
    """One decoded trace line back to its frontend message bytes (None: not replayed)."""
    if kind == "Query":
        return msg(b"Q", _cstr(ast.literal_eval(rest)))
    if kind == "Parse":
        m = re.match(r"name=('(?:[^'\\]|\\.)*') paramtypes=(\[[^\]]*\]) query=(.*)$", rest)
        if not m:
            return None
        name, types, query = (ast.literal_eval(g) for g in m.groups())
        return msg(b"P", _cstr(name) + _cstr(query) + struct.pack("!h", len(types))
                   + b"".join(struct.pack("!i", t) for t in types))
    if kind == "Bind":
        m = re.match(r"portal=('(?:[^'\\]|\\.)*') stmt=('(?:[^'\\]|\\.)*') paramfmts=(\[[^\]]*\])"
                     r" params=(\[.*\]) resultfmts=(\[[^\]]*\])$", rest)
        if not m:
            return None
        portal, stmt, fmts, params, rfmts = (ast.literal_eval(g) for g in m.groups())
        body = _cstr(portal) + _cstr(stmt) + struct.pack("!h", len(fmts)) + \
            b"".join(struct.pack("!h", f) for f in fmts) + struct.pack("!h", len(params))
        for p in params:
            body += struct.pack("!i", -1) if p is None else struct.pack("!i", len(p)) + p
        body += struct.pack("!h", len(rfmts)) + b"".join(struct.pack("!h", f) for f in rfmts)
        return msg(b"B", body)
    if kind in ("Describe", "Close"):
        m = re.match(r"([SP]) (.*)$", rest)
        if not m:
            return None
        return msg(b"D" if kind == "Describe" else b"C",
                   m.group(1).encode() + _cstr(ast.literal_eval(m.group(2))))
    if kind == "Execute":
        m = re.match(r"portal=('(?:[^'\\]|\\.)*') maxrows=(-?\d+)", rest)
        if not m:
            return None
        return msg(b"E", _cstr(ast.literal_eval(m.group(1))) + struct.pack("!i", int(m.group(2))))
    if kind == "Sync":
        return msg(b"S")
    if kind == "Flush":
        return msg(b"H")
    if kind == "CopyData":
        m = re.match(r"\d+B (.*)$", rest)
        return msg(b"d", ast.literal_eval(m.group(1))) if m else None
    if kind == "CopyDone":
        return msg(b"c")
    if kind == "CopyFail":
        return msg(b"f", _cstr(ast.literal_eval(rest)) if rest else b"\0")
    return None  # startup, SSL, passwords, cancel, terminate: the fuzzer does its own


def trace_units(path: str = TRACES) -> list[bytes]:
    """The real client traffic in the traces as units: message runs ending at a Sync or a
    Query (what a client sends before it waits for an answer)."""
    units: list[bytes] = []
    for f in sorted(glob.glob(os.path.join(path, "*.log"))):
        cur: dict[str, bytes] = {}
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = _LINE.match(line.rstrip("\n"))
                if not m:
                    continue
                conn, kind, rest = m.groups()
                try:
                    b = _encode(kind, rest)
                except (ValueError, SyntaxError):
                    b = None
                if b is None:
                    continue
                cur[conn] = cur.get(conn, b"") + b
                if kind in ("Sync", "Query"):
                    units.append(cur.pop(conn))
        units.extend(v for v in cur.values() if v)
    return units


def _random_message(rng: random.Random) -> bytes:
    kind = rng.choice(b"QPBDESHCdcfFXp" + bytes([rng.randrange(256)]))
    return msg(bytes([kind]), rng.randbytes(rng.choice([0, 1, 2, 5, 9, 17, 64])))


# every fuzz connection asks for a statement timeout, as a careful client would: damaged
# catalog queries can turn joins into cross joins that would otherwise run for hours
_STARTUP = startup(extra=b"options\0-c statement_timeout=5s\0")


def build_payload(rng: random.Random, units: list[bytes], target: int,
                  sql_damage: bool = True) -> tuple[bytes, int]:
    """(bytes, messages) for one connection: ~`target` messages of real traffic, then
    damaged: 60% well-framed with 1-3 damaged meanings (`mutate_bodies`), 8% framing
    damage (`mutate`), 2% a damaged startup packet, 1% of the units a random message."""
    body, n = b"", 0
    while n < target:
        part = _random_message(rng) if rng.random() < 0.01 else rng.choice(units)
        n += len(split(part))
        body += part
    r = rng.random()
    if r < 0.02:
        return mutate(rng, _STARTUP + body), n + 1
    if r < 0.10:
        return _STARTUP + mutate(rng, body), n + 1
    if r < 0.70:
        return _STARTUP + mutate_bodies(rng, body, sql=sql_damage), n + 1
    return _STARTUP + body, n + 1


# -- one connection --------------------------------------------------------------------------

def _exchange(port: int, payload: bytes, bound: float, marker: bytes = b"alive",
              answer_wait: float = 1.0) -> str:
    """Send `payload` + Sync + `SELECT 'alive'` while reading. 'answered' (the marker's row
    and ReadyForQuery came back), 'closed' (the server closed first), or, when no answer
    came within `answer_wait` seconds after the last byte was sent (the server may rightly
    be waiting for the rest of a message whose length was damaged), the client half-closes
    and the server must close within `bound`: 'closed_after_halfclose', else 'hung'. Reads
    and writes interleave so a large answer cannot deadlock against a large payload."""
    data = payload + msg(b"S") + msg(b"Q", b"SELECT '" + marker + b"'\0")
    s = socket.create_connection(("127.0.0.1", port), timeout=bound)
    s.setblocking(False)
    try:
        sent, tail, half_closed = 0, b"", False
        deadline = time.monotonic() + bound        # for sending everything
        while True:
            now = time.monotonic()
            if now > deadline:
                if half_closed:
                    return "hung"
                try:
                    s.shutdown(socket.SHUT_WR)
                except OSError:
                    return "closed"
                half_closed, deadline = True, now + bound
                sent = len(data)
            want_w = [s] if sent < len(data) else []
            r, w, _ = select.select([s], want_w, [], max(0.0, min(0.5, deadline - now)))
            if r:
                try:
                    chunk = s.recv(262144)
                except (ConnectionResetError, BrokenPipeError):
                    return "closed_after_halfclose" if half_closed else "closed"
                except BlockingIOError:
                    chunk = None
                if chunk == b"":
                    return "closed_after_halfclose" if half_closed else "closed"
                if chunk:
                    tail = (tail + chunk)[-4096:]
                    if marker in tail and b"Z\0\0\0\5" in tail[tail.rfind(marker):]:
                        return "answered"
            if w:
                try:
                    sent += s.send(data[sent:sent + 65536])
                except (BrokenPipeError, ConnectionResetError):
                    sent = len(data)   # the server closed: read what it said
                except BlockingIOError:
                    pass
                if sent >= len(data) and not half_closed:
                    deadline = time.monotonic() + answer_wait
    finally:
        s.close()


def _queries(payload: bytes) -> list[str]:
    """The SQL texts (Query and Parse) in a payload, for reporting a slow connection."""
    out = []
    for kind, body in split(payload[payload.find(b"\0\0", 8) + 2:] if payload[:1] == b"\0"
                            else payload):
        if len(out) >= 40:
            break
        if kind == b"Q":
            out.append(body[:300].decode("utf-8", "replace"))
        elif kind == b"P":
            out.append(body.split(b"\0")[1][:300].decode("utf-8", "replace")
                       if body.count(b"\0") > 1 else "")
    return out


def _message_worker(args) -> dict:
    port, seed, messages, bound, sql_damage, deadline = args
    slow = bound / 2
    rng = random.Random(seed)
    units = trace_units() + list(CORPUS)
    out = {"messages": 0, "connections": 0, "outcomes": {}, "hung_seeds": [], "slow": []}
    while out["messages"] < messages and time.monotonic() < deadline:
        payload, n = build_payload(rng, units, rng.randint(20, 80), sql_damage)
        t0 = time.monotonic()
        # On a loaded machine (the suite beside other work) an intact payload's answer can
        # take over a second; waiting longer there keeps 'answered' meaning what it does on a
        # quiet one (seen: load 20 on 2 cores, 12 of 75 connections answered within 1 s).
        wait = max(1.0, min(4.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
        try:
            how = _exchange(port, payload, bound, answer_wait=wait)
        except ConnectionRefusedError:          # the server is gone (see Watch): stop
            out["outcomes"]["refused"] = out["outcomes"].get("refused", 0) + 1
            break
        if time.monotonic() - t0 > slow and len(out["slow"]) < 10:
            out["slow"].append({"seconds": round(time.monotonic() - t0, 1), "outcome": how,
                                "queries": _queries(payload)})
        out["messages"] += n + 2
        out["connections"] += 1
        out["outcomes"][how] = out["outcomes"].get(how, 0) + 1
        out["max_connection_s"] = max(out.get("max_connection_s", 0.0), time.monotonic() - t0)
        if how == "hung" and len(out["hung_seeds"]) < 5:
            out["hung_seeds"].append({"payload": payload.hex(), "queries": _queries(payload)})
    return out


# -- SQL statements --------------------------------------------------------------------------

_COLS = {
    "fa": {"k": "int", "v": "text", "n": "int", "d": "float", "m": "dec", "dt": "date",
           "ts": "ts", "b": "bool", "bin": "bytes"},
    "fb": {"k": "int", "s": "text", "x": "float"},
    "fz": {"k": "int", "v": "text"},
}
_CAST_TYPES = ["INT", "BIGINT", "TEXT", "DOUBLE PRECISION", "DATE", "TIMESTAMP",
               "DECIMAL(10,2)", "BOOLEAN", "BYTEA", "SMALLINT", "REAL"]
_KEYWORDS = ["SELECT", "FROM", "WHERE", "GROUP", "BY", "ORDER", "LIMIT", "AND", "OR", "NOT",
             "NULL", "(", ")", ",", "*", "=", "::", "'", "CASE", "END", "JOIN", "ON", "AS",
             "UNION", "INSERT", "VALUES", "SET", "TABLE", "PARTITION", ";", "$1", "1e400",
             "''", "-", "||", "IN", "BETWEEN", "IS", "DISTINCT", "OVER", "INTERVAL"]


class SqlGen:
    """Random statements from the dialect's statement kinds and expression forms."""

    def __init__(self, rng: random.Random, worker: int):
        self.r = rng
        self.w = worker
        self.scratch = 0

    # literals of every type
    def literal(self, kind: str | None = None) -> str:
        r = self.r
        kind = kind or r.choice(["int", "text", "float", "dec", "date", "ts", "bool", "bytes",
                                 "null", "interval"])
        return {
            "int": lambda: str(r.choice([0, 1, -1, 7, 42, 2**31 - 1, -2**31, 2**63 - 1,
                                         r.randint(-1000, 1000)])),
            "text": lambda: "'" + r.choice(["", "a", "it''s", "v1", "s2", "ü", "%", "x" * 20,
                                            "2026-01-05", "1.5", "NaN", "\\x00"]) + "'",
            "float": lambda: r.choice(["1.5", "-0.25", "1e10", "3.0", "'NaN'::float8",
                                       "'Infinity'::double precision", "0.1"]),
            "dec": lambda: r.choice(["1.25", "99999999.99", "-3.50", "CAST(2.5 AS DECIMAL(10,2))",
                                     "0.001"]),
            "date": lambda: r.choice(["DATE '2026-01-05'", "DATE '1970-01-01'",
                                      "'2026-02-30'::date", "DATE '0001-01-01'"]),
            "ts": lambda: r.choice(["TIMESTAMP '2026-01-05 10:00:00'", "now()",
                                    "TIMESTAMP '2026-01-01 00:00:00.123456'", "current_timestamp",
                                    "'2026-13-01 00:00:00'::timestamp"]),
            "bool": lambda: r.choice(["TRUE", "FALSE", "'t'::boolean", "NULL::boolean"]),
            "bytes": lambda: r.choice(["'\\x00ff'::bytea", "'\\xzz'::bytea", "''::bytea"]),
            "null": lambda: "NULL",
            "interval": lambda: r.choice(["INTERVAL '1 day'", "INTERVAL '2 hours'",
                                          "INTERVAL 'bogus'"]),
        }[kind]()

    def column(self, table: str, kind: str | None = None) -> str:
        cols = [c for c, k in _COLS[table].items() if kind is None or k == kind]
        return f"{table}.{self.r.choice(cols)}" if cols else self.literal(kind)

    def expr(self, table: str, depth: int = 0, kind: str | None = None) -> str:
        r = self.r
        if depth >= 3 or r.random() < 0.3:
            return self.column(table, kind) if r.random() < 0.6 else self.literal(kind)
        e = lambda k=None: self.expr(table, depth + 1, k)  # noqa: E731
        form = r.randrange(16)
        if form == 0:
            return f"({e('int')} {r.choice(['+', '-', '*', '/', '%'])} {e('int')})"
        if form == 1:
            return f"({e()} {r.choice(['=', '<>', '<', '<=', '>', '>='])} {e()})"
        if form == 2:
            return f"({e('bool')} {r.choice(['AND', 'OR'])} {e('bool')})"
        if form == 3:
            return f"NOT {e('bool')}"
        if form == 4:
            return f"CAST({e()} AS {r.choice(_CAST_TYPES)})"
        if form == 5:
            return f"CASE WHEN {e('bool')} THEN {e(kind)} ELSE {e(kind)} END"
        if form == 6:
            return f"{e()} IN ({', '.join(e() for _ in range(r.randint(1, 3)))})"
        if form == 7:
            return f"{e()} BETWEEN {e()} AND {e()}"
        if form == 8:
            return f"{e()} IS {r.choice(['', 'NOT '])}NULL"
        if form == 9:
            return f"{e('text')} {r.choice(['LIKE', 'ILIKE', 'NOT LIKE'])} {self.literal('text')}"
        if form == 10:
            f = r.choice(["abs", "upper", "lower", "length", "coalesce", "nullif", "round",
                          "substr", "trim", "greatest", "least", "date_trunc", "concat",
                          "md5", "sqrt", "floor", "nosuchfn"])
            args = {"date_trunc": lambda: f"'day', {e('ts')}",
                    "substr": lambda: f"{e('text')}, {e('int')}",
                    "nullif": lambda: f"{e()}, {e()}", "coalesce": lambda: f"{e()}, {e()}",
                    "greatest": lambda: f"{e()}, {e()}", "least": lambda: f"{e()}, {e()}",
                    "concat": lambda: f"{e()}, {e()}"}.get(f, lambda: e())()
            return f"{f}({args})"
        if form == 11:
            return f"({e('text')} || {e()})"
        if form == 12:
            return f"EXTRACT({r.choice(['YEAR', 'MONTH', 'DAY', 'HOUR', 'EPOCH'])} FROM {e('ts')})"
        if form == 13:
            return f"({e('ts')} {r.choice(['+', '-'])} {self.literal('interval')})"
        if form == 14:
            t = r.choice(list(_COLS))
            return f"(SELECT {r.choice(['max', 'min', 'count'])}({self.column(t)}) FROM {t})"
        return f"-{e('int')}"

    def select(self) -> str:
        r = self.r
        t = r.choice(list(_COLS))
        items = ", ".join(self.expr(t) for _ in range(r.randint(1, 4)))
        src = t
        if r.random() < 0.25:
            u = r.choice(list(_COLS))
            src = f"{t} {r.choice(['JOIN', 'LEFT JOIN', 'INNER JOIN'])} {u} AS u2 ON " \
                  f"{t}.k = u2.k" if u != t else f"{t} JOIN {t} AS u2 ON {t}.k = u2.k"
        sql = f"SELECT {r.choice(['', 'DISTINCT '])}{items} FROM {src}"
        if r.random() < 0.6:
            sql += f" WHERE {self.expr(t, 1, 'bool')}"
        if r.random() < 0.25:
            g = self.column(t)
            agg = r.choice([
                "count(*)", f"sum({self.column(t, 'int')})", f"avg({self.column(t, 'int')})",
                f"max({self.column(t)})", f"string_agg({self.column(t, 'text')}, ',')"])
            sql = f"SELECT {g}, {agg} FROM {t} GROUP BY {g}"
            if r.random() < 0.3:
                sql += " HAVING count(*) > 1"
        if r.random() < 0.15:
            sql = f"SELECT k, row_number() OVER (ORDER BY k), sum(k) OVER (PARTITION BY " \
                  f"k % 3) FROM {t}"
        if r.random() < 0.1:
            sql += f" {r.choice(['UNION', 'UNION ALL', 'EXCEPT', 'INTERSECT'])} SELECT k FROM fz"
        if r.random() < 0.4:
            sql += f" ORDER BY 1 {r.choice(['', 'DESC', 'NULLS FIRST'])}"
        if r.random() < 0.4:
            sql += f" LIMIT {r.choice([0, 1, 5, 100, -1])}"
            if r.random() < 0.3:
                sql += f" OFFSET {r.randint(0, 5)}"
        return sql

    def statement(self) -> str:
        r = self.r
        kind = r.randrange(20)
        t = r.choice(list(_COLS))
        scratch = f"fs_{self.w}_{r.randrange(3)}"
        if kind < 7:
            return self.select()
        if kind == 7:
            cols = list(_COLS[t])
            vals = ", ".join(self.literal(_COLS[t][c]) if r.random() < 0.8 else self.literal()
                             for c in cols)
            verb = r.choice(["INSERT INTO", "UPSERT INTO", "INSERT INTO"])
            extra = r.choice(["", "", " ON CONFLICT DO NOTHING"]) if verb[0] == "I" else ""
            key = r.choice([r.randint(1, 60), r.randint(1000, 2000)])
            vals = vals.split(", ", 1)
            rest = (", " + vals[1]) if len(vals) > 1 else ""
            return f"{verb} {t} VALUES ({key}{rest}){extra}"
        if kind == 8:
            c = r.choice([c for c in _COLS[t] if c != "k"] or ["k"])
            return f"UPDATE {t} SET {c} = {self.expr(t, 1, _COLS[t][c])} " \
                   f"WHERE {self.expr(t, 1, 'bool')}"
        if kind == 9:
            return f"DELETE FROM {t} WHERE k > {r.randint(900, 3000)}"
        if kind == 10:
            return f"EXPLAIN {r.choice(['', 'ANALYZE '])}{self.select()}"
        if kind == 11:
            return r.choice(["SHOW TABLES", f"SHOW COLUMNS FROM {t}", f"SHOW PARTITIONS {t}",
                             f"SHOW CREATE TABLE {t}", "SHOW statement_timeout",
                             "SHOW search_path", f"SHOW TABLETS {t}", "SHOW ALL",
                             f"DESCRIBE {t}"])
        if kind == 12:
            return r.choice(["SET statement_timeout = '5s'", "SET statement_timeout = 5000",
                             "SET statement_timeout TO 'bogus'", "SET search_path = public",
                             "SET application_name = 'fz'", "RESET statement_timeout",
                             "SET DateStyle = 'ISO'", "SET nosuch = 1"])
        if kind == 13:
            n = f"p{r.randrange(4)}"
            return r.choice([f"PREPARE {n} AS SELECT k FROM {t} WHERE k = $1",
                             f"PREPARE {n} (int) AS SELECT $1 + 1",
                             f"EXECUTE {n} ({self.literal()})", f"EXECUTE {n}",
                             f"DEALLOCATE {n}", "DEALLOCATE ALL", f"DEALLOCATE PREPARE {n}"])
        if kind == 14:
            return r.choice([
                f"CREATE TABLE {scratch} (k INT PRIMARY KEY, v STRING) "
                "PARTITION BY HASH (k) PARTITIONS 2",
                f"CREATE TABLE IF NOT EXISTS {scratch} (k BIGINT, s STRING, PRIMARY KEY (k, s))",
                f"DROP TABLE {scratch}", f"DROP TABLE IF EXISTS {scratch}",
                f"ALTER TABLE {scratch} ADD COLUMN c{r.randrange(3)} INT",
                f"ALTER TABLE {scratch} DROP COLUMN c{r.randrange(3)}",
                f"ALTER TABLE {scratch} RENAME COLUMN v TO w",
                f"CREATE TABLE {scratch} (k INT PRIMARY KEY) PARTITION BY RANGE (k) "
                f"(PARTITION VALUES < {self.literal()})",
                f"INSERT INTO {scratch} VALUES ({r.randint(1, 9)}, {self.literal()})"])
        if kind == 15:
            return f"COPY ({self.select()}) TO STDOUT" + r.choice(["", " (FORMAT csv)",
                                                                   " WITH (FORMAT binary)"])
        if kind == 16:
            return r.choice(["BEGIN", "COMMIT", "ROLLBACK", "START TRANSACTION", "END",
                             f"DECLARE c{r.randrange(2)} CURSOR WITH HOLD FOR {self.select()}",
                             f"FETCH {r.randint(1, 5)} FROM c{r.randrange(2)}",
                             f"CLOSE c{r.randrange(2)}", "CLOSE ALL"])
        if kind == 17:
            return f"SELECT {self.expr(t)}"
        if kind == 18:
            return f"VALUES ({self.literal()}, {self.literal()})"
        return f"SELECT * FROM {t} WHERE k = {self.literal()}"

    def near_valid(self, sql: str) -> str:
        r = self.r
        toks = re.findall(r"'(?:[^']|'')*'|\w+|::|<=|>=|<>|\|\||\S", sql)
        if not toks:
            return sql
        for _ in range(r.randint(1, 2)):
            i = r.randrange(len(toks))
            op = r.randrange(5)
            if op == 0 and len(toks) > 1:
                del toks[i]
            elif op == 1:
                toks.insert(i, toks[i])
            elif op == 2 and i + 1 < len(toks):
                toks[i], toks[i + 1] = toks[i + 1], toks[i]
            elif op == 3:
                toks[i] = r.choice(_KEYWORDS)
            else:
                toks = toks[:max(1, i)]
        return " ".join(toks)

    def next(self) -> str:
        sql = self.statement()
        return self.near_valid(sql) if self.r.random() < 0.4 else sql


class _Conn:
    """A minimal simple-query client over a raw socket (no driver between the fuzzer and
    the server's bytes)."""

    def __init__(self, port: int, bound: float):
        self.bound = bound
        self.s = socket.create_connection(("127.0.0.1", port), timeout=bound)
        self.buf = b""
        self.s.sendall(startup())
        self._until_ready()

    def _read_msg(self) -> tuple[bytes, bytes]:
        while len(self.buf) < 5 or len(self.buf) < 1 + struct.unpack_from("!i", self.buf, 1)[0]:
            data = self.s.recv(262144)
            if not data:
                raise ConnectionError("server closed the connection")
            self.buf += data
        n = struct.unpack_from("!i", self.buf, 1)[0]
        kind, body, self.buf = self.buf[:1], self.buf[5:1 + n], self.buf[1 + n:]
        return kind, body

    def _until_ready(self) -> list[dict]:
        errors = []
        while True:
            kind, body = self._read_msg()
            if kind == b"E":
                errors.append({f[:1].decode("latin-1"): f[1:].decode("utf-8", "replace")
                               for f in body.split(b"\0") if f})
            elif kind == b"G":                       # COPY FROM STDIN: give up on it
                self.s.sendall(msg(b"f", b"fuzzer does not send COPY data\0"))
            elif kind == b"Z":
                self.status = body
                return errors

    def query(self, sql: str) -> list[dict]:
        self.s.settimeout(self.bound)
        self.s.sendall(msg(b"Q", sql.encode("utf-8", "replace").replace(b"\0", b"") + b"\0"))
        return self._until_ready()

    def close(self) -> None:
        try:
            self.s.sendall(msg(b"X"))
        except OSError:
            pass
        self.s.close()


def leaks_in(err: dict) -> list[str]:
    text = " ".join(err.get(k, "") for k in ("M", "D", "H"))
    return [w for w in LEAKS if w in text]


def _sql_worker(args) -> dict:
    port, seed, statements, bound, deadline = args
    rng = random.Random(seed)
    gen = SqlGen(rng, seed % 1000)
    out = {"statements": 0, "errors": 0, "hung": 0, "closed": 0, "internal": [],
           "leaks": [], "sqlstates": {}}
    conn = _Conn(port, bound)
    conn.query("SET statement_timeout = '5s'")
    while out["statements"] < statements and time.monotonic() < deadline:
        sql = gen.next()
        out["statements"] += 1
        try:
            errs = conn.query(sql)
        except (TimeoutError, socket.timeout):
            out["hung"] += 1
            out["internal"].append({"sql": sql, "M": "no answer within the bound"})
            conn.s.close()
            conn = _Conn(port, bound)
            continue
        except (ConnectionError, OSError) as e:
            out["closed"] += 1
            out["internal"].append({"sql": sql, "M": f"connection lost: {e}"})
            conn = _Conn(port, bound)
            continue
        if conn.status == b"E" and rng.random() < 0.8:
            conn.query("ROLLBACK")   # else most of what follows is 25P02
        for e in errs:
            out["errors"] += 1
            code = e.get("C", "?")
            out["sqlstates"][code] = out["sqlstates"].get(code, 0) + 1
            if code == "XX000" and len(out["internal"]) < 50:
                out["internal"].append({"sql": sql, "M": e.get("M")})
            found = leaks_in(e)
            if found and len(out["leaks"]) < 50:
                out["leaks"].append({"sql": sql, "leak": found, "M": e.get("M"),
                                     "D": e.get("D"), "H": e.get("H")})
    conn.close()
    return out


# -- the server and its watchers -------------------------------------------------------------

def _tracebacks(logtext: str) -> list[str]:
    """The logged tracebacks: each from its 'Traceback' line to the exception line."""
    out, cur = [], None
    for ln in logtext.splitlines():
        if ln.startswith("Traceback"):
            cur = [ln]
        elif cur is not None:
            cur.append(ln)
            if not ln.startswith((" ", "\t")):
                out.append("\n".join(cur))
                cur = None
    return out


class Server:
    """`python -m kudusql serve` as a real process on a free 127.0.0.1 port."""

    def __init__(self, data_dir: str):
        self.log_path = os.path.join(os.path.dirname(data_dir), "server.log")
        self.log = open(self.log_path, "w+b")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kudusql", "serve", "--data-dir", data_dir, "--port", "0",
             "--max-connections", "1000"],
            stdout=subprocess.PIPE, stderr=self.log, cwd=os.path.dirname(
                os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        line = b""
        deadline = time.monotonic() + 60
        while b"serving" not in line:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("the server did not start: " + self.log_text()[-2000:])
            line = self.proc.stdout.readline()
        self.port = int(re.search(rb":(\d+) \(auth", line).group(1))

    def rss_kb(self) -> int:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def log_text(self) -> str:
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


class Watch(threading.Thread):
    """The canary query and the RSS samples, until `stop`."""

    def __init__(self, server: Server, bound: float, rss_limit_mb: float = 3000):
        super().__init__(daemon=True)
        self.server, self.bound = server, bound
        self.rss_limit_kb = rss_limit_mb * 1024
        self.rss_over_limit_at: float | None = None
        self.stop_flag = threading.Event()
        self.rss_max = self.rss_first = server.rss_kb()
        self.canary_ok = self.canary_bad = 0
        self.canary_max_s = 0.0
        self.canary_errors: list[str] = []

    def run(self) -> None:
        conn = _Conn(self.server.port, self.bound)
        last = 0.0
        t_start = time.monotonic()
        while not self.stop_flag.wait(0.25):
            self.rss_max = max(self.rss_max, self.server.rss_kb())
            if self.rss_max > self.rss_limit_kb and self.rss_over_limit_at is None:
                # the machine is shared: stop the server rather than let it take it all
                self.rss_over_limit_at = round(time.monotonic() - t_start, 1)
                self.server.proc.kill()
                return
            if time.monotonic() - last < 0.5:
                continue
            last = time.monotonic()
            t0 = time.monotonic()
            try:
                conn.s.settimeout(self.bound)
                conn.s.sendall(msg(b"Q", b"SELECT count(*), sum(v) FROM canary\0"))
                rows, errs = [], []
                while True:
                    kind, body = conn._read_msg()
                    if kind == b"D":
                        rows.append(body)
                    elif kind == b"E":
                        errs.append(body)
                    elif kind == b"Z":
                        break
                dt = time.monotonic() - t0
                self.canary_max_s = max(self.canary_max_s, dt)
                ok = not errs and len(rows) == 1 and rows[0] == (
                    b"\0\2" + struct.pack("!i", 3) + b"100" + struct.pack("!i", 4) + b"4950")
                if ok:
                    self.canary_ok += 1
                else:
                    self.canary_bad += 1
                    self.canary_errors.append(repr((rows, errs))[:300])
            except (OSError, ConnectionError) as e:
                self.canary_bad += 1
                self.canary_errors.append(f"canary connection: {e}")
                try:
                    conn = _Conn(self.server.port, self.bound)
                except OSError:
                    pass
        conn.close()


def _merge(parts: list[dict]) -> dict:
    out: dict = {}
    for p in parts:
        for k, v in p.items():
            if isinstance(v, float):
                out[k] = max(out.get(k, 0.0), v)
            elif isinstance(v, int):
                out[k] = out.get(k, 0) + v
            elif isinstance(v, list):
                out.setdefault(k, []).extend(v)
            elif isinstance(v, dict):
                d = out.setdefault(k, {})
                for kk, vv in v.items():
                    d[kk] = d.get(kk, 0) + vv
    return out


def run(messages: int, statements: int, workers: int = 4, bound: float = 10.0,
        seed: int = 1, data_dir: str | None = None, log=print, sql_damage: bool = True,
        rss_limit_mb: float = 3000, max_seconds: float | None = None) -> dict:
    """Start a server, fuzz it with `messages` frontend messages and `statements` SQL
    statements over `workers` client processes each, stop it; the report."""
    tmp = tempfile.mkdtemp(prefix="kudusql-fuzz-") if data_dir is None else data_dir
    server = Server(os.path.join(tmp, "db"))
    report: dict = {"seed": seed, "workers": workers, "bound_s": bound,
                    "max_seconds_per_phase": max_seconds,
                    "sql_damage": sql_damage}
    try:
        setup = _Conn(server.port, 60)
        for sql in SETUP_SQL:
            errs = setup.query(sql)
            if errs:
                raise RuntimeError(f"setup failed: {sql}: {errs}")
        setup.close()
        watch = Watch(server, bound, rss_limit_mb)
        span = max_seconds if max_seconds else 1e9      # per phase
        watch.start()
        ctx = mp.get_context("fork")
        with ctx.Pool(workers) as pool:
            if messages:
                t0 = time.monotonic()
                deadline = t0 + span
                per = -(-messages // workers)
                parts = pool.map(_message_worker, [
                    (server.port, seed * 1000 + i, per, bound, sql_damage, deadline)
                    for i in range(workers)])
                wall = time.monotonic() - t0
                m = _merge(parts)
                report["messages"] = {**m, "wall_s": round(wall, 1),
                                      "per_s": round(m["messages"] / wall)}
                log(f"messages: {m['messages']} in {wall:.0f} s, {m['outcomes']}")
            if statements:
                t0 = time.monotonic()
                deadline = t0 + span
                per = -(-statements // workers)
                parts = pool.map(_sql_worker, [
                    (server.port, seed * 2000 + i, per, bound, deadline)
                    for i in range(workers)])
                wall = time.monotonic() - t0
                m = _merge(parts)
                report["statements"] = {**m, "wall_s": round(wall, 1),
                                        "per_s": round(m["statements"] / wall)}
                log(f"statements: {m['statements']} in {wall:.0f} s, {m['errors']} errors, "
                    f"{len(m['internal'])} internal, {len(m['leaks'])} leaks")
        watch.stop_flag.set()
        watch.join(2 * bound + 5)
        alive = server.proc.poll() is None
        logtext = server.log_text()
        report["server"] = {
            "alive_at_end": alive,
            "rss_first_mb": round(watch.rss_first / 1024, 1),
            "rss_max_mb": round(watch.rss_max / 1024, 1),
            "log_tracebacks": logtext.count("Traceback"),
            "log_failed_connections": len(re.findall(r"connection .* failed", logtext)),
            "log_excerpt": [ln for ln in logtext.splitlines()
                            if "Traceback" in ln or "ERROR" in ln][:20],
            # the first tracebacks whole: the log goes with the temporary directory
            "log_tracebacks_text": _tracebacks(logtext)[:3],
        }
        report["server"]["rss_over_limit_after_s"] = watch.rss_over_limit_at
        report["canary"] = {"ok": watch.canary_ok, "bad": watch.canary_bad,
                            "max_latency_s": round(watch.canary_max_s, 3),
                            "errors": watch.canary_errors[:10]}
    finally:
        server.stop()
        if data_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--statements", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--bound", type=float, default=10.0,
                    help="seconds a connection may stay silent before it counts as hung")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-sql-damage", action="store_true",
                    help="damage framing, names, parameters and formats but not the SQL text "
                         "of replayed Query/Parse messages (the statements phase fuzzes SQL)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="stop each phase after this long and report what was done")
    ap.add_argument("--rss-limit-mb", type=float, default=3000,
                    help="stop the server (and fail) when its RSS passes this")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    rep = run(a.messages, a.statements, a.workers, a.bound, a.seed,
              log=lambda s: print(s, file=sys.stderr, flush=True),
              sql_damage=not a.no_sql_damage, rss_limit_mb=a.rss_limit_mb,
              max_seconds=a.max_seconds)
    rep["wall_s"] = round(time.monotonic() - t0, 1)
    print(json.dumps(rep, indent=1, default=str))
    bad = (not rep["server"]["alive_at_end"] or rep["canary"]["bad"]
           or rep["server"]["rss_over_limit_after_s"] is not None
           or rep.get("messages", {}).get("outcomes", {}).get("hung", 0)
           or rep.get("statements", {}).get("hung", 0)
           or rep.get("statements", {}).get("closed", 0)
           or rep["server"]["log_tracebacks"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
