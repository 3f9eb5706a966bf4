"""A Jepsen-style set test (long: KUDUSQL_LONG=1): unique inserts from several connections
while a nemesis kills and restarts tablet servers (kill -9), pauses them (SIGSTOP /
SIGCONT) and cuts the links between two of them (the RPC failpoint). At the end, with
every fault healed: every acknowledged element is present, none appears that was never
attempted, and no fresh key was ever reported as a duplicate (a retry applied twice)."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from tests.cluster.test_cluster import Writers, _create, _keys, _wait_acks

LONG = os.environ.get("KUDUSQL_LONG") == "1"
NEMESIS_S = float(os.environ.get("KUDUSQL_JEPSEN_S", "60"))


def _wait_up(rpc, addr: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            rpc.call(addr, "ping", timeout_s=2)
            return
        except Exception:  # noqa: BLE001 - still starting
            assert time.monotonic() < deadline, f"{addr} did not come back in {timeout} s"
            time.sleep(0.1)


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the Jepsen-style set test")
def test_set_under_kills_pauses_and_partitions(cluster):
    from kudusql.cluster import restart_process, rpc_client_for

    rpc = rpc_client_for(cluster.dir, 5)
    rng = random.Random(int(os.environ.get("KUDUSQL_JEPSEN_SEED", "1")))
    with cluster.connect() as conn:
        _create(conn)
    log = []
    with Writers(cluster) as w:
        _wait_acks(w, 50)
        end = time.monotonic() + NEMESIS_S
        while time.monotonic() < end:
            ts = [p for p in cluster.processes() if p["role"] == "tserver"]
            victim = rng.choice(ts)
            fault = rng.choice(["kill", "pause", "partition"])
            hold = rng.uniform(1.0, 4.0)
            if fault == "kill":
                os.kill(victim["pid"], signal.SIGKILL)
                time.sleep(hold)
                restart_process(cluster.dir, victim["name"])
                _wait_up(rpc, victim["addr"])
            elif fault == "pause":
                os.kill(victim["pid"], signal.SIGSTOP)
                try:
                    time.sleep(hold)
                finally:
                    os.kill(victim["pid"], signal.SIGCONT)
            else:
                other = rng.choice([p for p in ts if p is not victim])
                rpc.call(victim["addr"], "failpoint", {"drop_to": [other["addr"]]})
                rpc.call(other["addr"], "failpoint", {"drop_to": [victim["addr"]]})
                try:
                    time.sleep(hold)
                finally:
                    for p in (victim, other):
                        rpc.call(p["addr"], "failpoint", {"drop_to": []})
            log.append(f"{fault} {victim['name']} {hold:.1f}s")
            time.sleep(rng.uniform(0.5, 2.0))
        # healed: the cluster must make progress again
        _wait_acks(w, sum(len(a) for a in w.acked) + 100, timeout=60)
    rpc.close()
    print(f"\nnemesis: {len(log)} faults ({', '.join(log)}); {len(w.all_acked())} acked, "
          f"{len(w.all_attempted()) - len(w.all_acked())} unknown")
    assert not [e for e in w.errors if e.startswith("23505")], w.errors[:5]
    with cluster.connect() as conn:
        keys = _keys(conn)
    assert len(keys) == len(set(keys))
    present = set(keys)
    assert w.all_acked() <= present, f"lost {len(w.all_acked() - present)} acked rows"
    assert present <= w.all_attempted(), "elements that were never attempted appeared"
