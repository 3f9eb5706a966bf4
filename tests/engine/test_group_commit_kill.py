"""kill -9 in the middle of group commit: every acknowledged write survives, no torn record.

A child process writes single-row INSERTs and UPDATEs from 8 threads to one tablet with
`wal_sync="commit"`, so their WAL records share fsyncs (engine/consensus/log.py
`Log.wait_durable`: one writer syncs, the others wait and are woken when an fsync covers
them). Each thread prints `I k` once its insert of key k returned and `U k` once its update
of k returned (acknowledged = durable). The parent kills the child with SIGKILL while the
writers run - with 8 of them, some are always waiting on an fsync in flight - reopens the
tablet (WAL replay: a record cut short by the kill is the torn tail, dropped; any other bad
record is Corruption and fails the open) and checks:

- every acknowledged insert is there, every acknowledged update shows its new value;
- nothing else is there: every row is one a writer wrote, with a value it wrote;
- the child's writes did share fsyncs (fewer fsyncs than commits: group commit ran);
- the reopened log reads back whole.

Two kill cycles over one tablet, each at a different point; again with a commit delay
(`wal_commit_delay_us`: a leader sleeps before its fsync while the others append), which
must change only how many writes an fsync covers, not what is acknowledged.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading

import pytest

from engine.clock import HybridClock
from engine.consensus.log import Log
from engine.tablet import Tablet
from tests.engine.crash_child import CONFIG

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THREADS = 8

CHILD = r"""
import dataclasses, os, sys, threading
from engine.clock import HybridClock
from engine.tablet import OpType, Tablet
from tests.engine.crash_child import CONFIG, SCHEMA

path, cycle, delay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
CONFIG = dataclasses.replace(CONFIG, wal_commit_delay_us=delay, wal_commit_siblings=2)
if os.path.exists(os.path.join(path, "tablet-meta.json")):
    t = Tablet.open(path, config=CONFIG, clock=HybridClock())
else:
    t = Tablet.create(path, SCHEMA, config=CONFIG, clock=HybridClock())
out = threading.Lock()
commits = [0]

def say(line):
    with out:
        os.write(1, (line + "\n").encode())

def writer(j):
    base = cycle * 10_000_000 + j * 100_000
    for i in range(100_000):
        k = base + i
        r = t.write_small([int(OpType.INSERT)], ["k", "v", "s"], [(k, 1, "w")])
        assert r.num_applied == 1, r
        say(f"I {k}")
        r = t.write_small([int(OpType.UPDATE)], ["k", "v"], [(k, 2)])
        assert r.num_applied == 1, r
        with out:
            commits[0] += 2
            os.write(1, f"U {k} {t.log.fsyncs} {commits[0]} {t.log.delays}\n".encode())

say("READY")
ts = [threading.Thread(target=writer, args=(j,)) for j in range(%d)]
for x in ts:
    x.start()
for x in ts:
    x.join()
""" % THREADS


def _run_and_kill(path: str, cycle: int, acks_before_kill: int, delay_us: int = 0
                  ) -> tuple[set, set, list]:
    """Start the child, kill it once `acks_before_kill` writes were acknowledged;
    (inserted keys acknowledged, updated keys acknowledged, [(fsyncs, commits, delays)])."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, path, str(cycle), str(delay_us)],
                            cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[bytes] = []
    enough = threading.Event()

    def read():
        for line in iter(proc.stdout.readline, b""):
            lines.append(line)
            if len(lines) > acks_before_kill:
                enough.set()
        enough.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert enough.wait(120), "the child wrote nothing"
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        reader.join(30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    inserted, updated, stats = set(), set(), []
    for raw in lines:
        if not raw.endswith(b"\n"):       # cut short by the kill: no acknowledgement
            continue
        kind, *rest = raw.split()
        if kind == b"I":
            inserted.add(int(rest[0]))
        elif kind == b"U":
            updated.add(int(rest[0]))
            stats.append((int(rest[1]), int(rest[2]), int(rest[3])))
    return inserted, updated, stats


@pytest.mark.parametrize("delay_us", [0, 300])
def test_kill_during_group_commit_keeps_every_acknowledged_write(tmp_path, delay_us):
    path = str(tmp_path / "tablet")
    rng = random.Random(37)
    all_inserted: set = set()
    all_updated: set = set()
    for cycle in range(2):
        inserted, updated, stats = _run_and_kill(path, cycle, rng.randrange(100, 300),
                                                 delay_us)
        assert updated <= inserted
        all_inserted |= inserted
        all_updated |= updated
        fsyncs, commits, delays = stats[-1]
        # group commit ran: the child's 8 writers shared fsyncs (without sharing, at
        # least one fsync per commit); with the delay, leaders waited it
        assert fsyncs < commits, (fsyncs, commits)
        assert (delays > 0) == (delay_us > 0), (delays, delay_us)

        t = Tablet.open(path, config=CONFIG, clock=HybridClock())
        try:
            tbl = t.scan_table()
            got = dict(zip(tbl.column("k").to_pylist(), tbl.column("v").to_pylist()))
            assert len(got) == tbl.num_rows, "duplicate keys after replay"
            lost = sorted(all_inserted - set(got))
            assert not lost, f"{len(lost)} acknowledged inserts lost: {lost[:8]}"
            stale = sorted(k for k in all_updated if got[k] != 2)
            assert not stale, f"{len(stale)} acknowledged updates lost: {stale[:8]}"
            for k, v in got.items():   # only what a writer wrote (a write may be durable
                c, rest = divmod(k, 10_000_000)     # without its acknowledgement)
                assert c <= cycle and rest // 100_000 < THREADS and v in (1, 2), (k, v)
        finally:
            t.close()
        # the log reads back whole: every record passes its CRC, indexes are dense
        log = Log(os.path.join(path, "wal"), "commit")
        indexes = [e.index for e in log.read_from(1)]
        assert indexes == list(range(indexes[0], indexes[0] + len(indexes)))
