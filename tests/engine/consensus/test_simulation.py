"""The deterministic Raft simulator (engine/consensus/simulation.py): the proof.

Default suite: 300 seeds with 3 nodes and 100 with 5, every fault on (~15-30 ms of CPU a
seed); zero violations. Each deliberately broken variant (a node that votes twice in a
term, one that commits without a majority, leaders answering reads from local state) must
be reported, which shows the invariant checks and the linearizability check bite. A seed
replays exactly, in-process and across interpreters with different hash seeds. The CLI
prints one line per failing seed, ends with `N seeds, V violations` and exits 0 only when
V is 0.

KUDUSQL_LONG=1 (`make test-long`): 10,000 seeds with 3 nodes and 2,000 with 5.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.consensus.simulation import SimOptions, Simulation, main, run_seed

LONG = os.environ.get("KUDUSQL_LONG") == "1"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _failures(seeds, opts):
    out = []
    for s in seeds:
        _, v, _ = run_seed(s, opts)
        if v:
            out.append((s, v[0]))
    return out


def test_default_seeds_three_nodes_all_faults():
    assert _failures(range(300), SimOptions(nodes=3)) == []


def test_default_seeds_five_nodes_all_faults():
    assert _failures(range(100), SimOptions(nodes=5)) == []


def test_the_faults_really_happen():
    totals: dict[str, int] = {}
    for s in range(30):
        for k, v in run_seed(s)[2].items():
            totals[k] = totals.get(k, 0) + v
    for k in ("elections", "tablet_copies", "config_changes", "crashes"):
        assert totals[k] >= 20, totals
    assert totals["acked"] > 1000


@pytest.mark.parametrize("broken,expect", [
    ("double_vote", ("two leaders in term", "log matching")),
    ("commit_no_majority", ("leader completeness", "state machine safety",
                            "acknowledged op", "overwrites committed entry")),
    ("local_reads", ("not linearizable",)),
])
def test_a_broken_rule_is_caught(broken, expect):
    fails = _failures(range(60), SimOptions(broken=broken))
    assert len(fails) >= 3, fails
    assert all(any(e in msg for e in expect) for _, msg in fails), fails


def test_a_seed_replays_exactly():
    a, b = Simulation(11), Simulation(11)
    assert a.run() == b.run() == []
    assert a.fingerprint() == b.fingerprint()
    assert Simulation(12).run() == [] and Simulation(12).fingerprint() != a.fingerprint()


def test_replay_does_not_depend_on_the_interpreter_hash_seed():
    outs = []
    for hs in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hs)
        r = subprocess.run([sys.executable, "-m", "engine.consensus.simulation", "--seeds",
                            "3:4", "-v"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] and outs[0].count("\n") > 5


def test_cli_output_and_exit_status(capsys):
    assert main(["--seeds", "0:4"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "4 seeds, 0 violations"
    assert main(["--seeds", "0:30", "--broken", "double_vote", "--faults",
                 "delay,loss,crash"]) == 1
    lines = capsys.readouterr().out.splitlines()
    bad = [ln for ln in lines if ln.startswith("seed ")]
    assert bad and lines[-1] == f"30 seeds, {len(bad)} violations"


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the 10,000-seed run")
@pytest.mark.parametrize("nodes,seeds", [(3, 10_000), (5, 2_000)])
def test_long_simulation(nodes, seeds):
    r = subprocess.run([sys.executable, "-m", "engine.consensus.simulation", "--seeds",
                        f"0:{seeds}", "--nodes", str(nodes), "--faults", "all", "--jobs", "2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=3 * 3600)
    assert r.stdout.splitlines()[-1] == f"{seeds} seeds, 0 violations", r.stdout[-3000:]
    assert r.returncode == 0
