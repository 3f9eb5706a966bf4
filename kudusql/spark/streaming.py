"""Structured Streaming: the `kudusql` sink (exactly once) and change-data source.

Sink: `df.writeStream.format("kudusql").option("flight" | "masters", ...)
.option("table", t).option("checkpointLocation", dir).start()`

    executor task of micro-batch N                    driver, after all tasks
    write(): batch id, query id, run id from the       commit(messages, N): "finish" the
    task's local properties (Spark sets them);         batch (stream_sink.finish_batch):
    the rows go to the server with that identity:      its progress record := committed,
    begin_batch / replay_filter / write               or failed + the row errors (raised:
    (wire/stream_sink.py: the exactly-once argument)   KudusqlStreamWriteError)

The sink is named `<table>:<Spark query id>`: the query id is kept in the checkpoint, so a
query restarted from its checkpoint is the same sink, and another query is another.
Embedded databases are reached through Flight (do_put with the batch's identity, action
"stream_sink"), clusters through the client library from every executor; the same
wire/stream_sink.py code runs on the server or in the executor respectively. (The JVM
connector's sink, options "endpoint" / "masters" without "rpc_secret_file", runs the same
code behind the Arrow stream endpoint: docs/spark.md. Its change source,
KudusqlChangeStream.java, reads the same change tickets, `wire.flight.change_tickets`,
through the endpoint's "changes_plan" and "scan".)

Change source: `spark.readStream.format("kudusql").option(..).option("table", t)
.option("startingOffsets", "latest" | "earliest" | HybridTime | ISO timestamp).load()`

    driver                                               executors
    initialOffset(): {"ts": T0} (a fresh safe ts,        read(p): Table.changes of one
      the ancient history mark, or the given instant)      tablet in (start, end]: every
    latestOffset(): {"ts": now} once the table changed     commit's row, `_is_deleted`,
    partitions(start, end): one per tablet                 `_commit_ts`, in commit order

Offsets are HybridTimes and Spark checkpoints them; a micro-batch (start, end] is read
exactly (Table.changes waits until `end` is safe; on a cluster through the tablet
leaders' snapshot barrier), so consecutive batches deliver every change once. On an idle
table the offset moves to a fresh safe timestamp once it is older than half the history
kept ({"ts": T, "idle": true}: the server found no change in the window, which is not
read; wire.flight.changes_plan), so a quiet table does not stop the stream; a window of a
table that changed ends "now" (not at its last commit), so an offset is never older than
half the history kept plus the time to the next trigger. A start below
the ancient history mark is refused with SQLSTATE 22023 - on the driver for
`startingOffsets`, and for a stream stopped (or behind) longer than history_max_age_s
while the table changed (`check_not_behind`; in the task, SnapshotTooOld, should the
mark pass it between planning and reading) - never skipped. `earliest` means the history retained when the
first batch is read (the mark moves with the clock). The schema is the table's columns
plus `_is_deleted` (boolean) and `_commit_ts` (long); PySpark asks a data source for one
schema for batch and streaming reads alike, so the change columns are there when
"startingOffsets" is given, and a stream without it is refused with that message.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as fl
from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

try:    # PySpark >= 4.2: admission control (a change stream's maxRowsPerTrigger)
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
except ImportError:     # pragma: no cover - older PySpark: no rate limit
    ReadAllAvailable = ReadMaxRows = None

from kudusql.spark import flight_client
from wire import flight as wflight
from wire import stream_sink

log = logging.getLogger("kudusql.spark")

CHANGE_COLUMNS = ("_is_deleted", "_commit_ts")


def is_change_stream(options) -> bool:
    """Whether a read names a change stream's start (then the schema has the change
    columns; see the module docstring)."""
    return options.get("startingOffsets") not in (None, "")


# -- backends: an embedded database over Flight, or a cluster through the client library ----
class FlightBackend:
    def __init__(self, location: str):
        self.location = location

    def _action(self, kind: str, body: dict):
        return flight_client.action(self.location, kind, body)

    def sink(self, op: str, **body):
        return self._action("stream_sink", {"op": op, **body})

    def write_sink(self, table: str, mode: str, sb: stream_sink.SinkBatch,
                   batches: Iterator[pa.RecordBatch]) -> dict:
        it = iter(batches)
        first = next((b for b in it if b.num_rows), None)
        return flight_client.put(self.location, flight_client.command(
            table=table, mode=mode, sink=sb.to_json()), first, it)

    def changes_plan(self, table: str, at: str | None = None, **extra) -> dict:
        return self._action("changes_plan", {"table": table, "at": at, **extra})

    def read_changes(self, ticket: dict) -> Iterator[pa.RecordBatch]:
        with fl.connect(self.location) as c:
            for chunk in c.do_get(fl.Ticket(json.dumps(ticket).encode())):
                if chunk.data is not None and chunk.data.num_rows:
                    yield chunk.data


class ClusterBackend:
    def __init__(self, options):
        from kudusql.spark.cluster import cluster_catalog
        self.catalog = cluster_catalog(options)

    def sink(self, op: str, **body):
        return stream_sink.driver_op(self.catalog, {"op": op, **body})

    def write_sink(self, table: str, mode: str, sb: stream_sink.SinkBatch,
                   batches: Iterator[pa.RecordBatch]) -> dict:
        return stream_sink.write_batch(self.catalog, table, sb, mode, batches,
                                       wflight.write_batches)

    def changes_plan(self, table: str, at: str | None = None, **extra) -> dict:
        return wflight.changes_plan(self.catalog.table(table), {"at": at, **extra})

    def read_changes(self, ticket: dict) -> Iterator[pa.RecordBatch]:
        out = wflight.read_changes(self.catalog.table(ticket["table"]), ticket)
        yield from out.to_batches()


def backend(options):
    """The backend the options name ("masters": a cluster, else "flight")."""
    if options.get("masters"):
        return ClusterBackend(options)
    loc = options.get("flight")
    if not loc or not options.get("table"):
        raise ValueError('the kudusql streaming source and sink need .option("flight", '
                         '"grpc://host:port") (or .option("masters", ...) and '
                         '.option("rpc_secret_file", path) for a cluster) and '
                         '.option("table", name)')
    return FlightBackend(loc)


# -- the sink --------------------------------------------------------------------------------
@dataclasses.dataclass
class StreamCommitMessage(WriterCommitMessage):
    sink: str
    run: str
    rows: int
    applied: int
    failed: int
    failed_by_code: dict
    errors: list
    skipped: str | None
    already_applied: int


class KudusqlStreamWriter(DataSourceStreamArrowWriter):
    """One writer per streaming query (the driver); `write` runs in the tasks."""

    def __init__(self, options, schema: StructType):
        self.options = dict(options)
        self.table = options.get("table")
        self.mode = str(options.get("mode", "insert")).lower()
        if self.mode not in ("insert", "upsert"):
            raise ValueError(f'option "mode" is insert or upsert, not {self.mode!r}')
        self.ignore_row_errors = str(options.get("ignore_row_errors", "false")).lower() == \
            "true"
        backend(self.options).sink("ensure")   # create the progress table once, here

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitMessage:
        from pyspark import TaskContext

        tc = TaskContext.get()
        query = tc.getLocalProperty("sql.streaming.queryId")
        batch = tc.getLocalProperty("streaming.sql.batchId")
        run = tc.getLocalProperty("spark.jobGroup.id")
        if query is None or batch is None or run is None:
            raise RuntimeError("the kudusql stream sink runs in a Structured Streaming "
                               "micro-batch only (no query / batch id in the task)")
        sb = stream_sink.SinkBatch(f"{self.table}:{query}", int(batch), run,
                                   tc.attemptNumber())
        s = backend(self.options).write_sink(self.table, self.mode, sb, iterator)
        return StreamCommitMessage(sb.sink, run, s["rows"], s["applied"], s["failed"],
                                   s["failed_by_code"], s["errors"][:20], s.get("skipped"),
                                   s.get("already_applied", 0))

    def commit(self, messages, batchId: int) -> None:
        msgs = [m for m in messages if m is not None]
        if not msgs:
            return
        # the decision (committed / failed / a replay skipped) is stream_sink.finish_batch,
        # where the catalog is: the JVM connector's sink asks the same
        sb = stream_sink.SinkBatch(msgs[0].sink, int(batchId), msgs[0].run)
        out = backend(self.options).sink(
            "finish", sink=sb.to_json(), table=self.table, mode=self.mode,
            ignore_row_errors=self.ignore_row_errors,
            summaries=[dataclasses.asdict(m) for m in msgs])
        if out.get("error"):
            raise KudusqlStreamWriteError(out["message"])
        (log.warning if out.get("warning") else log.info)("%s", out["message"])

    def abort(self, messages, batchId: int) -> None:
        log.warning("kudusql stream into %s: batch %s aborted; rows already written stay "
                    "applied and a replay of the batch will not apply them again",
                    self.table, batchId)


class KudusqlStreamWriteError(RuntimeError):
    """Rows of a stream micro-batch failed (as KudusqlWriteError for batch writes); the
    batch is recorded as failed, so a restart from the checkpoint reports it again (or,
    with ignore_row_errors=true, commits it and goes on)."""


# -- the change source -----------------------------------------------------------------------
@dataclasses.dataclass
class ChangePartition(InputPartition):
    ticket: str    # JSON: wire.flight.read_changes


def max_rows_per_trigger(value) -> int | None:
    """The change stream's option maxRowsPerTrigger: a positive integer, or None (no
    limit); anything else is refused (22023)."""
    if value is None or str(value).strip() == "":
        return None
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise ValueError(f'kudusql: option "maxRowsPerTrigger" is a positive integer, not '
                         f'{value!r} (SQLSTATE 22023)')
    return n


def check_not_behind(table: str, start: dict, plan: dict) -> None:
    """Refuse (22023) a window that starts below the ancient history mark while the table
    has changes after it: the stream was stopped (or fell behind) for longer than the
    history kept, and the changes in between may be gone - never skipped silently. (An
    idle table moves the offset instead: `changes_plan`'s "idle".)"""
    if start.get("earliest") or int(start["ts"]) >= int(plan["ahm"]):
        return
    raise ValueError(
        f'kudusql: the change stream of table "{table}" is at offset {start["ts"]}, before '
        f'the ancient history mark ({plan["ahm"]}), and the table changed since: it was '
        f"stopped or behind for longer than the history kept (history_max_age_s), so changes "
        f"may have been garbage collected; start a new stream (a new checkpoint) at "
        f'"earliest" or later (SQLSTATE 22023)')


class KudusqlChangeReader(DataSourceStreamReader):
    def __init__(self, options, schema: StructType):
        if not is_change_stream(options):
            raise ValueError('a kudusql change stream needs .option("startingOffsets", '
                             '"latest" | "earliest" | a HybridTime | an ISO timestamp)')
        self.options = dict(options)
        self.table = options.get("table")
        self.columns = [n for n in schema.fieldNames() if n not in CHANGE_COLUMNS]
        self.starting = str(options.get("startingOffsets")).strip()
        self.max_rows = max_rows_per_trigger(options.get("maxRowsPerTrigger"))

    def _plan(self, at: str | None = None, **extra) -> dict:
        return backend(self.options).changes_plan(self.table, at, **extra)

    def initialOffset(self) -> dict:
        s = self.starting.lower()
        if s == "latest":   # a safe fresh timestamp: never below the mark (an idle table)
            return {"ts": int(self._plan(fresh=True)["fresh"])}
        if s == "earliest":
            return {"ts": int(self._plan()["ahm"]), "earliest": True}
        if s.isdigit():
            plan, ts = self._plan(), int(s)
        else:
            plan = self._plan(self.starting)
            ts = int(plan["at"])
        if ts < int(plan["ahm"]):
            raise ValueError(
                f'kudusql: startingOffsets {self.starting} is before the ancient history mark '
                f'({plan["ahm"]}) of table "{self.table}": changes before it may have been '
                f'garbage collected (history_max_age_s); start at "earliest" or later '
                f"(SQLSTATE 22023)")
        return {"ts": ts}

    def getDefaultReadLimit(self):
        if self.max_rows is None or ReadMaxRows is None:
            return ReadAllAvailable() if ReadAllAvailable is not None else None
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        if start is None:
            return {"ts": int(self._plan()["latest"])}
        extra = {}
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            # the engine's limit, not the option's (Trigger.AvailableNow passes all)
            extra = {"limit_from": int(start["ts"]), "limit_rows": int(limit.max_rows),
                     "limit_earliest": bool(start.get("earliest"))}
        plan = self._plan(idle_from=int(start["ts"]), **extra)
        if "idle" in plan:      # no change after start: (start, idle] is empty, not read
            return {"ts": int(plan["idle"]), "idle": True}
        latest = int(plan["latest"])
        if latest <= int(start["ts"]):
            return start
        check_not_behind(self.table, start, plan)
        if "limit_end" in plan:     # the rate limit: up to a commit, not "now"
            return {"ts": int(plan["limit_end"])}
        # the window ends now, not at the last commit (which may be a trigger old): the
        # next window's start is then no older than the time between two triggers
        return {"ts": max(latest, int(plan.get("now", latest)))}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = int(start["ts"]), int(end["ts"])
        if e <= s or end.get("idle"):
            return []
        # "earliest": the task reads from what history is retained when it reads
        return [ChangePartition(json.dumps(tk)) for tk in wflight.change_tickets(
            self._plan(), self.table, s, e, bool(start.get("earliest")), self.columns)]

    def read(self, partition: ChangePartition) -> Iterator[pa.RecordBatch]:
        for b in backend(self.options).read_changes(json.loads(partition.ticket)):
            fields = list(b.schema)   # keep the key columns' NOT NULL (Spark checks it)
            fields[-2:] = [f.with_name(n) for f, n in zip(fields[-2:], CHANGE_COLUMNS)]
            yield pa.RecordBatch.from_arrays(b.columns, schema=pa.schema(fields)).select(
                self.columns + list(CHANGE_COLUMNS))

    def commit(self, end: dict) -> None:
        pass
