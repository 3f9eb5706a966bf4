"""The Arrow IPC stream endpoint: plain TCP, for clients without a Flight library.

The JVM Spark connector (kudusql/spark/java/, docs/spark.md) reads kudusql tables at JVM speed with
arrow-vector's `ArrowStreamReader`, which the pyspark wheel ships; it has no Flight client.
This endpoint serves the same operations as the Flight server (wire/flight.py: the same
planning, tickets, statistics and write summaries) over one TCP connection per request:

    request   b"KQS1", u32 big-endian length, JSON {"op": ..., ...}
    answer    u8 status (0 ok, 1 error), then
              error:        u32 length, JSON {"sqlstate", "message"}; connection closed
              JSON answers: u32 length, JSON
              "schema":     an Arrow IPC stream holding the schema and no batch
              "scan":       an Arrow IPC stream of the tablet's rows, then a trailer:
                            u8 status, u32 length, JSON ({"rows"} or the error)
              "put":        (the client sends an Arrow IPC stream after the request)
                            u32 length, JSON write summary; a put that fails answers its
                            error at once, before the stream's end, and reads the rest of
                            the stream before it closes (bounded: `_put`), so the client
                            reads the error rather than a reset connection; a client that
                            sees an answer arrive mid-stream stops sending and reads it

    op        fields                                          answer
    schema    table [, columns]                               IPC stream, no batch
    bind      table, predicates (JSON ColumnPredicates)       [bool per predicate]
    plan      table, columns?, predicates?, snapshot?,        {"snapshot", "query_id",
              estimate? (true: also "rows", an estimate        "tablets_total", "tickets":
              of the table's rows from its rowsets)             [ticket, ...], "rows"?,
                                                               "resumable", on a tablet
                                                               server also "locations":
                                                               [[host:port, ...] per
                                                               ticket]}
    scan      ticket (one of plan's) [, skip: N]              IPC stream + trailer
              (skip: leave out the first N rows of the ticket's rows in primary-key
              order: how a reader resumes a stream that broke after N rows; only where
              the plan said "resumable", i.e. the endpoint's scans are ordered)
    put       table, mode (insert | upsert)                   {"rows", "applied", "failed",
              [, sink: {sink, batch, run, attempt}]             "failed_by_code", "errors"}
              (sink: one task of a streaming sink's              (+ "skipped",
              micro-batch, written exactly once:                 "already_applied", "sink",
              wire/stream_sink.py `write_batch`)                 "batch", "run" with sink)
    stream_sink action (ensure | record | commit | finish)     `stream_sink.driver_op`'s
              and its fields (a streaming sink's driver:         answer
              wire/stream_sink.py `driver_op`; no table
              lookup of its own)
    timestamp table                                           {"timestamp"}
    changes_plan table, at? (ISO timestamp), start?, end?,    {"latest", "ahm", "table_id",
              earliest?, columns?, fresh?, idle_from?,        "now", "tablet_ids", "at"?,
              limit_from?, limit_rows?, limit_earliest?       "limit_end"?,
              (a change stream's driver: the JVM               "fresh"?, "idle"? (a safe
              connector's MicroBatchStream;                    fresh timestamp:
              wire.flight.changes_plan)                        wire.flight.changes_plan),
                                                               "tickets"? (with start and
                                                               end: one change ticket per
                                                               tablet), "locations"?}
              (a change ticket's "scan": the tablet's changes in (start, end], every
              commit's row in commit order, the columns then `_is_deleted`, `_commit_ts`;
              not resumable)
    locate    table?  (a master's endpoint, and only there:   {"endpoints": [host:port,
              `master_endpoint`)                                ...], "table_id"?,
                                                               "tablets"?: [{"tablet_id",
                                                               "endpoints"}, ...]}

A scan that fails after its stream started ends the stream (end-of-stream marker) and
reports the error in the trailer, so the client never takes a cut-short stream for the
whole tablet. Errors carry the engine's SQLSTATE and message (42P01 for a missing table,
22023 for a snapshot older than the history kept, ...). Like Flight: no authentication
or TLS, so `kudusql serve` binds it to loopback only. On a cluster every tablet server
serves it over the client library (`cluster_endpoint`), and a master serves `locate`
alone (`master_endpoint`): how a client holding no cluster secret finds them.
"""

from __future__ import annotations

import collections
import ipaddress
import json
import logging
import socket
import socketserver
import struct
import threading
import time
from typing import Any

import pyarrow as pa

from engine import errors
from wire import stream_sink
from wire.flight import (PUT_CHUNK_ROWS, FlightServer, ScanStats, bind_predicates,
                         change_tickets, changes_plan, open_ticket, plan_scan, read_changes,
                         scan_batches, write_batches)
from wire.flight import start as start_flight

log = logging.getLogger("kudusql.arrow_stream")

MAGIC = b"KQS1"
MAX_REQUEST = 16 << 20
OK, ERROR = 0, 1
# Socket buffer for the IPC stream (one large write per batch).
SOCKET_BUFFER = 1 << 20
# A put reads the client's batches ahead of the insert, up to this many rows (one engine
# write op's worth: while one chunk is inserted the next arrives; see `read_ahead`).
# 0: no read-ahead (the batches are read between inserts; bench/spark_load_profile --ab).
PUT_READ_AHEAD_ROWS = PUT_CHUNK_ROWS
# A put that fails answers its error at once and then reads and discards the rest of the
# client's stream, up to this many bytes and seconds, before it closes (`_linger`).
PUT_LINGER_BYTES = 256 << 20
PUT_LINGER_S = 10.0
# Rows per IPC batch of a change ticket's stream (the window is read whole first).
CHANGE_BATCH_ROWS = 65536


def error_json(e: BaseException) -> dict:
    """An exception as the endpoint reports it: SQLSTATE + message, no class names."""
    if isinstance(e, errors.EngineError):
        return {"sqlstate": e.sqlstate, "message": str(e)}
    if isinstance(e, (KeyError, ValueError, TypeError, json.JSONDecodeError)):
        return {"sqlstate": "08P01", "message": f"malformed request: {e}"}
    return {"sqlstate": "XX000", "message": str(e) or "internal error"}


def _read_exact(f, n: int) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise ConnectionError("connection closed mid-request")
    return b


def read_ahead(batches, max_rows: int | None = None, name: str = "kudusql-put-read",
               threads: list | None = None):
    """The batches of `batches` (an iterator reading a socket), read by a thread of their
    own up to `max_rows` (default PUT_READ_AHEAD_ROWS) rows ahead of the consumer.

    Why: a put used to read the next batches only once the previous chunk was inserted,
    so while the server inserted (~0.3-0.5 s per 200k rows) the client's socket filled and
    its writer (a Spark task: Parquet decode, rows -> Arrow) stood still, and while the
    client produced the next chunk the server had nothing to insert; the two sides took
    turns instead of overlapping. Reading ahead bounds the memory at about `max_rows`
    rows plus one batch per connection.

    An exception of the reading (a broken stream) is raised to the consumer after the
    batches read before it. A consumer that stops early (closes the generator, or an
    exception leaves it) tells the thread to stop at its next batch; the caller should
    also make a read blocked in the socket return (`ArrowStreamServer._put` sets a timeout
    and then reads the rest of the stream itself once the thread, appended to `threads`,
    has stopped)."""
    max_rows = PUT_READ_AHEAD_ROWS if max_rows is None else max_rows
    cond = threading.Condition()
    queue: collections.deque = collections.deque()
    state = {"rows": 0, "done": False, "error": None, "stop": False}

    def run() -> None:
        try:
            for b in batches:
                with cond:
                    while state["rows"] >= max_rows and not state["stop"]:
                        cond.wait()
                    if state["stop"]:
                        return
                    queue.append(b)
                    state["rows"] += b.num_rows
                    cond.notify_all()
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            with cond:
                state["error"] = e
        finally:
            with cond:
                state["done"] = True
                cond.notify_all()

    reader = threading.Thread(target=run, name=name, daemon=True)
    if threads is not None:
        threads.append(reader)
    reader.start()
    try:
        while True:
            with cond:
                while not queue and not state["done"]:
                    cond.wait()
                if queue:
                    b = queue.popleft()
                    state["rows"] -= b.num_rows
                    cond.notify_all()
                elif state["error"] is not None:
                    raise state["error"]
                else:
                    return
            yield b
    finally:
        with cond:
            state["stop"] = True
            queue.clear()
            cond.notify_all()


def _frame(status: int, body: Any) -> bytes:
    data = json.dumps(body).encode()
    return struct.pack(">BI", status, len(data)) + data


class _Handler(socketserver.StreamRequestHandler):
    rbufsize = SOCKET_BUFFER
    wbufsize = SOCKET_BUFFER

    def setup(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def handle(self) -> None:
        srv: ArrowStreamServer = self.server.owner  # type: ignore[attr-defined]
        try:
            if _read_exact(self.rfile, 4) != MAGIC:
                return
            (n,) = struct.unpack(">I", _read_exact(self.rfile, 4))
            if n > MAX_REQUEST:
                raise ValueError("request too large")
            req = json.loads(_read_exact(self.rfile, n))
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
        except ConnectionError:
            return
        except Exception as e:  # noqa: BLE001 - boundary: answer, do not crash the thread
            self.wfile.write(_frame(ERROR, error_json(e)))
            return
        try:
            srv.answer(req, self.rfile, self.wfile, self.request)
        except (ConnectionError, BrokenPipeError):
            pass  # the client went away (e.g. a Spark LIMIT stopped reading)


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class ArrowStreamServer:
    """The endpoint over `db.catalog`, serving in a daemon thread once started.

        s = ArrowStreamServer(db, "127.0.0.1", 0, stats); s.start(); s.address -> "h:p"
        ...; s.shutdown()
    """

    def __init__(self, db, host: str = "127.0.0.1", port: int = 0,
                 stats: ScanStats | None = None, locate=None, ordered_scans: bool = False):
        self.db = db
        # True: a ticket's scan returns its rows in primary-key order, the same sequence
        # on every attempt at its snapshot (the cluster client's fault-tolerant scans), so
        # a broken stream may be resumed by skipping the rows already delivered ("skip");
        # an embedded Table's scans are unordered (rowsets in storage order, which a
        # flush or compaction changes), so they are not resumable
        self.ordered_scans = ordered_scans
        # ticket -> the endpoints ("host:port") to read it from, replica holders first
        # (a tablet server's endpoint: `cluster_endpoint`); None: this endpoint alone
        self.locate = locate
        self.stats = stats if stats is not None else ScanStats()
        self._tcp = _TCPServer((host, port), _Handler)
        self._tcp.owner = self  # type: ignore[attr-defined]
        self.host = host
        self.port = self._tcp.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> "ArrowStreamServer":
        self._thread = threading.Thread(target=self._tcp.serve_forever,
                                        name="kudusql-arrow-stream", daemon=True)
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self._tcp.shutdown()
        self._tcp.server_close()

    # -- requests ----------------------------------------------------------------------------
    def answer(self, req: dict, rfile, wfile, sock=None) -> None:
        op = req.get("op")
        try:
            if op == "stream_sink":   # a streaming sink's driver (`stream_sink.driver_op`)
                out = stream_sink.driver_op(self.db.catalog, dict(req, op=req.get("action")))
                wfile.write(_frame(OK, out))
                return
            t = self.db.catalog.table(req["table"] if op != "scan" else req["ticket"]["table"])
            if op == "schema":
                schema = t.schema.arrow_schema(req.get("columns"))
                wfile.write(bytes([OK]))
                with pa.ipc.new_stream(wfile, schema):
                    pass
                return
            if op == "scan":
                if req["ticket"].get("kind") == "changes":
                    self._scan_changes(t, req["ticket"], wfile, int(req.get("skip") or 0))
                else:
                    self._scan(t, req["ticket"], wfile, int(req.get("skip") or 0))
                return
            if op == "put":
                self._put(t, req.get("mode", "insert"), rfile, wfile, sock,
                          req["table"], req.get("sink"))
                return
            if op == "bind":
                out: Any = bind_predicates(t, list(req.get("predicates") or []))
            elif op == "plan":
                plan = plan_scan(t, req, self.stats)
                out = {"snapshot": plan.snapshot, "query_id": plan.query_id,
                       "tablets_total": plan.tablets_total, "tickets": plan.tickets,
                       "resumable": self.ordered_scans}
                if self.locate is not None:
                    out["locations"] = [self.locate(tk) for tk in plan.tickets]
                if req.get("estimate"):
                    rows = self.estimate_rows(t)
                    if rows is not None:
                        out["rows"] = rows
            elif op == "timestamp":
                out = {"timestamp": t.current_timestamp()}
            elif op == "changes_plan":
                out = self.changes_plan(t, req)
            else:
                raise errors.InvalidArgument(f"unknown request {op!r}")
        except (ConnectionError, BrokenPipeError):
            raise
        except Exception as e:  # noqa: BLE001 - boundary: the client gets SQLSTATE + text
            wfile.write(_frame(ERROR, error_json(e)))
            return
        wfile.write(_frame(OK, out))

    def changes_plan(self, t, req: dict) -> dict:
        """A change stream's driver (the JVM connector's MicroBatchStream): the table's
        latest timestamp, ancient history mark and partitions (`wire.flight.changes_plan`,
        with "at", an ISO timestamp, resolved to a HybridTime); given a window "start",
        "end" (and "earliest", "columns"), also one change ticket per tablet for it
        ("tickets", `change_tickets`) and, on a tablet server, each ticket's "locations"
        as `plan` gives them. Change tickets are not "resumable": a broken stream fails
        the task, and the micro-batch is read again from its checkpointed offsets."""
        out = changes_plan(t, req)
        if req.get("start") is not None and req.get("end") is not None:
            out["tickets"] = change_tickets(out, t.metadata.name, int(req["start"]),
                                            int(req["end"]), bool(req.get("earliest")),
                                            req.get("columns"))
            if self.locate is not None:
                out["locations"] = [self.locate(tk) for tk in out["tickets"]]
        return out

    def estimate_rows(self, t) -> int | None:
        """The table's rows, estimated from its tablets' rowsets and MemRowSets without a
        scan (deleted rows still counted): Spark's join planning (broadcast or not) needs
        a size, not an exact count. None where the catalog has no local tablets."""
        try:
            n = 0
            for tid in t.metadata.tablet_ids:
                tablet = self.db.catalog.tablet(tid)
                n += tablet.mrs_rows() + sum(r["rows"] for r in tablet.rowsets_info())
            return n
        except Exception:  # noqa: BLE001 - no estimate: Spark assumes a large table
            return None

    def _scan(self, t, tk: dict, wfile, skip: int = 0) -> None:
        if skip and not self.ordered_scans:
            raise errors.NotSupported(
                "this endpoint's scans are not in primary-key order, so a scan cannot be "
                "resumed after the rows already read (only a tablet server's endpoint can)")
        if skip < 0:
            raise errors.InvalidArgument(f'"skip" is a row count, not {skip}')
        if skip:
            log.info("scan of tablet %s resumed: skipping the %d rows already delivered",
                     tk.get("tablet_id"), skip)
        scan, schema = open_ticket(t, tk)  # errors here: before the stream starts
        wfile.write(bytes([OK]))
        rows = 0
        trailer: tuple[int, Any]
        with pa.ipc.new_stream(wfile, schema) as w:
            try:
                for b in scan_batches(scan, tk["query_id"], schema, self.stats):
                    if skip:   # resuming: the first `skip` rows were delivered before
                        if b.num_rows <= skip:
                            skip -= b.num_rows
                            continue
                        b, skip = b.slice(skip), 0
                    w.write_batch(b)
                    rows += b.num_rows
                trailer = (OK, {"rows": rows})
            except (ConnectionError, BrokenPipeError):
                raise
            except Exception as e:  # noqa: BLE001 - reported in the trailer
                trailer = (ERROR, error_json(e))
        wfile.write(_frame(*trailer))

    def _scan_changes(self, t, tk: dict, wfile, skip: int = 0) -> None:
        """A change ticket (`changes_plan`): `wire.flight.read_changes` of its tablet in
        (start, end] - every commit's row in commit order - as an IPC stream of the
        ticket's columns in their order, then `_is_deleted` and `_commit_ts` (the names
        the change sources give them), and the trailer. The window is read whole before
        the stream starts, so its errors (SnapshotTooOld, 22023: the window starts below
        the ancient history mark) are the answer's, not the trailer's."""
        if skip:
            raise errors.NotSupported("a change ticket's scan cannot be resumed (\"skip\"); "
                                      "read the micro-batch again")
        out = read_changes(t, tk)
        cols = tk.get("columns")
        n = out.num_columns
        if cols is not None:
            out = out.select(list(cols) + [out.column_names[n - 2], out.column_names[n - 1]])
        fields = list(out.schema)   # the key columns stay NOT NULL, as in the table's schema
        fields[-2:] = [fields[-2].with_name("_is_deleted"), fields[-1].with_name("_commit_ts")]
        schema = pa.schema(fields)
        wfile.write(bytes([OK]))
        rows = 0
        with pa.ipc.new_stream(wfile, schema) as w:
            for b in out.to_batches(max_chunksize=CHANGE_BATCH_ROWS):
                if b.num_rows:
                    w.write_batch(pa.RecordBatch.from_arrays(b.columns, schema=schema))
                    rows += b.num_rows
        wfile.write(_frame(OK, {"rows": rows}))

    def _put(self, t, mode: str, rfile, wfile, sock=None, table: str | None = None,
             sink: dict | None = None) -> None:
        """Reads the client's IPC stream ahead of the inserts (`read_ahead`: the client
        keeps producing while a chunk is inserted) and answers the write summary.

        With `sink` ({sink, batch, run, attempt}) the stream is one task of a streaming
        sink's micro-batch (the JVM connector's StreamingWrite), written by
        `stream_sink.write_batch` - the same exactly-once code as Flight's do_put: the
        batch's record first, a committed / failed batch skipped (its stream read and
        dropped), a replay's rows filtered - and the summary says so.

        A put that fails (a chunk's insert raised: the client still sending) answers the
        error at once and then lingers (`_linger`): it reads and discards the rest of the
        client's stream before the connection closes. Closing with the client's data
        unread in the socket's receive buffer makes the kernel reset the connection, and
        a reset can reach the client before it has read the error, which it then never
        sees (the JVM writer reported 08001 instead of the chunk's error)."""
        reader = pa.ipc.open_stream(rfile)
        threads: list[threading.Thread] = []
        batches = read_ahead(reader, threads=threads) if PUT_READ_AHEAD_ROWS > 0 else reader
        try:
            if sink:
                summary = stream_sink.write_batch(
                    self.db.catalog, table or t.metadata.name,
                    stream_sink.SinkBatch.from_json(sink), mode, batches, write_batches)
            else:
                summary = write_batches(t, mode, batches)
        except (ConnectionError, BrokenPipeError):
            raise
        except Exception as e:  # noqa: BLE001 - boundary: the client gets SQLSTATE + text
            if batches is not reader:
                batches.close()   # the read-ahead thread stops at its next batch
            wfile.write(_frame(ERROR, error_json(e)))
            wfile.flush()
            self._linger(reader, threads, sock)
            return
        wfile.write(_frame(OK, summary))

    @staticmethod
    def _linger(reader, threads: list, sock) -> None:
        """Read the client's remaining IPC stream to its end and drop it, within
        PUT_LINGER_BYTES and PUT_LINGER_S (a client that keeps sending longer is cut off;
        the JVM writer stops at its next batch once the answer is there). Reads go
        through `reader` (at a message boundary once the read-ahead thread stopped, which
        it does at its next batch: `read_ahead`); a socket timeout bounds every read."""
        deadline = time.monotonic() + PUT_LINGER_S
        if sock is not None:
            sock.settimeout(PUT_LINGER_S)
        for th in threads:
            th.join(max(0.0, deadline - time.monotonic()))
            if th.is_alive():   # still blocked in a read: no second reader on the socket
                return
        drained, end = 0, "cut off"
        try:
            while drained < PUT_LINGER_BYTES and time.monotonic() < deadline:
                drained += reader.read_next_batch().nbytes
        except StopIteration:
            end = "its end"   # closing now sends no reset
        except Exception as e:  # noqa: BLE001 - a broken or timed-out stream: close it
            end = f"a broken stream ({type(e).__name__})"
        (log.info if end == "cut off" else log.debug)(
            "failed put: read and dropped %d bytes of the client's stream, to %s",
            drained, end)


def start(db, host: str = "127.0.0.1", port: int = 0,
          stats: ScanStats | None = None) -> ArrowStreamServer:
    """An ArrowStreamServer serving in a daemon thread."""
    s = ArrowStreamServer(db, host, port, stats).start()
    log.info("Arrow IPC stream endpoint on %s", s.address)
    return s


class _CatalogDB:
    """What ArrowStreamServer needs of a database: its catalog."""

    def __init__(self, catalog):
        self.catalog = catalog


def cluster_endpoint(catalog, host: str, port: int, own: str) -> ArrowStreamServer:
    """The endpoint beside a tablet server's RPC (`kudusql tserver --arrow-port`), over
    `catalog`, a RemoteCatalog of the cluster (the client library: metadata from a master,
    scans and writes through the tablet servers, fault tolerant among the replicas).

    Every tablet server serves it, so the JVM Spark connector, given several of them
    (`endpoint` = "h1:p1,h2:p2"), plans at the first that answers: one snapshot T for all
    partitions (the table's tablets made safe at T), one ticket per tablet, and per ticket
    the endpoints of the tablet servers holding a replica (`locations`, leader first: each
    server's `status` names its endpoint, `stream_addr`); a task prefers those hosts and
    reads from the first endpoint that answers. `own` is this server's RPC address.

    Its scans are the client library's fault-tolerant ones, ordered by primary key at the
    ticket's snapshot, so a stream that breaks may be resumed at another endpoint with
    "skip" (the plan says "resumable"). What it does not do: the tablet is read through
    the client library even when this server holds a replica (one loopback RPC hop: the
    scan is fault tolerant and reads followers safely at T the way every cluster scan
    does); no authentication, so it binds to loopback only, as Flight does."""
    _require_loopback(host)
    addrs: dict[str, str] = {}
    lock = threading.Lock()

    def stream_addr(rpc_addr: str) -> str | None:
        with lock:
            if rpc_addr in addrs:
                return addrs[rpc_addr]
        try:
            a = catalog.client.rpc.call(rpc_addr, "status", {}, timeout_s=3).get("stream_addr")
        except errors.EngineError:
            return None  # down now: not cached, asked again at the next plan
        with lock:
            addrs[rpc_addr] = a
        return a

    def locate(tk: dict) -> list[str]:
        loc = catalog.locations(tk["tablet_id"], tk["table_id"])
        out = [stream_addr(a) for _, a in loc.order()]
        return [a for a in out if a] or [server.address]

    # the client library's fault-tolerant scans are ordered by primary key (and resumed
    # among replicas at the snapshot): a stream of this endpoint that breaks can be
    # resumed at another endpoint by skipping the rows delivered (engine/client/scanner.py)
    ordered = bool(getattr(catalog.client, "fault_tolerant_scans", False))
    server = ArrowStreamServer(_CatalogDB(catalog), host, port, locate=locate,
                               ordered_scans=ordered).start()
    log.info("Arrow IPC stream endpoint of tablet server %s on %s", own, server.address)
    return server


def _require_loopback(host: str) -> None:
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise errors.InvalidArgument(
            f"the Arrow stream endpoint has no authentication; it serves on a loopback "
            f"address only, not {host}")


class MasterStreamServer(ArrowStreamServer):
    """A master's endpoint (`master_endpoint`): `locate` only."""

    def __init__(self, master, host: str, port: int):
        super().__init__(None, host, port)
        self.master = master

    def answer(self, req: dict, rfile, wfile, sock=None) -> None:
        try:
            if req.get("op") != "locate":
                raise errors.NotSupported(
                    f"a master's Arrow stream endpoint answers \"locate\" only, not "
                    f"{req.get('op')!r}: plan, scan and put at the tablet servers' endpoints "
                    f"it names")
            p = {"table": req["table"]} if req.get("table") else {}
            out = self._leader_locate(p)
        except (ConnectionError, BrokenPipeError):
            raise
        except Exception as e:  # noqa: BLE001 - boundary: the client gets SQLSTATE + text
            wfile.write(_frame(ERROR, error_json(e)))
            return
        wfile.write(_frame(OK, out))

    def _leader_locate(self, p: dict) -> dict:
        """The leader master's `stream_locate`: this master's own if it leads, else the
        leader's over RPC (a follower hears no heartbeats, so it cannot answer itself)."""
        from engine.rpc.rpc import RemoteError
        m = self.master
        try:
            return m.stream_locate(p)
        except RemoteError as e:
            leader = e.leader_uuid
            if not leader or leader == m.addr:
                raise RemoteError(f"master {m.addr} is not the leader master and knows no "
                                  f"leader yet; retry") from None
        return m.rpc_client.call(leader, "stream_locate", p, timeout_s=5)


def master_endpoint(master, host: str, port: int) -> ArrowStreamServer:
    """The endpoint beside a master's RPC (`kudusql master --arrow-port`): it answers
    `locate` ({"table"?}) with the tablet servers' Arrow stream endpoints the master
    knows from their heartbeats, and per tablet of the table the endpoints of its
    replicas' servers, leader first (`Master.stream_locate`); a follower master asks the
    leader over RPC and relays its answer. Why a master and not the tablet servers alone:
    a client given the masters (Spark's "masters" option) finds the live tablet servers
    without the cluster secret, which the masters' RPC requires; the answer holds only
    addresses and tablet ids. Loopback only, like every endpoint here."""
    _require_loopback(host)
    server = MasterStreamServer(master, host, port).start()
    log.info("Arrow IPC stream endpoint of master %s on %s", master.addr, server.address)
    return server


def start_endpoints(db, host: str = "127.0.0.1", flight_port: int = 0,
                    stream_port: int = 0) -> FlightServer:
    """Flight and this endpoint beside it, both in daemon threads, sharing the scan
    statistics (`kudusql serve --flight-port/--arrow-port`, tests, `kudusql tpch`): the
    FlightServer's `.location` is Flight's grpc://host:port, its `.stream_address` this
    endpoint's host:port, and its `.shutdown()` stops both."""
    server = start_flight(db, host, flight_port)
    try:
        server.stream = start(db, host, stream_port, server.stats)
    except BaseException:
        server.shutdown()
        raise
    return server
