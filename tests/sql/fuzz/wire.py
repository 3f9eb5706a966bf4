"""The wire slice of the SQL fuzzers: generated queries through a real `kudusql serve`.

A server process is started on 127.0.0.1 (a free port, a temporary data directory), the
world's tables are created and filled through psycopg, and every generated query is run
    - by psycopg 3 (text results, parsed by psycopg),
    - by asyncpg (binary results, the extended protocol),
    - by DuckDB on the same rows (the oracle).
The two client results must hold exactly the same values (REAL compared at float32
precision: its text form is the shortest that reads back as the same float32); the text
result must match DuckDB as in the embedded differential check. The server is killed at
the end whatever happens (and dies with the process that started it: PR_SET_PDEATHSIG).

`wire_results(seed, queries, per_world, jobs, first_world)` runs the worlds in `jobs`
worker processes, each with its own server and clients kept for all its worlds; world w of
a seed is the same world and queries in any process, so results merge in world order and a
run can continue from a world (`--first-world`) as the embedded techniques do.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
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

_FLOAT4_OID = 700          # PostgreSQL's `real` in a RowDescription

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the server's child process before exec: SIGKILL when the process that started it
    dies (a fuzz worker killed with its pool, a test run interrupted): no server outlives
    the fuzzer. Linux only; elsewhere a no-op."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)     # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def kudusql_server(timeout: float = 60.0):
    """A `kudusql serve` process on a free 127.0.0.1 port -> its port; stopped (and killed
    if it does not stop) on exit."""
    data = tempfile.mkdtemp(prefix="kudusql-wirefuzz-")
    port = free_port()
    # the log goes to a file: a pipe nobody reads fills up (64 KiB) and the server blocks
    # in its next log write - a long run hung after 32,200 queries that way
    log = open(os.path.join(data, "server.log"), "w+b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kudusql", "serve", "--data-dir", os.path.join(data, "db"),
         "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=log,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))))
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError("kudusql serve exited: " + log.read().decode())
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
        log.close()
        shutil.rmtree(data, ignore_errors=True)


class _Clients:
    """A server and its two clients (psycopg text, asyncpg binary) for one process's worlds;
    `close()` stops them."""

    def __init__(self):
        self._stack = contextlib.ExitStack()
        try:
            port = self._stack.enter_context(kudusql_server())
            dsn = f"host=127.0.0.1 port={port} user=kudusql dbname=kudusql"
            self.text = self._stack.enter_context(psycopg.connect(dsn, autocommit=True))
            self.loop = asyncio.new_event_loop()
            self._stack.callback(self.loop.close)
            self.binary = self.loop.run_until_complete(asyncpg.connect(
                host="127.0.0.1", port=port, user="kudusql", database="kudusql",
                statement_cache_size=0))
            self._stack.callback(lambda: self.loop.run_until_complete(self.binary.close()))
        except BaseException:
            self._stack.close()
            raise

    def close(self) -> None:
        self._stack.close()


_PROCESS_CLIENTS: list[_Clients] = []     # a worker process's own (wire_world_task)


def wire_world_task(args: tuple) -> tuple[int, Stats]:
    """(seed, w, n) -> (w, Stats): `n` queries in world `w` of `seed`, on this process's
    server (started at its first world, stopped when the worker process exits)."""
    seed, w, n = args
    if not _PROCESS_CLIENTS:
        from multiprocessing import util
        _PROCESS_CLIENTS.append(_Clients())
        util.Finalize(None, _PROCESS_CLIENTS[0].close, exitpriority=10)
    c = _PROCESS_CLIENTS[0]
    r = WireRunner(seed)
    r._world(c.text, c.binary, c.loop, w, n)
    return w, r.stats


def wire_results(seed: int, queries: int, per_world: int = 100, jobs: int = 1,
                 first_world: int = 0):
    """Yields (w, Stats) world by world, in world order from `first_world`, enough worlds
    for `queries` queries; with `jobs` > 1 in that many worker processes, each with its own
    server. With one job the worlds run here, on one server."""
    worlds = -(-queries // per_world)
    tasks = [(seed, w, per_world) for w in range(first_world, first_world + worlds)]
    if jobs <= 1:
        r = WireRunner(seed)
        with contextlib.closing(_Clients()) as c:
            for _, w, n in tasks:
                r.stats = Stats()
                r._world(c.text, c.binary, c.loop, w, n)
                yield w, r.stats
        return
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")     # no fork of a process holding threads
    with ctx.Pool(jobs) as pool:
        yield from pool.imap(wire_world_task, tasks)


def _same_exact(a, b, real: bool) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return np.float32(a) == np.float32(b) if real else a == b
    return type(a) is type(b) and a == b


def _same_rows(a: list, b: list, real: list[bool]) -> bool:
    """Exact equality of two results as multisets (REAL columns at float32 precision)."""
    ta, tb = _sorted_raw(a), _sorted_raw(b)
    return len(ta) == len(tb) and all(
        len(ra) == len(rb) and all(_same_exact(x, y, real[i])
                                   for i, (x, y) in enumerate(zip(ra, rb)))
        for ra, rb in zip(ta, tb))


def _floats_only_differ(a: list, b: list) -> bool:
    """Whether the two results differ only in float values, by at most 1e-12 relative."""
    ta, tb = _sorted_raw(a), _sorted_raw(b)
    return len(ta) == len(tb) and all(
        len(ra) == len(rb) and all(
            (x == y) or (isinstance(x, float) and isinstance(y, float)
                         and math.isclose(x, y, rel_tol=1e-12))
            for x, y in zip(ra, rb))
        for ra, rb in zip(ta, tb))


class WireRunner:
    """The wire technique: `queries` generated queries over worlds built through a server."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.stats = Stats()

    def run(self, queries: int, per_world: int = 100, progress=None) -> Stats:
        """`queries` queries, `per_world` per world, on one server started here;
        `progress(stats)` after each world."""
        with contextlib.closing(_Clients()) as c:
            done, w = 0, 0
            while done < queries:
                n = min(per_world, queries - done)
                self._world(c.text, c.binary, c.loop, w, n)
                done += n
                w += 1
                if progress is not None:
                    progress(self.stats)
        return self.stats

    def replay(self, qseed: int) -> Stats:
        """Run the one query of seed `qseed` (from a mismatch report) again, in its world."""
        wseed = qseed // 1_000_003
        with contextlib.closing(_Clients()) as c:
            self._queries(c.text, c.binary, c.loop, wseed, [qseed - wseed * 1_000_003])
        return self.stats

    def _world(self, text_conn, binary, loop, w: int, n: int) -> None:
        self._queries(text_conn, binary, loop, self.seed * 100_003 + w, range(n))

    def _queries(self, text_conn, binary, loop, wseed: int, numbers) -> None:
        """The world of `wseed`, rebuilt through the server, and its queries `numbers`."""
        text_conn.execute("DROP VIEW IF EXISTS v0, v1")
        for t in ("t0", "t1", "t2"):
            text_conn.execute(f"DROP TABLE IF EXISTS {t}")
        world = World(wseed, execute=lambda sql: text_conn.execute(sql))
        try:
            for i in numbers:
                qseed = wseed * 1_000_003 + i
                q = gen.QueryGen(random.Random(qseed), world.tables + world.views,
                                 array_results=False).query()
                self._one(world, text_conn, binary, loop, q, qseed)
        finally:
            world.close()

    def _one(self, world, text_conn, binary, loop, q, qseed) -> None:
        self.stats.queries += 1
        sql = q.sql.k
        try:
            cur = text_conn.execute(sql)
            text_rows = cur.fetchall()
            real = [d.type_code == _FLOAT4_OID for d in cur.description]
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
        # without ORDER BY); REAL columns (by the result's type, whatever their name: a
        # UNION of avg(...) and a REAL column is REAL) at float32 precision
        if not _same_rows(text_rows, bin_rows, real):
            # the two clients ran the statement twice: a double aggregate summed in another
            # order (parallel tablet scans) may differ in its last bits between runs, as in
            # PostgreSQL's parallel aggregation. A third run (text again) that differs from
            # the first shows that; one that agrees makes the binary result the odd one out.
            again = text_conn.execute(sql).fetchall()
            if not _same_rows(text_rows, again, real) and _floats_only_differ(
                    text_rows, bin_rows):
                self.stats.outcomes["float result varies between runs"] += 1
                return
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
