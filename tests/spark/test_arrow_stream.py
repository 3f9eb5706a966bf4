"""The Arrow IPC stream endpoint (wire/arrow_stream.py) without Spark, with a plain socket
client: schema, bind, plan (one snapshot, one ticket per unpruned tablet), scan (an IPC
stream and its trailer), put (write summary), errors as SQLSTATE + message; and a table
idle for longer than the history kept still reads (the planned snapshot is "fresh")."""

from __future__ import annotations

import json
import socket
import struct
import time

import pyarrow as pa
import pytest

from engine.config import TabletConfig
from kudusql.session import Database
from wire import arrow_stream


def request(address: str, req: dict, send: pa.Table | None = None):
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    f = s.makefile("rwb")
    body = json.dumps(req).encode()
    f.write(b"KQS1" + struct.pack(">I", len(body)) + body)
    try:
        if send is not None:
            with pa.ipc.new_stream(f, send.schema) as w:
                w.write_table(send)
        f.flush()
    except (BrokenPipeError, ConnectionResetError):
        # a put the server stopped reading (a chunk failed): it answers before closing,
        # and the client reads that answer, as the JVM writer does (KudusqlWrite.failure)
        pass
    return s, f


def status_json(f) -> tuple[int, object]:
    status, n = struct.unpack(">BI", f.read(5))
    return status, json.loads(f.read(n))


def call(address: str, req: dict, send: pa.Table | None = None) -> tuple[int, object]:
    s, f = request(address, req, send)
    with s:
        return status_json(f)


def scan(address: str, ticket: dict) -> tuple[pa.Table, tuple[int, object]]:
    s, f = request(address, {"op": "scan", "ticket": ticket})
    with s:
        assert f.read(1) == b"\x00"
        t = pa.ipc.open_stream(f).read_all()
        return t, status_json(f)


@pytest.fixture(scope="module")
def ep(db):
    db.session().execute(
        "CREATE TABLE a (k INT NOT NULL, g STRING, PRIMARY KEY (k)) "
        "PARTITION BY HASH (k) PARTITIONS 3")
    s = arrow_stream.start(db)
    yield s
    s.shutdown()


def test_put_plan_scan(db, ep):
    rows = pa.table({"k": pa.array(range(100), pa.int32()),
                     "g": [f"g{i % 3}" for i in range(100)]})
    st, out = call(ep.address, {"op": "put", "table": "a", "mode": "insert"}, rows)
    assert st == 0 and (out["rows"], out["applied"], out["failed"]) == (100, 100, 0)
    st, out = call(ep.address, {"op": "put", "table": "a", "mode": "insert"}, rows.slice(0, 2))
    assert out["failed_by_code"] == {"ALREADY_PRESENT": 2}

    s, f = request(ep.address, {"op": "schema", "table": "a"})
    with s:
        assert f.read(1) == b"\x00"
        assert pa.ipc.open_stream(f).schema.names == ["k", "g"]

    pred = {"column": "g", "kind": "in", "values": ["g1"]}
    st, ok = call(ep.address, {"op": "bind", "table": "a", "predicates": [
        pred, {"column": "k", "kind": "range", "lower": "x", "upper": None}]})
    assert ok == [True, False]  # a string literal does not bind to INT

    st, plan = call(ep.address, {"op": "plan", "table": "a", "columns": ["k"],
                                 "predicates": [pred], "estimate": True})
    assert st == 0 and len(plan["tickets"]) == 3 and plan["rows"] == 100
    assert {t["snapshot"] for t in plan["tickets"]} == {plan["snapshot"]}
    got = []
    for tk in plan["tickets"]:
        t, trailer = scan(ep.address, tk)
        assert t.schema.names == ["k"] and trailer == (0, {"rows": t.num_rows})
        got += t.column("k").to_pylist()
    assert sorted(got) == [k for k in range(100) if k % 3 == 1]

    st, plan = call(ep.address, {"op": "plan", "table": "a", "predicates": [
        {"column": "k", "kind": "range", "lower": 7, "upper": 7,
         "lower_inclusive": True, "upper_inclusive": True}]})
    assert len(plan["tickets"]) == 1  # hash partition pruning


def test_errors_are_sqlstate_and_message(ep):
    assert call(ep.address, {"op": "plan", "table": "nope"}) == (
        1, {"sqlstate": "42P01", "message": 'table "nope" does not exist'})
    st, e = call(ep.address, {"op": "plan", "table": "a", "columns": ["zz"]})
    assert st == 1 and e["sqlstate"] == "42703"
    st, e = call(ep.address, {"op": "frobnicate", "table": "a"})
    assert st == 1 and e["sqlstate"] == "22023"
    st, e = call(ep.address, {"op": "plan"})
    assert st == 1 and e["sqlstate"] == "08P01"


def test_idle_table_older_than_history_still_reads(tmp_path):
    """Regression (TPC-H Q22 through Spark): a plan's T is the tablets' last commit; once
    the table had no write for history_max_age_s, reading at T as an explicit snapshot was
    refused as older than the ancient history mark."""
    d = Database.open(str(tmp_path), maintenance=False,
                      config=TabletConfig(fsync=False, wal_sync="never",
                                          history_max_age_s=0.5))
    s = arrow_stream.start(d)
    try:
        d.session().execute("CREATE TABLE i (k INT NOT NULL, PRIMARY KEY (k))")
        d.session().execute("INSERT INTO i VALUES (1), (2)")
        time.sleep(1.0)
        st, plan = call(s.address, {"op": "plan", "table": "i"})
        assert st == 0
        t, trailer = scan(s.address, plan["tickets"][0])
        assert trailer[0] == 0 and sorted(t.column("k").to_pylist()) == [1, 2]
        # an explicit snapshot that old is still refused, in SQL's words
        st, plan = call(s.address, {"op": "plan", "table": "i",
                                    "snapshot": plan["snapshot"]})
        st2, e = (st, plan) if st else call(s.address, {"op": "scan",
                                                        "ticket": plan["tickets"][0]})
        assert st2 == 1 and e["sqlstate"] == "22023" and "ancient history" in e["message"]
    finally:
        s.shutdown()
        d.close()


def test_scan_skip_needs_ordered_scans(ep):
    """An embedded endpoint's scans are unordered (storage order), so "skip" (resuming a
    broken stream after the rows delivered) is refused before any row is sent; the plan
    says the scan is not resumable. A tablet server's endpoint (ordered scans) serves it:
    tests/spark/test_jvm_resume.py."""
    st, plan = call(ep.address, {"op": "plan", "table": "a"})
    assert st == 0 and plan["resumable"] is False
    st, e = call(ep.address, {"op": "scan", "ticket": plan["tickets"][0], "skip": 1})
    assert st == 1 and e["sqlstate"] == "0A000" and "primary-key order" in e["message"]


def test_put_reads_ahead_of_the_inserts(db, monkeypatch):
    """The put's batches are read by their own thread while an earlier chunk is inserted
    (`read_ahead`): while the first chunk's insert stands still, the batches after it are
    read (up to PUT_READ_AHEAD_ROWS); every row arrives once and in order; a chunk whose
    insert raises answers the error and the reading thread stops."""
    import threading
    import types

    from wire import flight
    db.session().execute("CREATE TABLE ra (k BIGINT NOT NULL, v STRING, PRIMARY KEY (k)) "
                         "PARTITION BY HASH (k) PARTITIONS 2")
    monkeypatch.setattr(flight, "PUT_CHUNK_ROWS", 1000)
    monkeypatch.setattr(arrow_stream, "PUT_READ_AHEAD_ROWS", 1500)
    read = []   # batches the endpoint pulled from the socket

    def counting_open_stream(f):
        r = pa.ipc.open_stream(f)

        def it():
            for b in r:
                read.append(b.num_rows)
                yield b
        return it()
    monkeypatch.setattr(arrow_stream, "pa", types.SimpleNamespace(
        ipc=types.SimpleNamespace(open_stream=counting_open_stream,
                                  new_stream=pa.ipc.new_stream)))
    real = flight.write_batches.__globals__["conform"]
    seen_during_first_insert = []
    calls = []

    def observing(table, target):
        calls.append(table.num_rows)
        if len(calls) == 1:   # the first chunk (2 batches of 700): wait for read-ahead
            deadline = time.time() + 10
            while len(read) < 4 and time.time() < deadline:
                time.sleep(0.02)
            seen_during_first_insert.append(len(read))
        if fail_at and len(calls) == fail_at:
            raise ValueError("boom")
        return real(table, target)
    monkeypatch.setitem(flight.write_batches.__globals__, "conform", observing)
    fail_at = 0
    s = arrow_stream.start(db)
    try:
        rows = pa.table({"k": pa.array(range(10_000), pa.int64()),
                         "v": [f"v{i}" for i in range(10_000)]})
        sent = pa.Table.from_batches(rows.to_batches(max_chunksize=700))
        st, out = call(s.address, {"op": "put", "table": "ra", "mode": "insert"}, sent)
        assert st == 0 and (out["rows"], out["applied"], out["failed"]) == (10_000,) * 2 + (0,)
        # 2 batches made the first chunk; 3 more (2,100 rows <= 1,500 + a batch) were read
        # while it was being inserted
        assert seen_during_first_insert[0] >= 4, seen_during_first_insert
        assert sum(calls) == 10_000 and sum(read) == 10_000
        got = db.session().execute("SELECT count(*), sum(k), min(v), max(v) FROM ra")
        assert [tuple(r.values()) for r in got[-1].table.to_pylist()] == [
            (10_000, sum(range(10_000)), "v0", "v9999")]

        calls.clear()
        fail_at = 2   # the second chunk's insert raises
        more = pa.table({"k": pa.array(range(10_000, 60_000), pa.int64()),
                         "v": ["x"] * 50_000})
        st, e = call(s.address, {"op": "put", "table": "ra", "mode": "insert"},
                     pa.Table.from_batches(more.to_batches(max_chunksize=700)))
        assert st == 1 and "boom" in e["message"]
        deadline = time.time() + 10
        while "kudusql-put-read" in {t.name for t in threading.enumerate()}:
            assert time.time() < deadline, "the read-ahead thread did not stop"
            time.sleep(0.05)
    finally:
        s.shutdown()


def test_failed_put_answers_and_lingers(db):
    """A large put whose first chunk fails (here: a column the table lacks, 42703) gets
    that error, not a reset connection: the endpoint answers at once and then reads the
    rest of the client's stream before it closes (`_linger`). The client sends all of its
    ~48 MB (far beyond the sockets' buffers) without a broken pipe or a reset, then reads
    the answer; a second put on a new connection still works."""
    db.session().execute("CREATE TABLE lg (k BIGINT NOT NULL, v BIGINT, PRIMARY KEY (k)) "
                         "PARTITION BY HASH (k) PARTITIONS 2")
    n = 2_000_000
    rows = pa.table({"k": pa.array(range(n), pa.int64()), "v": pa.array(range(n), pa.int64()),
                     "nope": pa.array(range(n), pa.int64())})
    s = arrow_stream.start(db)
    try:
        host, port = s.address.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as sock:
            f = sock.makefile("rwb")
            body = json.dumps({"op": "put", "table": "lg", "mode": "insert"}).encode()
            f.write(b"KQS1" + struct.pack(">I", len(body)) + body)
            # strict: no BrokenPipeError / ConnectionResetError tolerated while sending
            with pa.ipc.new_stream(f, rows.schema) as w:
                for b in rows.to_batches(max_chunksize=65536):
                    w.write_batch(b)
            f.flush()
            st, err = status_json(f)
        assert st == 1 and err["sqlstate"] == "42703" and "nope" in err["message"], err
        ok = pa.table({"k": pa.array([1, 2], pa.int64()), "v": pa.array([1, 2], pa.int64())})
        st, out = call(s.address, {"op": "put", "table": "lg", "mode": "insert"}, ok)
        assert st == 0 and out["applied"] == 2, out
    finally:
        s.shutdown()


def test_stream_sink_put_is_exactly_once_per_batch(db, ep):
    """The JVM connector's streaming sink, as its tasks and driver speak to the endpoint:
    a put with the batch's identity, a replay by another run (the rows applied: none is
    reported as a duplicate, none applied twice), "finish", and a replay of the finished
    batch (skipped, its stream dropped); row errors finish as a failed batch (23505)."""
    from wire import stream_sink

    db.session().execute("CREATE TABLE sk (k INT NOT NULL, g STRING, PRIMARY KEY (k)) "
                         "PARTITION BY HASH (k) PARTITIONS 3")
    rows = pa.table({"k": pa.array(range(50), pa.int32()), "g": [f"g{i}" for i in range(50)]})
    st, out = call(ep.address, {"op": "stream_sink", "action": "ensure", "table": "sk"})
    assert st == 0 and out == {"table": stream_sink.PROGRESS_TABLE}

    def put(batch, run, data, attempt=0):
        st, out = call(ep.address, {"op": "put", "table": "sk", "mode": "insert", "sink": {
            "sink": "sk:q1", "batch": batch, "run": run, "attempt": attempt}}, data)
        assert st == 0, out
        return out

    def finish(batch, run, summaries, ignore=False):
        st, out = call(ep.address, {"op": "stream_sink", "action": "finish", "table": "sk",
                                    "mode": "insert", "ignore_row_errors": ignore,
                                    "summaries": summaries,
                                    "sink": {"sink": "sk:q1", "batch": batch, "run": run}})
        assert st == 0, out
        return out

    first = put(0, "run-a", rows)                     # a run that dies before its commit
    assert (first["applied"], first["failed"], first["skipped"]) == (50, 0, None)
    again = put(0, "run-b", rows)                     # the restarted query replays batch 0
    assert (again["applied"], again["failed"], again["already_applied"]) == (0, 0, 50)
    out = finish(0, "run-b", [again])
    assert out["state"] == stream_sink.COMMITTED and not out["error"]
    assert "+50 applied by an earlier attempt" in out["message"]
    third = put(0, "run-c", rows)                     # a kill -9 after kudusql's commit
    assert third["skipped"] == stream_sink.COMMITTED and third["applied"] == 0
    assert not finish(0, "run-c", [third])["error"]
    assert db.catalog.table("sk").count_rows() == 50
    rec = stream_sink.batch_record(db.catalog, "sk:q1", 0)
    assert (rec["state"], rec["applied"]) == (stream_sink.COMMITTED, 50)

    dup = put(1, "run-c", pa.table({"k": pa.array([7, 100], pa.int32()), "g": ["x", "y"]}))
    assert (dup["applied"], dup["failed"]) == (1, 1)
    out = finish(1, "run-c", [dup])
    assert out["error"] and out["sqlstate"] == "23505" and out["state"] == stream_sink.FAILED
    assert "stream batch 1" in out["message"] and "ALREADY_PRESENT" in out["message"]
    replay = put(1, "run-d", pa.table({"k": pa.array([7, 100], pa.int32()),
                                       "g": ["x", "y"]}))
    assert replay["skipped"] == stream_sink.FAILED
    out = finish(1, "run-d", [replay])               # reported again after a restart
    assert out["error"] and out["sqlstate"] == "23505"
    out = finish(1, "run-d", [replay], ignore=True)  # unless ignored: committed now
    assert not out["error"] and out["warning"] and out["state"] == stream_sink.COMMITTED
    st, out = call(ep.address, {"op": "stream_sink", "action": "nope", "table": "sk",
                                "sink": {"sink": "sk:q1", "batch": 0, "run": "r"}})
    assert st == 1 and out["sqlstate"] == "22023"


def test_change_tickets_read_every_commit_of_their_window(db, ep):
    """The change source's server side on the stream endpoint (the JVM connector's
    MicroBatchStream): "changes_plan" names the latest timestamp, the ancient history mark
    and, for a window, one change ticket per tablet; a change ticket's "scan" is its
    tablet's Table.changes in (start, end], the ticket's columns in their order, then
    `_is_deleted` and `_commit_ts`; two consecutive windows give every commit once; a
    window below the ancient history mark is an error answer (22023), not a stream."""
    db.session().execute("CREATE TABLE chg (k INT NOT NULL, s STRING, PRIMARY KEY (k)) "
                         "PARTITION BY HASH (k) PARTITIONS 3")
    t = db.catalog.table("chg")
    db.session().execute("INSERT INTO chg VALUES (9, 'before')")    # before the windows
    st, p0 = call(ep.address, {"op": "changes_plan", "table": "chg"})
    assert st == 0 and "tickets" not in p0 and len(p0["tablet_ids"]) == 3
    start = p0["latest"]
    db.session().execute("INSERT INTO chg VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    db.session().execute("UPDATE chg SET s = 'a2' WHERE k = 1")
    st, mid = call(ep.address, {"op": "changes_plan", "table": "chg"})
    db.session().execute("DELETE FROM chg WHERE k = 2")
    db.session().execute("UPDATE chg SET s = 'a3' WHERE k = 1")
    st, p1 = call(ep.address, {"op": "changes_plan", "table": "chg"})

    def window(s, e, columns):
        st, p = call(ep.address, {"op": "changes_plan", "table": "chg", "start": s,
                                  "end": e, "columns": columns})
        assert st == 0 and len(p["tickets"]) == 3
        assert [tk["partition"] for tk in p["tickets"]] == [0, 1, 2]
        out = []
        for tk in p["tickets"]:
            got, trailer = scan(ep.address, tk)
            assert trailer == (0, {"rows": got.num_rows})
            assert got.column_names == columns + ["_is_deleted", "_commit_ts"]
            assert not got.schema.field("k").nullable      # the key stays NOT NULL
            out += [tuple(r.values()) for r in got.to_pylist()]
        return out

    first = window(start, mid["latest"], ["k", "s"])
    second = window(mid["latest"], p1["latest"], ["s", "k"])    # in the ticket's order
    whole = t.changes(start, p1["latest"]).to_pylist()
    assert sorted(first + [(k, s, d, ts) for s, k, d, ts in second]) == sorted(
        (r["k"], r["s"], r["is_deleted"], r["commit_ts"]) for r in whole)
    assert len(whole) == 6 and sorted(r[1] for r in second) == [1, 2]
    assert [r[:3] for r in sorted(second, key=lambda r: r[3])] == [
        ("b", 2, True), ("a3", 1, False)]

    st, e = call(ep.address, {"op": "changes_plan", "table": "chg", "start": 1, "end": 2})
    assert st == 0
    st, e = call(ep.address, {"op": "scan", "ticket": e["tickets"][0]})
    assert st == 1 and e["sqlstate"] == "22023" and "ancient history" in e["message"]
    tk = {"kind": "changes", "table": "chg", "table_id": p1["table_id"], "partition": 0,
          "tablet_id": p1["tablet_ids"][0], "start": start, "end": p1["latest"]}
    st, e = call(ep.address, {"op": "scan", "ticket": tk, "skip": 1})
    assert st == 1 and e["sqlstate"] == "0A000"
    st, e = call(ep.address, {"op": "changes_plan", "table": "chg",
                              "at": "2020-01-01T00:00:00"})
    assert st == 0 and 0 < e["at"] < start


def test_changes_plan_moves_an_idle_stream_on_but_not_one_that_missed_changes(
        db, ep, history_age):
    """An idle table must not stop a change stream (its offset falling below the ancient
    history mark), and a stream that was away longer than the history kept while the table
    changed must not skip those changes: "changes_plan" with "idle_from" answers "idle", a
    safe fresh timestamp above the mark, only when no commit follows the offset and the
    offset is in the older half of the history kept; "fresh" (a stream starting at
    "latest") is safe at once. The drivers refuse the other case (22023)."""
    db.session().execute("CREATE TABLE idl (k INT NOT NULL, s STRING, PRIMARY KEY (k)) "
                         "PARTITION BY HASH (k) PARTITIONS 2")

    def plan(**kw):
        st, p = call(ep.address, {"op": "changes_plan", "table": "idl", **kw})
        assert st == 0, p
        return p
    history_age(0.4)
    p = plan(fresh=True)
    assert p["latest"] == 0 and p["fresh"] > p["ahm"] > 0    # no write yet: latest is 0
    assert "idle" not in plan(idle_from=p["fresh"])          # young: stays (no empty batch)
    time.sleep(0.5)
    p0 = plan(idle_from=p["fresh"])                          # now older than the mark
    assert p0["idle"] > p0["ahm"] > p["fresh"]
    assert "idle" in plan(idle_from=0)                       # never written: moves too
    db.session().execute("INSERT INTO idl VALUES (1, 'a')")
    p1 = plan(idle_from=p0["idle"])
    assert "idle" not in p1 and p1["latest"] > p0["idle"]    # a change: read, not skipped
    time.sleep(0.5)                                          # ... and left unread too long
    p2 = plan(idle_from=p0["idle"])
    assert "idle" not in p2 and p0["idle"] < p2["ahm"]
    streaming = pytest.importorskip("kudusql.spark.streaming")
    with pytest.raises(ValueError) as e:
        streaming.check_not_behind("idl", {"ts": p0["idle"]}, p2)
    assert "22023" in str(e.value) and "ancient history mark" in str(e.value)
    streaming.check_not_behind("idl", {"ts": p2["ahm"]}, p2)          # at the mark: fine
    streaming.check_not_behind("idl", {"ts": 0, "earliest": True}, p2)  # retained history
