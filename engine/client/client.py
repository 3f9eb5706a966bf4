"""The cluster client: the planner's catalog contract, served by masters and tablet servers.

`RemoteCatalog` implements `TableCatalog` (engine/catalog/leases.py) and the DDL surface
of the embedded `Catalog` the SQL layer uses (list_tables, has_table, get_table, table,
create_table, drop_table, rename_table and the ALTER TABLE methods: set_properties,
add/drop_range_partition, add/drop/rename_column, each one `alter_table` call to the
master), so `engine.catalog.table.Table` — routing,
partition pruning, snapshot choice, parallel scans — and everything above it (planner,
Session, wire server) run unchanged over a cluster. A leased `TabletHandle.tablet()` is a
`RemoteTablet`: the Tablet methods Table calls (write, scan, lookup, current_timestamp,
wait_safe), each an RPC to the tablet's leader.

Metadata cache. Table metadata is fetched from the leader master when a statement
resolves a name (`get_table`, `has_table`) and the cached version is older than
METADATA_TTL_S (1 s; this front end's own DDL refreshes it at once, another front end's
is seen within that time), and kept by table id for the operations of that statement (while no master answers, the last version seen is used, so reads and writes go
on without masters); tablet locations (replicas, addresses, the last known leader) are kept per
tablet and refreshed from the master when every known replica has refused.

Routing and retries. Every tablet call goes to the replica believed to lead. NOT_THE_LEADER
answers carry the leader's uuid: the next try goes there. A server that cannot be reached
(refused, timed out, traffic dropped) is skipped for the next replica; after a round over
all replicas the locations are refreshed from the master. Tries back off from 20 ms,
doubling to 500 ms, until the operation's deadline (`timeout_s`, default 30 s); then the
call fails with SQLSTATE 57P03/08006 and a message naming the tablet and the last error.
Only those two refusals are retried: a server that speaks TLS to a plaintext client (or the
reverse, or whose certificate the client's CA did not sign) fails the call at once with
`TlsMismatch`, SQLSTATE 08001 (engine/rpc). `tls` (a `TlsConfig`, `--rpc-ca`) makes every
call TLS.

Writes. `Table` splits a batch by tablet and writes the tablets' shares at once (on the
catalog's pool of 4 threads, or for batches under 512 rows through `write_deferred` on the
client's write pool); each share is one DoPut of Arrow rows (plus an `__op` column)
to the tablet's leader, which answers once the op is applied there after a majority has it
durably. A CREATE TABLE returns once the master names a leader for every new tablet
(`_wait_for_leaders`, at most 10 s; Kudu's IsCreateTableDone), so the first writes go
straight to the leaders. An answer must account for every row sent, once: rows applied +
per-row errors (each naming a distinct row of the request) = rows sent. One that does not
fails the write with XX000 (`WriteUnaccounted`, not retried): the rows it left out may or
may not be written, so the outcome is unknown, never an acknowledgement.

Exactly once. A ClusterClient has a random client id; every write gets the next sequence
number and keeps it across all its retries, so the tablet servers' result tracker applies it
once (engine/tserver/result_tracker.py). Each request also carries the lowest sequence
number still outstanding (first_incomplete), which goes into the request's Raft entry: the
replicas forget older results and refuse a copy of an older request that arrives late
(STALE: `errors.StaleRequest`, XX000, raised at once, not retried).

Schema versions. Writes, scans and lookups carry the table's schema version they were
built for. A tablet at another version refuses a write whole with its schema; the client
renames the batch's columns by column id and sends it again as a new request (a column
the tablet dropped fails the write, 42703). A scan refused as planned for an older version
(40001) drops the cached metadata, so the statement run again sees the new schema
(docs/cluster.md, ALTER TABLE on a cluster).

Timestamps (client-propagated consistency, paper §2.5): the client remembers the largest
timestamp it has seen (write results) and sends it with every request; servers move their
clock past it, so a read after a write (on any server) is not ordered before it.

Scans (engine/client/scanner.py) run at the snapshot Table chose (the largest of the
tablets' latest committed timestamps, made safe on every tablet first), with projection and
predicates pushed to the server (DoGet). They are fault tolerant: ordered by primary key,
resumed on another replica from the last key returned at the same snapshot when a server
fails mid-stream. `replica_selection` (LEADER_ONLY, the default, or CLOSEST_REPLICA) says
which replica a snapshot scan opens on; followers serve it once their safe time passed the
snapshot (docs/cluster.md, Scans).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import threading
import time
import uuid as uuidlib
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from engine import errors
from engine.catalog.coalesce import WriteCoalescer
from engine.catalog.leases import TabletLease
from engine.catalog.metadata import TableMetadata
from engine.catalog.table import Table
from engine.catalog.views import ViewMetadata
from engine.client.scanner import LEADER_ONLY, TabletUnavailable, parse_replica_selection, \
    scan_tablet
from engine.convert import table_from_pydict
from engine.rpc.rpc import RemoteError, RpcClient, TlsConfig, Unreachable
from engine.schema import Schema
from engine.tablet.mvcc import MvccSnapshot
from engine.tablet.write_op import READ_TS_COLUMN, OpType, RowError, WriteResult

OP_COLUMN = "__op"
DEFAULT_TIMEOUT_S = 30.0
# A name's metadata is asked from the master again after this long (a statement resolves
# names several times; this front end's own DDL updates the cache at once).
METADATA_TTL_S = 1.0


class NotSupportedOnCluster(errors.NotSupported):
    sqlstate = "0A000"


class TabletDropped(errors.EngineError):
    """A statement reached a tablet that a concurrent DROP RANGE PARTITION removed: nothing
    of its share was applied; running the statement again routes it afresh."""

    sqlstate = "40001"


class WriteUnaccounted(errors.EngineError):
    """A tablet server answered a write with fewer (or more) rows than were sent: its
    rows applied plus its per-row errors do not add up to the rows of the request. The
    rows it does not account for may or may not have been written, so the write's
    outcome is unknown, as after a lost connection. XX000 and not retried: a retry of
    the same request id gets the same stored answer, and one under a new id could apply
    rows twice; a server that answers so has a bug, which running the statement again
    automatically would hide (`_check_result`)."""

    sqlstate = "XX000"


_RETRYABLE = (RemoteError, Unreachable)


class ClusterClient:
    def __init__(self, masters: Sequence[str], secret: str,
                 timeout_s: float = DEFAULT_TIMEOUT_S, rpc_timeout_s: float = 5.0,
                 replica_selection: str = LEADER_ONLY, fault_tolerant_scans: bool = True,
                 tls: TlsConfig | None = None):
        self.masters = list(masters)
        # scans (engine/client/scanner.py): where they read, whether they resume
        self.replica_selection = parse_replica_selection(replica_selection)
        self.fault_tolerant_scans = fault_tolerant_scans
        self.scan_batch_rows: int | None = None  # rows per scan batch (None: the server's)
        self.scan_resumes = 0  # scan streams that failed after progress and were resumed
        self.scan_streams: dict[tuple[str, str], int] = {}  # (tablet, server) -> streams read
        self.rpc = RpcClient(secret, rpc_timeout_s, tls=tls)
        self.timeout_s = timeout_s
        self.client_id = uuidlib.uuid4().hex
        self._seq = 0
        self._outstanding: set[int] = set()
        self._lock = threading.Lock()
        self.last_ts = 0
        self._master_leader = 0
        self._write_pool: cf.ThreadPoolExecutor | None = None

    # -- request ids, timestamps ---------------------------------------------------------
    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            self._outstanding.add(self._seq)
            return self._seq

    def done_seq(self, seq: int) -> None:
        with self._lock:
            self._outstanding.discard(seq)

    def first_incomplete(self) -> int:
        with self._lock:
            return min(self._outstanding, default=self._seq + 1)

    def observe_ts(self, ts: int) -> None:
        if ts and ts > self.last_ts:
            with self._lock:
                self.last_ts = max(self.last_ts, ts)

    # -- masters -------------------------------------------------------------------------
    def master_call(self, action: str, payload=None, timeout_s: float | None = None):
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        delay, last = 0.02, None
        n = len(self.masters)
        while True:
            for k in range(n):
                i = (self._master_leader + k) % n
                try:
                    out = self.rpc.call(self.masters[i], action, payload)
                    self._master_leader = i
                    return out
                except _RETRYABLE as e:
                    last = e
            if time.monotonic() + delay > deadline:
                raise errors.ServiceUnavailable(
                    f"no leader master reachable at {','.join(self.masters)} within "
                    f"{timeout_s or self.timeout_s:.0f} s (last error: {last})") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def write_pool(self) -> cf.ThreadPoolExecutor:
        """Threads for RemoteTablet.write_deferred (not the catalog's executor, whose
        threads wait for these)."""
        if self._write_pool is None:
            with self._lock:
                if self._write_pool is None:
                    self._write_pool = cf.ThreadPoolExecutor(
                        max_workers=8, thread_name_prefix="kudusql-remote-write")
        return self._write_pool

    def close(self) -> None:
        if self._write_pool is not None:
            self._write_pool.shutdown(wait=False)
        self.rpc.close()


class _TabletLocations:
    """Where one tablet's replicas are and which one leads (as far as we know)."""

    def __init__(self, tablet_id: str, info: dict):
        self.tablet_id = tablet_id
        self.update(info)

    def update(self, info: dict) -> None:
        self.replicas = [(r["uuid"], r["addr"]) for r in info["replicas"]]
        self.leader = info.get("leader")

    def order(self) -> list[tuple[str, str]]:
        """Replicas to try: the believed leader first."""
        return sorted(self.replicas, key=lambda r: r[0] != self.leader)


class RemoteCatalog:
    """TableCatalog over a cluster (see the module docstring)."""

    def __init__(self, client: ClusterClient, parallelism: int = 4):
        self.client = client
        self.parallelism = parallelism
        self._pool = cf.ThreadPoolExecutor(max_workers=parallelism,
                                           thread_name_prefix="kudusql-remote")
        self._meta: dict[str, TableMetadata] = {}
        self._locs: dict[str, _TabletLocations] = {}
        self._coalescers: dict[str, WriteCoalescer] = {}
        self._by_name: dict[str, TableMetadata] = {}
        self._fetched: dict[str, float] = {}  # name -> when its metadata came from a master
        self._master_down_until = 0.0
        self._views: dict[str, ViewMetadata] | None = None
        self._views_at = 0.0
        self._lock = threading.Lock()
        self.data_dir = None

    @classmethod
    def connect(cls, masters: Sequence[str], secret: str, **kw) -> "RemoteCatalog":
        return cls(ClusterClient(masters, secret, **kw))

    # -- metadata --------------------------------------------------------------------------
    def _remember(self, resp: dict) -> TableMetadata:
        meta = TableMetadata.from_dict(resp["table"])
        with self._lock:
            old = self._meta.get(meta.id)
            if old is not None:  # tablets of dropped range partitions
                for tid in set(old.tablet_ids) - set(meta.tablet_ids):
                    self._locs.pop(tid, None)
            self._meta[meta.id] = meta
            for tid, info in resp.get("locations", {}).items():
                loc = self._locs.get(tid)
                if loc is None:
                    self._locs[tid] = _TabletLocations(tid, info)
                else:
                    loc.update(info)
        return meta

    def list_tables(self) -> list[str]:
        return self.client.master_call("list_tables")

    def has_table(self, name: str) -> bool:
        try:
            self.get_table(name)
            return True
        except errors.NotFound:
            return False

    def get_table(self, name: str) -> TableMetadata:
        """The table's current metadata from the leader master. While no master answers,
        the last version seen is used (data keeps flowing without masters; a DDL made
        meanwhile elsewhere is not seen until one answers again)."""
        cached = self._by_name.get(name)
        now = time.monotonic()
        if cached is not None and (now < self._master_down_until or
                                   now - self._fetched.get(name, 0.0) < METADATA_TTL_S):
            return cached
        try:
            meta = self._remember(self.client.master_call(
                "get_table", {"name": name}, timeout_s=None if cached is None else 3.0))
        except errors.NotFound:
            self._by_name.pop(name, None)
            raise
        except errors.ServiceUnavailable:
            if cached is None:
                raise
            self._master_down_until = time.monotonic() + 5.0
            return cached
        self._master_down_until = 0.0
        self._by_name[name] = meta
        self._fetched[name] = time.monotonic()
        return meta

    def table(self, name: str) -> Table:
        t = Table(self, self.get_table(name).id)
        # its tablets scan on the tablet servers, and a predicate crosses the RPC as data:
        # a runtime join filter (ColumnPredicate.member, a Python object) cannot, so the
        # executor applies those to the batches as they arrive (runtime_filters.apply)
        t.member_predicates = False
        return t

    def refresh_locations(self, table_id: str) -> None:
        self._remember(self.client.master_call("locations", {"table_id": table_id}))

    def locations(self, tablet_id: str, table_id: str) -> _TabletLocations:
        loc = self._locs.get(tablet_id)
        if loc is None:
            self.refresh_locations(table_id)
            loc = self._locs.get(tablet_id)
            if loc is None:
                meta = self._meta[table_id]
                self.forget_name(meta.name)
                raise TabletDropped(
                    f'tablet {tablet_id} of table "{meta.name}" was dropped (ALTER TABLE '
                    f"... DROP RANGE PARTITION) after this statement read the table's "
                    f"partitions; run the statement again")
        return loc

    # -- DDL ------------------------------------------------------------------------------
    def create_table(self, name: str, schema: Schema, partition_schema=None, *,
                     replication_factor: int | None = None, comment: str | None = None,
                     properties: dict | None = None,
                     if_not_exists: bool = False) -> TableMetadata:
        t = self.client.master_call("create_table", {
            "name": name, "schema": schema.to_dict(),
            "partition_schema": None if partition_schema is None
            else partition_schema.to_dict(),
            "replication_factor": replication_factor, "comment": comment,
            "properties": dict(properties or {}), "if_not_exists": if_not_exists})
        self.forget_name(name)
        meta = self._remember({"table": t})
        self._wait_for_leaders(meta)
        return meta

    def _wait_for_leaders(self, meta: TableMetadata, timeout_s: float = 10.0) -> None:
        """Return once the master names a leader for every tablet of a new table (Kudu's
        CreateTable waits for IsCreateTableDone), or after `timeout_s`: the statements that
        follow then start at the leaders instead of waiting for the first elections (the
        tablets' writes retry until their own deadline either way)."""
        deadline = time.monotonic() + timeout_s
        delay = 0.01
        while time.monotonic() < deadline:
            if all(self._locs.get(t) is not None and self._locs[t].leader
                   for t in meta.tablet_ids):
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
            try:
                self.refresh_locations(meta.id)
            except errors.EngineError:
                return  # dropped meanwhile or no master: the statements will tell

    def forget_name(self, name: str) -> None:
        """Drop what this client cached of table `name` (its metadata is read again on
        next use: after DDL, or a write the table's new schema refused)."""
        self._by_name.pop(name, None)
        self._fetched.pop(name, None)

    def drop_table(self, name: str, if_exists: bool = False, cascade: bool = False
                   ) -> list[str]:
        self.forget_name(name)
        self._views_at = 0.0
        r = self.client.master_call("drop_table", {"name": name, "if_exists": if_exists,
                                                   "cascade": cascade})
        return list(r.get("views", ()))

    # -- views: the master's (engine/catalog/views.py), cached for METADATA_TTL_S -------
    def views(self) -> dict[str, ViewMetadata]:
        """Every view by name, from the leader master (a copy at most METADATA_TTL_S
        old; the last one seen while no master answers)."""
        now = time.monotonic()
        if self._views is not None and (now - self._views_at < METADATA_TTL_S or
                                        now < self._master_down_until):
            return self._views
        try:
            got = self.client.master_call("list_views", timeout_s=None
                                          if self._views is None else 3.0)
        except errors.ServiceUnavailable:
            if self._views is None:
                raise
            return self._views
        views = {d["name"]: ViewMetadata.from_dict(d) for d in got}
        self._views, self._views_at = views, time.monotonic()
        return views

    def create_view(self, view: ViewMetadata, replace: bool = False) -> ViewMetadata:
        self._views_at = 0.0
        d = self.client.master_call("create_view", {"view": view.to_dict(),
                                                    "replace": replace})
        return ViewMetadata.from_dict(d)

    def drop_views(self, names, if_exists: bool = False, cascade: bool = False
                   ) -> list[str]:
        self._views_at = 0.0
        r = self.client.master_call("drop_views", {"names": list(names),
                                                   "if_exists": if_exists,
                                                   "cascade": cascade})
        return list(r["views"])

    def rename_table(self, name: str, new_name: str, views=()) -> TableMetadata:
        """ALTER TABLE RENAME TO; `views`: the views that read the table, rewritten to
        follow it (engine/catalog/views.py `check_rename`), replaced in the same entry."""
        self.forget_name(name)
        self.forget_name(new_name)
        self._views_at = 0.0
        return self._remember({"table": self.client.master_call(
            "rename_table", {"name": name, "new_name": new_name,
                             "views": [v.to_dict() for v in views]})})

    def _unsupported(self, what: str):
        raise NotSupportedOnCluster(f"{what} is not supported on a cluster yet")

    def _alter(self, name: str, kind: str, **payload) -> TableMetadata:
        """One ALTER TABLE through the leader master; the answer (the table's new entry)
        replaces this front end's cached metadata at once."""
        self.forget_name(name)
        meta = self._remember({"table": self.client.master_call(
            "alter_table", {"name": name, "kind": kind, **payload})})
        self._by_name[name] = meta
        self._fetched[name] = time.monotonic()
        return meta

    def set_properties(self, name: str, properties: dict | None = None,
                       comment: Any = ..., unset=()) -> TableMetadata:
        """ALTER TABLE SET/UNSET TBLPROPERTIES, COMMENT (comment=None clears it)."""
        extra = {} if comment is ... else {"comment": comment}
        return self._alter(name, "set_properties", properties=dict(properties or {}),
                           unset=list(unset), **extra)

    def add_range_partition(self, name: str, spec, if_not_exists: bool = False
                            ) -> TableMetadata:
        """ALTER TABLE ADD [IF NOT EXISTS] RANGE PARTITION: the master places and creates
        one tablet per hash bucket; returns once each has a leader (at most 10 s)."""
        ps = self.get_table(name).partition_schema  # range columns never change
        meta = self._alter(name, "add_range_partition", range=ps.range_to_json(spec),
                           if_not_exists=if_not_exists)
        self._wait_for_leaders(meta)
        return meta

    def drop_range_partition(self, name: str, spec, if_exists: bool = False
                             ) -> TableMetadata:
        """ALTER TABLE DROP [IF EXISTS] RANGE PARTITION: the range's tablets (and rows)
        are deleted."""
        ps = self.get_table(name).partition_schema
        return self._alter(name, "drop_range_partition", range=ps.range_to_json(spec),
                           if_exists=if_exists)

    def add_column(self, name: str, column, if_not_exists: bool = False) -> TableMetadata:
        """ALTER TABLE ADD COLUMN: replicated through every tablet's Raft log (master:
        `_alter_columns`); returns once every tablet's leader has it."""
        return self._alter(name, "add_column", column=column.to_dict(),
                           if_not_exists=if_not_exists)

    def drop_column(self, name: str, column: str, if_exists: bool = False) -> TableMetadata:
        return self._alter(name, "drop_column", column=column, if_exists=if_exists)

    def rename_column(self, name: str, old: str, new: str) -> TableMetadata:
        return self._alter(name, "rename_column", old=old, new=new)

    def tablet_path(self, tablet_id: str):
        self._unsupported("reading a tablet's files (SHOW TABLETS sizes)")

    # -- TableCatalog ---------------------------------------------------------------------
    @property
    def executor(self) -> cf.Executor:
        return self._pool

    def table_metadata(self, table_id: str) -> TableMetadata:
        meta = self._meta.get(table_id)
        if meta is None:
            self.refresh_locations(table_id)
            meta = self._meta[table_id]
        return meta

    def lease_tablets(self, table_id: str,
                      pick: Callable[[TableMetadata], Sequence[str]]) -> TabletLease:
        meta = self.table_metadata(table_id)
        tids = pick(meta)
        return TabletLease(meta, [RemoteTabletHandle(self, meta, t) for t in tids],
                           lambda handles: None)

    def tablets_ready(self, table_id: str) -> bool:
        return False  # every tablet call is a network round trip: never on an event loop

    def write_coalescer(self, table_id: str) -> WriteCoalescer:
        c = self._coalescers.get(table_id)
        if c is None:
            with self._lock:
                c = self._coalescers.setdefault(table_id, WriteCoalescer())
        return c

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self.client.close()


class RemoteTabletHandle:
    def __init__(self, catalog: RemoteCatalog, meta: TableMetadata, tablet_id: str):
        self.tablet_id = tablet_id
        self._t = RemoteTablet(catalog, meta, tablet_id)

    @property
    def is_open(self) -> bool:
        return True

    def tablet(self) -> "RemoteTablet":
        return self._t

    def column_renames(self, schema: Schema) -> dict[str, str] | None:
        return None


class RemoteTablet:
    """The Tablet methods Table uses, each an RPC to the leader (module docstring)."""

    def __init__(self, catalog: RemoteCatalog, meta: TableMetadata, tablet_id: str):
        self.catalog = catalog
        self.client = catalog.client
        self.meta = meta
        self.schema = meta.schema
        self.tablet_id = tablet_id
        self._safe = 0  # a timestamp its leader reported as its last committed one

    # -- routing --------------------------------------------------------------------------
    def _retry(self, fn: Callable[[str], Any], what: str, timeout_s: float | None = None):
        """Run fn(addr) against the leader, following hints and skipping dead servers."""
        deadline = time.monotonic() + (timeout_s or self.client.timeout_s)
        delay, last = 0.02, None
        loc = self.catalog.locations(self.tablet_id, self.meta.id)
        tried: set[str] = set()
        while True:
            cands = [r for r in loc.order() if r[0] not in tried]
            if not cands:
                tried.clear()
                if time.monotonic() + delay > deadline:
                    raise TabletUnavailable(
                        f"tablet {self.tablet_id} of table \"{self.meta.name}\" is "
                        f"unavailable: no leader answered the {what} within "
                        f"{timeout_s or self.client.timeout_s:.0f} s (last error: {last})")
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
                try:
                    self.catalog.refresh_locations(self.meta.id)
                except errors.NotFound:
                    raise  # the table was dropped meanwhile: no point retrying
                except errors.EngineError as e:
                    last = e
                if self.tablet_id not in self.catalog.table_metadata(self.meta.id).tablet_ids:
                    self.catalog.locations(self.tablet_id, self.meta.id)  # raises TabletDropped
                loc = self.catalog.locations(self.tablet_id, self.meta.id)
                continue
            uuid, addr = cands[0]
            try:
                out = fn(addr)
                loc.leader = uuid
                self.served_by = f"{uuid}@{addr}"  # EXPLAIN ANALYZE names it (ScanStats)
                return out
            except _RETRYABLE as e:
                last = e
                tried.add(uuid)
                hint = getattr(e, "leader_uuid", None)
                if hint and hint not in tried and any(r[0] == hint for r in loc.replicas):
                    loc.leader = hint

    # -- Tablet API ---------------------------------------------------------------------
    # A remote tablet cannot decide a batch's first failing row under the write locks of
    # several tablets (Table._write_in_order): in-order writes answer 0A000 and the wire's
    # pipelined batches then run their rows one by one (wire/fastpath.py).
    in_order_writes = False

    def write_deferred(self, ops, rows) -> Callable[[], WriteResult]:
        """`write` started on the client's write pool; the returned call waits for its
        result. Table writes a small batch's tablet shares this way one after another and
        then waits for them all (for local tablets, their fsyncs together): here the
        shares' round trips overlap instead of adding up."""
        return self.client.write_pool().submit(self.write, ops, rows).result

    def write(self, ops, rows) -> WriteResult:
        pre_bad: dict = {}
        raw_keys = None
        if isinstance(rows, dict):
            table, pre_bad, raw_keys = table_from_pydict(self.schema, rows)
        else:
            table = rows
        n = table.num_rows
        if np.isscalar(ops) or isinstance(ops, OpType):
            op_arr = np.full(n, int(ops), dtype=np.int8)
        else:
            op_arr = np.asarray(ops, dtype=np.int8)
        keep = None
        if pre_bad:
            keep = np.array([i for i in range(n) if i not in pre_bad], dtype=np.int64)
            table = table.take(pa.array(keep))
            op_arr = op_arr[keep]
        r = self._send_write(op_arr, table)
        errs = r.row_errors
        if keep is not None:
            errs = [dataclasses.replace(e, index=int(keep[e.index])) for e in errs]
            for i, (code, msg) in pre_bad.items():
                errs.append(RowError(i, code, msg, tuple(raw_keys[i])))
            errs.sort(key=lambda e: e.index)
        return WriteResult(r.timestamp, r.num_applied, errs)

    def _send_write(self, op_arr: np.ndarray, table: pa.Table) -> WriteResult:
        if table.num_rows == 0:
            return WriteResult(0, 0, [])
        c = self.client
        schema, version = self.schema, self.meta.schema_version
        for _ in range(10):
            seq = c.next_seq()
            body = table.append_column(OP_COLUMN, pa.array(op_arr, pa.int8()))
            try:
                def call(addr):
                    return c.rpc.put(addr, {
                        "tablet": self.tablet_id, "client_id": c.client_id, "seq": seq,
                        "first_incomplete": c.first_incomplete(), "ts": c.last_ts,
                        "schema_version": version}, body)
                out = self._retry(call, "write")
            finally:
                c.done_seq(seq)
            if "schema_mismatch" not in out:
                break
            # The table was altered since this statement read its metadata: nothing of
            # this share was applied. Same columns (by id) under the tablet's names, sent
            # again as a new request; a column the tablet no longer has fails the write.
            self.catalog.forget_name(self.meta.name)
            now = Schema.from_dict(out["schema_mismatch"]["schema"])
            names = []
            for n in table.column_names:
                if n == READ_TS_COLUMN:      # a read precondition (row_check.py)
                    names.append(n)
                    continue
                cid = schema.column(n).id
                if not now.has_column_id(cid):
                    raise errors.ColumnNotFound(
                        f'column "{n}" of relation "{self.meta.name}" was dropped by a '
                        f"concurrent ALTER TABLE; nothing of this write was applied to "
                        f"tablet {self.tablet_id}")
                names.append(now.column_by_id(cid).name)
            table = table.rename_columns(names)
            schema, version = now, out["schema_mismatch"]["version"]
        else:
            raise errors.ServiceUnavailable(
                f'table "{self.meta.name}" kept changing (ALTER TABLE) while a write to '
                f"tablet {self.tablet_id} was converted to its schema; run it again")
        if "error" in out:
            # refused as a whole, decided at apply time (the same on every replica): not
            # retried. A STALE answer (errors.StaleRequest) keeps its class.
            e = out["error"]
            cls = errors.StaleRequest if e.get("class") == "StaleRequest" else errors.EngineError
            err = cls(f"tablet {self.tablet_id}: {e['message']}"
                      if cls is errors.StaleRequest else e["message"])
            err.sqlstate = e["sqlstate"]
            raise err
        c.observe_ts(out["timestamp"])
        result = WriteResult(out["timestamp"], out["num_applied"],
                             [RowError(i, code, msg, tuple(key))
                              for i, code, msg, key in out["row_errors"]])
        self._check_result(result, table.num_rows)
        return result

    def _check_result(self, r: WriteResult, sent: int) -> None:
        """Every row sent is accounted for, once: applied, or named by exactly one row
        error (a row index of the request). Otherwise `WriteUnaccounted`: a server that
        silently applied fewer rows than it was sent (or answered for another request)
        would leave the statement acknowledged with rows missing."""
        idx = [e.index for e in r.row_errors]
        named = {i for i in idx if isinstance(i, int) and 0 <= i < sent}
        if r.num_applied + len(idx) == sent and len(named) == len(idx) \
                and r.num_applied >= 0:
            return
        raise WriteUnaccounted(
            f"tablet {self.tablet_id} of table \"{self.meta.name}\" answered a write of "
            f"{sent} rows with {r.num_applied} applied and {len(idx)} row errors "
            f"({len(named)} distinct rows of the request named): the outcome of the rows "
            f"it did not account for is unknown; check the table before writing again")

    def current_timestamp(self) -> int:
        return max(self.committed_timestamp(), self.client.last_ts)

    def committed_timestamp(self) -> int:
        """The leader's last committed timestamp alone (`current_timestamp` adds what this
        client saw elsewhere, for read-your-writes): whether this tablet changed after a
        timestamp (Table.committed_timestamp, an idle change stream)."""
        ts = self._retry(lambda a: self.client.rpc.call(a, "tablet_ts",
                                                        {"tablet": self.tablet_id}),
                         "timestamp request")
        self._safe = max(self._safe, ts)
        return ts

    def wait_safe(self, ts: int) -> None:
        # The leader's last committed timestamp is safe there already: ops it has proposed
        # but not applied carry later timestamps (its clock orders its log). (The scan
        # itself makes the snapshot safe on whichever leader serves it.)
        if ts <= self._safe:
            return
        self._retry(lambda a: self.client.rpc.call(a, "wait_safe", {"tablet": self.tablet_id,
                                                                    "ts": ts},
                                                   timeout_s=15), "safe-time wait")

    def lookup(self, key, columns=None, snapshot=None, encoded=None):
        """One row by its full primary key, as Tablet.lookup answers it (`encoded`, the
        routing's key encoding, is not needed: the tablet server encodes the key)."""
        snap = _snapshot_ts(snapshot)
        return self._refresh_on_change(lambda: self._retry(
            lambda a: self.client.rpc.call(a, "lookup", {
                "tablet": self.tablet_id, "key": list(key),
                "columns": None if columns is None else list(columns), "snapshot": snap,
                "schema_version": self.meta.schema_version}), "lookup"))

    def _refresh_on_change(self, fn):
        """Run fn; if a server says the table was altered since (40001), forget the cached
        metadata so the statement, run again, plans with the new schema."""
        try:
            return fn()
        except errors.EngineError as e:
            if getattr(e, "sqlstate", None) == "40001":
                self.catalog.forget_name(self.meta.name)
            raise

    def scan(self, columns=None, predicates=(), snapshot=None, lower_key=None,
             upper_key=None, lazy=True, stats=None):
        ticket = {"tablet": self.tablet_id,
                  "columns": None if columns is None else list(columns),
                  "predicates": list(predicates), "snapshot": _snapshot_ts(snapshot),
                  "lower_key": None if lower_key is None else list(lower_key),
                  "upper_key": None if upper_key is None else list(upper_key),
                  "lazy": lazy, "ts": self.client.last_ts,
                  "schema_version": self.meta.schema_version}
        return self._scan_refreshing(scan_tablet(self, ticket, stats))

    def _scan_refreshing(self, it):
        try:
            while True:
                try:
                    b = self._refresh_on_change(lambda: next(it))
                except StopIteration:
                    return
                yield b
        finally:
            it.close()  # a scan closed early ends its stream now, not when collected

    def diff_scan(self, start_ts: int, end_ts: int, columns=None) -> pa.Table:
        """Tablet.diff_scan on the leader (the "changes" RPC, per_commit false)."""
        return self._changes(start_ts, end_ts, columns, False, False)

    def changes(self, start_ts: int, end_ts: int, columns=None, retained: bool = False
                ) -> pa.Table:
        """Tablet.changes on the leader: every commit in (start_ts, end_ts]."""
        return self._changes(start_ts, end_ts, columns, True, retained)

    def _changes(self, start_ts, end_ts, columns, per_commit: bool, retained: bool
                 ) -> pa.Table:
        raw = self._refresh_on_change(lambda: self._retry(
            lambda a: self.client.rpc.call(a, "changes", {
                "tablet": self.tablet_id, "start": int(start_ts), "end": int(end_ts),
                "columns": None if columns is None else list(columns),
                "per_commit": per_commit, "retained": retained, "ts": self.client.last_ts,
                "schema_version": self.meta.schema_version}, timeout_s=60), "change scan"))
        return pa.ipc.open_stream(raw).read_all()

    def ancient_history_mark(self) -> int:
        return int(self._retry(lambda a: self.client.rpc.call(
            a, "ahm", {"tablet": self.tablet_id}), "ancient history mark request"))


def _snapshot_ts(snapshot) -> tuple[int, bool] | None:
    """(timestamp, chosen by Table) — a Table-chosen snapshot (an MvccSnapshot) is at or
    after every committed op, so it skips the ancient-history check an explicit one gets."""
    if snapshot is None:
        return None
    if isinstance(snapshot, MvccSnapshot):
        return snapshot.all_committed_before - 1, True
    return int(snapshot), False
