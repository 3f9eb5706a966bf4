"""The TableCatalog contract (engine/catalog/leases.py) as the embedded Catalog keeps it."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine import errors
from engine.catalog import Catalog, TableCatalog, TabletLease
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import TabletConfig
from engine.types import DataType as T

CFG = TabletConfig(fsync=False, wal_sync="never")
SCHEMA = Schema([ColumnSchema("id", T.INT64), ColumnSchema("v", T.INT32)], key=["id"])


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(str(tmp_path), config=CFG, clock=LogicalClock())
    c.create_table("t", SCHEMA)
    yield c
    c.close()


def test_the_catalog_offers_the_contract(cat):
    names = [n for n in vars(TableCatalog) if not n.startswith("_")]
    assert names and all(hasattr(cat, n) for n in names)
    assert cat.executor is not None and cat.parallelism >= 1


def test_a_lease_defers_drop_until_released_and_releases_once(cat, tmp_path):
    tid = cat.table("t").id
    lease = cat.lease_tablets(tid, lambda m: m.tablet_ids)
    assert isinstance(lease, TabletLease) and lease.metadata.name == "t"
    (h,) = lease.handles
    h.tablet().insert({"id": [1], "v": [2]})
    path = cat.tablet_path(h.tablet_id)
    cat.drop_table("t")
    assert os.path.isdir(path)  # still leased: the drop waits for the release
    with pytest.raises(errors.NotFound):
        cat.table_metadata(tid)
    lease.release()
    lease.release()  # a second release does nothing
    assert not os.path.exists(path)


def test_pick_sees_the_version_the_lease_holds(cat):
    tid = cat.table("t").id
    seen = []

    def pick(meta):
        seen.append(meta)
        if len(seen) == 1:
            cat.rename_table("t", "u")  # a DDL between reading metadata and leasing
        return meta.tablet_ids

    with cat.lease_tablets(tid, pick) as lease:
        assert [m.name for m in seen] == ["t", "u"]
        assert lease.metadata is seen[-1]
    # the references were returned: a DDL that waits for running operations goes through
    cat.add_column("u", ColumnSchema("w", T.INT32, nullable=True))
    assert cat.table("u").scan_table().schema.names == ["id", "v", "w"]


def test_a_failing_pick_takes_no_reference(cat):
    tid = cat.table("t").id

    def pick(meta):
        raise errors.InvalidArgument("bad input")

    with pytest.raises(errors.InvalidArgument):
        cat.lease_tablets(tid, pick)
    cat.add_column("t", ColumnSchema("w", T.INT32, nullable=True))  # not busy
    assert cat.tablets_ready(tid)
    cat.table("t").insert(pa.table({"id": pa.array([1], pa.int64())}))
