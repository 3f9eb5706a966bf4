"""Exactly-once writes through the cluster client, on a real cluster (1 master, 3 tablet
servers): a request below the client's first_incomplete is refused STALE (XX000) — raised
at once, not retried, not applied (engine/tserver/result_tracker.py). The replica-level
cases (restart after log GC, tablet copy, replicas deciding alike) are in
tests/engine/test_result_tracker.py, without processes."""

from __future__ import annotations

import time

import pytest

from engine import errors
from engine.client.client import RemoteTablet
from engine.schema import ColumnSchema as C
from engine.schema import DataType as T
from engine.schema import Schema
from engine.tablet.write_op import OpType
from kudusql.cluster import remote_catalog_for

SCHEMA = Schema([C("k", T.INT64), C("v", T.STRING)], key=["k"])


def test_a_stale_request_is_refused_not_applied_and_surfaced(cluster):
    """The client's sequence numbers reused (what two processes sharing one client id
    would do): request 1 again after the client said it waits for nothing below 2. Before,
    the leader answered it with request 1's stored result, a silent success of a write
    that was never applied."""
    cat = remote_catalog_for(cluster.dir, timeout_s=20)
    try:
        meta = cat.create_table("once", SCHEMA)
        rt = RemoteTablet(cat, meta, meta.tablet_ids[0])
        rt.write(OpType.UPSERT, {"k": [1], "v": ["a"]})       # seq 1
        rt.write(OpType.UPSERT, {"k": [1], "v": ["b"]})       # seq 2, first_incomplete 2
        cat.client._seq = 0                                   # the next write reuses 1
        t0 = time.monotonic()
        with pytest.raises(errors.StaleRequest) as ei:
            rt.write(OpType.UPSERT, {"k": [1], "v": ["c"]})
        assert time.monotonic() - t0 < 5  # answered at once, not retried to the deadline
        assert ei.value.sqlstate == "XX000"
        assert "not applied" in str(ei.value) and meta.tablet_ids[0] in str(ei.value)
        assert rt.lookup([1], ["v"])["v"] == "b"
    finally:
        cat.close()
