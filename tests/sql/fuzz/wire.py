"""The wire slice of the SQL fuzzers: generated queries through a real `kudusql serve`.

A server process is started on 127.0.0.1 (a free port, a temporary data directory), the
world's tables are created and filled through psycopg, and every generated query is run
    - by psycopg 3 (text results, parsed by psycopg),
    - by asyncpg (binary results, the extended protocol),
    - by DuckDB on the same rows (the oracle).
The two client results must hold exactly the same values (REAL compared at float32
precision: its text form is the shortest that reads back as the same float32); the text
result must match DuckDB as in the embedded differential check. The server is killed at
the end whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import asyncpg
import duckdb
import numpy as np
import psycopg

from tests.sql.fuzz import gen
from tests.sql.fuzz.compare import diff_rows, norm_rows
from tests.sql.fuzz.runner import Mismatch, Stats, TimedOut, World


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def kudusql_server(timeout: float = 60.0):
    """A `kudusql serve` process on a free 127.0.0.1 port -> its port; stopped (and killed
    if it does not stop) on exit."""
    data = tempfile.mkdtemp(prefix="kudusql-wirefuzz-")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kudusql", "serve", "--data-dir", data, "--host", "127.0.0.1",
         "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))))
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError("kudusql serve exited: " + proc.stderr.read().decode())
            try:
                with psycopg.connect(f"host=127.0.0.1 port={port} user=kudusql dbname=kudusql",
                                     connect_timeout=2):
                    break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        proc.stderr.close()
        shutil.rmtree(data, ignore_errors=True)


def _same_exact(a, b, real: bool) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return np.float32(a) == np.float32(b) if real else a == b
    return type(a) is type(b) and a == b


class WireRunner:
    """The wire technique: `queries` generated queries over worlds built through a server."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.stats = Stats()

    def run(self, queries: int, per_world: int = 100, progress=None) -> Stats:
        """`queries` queries, `per_world` per world; `progress(stats)` after each world."""
        loop = asyncio.new_event_loop()
        try:
            with kudusql_server() as port:
                dsn = f"host=127.0.0.1 port={port} user=kudusql dbname=kudusql"
                with psycopg.connect(dsn, autocommit=True) as text_conn:
                    binary = loop.run_until_complete(asyncpg.connect(
                        host="127.0.0.1", port=port, user="kudusql", database="kudusql",
                        statement_cache_size=0))
                    try:
                        done, w = 0, 0
                        while done < queries:
                            n = min(per_world, queries - done)
                            self._world(text_conn, binary, loop, w, n)
                            done += n
                            w += 1
                            if progress is not None:
                                progress(self.stats)
                    finally:
                        loop.run_until_complete(binary.close())
        finally:
            loop.close()
        return self.stats

    def _world(self, text_conn, binary, loop, w: int, n: int) -> None:
        wseed = self.seed * 100_003 + w
        for t in ("t0", "t1", "t2"):
            text_conn.execute(f"DROP TABLE IF EXISTS {t}")
        world = World(wseed, execute=lambda sql: text_conn.execute(sql))
        try:
            real_cols = {c.name for t in world.tables for c in t.columns if c.ktype == "REAL"}
            for i in range(n):
                qseed = wseed * 1_000_003 + i
                q = gen.QueryGen(random.Random(qseed), world.tables,
                                 array_results=False).query()
                self._one(world, text_conn, binary, loop, q, qseed, real_cols)
        finally:
            world.close()

    def _one(self, world, text_conn, binary, loop, q, qseed, real_cols) -> None:
        self.stats.queries += 1
        sql = q.sql.k
        try:
            cur = text_conn.execute(sql)
            text_rows = cur.fetchall()
            names = [d.name for d in cur.description]
        except psycopg.Error as e:
            # the same statement must fail over the binary path too
            try:
                loop.run_until_complete(binary.fetch(sql))
            except asyncpg.PostgresError as e2:
                if e2.sqlstate != e.sqlstate or e.sqlstate.startswith("XX"):
                    self._bad(qseed, sql, f"text {e.sqlstate} / binary {e2.sqlstate}: {e}")
                else:
                    self.stats.outcomes["both clients error"] += 1
                return
            except (ValueError, OverflowError) as e2:
                # a value both clients refuse to load (a date past year 9999: PostgreSQL and
                # kudusql send it, Python's date cannot hold it): psycopg's own DataError has
                # no SQLSTATE; anything else is a real difference
                if e.sqlstate is None:
                    self.stats.outcomes["value beyond the clients' range"] += 1
                else:
                    self._bad(qseed, sql, f"text {e.sqlstate}, binary client: {e2}")
                return
            self._bad(qseed, sql, f"text client failed ({e.sqlstate}: {e}), binary ran")
            return
        try:
            records = loop.run_until_complete(binary.fetch(sql))
        except asyncpg.PostgresError as e:
            self._bad(qseed, sql, f"binary client failed ({e.sqlstate}: {e}), text ran")
            return
        except (ValueError, OverflowError) as e:
            # psycopg loaded every value from text: a binary value asyncpg cannot load
            # means the binary encoding is wrong
            self._bad(qseed, sql, f"binary client cannot load the result ({e}), text ran")
            return
        bin_rows = [tuple(r) for r in records]
        # exact equality of the two encodings (as multisets: rows may come in any order
        # without ORDER BY); REAL columns at float32 precision
        real = [n in real_cols for n in names]
        ta, tb = _sorted_raw(text_rows), _sorted_raw(bin_rows)
        if len(ta) != len(tb) or not all(
                len(ra) == len(rb) and all(_same_exact(x, y, real[i])
                                           for i, (x, y) in enumerate(zip(ra, rb)))
                for ra, rb in zip(ta, tb)):
            self._bad(qseed, sql, f"text and binary results differ: {text_rows[:3]} vs "
                                  f"{bin_rows[:3]}")
            return
        theirs = world.theirs(q.sql.d)      # through Arrow, with its decimal tolerances
        if isinstance(theirs, duckdb.Error):
            self.stats.outcomes["DuckDB error"] += 1
            return
        if isinstance(theirs, TimedOut):    # the oracle ran past the time limit (Watchdog)
            self.stats.outcomes["timeout"] += 1
            self.stats.timeouts.append(Mismatch("wire", qseed, repr(q.sql), str(theirs)))
            return
        d = diff_rows(text_rows, theirs, q.ordered, q.total_order, tols=world.tols)
        if d is not None:
            self._bad(qseed, repr(q.sql), d)
        else:
            self.stats.outcomes["match"] += 1

    def _bad(self, seed: int, sql: str, detail: str) -> None:
        self.stats.outcomes["mismatch"] += 1
        self.stats.mismatches.append(Mismatch("wire", seed, sql, detail))


def _sorted_raw(rows) -> list[tuple]:
    """The rows sorted by their normalised forms (so both clients' rows line up)."""
    return [r for _, r in sorted(((k, r) for (k, _), r in zip(norm_rows(rows), rows)),
                                 key=lambda x: x[0])]
