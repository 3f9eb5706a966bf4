"""The Jepsen-style harness (tests/cluster/jepsen.py) as tests: a short run of each workload
under every nemesis in the default suite (80 s of faults in all), and with
KUDUSQL_LONG=1 (`make test-long`) runs across seeds and nemeses for KUDUSQL_JEPSEN_S
seconds in all (default 1,800). Each run starts its own cluster, records a history, checks
it, compares the replicas and scans the server logs; any anomaly fails the test with the
harness's report (the cluster directory is kept for a look)."""

from __future__ import annotations

import io
import os
import sys
from contextlib import redirect_stdout

import pytest

from tests.cluster import jepsen

LONG = os.environ.get("KUDUSQL_LONG") == "1"
LONG_S = float(os.environ.get("KUDUSQL_JEPSEN_S", "1800"))


def _run(tmp_path, workload: str, nemeses: list[str], seconds: float, seed: int) -> None:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = jepsen.run(workload, nemeses, seconds, seed, str(tmp_path / f"{workload}-{seed}"))
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


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the long Jepsen-style runs")
def test_long_runs_across_seeds_and_nemeses(tmp_path):
    """Runs of 5 minutes, the workloads in turn, each under every nemesis, until LONG_S."""
    seed, spent = 100, 0.0
    while spent < LONG_S:
        s = min(300.0, LONG_S - spent)
        _run(tmp_path, ("register", "set", "counter")[seed % 3], list(jepsen.NEMESES), s,
             seed)
        spent += s
        seed += 1
