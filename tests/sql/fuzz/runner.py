"""Worlds (a kudusql database and a DuckDB copy of the same rows) and the techniques that run
generated queries against them; see tests/sql/fuzz/__init__.py for what each checks.
"""

from __future__ import annotations

import ctypes
import dataclasses
import datetime as dt
import random
import shutil
import tempfile
import threading
import time
from collections import Counter

import duckdb
import pyarrow as pa

from kudusql.session import Database
from planner.errors import SqlError
from planner.rules import RULE_NAMES
from tests.sql.fuzz import gen
from tests.sql.fuzz.compare import Expected, arrow_rows, decimal_tolerances, diff_rows

# one embedded world in BIG_EVERY is large (World._big), with this many rows in t0
BIG_EVERY = 25
BIG_ROWS = (130_000, 200_000)

TECHNIQUES = ("diff", "tlp", "norec", "rules", "pushdown")

# the time limit of one statement in an embedded world, kudusql's or DuckDB's (seconds; see
# Watchdog): one clock for both sides (DuckDB has no statement_timeout), with a backstop
# for a cancel that is not honoured
STATEMENT_TIMEOUT = 60.0
# a statement that does not stop within this long after the cancel is interrupted from
# outside (Watchdog): the backstop for code that never reaches a guard check
HARD_GRACE = 30.0
# one generated query's check as a whole (several statements, the matcher): this many
# statement time limits
QUERY_LIMIT = 10
# predicates checked per generated FROM and select list (tlp, norec)
PREDICATES = 3

_ARROW = {"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(),
          "BIGINT": pa.int64(), "REAL": pa.float32(), "DOUBLE": pa.float64(),
          "STRING": pa.string(), "BOOLEAN": pa.bool_(), "DATE": pa.date32(),
          "TIMESTAMP": pa.timestamp("us")}


def arrow_type(ktype: str) -> pa.DataType:
    if ktype.startswith("DECIMAL"):
        p, s = ktype[8:-1].split(",")
        return pa.decimal128(int(p), int(s))
    if ktype.startswith("VARCHAR"):
        return pa.string()
    return _ARROW[ktype]


@dataclasses.dataclass
class Mismatch:
    technique: str
    seed: int
    sql: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.technique} seed={self.seed}] {self.detail}\n    {self.sql}"


@dataclasses.dataclass
class Stats:
    queries: int = 0
    mismatches: list[Mismatch] = dataclasses.field(default_factory=list)
    outcomes: Counter = dataclasses.field(default_factory=Counter)
    unsupported: Counter = dataclasses.field(default_factory=Counter)
    # statements stopped by the time limit (Watchdog), with their seeds: reported, and a
    # mismatch too where the oracle answered
    timeouts: list[Mismatch] = dataclasses.field(default_factory=list)

    def merge(self, other: Stats) -> None:
        self.queries += other.queries
        self.mismatches += other.mismatches
        self.outcomes.update(other.outcomes)
        self.unsupported.update(other.unsupported)
        self.timeouts += other.timeouts


class TimedOut:
    """A statement the Watchdog stopped (what World.ours / World.theirs return for it)."""

    def __init__(self, side: str, seconds: float, hard: bool = False):
        self.side, self.seconds, self.hard = side, seconds, hard

    def __str__(self) -> str:
        how = "interrupted from outside: the cancel was not honoured" if self.hard else \
            "cancelled"
        return f"{self.side} ran past the {self.seconds:g} s time limit ({how})"


class _Interrupted(BaseException):
    """Raised in the fuzzer's thread by the Watchdog's backstop. A BaseException, so that
    kudusql's statement boundary (session/errors.py: Exception -> XX000) lets it through."""


class Watchdog:
    """`with Watchdog(seconds, cancel) as dog:` - after `seconds`, `cancel()` (kudusql's
    Session.cancel: 57014 at the next guard check; DuckDB's interrupt); if the statement is
    still running HARD_GRACE seconds later (a loop that never reaches a guard check), the
    thread that entered gets _Interrupted raised in it (at its next Python bytecode).
    `dog.fired`: None, "cancel" or "hard".

    One monitor thread per process checks every watchdog each POLL seconds (a thread per
    statement cost ~0.5 ms, a tenth of a small world's query); entering and leaving only
    put the watchdog in and out of a dict."""

    POLL = 0.05
    _lock = threading.Lock()
    _active: dict[int, Watchdog] = {}
    _thread: threading.Thread | None = None

    def __init__(self, seconds: float, cancel):
        self.seconds, self.cancel = seconds, cancel
        self.fired: str | None = None

    def __enter__(self) -> Watchdog:
        if self.seconds:
            self._tid = threading.get_ident()
            self._deadline = time.monotonic() + self.seconds
            with Watchdog._lock:
                Watchdog._active[id(self)] = self
                if Watchdog._thread is None or not Watchdog._thread.is_alive():
                    Watchdog._thread = threading.Thread(target=Watchdog._watch, daemon=True,
                                                        name="fuzz-watchdog")
                    Watchdog._thread.start()
        return self

    @staticmethod
    def _watch() -> None:
        while True:
            time.sleep(Watchdog.POLL)
            now = time.monotonic()
            with Watchdog._lock:     # under the lock: never a cancel of a later statement
                for dog in list(Watchdog._active.values()):
                    dog._tick(now)

    def _tick(self, now: float) -> None:
        if self.fired is None and now >= self._deadline:
            self.fired = "cancel"
            self._deadline = now + HARD_GRACE
            self.cancel()
        elif self.fired == "cancel" and now >= self._deadline:
            self.fired = "hard"
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._tid),
                                                       ctypes.py_object(_Interrupted))

    def __exit__(self, *exc) -> bool:
        if self.seconds:
            with Watchdog._lock:
                Watchdog._active.pop(id(self), None)
                if self.fired == "hard":     # not delivered yet: take it back
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._tid),
                                                               None)
        return bool(exc and exc[0] is _Interrupted and self.fired == "hard")


class World:
    """A random schema and data in kudusql (flushed in part: MemRowSets, DiskRowSets and
    delta stores all hold rows) and in DuckDB; a snapshot `v1` taken before a round of
    UPDATE / DELETE / INSERT, kept in DuckDB as `<table>_v1` for time-travel queries."""

    tols: dict[int, float] = {}     # the last DuckDB result's decimal tolerances (theirs)
    timeout: float = STATEMENT_TIMEOUT   # per statement (Watchdog); 0: none

    def __init__(self, seed: int, directory: str | None = None, execute=None,
                 big: bool | None = None):
        """`execute(sql)`: where the kudusql statements go (default: an embedded database
        in `directory` or a temporary one). With `execute` (the wire fuzzer's client) there
        is no flushing and no snapshot (`v1` is None). `big` (default: one embedded world
        in BIG_EVERY): a large world (see _big)."""
        self.seed = seed
        rng = random.Random(seed)
        self.rng = rng
        if big is None:
            big = execute is None and seed % BIG_EVERY == BIG_EVERY - 1
        self.big = big
        if big:
            self._big(seed, directory)
            return
        self._tmp = directory is None and execute is None
        self.db = None
        if execute is None:
            self.dir = directory or tempfile.mkdtemp(prefix="kudusql-fuzz-")
            self.db = Database.open(self.dir, maintenance=False)
            self.session = self.db.session()
            execute = self.session.execute
        self.execute = execute
        self.duck = duckdb.connect(config={"threads": 1})   # see test_window_frames
        self.duck.execute("SET TimeZone = 'UTC'")           # as kudusql's session
        self.tables = gen.gen_schema(rng, rng.choice([2, 3]))
        model: dict[str, dict] = {}
        for t in self.tables:
            kddl, dddl = t.ddl()
            self.execute(kddl)
            rows = gen.gen_rows(rng, t, rng.randint(0, 14))
            self._insert(t, rows)
            if rng.random() < 0.7:
                self._flush(t, dms=False)
            more = gen.gen_rows(rng, t, rng.randint(0, 10), start=len(rows))
            self._insert(t, more)
            model[t.name] = {r[0]: r for r in rows + more}
        self.v1 = None
        if self.db is not None:
            time.sleep(0.002)
            self.v1 = self.db.catalog.clock.now()
            time.sleep(0.002)
            for t in self.tables:
                self._duck_table(f"{t.name}_v1", t, list(model[t.name].values()))
        # mutations after the snapshot: updates (some of flushed rows: DeltaMemStores),
        # deletes and new rows
        for t in self.tables:
            m = model[t.name]
            keys = sorted(m, key=str)
            for k in rng.sample(keys, min(len(keys), rng.randint(0, 4))):
                ci = rng.randrange(1, len(t.columns))
                c = t.columns[ci]
                v = gen.value(rng, c, 0)
                self.execute(f"UPDATE {t.name} SET {c.name} = {gen.sql_value(v)} "
                             f"WHERE k = {gen.sql_value(k)}")
                m[k] = m[k][:ci] + (v,) + m[k][ci + 1:]
            for k in rng.sample(keys, min(len(keys), rng.randint(0, 2))):
                if k in m:
                    self.execute(f"DELETE FROM {t.name} WHERE k = {gen.sql_value(k)}")
                    del m[k]
            extra = gen.gen_rows(rng, t, rng.randint(0, 3), start=100)
            self._insert(t, extra)
            m.update({r[0]: r for r in extra})
            if rng.random() < 0.4:
                self._flush(t, dms=True)
            self._duck_table(t.name, t, list(m.values()))
        # views over the tables (and over each other), in both engines: queries read them
        # as tables (never with time travel). Their own generator, so that the tables and
        # data of a seed stay what they were before views came.
        self.views = []
        for view, ddl in gen.gen_views(random.Random(seed * 7919 + 17), self.tables):
            self.execute(ddl.k)
            self.duck.execute(ddl.d)
            self.views.append(view)

    def _big(self, seed: int, directory: str | None) -> None:
        """A large world: t0 holds BIG_ROWS (130K to 200K) rows in one or two tablets, so
        scans cross the 128K-row morsel boundary (planner/guard.py MORSEL_ROWS) and top-k,
        hash aggregation, DISTINCT and sort run their multi-morsel paths; rows sit in two
        DiskRowSets and a MemRowSet, and after the snapshot some are updated (DeltaMemStore
        of flushed rows), deleted and inserted. t1 is a small ordinary table. Queries in
        a large world have no subqueries and join at most t0 to t1 on a column equality
        (QueryGen joins="equi"), so no statement is quadratic in the rows."""
        import numpy as np
        rng = self.rng
        self._tmp = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="kudusql-fuzz-")
        self.db = Database.open(self.dir, maintenance=False)
        self.session = self.db.session()
        self.execute = self.session.execute
        self.duck = duckdb.connect(config={"threads": 1})   # see test_window_frames
        self.duck.execute("SET TimeZone = 'UTC'")           # as kudusql's session
        n = rng.randint(*BIG_ROWS)
        parts = rng.choice(["", "", "PARTITION BY HASH (k) PARTITIONS 2"])
        cols = [gen.Column("k", "BIGINT", "BIGINT", "int", False, key=True),
                gen.Column("c0", "INT", "INTEGER", "int", True),
                gen.Column("c1", "DOUBLE", "DOUBLE", "float", True),
                gen.Column("c2", "STRING", "VARCHAR", "str", True),
                gen.Column("c3", "DECIMAL(18,4)", "DECIMAL(18,4)", "dec", True),
                gen.Column("c4", "DATE", "DATE", "date", True),
                gen.Column("c5", "BOOLEAN", "BOOLEAN", "bool", True)]
        big = gen.Table("t0", cols, parts)
        small = gen.gen_schema(rng, 2)[1]
        self.tables = [big, small]
        self.views = []                 # none: queries of a large world stay linear
        # column data, vectorised (numpy from the world's seed)
        npr = np.random.default_rng(seed)
        nulls = lambda: npr.random(n) < 0.05                      # noqa: E731
        words = np.array(gen.STRINGS + [f"s{i:03d}" for i in range(300)], dtype=object)
        days = np.array([(d - dt.date(1970, 1, 1)).days for d in gen.DATES[:4]] +
                        list(range(18_000, 18_400)), dtype=np.int32)
        data = pa.table({
            "k": pa.array(np.arange(n, dtype=np.int64)),
            "c0": pa.array(npr.integers(-1000, 1000, n, dtype=np.int32), mask=nulls()),
            "c1": pa.array(npr.integers(-4000, 4000, n) / 4.0, mask=nulls()),
            "c2": pa.array(words[npr.integers(0, len(words), n)], pa.string(), mask=nulls()),
            "c3": pa.array(npr.integers(-10**6, 10**6, n, dtype=np.int32),
                           mask=nulls()).cast(pa.decimal128(18, 4)),
            "c4": pa.array(days[npr.integers(0, len(days), n)], mask=nulls()).cast(
                pa.date32()),
            "c5": pa.array(npr.random(n) < 0.5, mask=nulls()),
        })
        # the decimals get a fraction: c3 / 100 (still DECIMAL(18,4))
        kddl, dddl = big.ddl()
        self.execute(kddl)
        self.duck.execute(dddl)
        self.duck.register("src", data)
        self.duck.execute("INSERT INTO t0 SELECT k, c0, c1, c2, c3 / 100, c4, c5 FROM src")
        self.duck.unregister("src")
        data = self.duck.sql("SELECT * FROM t0 ORDER BY k").to_arrow_table()
        ins = "INSERT INTO t0 VALUES (" + ", ".join(f"${i + 1}" for i in range(7)) + ")"
        cuts = sorted(rng.sample(range(1, n), 2))
        for lo, hi in ((0, cuts[0]), (cuts[0], cuts[1]), (cuts[1], n)):
            chunk = data.slice(lo, hi - lo)
            # rows as parameter sets: the DB-API executemany path (one Arrow batch)
            sets = [list(r) for r in zip(*[c.to_pylist() for c in chunk.columns])]
            if self.session.execute_many(ins, sets) is None:
                raise RuntimeError("the bulk INSERT path refused the large world's rows")
            if hi != n:
                self._flush(big, dms=False)
        kddl, dddl = small.ddl()
        self.execute(kddl)
        rows = gen.gen_rows(rng, small, rng.randint(0, 14))
        self._insert(small, rows)
        time.sleep(0.002)
        self.v1 = self.db.catalog.clock.now()
        time.sleep(0.002)
        self.duck.execute("CREATE TABLE t0_v1 AS SELECT * FROM t0")
        self._duck_table("t1_v1", small, rows)
        self._duck_table("t1", small, rows)
        # after the snapshot: the same statements on both sides
        m = rng.choice([97, 997, 4099])
        for stmt in (f"UPDATE t0 SET c0 = c0 + 1, c2 = 'upd' WHERE k % {m} = 3",
                     f"UPDATE t0 SET c1 = NULL WHERE k % {m} = 5",
                     f"DELETE FROM t0 WHERE k % {m * 2 + 1} = 7",
                     f"INSERT INTO t0 VALUES ({n + 5}, 1, 2.5, 'new', 1.5, DATE '2020-06-15',"
                     " TRUE)"):
            self.execute(stmt)
            self.duck.execute(stmt)
        if rng.random() < 0.5:
            self._flush(big, dms=True)

    def _insert(self, t: gen.Table, rows: list[tuple]) -> None:
        if rows:
            values = ", ".join("(" + ", ".join(gen.sql_value(v) for v in r) + ")" for r in rows)
            self.execute(f"INSERT INTO {t.name} VALUES {values}")

    def _flush(self, t: gen.Table, dms: bool) -> None:
        if self.db is None:
            return
        cat = self.db.catalog
        for _, tid in cat.get_table(t.name).tablets():
            tablet = cat.tablet(tid)
            tablet.flush_dms() if dms else tablet.flush_mrs()

    def _duck_table(self, name: str, t: gen.Table, rows: list[tuple]) -> None:
        cols = {c.name: pa.array([r[i] for r in rows], arrow_type(c.ktype))
                for i, c in enumerate(t.columns)}
        src = pa.table(cols)
        _, dddl = t.ddl()
        self.duck.execute(dddl.replace(f"CREATE TABLE {t.name} ", f"CREATE TABLE {name} "))
        self.duck.register("src", src)
        self.duck.execute(f"INSERT INTO {name} SELECT * FROM src")
        self.duck.unregister("src")

    def close(self) -> None:
        self.duck.close()
        if self.db is not None:
            self.db.close()
        if self._tmp:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- running ---------------------------------------------------------------------------
    def ours(self, sql: str, rules_off: frozenset[str] = frozenset(), params=None):
        """kudusql's rows, or the SqlError, or TimedOut past the time limit."""
        dog = Watchdog(self.timeout, self.session.cancel)
        rows = None
        try:
            with dog:
                self.session.disabled_rules = rules_off      # the session's own setting
                rows = arrow_rows(self.session.execute(sql, params)[-1].table)
        except SqlError as e:
            if dog.fired:           # 57014 (or whatever the cancel ended it with)
                return TimedOut("kudusql", self.timeout)
            return e
        if rows is None:
            return TimedOut("kudusql", self.timeout, hard=True)
        return rows

    def theirs(self, sql: str):
        """DuckDB's rows, or its error, or TimedOut past the time limit; `self.tols` the
        result's decimal tolerances."""
        dog = Watchdog(self.timeout, self.duck.interrupt)
        rows = None
        try:
            with dog:
                t = self.duck.sql(sql).to_arrow_table()
                rows = arrow_rows(t)
        except duckdb.Error as e:
            if dog.fired:
                return TimedOut("DuckDB", self.timeout)
            return e
        if rows is None:
            return TimedOut("DuckDB", self.timeout, hard=True)
        self.tols = decimal_tolerances(t.schema)
        return rows


def _is_bug(e: SqlError) -> bool:
    """An error kudusql must never give for a query the generator writes: internal errors
    and errors without a proper SQLSTATE."""
    return e.sqlstate.startswith("XX") or not e.sqlstate


class Runner:
    """Runs one technique over `worlds` x `per_world` generated queries."""

    def __init__(self, technique: str, seed: int = 0, timeout: float = STATEMENT_TIMEOUT):
        """`timeout`: each statement's time limit in seconds (Watchdog; 0: none)."""
        if technique not in TECHNIQUES:
            raise ValueError(technique)
        self.technique = technique
        self.seed = seed
        self.timeout = timeout
        self.stats = Stats()

    def run(self, queries: int, per_world: int = 200, max_mismatches: int = 50,
            progress=None) -> Stats:
        """`queries` queries, `per_world` per random world; `progress(stats)` is called
        after each world (long runs print their running counts)."""
        w = 0
        while self.stats.queries < queries and len(self.stats.mismatches) < max_mismatches:
            self.run_world(w, min(per_world, queries - self.stats.queries))
            w += 1
            if progress is not None:
                progress(self.stats)
        return self.stats

    def run_world(self, w: int, n: int, world: World | None = None) -> None:
        """Generated queries in world number `w` of this runner's seed until `n` more
        checks are counted (a generated query may count several: see PREDICATES)."""
        wseed = self.seed * 100_003 + w
        own = world is None
        world = world or World(wseed)
        world.timeout = self.timeout
        try:
            if world.big:       # ~1 s a query: a tenth of the checks (still counted)
                n = max(1, n // 10)
            target = self.stats.queries + n
            i = 0
            while self.stats.queries < target:
                self.one(world, wseed * 1_000_003 + i)
                i += 1
        finally:
            if own:
                world.close()

    def replay(self, qseed: int) -> Stats:
        """Run the one query of seed `qseed` again (in the world it was generated for)."""
        world = World(qseed // 1_000_003)
        world.timeout = self.timeout
        try:
            self.one(world, qseed)
        finally:
            world.close()
        return self.stats

    def one(self, world: World, qseed: int) -> None:
        rng = random.Random(qseed)
        snapshot = world.v1 if world.v1 is not None and rng.random() < 0.15 else None
        g = gen.QueryGen(rng, world.tables + (world.views if snapshot is None else []),
                         snapshot=snapshot,
                         joins="equi" if world.big else True,
                         subqueries=not world.big)
        # the whole check (every statement, the matcher) has a limit too: QUERY_LIMIT time
        # limits, then the backstop interrupt (nothing to cancel but the fuzzer's own work)
        counted = self.stats.queries
        dog = Watchdog(self.timeout * QUERY_LIMIT, lambda: None)
        with dog:
            getattr(self, "_" + self.technique)(world, g, qseed)
        if dog.fired == "hard":
            self._timed_out(qseed, f"(the whole {self.technique} check of this seed)",
                            TimedOut("the check", self.timeout * QUERY_LIMIT, hard=True))
            if self.stats.queries == counted:
                self._count("timeout")

    # -- bookkeeping -------------------------------------------------------------------------
    def _count(self, outcome: str) -> None:
        self.stats.queries += 1
        self.stats.outcomes[outcome] += 1

    def _mismatch(self, seed: int, sql: str, detail: str) -> None:
        self.stats.mismatches.append(Mismatch(self.technique, seed, sql, detail))

    def _timed_out(self, seed: int, sql: str, t: TimedOut) -> None:
        self.stats.timeouts.append(Mismatch(self.technique, seed, sql, str(t)))

    def _ours_ok(self, seed: int, sql: str, r) -> bool:
        """Classify a kudusql error; True if `r` holds rows."""
        if isinstance(r, SqlError):
            if r.sqlstate == "0A000":
                self.stats.unsupported[r.message[:70]] += 1
            if _is_bug(r):
                self._mismatch(seed, sql, f"error {r.sqlstate}: {r.message}")
            return False
        return True

    # -- techniques --------------------------------------------------------------------------
    def _diff(self, world: World, g: gen.QueryGen, seed: int) -> None:
        """kudusql against DuckDB; a quarter of the queries pass some literals to kudusql
        as `$n` parameters (DuckDB reads the literals)."""
        if g.rng.random() < 0.25:
            g.params = []
        q = g.query()
        params = g.params or None
        ours, theirs = world.ours(q.sql.k, params=params), world.theirs(q.sql.d)
        if params:
            q.sql = gen.Sql(f"{q.sql.k}  /* params: {params!r} */", q.sql.d)
        if isinstance(ours, TimedOut) or isinstance(theirs, TimedOut):
            # a timeout is its own outcome, reported with the seed; a mismatch as well
            # when kudusql ran out of time on a query the oracle answered
            t = ours if isinstance(ours, TimedOut) else theirs
            self._timed_out(seed, repr(q.sql), t)
            if isinstance(ours, TimedOut) and isinstance(theirs, list):
                self._mismatch(seed, repr(q.sql), f"{t}; DuckDB answered")
            self._count("timeout")
            return
        if isinstance(ours, SqlError) or isinstance(theirs, duckdb.Error):
            if isinstance(ours, SqlError):
                self._ours_ok(seed, q.sql.k, ours)
            if isinstance(ours, SqlError) and isinstance(theirs, duckdb.Error):
                self._count("both errors")
            elif isinstance(ours, SqlError):
                # kudusql refused what DuckDB ran: a data exception (22xxx: overflow) is
                # PostgreSQL's stricter typing; anything else is reported
                if ours.sqlstate.startswith("22") or ours.sqlstate == "21000":
                    self._count(f"kudusql error {ours.sqlstate}, DuckDB ran")
                elif ours.sqlstate != "0A000" and not _is_bug(ours):
                    self._mismatch(seed, q.sql.k, f"kudusql error {ours.sqlstate}: "
                                   f"{ours.message}; DuckDB ran it")
                    self._count("mismatch")
                else:
                    self._count("unsupported")
            else:
                self._count("DuckDB error, kudusql ran")
            return
        if q.limit is not None and len(theirs) > q.limit:
            # DuckDB 2.0.1 drops the LIMIT of some plans (a LEFT JOIN whose right side it
            # proved empty: seed 500216507645143 gave all 112 rows for LIMIT 1): no answer
            # to compare with
            self._count("DuckDB ignored the LIMIT")
            return
        d = diff_rows(ours, theirs, q.ordered, q.total_order, tols=world.tols)
        if d is not None:
            self._mismatch(seed, repr(q.sql), d)
            self._count("mismatch")
        else:
            self._count("match")

    def _compare(self, seed: int, sql_a: str, sql_b: str, a, ordered=None, total=False,
                 rules_b: frozenset[str] = frozenset(), b_adds_sql: bool = False) -> None:
        """One check: `a` (the rows of `sql_a`, None if it failed with `_last_error`)
        against `sql_b` run with `rules_b` off. `b_adds_sql`: `sql_b` holds SQL `sql_a`
        has not (a TLP predicate), which may be refused on its own (42xxx, 0A000)."""
        err_a = self._last_error
        if a is None and isinstance(err_a, TimedOut):
            self._count("timeout")       # reported once (ours_checked); nothing to compare
            return
        b = self.ours_checked(seed, sql_b, rules_b)
        if a is None or b is None:
            failed = err_a if a is None else self._last_error
            if isinstance(failed, TimedOut):
                self._count("timeout")
                return
            own = (b_adds_sql and a is not None and isinstance(failed, SqlError) and
                   failed.sqlstate[:2] in ("42", "0A"))
            if (a is None) != (b is None) and not own and not (
                    isinstance(failed, SqlError) and failed.sqlstate.startswith("22")):
                self._mismatch(seed, f"{sql_a}\n    vs {sql_b}" + (
                    f"\n    rules off: {sorted(rules_b)}" if rules_b else ""),
                    f"only one side failed: {failed}")
                self._count("mismatch")
            else:
                self._count("errors")
            return
        d = diff_rows(b, a, ordered, total)
        if d is not None:
            self._mismatch(seed, f"{sql_a}\n    vs {sql_b}" + (
                f"\n    rules off: {sorted(rules_b)}" if rules_b else ""), d)
            self._count("mismatch")
        else:
            self._count("match")

    _last_error = None

    def ours_checked(self, seed: int, sql: str, rules_off: frozenset[str] = frozenset()):
        """kudusql's rows of `sql`, or None with the error (SqlError, TimedOut: reported
        here with the seed) in `_last_error`."""
        r = self._world.ours(sql, rules_off)
        if isinstance(r, TimedOut):
            self._last_error = r
            self._timed_out(seed, sql + (f"\n    rules off: {sorted(rules_off)}"
                                         if rules_off else ""), r)
            return None
        if isinstance(r, SqlError):
            self._last_error = r
            self._ours_ok(seed, sql, r)
            return None
        return r

    def _tlp(self, world: World, g: gen.QueryGen, seed: int) -> None:
        """One base query, partitioned by `PREDICATES` predicates in turn (each one check:
        the base is run once for all of them)."""
        self._world = world
        rng = g.rng
        items, src, scope, _kinds = gen.base_query(g)
        where = g.pred(scope) if rng.random() < 0.3 else None
        w = f" AND ({where.k})" if where is not None else ""
        base = f"SELECT {items.k} FROM {src.k}" + (f" WHERE {where.k}" if where else "")
        r = rng.random()
        if r < 0.6:               # rows: Q = Q[p] UNION ALL Q[NOT p] UNION ALL Q[p IS NULL]
            whole = base
        elif r < 0.75:            # DISTINCT: the partitions' UNION
            whole = base.replace("SELECT ", "SELECT DISTINCT ", 1)
        else:                     # aggregates: combine the partitions' partial results
            num = [c for c in scope if c.kind in ("int", "dec")]
            col = rng.choice(num).sql if num else None
            fn = rng.choice(["count", "min", "max", "sum"] if col else ["count"])
            arg = col if col and fn != "count" else "*"
            combine = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}[fn]
            whole = f"SELECT {fn}({arg}) FROM {src.k}" + (f" WHERE {where.k}" if where else "")
        expected = self.ours_checked(seed, whole)
        expected_error = self._last_error
        if expected is not None:       # one reference for every predicate (compare.Expected)
            expected = Expected(expected)
        for _ in range(PREDICATES):
            p = g.pred(scope)
            if r < 0.6:
                parts = [f"SELECT {items.k} FROM {src.k} WHERE ({p.k}){w}",
                         f"SELECT {items.k} FROM {src.k} WHERE (NOT ({p.k})){w}",
                         f"SELECT {items.k} FROM {src.k} WHERE (({p.k}) IS NULL){w}"]
                combined = " UNION ALL ".join(parts)
            elif r < 0.75:
                parts = [f"SELECT DISTINCT {items.k} FROM {src.k} WHERE ({p.k}){w}",
                         f"SELECT {items.k} FROM {src.k} WHERE (NOT ({p.k})){w}",
                         f"SELECT {items.k} FROM {src.k} WHERE (({p.k}) IS NULL){w}"]
                combined = " UNION ".join(parts)
            else:
                inner = " UNION ALL ".join(
                    f"SELECT {fn}({arg}) AS v FROM {src.k} WHERE {cond}{w}"
                    for cond in (f"({p.k})", f"(NOT ({p.k}))", f"(({p.k}) IS NULL)"))
                combined = f"SELECT {combine}(v) FROM ({inner}) AS parts"
            self._last_error = expected_error
            self._compare(seed, whole, combined, expected, b_adds_sql=True)

    def _norec(self, world: World, g: gen.QueryGen, seed: int) -> None:
        """The rows WHERE p selects (optimised: pushdown, semi joins) equal the rows whose
        `(p) IS TRUE` evaluated in the select list (per row, no optimisation) is true.
        `PREDICATES` predicates over one FROM and select list: their flags are computed
        by one query, each filter is its own check."""
        self._world = world
        items, src, scope, kinds = gen.base_query(g)
        preds = [g.pred(scope) for _ in range(PREDICATES)]
        n = len(kinds)
        flags = ", ".join(f"({p.k}) IS TRUE" for p in preds)
        self._last_error = None
        flagged_all = self.ours_checked(seed, f"SELECT {items.k}, {flags} FROM {src.k}")
        flags_timed_out = isinstance(self._last_error, TimedOut)
        for i, p in enumerate(preds):
            sql = f"SELECT {items.k} FROM {src.k} WHERE {p.k}"
            self._last_error = None
            filtered = self.ours_checked(seed, sql)
            timed_out = flags_timed_out or isinstance(self._last_error, TimedOut)
            if flagged_all is not None:
                flagged = [r[:n] + (r[n + i],) for r in flagged_all]
            elif flags_timed_out:
                flagged = None
            else:     # one of the flags failed (say 22012 for some row): this one alone
                flagged = self.ours_checked(
                    seed, f"SELECT {items.k}, ({p.k}) IS TRUE FROM {src.k}")
                timed_out = timed_out or isinstance(self._last_error, TimedOut)
            if timed_out:
                self._count("timeout")       # reported with the seed (ours_checked)
                continue
            if filtered is None or flagged is None:
                # a data exception (22xxx) in the select list for a row the WHERE drops is
                # legitimate (PostgreSQL evaluates the list only for rows that pass)
                if (filtered is None) != (flagged is None) and not (
                        isinstance(self._last_error, SqlError) and
                        self._last_error.sqlstate.startswith("22")):
                    self._mismatch(seed, sql, f"only one form failed: {self._last_error}")
                    self._count("mismatch")
                else:
                    self._count("errors")
                continue
            expected = [r[:-1] for r in flagged if r[-1] is True]
            d = diff_rows(filtered, expected)
            if d is not None:
                self._mismatch(seed, sql, d)
                self._count("mismatch")
            else:
                self._count("match")

    def _rules(self, world: World, g: gen.QueryGen, seed: int) -> None:
        """The same query with each optimizer rule switched off in turn (one check each;
        the query with every rule on is run once for all of them)."""
        self._world = world
        q = g.query()
        expected = self.ours_checked(seed, q.sql.k)
        err = self._last_error
        if expected is not None:       # one reference for every rule (compare.Expected)
            expected = Expected(expected)
        for rule in RULE_NAMES:
            self._last_error = err
            self._compare(seed, q.sql.k, q.sql.k, expected, q.ordered, q.total_order,
                          frozenset({rule}))

    def _pushdown(self, world: World, g: gen.QueryGen, seed: int) -> None:
        """Predicates pushed to the engine (ColumnPredicates: pruning, zone maps, key
        ranges), evaluated just above the scan, or not pushed down at all: the same rows
        (two checks against one run with everything on)."""
        self._world = world
        q = g.query()
        expected = self.ours_checked(seed, q.sql.k)
        err = self._last_error
        if expected is not None:       # one reference for both settings (compare.Expected)
            expected = Expected(expected)
        for off in (frozenset({"scan_predicates"}),
                    frozenset({"scan_predicates", "pushdown_predicates"})):
            self._last_error = err
            self._compare(seed, q.sql.k, q.sql.k, expected, q.ordered, q.total_order, off)


def world_task(args: tuple) -> tuple[int, dict[str, Stats]]:
    """(techniques, seed, w, n[, timeout]) -> (w, {technique: Stats}): `n` checks of each
    technique in world `w` of `seed`, the world built once for all of them (a worker of
    --jobs)."""
    techniques, seed, w, n, *rest = args
    timeout = rest[0] if rest else STATEMENT_TIMEOUT
    world = World(seed * 100_003 + w)
    out = {}
    try:
        for tech in techniques:
            r = Runner(tech, seed, timeout)
            r.run_world(w, n, world)
            out[tech] = r.stats
    finally:
        world.close()
    return w, out


def world_results(techniques, seed: int, queries: int, per_world: int, jobs: int = 1,
                  timeout: float = STATEMENT_TIMEOUT, first_world: int = 0):
    """Yields (w, {technique: Stats}) world by world, in world order from `first_world`,
    enough worlds for every technique to reach `queries` checks; with `jobs` > 1 the worlds
    are built and run in that many worker processes (world w of `seed` is the same world
    whichever process builds it, so the seeds stay those of a single process and
    replayable). `first_world` continues a long run that was stopped after world
    `first_world - 1` (its progress lines name each world)."""
    import multiprocessing
    # a world counts at least per_world checks, a large one (BIG_EVERY) a tenth
    worlds = -(-queries * 11 // (per_world * 10)) + 2
    tasks = [(tuple(techniques), seed, w, per_world, timeout)
             for w in range(first_world, first_world + worlds)]
    if jobs <= 1:
        for t in tasks:
            yield world_task(t)
        return
    ctx = multiprocessing.get_context("spawn")     # no fork of a process holding threads
    with ctx.Pool(jobs, maxtasksperchild=20) as pool:
        yield from pool.imap(world_task, tasks)


def run_parallel(techniques, seed: int, queries: int, per_world: int = 200, jobs: int = 1,
                 timeout: float = STATEMENT_TIMEOUT, max_mismatches: int = 50,
                 progress=None) -> dict[str, Stats]:
    """Each technique's Stats over `queries` checks (whole worlds: a little more), worlds
    in `jobs` worker processes (world_results); the queries are Runner(t, seed).run's
    (per_world each world). `progress(results)` after each world."""
    results = {t: Stats() for t in techniques}
    for _w, out in world_results(techniques, seed, queries, per_world, jobs, timeout):
        for t, st in out.items():
            if results[t].queries < queries:
                results[t].merge(st)
        if progress is not None:
            progress(results)
        if all(st.queries >= queries or len(st.mismatches) >= max_mismatches
               for st in results.values()):
            break
    return results
