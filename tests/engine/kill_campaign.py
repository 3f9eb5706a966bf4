"""Kill -9 campaign: an engine process is killed with SIGKILL at random points of bulk loads,
flushes, compactions and ALTERs, over and over on one data directory, and after every kill
the directory is reopened and checked against a model of what was acknowledged.

    python -m tests.engine.kill_campaign --cycles 1000 [--seed S] [--dir D] [--keep]

What runs (the child, `--child`): `Catalog.open` with a MaintenanceManager polling every
20 ms and small thresholds (tiny MemRowSets and DeltaMemStores, 64 KiB rowsets, minor delta
compaction from 2 files, UNDO history of 2 s), so flushes, delta compactions, merging
compactions and UNDO GC run all the time. One table `t` (k BIGINT key, v BIGINT, s STRING;
HASH (k) 3 buckets, RANGE (k)). The child loops over numbered steps, each one of:
  rows         one `Table.write` of a batch of mixed INSERT (fresh keys) / UPSERT / UPDATE /
               DELETE rows with distinct keys: 1..40 rows, or a bulk load of 300..3000
  add_range    ALTER TABLE ADD RANGE PARTITION (before fresh keys would leave the ranges)
  drop_range   ALTER TABLE DROP RANGE PARTITION of the oldest range once there are 3 (its
               rows go with it; this also keeps the table and its tablets few)
  add_column   ALTER TABLE ADD COLUMN x BIGINT NOT NULL DEFAULT 7
  drop_column  ALTER TABLE DROP COLUMN x
Every row a step writes has v = its step number and s = "<v>:<k>", so a row whose columns
come from two different writes is visible as such. Odd cycles use wal_sync "commit" (fsync
before the acknowledgement), even ones "never" (the OS page cache: a process kill must not
lose anything either; only a machine crash may).

The acknowledgement log (DIR/../acks-<cycle>.log, one line per event, written with one
unbuffered os.write each, before/after the step):
    BEGIN <n> <json step>     before step n starts (a line cut short: the step never began)
    ACK <n> <json error idx>  after the call returned: the step is acknowledged
    MAINT_BEGIN <op> / MAINT_END <op>   around flushes and compactions (so the parent can aim)

The parent kills the child at a random time ("timed"), shortly after a flush or compaction
began ("maint"), or shortly after a step began ("step": often a bulk load or an ALTER in
flight), then opens the directory itself and checks, against the model:

  acknowledged   every ACKed step is fully there: each of its rows in the state the model
                 gives (per-row errors predicted by the model exactly), each ALTER done.
  not acked      the one step that had begun but not been ACKed may be applied in part, by
                 the row: each of its rows is either untouched or fully written (Kudu
                 semantics: a row op is atomic, a batch is not). An unacknowledged ALTER is
                 either not there or completely there (x on every row, = 7).
  "half-applied" means any other state: a row whose v and s disagree, a row or a column the
                 model cannot explain, a missing or extra row, x with a value other than 7.
Any such difference is a loss: the campaign prints the seed, the cycle and the difference,
and exits 1. The model then adopts what it found for the unacknowledged step and the next
cycle starts a new child on the same directory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):  # run by path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

import pyarrow as pa  # noqa: E402

from engine.catalog import Catalog, HashBucketSchema, PartitionSchema, RangeSpec  # noqa: E402
from engine.schema import ColumnSchema, Schema  # noqa: E402
from engine.tablet import OpType, TabletConfig  # noqa: E402
from engine.types import DataType as T  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = "t"
STRIDE = 4000            # fresh keys of step n: n * STRIDE + j
RANGE_WIDTH = 200_000    # each range partition covers this many keys
SCHEMA = Schema([ColumnSchema("k", T.INT64, nullable=False),
                 ColumnSchema("v", T.INT64), ColumnSchema("s", T.STRING)], key=["k"])
X = ColumnSchema("x", T.INT64, nullable=False, default=7)
# A broken child for the test that shows the checker bites: it acknowledges a step before
# writing it (KUDUSQL_KILL_BREAK=ack-early).
BREAK_ACK_EARLY = os.environ.get("KUDUSQL_KILL_BREAK") == "ack-early"
OPS = {"I": OpType.INSERT, "U": OpType.UPSERT, "P": OpType.UPDATE, "D": OpType.DELETE}


def config(sync: str) -> TabletConfig:
    return TabletConfig(page_rows=256, drs_target_bytes=64 << 10, fsync=True, wal_sync=sync,
                        wal_segment_bytes=64 << 10, block_cache_bytes=8 << 20,
                        mrs_flush_bytes=192 << 10, dms_flush_bytes=16 << 10,
                        mrs_flush_age_s=0.3, dms_flush_age_s=0.3, minor_compact_min_files=2,
                        history_max_age_s=2.0)


# -- the child ----------------------------------------------------------------------------------
class AckLog:
    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, text: str) -> None:
        os.write(self.fd, (text + "\n").encode())


def _announce_maintenance(log: AckLog) -> None:
    from engine.tablet.tablet import Tablet
    for name in ("flush_mrs", "flush_dms", "minor_delta_compact", "major_delta_compact",
                 "gc_undo_deltas", "compact_rowsets"):
        orig = getattr(Tablet, name)

        def wrapped(self, *a, _orig=orig, _name=name, **kw):
            log.line(f"MAINT_BEGIN {_name}")
            r = _orig(self, *a, **kw)
            log.line(f"MAINT_END {_name}")
            return r
        setattr(Tablet, name, wrapped)


def child(data_dir: str, ack_path: str, seed: int, first: int, sync: str) -> None:
    from engine.tablet.maintenance_manager import MaintenanceManager
    log = AckLog(ack_path)
    _announce_maintenance(log)
    mm = MaintenanceManager(poll_interval_s=0.02).start()
    cat = Catalog.open(data_dir, config=config(sync), maintenance=mm)
    if not cat.has_table(TABLE):
        ps = PartitionSchema.create(SCHEMA, [HashBucketSchema(("k",), 3)], ["k"],
                                    [RangeSpec(0, RANGE_WIDTH)])
        cat.create_table(TABLE, SCHEMA, ps)
    table = cat.table(TABLE)
    live = set(table.scan_table(["k"]).column("k").to_pylist())
    rng = random.Random(f"{seed}-{first}")
    log.line(f"READY {first}")
    n = first
    while True:
        meta = cat.get_table(TABLE)
        has_x = meta.schema.has_column("x")
        covered = _covered_upper(meta)
        ranges = meta.partition_schema.range_partitions
        r = rng.random()
        if (n + 1) * STRIDE > covered:
            step = {"kind": "add_range", "lo": covered, "hi": covered + RANGE_WIDTH}
        elif len(ranges) >= 3:
            lo = min(int(p.lower[0]) for p in ranges)
            step = {"kind": "drop_range", "lo": lo, "hi": lo + RANGE_WIDTH}
        elif r < 0.04:
            step = {"kind": "drop_column" if has_x else "add_column"}
        else:
            step = _rows_step(rng, n, live)
            if BREAK_ACK_EARLY:     # fresh INSERTs only: the early ACK's "no errors" is right
                step = {"kind": "rows", "ops": ["I"] * 50, "k": [n * STRIDE + j
                                                               for j in range(50)]}
        log.line(f"BEGIN {n} {json.dumps(step, separators=(',', ':'))}")
        errs: list[int] = []
        if BREAK_ACK_EARLY and step["kind"] == "rows":
            log.line(f"ACK {n} []")            # broken on purpose: acknowledged too early
            time.sleep(0.05)
        if step["kind"] == "add_range":
            cat.add_range_partition(TABLE, RangeSpec(step["lo"], step["hi"]))
        elif step["kind"] == "drop_range":
            cat.drop_range_partition(TABLE, RangeSpec(step["lo"], step["hi"]))
            live = {k for k in live if not step["lo"] <= k < step["hi"]}
        elif step["kind"] == "add_column":
            cat.add_column(TABLE, X)
        elif step["kind"] == "drop_column":
            cat.drop_column(TABLE, "x")
        else:
            rows = pa.table({"k": pa.array(step["k"], pa.int64()),
                             "v": pa.array([n] * len(step["k"]), pa.int64()),
                             "s": pa.array([f"{n}:{k}" for k in step["k"]], pa.string())})
            res = cat.table(TABLE).write([OPS[o] for o in step["ops"]], rows)
            errs = [e.index for e in res.row_errors]
            for o, k in zip(step["ops"], step["k"]):
                if o == "D":
                    live.discard(k)
                else:
                    live.add(k)
            for i in errs:      # a failed UPDATE was of a key that is not there
                if step["ops"][i] == "P":
                    live.discard(step["k"][i])
        if not (BREAK_ACK_EARLY and step["kind"] == "rows"):
            log.line(f"ACK {n} {json.dumps(errs)}")
        n += 1


def _covered_upper(meta) -> int:
    hi = 0
    for p in meta.partition_schema.range_partitions:
        u = p.upper
        u = u[0] if isinstance(u, tuple) else u
        hi = max(hi, int(u))
    return hi


def _rows_step(rng: random.Random, n: int, live: set) -> dict:
    bulk = rng.random() < 0.25
    m = rng.randint(300, 3000) if bulk else rng.randint(1, 40)
    fresh = [n * STRIDE + j for j in range(m)]
    existing = rng.sample(sorted(live), min(len(live), 0 if bulk else rng.randint(0, 30)))
    ops, keys = [], []
    for k in fresh[: m if bulk else rng.randint(0, m)]:
        ops.append("I" if rng.random() < 0.8 else "U")
        keys.append(k)
    for k in existing:
        ops.append(rng.choice("UPDI"))      # I on a live key: fails with ALREADY_PRESENT
        keys.append(k)
    if not keys:
        ops, keys = ["I"], [fresh[0]]
    order = list(range(len(keys)))
    rng.shuffle(order)
    return {"kind": "rows", "ops": [ops[i] for i in order], "k": [keys[i] for i in order]}


# -- the parent ----------------------------------------------------------------------------------
class Model:
    """What the table must hold: key -> v (s is always f"{v}:{k}"), and whether x exists."""

    def __init__(self):
        self.rows: dict[int, int] = {}
        self.has_x = False
        self.ranges = {(0, RANGE_WIDTH)}

    def drop_range(self, lo: int, hi: int) -> None:
        self.ranges.discard((lo, hi))
        self.rows = {k: v for k, v in self.rows.items() if not lo <= k < hi}

    def outcome(self, n: int, step: dict) -> tuple[dict[int, int | None], list[int]]:
        """Each key's state after `step` and the indexes of rows that must fail."""
        after, errs = {}, []
        for i, (o, k) in enumerate(zip(step["ops"], step["k"])):
            present = k in self.rows
            if (o == "I" and present) or (o in ("P", "D") and not present):
                errs.append(i)
                after[k] = self.rows.get(k)
            elif o == "D":
                after[k] = None
            else:
                after[k] = n
        return after, errs

    def apply(self, after: dict[int, int | None]) -> None:
        for k, v in after.items():
            if v is None:
                self.rows.pop(k, None)
            else:
                self.rows[k] = v


def read_log(path: str) -> list[tuple]:
    events = []
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return events
    for raw in data.split(b"\n")[:-1]:      # a last line without "\n" was cut short
        parts = raw.decode().split(" ", 2)
        if parts[0] == "BEGIN":
            events.append(("BEGIN", int(parts[1]), json.loads(parts[2])))
        elif parts[0] == "ACK":
            events.append(("ACK", int(parts[1]), json.loads(parts[2])))
        elif parts[0] in ("MAINT_BEGIN", "MAINT_END", "READY"):
            events.append((parts[0], parts[1]))
    return events


class Loss(Exception):
    pass


def verify(data_dir: str, model: Model, pending: tuple[int, dict] | None) -> None:
    """Open the directory (recovery), compare with the model, adopt the pending step."""
    cat = Catalog.open(data_dir, config=config("never"))
    try:
        if not cat.has_table(TABLE):
            if model.rows or pending is not None and pending[1]["kind"] != "rows":
                raise Loss("table t is gone")
            return
        meta = cat.get_table(TABLE)
        has_x = meta.schema.has_column("x")
        ranges = {(int(p.lower[0]), int(p.upper[0]))
                  for p in meta.partition_schema.range_partitions}
        kind = pending[1]["kind"] if pending else None
        if kind in ("add_column", "drop_column"):
            want = kind == "add_column"
            if has_x not in (model.has_x, want):
                raise Loss(f"column x is {has_x}, model {model.has_x}")
            model.has_x = has_x                  # the unacknowledged ALTER: either outcome
        elif has_x != model.has_x:
            raise Loss(f"column x exists={has_x}, acknowledged state says {model.has_x}")
        rng_ = (pending[1]["lo"], pending[1]["hi"]) if kind in ("add_range", "drop_range") \
            else None
        if kind == "add_range" and ranges == model.ranges | {rng_}:
            model.ranges = set(ranges)         # the unacknowledged ADD RANGE happened
        elif kind == "drop_range" and ranges == model.ranges - {rng_}:
            model.drop_range(*rng_)            # the unacknowledged DROP RANGE happened
        elif ranges != model.ranges:
            raise Loss(f"range partitions {sorted(ranges)}, acknowledged "
                       f"{sorted(model.ranges)}")
        cols = ["k", "v", "s"] + (["x"] if has_x else [])
        t = cat.table(TABLE).scan_table(cols)
        ks, vs, ss = (t.column(c).to_pylist() for c in ("k", "v", "s"))
        if len(set(ks)) != len(ks):
            raise Loss("a key is there twice")
        if has_x:
            bad = [x for x in t.column("x").to_pylist() if x != 7]
            if bad:
                raise Loss(f"x holds {bad[:5]} (must be 7 on every row)")
        actual = {}
        for k, v, s in zip(ks, vs, ss):
            if s != f"{v}:{k}":
                raise Loss(f"row {k} is half-applied: v={v} s={s!r}")
            actual[k] = v
        maybe: dict[int, int | None] = {}
        if kind == "rows":
            after, _ = model.outcome(pending[0], pending[1])
            maybe = after
        for k in set(actual) | set(model.rows) | set(maybe):
            have, want = actual.get(k), model.rows.get(k)
            if have == want:
                continue
            if k in maybe and have == maybe[k]:
                continue                      # the unacknowledged row op was applied
            raise Loss(f"row {k}: found {have}, acknowledged state {want}"
                       + (f" (or {maybe[k]} if the unacknowledged step applied)"
                          if k in maybe else ""))
        model.rows = actual
    finally:
        cat.close()


def run_campaign(cycles: int, seed: int, base: str, *, log=print) -> dict:
    data_dir = os.path.join(base, "db")
    rng = random.Random(seed)
    model = Model()
    next_step = 0
    kills = {"timed": 0, "maint": 0, "step": 0}
    during = {"maint": 0, "rows": 0, "bulk": 0, "alter": 0, "open": 0}
    acked = 0
    t0 = time.monotonic()
    for cycle in range(cycles):
        sync = "commit" if cycle % 2 else "never"
        ack_path = os.path.join(base, f"acks-{cycle}.log")
        mode = rng.choice(["timed", "timed", "maint", "step"])
        delay = rng.uniform(0.0, 1.5) if mode == "timed" else rng.uniform(0.0, 0.03)
        p = subprocess.Popen([sys.executable, "-m", "tests.engine.kill_campaign", "--child",
                              data_dir, ack_path, str(seed), str(next_step), sync], cwd=ROOT,
                             stderr=subprocess.PIPE)
        try:
            _aim(p, ack_path, mode, delay, rng)
            if p.poll() is not None:
                raise Loss(f"child exited by itself ({p.returncode}): "
                           f"{p.stderr.read().decode()[-2000:]}")
            os.kill(p.pid, signal.SIGKILL)
        finally:
            if p.poll() is None:
                p.kill()
            p.wait(30)
            p.stderr.close()
        kills[mode] += 1
        events = read_log(ack_path)
        pending = None
        open_maint = 0
        for ev in events:
            if ev[0] == "BEGIN":
                pending = (ev[1], ev[2])
            elif ev[0] == "ACK":
                n, errs = ev[1], ev[2]
                step = pending[1]
                if step["kind"] == "rows":
                    after, want_errs = model.outcome(n, step)
                    if sorted(errs) != want_errs:
                        raise Loss(f"cycle {cycle} step {n}: row errors {errs[:10]}, "
                                   f"model says {want_errs[:10]}")
                    model.apply(after)
                elif step["kind"] == "add_range":
                    model.ranges.add((step["lo"], step["hi"]))
                elif step["kind"] == "drop_range":
                    model.drop_range(step["lo"], step["hi"])
                else:
                    model.has_x = step["kind"] == "add_column"
                acked += 1
                next_step = n + 1
                pending = None
            elif ev[0] == "MAINT_BEGIN":
                open_maint += 1
            elif ev[0] == "MAINT_END":
                open_maint -= 1
        if not any(ev[0] == "READY" for ev in events):
            during["open"] += 1
        elif open_maint > 0:
            during["maint"] += 1
        if pending is not None:
            k = pending[1]["kind"]
            during["alter" if k != "rows" else
                   "bulk" if len(pending[1]["k"]) >= 300 else "rows"] += 1
            next_step = pending[0] + 1
        try:
            verify(data_dir, model, pending)
        except Loss as e:
            raise Loss(f"seed {seed} cycle {cycle} ({mode}, wal_sync {sync}): {e}") from None
        os.unlink(ack_path)
        if (cycle + 1) % 50 == 0:
            log(f"{cycle + 1} cycles, 0 losses, {acked} steps acknowledged, "
                f"{len(model.rows)} rows, {time.monotonic() - t0:.0f} s")
    return {"cycles": cycles, "losses": 0, "acked_steps": acked, "rows": len(model.rows),
            "kills": kills, "killed_during": during, "seconds": time.monotonic() - t0}


def _aim(p: subprocess.Popen, ack_path: str, mode: str, delay: float,
         rng: random.Random) -> None:
    """Wait until the moment to kill: a while after READY (timed), just after a flush or
    compaction began (maint) or just after a step began (step); bounded in every case."""
    deadline = time.monotonic() + 20
    seen = 0
    ready_at = None
    while time.monotonic() < deadline and p.poll() is None:
        events = read_log(ack_path)
        if ready_at is None and any(e[0] == "READY" for e in events):
            ready_at = time.monotonic()
            if mode == "step":       # skip a random number of steps, then aim at one
                seen = sum(1 for e in events if e[0] == "BEGIN") + rng.randint(0, 8)
        if ready_at is not None:
            if mode == "timed" and time.monotonic() - ready_at >= delay:
                return
            if mode == "maint" and any(e[0] == "MAINT_BEGIN" for e in events):
                time.sleep(delay)
                return
            if mode == "step" and sum(1 for e in events if e[0] == "BEGIN") > seen:
                time.sleep(delay)
                return
        time.sleep(0.002)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.engine.kill_campaign",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--child", nargs=5, metavar=("DIR", "ACKS", "SEED", "FIRST", "SYNC"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        d, acks, seed, first, sync = a.child
        child(d, acks, int(seed), int(first), sync)
        return 0
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    base = a.dir or tempfile.mkdtemp(prefix="kudusql-kill-")
    os.makedirs(base, exist_ok=True)
    print(f"kill campaign: seed {seed}, {a.cycles} cycles in {base}", flush=True)
    try:
        r = run_campaign(a.cycles, seed, base, log=lambda s: print(s, flush=True))
    except Loss as e:
        print(f"LOSS: {e}", flush=True)
        print(f"{a.cycles} cycles planned, 1 loss (directory kept: {base})", flush=True)
        return 1
    print(f"{r['cycles']} cycles, {r['losses']} losses; {r['acked_steps']} steps "
          f"acknowledged, {r['rows']} rows at the end, kills {r['kills']}, killed during "
          f"{r['killed_during']}, {r['seconds']:.0f} s", flush=True)
    if not a.keep and a.dir is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
