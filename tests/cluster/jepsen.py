"""A Jepsen-style harness for the cluster: real processes, real faults, a recorded history,
checkers (issue 24; docs/guarantees.md says what it checks and what it does not).

    python -m tests.cluster.jepsen --workload register|set|counter[,...]
                                   --nemesis LIST|all|composed [--overlap N] [--cover]
                                   [--seconds S] [--seed N] [--rate-drift U] [--keep]
                                   [--prompt-timeout S] [--out DIR]

It starts a local cluster (`kudusql cluster start`: 3 masters, 4 tablet servers, 2 SQL
front ends, 50 ms Raft ticks, a tablet server silent for 4 s counts as dead), runs client
threads against it while a nemesis injects faults, heals everything, and checks:

    clients ──psycopg──▶ front end sql ─┐
            ──psycopg──▶ front end sql-1├──▶ masters ×3, tablet servers ×4 ◀── nemesis
            ──ClusterClient (engine/client, no front end) ─┘          (kill -9, SIGSTOP,
                                                                failpoint: links, clocks)
Several workloads named at once run together on the one cluster (each its own table,
client threads, history and checks) under the one fault schedule.

Workloads
  register  UPSERT (k, v) with a unique v and `SELECT v ... WHERE k = ?` of a few keys at
            a time (each key retires after KEY_OPS operations, Jepsen's independent keys, so
            every key's history stays small enough to search), through both front ends and
            through the client library directly; checked per key for linearizability
            (engine/consensus/linearizability.py, a register model). A write whose outcome
            the client did not learn (an error, a timeout, a lost connection) may or may not
            have happened; a read that failed is dropped. Besides, a *reader*: a client of
            its own that opens the table once and only reads (its reads do not count toward
            KEY_OPS). Why: the shared clients follow the master's view of a new leader
            within about a second (a lookup by table name refreshes the locations) or move
            once a write times out on the old leader (the per-try RPC timeout,
            CLIENT_RPC_TIMEOUT_S for the harness's client library), and then no longer ask a
            cut-off old leader anything; the reader, like a long-running application holding
            its table, stays with the old leader while it answers - which only a broken
            lease lets it do after a new leader took writes. Measured: without it, a leader
            at 0.02x cut off for 10-15 s gave 0 anomalies; with it, register anomalies on
            every seed tried (docs/guarantees.md §5). And a *prompt writer*: the workload's
            own puts and gets through a client library whose per-try RPC timeout is
            PROMPT_RPC_TIMEOUT_S (0.5 s, `--prompt-timeout`), so that after a leader is cut
            off a write reaches the new leader soon, not after the shared clients' 2-5 s
            per-try timeouts: measured (session 38), the first write a new leader
            acknowledged came 2.3-2.6 s after the cut without it, 0.75-1.3 s with it, and a
            lease outliving the cut by 2 s went from unseen (0 of 3 runs) to seen in 3 of
            4. The client library's
            operations record the servers they reached (`served`; "addr!": failed there).
  set       INSERT of unique elements through the three paths, and full reads (`SELECT k`)
            while it runs; checked: a read holds every element acknowledged before the read
            began (lost), holds only elements attempted before it ended (phantom), holds
            every element an earlier finished read held (Kudu's "row count never
            decreases"); no fresh element is ever reported a duplicate (a retry applied
            twice, 23505); and after healing, a final read holds every acknowledged element.
            The client-library path also reads at explicit snapshots (a timestamp from
            `Table.current_timestamp()`) and reads the same snapshot again seconds later,
            across faults: a snapshot read is repeatable, so both must hold the same
            elements (a leader that stamps a write below a snapshot already served breaks
            this: Kudu's KUDU-1188).
  counter   COUNTER_KEYS hot counters (rows inserted with v = 0 and never deleted),
            incremented concurrently: `UPDATE ... SET v = v + 1 WHERE k = $1` through both
            front ends (the no-lost-updates path: read at S, write under the precondition
            "unchanged since S", re-read on CHANGED; docs/sql.md), and through the client
            library the same read-modify-write by hand (a lookup at S = the table's
            current timestamp, an UPDATE carrying S in READ_TS_COLUMN, again on CHANGED);
            point reads of the counters through all three and a reader of its own (as in
            register). Each increment is acknowledged
            (UPDATE 1), failed (40001: nothing written) or unknown (any other error).
            Checked per key (Jepsen's counter checker): every read is at least the
            increments acknowledged before it began and at most those attempted and not
            failed before it ended; no read is less than one that ended before it began;
            every acknowledged UPDATE counted 1 row; after healing the value is in
            [acknowledged, acknowledged + unknown]. A blind write (no precondition) loses
            increments and fails the last check.

Nemeses (one fault at a time, each held 1-5 s, then healed; the schedule is a pure function
of the seed, so a seed replays the same faults - the effects depend on timing. Composed
faults: with --overlap 2 (`--nemesis composed`: every nemesis, two at once) faults come in
rounds of two overlapping ones, the second starting while the first is held and aimed at
the same tablet - a partition while a server restarts, a kill during re-replication, a
slow clock on a new leader; two faults never kill or pause the same process, and links
cut by both stay cut until both healed. --cover: each named nemesis exactly once, held
1-3 s, the ones that restart a process first so that they pair up; the run lasts until
the last has healed)
  kill            kill -9 a tablet server, start it again
  pause           SIGSTOP a tablet server, SIGCONT
  partition       isolate one tablet's leader from its followers (both directions, by the
                  `failpoint` RPC's dropped links) while clients still reach it
  ring            each tablet server reaches only its two neighbours on a ring (a majority
                  of four, a different one each)
  master-isolate  one master cut from the other masters
  clock           one master's or tablet server's wall clock moved by 2-8 s either way
                  (`failpoint` clock_offset_s: the HybridClock reads it; monotonic time not)
  membership      kill -9 a tablet server for longer than the unresponsive timeout, so the
                  master re-replicates its tablets under writes, then start it again
  master-kill     kill -9 a master, start it again
  master-pause    SIGSTOP a master, SIGCONT
  frontend-kill   kill -9 a SQL front end, start it again
  flush           every tablet server flushes its MemRowSets now (the replay point moves
                  and the log may be GC'd: what a restart after it must recover from)
  disk            every fsync of one tablet's WAL on one replica (its leader's, half the
                  time) fails with EIO after 0-19 more succeed (`failpoint` inject_eio,
                  engine/fs.py): the replica is FAILED, a leader hands over, the master
                  replaces it (3-4-3, maybe a tablet copy) under writes; held 4-8 s, then
                  the victim server restarts (an operator replaced the disk)
  clock-rate      one master's or tablet server's monotonic clock (leader leases, Raft
                  ticks) runs at 1 - u or 1 / (1 - u) times real time, u up to
                  --rate-drift (default 0.08: inside the ~11% leases rely on;
                  `failpoint` monotonic_rate, engine/clock.py)
  lease-break     (only when named; not in all / composed) one tablet's leader's
                  monotonic clock at exactly 1 - --rate-drift, then that leader cut from
                  its followers (clients still reach it) for 10-15 s; healed links first,
                  then the rate. Within the bound (0.08: 0.92x) its lease lapses before
                  anyone else can lead; far outside (0.98: 0.02x, a 0.4 s lease lasting
                  20 s) it answers the reader from its stale state after the new leader
                  took writes: the register checker's bite test
Every process runs with KUDUSQL_FAULT_INJECTION=1 (the disk and clock-rate failpoints are
refused without it).

After healing
  - progress: writes succeed again within 60 s;
  - replicas: every replica of every tablet in its leader's configuration holds the same
    rows at one snapshot (the latest) and at snapshots taken during the run (their MVCC
    history above the ancient history mark);
  - replicas: a FAILED replica still in a leader's configuration 60 s after healing (the
    master did not replace it) is an anomaly; so is a tablet without a leader (the
    anomaly lists what each replica says: role, state, term, leader, configuration, last
    and commit index, and which servers hold a tombstone of it), a member a leader names
    whose server runs no replica of it, and a tablet server that does not answer
    `status` (it is named: its leaders would otherwise look like leaderless tablets);
  - logs: no server log holds a traceback, an AssertionError or a SAFETY VIOLATION (except
    the traceback of a replica failing on the disk nemesis's injected EIO).
Each failed check is one anomaly. The history is written to DIR/history.jsonl
(DIR/history-W.jsonl per workload when several run; each operation's `at` is when it ended,
on the fault log's clock), the fault log to DIR/nemesis.log; the last line printed is
`N ops, M anomalies`; the exit code is 0 only when M is 0. The cluster is always stopped; its directory is kept with --keep or when
anomalies were found.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import dataclasses
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from engine.consensus.linearizability import Operation, check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMING = ["--tick-ms", "50", "--election-ticks", "10", "--heartbeat-ms", "250"]
UNRESPONSIVE_S = 4.0
NEMESES = ("kill", "pause", "partition", "ring", "master-isolate", "clock", "membership",
           "master-kill", "master-pause", "frontend-kill", "flush", "disk", "clock-rate")
# faults that end by restarting a process (the slow part of a round)
RESTARTS = ("kill", "membership", "master-kill", "frontend-kill", "disk")
# breaks the bound leases rely on, on purpose (the checkers must then see stale reads): only
# when named, never part of "all" / "composed"
AIMED = ("lease-break",)
# clock-rate: a process's monotonic clock runs at (1 - u) or 1 / (1 - u) of real time, u in
# [RATE_DRIFT / 2, RATE_DRIFT]; leases are safe while rates differ by less than ~11%
# (engine/consensus/raft.py), so the default stays inside that bound (--rate-drift)
RATE_DRIFT = 0.08
FAULT_ENV = "KUDUSQL_FAULT_INJECTION"
KEY_OPS = 60  # register: operations on one key before it retires
ACTIVE_KEYS = 3
COVER_GRACE_S = 90.0  # cover: how much longer than its schedule a run waits for its faults
# how long a restarted process may take to answer before that counts as an anomaly: a front
# end restarted by frontend-kill took 32 s to listen at load 36-46 (session 38, seed 102:
# its Python start, not a fault), so 30 s failed runs with "does not answer"
RESTART_ANSWER_S = 60.0
READER_PAUSE_S = 0.02  # the reader client's pause between reads (its reads are cheap)
COUNTER_KEYS = 3  # counter: hot keys
COUNTER_ROUNDS = 50  # counter, client library: reads of a changing row before 40001
STATEMENT_TIMEOUT_MS = 12_000
CLIENT_TIMEOUT_S = 12.0
# the client library's per-try RPC timeout (engine/client: 5 s by default): a write stuck on
# a cut-off leader moves on to the new one after this, which bounds how long a broken
# lease must outlive the cut before the checker can see it (docs/guarantees.md §5)
CLIENT_RPC_TIMEOUT_S = 2.0
# register: the *prompt writer*'s per-try RPC timeout (a client-library writer of its own):
# measured, the first write a new leader acknowledged after a lease-break cut came from a
# retry after CLIENT_RPC_TIMEOUT_S on the old leader, 2.3-2.6 s after the cut (the front
# ends' writes waited their 5 s), so a broken lease had to outlive the cut by more than that
# to be seen; this writer leaves a stuck leader sooner (docs/guarantees.md §5 has the runs).
# 0 (--prompt-timeout 0): no such writer
PROMPT_RPC_TIMEOUT_S = 0.5
# a traceback logged as a replica FAILED on the disk nemesis's EIO is the fault, not a bug
# (engine/fs.py's message; raft_host.py `fail`'s line)
INJECTED = "injected EIO"
DISK_FAILED = "stopped for good: disk failed"
LOG_PATTERNS = re.compile(r"Traceback \(most recent call last\)|AssertionError|"
                          r"SAFETY VIOLATION")


# -- the fault schedule ------------------------------------------------------------------------
@dataclasses.dataclass
class Fault:
    kind: str
    target: int  # index among the processes of the role the fault hits
    hold: float  # seconds the fault lasts
    gap: float  # seconds of calm after it
    offset: float = 0.0  # clock: seconds
    tablet: int = 0  # partition, disk, leader-aimed faults: which tablet (sorted index)
    rate: float = 1.0  # clock-rate: the victim's monotonic seconds per real second
    after: int = 0  # disk: fsyncs that still succeed before EIO
    joint: bool = False  # starts inside the previous fault's round (overlapping it)
    lag: float = 0.0  # joint: seconds after its round began


def schedule(seed: int, nemeses: list[str], seconds: float, overlap: int = 1,
             rate_drift: float = RATE_DRIFT, cover: bool = False) -> list[Fault]:
    """The faults of a run, from the seed alone (a seed replays its schedule). With
    `overlap` 2, faults come in rounds of two held at once: the second starts while the
    first is held and aims at the same tablet (its leader, when either fault aims at a
    leader), as Jepsen's composed nemeses do (a partition while a server restarts, a kill
    during re-replication, a clock skew on a new leader). With `cover`, each of `nemeses`
    comes exactly once, however long that takes (`seconds` is not looked at;
    `schedule_end` says how long), held 1-3 s (membership and disk as long as always): a
    short run that still meets every fault class. Its order is drawn from the seed, the
    RESTARTS first (two in a round restart at once)."""
    rng = random.Random(seed)
    out, t = [], 3.0
    queue = []
    if cover:  # popped from the end: the faults that restart a process first, so that
        # rounds pair them and their restarts (seconds each) overlap
        slow = [n for n in nemeses if n in RESTARTS]
        queue = rng.sample([n for n in nemeses if n not in RESTARTS], len(nemeses) - len(slow))
        queue += rng.sample(slow, len(slow))

    def draw() -> Fault:
        kind = queue.pop() if cover else rng.choice(nemeses)
        hold = rng.uniform(1.0, 3.0 if cover else 5.0)  # cover: short, but past elections
        if kind == "membership":
            hold = UNRESPONSIVE_S + rng.uniform(4.0, 8.0)
        f = Fault(kind, rng.randrange(1 << 16), hold, rng.uniform(0.5, 1.5 if cover else 2.5),
                  offset=rng.choice((-1, 1)) * rng.uniform(2.0, 8.0),
                  tablet=rng.randrange(1 << 16))
        u = rng.uniform(rate_drift / 2, rate_drift)
        f.rate = (1 - u) if rng.random() < 0.5 else 1 / (1 - u)
        f.after = rng.randrange(0, 20)
        if kind == "disk":  # long enough for the master to replace the FAILED replica
            f.hold = rng.uniform(4.0, 8.0)
        if kind == "lease-break":  # long enough for clients to find the new leader;
            f.hold, f.rate = rng.uniform(10.0, 15.0), 1 - rate_drift  # slow by exactly that
        return f

    while nemeses and (queue if cover else t < seconds):
        first = draw()
        out.append(first)
        span, last = first.hold, first
        for _ in range(overlap - 1):
            if cover and not queue:
                break
            f = draw()
            f.joint, f.lag, f.tablet = True, rng.uniform(0.0, 0.8 * first.hold), first.tablet
            out.append(f)
            span, last = max(span, f.lag + f.hold), f
        t += span + last.gap + 0.5
    return out


def schedule_end(faults: list[Fault]) -> float:
    """Seconds from the run's start until the schedule's last fault has healed and its
    calm passed (as `schedule` counts; restarts that take longer stretch it)."""
    t = 3.0
    for batch in rounds(faults):
        t += max(f.lag + f.hold for f in batch) + batch[-1].gap + 0.5
    return t


def rounds(faults: list[Fault]) -> list[list[Fault]]:
    """The schedule's rounds: a fault and the joint ones after it."""
    out: list[list[Fault]] = []
    for f in faults:
        if f.joint and out:
            out[-1].append(f)
        else:
            out.append([f])
    return out


# -- the cluster -------------------------------------------------------------------------------
def _cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kudusql.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


class Cluster:
    """The local cluster under test (cluster.json names its processes)."""

    def __init__(self, path: str, tservers: int = 4):
        self.dir = path
        self._lock = threading.Lock()  # restarts rewrite cluster.json
        # every process honours the disk and clock-rate failpoints (engine/fs.py: refused
        # otherwise); restored by stop()
        self._env_before = os.environ.get(FAULT_ENV)
        os.environ[FAULT_ENV] = "1"
        try:
            from kudusql.cluster import _free_port
            r = _cli("cluster", "start", "--data-dir", path, "--masters", "3", "--tservers",
                     str(tservers), "--sql-frontends", "2", "--port", str(_free_port()),
                     "--timeout", "90", "--tserver-unresponsive-timeout", str(UNRESPONSIVE_S),
                     *TIMING, timeout=180)
            if r.returncode != 0:
                self.stop_all()  # whatever did start: a failed start leaves nothing running
                raise RuntimeError(f"cluster start failed: {r.stdout}{r.stderr}")
            from kudusql.cluster import rpc_client_for
            self.rpc = rpc_client_for(path, 2)
        except BaseException:
            self._restore_env()
            raise

    def procs(self, role: str | None = None) -> list[dict]:
        with open(os.path.join(self.dir, "cluster.json")) as f:
            ps = json.load(f)["processes"]
        return [p for p in ps if role is None or p["role"] == role]

    def proc(self, name: str) -> dict:
        return next(p for p in self.procs() if p["name"] == name)

    def kill(self, name: str) -> None:
        try:
            os.kill(self.proc(name)["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
        _wait(lambda: not _alive(self.proc(name)["pid"]), 10, f"{name} did not die")

    def restart(self, name: str) -> None:
        from kudusql.cluster import restart_process
        with self._lock:
            if not _alive(self.proc(name)["pid"]):
                restart_process(self.dir, name)

    def answers(self, name: str, timeout: float = RESTART_ANSWER_S) -> str | None:
        """None once the process answers (RPC ping, or a SQL connection for a front end)
        within `timeout`; else what went wrong, with the end of its log."""
        p = self.proc(name)
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if not _alive(p["pid"]):
                last = "exited"
                break
            try:
                if p["role"] == "sql":
                    import psycopg
                    psycopg.connect(host="127.0.0.1", port=p["port"], user="kudusql",
                                    dbname="kudusql", connect_timeout=3).close()
                else:
                    self.rpc.call(p["addr"], "ping", timeout_s=2)
                return None
            except Exception as e:  # noqa: BLE001 - still starting
                last = e
                time.sleep(0.2)
        try:
            with open(os.path.join(self.dir, "logs", f"{name}.log"), errors="replace") as f:
                tail = " | ".join(f.read().splitlines()[-6:])
        except OSError:
            tail = ""
        return f"{name} does not answer {timeout:.0f} s after its restart ({last}); log: " \
               f"{tail[-600:]}"

    def signal(self, name: str, sig: int) -> None:
        try:
            os.kill(self.proc(name)["pid"], sig)
        except (ProcessLookupError, KeyError, TypeError):  # gone, or never started
            pass

    def failpoint(self, name: str, payload: dict) -> str | None:
        """None once the process took it; else why not (a dead or paused process: nothing
        to heal there, nothing injected)."""
        p = self.proc(name)
        try:
            self.rpc.call(p["addr"], "failpoint", payload, timeout_s=3)
            return None
        except Exception as e:  # noqa: BLE001
            return str(e)[:200]

    def master_call(self, action: str, payload=None):
        last = None
        for m in self.procs("master"):
            try:
                return self.rpc.call(m["addr"], action, payload, timeout_s=3)
            except Exception as e:  # noqa: BLE001 - not the leader, or down: the next
                last = e
        raise RuntimeError(f"no master answered {action}: {last}")

    def heal(self) -> None:
        """Every process running, none paused, no dropped link, no clock offset."""
        for p in self.procs():
            if p["role"] == "sql":
                continue
            self.signal(p["name"], signal.SIGCONT)
        for p in self.procs():
            self.restart(p["name"])
        for p in self.procs():
            if p["role"] != "sql":
                self.failpoint(p["name"], {"drop_to": [], "clock_offset_s": 0,
                                           "inject_eio": None, "monotonic_rate": 1.0})

    def stop(self) -> None:
        try:
            self.stop_all()
        finally:
            self.rpc.close()
            self._restore_env()

    def _restore_env(self) -> None:
        if self._env_before is None:
            os.environ.pop(FAULT_ENV, None)
        else:
            os.environ[FAULT_ENV] = self._env_before

    def stop_all(self) -> None:
        """Every process of the cluster stopped (SIGCONT first: a paused one cannot stop)."""
        try:
            procs = self.procs()
        except FileNotFoundError:  # cluster start failed before writing cluster.json
            return
        for p in procs:
            self.signal(p["name"], signal.SIGCONT)
        try:
            _cli("cluster", "stop", "--data-dir", self.dir, timeout=60)
        except subprocess.TimeoutExpired:  # a slow stop (load 35+): killed below; the run's
            pass  # verdict is already printed and must stand, not end in a traceback
        finally:
            for p in self.procs():
                self.signal(p["name"], signal.SIGKILL)

    def sql_port(self, i: int) -> int:
        return self.procs("sql")[i]["port"]


def _alive(pid) -> bool:
    from kudusql.cluster import _alive as alive
    return alive(pid)


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(what)
        time.sleep(0.05)


# -- the nemesis -------------------------------------------------------------------------------
class Nemesis:
    def __init__(self, cluster: Cluster, faults: list[Fault], log_path: str):
        self.c = cluster
        self.faults = faults
        self.log = open(log_path, "w")
        self.done = 0
        self.errors: list[str] = []
        self.anomalies: list[str] = []  # processes that did not come back
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._busy: set[str] = set()  # what a fault holds now (a process, "clock:" name...)
        self._drops: dict[str, collections.Counter] = {}  # process -> links cut, by count
        self.thread = threading.Thread(target=self._run, daemon=True, name="nemesis")
        self.t0 = time.monotonic()

    def start(self) -> "Nemesis":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=60)
        self.log.close()

    def _note(self, text: str) -> None:
        with self._log_lock:  # the faults of a round note from their own threads
            self.log.write(f"{time.monotonic() - self.t0:8.2f} {text}\n")
            self.log.flush()

    def _run(self) -> None:
        self._stop.wait(3.0)  # the workload gets going first
        for batch in rounds(self.faults):
            if self._stop.is_set():
                return
            if len(batch) == 1:
                self._one(batch[0])
            else:  # held at once: each fault on its own thread, from its lag on
                ts = [threading.Thread(target=self._one, args=(f,), daemon=True,
                                       name=f"nemesis-{f.kind}") for f in batch]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
            self._stop.wait(batch[-1].gap)

    def _one(self, f: Fault) -> None:
        if f.lag:
            self._stop.wait(f.lag)
        if self._stop.is_set():
            return
        try:
            self._inject(f)
        except Exception as e:  # noqa: BLE001 - recorded; the run goes on
            with self._lock:
                self.errors.append(f"{f.kind}: {e}")
            self._note(f"error {f.kind}: {e}")
        with self._lock:
            self.done += 1

    def _hold(self, f: Fault) -> None:
        self._stop.wait(f.hold)

    def _claim(self, names: list[str], start: int, prefer: str | None = None,
               space: str = "") -> str | None:
        """The first of `prefer`, then `names` from `start` on, that no other fault of the
        round holds (in `space`: a process may be paused by one fault and have its clock
        moved by another, not be killed by two); None when all are held."""
        order = ([prefer] if prefer else []) + [names[(start + i) % len(names)]
                                                for i in range(len(names))]
        with self._lock:
            for n in order:
                if space + n not in self._busy:
                    self._busy.add(space + n)
                    return n
        return None

    def _release(self, name: str, space: str = "") -> None:
        with self._lock:
            self._busy.discard(space + name)

    def _inject(self, f: Fault) -> None:
        c = self.c
        ts = [p["name"] for p in c.procs("tserver")]
        ms = [p["name"] for p in c.procs("master")]
        if f.kind in ("kill", "membership", "master-kill", "frontend-kill"):
            names = {"kill": ts, "membership": ts, "master-kill": ms,
                     "frontend-kill": [p["name"] for p in c.procs("sql")]}[f.kind]
            prefer = None
            if f.kind in ("kill", "membership") and f.tablet % 2 == 0:
                prefer = self._leader_of(f.tablet)
            victim = self._claim(names, f.target, prefer)
            if victim is None:
                self._note(f"{f.kind}: every candidate is held by another fault")
                return
            try:
                self._note(f"{f.kind} {victim} for {f.hold:.1f}s")
                c.kill(victim)
                try:
                    self._hold(f)
                finally:
                    c.restart(victim)
                problem = c.answers(victim)
            finally:
                self._release(victim)
            if problem:
                with self._lock:
                    self.anomalies.append(problem)
                self._note(problem)
        elif f.kind in ("pause", "master-pause"):
            names = ts if f.kind == "pause" else ms
            prefer = self._leader_of(f.tablet) if f.kind == "pause" and f.tablet % 2 == 0 \
                else None
            victim = self._claim(names, f.target, prefer)
            if victim is None:
                self._note(f"{f.kind}: every candidate is held by another fault")
                return
            self._note(f"{f.kind} {victim} for {f.hold:.1f}s")
            c.signal(victim, signal.SIGSTOP)
            try:
                self._hold(f)
            finally:
                c.signal(victim, signal.SIGCONT)
                self._release(victim)
        elif f.kind == "partition":
            self._partition_leader(f)
        elif f.kind == "ring":
            order = list(ts)
            random.Random(f.target).shuffle(order)
            n = len(order)
            cuts = {}
            for i, name in enumerate(order):
                near = {order[(i - 1) % n], order[(i + 1) % n], name}
                cuts[name] = [c.proc(o)["addr"] for o in order if o not in near]
            self._note(f"ring {' - '.join(order)} for {f.hold:.1f}s")
            self._cut(cuts, f)
        elif f.kind == "master-isolate":
            victim = ms[f.target % len(ms)]
            others = [m for m in ms if m != victim]
            cuts = {victim: [c.proc(o)["addr"] for o in others]}
            for o in others:
                cuts[o] = [c.proc(victim)["addr"]]
            self._note(f"master-isolate {victim} for {f.hold:.1f}s")
            self._cut(cuts, f)
        elif f.kind == "flush":
            self._note("flush every tablet server's MemRowSets")
            for name in ts:
                try:
                    c.rpc.call(c.proc(name)["addr"], "flush", {}, timeout_s=30)
                except Exception as e:  # noqa: BLE001 - down or paused: the next one
                    self._note(f"flush {name}: {e}")
        elif f.kind in ("clock", "clock-rate"):
            names = ts + ms
            prefer = self._leader_of(f.tablet) if f.kind == "clock-rate" and \
                f.tablet % 2 == 0 else None
            victim = self._claim(names, f.target, prefer, space=f.kind + ":")
            if victim is None:
                self._note(f"{f.kind}: every candidate is held by another fault")
                return
            key, value = ("clock_offset_s", f.offset) if f.kind == "clock" else \
                ("monotonic_rate", f.rate)
            healed = 0.0 if f.kind == "clock" else 1.0
            what = f"{f.offset:+.1f}s" if f.kind == "clock" else f"rate x{f.rate:.3f}"
            try:
                problem = c.failpoint(victim, {key: value})
                self._note(f"{f.kind} {victim} {what} for {f.hold:.1f}s"
                           + (f" (not taken: {problem})" if problem else ""))
                self._hold(f)
            finally:
                c.failpoint(victim, {key: healed})
                self._release(victim, space=f.kind + ":")
        elif f.kind == "disk":
            self._disk(f)
        elif f.kind == "lease-break":
            self._lease_break(f)
        else:
            raise ValueError(f"unknown nemesis {f.kind!r}")

    def _disk(self, f: Fault) -> None:
        """EIO on every fsync of one tablet's write-ahead log on one of its replicas (the
        leader's when `target` is even) after `after` more succeed: the replica is FAILED
        (stops acking, voting, leading, serving; a leader hands over) and the master
        replaces it (re-replication, maybe a tablet copy) while clients write. At the end
        of the hold the injection stops and the victim server is restarted, as an operator
        who replaced the disk would (a replica not replaced meanwhile reopens its files)."""
        c = self.c
        aimed = self._aimed(f.tablet, "disk")
        if aimed is None:
            return
        by_uuid, tid, leader, peers = aimed
        order = [leader] + sorted(u for u in peers if u != leader)
        if f.target % 2:
            order = order[1:] + order[:1]
        names = [by_uuid[u]["name"] for u in order if u in by_uuid]
        victim = self._claim(names, 0) if names else None  # a process: it is restarted
        if victim is None:
            self._note(f"disk: every replica of {tid[:8]} is held by another fault")
            return
        try:
            problem = c.failpoint(victim, {"inject_eio": {
                "glob": f"*/tablets/{tid}/raft-wal", "after": f.after}})
            role = "leader" if victim == by_uuid[leader]["name"] else "follower"
            self._note(f"disk {victim} ({role}) of {tid[:8]}: EIO after {f.after} fsyncs "
                       f"for {f.hold:.1f}s" + (f" (not taken: {problem})" if problem else ""))
            try:
                self._hold(f)
            finally:
                c.failpoint(victim, {"inject_eio": None})
                c.kill(victim)
                c.restart(victim)
            problem = c.answers(victim)
        finally:
            self._release(victim)
        if problem:
            with self._lock:
                self.anomalies.append(problem)
            self._note(problem)

    def _lease_break(self, f: Fault) -> None:
        """Slow one tablet's leader's monotonic clock to `f.rate` (far outside the bound
        leases rely on), then cut it from its followers for the hold: its lease, counted on
        that clock, outlives the election of a new leader on the majority side, so a
        client still routed to it may read a value the new leader has overwritten. Healed:
        links first, then the rate (the old leader hears the new term and steps down)."""
        c = self.c
        aimed = self._aimed(f.tablet, "lease-break")
        if aimed is None:
            return
        by_uuid, tid, leader, peers = aimed
        lp = by_uuid[leader]
        if self._claim([lp["name"]], 0, space="clock-rate:") is None:
            self._note(f"lease-break: {lp['name']}'s clock is held by another fault")
            return
        try:
            problem = c.failpoint(lp["name"], {"monotonic_rate": f.rate})
            followers = [by_uuid[u] for u in peers if u != leader and u in by_uuid]
            cuts = {lp["name"]: [p["addr"] for p in followers]}
            for p in followers:
                cuts[p["name"]] = [lp["addr"]]
            self._note(f"lease-break: leader {lp['name']} of {tid[:8]} at rate x{f.rate:.3f}, "
                       f"cut from {', '.join(p['name'] for p in followers)} for "
                       f"{f.hold:.1f}s" + (f" (rate not taken: {problem})" if problem else ""))
            self._cut(cuts, f)
        finally:
            c.failpoint(lp["name"], {"monotonic_rate": 1.0})
            self._release(lp["name"], space="clock-rate:")
        self._note(f"lease-break: {lp['name']} healed")

    def _cut(self, cuts: dict[str, list[str]], f: Fault) -> None:
        """Drop the links `cuts` names (process -> addresses it cannot send to) for the
        hold; links another fault of the round cut stay cut until it heals them too (each
        process is sent the union, under the lock, so two faults' updates cannot cross)."""
        def push(names) -> None:
            for name in names:
                self.c.failpoint(name, {"drop_to": sorted(self._drops.get(name, ()))})
        try:
            with self._lock:
                for name, addrs in cuts.items():
                    self._drops.setdefault(name, collections.Counter()).update(addrs)
                push(cuts)
            self._hold(f)
        finally:
            with self._lock:
                for name, addrs in cuts.items():
                    self._drops[name] -= collections.Counter(addrs)  # drops counts <= 0
                push(cuts)

    def _leaders(self) -> tuple[dict, dict]:
        """(tserver uuid -> its process, tablet id -> (leader uuid, its peers)) as the
        reachable tablet servers report them now."""
        c = self.c
        by_uuid, leaders = {}, {}
        for p in c.procs("tserver"):
            try:
                st = c.rpc.call(p["addr"], "status", timeout_s=2)
            except Exception:  # noqa: BLE001 - down or paused
                continue
            by_uuid[st["uuid"]] = p
            for tid, t in st["tablets"].items():
                if t.get("role") == "LEADER":
                    leaders[tid] = (st["uuid"], t.get("peers", []))
        return by_uuid, leaders

    def _leader_of(self, index: int) -> str | None:
        """The tablet server leading one tablet (chosen by `index`), if any is known: half
        of the kills and pauses hit a leader, so that leadership moves under load."""
        aimed = self._aimed(index)
        return None if aimed is None else aimed[0][aimed[2]]["name"]

    def _aimed(self, index: int, what: str | None = None) -> tuple | None:
        """(tserver uuid -> its process, tablet id, leader uuid, its peers) for one tablet
        with a known leader, chosen by `index` among them; None, noted as `what`'s if
        given, when no leader is known."""
        by_uuid, leaders = self._leaders()
        if not leaders:
            if what is not None:
                self._note(f"{what}: no leader found")
            return None
        tid = sorted(leaders)[index % len(leaders)]
        leader, peers = leaders[tid]
        return by_uuid, tid, leader, peers

    def _partition_leader(self, f: Fault) -> None:
        """Cut one tablet's leader from its followers; clients and masters still reach it."""
        aimed = self._aimed(f.tablet, "partition")
        if aimed is None:
            return
        by_uuid, tid, leader, peers = aimed
        lp = by_uuid[leader]
        followers = [by_uuid[u] for u in peers if u != leader and u in by_uuid]
        cuts = {lp["name"]: [p["addr"] for p in followers]}
        for p in followers:
            cuts[p["name"]] = [lp["addr"]]
        self._note(f"partition leader {lp['name']} of {tid[:8]} from "
                   f"{', '.join(p['name'] for p in followers)} for {f.hold:.1f}s")
        self._cut(cuts, f)


# -- clients -----------------------------------------------------------------------------------
class History:
    def __init__(self):
        self._lock = threading.Lock()
        self._t = itertools.count()
        self.ops: list[dict] = []
        self.t0 = time.monotonic()  # the nemesis's zero (Nemesis.t0), set as it starts

    def now(self) -> int:
        with self._lock:
            return next(self._t)

    def add(self, op: dict) -> None:
        op["at"] = round(time.monotonic() - self.t0, 3)  # when it ended (nemesis.log's clock)
        with self._lock:
            self.ops.append(op)


class SqlPath:
    """One client connection through a front end (psycopg, autocommit); reconnects after a
    failure."""

    def __init__(self, cluster: Cluster, frontend: int):
        self.c = cluster
        self.frontend = frontend
        self.conn = None
        self.name = f"sql{frontend}"
        self._failed_at = 0.0

    def _connect(self):
        import psycopg
        if self.conn is None or self.conn.closed:
            if self._failed_at and time.monotonic() - self._failed_at < 0.2:
                time.sleep(0.2)  # the front end is down: do not spin on refusals
            self.conn = psycopg.connect(
                host="127.0.0.1", port=self.c.sql_port(self.frontend), user="kudusql",
                dbname="kudusql", autocommit=True, connect_timeout=5,
                options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}")
        return self.conn

    def execute(self, sql: str, params=()):
        try:
            cur = self._connect().execute(sql, params)
            return cur.fetchall() if cur.description else None
        except Exception as e:
            import psycopg
            if isinstance(e, psycopg.OperationalError):
                self._failed_at = time.monotonic()
            self.close()
            raise

    def rowcount(self, sql: str, params=()) -> int:
        """Run a write; the rows it reports (`UPDATE n`)."""
        try:
            return self._connect().execute(sql, params).rowcount
        except Exception as e:
            import psycopg
            if isinstance(e, psycopg.OperationalError):
                self._failed_at = time.monotonic()
            self.close()
            raise

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self.conn = None


class _RecordingRpc:
    """The client library's RpcClient, noting per thread every tablet server address a
    call went to and how it ended ("addr" answered, "addr!" failed): the history says
    which server served each client-library operation (a stale read's server)."""

    def __init__(self, rpc):
        self._rpc = rpc
        self.local = threading.local()

    def take(self) -> list[str]:
        out = getattr(self.local, "seen", [])
        self.local.seen = []
        return out

    def __getattr__(self, name):
        fn = getattr(self._rpc, name)
        if name not in ("call", "put", "get"):
            return fn

        def recorded(addr, *a, **kw):
            seen = self.local.__dict__.setdefault("seen", [])
            if len(seen) > 64:  # a workload that never takes them (set): the latest only
                del seen[:-16]
            try:
                out = fn(addr, *a, **kw)
            except Exception:
                seen.append(addr + "!")
                raise
            seen.append(addr)
            return out
        return recorded


class ClientPath:
    """The client library directly (engine/client RemoteCatalog + Table), no front end."""

    name = "client"

    def __init__(self, cluster: Cluster, rpc_timeout_s: float = CLIENT_RPC_TIMEOUT_S):
        from kudusql.cluster import remote_catalog_for
        self.cat = remote_catalog_for(cluster.dir, timeout_s=CLIENT_TIMEOUT_S,
                                      rpc_timeout_s=rpc_timeout_s)
        self.rpc = self.cat.client.rpc = _RecordingRpc(self.cat.client.rpc)

    def keep_tables(self) -> "ClientPath":
        """Open each table once and keep the handle, as a long-running application holds
        its table (Kudu's KuduTable): its tablet locations then change only when a server
        refuses (NOT_THE_LEADER, a lapsed lease, unreachable), never by a name lookup's
        refresh from the master, which `table` by name does at most every second
        (engine/client: METADATA_TTL_S)."""
        self._tables: dict = {}
        return self

    def served(self) -> list[str]:
        """The addresses this thread's calls went to since the last `served`."""
        return self.rpc.take()

    def table(self, name: str):
        kept = getattr(self, "_tables", None)
        if kept is None:
            return self.cat.table(name)
        if name not in kept:
            kept[name] = self.cat.table(name)
        return kept[name]

    def close(self):
        self.cat.close()


def _sqlstate(e: BaseException) -> str | None:
    return getattr(e, "sqlstate", None)


class _Workload:
    """A table of (key BIGINT PRIMARY KEY, value BIGINT), RF=3 over 4 hash tablets, and the
    history its operations go to."""

    table = ""
    columns = ("k", "v")

    def __init__(self, history: History):
        self.h = history

    def setup(self, sql: SqlPath) -> None:
        k, v = self.columns
        sql.execute(f"CREATE TABLE {self.table} ({k} BIGINT PRIMARY KEY, {v} BIGINT) PARTITION "
                    f"BY HASH ({k}) PARTITIONS 4 WITH (replication_factor = 3)")


class RegisterWorkload(_Workload):
    """UPSERT / point SELECT of a few keys at a time (see the module docstring)."""

    table = "jreg"
    columns = ("k", "v")
    prompt = True  # run() adds a prompt writer (PROMPT_RPC_TIMEOUT_S)

    def __init__(self, history: History):
        super().__init__(history)
        self._lock = threading.Lock()
        self._next_key = 0
        self._value = itertools.count(1)
        self.keys: dict[int, int] = {}  # active key -> operations started on it
        for _ in range(ACTIVE_KEYS):
            self._fresh()

    def _fresh(self) -> None:
        self.keys[self._next_key] = 0
        self._next_key += 1

    def _pick(self, rng: random.Random, count: bool = True) -> int:
        """An active key; `count`: the operation counts toward the key's KEY_OPS (the
        reader's do not: its fast reads would retire a key on a stuck tablet before the
        writers got past it, and a key's reads cost the checker little)."""
        with self._lock:
            k = rng.choice(sorted(self.keys))
            if not count:
                return k
            self.keys[k] += 1
            if self.keys[k] >= KEY_OPS:
                del self.keys[k]
                self._fresh()
            return k

    def step(self, path, rng: random.Random, client_id: int) -> None:
        k = self._pick(rng)
        if rng.random() < 0.5:
            v = next(self._value)
            op = {"client": client_id, "path": path.name, "kind": "put", "key": k,
                  "value": v, "call": self.h.now()}
            try:
                if isinstance(path, SqlPath):
                    path.execute(f"UPSERT INTO {self.table} VALUES (%s, %s)", (k, v))
                else:
                    r = path.table(self.table).upsert({"k": [k], "v": [v]})
                    if r.row_errors:
                        raise RuntimeError(f"row error {r.row_errors[0]}")
                op["ret"] = self.h.now()
            except Exception as e:  # noqa: BLE001 - outcome unknown: may have happened
                op["ret"], op["error"] = None, f"{_sqlstate(e)} {str(e)[:200]}"
            _note_served(path, op)
            self.h.add(op)
        else:
            self._get(path, k, client_id)

    def read_step(self, path, rng: random.Random, client_id: int) -> None:
        """The reader client's operation: a read of an active key."""
        self._get(path, self._pick(rng, count=False), client_id)

    def _get(self, path, k: int, client_id: int) -> None:
        _record_read(self.h, path, self.table, {
            "client": client_id, "path": path.name, "kind": "get", "key": k,
            "value": None, "call": self.h.now()})

    def check(self, ops: list[dict]) -> list[str]:
        # A write whose outcome is unknown and whose value no read returned may be left
        # out of every linearization (an unknown op may never have happened): dropping it
        # keeps the search small without hiding anything (Knossos does the same).
        read = {o.get("output") for o in ops if o["kind"] == "get" and o.get("ret") is not None}
        hist = [Operation(o["client"], o["kind"], o["key"], o.get("value"), o["call"],
                          o.get("ret"), o.get("output")) for o in ops
                if not (o["kind"] == "put" and o.get("ret") is None
                        and o.get("value") not in read)]
        anomalies = []
        by_key: dict[int, list[Operation]] = {}
        for op in hist:
            by_key.setdefault(op.key, []).append(op)  # (the harness's key -1 is not here)
        unknown = 0
        for k in sorted(by_key):
            ok, _ = check(by_key[k], max_states=100_000)
            if ok is False:
                anomalies.append(f"register key {k}: not linearizable: "
                                 f"{_show_key(ops, k)}")
            elif ok is None:
                unknown += 1
        if unknown:
            print(f"register: {unknown} keys too large to search (not counted)")
        return anomalies



def _note_served(path, op: dict) -> None:
    """The client library's op: the servers its calls went to ("addr!": failed there)."""
    if isinstance(path, ClientPath):
        op["served"] = path.served()


def _record_read(h, path, table: str, op: dict) -> None:
    """Read `op`'s key of `table` through `path` (its call time already set) and add the
    operation to history `h`: its return time and output, or no return and the error (a
    failed read has no effect), and the servers it reached."""
    try:
        out = _read_v(path, table, op["key"])
        op["ret"], op["output"] = h.now(), out
    except Exception as e:  # noqa: BLE001 - a failed read has no effect
        op["ret"], op["error"] = None, f"{_sqlstate(e)} {str(e)[:200]}"
    _note_served(path, op)
    h.add(op)


def _read_v(path, table: str, k: int):
    """Column v of key k read through `path` (a front end's SELECT, or the client
    library's point lookup); None when there is no such row."""
    if isinstance(path, SqlPath):
        rows = path.execute(f"SELECT v FROM {table} WHERE k = %s", (k,))
        return rows[0][0] if rows else None
    row = path.table(table).lookup((k,), ["v"])
    return None if row is None else _first_value(row)


def _first_value(row):
    if isinstance(row, dict):
        return next(iter(row.values()))
    if isinstance(row, (list, tuple)):
        return row[0]
    return row


def _show_key(ops: list[dict], k: int, limit: int = 40) -> str:
    mine = sorted((o for o in ops if o["key"] == k), key=lambda o: o["call"])
    parts = []
    for o in mine[:limit]:
        ret = "?" if o.get("ret") is None else o["ret"]
        what = f"put {o['value']}" if o["kind"] == "put" else f"get->{o.get('output')}"
        at = f" @{o['served'][-1]}" if o.get("served") else ""  # the server that answered
        parts.append(f"[{o['call']}..{ret} {o['path']} {what}{at}]")
    return " ".join(parts)


class SetWorkload(_Workload):
    """INSERT unique elements; full reads while it runs (see the module docstring)."""

    table = "jset"
    columns = ("k", "w")  # w: the client thread that inserted it

    def __init__(self, history: History):
        super().__init__(history)
        self._next = itertools.count(1)
        self._lock = threading.Lock()
        self._snaps: list[tuple[int, float]] = []  # (snapshot read, when)

    def _snapshot_read(self, path, rng: random.Random, client_id: int) -> None:
        """Read at a new snapshot, or again at one read before (see the docstring)."""
        with self._lock:
            old = [s for s in self._snaps if time.monotonic() - s[1] > 3.0]
            again = rng.choice(old) if old and rng.random() < 0.5 else None
        t = path.table(self.table)
        op = {"client": client_id, "path": path.name, "kind": "snap", "call": self.h.now()}
        try:
            ts = again[0] if again else t.current_timestamp()
            op["snapshot"] = ts
            tbl = t.scan_table(["k"], snapshot=ts)
            op["ret"], op["output"] = self.h.now(), sorted(tbl.column("k").to_pylist())
            if again is None:
                with self._lock:
                    self._snaps.append((ts, time.monotonic()))
                    self._snaps = self._snaps[-50:]
        except Exception as e:  # noqa: BLE001 - a failed read has no effect
            op["ret"], op["error"] = None, f"{_sqlstate(e)} {str(e)[:200]}"
        self.h.add(op)

    def step(self, path, rng: random.Random, client_id: int) -> None:
        if not isinstance(path, SqlPath) and rng.random() < 0.05:
            self._snapshot_read(path, rng, client_id)
            return
        read = isinstance(path, SqlPath) and rng.random() < 0.08
        if read:
            op = {"client": client_id, "path": path.name, "kind": "read",
                  "call": self.h.now()}
            try:
                rows = path.execute(f"SELECT k FROM {self.table}")
                op["ret"], op["output"] = self.h.now(), sorted(r[0] for r in rows)
            except Exception as e:  # noqa: BLE001 - a failed read has no effect
                op["ret"], op["error"] = None, f"{_sqlstate(e)} {str(e)[:200]}"
            self.h.add(op)
            return
        e_ = next(self._next)
        op = {"client": client_id, "path": path.name, "kind": "add", "value": e_,
              "call": self.h.now()}
        try:
            if isinstance(path, SqlPath):
                path.execute(f"INSERT INTO {self.table} VALUES (%s, %s)", (e_, client_id))
            else:
                r = path.table(self.table).insert({"k": [e_], "w": [client_id]})
                if r.row_errors:
                    err = r.row_errors[0]
                    raise _RowError(getattr(err, "code", None), str(err))
            op["ret"] = self.h.now()
        except Exception as e:  # noqa: BLE001 - outcome unknown, unless a duplicate
            op["ret"], op["error"] = None, f"{_sqlstate(e)} {str(e)[:200]}"
            op["duplicate"] = _sqlstate(e) == "23505" or "ALREADY_PRESENT" in str(e) \
                or "duplicate key" in str(e)
        self.h.add(op)

    def check(self, ops: list[dict]) -> list[str]:
        anomalies = []
        adds = [o for o in ops if o["kind"] == "add"]
        reads = sorted((o for o in ops if o["kind"] == "read" and o.get("ret") is not None),
                       key=lambda o: o["call"])
        dups = [o["value"] for o in adds if o.get("duplicate")]
        if dups:
            anomalies.append(f"set: {len(dups)} fresh elements reported as duplicates "
                             f"(a retry applied twice): {dups[:10]}")
        acked = sorted((o["ret"], o["value"]) for o in adds if o.get("ret") is not None)
        called = {o["value"]: o["call"] for o in adds}
        prev_done: list[tuple[int, set]] = []  # (ret, elements) of finished reads
        for r in reads:
            seen = set(r["output"])
            must = {v for t, v in acked if t < r["call"]}
            lost = must - seen
            if lost:
                anomalies.append(f"set: read [{r['call']}..{r['ret']}] via {r['path']} lost "
                                 f"{len(lost)} acknowledged elements: {sorted(lost)[:10]}")
            phantom = {v for v in seen if called.get(v, 1 << 62) > r["ret"]}
            if phantom:
                anomalies.append(f"set: read [{r['call']}..{r['ret']}] holds elements never "
                                 f"attempted before it ended: {sorted(phantom)[:10]}")
            for ret, s in prev_done:
                if ret < r["call"] and not s <= seen:
                    gone = sorted(s - seen)
                    anomalies.append(f"set: read [{r['call']}..{r['ret']}] via {r['path']} "
                                     f"lacks {len(gone)} elements an earlier read saw: "
                                     f"{gone[:10]}")
                    break
            prev_done.append((r["ret"], seen))
            prev_done = prev_done[-20:]
        by_snap: dict[int, list[dict]] = {}
        for o in ops:
            if o["kind"] == "snap" and o.get("ret") is not None:
                by_snap.setdefault(o["snapshot"], []).append(o)
        for ts, reads_at in sorted(by_snap.items()):
            first = reads_at[0]
            must = {v for t, v in acked if t < first["call"]}
            lost = must - set(first["output"])
            if lost:
                anomalies.append(f"set: snapshot read at {ts} lost {len(lost)} elements "
                                 f"acknowledged before it: {sorted(lost)[:10]}")
            for o in reads_at[1:]:
                if o["output"] != first["output"]:
                    a, b = set(first["output"]), set(o["output"])
                    anomalies.append(
                        f"set: snapshot {ts} read again [{o['call']}..{o['ret']}] differs "
                        f"from its first read [{first['call']}..{first['ret']}]: now has "
                        f"{sorted(b - a)[:10]}, lacks {sorted(a - b)[:10]}")
        return anomalies

    def final(self, paths, ops: list[dict]) -> list[str]:
        """After healing: one more read holds every acknowledged element."""
        sql = paths[0]
        deadline = time.monotonic() + 60
        last = None
        while time.monotonic() < deadline:
            try:
                rows = sql.execute(f"SELECT k FROM {self.table}")
                break
            except Exception as e:  # noqa: BLE001 - still recovering
                last = e
                time.sleep(0.5)
        else:
            return [f"set: no final read within 60 s after healing: {last}"]
        seen = [r[0] for r in rows]
        out = []
        if len(seen) != len(set(seen)):
            out.append("set: the final read returned an element twice")
        acked = {o["value"] for o in ops if o["kind"] == "add" and o.get("ret") is not None}
        attempted = {o["value"] for o in ops if o["kind"] == "add"}
        lost = acked - set(seen)
        if lost:
            out.append(f"set: final read lost {len(lost)} acknowledged elements: "
                       f"{sorted(lost)[:10]}")
        extra = {v for v in seen if v >= 0} - attempted  # -1: wait_progress's own write
        if extra:
            out.append(f"set: final read holds elements never attempted: {sorted(extra)[:10]}")
        return out


class CounterWorkload(_Workload):
    """Increments of a few hot counters (see the module docstring): `UPDATE ... SET v = v +
    1 WHERE k = $1` through both front ends, and the same read-modify-write through the
    client library (a lookup at a snapshot S, then an UPDATE carrying S as its read
    precondition, READ_TS_COLUMN: what the SQL layer sends); reads of the counters."""

    table = "jcnt"
    columns = ("k", "v")

    def setup(self, sql: SqlPath) -> None:
        super().setup(sql)
        # the counters at 0; again until it succeeds (new tablets may still be electing):
        # DO NOTHING, so an earlier attempt applied late cannot reset a counter
        deadline = time.monotonic() + 60
        while True:
            try:
                sql.execute(f"INSERT INTO {self.table} VALUES "
                            + ", ".join(f"({k}, 0)" for k in range(COUNTER_KEYS))
                            + " ON CONFLICT DO NOTHING")
                return
            except Exception:  # noqa: BLE001 - not ready yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def read_step(self, path, rng: random.Random, client_id: int) -> None:
        """The reader client's operation: a read of a counter."""
        self._read(path, rng.randrange(COUNTER_KEYS), client_id)

    def _read(self, path, k: int, client_id: int) -> None:
        _record_read(self.h, path, self.table, {
            "client": client_id, "path": path.name, "kind": "read", "key": k,
            "call": self.h.now()})

    def step(self, path, rng: random.Random, client_id: int) -> None:
        k = rng.randrange(COUNTER_KEYS)
        if rng.random() < 0.25:
            self._read(path, k, client_id)
            return
        op = {"client": client_id, "path": path.name, "kind": "add", "key": k,
              "call": self.h.now()}
        try:
            if isinstance(path, SqlPath):
                op["count"] = path.rowcount(
                    f"UPDATE {self.table} SET v = v + 1 WHERE k = %s", (k,))
            else:
                op["count"] = self._client_add(path, k, op)
            op["ret"] = self.h.now()
        except Exception as e:  # noqa: BLE001 - 40001: not written; else unknown
            op["ret"], op["error"] = None, f"{_sqlstate(e)} {str(e)[:200]}"
            op["failed"] = _sqlstate(e) == "40001" or op.pop("nothing_sent", False)
        op.pop("nothing_sent", None)
        self.h.add(op)

    def _client_add(self, path, k: int, op: dict) -> int:
        """v + 1 through the client library: read v at S, write v + 1 unless the row
        changed since S (CHANGED: nothing written; read again), as planner/dml.py's
        `write_reread` does; 40001 after COUNTER_ROUNDS rounds."""
        import pyarrow as pa
        from engine.tablet.write_op import READ_TS_COLUMN
        t = path.table(self.table)
        op["nothing_sent"] = True   # until a write went out, a failure is a definite one
        for _ in range(COUNTER_ROUNDS):
            s = t.current_timestamp()
            row = t.lookup((k,), ["v"], snapshot=s)
            if row is None:
                return 0
            v = row["v"] if isinstance(row, dict) else _first_value(row)
            op["nothing_sent"] = False
            r = t.update(pa.table({"k": pa.array([k], pa.int64()),
                                   "v": pa.array([v + 1], pa.int64()),
                                   READ_TS_COLUMN: pa.array([s], pa.int64())}))
            codes = [getattr(e, "code", None) for e in r.row_errors]
            if codes == ["CHANGED"]:        # nothing of it was written
                op["nothing_sent"] = True
                time.sleep(random.uniform(0, 0.01))     # let the other writer finish
                continue
            if r.row_errors:
                raise RuntimeError(f"row error {r.row_errors[0]}")
            return r.num_applied
        e = RuntimeError(f"key {k} kept changing: {COUNTER_ROUNDS} rounds")
        e.sqlstate = "40001"
        raise e

    def check(self, ops: list[dict]) -> list[str]:
        """Jepsen's counter checker, per key: every read returns at least the increments
        acknowledged before it began and at most those attempted (not definitely failed)
        before it ended; a read never returns less than a read that ended before it began
        (the counters only grow, and point reads are linearizable); every acknowledged
        UPDATE counted its one row."""
        anomalies = []
        for k in range(COUNTER_KEYS):
            adds = [o for o in ops if o["kind"] == "add" and o["key"] == k]
            reads = [o for o in ops if o["kind"] == "read" and o["key"] == k
                     and o.get("ret") is not None]
            wrong = [o for o in adds if o.get("ret") is not None and o.get("count") != 1]
            if wrong:
                anomalies.append(f"counter key {k}: {len(wrong)} acknowledged increments "
                                 f"counted {sorted({o.get('count') for o in wrong})} rows, "
                                 f"not 1: {_show_add(wrong[0])}")
            acked = sorted(o["ret"] for o in adds if o.get("ret") is not None)
            maybe = sorted(o["call"] for o in adds if not o.get("failed"))
            for r in reads:
                lo = bisect.bisect_left(acked, r["call"])   # acknowledged before it began
                hi = bisect.bisect_left(maybe, r["ret"])    # attempted before it ended
                v = r["output"]
                if v is None or not lo <= v <= hi:
                    anomalies.append(f"counter key {k}: read [{r['call']}..{r['ret']}] via "
                                     f"{r['path']} returned {v}, outside [{lo}, {hi}]")
            done = sorted(reads, key=lambda o: o["ret"])
            j, high, by = 0, -1, None
            for r in sorted(reads, key=lambda o: o["call"]):
                while j < len(done) and done[j]["ret"] < r["call"]:
                    if (done[j]["output"] or 0) > high:
                        high, by = done[j]["output"] or 0, done[j]
                    j += 1
                if r["output"] is not None and r["output"] < high:
                    anomalies.append(f"counter key {k}: read [{r['call']}..{r['ret']}] via "
                                     f"{r['path']} returned {r['output']}, less than "
                                     f"{high} read [{by['call']}..{by['ret']}] via "
                                     f"{by['path']} before it began")
                    break
        return anomalies

    def final(self, paths, ops: list[dict]) -> list[str]:
        """After healing: each key's value is in [acknowledged, acknowledged + unknown]
        increments."""
        sql = paths[0]
        deadline = time.monotonic() + 60
        last = None
        while time.monotonic() < deadline:
            try:
                rows = dict(sql.execute(f"SELECT k, v FROM {self.table}"))
                break
            except Exception as e:  # noqa: BLE001 - still recovering
                last = e
                time.sleep(0.5)
        else:
            return [f"counter: no final read within 60 s after healing: {last}"]
        out, summary = [], []
        for k in range(COUNTER_KEYS):
            adds = [o for o in ops if o["kind"] == "add" and o["key"] == k]
            acked = sum(1 for o in adds if o.get("ret") is not None)
            unknown = sum(1 for o in adds if o.get("ret") is None and not o.get("failed"))
            failed = sum(1 for o in adds if o.get("failed"))
            v = rows.get(k)
            summary.append(f"key {k} = {v} ({acked} acked, {unknown} unknown, {failed} "
                           f"failed)")
            if v is None or not acked <= v <= acked + unknown:
                out.append(f"counter key {k}: final value {v}, outside [{acked}, "
                           f"{acked + unknown}] ({acked} increments acknowledged, "
                           f"{unknown} unknown, {failed} failed)")
        print("counter: " + "; ".join(summary))
        return out


def _show_add(o: dict) -> str:
    ret = "?" if o.get("ret") is None else o["ret"]
    return f"[{o['call']}..{ret} {o['path']} add -> {o.get('count')} {o.get('error', '')}]"


class _RowError(Exception):
    def __init__(self, code, text):
        super().__init__(text)
        self.sqlstate = "23505" if code in ("ALREADY_PRESENT", "23505") else None


WORKLOADS = {"register": RegisterWorkload, "set": SetWorkload, "counter": CounterWorkload}


# -- checks after healing ----------------------------------------------------------------------
def wait_progress(paths, workload, timeout: float = 60.0) -> list[str]:
    """After healing, a write through every path (both front ends, the client library)
    succeeds within `timeout`; the anomalies otherwise. The row is the harness's own
    (key -1), which the checkers ignore."""
    out = []
    deadline = time.monotonic() + timeout
    for path in paths:
        last = None
        while time.monotonic() < deadline:
            try:
                if isinstance(path, SqlPath):
                    path.execute(f"UPSERT INTO {workload.table} VALUES (%s, %s)", (-1, 0))
                else:
                    r = path.table(workload.table).upsert(
                        {workload.columns[0]: [-1], workload.columns[1]: [0]})
                    if r.row_errors:
                        raise RuntimeError(str(r.row_errors[0]))
                last = None
                break
            except Exception as e:  # noqa: BLE001 - not recovered yet
                last = e
                time.sleep(0.5)
        if last is not None or time.monotonic() > deadline:
            out.append(f"no progress through {path.name} within {timeout:.0f} s after "
                       f"healing: {last}")
    return out


def compare_replicas(cluster: Cluster, snapshots: list[int], timeout: float = 60.0
                     ) -> list[str]:
    """Every replica in its leader's configuration holds the same rows at each snapshot.
    Leadership and membership may still move right after healing: a tablet whose leader
    refuses, or whose replica is no longer running where the configuration said (evicted
    meanwhile), is looked at again (until `timeout`) before the refusal counts."""
    deadline = time.monotonic() + timeout
    while True:
        out, moved = _compare_once(cluster, snapshots, timeout)
        if not moved or time.monotonic() > deadline:
            return out
        time.sleep(1.0)


def _compare_once(cluster: Cluster, snapshots: list[int], timeout: float
                  ) -> tuple[list[str], bool]:
    """(anomalies, whether a leader refused as not leading any more)."""
    rpc = cluster.rpc
    moved = False
    deadline = time.monotonic() + timeout
    while True:  # every tablet has a leader whose configuration's replicas all run
        status, leaders, tombs, silent = {}, {}, {}, []
        for p in cluster.procs("tserver"):
            try:
                st = rpc.call(p["addr"], "status", timeout_s=5)
            except Exception as e:  # noqa: BLE001 - restarting, or too slow to answer
                silent.append(f"{p['name']} ({str(e)[:80]})")
                continue
            status[st["uuid"]] = (p["addr"], st["tablets"])
            tombs[st["uuid"]] = st.get("tombstones", {})
        for u, (addr, tablets) in status.items():
            for tid, t in tablets.items():
                if t.get("role") == "LEADER":
                    if tid not in leaders or t.get("term", 0) > leaders[tid][2]:
                        leaders[tid] = (u, t.get("peers", []), t.get("term", 0))
        all_tablets = {tid for _, tablets in status.values() for tid in tablets}
        # every tablet has a leader (a tablet whose replicas are all on servers that did not
        # answer is not seen at all: `silent` names them), and none of its configuration's
        # replicas is missing or FAILED (a disk fault's replica: the master replaces it)
        ready = leaders and not silent and set(leaders) >= all_tablets and \
            all(all(u in status and tid in status[u][1]
                    and status[u][1][tid].get("state") != "FAILED" for u in peers)
                for tid, (_, peers, _) in leaders.items())
        if ready or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    out = [f"replicas: tablet server {x} did not answer `status` {timeout:.0f} s after "
           f"healing" for x in silent]
    for tid in sorted(all_tablets - set(leaders)):
        # what each replica says (the evidence a stuck election needs: session 38's seed
        # 106 left only "no leader")
        seen = "; ".join(
            f"{u[:8]}: {t.get('role')} {t.get('state')} term {t.get('term')} leader "
            f"{str(t.get('leader'))[:8]} peers {[x[:8] for x in t.get('peers', [])]} "
            f"last {t.get('last_index')} commit {t.get('commit_index')}"
            for u, (_, tablets) in sorted(status.items())
            for t in [tablets.get(tid)] if t is not None)
        gone = [u[:8] for u, ts in sorted(tombs.items()) if tid in ts]
        out.append(f"replicas: tablet {tid[:8]} has no leader {timeout:.0f} s after healing "
                   f"({seen}{'; tombstones on ' + ', '.join(gone) if gone else ''})")
    for tid, (leader, peers, _) in sorted(leaders.items()):
        try:
            latest = rpc.call(status[leader][0], "tablet_ts", {"tablet": tid}, timeout_s=10)
        except Exception as e:  # noqa: BLE001
            moved = moved or "not the leader" in str(e) or "lease" in str(e)
            out.append(f"replicas: tablet {tid[:8]}: no timestamp from its leader: {e}")
            continue
        for ts in sorted(set(snapshots + [latest])):
            if ts > latest:
                continue
            rows = {}
            for u in peers:
                if u not in status:
                    out.append(f"replicas: tablet {tid[:8]}: replica {u[:8]} not reachable")
                    continue
                if tid not in status[u][1]:
                    out.append(f"replicas: tablet {tid[:8]}: its leader {leader[:8]} names "
                               f"{u[:8]}, whose server runs no replica of it"
                               f"{' (a tombstone)' if tid in tombs.get(u, {}) else ''}")
                    moved = True  # evicted meanwhile, or being created again: look again
                    continue
                if status[u][1].get(tid, {}).get("state") == "FAILED":
                    out.append(f"replicas: tablet {tid[:8]}: replica {u[:8]} is FAILED and "
                               f"was not replaced {timeout:.0f} s after healing")
                    continue
                try:
                    rows[u] = _scan_replica(rpc, status[u][0], tid, ts)
                except Exception as e:  # noqa: BLE001
                    # a replica evicted (and tombstoned) after the status above was read:
                    # re-replication still settling after healing; looked at again
                    moved = moved or "is not running on server" in str(e)
                    out.append(f"replicas: tablet {tid[:8]} replica {u[:8]} could not be "
                               f"read at {ts}: {str(e)[:200]}")
            if len({json.dumps(r) for r in rows.values()}) > 1:
                sizes = {u[:8]: len(r) for u, r in rows.items()}
                diff = _first_diff(list(rows.values()))
                out.append(f"replicas: tablet {tid[:8]} differs between replicas at "
                           f"snapshot {ts} (rows {sizes}; first difference {diff})")
    return out, moved


def _scan_replica(rpc, addr: str, tid: str, ts: int) -> list:
    stream = rpc.get(addr, {"tablet": tid, "snapshot": [ts, True], "any_replica": True,
                            "safe_wait_s": 20.0}, timeout_s=40)
    rows = []
    for batch in stream:
        rows += [list(r.values()) for r in batch.to_pylist()]
    return sorted(rows)


def _first_diff(tables: list[list]) -> str:
    a, b = tables[0], next((t for t in tables[1:] if t != tables[0]), tables[0])
    sa, sb = {json.dumps(r) for r in a}, {json.dumps(r) for r in b}
    only_a, only_b = sorted(sa - sb)[:3], sorted(sb - sa)[:3]
    return f"only in one: {only_a}; only in another: {only_b}"


def scan_logs(cluster: Cluster) -> list[str]:
    out = []
    d = os.path.join(cluster.dir, "logs")
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), errors="replace") as f:
            lines = f.read().splitlines()
        seen = set()
        for i, line in enumerate(lines):
            if LOG_PATTERNS.search(line):
                # the exception's own line ends a traceback: name it once per kind
                tail = next((x for x in lines[i + 1:i + 60]
                             if x and not x.startswith((" ", "Traceback"))), line)
                if INJECTED in tail and any(DISK_FAILED in x for x in lines[max(0, i - 80):i]):
                    continue  # the disk nemesis's EIO, logged as the replica fails (raft_host)
                key = tail.split(":")[0]
                if key in seen:
                    continue
                seen.add(key)
                ctx = " | ".join(lines[max(0, i - 1):i + 1])
                out.append(f"log {name}: {tail[:300]} (at: {ctx[:300]})")
    return out


# -- the run -----------------------------------------------------------------------------------
def run(workload: str, nemeses: list[str], seconds: float, seed: int, out_dir: str,
        keep: bool = False, threads: int = 6, overlap: int = 1,
        rate_drift: float = RATE_DRIFT, cover: bool = False,
        prompt_timeout: float = PROMPT_RPC_TIMEOUT_S) -> int:
    """One run: `workload` names one workload or several, comma-separated, which then run
    at once on the one cluster under the one fault schedule (each its own table, client
    threads, history and checks; `threads` per workload). With `cover` every nemesis
    comes once (`schedule`) and the run lasts as long as its schedule needs."""
    names = workload.split(",") if isinstance(workload, str) else list(workload)
    bad = [n for n in names if n not in WORKLOADS]
    if bad or not names:
        raise ValueError(f"unknown workload {','.join(bad) or '(none)'}")
    os.makedirs(out_dir, exist_ok=True)
    cdir = os.path.join(out_dir, "cluster")
    faults = schedule(seed, nemeses, seconds, overlap, rate_drift, cover=cover)
    if cover:
        seconds = max(seconds, schedule_end(faults))
    print(f"jepsen: workload {','.join(names)}, nemeses {','.join(nemeses)}"
          f"{f' {overlap} at once' if overlap > 1 else ''}{' (each once)' if cover else ''}, "
          f"{seconds:.0f} s, seed {seed}, {len(faults)} faults; cluster in {cdir}", flush=True)
    cluster = Cluster(cdir)
    anomalies: list[str] = []
    finished = False
    paths: list = []
    readers: list = []
    nemesis = None
    try:
        setup = SqlPath(cluster, 0)
        wls = []
        for name in names:
            wl = WORKLOADS[name](History())
            wl.setup(setup)
            wls.append(wl)
        paths = [setup, SqlPath(cluster, 1)]
        client = ClientPath(cluster)
        stop = threading.Event()
        snapshots: list[int] = []

        def worker(wl, i: int, path=None) -> None:
            r = random.Random(seed * 1000 + i)
            own = path is None
            if own:
                path = [SqlPath(cluster, 0), SqlPath(cluster, 1), client][i % 3]
            try:
                while not stop.is_set():
                    wl.step(path, r, i)
            finally:
                if own and path is not client:
                    path.close()

        def read_loop(wl, reader, i: int) -> None:
            r = random.Random(seed * 1000 + i)
            while not stop.is_set():
                wl.read_step(reader, r, i)
                stop.wait(READER_PAUSE_S)

        ws = []
        for n, wl in enumerate(wls):
            ws += [threading.Thread(target=worker, args=(wl, i), daemon=True,
                                    name=f"client-{names[n]}-{i}") for i in range(threads)]
            if hasattr(wl, "read_step"):
                # A reader: its own client holding its table (its tablet locations change
                # only by its own reads' refusals), as a separate read-mostly application
                # does. The shared clients above follow the master's view of a new leader
                # within a second or so (`table` by name refreshes it), or move once a
                # write times out on the old one; this one stays with a leader that still
                # answers - which only a broken lease lets it do (docs/guarantees.md §5).
                reader = ClientPath(cluster).keep_tables()
                reader.name = "reader"
                readers.append(reader)
                ws.append(threading.Thread(target=read_loop, args=(wl, reader, threads),
                                           daemon=True, name=f"reader-{names[n]}"))
            if getattr(wl, "prompt", False) and prompt_timeout > 0:
                # A prompt writer: the workload's own steps through a client whose per-try
                # timeout is short, so that after a leader is cut off some write reaches
                # the new leader soon (PROMPT_RPC_TIMEOUT_S says why)
                prompt = ClientPath(cluster, rpc_timeout_s=prompt_timeout)
                prompt.name = "prompt"
                readers.append(prompt)
                ws.append(threading.Thread(target=worker, args=(wl, threads + 1, prompt),
                                           daemon=True, name=f"prompt-{names[n]}"))
        for w in ws:
            w.start()
        nemesis = Nemesis(cluster, faults, os.path.join(out_dir, "nemesis.log"))
        for wl in wls:
            wl.h.t0 = nemesis.t0
        nemesis.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(5.0, max(0.0, end - time.monotonic())))
            ts = getattr(client.cat.client, "last_ts", 0)
            if ts:
                snapshots.append(ts)
        if cover:  # every fault is the point: wait for restarts slower than scheduled
            nemesis.thread.join(timeout=COVER_GRACE_S)
        nemesis.stop()
        stop.set()
        for w in ws:
            w.join(timeout=CLIENT_TIMEOUT_S + STATEMENT_TIMEOUT_MS / 1000 + 10)
        cluster.heal()
        anomalies += nemesis.anomalies
        total = 0
        for name, wl in zip(names, wls):
            ops = list(wl.h.ops)
            total += len(ops)
            anomalies += wait_progress(paths + [client], wl)
            anomalies += wl.check(ops)
            if hasattr(wl, "final"):
                anomalies += wl.final(paths, ops)
            hist = "history.jsonl" if len(names) == 1 else f"history-{name}.jsonl"
            with open(os.path.join(out_dir, hist), "w") as f:
                for o in ops:
                    f.write(json.dumps(o) + "\n")
            ok = sum(1 for o in ops if o.get("ret") is not None)
            print(f"history{'' if len(names) == 1 else ' ' + name}: {len(ops)} ops ({ok} "
                  f"completed, {len(ops) - ok} failed or unknown)")
        anomalies += compare_replicas(cluster, snapshots[-6:])
        anomalies += scan_logs(cluster)
        print(f"faults injected: {nemesis.done}"
              + (f"; nemesis errors: {nemesis.errors[:3]}" if nemesis.errors else ""))
        for a in anomalies:
            print("ANOMALY", a)
        print(f"{total} ops, {len(anomalies)} anomalies", flush=True)
        client.close()
        finished = True
        return 0 if not anomalies else 1
    finally:
        if nemesis is not None and nemesis.thread.is_alive():
            nemesis.stop()
        for p in paths:
            p.close()
        for r in readers:
            r.close()
        cluster.stop()
        if not keep and not anomalies and finished:  # evidence is kept otherwise
            shutil.rmtree(cdir, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.cluster.jepsen",
        description="Run a local cluster under Jepsen-style faults, record a history of "
                    "client operations and check it (module docstring).")
    ap.add_argument("--workload", default="register",
                    help="register (linearizable UPSERT/SELECT by key), set (inserts and "
                         "reads) or counter (concurrent increments of hot keys), or several "
                         "comma-separated, run at once on one cluster; default: "
                         "%(default)s")
    ap.add_argument("--nemesis", default="all",
                    help=f"comma-separated faults, or all: {', '.join(NEMESES)}; "
                         f"none: no faults; composed: all, two at once (--overlap 2) "
                         f"(default: %(default)s)")
    ap.add_argument("--overlap", type=int, default=None,
                    help="faults held at once, aimed at the same tablet (default: 1; 2 "
                         "with --nemesis composed)")
    ap.add_argument("--cover", action="store_true",
                    help="each nemesis exactly once (order drawn from the seed); the run "
                         "lasts at least as long as that takes")
    ap.add_argument("--rate-drift", type=float, default=RATE_DRIFT,
                    help="clock-rate: a victim's monotonic clock runs at (1 - u) or "
                         "1 / (1 - u) of real time, u up to this; lease-break: the "
                         "leader's at exactly 1 - this (default: %(default)s, inside the "
                         "~11%% leases rely on; larger values break them)")
    ap.add_argument("--seconds", type=float, default=60.0,
                    help="how long the workload runs under faults (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1,
                    help="the fault schedule and the clients' choices (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=6,
                    help="client threads, spread over the two front ends and the client "
                         "library (default: %(default)s)")
    ap.add_argument("--out", default=None,
                    help="directory for the history, fault log and cluster (default: a new "
                         "temporary directory)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the cluster's directory (it is kept anyway on anomalies)")
    ap.add_argument("--prompt-timeout", type=float, default=PROMPT_RPC_TIMEOUT_S,
                    help="register: the prompt writer's per-try RPC timeout, seconds; 0: no "
                         "prompt writer (default: %(default)s)")
    a = ap.parse_args(argv)
    overlap = a.overlap or 1
    if a.nemesis == "composed":
        nemeses, overlap = list(NEMESES), a.overlap or 2
    elif a.nemesis == "all":
        nemeses = list(NEMESES)
    elif a.nemesis == "none":
        nemeses = []
    else:
        nemeses = [n.strip() for n in a.nemesis.split(",") if n.strip()]
        bad = [n for n in nemeses if n not in NEMESES + AIMED]
        if bad:
            ap.error(f"unknown nemesis {', '.join(bad)} (known: "
                     f"{', '.join(NEMESES + AIMED)})")
    bad = [w for w in a.workload.split(",") if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown workload {', '.join(bad)} (known: {', '.join(WORKLOADS)})")
    out = a.out or tempfile.mkdtemp(
        prefix=f"kudusql-jepsen-{a.workload.replace(',', '-')}-{a.seed}-")
    if overlap < 1 or not 0 <= a.rate_drift < 1:
        ap.error("--overlap must be at least 1 and --rate-drift in [0, 1)")
    return run(a.workload, nemeses, a.seconds, a.seed, out, a.keep, a.threads, overlap,
               a.rate_drift, cover=a.cover, prompt_timeout=a.prompt_timeout)


if __name__ == "__main__":
    sys.exit(main())
