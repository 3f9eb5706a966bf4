"""Exactly-once micro-batches of a streaming sink (Spark Structured Streaming) into a table.

Kudu writes are per row, not atomic, so a sink cannot hide a half-written batch; Spark
re-runs the last batch whose commit it did not log (after a stop, a crash, a kill -9 of
the driver), with the same batch id and - for a replayable source and a deterministic
query - the same rows. Kudu's own sink leans on upserts being idempotent. Here insert
mode must not turn a replay into duplicate-key errors either, and a replay must not apply
a batch twice, so every batch of every sink leaves a record in one table,
`kudusql_stream_progress` (sink, batch_id) -> state, run, t0, counts, message:

    task of batch N (executor)                     driver, all tasks done
    begin_batch: record (sink, N)?                  commit_batch: record (sink, N) :=
      committed/failed -> write nothing (skip)        committed (or failed + the row
      absent -> t0 := the table's current ts,         errors' text, then raise)
               insert (started, run, t0)
      started by another run (or a task retry)
               -> replay: drop every row a previous attempt applied (replay_filter)
    write the rest (insert | upsert)

Why it is exactly once:
- The record reaches `committed` only in the driver's commit, after every task of the
  batch succeeded, and before Spark logs the batch as committed. A replay of a batch whose
  record is committed writes nothing: the kill -9 fell between the two commits.
- Otherwise no attempt of batch N has been committed, but one may have applied part of
  its rows. Every row any attempt of N writes is written after the record's t0 (each task
  makes sure the record exists before it writes, and t0 was taken before it was inserted),
  and every row of an earlier batch was acknowledged before that batch committed, so
  before t0 (t0 is the later of the table's latest timestamp and the record's own commit
  timestamp: a recent one, which a replay can still read at). In a replay, a row whose
  key is absent from the table at snapshot t0, present now, with exactly the values the
  row carries, was applied by a previous attempt: it is dropped (counted as `already_applied`), each key at most once per task. Anything else is
  written as usual, so a genuine duplicate (the key existed at t0, or holds other values)
  is still ALREADY_PRESENT, reported as in a batch write.
- Upsert mode needs no filter (the same values again), but committed batches are skipped
  all the same.

What it cannot tell apart (documented, docs/spark.md): in a replayed batch, a row that
another writer inserted with the very same values after t0, and a key that two Spark tasks
of the batch both insert with identical values. A replay after history_max_age_s (the
ancient history mark passed t0) fails with SnapshotTooOld (22023) rather than guess.

The record of batch N - RETAIN_BATCHES is deleted when batch N commits (Spark itself keeps
100 batches of offsets and commits; it only ever replays the last one).

The driver's side is `driver_op` ("ensure" the progress table, a batch's "record", and
"finish": `finish_batch`, which turns the tasks' summaries into the batch's final record
and the error to raise, if any). Everything here runs where the catalog is, for every
path alike: the Flight endpoint (`do_put` with a "sink" member; action "stream_sink") and
the Arrow stream endpoint (`put` with a "sink" member; op "stream_sink") of an embedded
database or of a tablet server (wire/arrow_stream.py: the JVM connector's sink, embedded
or on a cluster), and the PySpark source's cluster writer over a RemoteCatalog. Only the
engine's public Table / Catalog API is used, so all are the same code.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import errors
from engine.schema import ColumnSchema, Schema
from engine.tablet.scan_spec import ColumnPredicate
from engine.types import DataType
from wire.conform import conform

PROGRESS_TABLE = "kudusql_stream_progress"
STARTED, COMMITTED, FAILED = "started", "committed", "failed"
RETAIN_BATCHES = 100

PROGRESS_SCHEMA = Schema(
    [ColumnSchema("sink", DataType.STRING), ColumnSchema("batch_id", DataType.INT64),
     ColumnSchema("state", DataType.STRING), ColumnSchema("run", DataType.STRING),
     ColumnSchema("t0", DataType.INT64),
     ColumnSchema("rows", DataType.INT64, nullable=True),
     ColumnSchema("applied", DataType.INT64, nullable=True),
     ColumnSchema("failed", DataType.INT64, nullable=True),
     ColumnSchema("message", DataType.STRING, nullable=True)],
    key=["sink", "batch_id"])


@dataclasses.dataclass(frozen=True)
class SinkBatch:
    """Which batch a task writes: the sink (target table + Spark query id, stable across
    restarts from one checkpoint), Spark's batch id, the query run (new at every start)
    and the task's attempt number (> 0: a retry of a task that may have written rows)."""

    sink: str
    batch: int
    run: str
    attempt: int = 0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "SinkBatch":
        return cls(str(d["sink"]), int(d["batch"]), str(d["run"]), int(d.get("attempt", 0)))


@dataclasses.dataclass(frozen=True)
class BatchStart:
    """What a task does with its rows: `skip` (the batch's final state, nothing to
    write) or write them, filtered by `replay_filter(t0)` when `replay`."""

    skip: str | None
    t0: int
    replay: bool


def ensure_progress_table(catalog):
    """The progress table (created on first use; Catalog and RemoteCatalog alike)."""
    if not catalog.has_table(PROGRESS_TABLE):
        catalog.create_table(PROGRESS_TABLE, PROGRESS_SCHEMA, if_not_exists=True,
                             comment="kudusql streaming sinks: one row per micro-batch")
    return catalog.table(PROGRESS_TABLE)


def batch_record(catalog, sink: str, batch: int) -> dict | None:
    """The progress record of (sink, batch), or None."""
    return ensure_progress_table(catalog).lookup((sink, int(batch)))


def begin_batch(catalog, table: str, sb: SinkBatch) -> BatchStart:
    """Called by each task before it writes (see the module docstring)."""
    prog = ensure_progress_table(catalog)
    rec = prog.lookup((sb.sink, sb.batch))
    if rec is None:
        t0 = int(catalog.table(table).current_timestamp())
        r = prog.insert(_record(sb.sink, sb.batch, STARTED, sb.run, t0))
        if not r.row_errors:
            # t0 is at or after every write acknowledged before the batch; the record's
            # own commit timestamp is that too, and recent (the table's last write may be
            # older than the ancient history mark, or none: 0), so a replay can read it
            fresh = int(r.timestamp or 0)
            if fresh > t0:
                prog.upsert(_record(sb.sink, sb.batch, STARTED, sb.run, fresh))
                t0 = fresh
            return BatchStart(None, t0, sb.attempt > 0)
        rec = prog.lookup((sb.sink, sb.batch))   # another task of the batch was first
        if rec is None:
            raise RuntimeError(f"stream sink {sb.sink}: the record of batch {sb.batch} "
                               f"could not be written: {r.row_errors[0].message}")
    if rec["state"] in (COMMITTED, FAILED):
        return BatchStart(rec["state"], int(rec["t0"]), False)
    return BatchStart(None, int(rec["t0"]), rec["run"] != sb.run or sb.attempt > 0)


def commit_batch(catalog, sb: SinkBatch, state: str, summary: dict[str, Any],
                 message: str | None = None) -> None:
    """Record the batch's final state (the driver's commit); forget an old batch."""
    prog = ensure_progress_table(catalog)
    rec = prog.lookup((sb.sink, sb.batch))
    t0 = int(rec["t0"]) if rec else 0
    row = _record(sb.sink, sb.batch, state, sb.run, t0, summary.get("rows"),
                  summary.get("applied"), summary.get("failed"), message)
    r = prog.upsert(row)
    if r.row_errors:
        raise RuntimeError(f"stream sink {sb.sink}: batch {sb.batch} could not be "
                           f"recorded as {state}: {r.row_errors[0].message}")
    old = sb.batch - RETAIN_BATCHES
    if old >= 0:
        prog.delete(pa.table({"sink": [sb.sink], "batch_id": pa.array([old], pa.int64())}))


def finish_batch(catalog, sb: SinkBatch, table: str, mode: str, summaries: list[dict],
                 ignore_row_errors: bool = False) -> dict[str, Any]:
    """The driver's commit of batch `sb` from its tasks' summaries (`write_batch`'s, each
    with "rows", "applied", "failed", "failed_by_code", "errors", "skipped",
    "already_applied"): records the batch's final state and answers {"state",
    "message", "error": the message is to be raised, "warning": to be logged as one,
    "sqlstate"}.

    - A task that found the batch already final ("skipped": a replay) means every task
      did: a committed batch stays committed (the replay wrote nothing); a failed one is
      reported again (an error), or, with ignore_row_errors, committed now.
    - Otherwise the batch is committed when no row failed; with failed rows it is recorded
      as failed and its text (counts per code and examples, as a batch write's) is the
      error - unless ignore_row_errors, which commits it and warns."""
    if any(s.get("skipped") for s in summaries):
        rec = batch_record(catalog, sb.sink, sb.batch) or {}
        msg = rec.get("message") or "failed"
        if rec.get("state") == FAILED:
            if not ignore_row_errors:
                return {"state": FAILED, "message": msg, "error": True,
                        "sqlstate": _sqlstate(msg)}
            commit_batch(catalog, sb, COMMITTED, rec, rec.get("message"))
            return {"state": COMMITTED, "message": f"{msg} (ignore_row_errors: batch "
                    f"{sb.batch} committed now)", "error": False, "warning": True}
        return {"state": rec.get("state"), "error": False, "message":
                f"kudusql stream into {table}: batch {sb.batch} was committed before "
                f"(replay skipped)"}
    rows = sum(int(s.get("rows") or 0) for s in summaries)
    applied = sum(int(s.get("applied") or 0) for s in summaries)
    failed = sum(int(s.get("failed") or 0) for s in summaries)
    again = sum(int(s.get("already_applied") or 0) for s in summaries)
    summary = {"rows": rows, "applied": applied + again, "failed": failed}
    text = (f"kudusql {mode} into {table}, stream batch {sb.batch}: {rows} rows, "
            f"{applied} applied" + (f" (+{again} applied by an earlier attempt of this "
                                    f"batch)" if again else "") + f", {failed} failed")
    if not failed:
        commit_batch(catalog, sb, COMMITTED, summary)
        return {"state": COMMITTED, "message": text, "error": False}
    codes: dict[str, int] = {}
    for s in summaries:
        for k, v in (s.get("failed_by_code") or {}).items():
            codes[k] = codes.get(k, 0) + int(v)
    examples = "; ".join(f"{e['code']} key {e['key']}: {e['message']}"
                         for s in summaries for e in (s.get("errors") or [])[:3])[:2000]
    text += (f" ({', '.join(f'{k}: {v}' for k, v in sorted(codes.items()))}); the other "
             f"rows were applied and stay applied; e.g. {examples}")
    if ignore_row_errors:
        commit_batch(catalog, sb, COMMITTED, summary, text)
        return {"state": COMMITTED, "message": text, "error": False, "warning": True}
    commit_batch(catalog, sb, FAILED, summary, text)
    return {"state": FAILED, "message": text, "error": True,
            "sqlstate": _codes_sqlstate(codes)}


def _codes_sqlstate(codes) -> str:
    """A failed batch's SQLSTATE from its row error codes: duplicate keys alone 23505."""
    return "23505" if set(codes) == {"ALREADY_PRESENT"} else "22000"


def _sqlstate(message: str) -> str:
    """A failed batch's SQLSTATE from its recorded text, whose "(CODE: n, ...)" after
    "failed" lists its row error codes (`finish_batch`)."""
    listed = message.partition(" failed (")[2].partition(")")[0]
    return _codes_sqlstate(p.partition(":")[0].strip() for p in listed.split(",")
                           if p.strip())


def driver_op(catalog, body: dict) -> Any:
    """A streaming sink driver's request (Flight action "stream_sink", the Arrow stream
    endpoint's op "stream_sink", the PySpark cluster writer): {"op": "ensure"} the
    progress table; {"op": "record", "sink"} a batch's record; {"op": "commit", "sink",
    "state", "summary", "message"?} its final state; {"op": "finish", "sink", "table",
    "mode", "summaries", "ignore_row_errors"} `finish_batch`."""
    op = body.get("op")
    if op == "ensure":
        ensure_progress_table(catalog)
        return {"table": PROGRESS_TABLE}
    sb = SinkBatch.from_json(body["sink"])
    if op == "record":
        return batch_record(catalog, sb.sink, sb.batch)
    if op == "commit":
        commit_batch(catalog, sb, body["state"], body.get("summary") or {},
                     body.get("message"))
        return {"ok": True}
    if op == "finish":
        return finish_batch(catalog, sb, str(body["table"]), str(body.get("mode", "insert")),
                            list(body.get("summaries") or []),
                            bool(body.get("ignore_row_errors")))
    raise errors.InvalidArgument(f"unknown stream sink request {op!r}")


def replay_filter(t, rows: pa.Table, t0: int, claimed: pa.Table | None = None
                  ) -> tuple[pa.Table, pa.Table | None]:
    """(rows minus those a previous attempt of this batch applied, the keys claimed so
    far): a row is dropped when its key was absent at snapshot t0 and is present now with
    the row's values (null-equal), the first row of each such key only - `claimed` holds
    the keys earlier chunks of the same task dropped (pass the returned table on). Reads the
    table twice, restricted by IN predicates on the key columns (a replay-only path)."""
    if rows.num_rows == 0:
        return rows, claimed
    schema = t.schema
    keys = list(schema.key_names)
    names = [n for n in rows.column_names if schema.has_column(n)]
    rows = conform(rows, schema.arrow_schema(rows.column_names))
    # IN lists of the distinct key values (Python values: the predicate's literal form)
    preds = [ColumnPredicate.in_list(k, [v for v in pc.unique(rows.column(k)).to_pylist()
                                         if v is not None]) for k in keys]
    now = t.scan_table(names, preds)
    if now.num_rows == 0:
        return rows, claimed
    then = t.scan_table(keys, preds, snapshot=int(t0))
    fresh = now.join(then.append_column("_old", pa.array(np.ones(then.num_rows, bool))),
                     keys, join_type="left outer")
    fresh = fresh.filter(pc.is_null(fresh.column("_old"))).drop_columns(["_old"])
    if fresh.num_rows == 0:
        return rows, claimed
    idx = pa.array(np.arange(rows.num_rows, dtype=np.int64))
    mine = rows.select(names).append_column("_row", idx)
    other = fresh.rename_columns([c if c in keys else c + "_now" for c in fresh.column_names])
    j = mine.join(other, keys, join_type="inner")
    same = None
    for c in names:
        if c in keys:
            continue
        a, b = j.column(c), j.column(c + "_now")
        eq = pc.or_kleene(pc.equal(a, b), pc.and_(pc.is_null(a), pc.is_null(b)))
        eq = pc.fill_null(eq, False)
        same = eq if same is None else pc.and_(same, eq)
    hits = j if same is None else j.filter(same)
    if claimed is not None and hits.num_rows:
        hits = hits.join(claimed, keys, join_type="left anti")
    if hits.num_rows == 0:
        return rows, claimed
    # the first row of each key only: a later identical row of the same key was a
    # duplicate in the first attempt too
    first = hits.group_by(keys).aggregate([("_row", "min")]).column("_row_min")
    drop = np.zeros(rows.num_rows, dtype=bool)
    drop[first.to_numpy()] = True
    new = rows.select(keys).filter(pa.array(drop))
    claimed = new if claimed is None else pa.concat_tables([claimed, new])
    return rows.filter(pa.array(~drop)), claimed


def _record(sink, batch, state, run, t0, n=None, applied=None, failed=None, message=None
            ) -> pa.Table:
    arrow = PROGRESS_SCHEMA.arrow_schema()
    return pa.Table.from_pylist([{"sink": sink, "batch_id": int(batch), "state": state,
                                  "run": run, "t0": int(t0), "rows": n, "applied": applied,
                                  "failed": failed, "message": message}], schema=arrow)


def write_batch(catalog, table: str, sb: SinkBatch, mode: str, batches,
                write_batches) -> dict[str, Any]:
    """One task's rows of batch `sb` into `table`: begin_batch, then (unless skipped) the
    batches written by `write_batches(t, mode, batches) -> summary` (the caller's chunked
    writer: Flight's, or the cluster writer's), each replayed insert batch filtered first.
    The summary gains "skipped" (the batch's final state, or None), "already_applied",
    "sink", "batch" and "run" for the driver's commit."""
    start = begin_batch(catalog, table, sb)
    extra = {"skipped": start.skip, "already_applied": 0, "sink": sb.sink,
             "batch": sb.batch, "run": sb.run}
    if start.skip:
        for _ in batches:     # drain the stream: the client is still sending it
            pass
        return {"table": table, "mode": mode, "rows": 0, "applied": 0, "failed": 0,
                "failed_by_code": {}, "errors": [], **extra}
    t = catalog.table(table)

    def filtered():
        claimed = None
        for b in batches:
            if not b.num_rows:
                continue
            if start.replay and mode == "insert":
                kept, claimed = replay_filter(t, pa.Table.from_batches([b]), start.t0,
                                              claimed)
                extra["already_applied"] += b.num_rows - kept.num_rows
                yield from kept.to_batches()
            else:
                yield b

    summary = write_batches(t, mode, filtered())
    summary.update(extra)
    return summary
