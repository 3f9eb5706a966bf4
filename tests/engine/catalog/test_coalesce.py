"""Write coalescing (engine/catalog/coalesce.py): small concurrent writes to one table are
applied as one tablet op per tablet, and each writer still gets exactly its own outcome.

Batches form only from real concurrency, which a test cannot time; so the tests hold the
first writer inside the real write (a gate around Table._write_now) until the others have
queued behind it, and then let everything run for real."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from engine import errors
from engine.catalog import Catalog, HashBucketSchema, PartitionSchema
from engine.catalog.table import Table
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import TabletConfig
from engine.types import DataType as T

CFG = TabletConfig(fsync=False, wal_sync="never", history_max_age_s=1e12)


@pytest.fixture(autouse=True)
def _general_path(monkeypatch):
    """These tests are about the coalescer: writes of <= 8 plain rows would take the
    small-write path (engine/tablet/small_write.py), which does not coalesce."""
    monkeypatch.setattr(Table, "small_writes", False)


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(str(tmp_path), config=CFG, clock=LogicalClock())
    s = Schema([ColumnSchema("k", T.INT64), ColumnSchema("v", T.INT32)], key=["k"])
    c.create_table("t", s, PartitionSchema.create(s, [HashBucketSchema(("k",), 3)], [], []))
    yield c
    c.close()


def rows(keys, v=0):
    return pa.table({"k": pa.array(keys, pa.int64()),
                     "v": pa.array([v] * len(keys), pa.int32())})


class Gate:
    """Holds the first call of Table._write_now until `release()`; counts the calls."""

    def __init__(self, monkeypatch):
        self.entered, self.go = threading.Event(), threading.Event()
        self.calls: list[int] = []
        real = Table._write_now
        gate = self

        def write_now(table_self, ops, data):
            gate.calls.append(data.num_rows)
            if len(gate.calls) == 1:
                gate.entered.set()
                gate.go.wait(10)
            return real(table_self, ops, data)
        monkeypatch.setattr(Table, "_write_now", write_now)

    def release(self):
        self.go.set()


def run_concurrently(cat, gate, writes, queued=None):
    """writes: [(op name, rows)]; the first is the leader held at the gate, and `queued`
    (default: all the others) queue behind it before it is let go. Returns the outcomes
    (TableWriteResult or exception) in the same order."""
    queued = len(writes) - 1 if queued is None else queued
    out: list = [None] * len(writes)

    def one(i):
        op, data = writes[i]
        try:
            out[i] = getattr(cat.table("t"), op)(data)
        except Exception as e:  # noqa: BLE001 - the test inspects it
            out[i] = e
    threads = [threading.Thread(target=one, args=(0,))]
    threads[0].start()
    assert gate.entered.wait(10)
    coalescer = cat.write_coalescer(cat.table("t").id)

    def wait_queued(n):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with coalescer._lock:
                if sum(len(q) for q in coalescer._queues.values()) >= n:
                    return
            time.sleep(0.005)

    # Arrival order is queue order, not thread start order: on a loaded machine a thread
    # started later can queue first. So each follower is queued before the next starts.
    for i in range(1, len(writes)):
        threads.append(threading.Thread(target=one, args=(i,)))
        threads[-1].start()
        wait_queued(min(i, queued))
    wait_queued(queued)                     # every follower queued behind the leader
    gate.release()
    for t in threads:
        t.join(10)
    return out


def test_queued_writes_share_one_op_and_each_gets_its_own_errors(cat, monkeypatch):
    cat.table("t").insert(rows([1, 2]))
    gate = Gate(monkeypatch)
    out = run_concurrently(cat, gate, [
        ("insert", rows([10])),                 # the leader, alone in its group
        ("insert", rows([20, 1, 21])),          # key 1 exists: its row 2 fails
        ("insert", rows([30])),
        ("insert", rows([20])),                 # 20 is inserted by the request before it
        ("insert", rows([40, 41, 2, 42])),      # key 2 exists: its row 3 fails
    ])
    assert gate.calls == [1, 9]                 # two tablet writes: the leader, then the rest
    assert [r.num_applied for r in out] == [1, 2, 1, 0, 3]
    assert [[(e.index, e.code, e.key) for e in r.row_errors] for r in out] == [
        [], [(1, "ALREADY_PRESENT", (1,))], [], [(0, "ALREADY_PRESENT", (20,))],
        [(2, "ALREADY_PRESENT", (2,))]]
    keys = sorted(k for b in cat.table("t").scan(["k"]) for k in b.column(0).to_pylist())
    assert keys == [1, 2, 10, 20, 21, 30, 40, 41, 42]


def test_mixed_operations_apply_in_arrival_order(cat, monkeypatch):
    cat.table("t").insert(rows([1, 2, 3]))
    gate = Gate(monkeypatch)
    out = run_concurrently(cat, gate, [
        ("update", rows([1], v=5)),
        ("update", rows([2], v=7)),
        ("delete", rows([2])),                  # deletes the row the request before updated
        ("upsert", rows([2], v=9)),             # and this one brings it back
        ("update", rows([99], v=1)),            # no such key: NOT_FOUND for this one only
    ])
    assert [r.num_applied for r in out] == [1, 1, 1, 1, 0]
    assert [e.code for e in out[4].row_errors] == ["NOT_FOUND"]
    t = pa.Table.from_batches(list(cat.table("t").scan(["k", "v"]))).sort_by("k")
    assert t.to_pylist() == [{"k": 1, "v": 5}, {"k": 2, "v": 9}, {"k": 3, "v": 0}]


def test_a_failed_group_write_fails_every_request_and_leadership_moves_on(cat, monkeypatch):
    gate = Gate(monkeypatch)
    bad = pa.table({"k": pa.array([7], pa.int64()), "nope": pa.array([1], pa.int32())})
    out = run_concurrently(cat, gate, [
        ("insert", bad),                        # a column the table lacks: ColumnNotFound
        ("insert", bad),
        ("insert", bad),
        ("insert", rows([2])),                  # another schema: not queued behind them
    ], queued=2)
    assert all(isinstance(r, errors.ColumnNotFound) for r in out[:3])
    assert out[1] is out[2]                     # one group, one failure
    assert out[3].num_applied == 1
    assert sorted(gate.calls) == [1, 1, 2]
    monkeypatch.undo()
    r = cat.table("t").insert(rows([3]))        # nothing left behind: a new leader writes
    assert r.num_applied == 1


def test_large_writes_are_not_coalesced(cat, monkeypatch):
    gate = Gate(monkeypatch)
    gate.release()
    cat.table("t").insert(rows(list(range(1000))))
    assert gate.calls == [1000]
    assert cat.write_coalescer(cat.table("t").id).requests == 0


def test_a_waiter_that_gives_up_does_not_stall_the_table(cat, monkeypatch):
    """A writer interrupted while queued (KeyboardInterrupt in its wait) leaves the queue;
    if it had just been handed the leadership, the next writer gets it."""
    from engine.catalog import coalesce

    coalescer = cat.write_coalescer(cat.table("t").id)
    key = rows([1]).schema
    me = coalesce._Request(None, rows([1]))
    other = coalesce._Request(None, rows([2]))
    with coalescer._lock:
        coalescer._queues[key] = [me, other]
        coalescer._busy.add(key)
        me.lead = True                         # promoted by a leader that just finished
    coalescer._abandon(key, me)
    assert coalescer._queues[key] == [other] and other.lead and other.done.is_set()
    coalescer._abandon(key, other)             # the last one leaves: the schema is free
    assert key not in coalescer._busy and key not in coalescer._queues
    assert cat.table("t").insert(rows([5])).num_applied == 1
