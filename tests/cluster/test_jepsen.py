"""The Jepsen-style harness (tests/cluster/jepsen.py) as tests. The default suite runs one
cluster under every nemesis once, three at a time (`cover`, seed 72: 29 s of faults),
with the three workloads at once (register, set, counter: each its own table, clients,
history and checks), plus unit tests of the schedule, the nemesis's bookkeeping, the log
scan and the register checker. With KUDUSQL_LONG=1 (`make test-long`): a run of each
workload under random faults, one at a time and two at once; the broken-lease run (a
leader's clock at 0.02x, then cut off: the checker must report stale reads) and the same
fault within the bound (0 anomalies); and runs across seeds and nemeses for
KUDUSQL_JEPSEN_S seconds in all (default 1,800). Each run starts its own cluster, records
a history, checks it, compares the replicas and scans the server logs; any anomaly fails
the test with the harness's report (the cluster directory is kept for a look)."""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from contextlib import redirect_stdout

import pytest

from tests.cluster import jepsen

LONG = os.environ.get("KUDUSQL_LONG") == "1"
LONG_S = float(os.environ.get("KUDUSQL_JEPSEN_S", "1800"))
long_only = pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the long Jepsen-style "
                                                "runs")


def _run(tmp_path, workload: str, nemeses: list[str], seconds: float, seed: int,
         overlap: int = 1, anomalies: bool = False, **kw) -> str:
    """The run's report; it must find no anomaly (or, with `anomalies`, at least one)."""
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = jepsen.run(workload, nemeses, seconds, seed,
                        str(tmp_path / f"{workload.replace(',', '-')}-{seed}"),
                        overlap=overlap, **kw)
    out = buf.getvalue()
    sys.stdout.write(out)
    last = out.strip().splitlines()[-1]
    assert int(last.split()[0]) > 100, f"too few operations to mean anything: {last}"
    if anomalies:
        assert rc == 1 and not last.endswith(" 0 anomalies"), out[-6000:]
    else:
        assert rc == 0 and last.endswith(" 0 anomalies"), out[-6000:]
    return out


def test_every_nemesis_once_under_every_workload(tmp_path):
    """Every fault class, three at a time on one tablet (seed 72, 29 s of scheduled
    faults): kill -9 of a tablet server, a master and a front end at once; re-replication
    while a leader's WAL fails and a server is paused; a master paused and isolated during
    a ring; a clock's rate and another's offset moved while the MemRowSets flush; then a
    leader partitioned - while the three workloads run at once, three client threads each
    and a register and a counter reader. (Found the master's re-replication KeyError,
    test_jepsen_regressions.py.)"""
    out = _run(tmp_path, "register,set,counter", list(jepsen.NEMESES), 0, 72, overlap=3,
               cover=True, threads=3)
    assert f"faults injected: {len(jepsen.NEMESES)}" in out, out[-3000:]


@pytest.mark.long
@long_only
@pytest.mark.parametrize("workload,seed,seconds",
                         [("register", 11, 30), ("set", 12, 30), ("counter", 13, 20)])
def test_short_run_under_all_nemeses(tmp_path, workload, seed, seconds):
    _run(tmp_path, workload, list(jepsen.NEMESES), seconds, seed)


@pytest.mark.long
@long_only
def test_a_broken_lease_shows_as_stale_reads(tmp_path):
    """The checker bites on the fault it exists for: one tablet leader's monotonic clock at
    0.02x (`--rate-drift 0.98`, far outside the ~11% leases rely on), then that leader cut
    from its followers for 10-15 s. Its lease outlives the new leader's election, and the
    reader client, still routed to it, reads values the new leader has overwritten: the
    register checker must report them."""
    out = _run(tmp_path, "register", ["lease-break"], 20, 1, rate_drift=0.98,
               anomalies=True)
    assert "ANOMALY register key" in out and "not linearizable" in out, out[-3000:]


@pytest.mark.long
@long_only
def test_a_lease_break_within_the_bound_is_safe(tmp_path):
    """The same fault with the clock at 0.92x (inside the bound): the cut-off leader's
    lease lapses before anyone else can lead, its reads are refused, no stale read."""
    _run(tmp_path, "register", ["lease-break"], 20, 1, rate_drift=0.08)


def test_schedule_is_a_function_of_the_seed():
    a = jepsen.schedule(7, list(jepsen.NEMESES), 300)
    assert a == jepsen.schedule(7, list(jepsen.NEMESES), 300)
    assert a != jepsen.schedule(8, list(jepsen.NEMESES), 300)
    assert {f.kind for f in a} == set(jepsen.NEMESES)
    assert not any(f.joint for f in a)
    # clock-rate stays inside the ~11% leases rely on (engine/consensus/raft.py)
    rates = [f.rate for f in a if f.kind == "clock-rate"]
    assert rates and all(0.9 < r < 1 / 0.9 for r in rates), rates


def test_composed_schedule_holds_two_faults_at_once_on_one_tablet():
    a = jepsen.schedule(7, list(jepsen.NEMESES), 600, overlap=2)
    assert a == jepsen.schedule(7, list(jepsen.NEMESES), 600, overlap=2)
    rs = jepsen.rounds(a)
    assert rs and all(len(r) == 2 for r in rs)
    for first, second in rs:
        assert not first.joint and second.joint
        assert 0 <= second.lag < first.hold  # starts while the first is held
        assert second.tablet == first.tablet
    kinds = {(r[0].kind, r[1].kind) for r in rs}
    assert len(kinds) > 30 and {k for pair in kinds for k in pair} == set(jepsen.NEMESES)


def test_cover_schedule_has_every_nemesis_once():
    for overlap in (1, 2, 3):
        a = jepsen.schedule(72, list(jepsen.NEMESES), 0, overlap=overlap, cover=True)
        assert a == jepsen.schedule(72, list(jepsen.NEMESES), 0, overlap=overlap, cover=True)
        assert sorted(f.kind for f in a) == sorted(jepsen.NEMESES)
        assert all(len(r) <= overlap for r in jepsen.rounds(a))
        # the faults that restart a process come first, so that they share rounds
        n = len(jepsen.RESTARTS)
        assert {f.kind for f in a[:n]} == set(jepsen.RESTARTS)
        # the end is the rounds' spans and calms, after the 3 s start
        end = 3.0 + sum(max(f.lag + f.hold for f in r) + r[-1].gap + 0.5
                        for r in jepsen.rounds(a))
        assert jepsen.schedule_end(a) == pytest.approx(end)
    assert jepsen.schedule(38, list(jepsen.NEMESES), 0, overlap=2, cover=True) != \
        jepsen.schedule(39, list(jepsen.NEMESES), 0, overlap=2, cover=True)
    # lease-break: the leader's clock slowed by exactly --rate-drift
    lb = jepsen.schedule(1, ["lease-break"], 30, rate_drift=0.98)
    assert lb and all(f.rate == pytest.approx(0.02) and f.hold >= 10 for f in lb)


class _FakeCluster:
    """What the nemesis's link cuts call: the drop lists each process was sent, in order."""

    def __init__(self):
        self.sent: dict[str, list] = {}

    def failpoint(self, name, payload):
        self.sent.setdefault(name, []).append(payload["drop_to"])


def test_overlapping_cuts_keep_each_others_links_cut(tmp_path):
    """Two faults of a round cutting links of one process: healing the shorter one must not
    heal the longer one's links (each push is the union of what is still held)."""
    c = _FakeCluster()
    nem = jepsen.Nemesis(c, [], str(tmp_path / "nemesis.log"))
    long = jepsen.Fault("partition", 0, 0.6, 0)
    short = jepsen.Fault("ring", 0, 0.1, 0)
    t = threading.Thread(target=nem._cut, args=({"a": ["x"], "b": ["a"]}, long))
    t.start()
    time.sleep(0.1)
    nem._cut({"a": ["y"], "c": ["a"]}, short)
    assert c.sent["a"] == [["x"], ["x", "y"], ["x"]]  # x stays cut while `long` holds
    t.join()
    assert c.sent["a"][-1] == [] and c.sent["b"] == [["a"], []] and c.sent["c"] == [["a"], []]
    nem.log.close()


def test_two_faults_of_a_round_never_take_one_victim(tmp_path):
    nem = jepsen.Nemesis(_FakeCluster(), [], str(tmp_path / "nemesis.log"))
    names = ["ts-0", "ts-1"]
    assert nem._claim(names, 0) == "ts-0"
    assert nem._claim(names, 0, prefer="ts-0") == "ts-1"  # the preferred one is held
    assert nem._claim(names, 1) is None
    assert nem._claim(names, 0, space="clock:") == "ts-0"  # a clock fault may share it
    nem._release("ts-0")
    assert nem._claim(names, 1) == "ts-0"
    nem.log.close()


def test_log_scan_passes_only_the_disk_nemesis_own_failure(tmp_path):
    """A traceback of a replica failing on the injected EIO (raft_host.py `fail`'s line
    before it) is the fault, not a bug; any other traceback is an anomaly, even one whose
    error mentions the injected EIO."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "tserver-0.log").write_text(
        "x CRITICAL engine.tserver.raft_host: t1: replica u stopped for good: disk failed: "
        "IOFailure: could not sync the write-ahead log d: injected EIO (fsync of d)\n"
        "Traceback (most recent call last):\n  File \"log.py\", line 1, in sync\n"
        "OSError: [Errno 5] injected EIO (fsync of d)\n")
    (logs / "tserver-1.log").write_text(
        "x ERROR engine.tserver.tablet_server: tick of tablet t1 failed\n"
        "Traceback (most recent call last):\n  File \"log.py\", line 1, in sync\n"
        "OSError: [Errno 5] injected EIO (fsync of d)\n")
    (logs / "tserver-2.log").write_text(
        "x ERROR engine.rpc.rpc: RPC handler failed\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n"
        "KeyError: 'k'\n")
    found = jepsen.scan_logs(type("C", (), {"dir": str(tmp_path)})())
    assert [f.split(":")[0] for f in found] == ["log tserver-1.log", "log tserver-2.log"], found


def _reg(client, kind, value, call, ret, output=None, path="client", key=5):
    return {"client": client, "path": path, "kind": kind, "key": key, "value": value,
            "call": call, "ret": ret, "output": output}


def test_register_checker_flags_a_stale_read():
    """What a leader whose lease outlived its leadership answers (lease-break nemesis):
    a write acknowledged by the new leader, then a read that began after it returned the
    value before it. The checker must call that non-linearizable; the same history with
    the read seeing the new value, or overlapping the write, is fine."""
    wl = jepsen.RegisterWorkload(jepsen.History())
    base = [_reg(0, "put", 1, 0, 1), _reg(0, "get", None, 2, 3, 1),
            _reg(1, "put", 2, 4, 5, path="sql0")]  # acknowledged by the new leader
    stale = base + [_reg(2, "get", None, 6, 7, 1)]  # began after put 2 returned: stale
    found = wl.check(stale)
    assert len(found) == 1 and "register key 5: not linearizable" in found[0], found
    assert wl.check(base + [_reg(2, "get", None, 6, 7, 2)]) == []
    assert wl.check(base[:2] + [_reg(1, "put", 2, 4, 7, path="sql0"),
                                _reg(2, "get", None, 5, 6, 1)]) == []  # overlaps the put
    # a put whose outcome is unknown may have taken effect, or not: either read is fine
    unknown = base[:2] + [_reg(1, "put", 2, 4, None, path="sql0")]
    assert wl.check(unknown + [_reg(2, "get", None, 6, 7, 1)]) == []
    assert wl.check(unknown + [_reg(2, "get", None, 6, 7, 2)]) == []
    # ...but not back and forth: 2 seen, then 1 again
    assert wl.check(unknown + [_reg(2, "get", None, 6, 7, 2),
                               _reg(2, "get", None, 8, 9, 1)]) != []


@pytest.mark.long
@long_only
@pytest.mark.parametrize("workload,seed,seconds", [("register", 31, 10)])
def test_short_run_under_composed_faults(tmp_path, workload, seed, seconds):
    """Two overlapping faults at a time (`--nemesis composed`), every nemesis; seed 31's
    one round in 10 s: kill -9 a tablet server (a leader, when one is known), and 0.2 s
    later partition a tablet's leader from its followers, while the first is down."""
    _run(tmp_path, workload, list(jepsen.NEMESES), seconds, seed, overlap=2)


@pytest.mark.long
@long_only
def test_long_runs_across_seeds_and_nemeses(tmp_path):
    """Runs of 5 minutes, the workloads in turn, each under every nemesis - one fault at a
    time, then (the next three) two at once - until LONG_S."""
    seed, spent = 100, 0.0
    while spent < LONG_S:
        s = min(300.0, LONG_S - spent)
        _run(tmp_path, ("register", "set", "counter")[seed % 3], list(jepsen.NEMESES), s,
             seed, overlap=1 + (seed // 3) % 2)
        spent += s
        seed += 1
