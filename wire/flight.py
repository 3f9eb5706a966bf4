"""The columnar endpoint: an Arrow Flight server over a Database (Kudu's scan tokens).

Kudu's Spark integration (paper §5.1) asks the master for the table's tablets, makes one
Spark partition per tablet, scans each tablet where it lives, and pins every scan to one
snapshot (READ_AT_SNAPSHOT) so the partitions form one consistent cut. Flight has exactly
these pieces, so the protocol is plain Flight with JSON commands:

    client                                   FlightServer
    get_schema(cmd {"table"})           ->   table's Arrow schema (DataFrame schema)
    get_flight_info(cmd {"table", "columns", "predicates", "snapshot"?})
                                        ->   snapshot T chosen ONCE (every pruned tablet
                                             made safe at T), partitions pruned with the
                                             predicates; ONE endpoint per remaining tablet,
                                             its ticket = {table id, partition index,
                                             tablet id, columns, predicates, T}
    do_get(ticket)  (any process)       ->   Table.scan_partition(index, ..., snapshot=T)
    do_put(cmd {"table", "mode": insert|upsert}, stream)
                                        ->   rows written chunk by chunk; the PutResult
                                             metadata is a JSON summary: applied, failed,
                                             failed per code, the first row errors
    do_action("stats")                  ->   JSON: the last scans (per query: tablets
                                             total / pruned / read, rows scanned / returned)
    do_action("clear_stats"), do_action("current_timestamp", {"table"}),
    do_action("bind", {"table", "predicates"})  -> which predicates the table accepts
    do_put(cmd {..., "sink": {sink, batch, run, attempt}}) -> one task of a streaming
                                             sink's micro-batch, exactly once
                                             (wire/stream_sink.py); do_action("stream_sink")
                                             the driver's records of those batches
    do_action("changes_plan", {"table",   ->  latest timestamp, ancient history mark,
      "at"?, "fresh"?, "idle_from"?,         "now", tablets, "fresh"? / "idle"? (a safe
      "limit_from"?, "limit_rows"?})         fresh timestamp), "limit_end"? (a rate
                                             limit's end: `changes_plan`);
                                             do_get({"kind": "changes", ...})
                                             -> Table.changes of one tablet in (start, end]

Predicates are `engine.tablet.scan_spec.ColumnPredicate`s in JSON (`predicate_to_json`);
literals that JSON cannot hold are tagged: {"$date": iso}, {"$timestamp": iso},
{"$decimal": text}, {"$bytes": base64}. A ticket is self-contained (any server of the
same database can serve it) and names its tablet: if the table was repartitioned since
get_flight_info (ADD / DROP RANGE PARTITION, a dropped and re-created table), do_get
refuses the ticket rather than reading another tablet.

Snapshot. Without one in the command, T is the timestamp `Table.scan` picks for a fresh
scan of the pruned tablets (each tablet's clock moved past T and its in-flight ops <= T
waited for), so a write acknowledged after get_flight_info is invisible to every do_get of
that flight. With "snapshot": T given, tablets refuse a T older than their ancient history
mark (FlightServerError naming SnapshotTooOld).

Deliberately not done: authentication and TLS (bind it to loopback, as with `trust`), one
location per tablet replica (a single node serves everything), DELETE / UPDATE over
do_put, and locality hints.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import datetime as _dt
import decimal
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.flight as fl

from engine import errors
from engine.tablet.mvcc import MvccSnapshot
from engine.tablet.scan_spec import ColumnPredicate
from wire import stream_sink
from wire.conform import conform  # noqa: F401 - re-exported: wire.flight.conform

log = logging.getLogger("kudusql.flight")

# Rows per engine write op of a put (Flight do_put, the stream endpoint's "put"): a
# Spark task streams batches of 10k-64k rows; one op of 200k rows costs less per row
# (the same size as the TPC-H loader's batches; 433k vs 564k rows/s measured at 64k / 200k).
PUT_CHUNK_ROWS = 200_000
# Row errors returned in full in the PutResult metadata (the counts are always complete).
PUT_MAX_ERRORS = 100
# Finished scans remembered for the "stats" action.
STATS_HISTORY = 256


# -- JSON forms --------------------------------------------------------------------------
def value_to_json(v: Any) -> Any:
    if isinstance(v, _dt.datetime):
        return {"$timestamp": v.isoformat()}
    if isinstance(v, _dt.date):
        return {"$date": v.isoformat()}
    if isinstance(v, decimal.Decimal):
        return {"$decimal": str(v)}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(v)).decode()}
    return v


def value_from_json(v: Any) -> Any:
    if isinstance(v, dict) and len(v) == 1:
        (tag, x), = v.items()
        if tag == "$timestamp":
            return _dt.datetime.fromisoformat(x)
        if tag == "$date":
            return _dt.date.fromisoformat(x)
        if tag == "$decimal":
            return decimal.Decimal(x)
        if tag == "$bytes":
            return base64.b64decode(x)
    return v


def predicate_to_json(p: ColumnPredicate) -> dict:
    return {"column": p.column, "kind": p.kind, "lower": value_to_json(p.lower),
            "upper": value_to_json(p.upper), "lower_inclusive": p.lower_inclusive,
            "upper_inclusive": p.upper_inclusive,
            "values": [value_to_json(v) for v in p.values]}


def predicate_from_json(d: dict) -> ColumnPredicate:
    kind = d["kind"]
    if kind not in ("range", "in", "is_null", "is_not_null"):
        raise errors.InvalidArgument(f"unknown predicate kind {kind!r}")
    return ColumnPredicate(d["column"], kind, value_from_json(d.get("lower")),
                           value_from_json(d.get("upper")), bool(d.get("lower_inclusive", True)),
                           bool(d.get("upper_inclusive", False)),
                           tuple(value_from_json(v) for v in d.get("values", ())))


def command(**kw) -> fl.FlightDescriptor:
    """A command descriptor (client side): `command(table="t", columns=[...], ...)`."""
    if "predicates" in kw:
        kw["predicates"] = [p if isinstance(p, dict) else predicate_to_json(p)
                            for p in kw["predicates"]]
    return fl.FlightDescriptor.for_command(json.dumps(kw).encode())


# -- statistics --------------------------------------------------------------------------
@dataclasses.dataclass
class QueryStats:
    """One get_flight_info and the do_gets of its endpoints."""

    query_id: int
    table: str
    columns: list[str] | None
    predicates: list[dict]
    snapshot: int
    tablets_total: int
    tablets_pruned: int
    tablets_read: int = 0
    rows_scanned: int = 0
    rows_returned: int = 0
    started: float = dataclasses.field(default_factory=time.time)


class ScanStats:
    """The last planned scans and what their tablets' reads shipped (shared by the Flight
    and the Arrow stream endpoints: how the tests see pruning and pushdown)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 1
        self._queries: collections.OrderedDict[int, QueryStats] = collections.OrderedDict()

    def new_query(self, **kw) -> int:
        with self._lock:
            qid = self._next
            self._next += 1
            self._queries[qid] = QueryStats(qid, **kw)
            while len(self._queries) > STATS_HISTORY:
                self._queries.popitem(last=False)
            return qid

    def tablet_read(self, qid: int, rows_scanned: int, rows_returned: int) -> None:
        with self._lock:
            q = self._queries.get(qid)
            if q is not None:
                q.tablets_read += 1
                q.rows_scanned += rows_scanned
                q.rows_returned += rows_returned

    def snapshot(self) -> list[dict]:
        with self._lock:
            return [dataclasses.asdict(q) for q in self._queries.values()]

    def clear(self) -> None:
        with self._lock:
            self._queries.clear()


def _flight_error(e: Exception) -> Exception:
    """Engine errors as Flight errors (the message names the engine error class)."""
    text = f"{type(e).__name__}: {e}"
    if isinstance(e, (errors.InvalidArgument, errors.ColumnNotFound, errors.NotFound,
                      errors.SnapshotTooOld, KeyError, ValueError, TypeError)):
        return fl.FlightServerError(text)
    return fl.FlightInternalError(text)


class FlightServer(fl.FlightServerBase):
    """Arrow Flight over `db.catalog` (see the module docstring).

        server = FlightServer(db, "grpc://127.0.0.1:0")   # listening once constructed
        threading.Thread(target=server.serve, daemon=True).start(); server.port
        ...; server.shutdown()
    """

    def __init__(self, db, location: str = "grpc://127.0.0.1:0", **kwargs):
        super().__init__(location, **kwargs)
        self.db = db
        self.host = location.split("://", 1)[-1].rsplit(":", 1)[0]
        self.stats = ScanStats()
        # the ArrowStreamServer beside it (wire.arrow_stream.start_endpoints), stopped with it
        self.stream = None

    @property
    def location(self) -> str:
        return f"grpc://{self.host}:{self.port}"

    @property
    def stream_address(self) -> str | None:
        """"host:port" of the Arrow IPC stream endpoint next to this server, or None."""
        return self.stream.address if self.stream is not None else None

    def shutdown(self) -> None:
        if self.stream is not None:
            self.stream.shutdown()
            self.stream = None
        super().shutdown()

    def serve_in_thread(self) -> threading.Thread:
        t = threading.Thread(target=self.serve, name="kudusql-flight", daemon=True)
        t.start()
        return t

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _command(descriptor: fl.FlightDescriptor) -> dict:
        if descriptor.descriptor_type != fl.DescriptorType.CMD:
            raise fl.FlightServerError("kudusql expects a command descriptor (JSON)")
        cmd = json.loads(descriptor.command)
        if not isinstance(cmd, dict) or not isinstance(cmd.get("table"), str):
            raise fl.FlightServerError('the command needs "table"')
        return cmd

    def _table(self, name: str):
        try:
            return self.db.catalog.table(name)
        except Exception as e:  # noqa: BLE001 - boundary: answer with a Flight error
            raise _flight_error(e) from None

    # -- reads -----------------------------------------------------------------------------
    def get_schema(self, context, descriptor):
        cmd = self._command(descriptor)
        t = self._table(cmd["table"])
        try:
            return fl.SchemaResult(t.schema.arrow_schema(cmd.get("columns")))
        except Exception as e:  # noqa: BLE001
            raise _flight_error(e) from None

    def get_flight_info(self, context, descriptor):
        cmd = self._command(descriptor)
        t = self._table(cmd["table"])
        try:
            plan = plan_scan(t, cmd, self.stats)
        except fl.FlightError:
            raise
        except Exception as e:  # noqa: BLE001
            raise _flight_error(e) from None
        endpoints = [fl.FlightEndpoint(json.dumps(tk).encode(), [self.location])
                     for tk in plan.tickets]
        app = json.dumps({"snapshot": plan.snapshot, "query_id": plan.query_id,
                          "tablets_total": plan.tablets_total}).encode()
        return fl.FlightInfo(plan.schema, descriptor, endpoints, -1, -1, app_metadata=app)

    def do_get(self, context, ticket):
        try:
            tk = json.loads(ticket.ticket)
            if tk.get("kind") == "changes":
                out = read_changes(self._table(tk["table"]), tk)
                return fl.RecordBatchStream(out)
            scan, schema = open_ticket(self._table(tk["table"]), tk)
        except fl.FlightError:
            raise
        except Exception as e:  # noqa: BLE001
            raise _flight_error(e) from None
        return fl.GeneratorStream(schema, scan_batches(scan, tk["query_id"], schema,
                                                       self.stats))

    # -- writes ----------------------------------------------------------------------------
    def do_put(self, context, descriptor, reader, writer):
        cmd = self._command(descriptor)
        t = self._table(cmd["table"])
        try:
            batches = (c.data for c in reader if c.data is not None)
            if cmd.get("sink"):   # one task of a streaming sink's micro-batch
                summary = stream_sink.write_batch(
                    self.db.catalog, t.metadata.name, stream_sink.SinkBatch.from_json(
                        cmd["sink"]), cmd.get("mode", "insert"), batches, write_batches)
            else:
                summary = write_batches(t, cmd.get("mode", "insert"), batches)
        except fl.FlightError:
            raise
        except Exception as e:  # noqa: BLE001
            raise _flight_error(e) from None
        writer.write(pa.py_buffer(json.dumps(summary).encode()))

    # -- actions ---------------------------------------------------------------------------
    def list_actions(self, context):
        return [("stats", "the last scans' statistics (JSON)"),
                ("clear_stats", "forget the scan statistics"),
                ("current_timestamp", ('{"table"}: a timestamp at or after every '
                                       "acknowledged write (a snapshot for later reads)")),
                ("bind", '{"table", "predicates"}: which predicates the table accepts'),
                ("stream_sink", '{"op": ensure | record | commit | finish, ...}: a streaming '
                                "sink's batch records (wire/stream_sink.py)"),
                ("changes_plan", '{"table", "at"?}: latest timestamp, ancient history '
                                 "mark and partitions for a change stream")]

    def do_action(self, context, action):
        body = json.loads(action.body.to_pybytes() or b"null")
        try:
            if action.type == "stats":
                out: Any = self.stats.snapshot()
            elif action.type == "clear_stats":
                self.stats.clear()
                out = {"ok": True}
            elif action.type == "current_timestamp":
                out = {"timestamp": self._table(body["table"]).current_timestamp()}
            elif action.type == "bind":
                out = self._bind(self._table(body["table"]), body.get("predicates") or [])
            elif action.type == "stream_sink":
                out = self._stream_sink(body)
            elif action.type == "changes_plan":
                out = changes_plan(self._table(body["table"]), body)
            else:
                raise fl.FlightServerError(f"unknown action {action.type!r}")
        except fl.FlightError:
            raise
        except Exception as e:  # noqa: BLE001
            raise _flight_error(e) from None
        yield fl.Result(json.dumps(out).encode())

    def _stream_sink(self, body: dict):
        """The driver's side of a streaming sink: `stream_sink.driver_op` ("ensure" the
        progress table, a batch's "record", "commit" / "finish" a batch)."""
        return stream_sink.driver_op(self.db.catalog, body)

    @staticmethod
    def _bind(t, preds: list[dict]) -> list[bool]:
        return bind_predicates(t, preds)


def bind_predicates(t, preds: list[dict]) -> list[bool]:
    """Which JSON predicates the table accepts (column exists, literal binds to its type)."""
    from engine.tablet.scan_spec import BoundPredicate

    schema = t.schema
    ok = []
    for d in preds:
        try:
            p = predicate_from_json(d)
            BoundPredicate(p, schema.column(p.column))
            ok.append(True)
        except Exception:  # noqa: BLE001 - a literal the column cannot take
            ok.append(False)
    return ok


# -- the scan and write steps both columnar endpoints share (Flight, wire/arrow_stream.py) --
@dataclasses.dataclass
class ScanPlan:
    """A planned scan: its Arrow schema, snapshot T, stats id and one ticket per tablet
    the predicates leave (self-contained JSON: table, table id, partition, tablet id,
    columns, predicates, T)."""

    schema: pa.Schema
    snapshot: int
    query_id: int
    tablets_total: int
    tickets: list[dict]


def plan_scan(t, cmd: dict, stats: ScanStats) -> ScanPlan:
    """Plan `cmd` ({"table", "columns"?, "predicates"?, "snapshot"?}) over Table `t`: T is
    chosen once and every pruned tablet made safe at it (nothing is read: tablet scans are
    lazy); bad columns or literals raise engine errors here."""
    meta = t.metadata
    columns = cmd.get("columns")
    preds_json = list(cmd.get("predicates") or [])
    preds = [predicate_from_json(p) for p in preds_json]
    snapshot = cmd.get("snapshot")
    probe = t.scan([], preds, snapshot)
    ts = probe.timestamp if snapshot is None else int(snapshot)
    probe.close()
    schema = meta.schema.arrow_schema(columns)
    keep = meta.partition_schema.prune(preds)
    qid = stats.new_query(
        table=meta.name, columns=columns, predicates=preds_json, snapshot=ts,
        tablets_total=len(meta.tablet_ids),
        tablets_pruned=len(meta.tablet_ids) - len(keep))
    # "fresh": T was picked here (the tablets' latest commit, made safe), as a statement's
    # scan picks it; the tablet scans read at T like that scan does, without the ancient
    # history check an explicit snapshot gets — else a table idle for longer than the
    # history kept could not be read (T would be its last write's time, below the mark).
    tickets = [{"query_id": qid, "table": meta.name, "table_id": t.id, "partition": i,
                "tablet_id": meta.tablet_ids[i], "columns": columns,
                "predicates": preds_json, "snapshot": ts, "fresh": snapshot is None}
               for i in keep]
    return ScanPlan(schema, ts, qid, len(meta.tablet_ids), tickets)


def changes_plan(t, body: dict) -> dict:
    """The driver's view for a change stream (kudusql/spark/streaming.py): the table's
    latest timestamp (every acknowledged write at or before it), its ancient history mark,
    its partitions (one change ticket each), and `start` resolved to a HybridTime when
    given as an ISO timestamp (changes after that instant).

    "fresh": true (a stream starting at "latest") adds "fresh": `Table.safe_now()`, a
    timestamp every write at or below which is already visible. "idle_from": O (the
    stream's offset) adds "idle": T when the table has no commit after O and O has used
    up half the history kept (`_idle_too_long`): T is `safe_now()`, and the table's
    last commit (`Table.committed_timestamp`: its own tablets', not the timestamps a
    cluster client saw on other tables) read again after T was made safe is still <= O,
    so (O, T] holds no
    change at all and the stream may move its offset to T without reading it. That keeps
    an idle stream's windows above the ancient history mark; a stream whose offset fell
    below the mark while the table changed gets no "idle" (its driver refuses it, 22023).

    "now": max(latest, `Table.clock_now()`), the end a driver gives the window of a table
    that changed: not the last commit, which may be nearly a trigger interval old already
    (a window ending there leaves the next one's start that much older, and a trigger
    interval above half the history kept then put a start below the mark with nothing
    lost: a spurious 22023). It needs no barrier here: the window's reader makes its end
    safe on each tablet first (`Tablet.changes`: a write still in flight at or below it is
    waited for and read in this window; every later one gets a timestamp above it).

    "limit_from": O, "limit_rows": N (and "limit_earliest": a stream's first window from
    "earliest"): a rate limit (maxRowsPerTrigger) adds "limit_end", the window's end
    holding at most about N change rows when (O, latest] holds more (`_limit_end`)."""
    from engine.clock import upper_bound_for_micros

    meta = t.metadata
    latest = t.current_timestamp()
    out = {"latest": latest, "ahm": t.ancient_history_mark(),
           "now": max(latest, t.clock_now()),
           "table_id": t.id, "tablet_ids": list(meta.tablet_ids)}
    at = body.get("at")
    if at is not None:
        v = _dt.datetime.fromisoformat(str(at))
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.timezone.utc)
        out["at"] = upper_bound_for_micros(int(v.timestamp()) * 1_000_000 + v.microsecond)
    if body.get("fresh"):
        out["fresh"] = t.safe_now()
    frm = body.get("idle_from")
    if frm is not None and _idle_too_long(t, out, int(frm)) and \
            t.committed_timestamp() <= int(frm):
        safe = t.safe_now()
        # read again once `safe` is safe: a write that committed since (or was in flight)
        # at or below `safe` shows here, and then (O, safe] is read, not skipped
        if t.committed_timestamp() <= int(frm):
            out["idle"] = safe
    lim, lfrom = body.get("limit_rows"), body.get("limit_from")
    if lim is not None and lfrom is not None:
        end = _limit_end(t, out, int(lfrom), bool(body.get("limit_earliest")), int(lim))
        if end is not None:
            out["limit_end"] = end
    return out


def _limit_end(t, plan: dict, start: int, earliest: bool, rows: int) -> int | None:
    """A change stream's rate limit (maxRowsPerTrigger): the last commit timestamp E in
    (start, latest] such that the commits in (start, E] changed at most `rows` rows
    (`Table.change_counts`: a record per changed row, so a bound on the change rows), at
    least one commit whatever its size (an offset is a timestamp: a commit is never
    split); None when the whole window fits, nothing changed, or the start is below the
    mark on a stream not from "earliest" (its driver refuses it, 22023)."""
    latest = int(plan["latest"])
    if latest <= start or (start < int(plan["ahm"]) and not earliest):
        return None
    ts, counts = t.change_counts(start, latest, retained=earliest)
    total = counts.cumsum()
    if not len(ts) or int(total[-1]) <= rows:
        return None
    k = max(1, int((total <= rows).sum()))
    return int(ts[k - 1])


def _idle_too_long(t, plan: dict, offset: int) -> bool:
    """Whether an idle stream's offset is in the older half of the history kept (between
    the ancient history mark and now): then it moves (`changes_plan`'s "idle"), about once
    per history_max_age_s / 2 on an idle table rather than at every trigger (each move
    is an empty micro-batch, and on a cluster a snapshot barrier on every tablet)."""
    ahm = int(plan["ahm"])
    now = t.clock_now()
    return offset < ahm + (max(now, ahm) - ahm) // 2


def change_tickets(plan: dict, table: str, start: int, end: int, earliest: bool,
                   columns: list[str] | None) -> list[dict]:
    """One change ticket per partition of `changes_plan`'s answer `plan` for the window
    (start, end] (`read_changes`); `earliest`: the first window of a stream started at
    "earliest", read from the history retained when each tablet is read (the mark moves
    with the clock). The PySpark change source and the JVM connector's (the Arrow stream
    endpoint's "changes_plan") build the same tickets here."""
    return [{"kind": "changes", "table": table, "table_id": plan["table_id"],
             "partition": i, "tablet_id": tid, "start": int(start), "end": int(end),
             "earliest": bool(earliest), "columns": columns}
            for i, tid in enumerate(plan["tablet_ids"])]


def _ticket_partition(t, tk: dict, since: str) -> tuple[int, object]:
    """(the partition index of ticket `tk`, the table metadata it was checked against):
    the index must still hold the ticket's tablet of the same table; InvalidArgument
    ("... was repartitioned or re-created `since`") if not."""
    meta = t.metadata
    i = int(tk["partition"])
    if t.id != tk["table_id"] or i >= len(meta.tablet_ids) or \
            meta.tablet_ids[i] != tk["tablet_id"]:
        raise errors.InvalidArgument(
            f'table "{tk["table"]}" was repartitioned or re-created {since}')
    return i, meta


def read_changes(t, tk: dict) -> pa.Table:
    """A change ticket {"kind": "changes", "table", "table_id", "partition", "tablet_id",
    "start", "end", "columns"?}: Table.changes of that one partition, (start, end]."""
    i, _ = _ticket_partition(t, tk, "while its changes were read; start the change "
                             "stream again")
    # "earliest": from the history retained when the tablet is read (the mark moves)
    return t.changes(int(tk["start"]), int(tk["end"]), tk.get("columns"), [i],
                     retained=bool(tk.get("earliest")))


def open_ticket(t, tk: dict):
    """(TableScan, Arrow schema) of one ticket of `plan_scan`; refuses a ticket whose tablet
    no longer sits at its partition index (repartitioned or re-created table)."""
    i, meta = _ticket_partition(t, tk, "since the scan was planned; plan it again")
    columns = tk.get("columns")
    preds = [predicate_from_json(p) for p in tk.get("predicates") or []]
    ts = int(tk["snapshot"])
    scan = t.scan_partition(i, columns, preds, MvccSnapshot.at(ts) if tk.get("fresh") else ts)
    return scan, meta.schema.arrow_schema(columns)


def scan_batches(scan, qid: int, schema: pa.Schema, stats: ScanStats
                 ) -> Iterator[pa.RecordBatch]:
    """The scan's non-empty batches in `schema`; the scan is closed and its rows counted in
    `stats` at the end (or when the consumer stops early)."""
    try:
        for b in scan:
            if b.num_rows:
                yield b if b.schema.equals(schema) else pa.RecordBatch.from_arrays(
                    b.columns, schema=schema)
    finally:
        scan.close()
        stats.tablet_read(qid, scan.stats.rows_scanned, scan.stats.rows_returned)


def write_batches(t, mode: str, batches) -> dict:
    """Insert or upsert a stream of Arrow batches into Table `t` in PUT_CHUNK_ROWS chunks;
    returns the JSON summary (rows, applied, failed, failed_by_code, the first row
    errors). Per-row failures are counted, not raised (Kudu semantics)."""
    if mode not in ("insert", "upsert"):
        raise errors.InvalidArgument(f'"mode" is insert or upsert, not {mode!r}')
    target = t.schema.arrow_schema()
    applied = failed = seen = 0
    by_code: collections.Counter[str] = collections.Counter()
    first: list[dict] = []
    pending: list[pa.RecordBatch] = []
    pending_rows = 0

    def flush() -> None:
        nonlocal applied, failed, seen, pending, pending_rows
        if not pending:
            return
        rows = conform(pa.Table.from_batches(pending), target)
        pending, n, pending_rows = [], pending_rows, 0
        r = t.insert(rows) if mode == "insert" else t.upsert(rows)
        applied += r.num_applied
        failed += len(r.row_errors)
        for e in r.row_errors:
            by_code[e.code] += 1
            if len(first) < PUT_MAX_ERRORS:
                first.append({"index": seen + e.index, "code": e.code, "message": e.message,
                              "key": [value_to_json(v) for v in (e.key or ())]})
        seen += n

    for b in batches:
        if not b.num_rows:
            continue
        pending.append(b)
        pending_rows += b.num_rows
        if pending_rows >= PUT_CHUNK_ROWS:
            flush()
    flush()
    return {"table": t.metadata.name, "mode": mode, "rows": seen, "applied": applied,
            "failed": failed, "failed_by_code": dict(by_code), "errors": first}


def start(db, host: str = "127.0.0.1", port: int = 0) -> FlightServer:
    """A FlightServer serving in a daemon thread (tests, `kudusql serve --flight-port`).
    `wire.arrow_stream.start_endpoints` starts it with the Arrow stream endpoint beside."""
    server = FlightServer(db, f"grpc://{host}:{port}")
    server.serve_in_thread()
    log.info("Arrow Flight endpoint on %s", server.location)
    return server
