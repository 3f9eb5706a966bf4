"""Crash recovery: kill -9 a writing process, reopen the tablet, compare with a model.

The child (`tests/engine/crash_child.py`) writes random multi-row batches with
wal_sync="commit" and flushes the MemRowSet / DeltaMemStores at random; it prints each batch
before writing it (`BEGIN n <json>`) and its timestamp after the write returned
(`ACK n ts applied`). The parent SIGKILLs it at a random moment — after a random run time,
right after it announced a flush (`FLUSH_BEGIN`), or early, while it may still be opening
(replaying) the tablet — then checks the durability contract (docs/engine-api.md,
engine/consensus/log.py):

  * every ACKed batch is present: the latest scan equals the model after the last ACK, or
    the model after the one batch that was BEGUN but not ACKed (that op is atomic: all of
    it or none of it), never anything else (no duplicate keys, no partial batch);
  * each ACK's num_applied equals the model's (Kudu per-row semantics);
  * time travel: a scan at each checked ACK timestamp equals the model after that batch,
    and a scan at timestamp-1 the model before it (replayed ops keep their timestamps);
  * files a crash left half-written are gone after open (`*.tmp`, rowsets the metadata
    does not name) and no WAL segment below the log anchor survives;
  * close + reopen gives the same state again; a restarted child continues, and its
    timestamps are larger than every earlier one.

Several cycles run on the same directory; the restarted child resumes at the next batch
number. Workload profiles (crash_child.py): "full" does everything, "fresh" never
re-inserts a key, "+rowsets" adds rowset compactions, "+compact" delta compactions and
UNDO GC too, "+alter" ADD / DROP COLUMN (`Tablet.alter_schema`). Default: 3 cycles of
"full" and 3 of "full+alter" (~10 s each). KUDUSQL_LONG=1 adds long runs (60
cycles per profile); KUDUSQL_CRASH_SEED picks the seed (failures print it, as does `-s`).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from engine.clock import HybridClock, from_micros
from engine.consensus.log import Log
from engine.tablet import OpType, Tablet
from tests.engine.crash_child import CONFIG

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LONG = os.environ.get("KUDUSQL_LONG") == "1"
MISSING = object()


# -- the model -------------------------------------------------------------------------
def apply_batch(state: dict, batch: dict) -> tuple[int, list]:
    """Apply a batch to {k: (v, s)} with Kudu per-row semantics; returns (applied, undo)."""
    ops = batch["ops"]
    cols = batch["cols"]
    keys = cols["k"]
    has_v, has_s = "v" in cols, "s" in cols
    applied = 0
    undo = []
    for i, (op, k) in enumerate(zip(ops, keys)):
        old = state.get(k, MISSING)
        live = old is not MISSING
        v = cols["v"][i] if has_v else None
        s = cols["s"][i] if has_s else None
        if op == OpType.INSERT or (op == OpType.UPSERT and not live):
            if live:
                continue  # ALREADY_PRESENT
            new = (v, s)
        elif op in (OpType.UPDATE, OpType.UPSERT):
            if not live:
                continue  # NOT_FOUND
            new = (v if has_v else old[0], s if has_s else old[1])
        elif op == OpType.DELETE:
            if not live:
                continue
            new = MISSING
        else:
            raise AssertionError(f"unknown op {op}")
        applied += 1
        undo.append((k, old))
        if new is MISSING:
            del state[k]
        else:
            state[k] = new
    return applied, undo


class History:
    """The model: current state plus per-batch undo, to rebuild the state after any batch."""

    def __init__(self):
        self.state: dict = {}
        self.entries: list[dict] = []  # {"n", "ts" (None if never ACKed), "undo"}

    def apply(self, n: int, batch: dict, ts: int | None) -> int:
        applied, undo = apply_batch(self.state, batch)
        self.entries.append({"n": n, "ts": ts, "undo": undo})
        return applied

    def max_ts(self) -> int:
        return max((e["ts"] for e in self.entries if e["ts"] is not None), default=0)

    def states_after(self, positions: list[int]) -> dict[int, dict]:
        """{i: state after entries[i]} (i = -1: the empty state before any batch)."""
        want = sorted(set(positions), reverse=True)
        out = {}
        cur = dict(self.state)
        i = len(self.entries) - 1
        for p in want:
            while i > p:
                for k, old in reversed(self.entries[i]["undo"]):
                    if old is MISSING:
                        cur.pop(k, None)
                    else:
                        cur[k] = old
                i -= 1
            out[p] = dict(cur)
        return out


def scan_state(t: Tablet, snapshot=None) -> dict:
    tbl = t.scan_table(snapshot=snapshot)
    ks = tbl.column("k").to_pylist()
    vs = tbl.column("v").to_pylist()
    ss = tbl.column("s").to_pylist()
    out = dict(zip(ks, zip(vs, ss)))
    if len(out) != len(ks):
        seen, dups = set(), []
        for k in ks:
            if k in seen:
                dups.append(k)
            seen.add(k)
        raise AssertionError(f"scan (snapshot={snapshot}) returned duplicate keys "
                             f"{sorted(set(dups))[:10]} ({len(dups)} duplicates)")
    return out


def describe_diff(got: dict, want: dict) -> str:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    wrong = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    parts = [f"{len(got)} rows vs {len(want)} expected"]
    if missing:
        parts.append(f"missing {len(missing)}: {missing[:8]}")
    if extra:
        parts.append(f"unexpected {len(extra)}: {extra[:8]}")
    if wrong:
        parts.append(f"wrong values {len(wrong)}: " + ", ".join(
            f"{k}: {got[k]!r} != {want[k]!r}" for k in wrong[:4]))
    return "; ".join(parts)


# -- running the child -----------------------------------------------------------------
class Child:
    def __init__(self, path: str, seed: int, next_n: int, profile: str):
        self.stderr = open(os.path.join(os.path.dirname(path), "child.stderr"), "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.engine.crash_child", path, str(seed), str(next_n),
             profile],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=self.stderr)
        self.lines: list[bytes] = []
        self.ready = threading.Event()
        self.flush_seen = threading.Event()
        self.eof = threading.Event()
        self._flushes = 0
        self._want_flush_after = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.append(line)
            if line.startswith(b"READY"):
                self.ready.set()
            elif line.startswith(b"FLUSH_BEGIN"):
                self._flushes += 1
                if self._flushes > self._want_flush_after:
                    self.flush_seen.set()
        self.eof.set()

    def wait_ready(self, timeout: float) -> bool:
        """READY seen; False if the child exited first or the timeout passed."""
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return self.ready.is_set()
        return True

    def arm_flush(self):
        self._want_flush_after = self._flushes
        self.flush_seen.clear()

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.eof.wait(timeout=30)
        self._reader.join(timeout=30)
        self.proc.stdout.close()
        self.stderr.close()

    def died_on_its_own(self) -> bool:
        return self.proc.poll() is not None and self.proc.returncode != -signal.SIGKILL

    def stderr_text(self) -> str:
        with open(self.stderr.name, "rb") as f:
            return f.read().decode(errors="replace")[-4000:]


def parse_output(lines: list[bytes]):
    """-> (ready line or None, [(n, batch, ts, applied)] ACKed, (n, batch) BEGUN not ACKed)."""
    ready = None
    acked = []
    pending = None
    for raw in lines:
        if not raw.endswith(b"\n"):
            break  # cut short by the kill: its write had not started (BEGIN) / no info
        line = raw.decode()
        word, _, rest = line.rstrip("\n").partition(" ")
        if word == "READY":
            ready = rest.split()
        elif word == "BEGIN":
            assert pending is None, f"BEGIN after an unACKed BEGIN: {line[:80]}"
            n, _, js = rest.partition(" ")
            pending = (int(n), json.loads(js))
        elif word == "ACK":
            n, ts, applied = (int(x) for x in rest.split())
            assert pending is not None and pending[0] == n, f"ACK {n} without BEGIN"
            acked.append((n, pending[1], ts, applied))
            pending = None
        elif word in ("FLUSH_BEGIN", "FLUSH_END"):
            pass
        else:
            raise AssertionError(f"unexpected child output {line[:100]!r}")
    return ready, acked, pending


# -- verification ----------------------------------------------------------------------
def check_files(path: str, t: Tablet) -> None:
    """No half-written leftovers after open; WAL GC'd below the log anchor."""
    with open(os.path.join(path, "tablet-meta.json")) as f:
        meta = json.load(f)
    named = {f"{m['id']:08d}": m for m in meta["rowsets"]}
    on_disk = set(os.listdir(os.path.join(path, "rowsets")))
    assert on_disk == set(named), (
        f"rowset dirs not named by the metadata survived open: {sorted(on_disk - set(named))}"
        f"; named but missing: {sorted(set(named) - on_disk)}")
    for name, m in named.items():
        files = set(os.listdir(os.path.join(path, "rowsets", name)))
        referenced = {d["file"] for d in m["undo"]} | {d["file"] for d in m["redo"]}
        assert referenced <= files, f"rowset {name} lost delta files {referenced - files}"
        assert not [f for f in files if f.endswith(".tmp")], f"rowset {name}: {files}"
    assert not [f for f in os.listdir(path) if f.endswith(".tmp")], os.listdir(path)
    segs = Log(os.path.join(path, "wal")).segments()
    anchor = t.anchor_index()
    for (first, p), (nxt, _) in zip(segs, segs[1:]):
        assert nxt > anchor, (f"WAL segment {os.path.basename(p)} holds only entries below "
                              f"the log anchor {anchor} but was not GC'd")


def check_added_column(t: Tablet, ctx: str) -> None:
    """Profile "+alter": column x, when it exists, reads as its DEFAULT 7 in every row."""
    if not t.schema.has_column("x"):
        return
    from engine.tablet import ColumnPredicate

    n = t.count_rows()
    seven = t.scan_table([], [ColumnPredicate.equal("x", 7)]).num_rows
    assert seven == n, f"{ctx}: {n - seven} of {n} rows do not read x = 7 (its default)"


def check_time_travel(t: Tablet, hist: History, positions: list[int], before: int,
                      ctx: str) -> None:
    """Scan at each checked entry's ACK timestamp; for the last `before` of them also just
    before it (ts - 1: the state after the previous batch)."""
    entries = hist.entries
    positions = [p for p in positions if 0 <= p < len(entries) and entries[p]["ts"]]
    prev = positions[-before:] if before else []
    states = hist.states_after(positions + [p - 1 for p in prev])
    for p in positions:
        ts = entries[p]["ts"]
        got = scan_state(t, snapshot=ts)
        assert got == states[p], (f"{ctx}: time travel to batch {entries[p]['n']} "
                                  f"(ts={ts}): {describe_diff(got, states[p])}")
    for p in prev:
        ts = entries[p]["ts"] - 1
        got = scan_state(t, snapshot=ts)
        assert got == states[p - 1], (f"{ctx}: time travel to just before batch "
                                      f"{entries[p]['n']} (ts={ts}): "
                                      f"{describe_diff(got, states[p - 1])}")


def pick_positions(rng: random.Random, hist: History, recent: int, older: int) -> list[int]:
    """The last `recent` batches and `older` random earlier ones — only ACKs from the last
    10 minutes: history older than TabletConfig.history_max_age_s (15 min) may be GC'd."""
    n = len(hist.entries)
    pos = set(range(max(0, n - recent), n))
    horizon = from_micros(int((time.time() - 600) * 1e6))
    old = [i for i in range(max(0, n - recent))
           if (hist.entries[i]["ts"] or 0) > horizon]
    if old:
        pos |= {rng.choice(old) for _ in range(older)}
    return sorted(pos)


def open_tablet(path: str) -> Tablet:
    return Tablet.open(path, config=CONFIG, clock=HybridClock())


def run_cycle(path: str, seed: int, profile: str, rng: random.Random, hist: History,
              next_n: int, mode: str, ctx: str) -> int:
    """Start the child, kill it, reopen and verify; returns the next batch number."""
    child = Child(path, seed, next_n, profile)
    try:
        if mode == "early":
            time.sleep(rng.uniform(0.0, 1.0))  # may land in imports, open or replay
        else:
            if not child.wait_ready(timeout=120):
                child.kill()
                raise AssertionError(f"{ctx}: child never became READY:\n"
                                     f"{child.stderr_text()}")
            if mode == "flush":
                child.arm_flush()
                if child.flush_seen.wait(timeout=5):
                    # a flush takes ~10-300 ms: land in its early or late phases
                    time.sleep(rng.choice([0, rng.uniform(0, 0.003), rng.uniform(0, 0.03),
                                           rng.uniform(0, 0.2)]))
            else:
                time.sleep(rng.uniform(0.2, 2.0))
        assert not child.died_on_its_own(), f"{ctx}: child died:\n{child.stderr_text()}"
    finally:
        child.kill()
    assert not child.died_on_its_own(), f"{ctx}: child died:\n{child.stderr_text()}"
    try:
        return _verify_cycle(path, child, rng, hist, next_n, ctx)
    except BaseException as e:
        last = [ln.decode(errors="replace").rstrip()[:60] for ln in child.lines[-4:]]
        e.add_note(f"{ctx}: the child's last output lines: {last}; tablet: {path}")
        raise


def _verify_cycle(path: str, child: Child, rng: random.Random, hist: History, next_n: int,
                  ctx: str) -> int:
    ready, acked, pending = parse_output(child.lines)

    if ready is not None:
        r_next, r_live, r_ts = (int(x) for x in ready)
        assert r_next == next_n
        assert r_live == len(hist.state), (f"{ctx}: the child's reopen saw {r_live} live rows,"
                                           f" the model has {len(hist.state)}")
        assert r_ts >= hist.max_ts(), f"{ctx}: reopened current_timestamp {r_ts} < last ACK"
    else:
        assert not acked and pending is None
    prev_ts = hist.max_ts()
    for n, batch, ts, applied in acked:
        assert n == next_n, f"{ctx}: batch numbers skip: {n} after {next_n - 1}"
        assert ts > prev_ts, (f"{ctx}: batch {n} got timestamp {ts} <= an earlier one "
                              f"{prev_ts} (timestamps must grow across restarts)")
        want = hist.apply(n, batch, ts)
        assert applied == want, (f"{ctx}: batch {n}: the tablet applied {applied} rows, the "
                                 f"model {want}")
        prev_ts = ts
        next_n += 1

    t = open_tablet(path)
    try:
        got = scan_state(t)
        if pending is not None:
            n, batch = pending
            after = dict(hist.state)
            apply_batch(after, batch)
            if got == hist.state:
                pass  # the unACKed batch never happened; the child redoes batch n next
            elif got == after:
                hist.apply(n, batch, None)
                next_n = n + 1
            else:
                raise AssertionError(
                    f"{ctx}: after the crash the tablet is neither the state after the last "
                    f"ACK (batch {n - 1}) nor after the unACKed batch {n} "
                    f"({len(batch['ops'])} rows): vs last ACK: "
                    f"{describe_diff(got, hist.state)} | vs unACKed applied: "
                    f"{describe_diff(got, after)}")
        else:
            assert got == hist.state, f"{ctx}: lost ACKed writes: {describe_diff(got, hist.state)}"
        assert t.current_timestamp() >= hist.max_ts()
        flush_lines = [ln for ln in child.lines if ln.startswith(b"FLUSH")][-1:]
        unacked = "none" if pending is None else (
            "applied" if next_n == pending[0] + 1 else "absent")
        print(f"{ctx}: {len(acked)} ACKed, unACKed: {unacked}, last flush line: "
              f"{flush_lines[0].decode().strip() if flush_lines else '-'}, "
              f"{len(hist.state)} rows, {t.num_rowsets()} rowsets, replayed {t.replayed_ops}")
        check_files(path, t)
        check_added_column(t, ctx)
        check_time_travel(t, hist, pick_positions(rng, hist, recent=4, older=3), 2, ctx)
    finally:
        t.close()
    # reopen right away (no kill in between): the same state, the same history
    t = open_tablet(path)
    try:
        got2 = scan_state(t)
        assert got2 == hist.state, (f"{ctx}: second reopen differs: "
                                    f"{describe_diff(got2, hist.state)}")
        check_time_travel(t, hist, pick_positions(rng, hist, recent=1, older=1), 1,
                          ctx + " reopen")
    finally:
        t.close()
    return next_n


def run_crash_cycles(tmp_path, seed: int, modes: list[str], profile: str) -> None:
    os.makedirs(tmp_path, exist_ok=True)
    path = str(tmp_path / "tablet")
    rng = random.Random(seed)
    hist = History()
    next_n = 0
    for cycle, mode in enumerate(modes):
        ctx = f"seed={seed} profile={profile} cycle={cycle} mode={mode} next_batch={next_n}"
        next_n = run_cycle(path, seed, profile, rng, hist, next_n, mode, ctx)
    # Writing continues after the last reopen, with a larger timestamp.
    t = open_tablet(path)
    try:
        k = max(hist.state, default=0) + 10_000_000
        r = t.insert({"k": [k], "v": [1], "s": ["after"]})
        assert r.num_applied == 1
        assert r.timestamp > hist.max_ts()
        hist.state[k] = (1, "after")
        assert scan_state(t) == hist.state
    finally:
        t.close()
    t = open_tablet(path)
    try:
        assert scan_state(t) == hist.state
    finally:
        t.close()


def _seed(default: int) -> int:
    s = os.environ.get("KUDUSQL_CRASH_SEED")
    return int(s) if s else default


def test_crash_recovery(tmp_path):
    run_crash_cycles(tmp_path, _seed(1), ["timed", "flush", "early"], "full")


def test_crash_recovery_with_alter_table(tmp_path):
    """kill -9 at random points, also inside Tablet.alter_schema ("flush" mode lands in
    its flushes and metadata swap): no acknowledged write is lost, replay after the
    ALTER is correct, and the added column reads its default."""
    run_crash_cycles(tmp_path, _seed(2), ["timed", "flush", "flush"], "full+alter")


def test_crash_recovery_small_writes(tmp_path):
    """kill -9 while 1..4-row batches take the small-write path (compact WAL records):
    every acknowledged write is there after the reopen, nothing else is."""
    run_crash_cycles(tmp_path, _seed(3), ["timed"], "full+small")


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the long crash run")
@pytest.mark.parametrize("profile", [
    "full",
    "fresh",
    "full+rowsets",
    "full+compact",
    "full+alter",
    "full+small",
])
def test_crash_recovery_long(tmp_path, profile):
    """60 kill cycles: 6 tablets x 10 cycles each (without compactions the rowset count,
    and with it every flush_dms and scan, keeps growing on a single tablet)."""
    seed = _seed(random.randrange(1 << 30))
    print(f"crash recovery long run: seed={seed}")
    for part in range(6):
        rng = random.Random(seed * 10 + part)
        # cycle 0 creates the tablet: an early kill there could leave no tablet at all
        modes = ["timed"] + [rng.choice(["timed", "timed", "flush", "flush", "early"])
                             for _ in range(9)]
        run_crash_cycles(tmp_path / f"part{part}", seed * 10 + part, modes, profile)


# -- crashes inside maintenance, simulated in-process ----------------------------------
class _Crash(BaseException):
    """Stands for SIGKILL at a chosen point: nothing after it runs."""


def _crash(*args, **kwargs):
    raise _Crash()


@pytest.mark.parametrize("which", ["major", "minor"])
def test_crash_between_delta_compaction_and_metadata(tmp_path, monkeypatch, which):
    """Killed after a delta compaction wrote its files but before the tablet metadata naming
    them was persisted: the old files must still be there for the old metadata (found by
    the "+compact" profile: compactions used to unlink their inputs first)."""
    from engine.schema import ColumnSchema, Schema
    from engine.tablet import TabletConfig
    from engine.types import DataType

    schema = Schema([ColumnSchema("k", DataType.INT64),
                     ColumnSchema("v", DataType.INT64, nullable=True)], key=["k"])
    path = str(tmp_path / "t")
    t = Tablet.create(path, schema, TabletConfig(fsync=False))
    t.insert({"k": list(range(10)), "v": list(range(10))})
    t.flush_mrs()
    t.update({"k": [1], "v": [10]})
    t.flush_dms()
    t.update({"k": [2], "v": [20]})
    t.flush_dms()  # two REDO files
    want = sorted((k, 10 * k if k in (1, 2) else k) for k in range(10))
    monkeypatch.setattr(Tablet, "persist_metadata", _crash)  # killed before it persists
    with pytest.raises(_Crash):
        if which == "major":
            t.compact_deltas()
        else:
            t.minor_delta_compact(t._components.drss[0])
    monkeypatch.undo()
    t = Tablet.open(path, TabletConfig(fsync=False))
    assert sorted((r["k"], r["v"]) for r in t.scan_table().to_pylist()) == want
