"""Exactly-once writes through the cluster client, on a real cluster (1 master, 3 tablet
servers): a request below the client's first_incomplete is refused STALE (XX000) — raised
at once, not retried, not applied (engine/tserver/result_tracker.py). The replica-level
cases (restart after log GC, tablet copy, replicas deciding alike) are in
tests/engine/test_result_tracker.py, without processes. And a write answer must account for
every row sent (applied + row errors = rows sent), or the write fails with XX000."""

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


@pytest.mark.parametrize("answer", [
    {"num_applied": 2, "row_errors": []},                         # a row silently dropped
    {"num_applied": 1, "row_errors": [[0, "NOT_FOUND", "x", [1]],
                                      [0, "NOT_FOUND", "x", [1]]]},  # one row named twice
    {"num_applied": 2, "row_errors": [[7, "NOT_FOUND", "x", [9]]]},  # a row never sent
    {"num_applied": 4, "row_errors": []},                         # more than were sent
])
def test_a_write_answer_that_does_not_account_for_every_row_fails(answer):
    """A tablet server answering a write of 3 rows with rows applied + row errors that do
    not add up to the 3 sent (a server that applied fewer and said nothing): the client
    library raises XX000 naming the tablet and the counts, at once (not retried: a retry
    of the request id gets the same stored answer), instead of acknowledging the write
    with rows missing. A real DoPut to a server whose handler gives that answer."""
    from engine.catalog.metadata import TableMetadata
    from engine.catalog.partition import PartitionSchema
    from engine.client.client import ClusterClient, RemoteCatalog, WriteUnaccounted, \
        _TabletLocations
    from engine.rpc.rpc import RpcServer

    seen = []

    def put(cmd, table):
        seen.append((cmd["seq"], table.num_rows))
        return dict(answer, timestamp=5)

    srv = RpcServer("127.0.0.1", 0, "s3cret", {}, put_handler=put)
    cat = RemoteCatalog(ClusterClient([], "s3cret", timeout_s=5))
    try:
        meta = TableMetadata("id-w", "w", SCHEMA, PartitionSchema.create(SCHEMA), 1, ("t1",))
        cat._meta[meta.id] = meta
        cat._locs["t1"] = _TabletLocations("t1", {"replicas": [{"uuid": "u1",
                                                                "addr": srv.addr}],
                                                  "leader": "u1"})
        rt = RemoteTablet(cat, meta, "t1")
        t0 = time.monotonic()
        with pytest.raises(WriteUnaccounted) as ei:
            rt.write(OpType.UPSERT, {"k": [1, 2, 3], "v": ["a", "b", "c"]})
        assert time.monotonic() - t0 < 4 and len(seen) == 1, seen  # not retried
        assert ei.value.sqlstate == "XX000"
        msg = str(ei.value)
        assert "t1" in msg and "3 rows" in msg and "unknown" in msg, msg
        # an answer that accounts for every row is a result as before
        answer.clear()
        answer.update(num_applied=2, row_errors=[[1, "NOT_FOUND", "key not found", [2]]])
        r = rt.write(OpType.UPDATE, {"k": [1, 2, 3], "v": ["a", "b", "c"]})
        assert (r.num_applied, [e.index for e in r.row_errors]) == (2, [1])
    finally:
        cat.close()
        srv.stop()
