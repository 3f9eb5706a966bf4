"""Multi-threaded stress on one Tablet, in the style of Kudu's `tablet/mt-tablet-test.cc`.

`test_all_at_once` (Kudu's DoTestAllAtOnce) runs, at the same time, on real threads:
  - transfer writers: each owns a group of "account" rows and moves balance between two or
    three of them in ONE write op (an atomic multi-row UPDATE/UPSERT batch), so every
    snapshot must show each group's SUM(balance) equal to its constant;
  - inserters: each appends new keys from its own key range, in batches, in order, so at any
    snapshot an inserter's rows are exactly a prefix of its range, never shrinking, and a
    scan at the timestamp of an acked batch sees exactly the rows acked up to that batch;
  - counter updaters: each bumps a counter column of its own rows (values never decrease);
  - a delete+reinsert thread: key K_ATOMIC is deleted and reinserted in ONE op (so it is
    live in every snapshot) and key K_SPLIT in two ops (live or not), each time with a
    higher generation number; plus a "stubborn" updater on both keys;
  - readers: latest scans, scans at `current_timestamp()` and at timestamps of acked
    inserts, with and without a predicate, and slow scans that hold the iterator open
    across flushes, checking the invariants above on every scan
    (no duplicate keys, group sums, prefix property, monotonic counters/generations);
  - a flusher: flush_mrs / flush_dms in a loop, and (when the engine has them) a compactor:
    merging compaction of all or two rowsets and major delta compaction in a loop.
At the end every row must hold its last written value, and every acked insert batch must be
visible exactly at its timestamp, also after a restart without flushing (WAL replay, when the
engine has a WAL) and after flush + close + reopen. Runs with a logical and a hybrid clock.

`test_delete_and_reinsert` (Kudu's DeleteAndReinsert): several threads cycle insert/delete
on one row while others stubbornly update it, with aggressive flushes. Every op's timestamp
orders it: replaying all ops in timestamp order must reproduce each op's outcome (applied
or its error code) and the final row, and snapshot scans at recorded timestamps must match,
also after a restart without flushing (WAL replay).

Any exception in any thread fails the test (a thread still alive 60 s after the stop signal
is reported as a deadlock). The GIL switch interval is lowered to 10 us so threads interleave
inside the engine's critical sections. ~2.5 s of load per test; KUDUSQL_LONG=1 runs 30 s;
KUDUSQL_MT_SEED picks the workers' random seeds. Run with -s to see throughput counters.
"""

from __future__ import annotations

import dataclasses
import os
import random
import sys
import tempfile
import threading
import time
import traceback

import pytest

pytest.importorskip("engine.tablet", reason="engine.tablet is not importable yet")

from engine.clock import HybridClock, LogicalClock  # noqa: E402
from engine.schema import ColumnSchema, Schema  # noqa: E402
from engine.tablet import ColumnPredicate, OpType, Tablet, TabletConfig  # noqa: E402
from engine.types import DataType  # noqa: E402

LONG = os.environ.get("KUDUSQL_LONG") == "1"
DURATION_S = 30.0 if LONG else 2.5

N_GROUPS = 2
ACCOUNTS_PER_GROUP = 8
INITIAL_BALANCE = 1000
COUNTER_BASE = 10_000
COUNTERS_PER_THREAD = 2
N_COUNTER_THREADS = 2
K_ATOMIC = 20_000
K_SPLIT = 20_001
N_INSERTERS = 2
INSERT_BASE = 1_000_000  # inserter i owns [INSERT_BASE * (i + 1), INSERT_BASE * (i + 2))


@pytest.fixture(autouse=True)
def _frequent_thread_switches():
    """Make the GIL switch threads ~500x more often than the default 5 ms, so that
    readers and writers interleave inside the engine's critical sections, not only
    between them."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def _config() -> TabletConfig:
    """No fsync, no WAL sync (speed); history kept (readers scan at old acked timestamps,
    which the ancient history mark must not pass). Unknown tunables are skipped."""
    want = dict(fsync=False, wal_sync="never", history_max_age_s=1e15)
    known = {f.name for f in dataclasses.fields(TabletConfig)}
    return TabletConfig(**{k: v for k, v in want.items() if k in known})


# Compactions beyond docs/engine-api.md, stressed when the engine has them (Kudu's
# mt-tablet-test runs compact, flush-deltas and delta-compaction threads).
HAS_WAL = any(f.name == "wal_sync" for f in dataclasses.fields(TabletConfig))
HAS_COMPACTION = all(hasattr(Tablet, m) for m in
                     ("compact_rowsets", "compact_deltas", "rowsets_info"))


def _compactor(t: Tablet, stop: threading.Event, counter: list) -> None:
    rng = random.Random(7)
    while not stop.is_set():
        ids = sorted(info["id"] for info in t.rowsets_info())
        if len(ids) >= 2:
            if rng.random() < 0.5:
                ids = ids[:2] if rng.random() < 0.5 else ids
            t.compact_rowsets(ids)
            counter[0] += 1
        t.compact_deltas()
        counter[1] += 1
        time.sleep(0.01)


def _schema() -> Schema:
    return Schema([
        ColumnSchema("id", DataType.INT64),
        ColumnSchema("grp", DataType.INT32, nullable=True),
        ColumnSchema("balance", DataType.INT64, nullable=True),
        ColumnSchema("counter", DataType.INT64, nullable=True),
        ColumnSchema("tag", DataType.STRING, nullable=True),
    ], key=["id"])


def _account_ids(g: int) -> list[int]:
    return [g * ACCOUNTS_PER_GROUP + i for i in range(ACCOUNTS_PER_GROUP)]


def _counter_ids(c: int) -> list[int]:
    return [COUNTER_BASE + c * COUNTERS_PER_THREAD + i for i in range(COUNTERS_PER_THREAD)]


def _inserter_base(i: int) -> int:
    return INSERT_BASE * (i + 1)


def _inserter_of(key: int) -> int | None:
    if key >= INSERT_BASE:
        return key // INSERT_BASE - 1
    return None


class Harness:
    """Starts named worker threads; any exception in one stops all and fails the test."""

    def __init__(self):
        self.stop = threading.Event()
        self.errors: list[tuple[str, str]] = []
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def spawn(self, name: str, fn, *args) -> None:
        def body():
            try:
                fn(*args)
            except BaseException:  # noqa: BLE001 - reported to the main thread
                with self._lock:
                    self.errors.append((name, traceback.format_exc()))
                self.stop.set()

        th = threading.Thread(target=body, name=name, daemon=True)
        self.threads.append(th)

    def run(self, duration_s: float) -> None:
        for th in self.threads:
            th.start()
        self.stop.wait(duration_s)
        self.stop.set()
        for th in self.threads:
            th.join(timeout=60)
        hung = [th.name for th in self.threads if th.is_alive()]
        msgs = [f"--- thread {name} ---\n{tb}" for name, tb in self.errors]
        if hung:
            msgs.append(f"threads did not stop within 60 s (deadlock?): {hung}")
        if msgs:
            pytest.fail("\n".join(msgs), pytrace=False)


def _scan_dict(t: Tablet, **kwargs) -> dict[int, dict]:
    """Scan into {id: row}; a key seen twice is a bug (a row in two rowsets at once)."""
    out: dict[int, dict] = {}
    for row in t.scan_table(**kwargs).to_pylist():
        k = row["id"]
        assert k not in out, f"key {k} returned twice by scan({kwargs}): {out[k]} and {row}"
        out[k] = row
    return out


def _slow_scan_dict(t: Tablet, snapshot) -> dict[int, dict]:
    """Kudu's slow reader: hold the scan iterator open across flushes, batch by batch."""
    out: dict[int, dict] = {}
    for batch in t.scan(snapshot=snapshot):
        for row in batch.to_pylist():
            k = row["id"]
            assert k not in out, f"key {k} returned twice by a slow scan at {snapshot}"
            out[k] = row
        time.sleep(0.002)
    return out


def _assert_no_errors(r, what: str) -> None:
    assert not r.row_errors, f"{what}: unexpected row errors {r.row_errors}"


# ---------------------------------------------------------------------------------------
# test_all_at_once
# ---------------------------------------------------------------------------------------


class AllAtOnce:
    def __init__(self, t: Tablet, seed: int):
        self.t = t
        self.seed = seed
        self.balances = {a: INITIAL_BALANCE for g in range(N_GROUPS) for a in _account_ids(g)}
        self.counters = {k: 0 for c in range(N_COUNTER_THREADS) for k in _counter_ids(c)}
        self.inserted = [0] * N_INSERTERS                    # rows acked per inserter
        self.insert_log: list[list[tuple[int, int]]] = [[] for _ in range(N_INSERTERS)]
        self.gens = {K_ATOMIC: 0, K_SPLIT: 0}
        self.stubborn_applied = 0
        self.scans = 0
        self.flushes = [0, 0]
        self.writes = 0

    # -- setup ---------------------------------------------------------------------------
    def load(self) -> None:
        t = self.t
        first = [a for g in range(N_GROUPS) for a in _account_ids(g)[: ACCOUNTS_PER_GROUP // 2]]
        rest = [a for g in range(N_GROUPS) for a in _account_ids(g)[ACCOUNTS_PER_GROUP // 2:]]
        for ids in (first, rest):
            _assert_no_errors(t.insert({
                "id": ids, "grp": [a // ACCOUNTS_PER_GROUP for a in ids],
                "balance": [INITIAL_BALANCE] * len(ids)}), "load accounts")
            if ids is first:
                t.flush_mrs()  # half the accounts start in a DiskRowSet, half in the MRS
        ids = list(self.counters)
        _assert_no_errors(t.insert({"id": ids, "counter": [0] * len(ids)}), "load counters")
        _assert_no_errors(t.insert({"id": [K_ATOMIC, K_SPLIT], "counter": [0, 0]}), "load K")

    # -- workers ---------------------------------------------------------------------------
    def transfer(self, g: int) -> None:
        rng = random.Random(self.seed * 100 + g)
        ids = _account_ids(g)
        while not self.t_stop.is_set():
            n = rng.choice([2, 2, 3])
            chosen = rng.sample(ids, n)
            new = {a: self.balances[a] for a in chosen}
            for i in range(n - 1):
                amt = rng.randint(-50, 50)
                new[chosen[i]] -= amt
                new[chosen[i + 1]] += amt
            op = rng.choice([OpType.UPDATE, OpType.UPDATE, OpType.UPSERT])
            r = self.t.write([op] * n, {"id": chosen, "balance": [new[a] for a in chosen]})
            _assert_no_errors(r, f"transfer group {g}")
            assert r.num_applied == n
            self.balances.update(new)
            self.writes += 1

    def insert(self, i: int) -> None:
        rng = random.Random(self.seed * 100 + 10 + i)
        base = _inserter_base(i)
        while not self.t_stop.is_set():
            n = rng.randint(1, 12)
            start = base + self.inserted[i]
            ids = list(range(start, start + n))
            tags = [f"i{i}-{k}" for k in ids]
            if rng.random() < 0.5:     # the small-write path (plain-value MemRowSet tail)
                r = self.t.write_small([int(OpType.INSERT)] * n, ["id", "counter", "tag"],
                                       list(zip(ids, ids, tags)))
            else:
                r = self.t.insert({"id": ids, "counter": ids, "tag": tags})
            _assert_no_errors(r, f"inserter {i}")
            assert r.num_applied == n
            self.inserted[i] += n
            self.insert_log[i].append((r.timestamp, self.inserted[i]))
            self.writes += 1

    def count(self, c: int) -> None:
        rng = random.Random(self.seed * 100 + 20 + c)
        ids = _counter_ids(c)
        while not self.t_stop.is_set():
            k = rng.choice(ids)
            v = self.counters[k] + 1
            op = rng.choice([OpType.UPDATE, OpType.UPSERT])
            if rng.random() < 0.5:     # the small-write path (plain-value row records)
                r = self.t.write_small([int(op)], ["id", "counter"], [(k, v)])
            elif op == OpType.UPDATE:
                r = self.t.update({"id": [k], "counter": [v]})
            else:
                r = self.t.upsert({"id": [k], "counter": [v]})
            _assert_no_errors(r, f"counter {k}")
            self.counters[k] = v
            self.writes += 1

    def delete_reinsert(self) -> None:
        rng = random.Random(self.seed * 100 + 30)
        while not self.t_stop.is_set():
            if rng.random() < 0.5:
                gen = self.gens[K_ATOMIC] + 1
                r = self.t.write([OpType.DELETE, OpType.INSERT],
                                 {"id": [K_ATOMIC, K_ATOMIC], "counter": [None, gen]})
                _assert_no_errors(r, "atomic delete+reinsert")
                self.gens[K_ATOMIC] = gen
            else:
                small = rng.random() < 0.5
                r = self.t.write_small([int(OpType.DELETE)], ["id"], [(K_SPLIT,)]) if small \
                    else self.t.delete({"id": [K_SPLIT]})
                _assert_no_errors(r, "split delete")
                gen = self.gens[K_SPLIT] + 1
                r = self.t.write_small([int(OpType.INSERT)], ["id", "counter"],
                                       [(K_SPLIT, gen)]) if small \
                    else self.t.insert({"id": [K_SPLIT], "counter": [gen]})
                _assert_no_errors(r, "split reinsert")
                self.gens[K_SPLIT] = gen
            self.writes += 1

    def stubborn(self) -> None:
        n = 0
        while not self.t_stop.is_set():
            n += 1
            if n % 2:
                r = self.t.update({"id": [K_ATOMIC, K_SPLIT], "tag": [f"s{n}", f"s{n}"]})
            else:
                r = self.t.write_small([int(OpType.UPDATE)] * 2, ["id", "tag"],
                                       [(K_ATOMIC, f"s{n}"), (K_SPLIT, f"s{n}")])
            codes = [(e.index, e.code) for e in r.row_errors]
            # K_ATOMIC is live in every snapshot; K_SPLIT may be between delete and reinsert.
            assert codes in ([], [(1, "NOT_FOUND")]), f"stubborn update: {r.row_errors}"
            assert r.num_applied == 2 - len(codes)
            self.stubborn_applied += r.num_applied

    def flusher(self) -> None:
        while not self.t_stop.is_set():
            self.t.flush_mrs()
            self.flushes[0] += 1
            time.sleep(0.005)
            self.t.flush_dms()
            self.flushes[1] += 1
            time.sleep(0.005)

    def reader(self, r_id: int) -> None:
        rng = random.Random(self.seed * 100 + 40 + r_id)
        last_counters: dict[int, int] = {}
        last_gens: dict[int, int] = {}
        last_prefix = [0] * N_INSERTERS
        while not self.t_stop.is_set():
            mode = rng.choice(["latest", "now", "acked", "pred", "slow"])
            snapshot, exact = None, None
            kwargs: dict = {}
            if mode == "now":
                snapshot = self.t.current_timestamp()
            elif mode == "acked":
                i = rng.randrange(N_INSERTERS)
                log = self.insert_log[i]
                if not log:
                    continue
                snapshot, n = log[rng.randrange(len(log))]
                exact = (i, n)
            elif mode == "pred":
                kwargs["predicates"] = [ColumnPredicate.less("id", COUNTER_BASE)]
            if mode == "slow":
                snapshot = self.t.current_timestamp()
                rows = _slow_scan_dict(self.t, snapshot)
            else:
                rows = _scan_dict(self.t, snapshot=snapshot, **kwargs)
            self.scans += 1
            self.check_snapshot(rows, snapshot, accounts_only=(mode == "pred"))
            if exact is not None:
                i, n = exact
                got = sum(1 for k in rows if _inserter_of(k) == i)
                assert got == n, (f"scan at acked timestamp {snapshot} of inserter {i} sees "
                                  f"{got} of its rows, expected exactly {n}")
            if mode in ("latest", "now", "slow"):
                # Successive latest/now scans of one reader move forward in time.
                for k in self.counters:
                    v = rows[k]["counter"]
                    assert v >= last_counters.get(k, 0), (
                        f"counter {k} went back from {last_counters[k]} to {v}")
                    last_counters[k] = v
                for k in (K_ATOMIC, K_SPLIT):
                    if k in rows:
                        v = rows[k]["counter"]
                        assert v >= last_gens.get(k, 0), (
                            f"generation of {k} went back from {last_gens[k]} to {v}")
                        last_gens[k] = v
                for i in range(N_INSERTERS):
                    n = sum(1 for k in rows if _inserter_of(k) == i)
                    assert n >= last_prefix[i], (
                        f"inserter {i}: row count went down from {last_prefix[i]} to {n}")
                    last_prefix[i] = n

    def check_snapshot(self, rows: dict[int, dict], snapshot, accounts_only: bool) -> None:
        what = f"scan at snapshot={snapshot}"
        for g in range(N_GROUPS):
            ids = _account_ids(g)
            missing = [a for a in ids if a not in rows]
            assert not missing, f"{what}: accounts {missing} missing"
            total = sum(rows[a]["balance"] for a in ids)
            assert total == INITIAL_BALANCE * ACCOUNTS_PER_GROUP, (
                f"{what}: group {g} balance sum {total} != "
                f"{INITIAL_BALANCE * ACCOUNTS_PER_GROUP}: "
                f"{[(a, rows[a]['balance']) for a in ids]}")
            assert all(rows[a]["grp"] == g for a in ids), f"{what}: grp column corrupted"
        if accounts_only:
            assert all(k < COUNTER_BASE for k in rows), f"{what}: predicate id < {COUNTER_BASE}"
            return
        for k in self.counters:
            assert k in rows, f"{what}: counter row {k} missing"
        assert K_ATOMIC in rows, f"{what}: {K_ATOMIC} (deleted+reinserted atomically) missing"
        for i in range(N_INSERTERS):
            keys = sorted(k for k in rows if _inserter_of(k) == i)
            base = _inserter_base(i)
            assert keys == list(range(base, base + len(keys))), (
                f"{what}: inserter {i}'s rows are not a prefix of its range: "
                f"{len(keys)} rows, first gaps near "
                f"{[k for j, k in enumerate(keys) if k != base + j][:5]}")
            for k in keys:
                assert rows[k]["counter"] == k and rows[k]["tag"] == f"i{i}-{k}", (
                    f"{what}: inserted row {k} has wrong values {rows[k]}")

    # -- end state -------------------------------------------------------------------------
    def verify_history(self, t: Tablet, label: str) -> None:
        """Every acked insert batch is visible at its own timestamp, exactly, and every
        such snapshot satisfies the scan invariants."""
        for i in range(N_INSERTERS):
            log = self.insert_log[i]
            for ts, n in log[:: max(1, len(log) // 15)]:
                rows = _scan_dict(t, snapshot=ts)
                self.check_snapshot(rows, f"{ts} ({label})", accounts_only=False)
                got = sum(1 for k in rows if _inserter_of(k) == i)
                assert got == n, (f"{label}: scan at {ts} sees {got} rows of inserter {i}, "
                                  f"expected {n}")

    def verify_final(self, t: Tablet, label: str) -> None:
        rows = _scan_dict(t)
        for a, b in self.balances.items():
            assert rows[a]["balance"] == b, f"{label}: account {a} = {rows[a]}, expected {b}"
        for k, c in self.counters.items():
            assert rows[k]["counter"] == c, f"{label}: counter {k} = {rows[k]}, expected {c}"
        for k, gen in self.gens.items():
            assert k in rows and rows[k]["counter"] == gen, (
                f"{label}: key {k} = {rows.get(k)}, expected generation {gen}")
        for i in range(N_INSERTERS):
            base = _inserter_base(i)
            n = self.inserted[i]
            for k in range(base, base + n):
                assert k in rows and rows[k]["counter"] == k, f"{label}: inserted {k} lost"
        expected_rows = (len(self.balances) + len(self.counters) + 2 + sum(self.inserted))
        assert len(rows) == expected_rows, f"{label}: {len(rows)} rows, expected {expected_rows}"
        for k in list(self.balances)[:3] + list(self.counters)[:2] + [K_ATOMIC]:
            assert t.lookup((k,)) == rows[k], f"{label}: lookup({k}) != scan"


@pytest.mark.parametrize("clock_kind", ["logical", "hybrid"])
def test_all_at_once(clock_kind):
    seed = int(os.environ.get("KUDUSQL_MT_SEED", "1"))
    with tempfile.TemporaryDirectory(prefix="mt-tablet-") as tmp:
        path = os.path.join(tmp, "tablet")
        clock = LogicalClock() if clock_kind == "logical" else HybridClock()
        config = _config()
        t = Tablet.create(path, _schema(), config=config, clock=clock)
        try:
            w = AllAtOnce(t, seed)
            w.load()
            h = Harness()
            w.t_stop = h.stop
            for g in range(N_GROUPS):
                h.spawn(f"transfer-{g}", w.transfer, g)
            for i in range(N_INSERTERS):
                h.spawn(f"inserter-{i}", w.insert, i)
            for c in range(N_COUNTER_THREADS):
                h.spawn(f"counter-{c}", w.count, c)
            h.spawn("delete-reinsert", w.delete_reinsert)
            h.spawn("stubborn-updater", w.stubborn)
            h.spawn("flusher", w.flusher)
            compactions = [0, 0]
            if HAS_COMPACTION:
                h.spawn("compactor", _compactor, t, h.stop, compactions)
            for r in range(3):
                h.spawn(f"reader-{r}", w.reader, r)
            h.run(DURATION_S)

            print(f"all_at_once: {w.writes} write ops, {sum(w.inserted)} rows inserted, "
                  f"{w.scans} scans, {w.flushes[0]} MRS / {w.flushes[1]} DMS flushes, "
                  f"{w.stubborn_applied} stubborn updates, {compactions[0]} rowset / "
                  f"{compactions[1]} delta compactions, {t.num_rowsets()} rowsets")
            assert w.scans > 0 and w.writes > 0, "threads made no progress"
            assert w.flushes[0] > 0 and w.flushes[1] > 0, "the flusher never ran"
            assert t.small_writes > 10, "the small-write path was hardly taken"
            w.check_snapshot(_scan_dict(t), None, accounts_only=False)
            w.verify_final(t, "end of run")
            w.verify_history(t, "end of run")
            if HAS_WAL:
                # Restart without flushing: the MRS and DMS contents come back from the WAL.
                t.close()
                t = Tablet.open(path, config=config, clock=clock)
                w.verify_final(t, "after restart (WAL replay)")
                w.verify_history(t, "after restart (WAL replay)")
            t.flush_mrs()
            t.flush_dms()
            w.verify_final(t, "after final flush")
            t.close()
            t = Tablet.open(path, config=config, clock=clock)
            w.verify_final(t, "after flush + reopen")
            w.verify_history(t, "after flush + reopen")
        finally:
            t.close()


# ---------------------------------------------------------------------------------------
# test_delete_and_reinsert
# ---------------------------------------------------------------------------------------

KEY = 7


def test_delete_and_reinsert():
    seed = int(os.environ.get("KUDUSQL_MT_SEED", "1"))
    with tempfile.TemporaryDirectory(prefix="mt-tablet-") as tmp:
        path = os.path.join(tmp, "tablet")
        clock = LogicalClock()
        t = Tablet.create(path, _schema(), config=_config(), clock=clock)
        try:
            h = Harness()
            log: list[tuple[int, str, int, str | None]] = []  # (ts, op, value, error code)
            log_lock = threading.Lock()

            def record(r, op: str, value: int) -> None:
                assert r.num_applied + len(r.row_errors) == 1, r
                code = r.row_errors[0].code if r.row_errors else None
                expected = {"INSERT": {"ALREADY_PRESENT"}, "DELETE": {"NOT_FOUND"},
                            "UPDATE": {"NOT_FOUND"}}[op]
                assert code is None or code in expected, f"{op}: unexpected error {code}"
                with log_lock:
                    log.append((r.timestamp, op, value, code))

            def cycler(n: int) -> None:
                rng = random.Random(seed * 100 + n)
                i = 0
                while not h.stop.is_set():
                    i += 1
                    value = n * 1_000_000 + i
                    if rng.random() < 0.5:
                        record(t.insert({"id": [KEY], "counter": [value]}), "INSERT", value)
                    else:
                        record(t.delete({"id": [KEY]}), "DELETE", 0)

            def updater(n: int) -> None:
                i = 0
                while not h.stop.is_set():
                    i += 1
                    value = -(n * 1_000_000 + i)
                    record(t.update({"id": [KEY], "counter": [value]}), "UPDATE", value)

            def flusher() -> None:
                while not h.stop.is_set():
                    t.flush_mrs()
                    t.flush_dms()
                    time.sleep(0.002)

            for n in range(3):
                h.spawn(f"cycler-{n}", cycler, n)
                h.spawn(f"updater-{n}", updater, n)
            h.spawn("flusher", flusher)
            compactions = [0, 0]
            if HAS_COMPACTION:
                h.spawn("compactor", _compactor, t, h.stop, compactions)
            h.run(DURATION_S)

            # Replay in timestamp order: timestamps must serialize the ops on the row.
            log.sort()
            print(f"delete_and_reinsert: {len(log)} ops, "
                  f"{sum(1 for e in log if e[3] is None)} applied, {compactions} compactions, "
                  f"{t.num_rowsets()} rowsets")
            stamps = [e[0] for e in log]
            assert len(set(stamps)) == len(stamps), "two write ops got the same timestamp"
            state: int | None = None  # the row's counter, None = not live
            history: list[tuple[int, int | None]] = []
            for ts, op, value, code in log:
                if op == "INSERT":
                    want = "ALREADY_PRESENT" if state is not None else None
                    if want is None:
                        state = value
                elif op == "DELETE":
                    want = "NOT_FOUND" if state is None else None
                    state = None
                else:
                    want = "NOT_FOUND" if state is None else None
                    if want is None:
                        state = value
                assert code == want, (
                    f"op {op}({value}) at ts {ts} returned {code}, but replaying all ops in "
                    f"timestamp order says {want}; nearby ops: "
                    f"{[e for e in log if abs(e[0] - ts) <= 3]}")
                history.append((ts, state))

            def row_at(snapshot, label):
                rows = t.scan_table(snapshot=snapshot).to_pylist()
                assert len(rows) <= 1, (f"{label}: key {KEY} seen {len(rows)} times at "
                                        f"snapshot {snapshot}: {rows}")
                return rows[0]["counter"] if rows else None

            def verify(label: str) -> None:
                final = row_at(None, label)
                assert final == state, f"{label}: final row {final} != replayed {state}"
                got = t.lookup((KEY,))
                assert (None if got is None else got["counter"]) == state, label
                rng = random.Random(seed)
                for ts, st in rng.sample(history, min(60, len(history))):
                    got = row_at(ts, label)
                    assert got == st, f"{label}: scan at {ts}: {got} != replayed {st}"

            verify("end of run")
            if HAS_WAL:
                # Restart without flushing: WAL replay must reproduce every op's outcome.
                t.close()
                t = Tablet.open(path, config=_config(), clock=clock)
                verify("after restart (WAL replay)")
        finally:
            t.close()
