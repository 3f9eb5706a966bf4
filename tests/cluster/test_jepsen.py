"""The Jepsen-style harness (tests/cluster/jepsen.py) as tests: a short run of each workload
under every nemesis in the default suite (80 s of faults in all) and a 10 s register run
under composed faults (seed 31: a tablet server killed, a tablet leader partitioned from
its followers meanwhile), and with
KUDUSQL_LONG=1 (`make test-long`) runs across seeds and nemeses for KUDUSQL_JEPSEN_S
seconds in all (default 1,800). Each run starts its own cluster, records a history, checks
it, compares the replicas and scans the server logs; any anomaly fails the test with the
harness's report (the cluster directory is kept for a look)."""

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


def _run(tmp_path, workload: str, nemeses: list[str], seconds: float, seed: int,
         overlap: int = 1) -> None:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = jepsen.run(workload, nemeses, seconds, seed, str(tmp_path / f"{workload}-{seed}"),
                        overlap=overlap)
    out = buf.getvalue()
    sys.stdout.write(out)
    last = out.strip().splitlines()[-1]
    assert rc == 0 and last.endswith(" 0 anomalies"), out[-6000:]
    assert int(last.split()[0]) > 100, f"too few operations to mean anything: {last}"


@pytest.mark.parametrize("workload,seed,seconds",
                         [("register", 11, 30), ("set", 12, 30), ("counter", 13, 20)])
def test_short_run_under_all_nemeses(tmp_path, workload, seed, seconds):
    _run(tmp_path, workload, list(jepsen.NEMESES), seconds, seed)


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


@pytest.mark.parametrize("workload,seed,seconds", [("register", 31, 10)])
def test_short_run_under_composed_faults(tmp_path, workload, seed, seconds):
    """Two overlapping faults at a time (`--nemesis composed`), every nemesis; seed 31's
    one round in 10 s: kill -9 a tablet server (a leader, when one is known), and 0.2 s
    later partition a tablet's leader from its followers, while the first is down."""
    _run(tmp_path, workload, list(jepsen.NEMESES), seconds, seed, overlap=2)


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the long Jepsen-style runs")
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
