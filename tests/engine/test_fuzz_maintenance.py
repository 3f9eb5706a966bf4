"""Kudu's fuzz-itest extended with every maintenance op, restarts and crashes.

Random *valid* op sequences (plus a few on purpose invalid rows, whose row errors are
checked) over a tiny keyspace, against one Tablet driven by a LogicalClock, interleaved with
all the tablet's maintenance ops and with restarts at any point:

    writes     INSERT / UPSERT / UPDATE / DELETE (1..n rows), WRITE (one `t.write(ops,
               rows)` batch touching one key several times: insert, update, delete, reinsert)
    storage    FLUSH_MRS, FLUSH_DMS, MINOR_COMPACT (minor_delta_compact of one rowset),
               MAJOR_COMPACT (major_delta_compact of one rowset), COMPACT_TABLET
               (compact_rowsets of a subset of >= 2 rowsets, or all of them), UNDO_GC
               (gc_undo_deltas), MM_OP (the best op of maintenance_ops())
    restarts   RESTART (close + Tablet.open: WAL replay of unflushed MRS/DMS data), CRASH
               (drop the Tablet without close() and open again; the WAL is written with
               buffering=0, so this is a kill -9 between two ops)
    reads      SCAN_AT (any past write timestamp, +-1), DIFF_SCAN, LOOKUP, OPEN_SCAN /
               DRAIN_SCAN (a scan opened at T, one batch read, finished later: it must
               still return the state at T whatever maintenance ran in between)

After a restart the SAME LogicalClock object is passed to Tablet.open (the tablet also
moves it past its last timestamp), so timestamps keep increasing.

Configs (by seed): "default" and "small" (tiny DiskRowSets, 2-row pages, 1 KiB WAL
segments so log GC runs) keep all history (history_max_age_s = 10**9 logical ticks);
"gc" and "gc_small" use a max age of a few ticks so the ancient history mark (AHM) moves
with the writes and compactions / UNDO GC really drop history. There, reads at
T >= t.ancient_history_mark() are checked against the model and reads before it must raise
engine.errors.SnapshotTooOld.

The model: `model` (key -> row) is the latest state; `ts[i]`, `states[i]`, `changed[i]`
are each write op's timestamp, the state right after it and the keys it changed.

Invariants, after EVERY op:
  1. a latest scan equals the model (and has no duplicate key); a point lookup of every
     key in the keyspace equals the model;
  2. after every storage op or restart: a scan at every saved write timestamp (and at ts-1
     for a sample) equals the saved state, or raises SnapshotTooOld if before the AHM;
     a couple of diff scans and historical lookups;
  3. after a write: its row errors / num_applied match the model, timestamps increase,
     and the snapshot of the previous write still reads back;
  4. current_timestamp() covers every acknowledged write, also after a restart or crash.
At the end the whole history is checked again (every timestamp, ts-1, diff scans).

Failing sequences are shrunk (greedy delta debugging) and printed as a pasteable test:

    def test_regression_N():
        run_sequence([
            ("INSERT", [{"k": 1, "v": 5}]),
            ("FLUSH_MRS",),
            ("SCAN_AT", 0, -1),
        ], schema="int", config="default")

Op forms:
    ("INSERT"|"UPSERT"|"UPDATE"|"DELETE", [row, ...])
    ("WRITE", [(op_name, row), ...])
    ("FLUSH_MRS",) ("FLUSH_DMS",) ("UNDO_GC",) ("MM_OP",) ("RESTART",) ("CRASH",)
    ("MINOR_COMPACT", i) ("MAJOR_COMPACT", i)    i-th rowset (by id, modulo the count)
    ("COMPACT_TABLET", "all" | (i, j, ...))      rowsets at these positions (mod count)
    ("SCAN_AT", i, d)                            snapshot = ts of the i-th write + d
    ("DIFF_SCAN", i, di, j, dj)
    ("LOOKUP", key, None | (i, d))
    ("OPEN_SCAN", None | (i, d))  ("DRAIN_SCAN",)

Default run: 32 seeds x 45 ops in well under a minute. KUDUSQL_LONG=1 (marker `long`)
adds seeds 32-47 x 45 ops (in the default run until session 37), 400 seeds x 60 ops and
10 seeds x 400 ops (~10 min). KUDUSQL_FUZZ_NO_SHRINK=1 skips
shrinking. Long "gc_small" seeds 1115 and 5003 found the ghost-version bug pinned at the
bottom (since fixed).
"""

from __future__ import annotations

import bisect
import collections
import itertools
import os
import random
import tempfile
import time
import traceback

import pytest

from engine import errors
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import OpType, Tablet, TabletConfig
from engine.types import DataType

LONG = os.environ.get("KUDUSQL_LONG") == "1"

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

KEY_NAMES = {"int": ["k"], "composite": ["k1", "k2"]}
NONKEY = ["v", "s"]
ALL_NAMES = {n: KEY_NAMES[n] + NONKEY for n in KEY_NAMES}
KEYSPACE = {
    "int": [(INT32_MIN,), (-1,), (0,), (1,), (2,), (INT32_MAX,)],
    "composite": [(k1, k2) for k1 in ("", "a", "a\x00") for k2 in (-7, 3)],
}
VALUE_POOL = {
    "v": [None, 0, 1, -1, 7, 42, INT64_MAX, INT64_MIN],
    "s": [None, "", "a", "b", "zz", "\u00e9\u20ac", "x" * 40],
}


def make_schema(name: str) -> Schema:
    nonkey = [ColumnSchema("v", DataType.INT64, nullable=True),
              ColumnSchema("s", DataType.STRING, nullable=True)]
    if name == "int":
        return Schema([ColumnSchema("k", DataType.INT32)] + nonkey, key=["k"])
    if name == "composite":
        return Schema([ColumnSchema("k1", DataType.STRING), ColumnSchema("k2", DataType.INT32)]
                      + nonkey, key=["k1", "k2"])
    raise ValueError(name)


KEEP_ALL = 10**9  # logical ticks: the AHM never passes the first write
GC_AGE = 6        # logical ticks: history older than ~6 writes is ancient

_COMMON = {"fsync": False, "wal_sync": "never"}
_SMALL = {"drs_target_bytes": 256, "page_rows": 2, "wal_segment_bytes": 1024}
CONFIGS = {
    "default": {"history_max_age_s": KEEP_ALL},
    "small": {"history_max_age_s": KEEP_ALL, **_SMALL},
    "gc": {"history_max_age_s": GC_AGE},
    "gc_small": {"history_max_age_s": GC_AGE, **_SMALL},
}


def make_config(name: str) -> TabletConfig:
    return TabletConfig(**_COMMON, **CONFIGS[name])


def _rowsets(t: Tablet) -> list:
    """The tablet's DiskRowSets ordered by id (minor/major_delta_compact take one)."""
    return sorted(t._components.drss, key=lambda d: d.id)


class FuzzCheckFailed(AssertionError):
    def __init__(self, check: str, message: str):
        super().__init__(f"[{check}] {message}")
        self.check = check


class SequenceFailed(AssertionError):
    def __init__(self, message: str, step: int, signature: tuple):
        super().__init__(message)
        self.step = step
        self.signature = signature


WRITE_OPS = ("INSERT", "UPSERT", "UPDATE", "DELETE", "WRITE")
STORAGE_OPS = ("FLUSH_MRS", "FLUSH_DMS", "MINOR_COMPACT", "MAJOR_COMPACT", "COMPACT_TABLET",
               "UNDO_GC", "MM_OP", "RESTART", "CRASH")
READ_OPS = ("SCAN_AT", "DIFF_SCAN", "LOOKUP", "OPEN_SCAN", "DRAIN_SCAN")


def _sorted(rows) -> list:
    return sorted(rows, key=repr)


def _multiset_diff(expected: list, actual: list) -> str:
    e, a = collections.Counter(expected), collections.Counter(actual)
    return (f"missing: {_sorted((e - a).elements())}\n"
            f"extra:   {_sorted((a - e).elements())}\n"
            f"expected: {_sorted(expected)}\nactual:   {_sorted(actual)}")


class MaintenanceFuzzer:
    def __init__(self, path: str, schema: str, config: str):
        self.path = path
        self.schema_name = schema
        self.schema = make_schema(schema)
        self.config = make_config(config)
        self.key_names = KEY_NAMES[schema]
        self.names = ALL_NAMES[schema]
        self.keyspace = KEYSPACE[schema]
        self.clock = LogicalClock()
        self.tablet = Tablet.create(path, self.schema, config=self.config, clock=self.clock)
        self.model: dict[tuple, dict] = {}
        self.ts: list[int] = []
        self.states: list[dict] = []
        self.changed: list[frozenset] = []
        self.open_scans: list[tuple] = []
        self.acked = 0  # highest acknowledged write timestamp
        self.stats = collections.Counter()

    # -- model -------------------------------------------------------------------------
    def key_of(self, row: dict) -> tuple:
        return tuple(row[c] for c in self.key_names)

    def state_at(self, ts: int) -> dict:
        i = bisect.bisect_right(self.ts, ts) - 1
        return self.states[i] if i >= 0 else {}

    def resolve(self, i: int, d: int) -> int:
        if not self.ts:
            return self.tablet.current_timestamp()
        i = min(max(i, 0), len(self.ts) - 1)
        if d > 0 and i == len(self.ts) - 1:
            d = 0  # never read the future
        return max(self.ts[i] + d, 0)

    def apply_model(self, model: dict, op: str, row: dict) -> str | None:
        key = self.key_of(row)
        cur = model.get(key)
        present = {c: row[c] for c in NONKEY if c in row}
        if op == "INSERT" or (op == "UPSERT" and cur is None):
            if cur is not None:
                return "ALREADY_PRESENT"
            new = dict.fromkeys(self.names)
            new.update(zip(self.key_names, key))
            new.update(present)
            model[key] = new
        elif op in ("UPSERT", "UPDATE"):
            if cur is None:
                return "NOT_FOUND"
            model[key] = {**cur, **present}
        elif op == "DELETE":
            if cur is None:
                return "NOT_FOUND"
            del model[key]
        else:
            raise ValueError(op)
        return None

    def ahm(self) -> int:
        return self.tablet.ancient_history_mark()

    # -- ops ---------------------------------------------------------------------------
    def run_op(self, op: tuple) -> None:
        kind = op[0]
        t = self.tablet
        if kind in ("INSERT", "UPSERT", "UPDATE", "DELETE"):
            rows = op[1]
            cols = self.key_names if kind == "DELETE" else \
                [c for c in self.names if any(c in r for r in rows)]
            data = {c: [r.get(c) for r in rows] for c in cols}
            r = getattr(t, kind.lower())(data)
            self._after_write(r, [(kind, row) for row in rows])
        elif kind == "WRITE":
            pairs = op[1]
            cols = [c for c in self.names if any(c in r for _, r in pairs)]
            data = {c: [r.get(c) for _, r in pairs] for c in cols}
            # A column absent from a row is sent as NULL: the model must see it too.
            full = [(name, {c: r.get(c) for c in cols}) for name, r in pairs]
            r = t.write([OpType[name] for name, _ in pairs], data)
            self._after_write(r, full)
        elif kind == "FLUSH_MRS":
            t.flush_mrs()
        elif kind == "FLUSH_DMS":
            t.flush_dms()
        elif kind in ("MINOR_COMPACT", "MAJOR_COMPACT"):
            rs = _rowsets(t)
            if rs:
                drs = rs[op[1] % len(rs)]
                if kind == "MINOR_COMPACT":
                    self.stats["minor"] += bool(t.minor_delta_compact(drs))
                else:
                    self.stats["major"] += bool(t.major_delta_compact(drs))
        elif kind == "COMPACT_TABLET":
            ids = [d.id for d in _rowsets(t)]
            if op[1] == "all":
                pick = ids
            else:
                pick = sorted({ids[i % len(ids)] for i in op[1]}) if ids else []
            if len(pick) >= 2:
                before = sum(i["rows"] for i in t.rowsets_info() if i["id"] in pick)
                n = t.compact_rowsets(pick)
                after = sum(i["rows"] for i in t.rowsets_info())
                self.stats["compact"] += 1
                if n != before:
                    raise FuzzCheckFailed("compact_rowsets",
                                          f"returned {n}, inputs held {before} rows")
                self.stats["rows_gced"] += max(0, before - after)
        elif kind == "UNDO_GC":
            self.stats["undo_gced"] += t.gc_undo_deltas()
        elif kind == "MM_OP":
            ops = [m for m in t.maintenance_ops() if m.score > 0]
            if ops:
                best = max(ops, key=lambda m: m.score)
                self.stats["mm_" + best.name] += 1
                best.run()
        elif kind in ("RESTART", "CRASH"):
            self.restart(crash=(kind == "CRASH"))
        elif kind == "SCAN_AT":
            self.check_scan_at(self.resolve(op[1], op[2]))
        elif kind == "DIFF_SCAN":
            s, e = self.resolve(op[1], op[2]), self.resolve(op[3], op[4])
            self.check_diff(min(s, e), max(s, e))
        elif kind == "LOOKUP":
            self.check_lookup(tuple(op[1]), None if op[2] is None else self.resolve(*op[2]))
        elif kind == "OPEN_SCAN":
            snap = None if op[1] is None else self.resolve(*op[1])
            if snap is not None and snap < self.ahm():
                self._expect_too_old(lambda: t.scan(snapshot=snap), f"scan(snapshot={snap})")
            else:
                it = iter(t.scan(snapshot=snap))
                first = [b for b in [next(it, None)] if b is not None]
                state = self.model if snap is None else self.state_at(snap)
                self.open_scans.append((it, first, self._rows_of(state), snap))
        elif kind == "DRAIN_SCAN":
            self.drain_scans(1)
        else:
            raise ValueError(f"unknown op {op!r}")
        self.check_after(op)

    def _after_write(self, r, pairs: list) -> None:
        expected_errors, changed = [], set()
        for idx, (name, row) in enumerate(pairs):
            code = self.apply_model(self.model, name, row)
            if code is None:
                changed.add(self.key_of(row))
            else:
                expected_errors.append((idx, code, self.key_of(row)))
        actual = [(e.index, e.code, tuple(e.key)) for e in r.row_errors]
        if actual != expected_errors:
            raise FuzzCheckFailed("row_errors", f"expected {expected_errors}\nactual   {actual}")
        if r.num_applied != len(pairs) - len(expected_errors):
            raise FuzzCheckFailed("num_applied", f"expected {len(pairs) - len(expected_errors)}"
                                                 f", actual {r.num_applied}")
        if self.ts and r.timestamp <= self.ts[-1]:
            raise FuzzCheckFailed("timestamp", f"write timestamp {r.timestamp} not after "
                                               f"previous write {self.ts[-1]}")
        self.ts.append(r.timestamp)
        self.states.append(dict(self.model))
        self.changed.append(frozenset(changed))
        self.acked = r.timestamp

    def restart(self, crash: bool) -> None:
        self.drain_scans()  # scans do not survive a restart
        ahm_before = self.ahm()
        if crash:
            self.tablet = None  # dropped without close(): nothing more is persisted
        else:
            self.tablet.close()
        self.tablet = Tablet.open(self.path, config=self.config, clock=self.clock)
        if self.ahm() < ahm_before:
            raise FuzzCheckFailed("ahm_after_restart", f"ancient history mark went back "
                                  f"from {ahm_before} to {self.ahm()} across a restart")

    def drain_scans(self, n: int | None = None) -> None:
        while self.open_scans and (n is None or n > 0):
            it, first, expected, snap = self.open_scans.pop(0)
            actual = self._rows_from(first + list(it))
            if collections.Counter(actual) != collections.Counter(expected):
                raise FuzzCheckFailed("open_scan", f"scan(snapshot={snap}) opened earlier, "
                                      f"drained now; ts={self.ts}\n"
                                      + _multiset_diff(expected, actual))
            if n is not None:
                n -= 1

    def close(self) -> None:
        try:
            if self.tablet is not None:
                self.tablet.close()
        except Exception:  # noqa: BLE001, S110 - cleanup after a failure
            pass

    # -- checks ------------------------------------------------------------------------
    def _rows_of(self, state: dict) -> list[tuple]:
        return [tuple(row[c] for c in self.names) for row in state.values()]

    def _rows_from(self, parts) -> list[tuple]:
        rows = []
        for p in parts:
            d = p.to_pydict()
            if list(d) != self.names:
                raise FuzzCheckFailed("columns", f"{list(d)} != {self.names}")
            rows.extend(zip(*(d[c] for c in self.names)))
        return rows

    def _expect_too_old(self, fn, what: str) -> None:
        try:
            fn()
        except errors.SnapshotTooOld as e:
            if "ancient history mark" not in str(e):
                raise FuzzCheckFailed("snapshot_too_old", f"{what}: unclear message {e}")
            self.stats["too_old"] += 1
            return
        raise FuzzCheckFailed("snapshot_too_old", f"{what} before the ancient history mark "
                                                  f"{self.ahm()} did not raise SnapshotTooOld")

    def check_scan_at(self, snap: int | None, what: str = "scan_at") -> None:
        t = self.tablet
        if snap is not None and snap < self.ahm():
            self._expect_too_old(lambda: t.scan_table(snapshot=snap), f"scan(snapshot={snap})")
            return
        actual = self._rows_from(t.scan(snapshot=snap))
        expected = self._rows_of(self.model if snap is None else self.state_at(snap))
        keys = [r[:len(self.key_names)] for r in actual]
        if len(set(keys)) != len(keys):
            raise FuzzCheckFailed("duplicate_keys", f"scan(snapshot={snap}) returned a key "
                                  f"twice: {_sorted(actual)}")
        if collections.Counter(actual) != collections.Counter(expected):
            raise FuzzCheckFailed(what, f"scan(snapshot={snap}) ts={self.ts} "
                                  f"ahm={self.ahm()}\n" + _multiset_diff(expected, actual))

    def check_lookup(self, key: tuple, snap: int | None) -> None:
        t = self.tablet
        if snap is not None and snap < self.ahm():
            self._expect_too_old(lambda: t.lookup(key, snapshot=snap),
                                 f"lookup({key!r}, snapshot={snap})")
            return
        state = self.model if snap is None else self.state_at(snap)
        expected = state.get(key)
        actual = t.lookup(key, snapshot=snap)
        if (dict(actual) if actual is not None else None) != expected:
            raise FuzzCheckFailed("lookup", f"lookup({key!r}, snapshot={snap}) ts={self.ts}\n"
                                            f"expected {expected}\nactual   {actual}")

    def check_diff(self, s: int, e: int) -> None:
        t = self.tablet
        if s < self.ahm():
            self._expect_too_old(lambda: t.diff_scan(s, e), f"diff_scan({s}, {e})")
            return
        table = t.diff_scan(s, e)
        what = f"diff_scan({s}, {e}) ts={self.ts}"
        if table.schema.names != self.names + ["is_deleted"]:
            raise FuzzCheckFailed("diff_scan", f"{what}: columns {table.schema.names}")
        keys: set = set()
        for ch in self.changed[bisect.bisect_right(self.ts, s):bisect.bisect_right(self.ts, e)]:
            keys |= ch
        at_s, at_e = self.state_at(s), self.state_at(e)
        live_exp = {k: tuple(at_e[k][c] for c in self.names) for k in keys if k in at_e}
        del_exp = {k for k in keys if k not in at_e and k in at_s}
        live_act, del_act = {}, set()
        for row in table.to_pylist():
            k = tuple(row[c] for c in self.key_names)
            if k in live_act or k in del_act:
                raise FuzzCheckFailed("diff_scan", f"{what}: key {k} returned twice")
            if row["is_deleted"]:
                del_act.add(k)
            else:
                live_act[k] = tuple(row[c] for c in self.names)
        if live_act != live_exp or del_act != del_exp:
            raise FuzzCheckFailed("diff_scan", f"{what}\nlive expected {_sorted(live_exp.items())}"
                                  f"\nlive actual   {_sorted(live_act.items())}"
                                  f"\ndeleted expected {_sorted(del_exp)}"
                                  f"\ndeleted actual   {_sorted(del_act)}")

    def check_after(self, op: tuple) -> None:
        t = self.tablet
        if t.current_timestamp() < self.acked:
            raise FuzzCheckFailed("current_timestamp", f"current_timestamp() "
                                  f"{t.current_timestamp()} < acked write {self.acked}")
        if op[0] in READ_OPS:
            return
        self.check_scan_at(None, "latest_scan")
        for key in self.keyspace:
            self.check_lookup(key, None)
        if op[0] in WRITE_OPS:
            if len(self.ts) >= 2:
                self.check_scan_at(self.ts[-2], "previous_write")
            return
        self.check_history(light=True)

    def check_history(self, light: bool = False) -> None:
        rng = random.Random(len(self.ts) * 7919 + len(self.open_scans))
        for i, ts in enumerate(self.ts):
            self.check_scan_at(ts, "history_scan")
            if not light or rng.random() < 0.3:
                self.check_scan_at(ts - 1, "history_scan")
            if not light:
                for key in self.changed[i]:
                    self.check_lookup(key, ts - 1)
                    self.check_lookup(key, ts)
        if not self.ts:
            return
        points = [self.ts[0] - 1] + self.ts
        if light:
            for _ in range(2):
                a, b = sorted(rng.choice(points) for _ in range(2))
                self.check_diff(a, b)
            key = rng.choice(self.keyspace)
            self.check_lookup(key, rng.choice(points))
            return
        for a, b in itertools.pairwise(points):
            self.check_diff(a, b)
        lo = max(points[0], self.ahm())
        self.check_diff(lo, points[-1])
        for _ in range(4):
            a, b = sorted(rng.choice(points) for _ in range(2))
            self.check_diff(a, b)


def run_sequence(ops: list[tuple], schema: str = "int", config: str = "default",
                 final_check: bool = True, stats: collections.Counter | None = None) -> None:
    """Run `ops` on a fresh tablet checking every invariant; raises SequenceFailed."""
    with tempfile.TemporaryDirectory(prefix="fuzz-maint-") as tmp:
        fz = None
        step = -1
        try:
            fz = MaintenanceFuzzer(os.path.join(tmp, "tablet"), schema, config)
            for step, op in enumerate(ops):
                fz.run_op(op)
            step = len(ops)
            if final_check:
                fz.drain_scans()
                fz.check_history()
                fz.restart(crash=False)
                fz.check_history()
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            if isinstance(e, FuzzCheckFailed):
                sig = ("check", e.check)
            else:
                sig = ("exception", type(e).__name__,
                       ops[step][0] if 0 <= step < len(ops) else "FINAL")
            where = f"op #{step} {ops[step]!r}" if 0 <= step < len(ops) else "the final check"
            msg = (f"fuzz failure at {where}\n{type(e).__name__}: {e}\n"
                   + ("" if isinstance(e, FuzzCheckFailed) else traceback.format_exc()))
            raise SequenceFailed(msg, step, sig) from e
        finally:
            if fz is not None:
                if stats is not None:
                    stats.update(fz.stats)
                fz.close()


def format_regression(ops: list[tuple], schema: str, config: str, name: str = "N") -> str:
    lines = [f"def test_regression_{name}():", "    run_sequence(["]
    lines += [f"        {op!r}," for op in ops]
    lines.append(f"    ], schema={schema!r}, config={config!r})")
    return "\n".join(lines)


def _signature(ops, schema, config):
    try:
        run_sequence(ops, schema=schema, config=config)
    except SequenceFailed as f:
        return f.signature, f.step
    return None, None


def shrink(ops: list[tuple], schema: str, config: str, signature: tuple,
           budget_s: float = 60.0) -> list[tuple]:
    """Greedy delta debugging: drop chunks of ops, then single rows of batches."""
    deadline = time.monotonic() + budget_s

    def fails(cand):
        sig, step = _signature(cand, schema, config)
        return sig == signature, step

    cur = list(ops)
    ok, step = fails(cur)
    if not ok:
        return cur
    cur = cur[:step + 1]
    chunk = max(1, len(cur) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        i, progressed = 0, False
        while i < len(cur) and time.monotonic() < deadline:
            cand = cur[:i] + cur[i + chunk:]
            ok, step = fails(cand) if cand else (False, None)
            if ok:
                cur, progressed = cand[:step + 1], True
            else:
                i += chunk
        if not progressed:
            chunk //= 2
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for i, op in enumerate(cur):
            if op[0] in WRITE_OPS and len(op[1]) > 1:
                for j in range(len(op[1])):
                    cand = cur[:i] + [(op[0], op[1][:j] + op[1][j + 1:])] + cur[i + 1:]
                    ok, step = fails(cand)
                    if ok:
                        cur, changed = cand[:step + 1], True
                        break
            if changed:
                break
    return cur


def run_and_report(ops: list[tuple], schema: str, config: str, label: str,
                   stats: collections.Counter | None = None) -> None:
    try:
        run_sequence(ops, schema=schema, config=config, stats=stats)
        return
    except SequenceFailed as exc:
        failure = exc
    report = [f"{label}: {failure}", "Failing sequence (up to the failing op):",
              format_regression(ops[:failure.step + 1], schema, config, "full")]
    if os.environ.get("KUDUSQL_FUZZ_NO_SHRINK") != "1":
        small = shrink(ops, schema, config, failure.signature)
        try:
            run_sequence(small, schema=schema, config=config)
        except SequenceFailed as g:
            report.append(f"Shrunk failure: {g}")
        report.append("Shrunk regression test (paste into tests/engine/test_fuzz_maintenance.py):")
        report.append(format_regression(small, schema, config))
    pytest.fail("\n".join(report), pytrace=False)


# --------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------

OP_WEIGHTS = [
    ("INSERT", 10), ("UPSERT", 6), ("UPDATE", 12), ("DELETE", 6), ("WRITE", 8),
    ("FLUSH_MRS", 6), ("FLUSH_DMS", 6), ("MINOR_COMPACT", 3), ("MAJOR_COMPACT", 4),
    ("COMPACT_TABLET", 4), ("UNDO_GC", 3), ("MM_OP", 1), ("RESTART", 2), ("CRASH", 2),
    ("SCAN_AT", 4), ("DIFF_SCAN", 3), ("LOOKUP", 3), ("OPEN_SCAN", 2), ("DRAIN_SCAN", 2),
]
P_INVALID = 0.05  # share of rows that are on purpose invalid (checked row errors)


class OpGenerator:
    def __init__(self, rng: random.Random, schema: str):
        self.rng = rng
        self.key_names = KEY_NAMES[schema]
        self.keyspace = KEYSPACE[schema]
        self.live: set = set()
        self.n_writes = 0

    def _row(self, key: tuple, cols: list[str]) -> dict:
        row = dict(zip(self.key_names, key))
        for c in cols:
            row[c] = self.rng.choice(VALUE_POOL[c])
        return row

    def _cols(self) -> list[str]:
        cols = [c for c in NONKEY if self.rng.random() < 0.6]
        return cols or [self.rng.choice(NONKEY)]

    def _sim(self, op: str, key: tuple) -> None:
        live = key in self.live
        if op == "INSERT" and not live or op == "UPSERT":
            self.live.add(key)
        elif op == "DELETE":
            self.live.discard(key)

    def _key(self, want_live: bool) -> tuple | None:
        pool = [k for k in self.keyspace if (k in self.live) == want_live]
        if self.rng.random() < P_INVALID or not pool:
            return self.rng.choice(self.keyspace)
        return self.rng.choice(pool)

    def _valid_for(self, key: tuple) -> str:
        if key in self.live:
            return self.rng.choice(["UPDATE", "UPDATE", "DELETE", "UPSERT"])
        return self.rng.choice(["INSERT", "UPSERT"])

    def _snap(self) -> tuple[int, int]:
        if self.rng.random() < 0.1:
            return (0, -1)
        # bias towards recent writes (readable in "gc" configs), but reach back too
        n = self.n_writes
        i = n - 1 - min(int(self.rng.expovariate(0.25)), n - 1)
        return (i, self.rng.choice([0, 0, -1, 1]))

    def next_op(self) -> tuple:
        rng = self.rng
        kinds, weights = zip(*OP_WEIGHTS)
        kind = rng.choices(kinds, weights)[0]
        if kind in READ_OPS and kind != "DRAIN_SCAN" and not self.n_writes:
            kind = "INSERT"
        if kind in ("INSERT", "UPSERT", "UPDATE", "DELETE"):
            n = rng.choice([1, 1, 1, 2, 3, len(self.keyspace)])
            cols = [] if kind == "DELETE" else self._cols()
            if kind == "INSERT" and rng.random() < 0.2:
                cols = []  # key-only insert: other columns NULL
            rows, seen = [], set()
            for _ in range(n):
                key = (rng.choice(self.keyspace) if kind == "UPSERT"
                       else self._key(want_live=kind != "INSERT"))
                if key in seen and rng.random() < 0.8:
                    continue  # mostly distinct keys; WRITE does the repeated-key batches
                seen.add(key)
                self._sim(kind, key)
                rows.append(self._row(key, cols))
            self.n_writes += 1
            return (kind, rows)
        if kind == "WRITE":
            cols = self._cols()
            focus = rng.choice(self.keyspace)
            pairs = []
            if rng.random() < 0.4:
                names = (["INSERT", "UPDATE", "DELETE", "INSERT", "UPDATE"]
                         if focus not in self.live else
                         ["DELETE", "INSERT", "UPDATE", "DELETE", "UPSERT"])
                names = names[:rng.randint(2, len(names))]
                for name in names:
                    self._sim(name, focus)
                    pairs.append((name, self._row(focus, cols)))
            else:
                for _ in range(rng.randint(2, 7)):
                    key = focus if rng.random() < 0.6 else rng.choice(self.keyspace)
                    name = self._valid_for(key) if rng.random() > P_INVALID else \
                        rng.choice(["INSERT", "UPDATE", "DELETE"])
                    self._sim(name, key)
                    pairs.append((name, self._row(key, cols)))
            self.n_writes += 1
            return ("WRITE", pairs)
        if kind in ("MINOR_COMPACT", "MAJOR_COMPACT"):
            return (kind, rng.randrange(8))
        if kind == "COMPACT_TABLET":
            if rng.random() < 0.4:
                return (kind, "all")
            return (kind, tuple(rng.sample(range(8), rng.randint(2, 4))))
        if kind == "SCAN_AT":
            return (kind, *self._snap())
        if kind == "DIFF_SCAN":
            a, b = sorted([self._snap(), self._snap()])
            return (kind, *a, *b)
        if kind == "LOOKUP":
            return (kind, rng.choice(self.keyspace),
                    self._snap() if rng.random() < 0.6 else None)
        if kind == "OPEN_SCAN":
            return (kind, self._snap() if rng.random() < 0.6 else None)
        return (kind,)

    def next_ops(self) -> list[tuple]:
        """One op, or a short burst that makes the maintenance op do real work: a delta
        compaction right after DMS flushes (recent REDO records near the AHM), a merging
        compaction right after an MRS flush (one more rowset)."""
        op = self.next_op()
        rng = self.rng
        if op[0] == "MAJOR_COMPACT" and rng.random() < 0.5:
            return [("FLUSH_DMS",), op]
        if op[0] == "MINOR_COMPACT" and self.live and rng.random() < 0.6:
            key = rng.choice(sorted(self.live, key=repr))
            self.n_writes += 1
            return [("FLUSH_DMS",), ("UPDATE", [self._row(key, self._cols())]),
                    ("FLUSH_DMS",), op]
        if op[0] == "COMPACT_TABLET" and rng.random() < 0.5:
            return [("FLUSH_MRS",), op]
        return [op]


def generate_ops(seed: int, n_ops: int, schema: str) -> list[tuple]:
    gen = OpGenerator(random.Random(seed), schema)
    ops: list[tuple] = []
    while len(ops) < n_ops:
        ops.extend(gen.next_ops())
    return ops[:n_ops]


def variant(seed: int) -> tuple[str, str]:
    schema = "composite" if seed % 3 == 2 else "int"
    config = ("default", "small", "gc", "gc_small")[seed % 4]
    return schema, config


# --------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------

N_SEEDS = 32
N_SEEDS_BEFORE = 48  # seeds N_SEEDS..47 left the default run for time; the long run keeps them
N_OPS = 45


@pytest.mark.parametrize("seed", range(N_SEEDS))
def test_random_maintenance_fuzz(seed):
    schema, config = variant(seed)
    ops = generate_ops(seed, N_OPS, schema)
    run_and_report(ops, schema, config, f"seed={seed} schema={schema} config={config}")


def test_gc_configs_really_collect_history():
    """The "gc" seeds are only meaningful if history is really refused and dropped."""
    stats = collections.Counter()
    for seed in range(2, 60, 4):  # "gc" and "gc_small" variants, both schemas
        for s in (seed, seed + 1):
            schema, config = variant(s)
            assert config.startswith("gc")
            run_and_report(generate_ops(s, N_OPS, schema), schema, config, f"seed={s}",
                           stats=stats)
        if stats["too_old"] and stats["undo_gced"] and stats["rows_gced"]:
            break
    assert stats["too_old"] > 0, stats
    assert stats["undo_gced"] > 0, stats
    assert stats["rows_gced"] > 0, stats


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the long fuzz run")
@pytest.mark.parametrize("seed", [*range(N_SEEDS, N_SEEDS_BEFORE), *range(1_000, 1_400)])
def test_random_maintenance_fuzz_long(seed):
    schema, config = variant(seed)
    n_ops = N_OPS if seed < N_SEEDS_BEFORE else 60
    run_and_report(generate_ops(seed, n_ops, schema), schema, config,
                   f"seed={seed} schema={schema} config={config}")


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the long fuzz run")
@pytest.mark.parametrize("seed", range(5_000, 5_010))
def test_random_maintenance_fuzz_long_sequences(seed):
    schema, config = variant(seed)
    run_and_report(generate_ops(seed, 400, schema), schema, config,
                   f"seed={seed} schema={schema} config={config}")


# -- hand-written sequences ------------------------------------------------------------


def test_restart_with_unflushed_mrs_and_dms():
    run_sequence([
        ("INSERT", [{"k": 1, "v": 1}, {"k": 2, "v": 2}]),
        ("FLUSH_MRS",),
        ("UPDATE", [{"k": 1, "v": 10}]),             # DMS only
        ("INSERT", [{"k": 0, "s": "mrs"}]),          # MRS only
        ("RESTART",),
        ("DELETE", [{"k": 2}]),
        ("CRASH",),
        ("WRITE", [("INSERT", {"k": 2, "v": 3}), ("UPDATE", {"k": 2, "v": 4}),
                   ("DELETE", {"k": 2, "v": None}), ("INSERT", {"k": 2, "v": 5})]),
        ("CRASH",),
        ("FLUSH_DMS",),
        ("FLUSH_MRS",),
        ("CRASH",),
        ("SCAN_AT", 0, 0), ("SCAN_AT", 2, -1), ("DIFF_SCAN", 0, -1, 4, 0),
    ], schema="int", config="default")


def test_every_maintenance_op_between_writes():
    run_sequence([
        ("INSERT", [{"k": k, "v": k} for k in (-1, 0, 1, 2)]),
        ("FLUSH_MRS",),
        ("UPDATE", [{"k": 0, "v": 100}]),
        ("FLUSH_DMS",),
        ("UPDATE", [{"k": 1, "s": "x"}]),
        ("FLUSH_DMS",),
        ("MINOR_COMPACT", 0),
        ("DELETE", [{"k": 2}]),
        ("INSERT", [{"k": 2, "v": 22}]),
        ("FLUSH_MRS",),
        ("FLUSH_DMS",),
        ("MAJOR_COMPACT", 0),
        ("COMPACT_TABLET", "all"),
        ("UNDO_GC",),
        ("OPEN_SCAN", (1, 0)),
        ("UPDATE", [{"k": 0, "v": 5}]),
        ("FLUSH_DMS",),
        ("MAJOR_COMPACT", 0),
        ("DRAIN_SCAN",),
        ("RESTART",),
    ], schema="int", config="small")


def test_gc_history_refused_and_dropped():
    # max age 6 ticks: after a dozen writes the first ones are ancient
    ops = [("INSERT", [{"k": 1, "v": 0}, {"k": 2, "v": 0}]), ("FLUSH_MRS",)]
    ops += [("UPDATE", [{"k": 1, "v": i}]) for i in range(1, 6)]
    ops += [("DELETE", [{"k": 2}]), ("FLUSH_DMS",), ("MAJOR_COMPACT", 0)]
    ops += [("UPDATE", [{"k": 1, "v": i}]) for i in range(6, 14)]
    ops += [("INSERT", [{"k": 0}]), ("FLUSH_MRS",), ("FLUSH_DMS",), ("MAJOR_COMPACT", 0),
            ("UNDO_GC",), ("COMPACT_TABLET", "all"), ("SCAN_AT", 0, 0), ("SCAN_AT", 15, 0),
            ("CRASH",), ("SCAN_AT", 10, 0), ("DIFF_SCAN", 0, 0, 15, 0)]
    run_sequence(ops, schema="int", config="gc")


def test_composite_key_batches_and_compactions():
    run_sequence([
        ("WRITE", [("INSERT", {"k1": "a", "k2": 3, "v": 1}),
                   ("INSERT", {"k1": "a\x00", "k2": -7, "v": 2}),
                   ("UPDATE", {"k1": "a", "k2": 3, "v": 3}),
                   ("DELETE", {"k1": "a", "k2": 3, "v": None}),
                   ("UPSERT", {"k1": "a", "k2": 3, "v": 4})]),
        ("FLUSH_MRS",),
        ("INSERT", [{"k1": "", "k2": 3, "s": "e"}]),
        ("FLUSH_MRS",),
        ("COMPACT_TABLET", (0, 1)),
        ("UPDATE", [{"k1": "", "k2": 3, "s": "f"}]),
        ("CRASH",),
        ("SCAN_AT", 0, 0),
        ("LOOKUP", ("a", 3), (0, 0)),
    ], schema="composite", config="small")


# -- pinned regressions found by the fuzzer (shrunk output of failing seeds) -----------

# Engine bug (fixed): a merging compaction mis-ordered the versions of a deleted and
# reinserted key once a version's insertion UNDO had been garbage collected (taken as
# inserted at ts 0): the live row was lost, or a read at the AHM showed the old version.
# Minimal engine-level repro: test_history_gc.py::
# test_bug_reinserted_row_lost_after_two_merging_compactions.


def test_regression_ghost_row_lost():
    # long seed 1115 (shrunk): ('', 3) is upserted+deleted (ts 1-2), inserted again (ts 3);
    # after UNDO GC and a merging compaction of everything the live row is gone.
    run_sequence([
        ('UPSERT', [{'k1': '', 'k2': 3, 'v': 9223372036854775807, 's': 'x' * 40}]),
        ('DELETE', [{'k1': '', 'k2': 3}]),
        ('FLUSH_MRS',),
        ('INSERT', [{'k1': '', 'k2': 3, 's': 'a'}]),
        ('FLUSH_MRS',),
        ('INSERT', [{'k1': 'a', 'k2': -7, 's': ''}]),
        ('UPDATE', [{'k1': 'a\x00', 'k2': 3, 'v': 9223372036854775807}]),
        ('INSERT', [{'k1': '', 'k2': 3, 's': 'a'}]),
        ('FLUSH_MRS',),
        ('INSERT', [{'k1': 'a\x00', 'k2': 3, 'v': 42, 's': 'zz'}]),
        ('DELETE', [{'k1': 'a\x00', 'k2': 3}]),
        ('WRITE', [('UPDATE', {'k1': 'a', 'k2': -7, 'v': -9223372036854775808, 's': 'x' * 40})]),
        ('UNDO_GC',),
        ('COMPACT_TABLET', 'all'),
    ], schema='composite', config='gc_small')


def test_regression_ghost_values_at_ahm():
    # long seed 5003 (shrunk): ('a\x00', -7) is deleted and reinserted in ONE batch at ts 2;
    # after two merging compactions a scan at ts 2 (= the AHM) returns the deleted
    # version's values (MIN, 'zz') instead of (42, None).
    run_sequence([
        ('UPSERT', [{'k1': 'a\x00', 'k2': -7, 'v': -9223372036854775808, 's': 'zz'}]),
        ('FLUSH_MRS',),
        ('WRITE', [('DELETE', {'k1': 'a\x00', 'k2': -7, 'v': -9223372036854775808}),
                   ('INSERT', {'k1': 'a\x00', 'k2': -7, 'v': 42})]),
        ('FLUSH_MRS',),
        ('WRITE', [('UPSERT', {'k1': 'a\x00', 'k2': 3, 'v': 42, 's': 'zz'})]),
        ('FLUSH_MRS',),
        ('DELETE', [{'k1': '', 'k2': -7}]),
        ('INSERT', [{'k1': 'a', 'k2': 3, 's': None}]),
        ('WRITE', [('UPDATE', {'k1': 'a\x00', 'k2': 3, 'v': 0, 's': '\u00e9\u20ac'})]),
        ('UPDATE', [{'k1': 'a\x00', 'k2': -7, 'v': -1, 's': 'zz'}]),
        ('FLUSH_DMS',),
        ('UPDATE', [{'k1': 'a', 'k2': -7, 'v': 9223372036854775807}]),
        ('FLUSH_MRS',),
        ('COMPACT_TABLET', (5, 7, 3, 6)),
        ('COMPACT_TABLET', (3, 0, 1, 5)),
    ], schema='composite', config='gc_small')
