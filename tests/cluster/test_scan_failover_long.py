"""Long (KUDUSQL_LONG=1): one scan outlives two of its tablet's three replicas.

A Table scan of one tablet (RF=3, ~20 MB) in 100-row batches; the tablet server streaming
it is killed (kill -9), the scan resumes elsewhere; once it has read on for a while, the
server now streaming it is killed too. The last replica — no majority left, so no leader —
still serves the pinned snapshot (it applied the new leader's first entry, stamped after
the snapshot, before the second kill), and the scan returns exactly the snapshot's keys.
Both replica selections."""

from __future__ import annotations

import os
import signal

import pytest

from engine.client.scanner import CLOSEST_REPLICA, LEADER_ONLY
from tests.cluster.test_scan_failover import PAD, _catalog, _pid_of

LONG = os.environ.get("KUDUSQL_LONG") == "1"
pytestmark = [pytest.mark.long,
              pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the long scan kills")]
ROWS = int(os.environ.get("KUDUSQL_SCAN_LONG_ROWS", "40000"))


@pytest.mark.parametrize("selection", [LEADER_ONLY, CLOSEST_REPLICA])
def test_a_scan_outlives_two_of_three_replicas(cluster, selection):
    with cluster.connect() as conn:
        conn.execute("CREATE TABLE f (k BIGINT PRIMARY KEY, pad TEXT) PARTITION BY HASH (k) "
                     "PARTITIONS 2 WITH (replication_factor = 3)")
    cat = _catalog(cluster, replica_selection=selection)
    try:
        t = cat.table("f")
        for s in range(0, ROWS, 5000):
            t.insert({"k": list(range(s, s + 5000)), "pad": [PAD] * 5000})
        want = [k for b in t.scan_partition(0, ["k"]) for k in b.column("k").to_pylist()]
        cat.client.scan_batch_rows = 100
        cat.client.scan_streams.clear()
        tid = t.metadata.tablet_ids[0]
        keys, killed, resumed_at = [], [], None
        for i, b in enumerate(t.scan_partition(0, ["k", "pad"])):
            keys.extend(b.column("k").to_pylist())
            if resumed_at is None and killed and cat.client.scan_resumes:
                resumed_at = i
            if i == 2 or (resumed_at is not None and i == resumed_at + 20):
                # the server of the stream opened last for this tablet
                addr = [k for k in cat.client.scan_streams if k[0] == tid][-1][1]
                assert addr not in killed
                killed.append(addr)
                os.kill(_pid_of(cluster, addr), signal.SIGKILL)
        assert len(killed) == 2, killed
        assert cat.client.scan_resumes >= 2
        assert keys == want
    finally:
        cat.close()
