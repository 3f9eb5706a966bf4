"""TabletServer: the process that hosts tablet replicas (`kudusql tserver`).

    <data>/instance.json     this server's permanent uuid
    <data>/tablets/<id>/     one directory per replica (tablet_replica.py), or a tombstone

Tombstones (Kudu's TABLET_DATA_TOMBSTONED). `delete_replica` removes a replica's data and
log but keeps its `consensus-meta.json` (term, vote, committed configuration) and its
`replica.json`, which records state TOMBSTONED (written atomically before the data goes;
a start finishes a removal a crash cut short). A tombstone serves nothing and takes no
part in Raft: messages to it are dropped, so it refuses every vote (Kudu lets tombstones
vote with their last logged op id; refusing is simpler and never grants a vote the
replica would not have granted before). It is reported in heartbeats (state TOMBSTONED,
its term and committed configuration). `create_replica` over a tombstone (re-replication
back onto this server) starts the new replica at the tombstone's term with its vote, so a
voter never votes twice in a term however much it lost, and with the last op id of the
log the tombstone lost (`vote_floor` in replica.json, recorded when the replica is
tombstoned; unknown: (its term, infinity)) as a floor for the votes it grants, so its empty
log never lets a candidate that lacks entries the lost log acked win (raft.py, Votes
after a lost log); the tombstone's directory is
swapped for the new one (set aside as `<id>.tombstone-old`, restored at start if the
swap did not finish). Only a `drop` delete (the tablet was dropped: DROP TABLE, DROP RANGE
PARTITION) removes the directory whole.

Deletes are acted on only from a master that still leads: the highest sys catalog term of
a master heard from (heartbeat answers' `term`, requests' `master_term`; in memory only,
a restart starts from 0 and relies on the master's own confirmation) refuses a delete of
a lower term; a delete in a heartbeat answer is ignored if the replica was opened - or asked for
again by a `create_replica` it already satisfied (re-replication back onto this server
while the old replica runs) - after the report was taken (the master decided about an
older state); and a delete carrying
`cas_config_index` is refused if the replica's committed configuration is newer (Kudu's
CAS on the configuration's op index).

Threads: the RPC server (Flight; handlers run on its pool), one tick thread (every
`tick_ms` it ticks every replica's Raft node: heartbeats, elections), one heartbeat thread
(every `heartbeat_ms`, and at once when a replica's role, term or leader changed, it
reports its replicas, their roles and configurations, its tombstones and its Arrow stream
endpoint's address (`stream_addr`, when it serves one) to the master,
and receives the replicas it should create, tombstone or delete), the Transport's sender
lanes, a pool that steps the Raft messages delivered to replicas (follower appends, syncs
and applies; the leader's commits and applies), a log-sync thread per leader while it has undurable appends, and one
MaintenanceManager for all tablets (flushes, compactions).

RPCs (DoAction unless said otherwise)
    raft             [(tablet id, message)]: Raft traffic between replicas
    create_replica   {tablet_id, table_id, table_name, schema, schema_version,
                     peers: [[uuid, addr]], master_term?}: the schema (and version) the
                     tablet was created with, which its log's entries start from
    delete_replica   {tablet_id, drop?, cas_config_index?, master_term?}: tombstone, or
                     (drop) delete whole; see Tombstones
    DoPut write      {tablet, client_id, seq, first_incomplete, ts, schema_version}; rows
                     with an `__op` column -> {timestamp, num_applied, row_errors} (leader
                     only), or {schema_mismatch: {schema, version}} when the tablet's
                     schema version differs from the one the client wrote for
    alter_schema     {tablet, schema, version}: (leader) replicate an ALTER_SCHEMA entry,
                     answer once applied here (idempotent by version)
    DoGet scan       {tablet, columns, predicates, snapshot, lower_key, upper_key, ordered,
                     resume_after, any_replica, safe_wait_s, batch_rows}: unordered on
                     the leader, or `ordered` (fault tolerant: key order, each batch's
                     app metadata {key: its last encoded key, ts: the snapshot};
                     engine/tablet/ordered_scan.py;
                     READ_LATEST is pinned to the leader's latest committed timestamp);
                     with a snapshot and `any_replica`, a follower serves it after its
                     safe time passed the snapshot (bounded wait, TabletReplica)
    safe_index       {tablet, ts} -> (leader) the log index covering every op <= ts
    lookup           {tablet, key, columns, snapshot, schema_version} -> row or None
                     (scans and lookups with a schema_version other than the replica's
                     are refused: retryably if behind, 40001 if ahead)
    tablet_ts        {tablet} -> the leader's last committed timestamp
    wait_safe        {tablet, ts}
    changes          {tablet, start, end, columns, per_commit, retained} -> (leader) the
                     tablet's diff scan or change feed in (start, end] as an Arrow IPC
                     stream, `end` made safe through the snapshot barrier first
    ahm              {tablet} -> the tablet's ancient history mark
    status           -> this server's uuid, address, HTTP address and every replica's Raft
                     status and state (engine/tserver/status.py)
    transfer_leader  {tablet, target}: hand leadership of a tablet to another voter
    change_config    {tablet, op: "replace", old, new, new_addr}: 3-4-3 replacement (leader)
    copy_begin, copy_fetch, copy_end   tablet copy from this server (tablet_copy.py)
    flush            {tablets?}: flush these replicas' MemRowSets now (benchmarks)

Start-up: every replica directory is opened; one that fails to open (corrupt or unreadable
files) becomes a `FailedReplica` (status.py): logged once, its files left untouched,
reported to the master as FAILED with the error, never created again over its directory;
the server serves the others. A replica that fails while running (RaftHost.fail: a Raft
safety violation, a failed apply or tablet copy install, a failed disk) stays in
`replicas`, stopped and FAILED, off the maintenance manager. `delete_replica` turns either
kind into a tombstone (a FAILED one only if its consensus metadata can still be read;
otherwise, and on DROP, its directory goes); the master asks for it once it replaced the
replica in the tablet's group (master.py).

Refusals are retryable `RemoteError`s (NOT_THE_LEADER with a leader hint, tablet not
running here, a leader whose lease a majority has not confirmed); clients route with them
(engine/client).

Reads on the leader (`lookup`, `tablet_ts`, `wait_safe`, `safe_index`, and scans: READ_LATEST,
the ordered scan's pin, a snapshot made safe) are answered only while the replica holds its
leader lease (TabletReplica.check_leader_ready, engine/consensus/raft.py): READ_LATEST
sees every write acknowledged before it started. Timestamps from clients (`ts` of writes
and scans, snapshots) move the clock only up to `--max-clock-error` ahead of the wall clock
(`HybridClock.update_bounded`; beyond it the request fails with 22008).

TLS: with `tls` (`--rpc-cert/--rpc-key`, engine/rpc) the RPC server speaks TLS and so does
this server's own client (heartbeats, Raft to peers, tablet copies), trusting `--rpc-ca`; a
heartbeat refused for a TLS mismatch is logged as a warning, not at debug level as a master
that is down.

Metrics (engine/metrics): every handler above is wrapped by `ServerMetrics.instrument*`
(calls, outcomes, latency; rows written by op; scans and rows returned); the tick loop
samples each replica's term and leader (elections, leader changes); with `http_port` the
process serves /metrics, /status.json and a status page (engine/tserver/status.py).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import logging
import os
import shutil
import threading
import time
import uuid as uuidlib

import numpy as np
import pyarrow as pa

from engine import clock, errors
from engine.clock import DEFAULT_MAX_ERROR_S, HybridClock
from engine.config import TabletConfig
from engine.consensus.consensus_metadata import CMETA_FILE, FileMetadataStore
from engine.consensus.raft import NotLeader, RaftOptions
from engine.fs import fsync_dir, write_json_atomic
from engine.metrics.metrics import ServerMetrics
from engine.metrics.webserver import StatusServer
from engine.rpc import codec
from engine.rpc.rpc import RemoteError, RpcClient, RpcServer, TlsConfig, TlsMismatch
from engine.schema import Schema
from engine.tablet.maintenance_manager import MaintenanceManager
from engine.tablet.mvcc import MvccSnapshot
from engine.tablet.scan_spec import ColumnPredicate
from engine.tablet.tablet import OrderMode
from engine.tserver.raft_host import ReplicaFailed, Transport
from engine.tserver.status import (
    TOMBSTONED,
    FailedReplica,
    replica_report,
    tombstone_report,
    web_status,
)
from engine.tserver.tablet_copy import CopySessions
from engine.tserver.tablet_replica import REPLICA_FILE, TabletNotRunning, TabletReplica

log = logging.getLogger(__name__)

OP_COLUMN = "__op"
RECREATE_SUFFIX = ".tombstone-old"  # a tombstone being replaced by a new replica
UNKNOWN_LOG_END = 1 << 62  # a tombstone's lost log of unknown length: a vote floor's index


def _read_replica_info(directory: str) -> dict:
    with open(os.path.join(directory, REPLICA_FILE)) as f:
        return json.load(f)


def _snapshot(r: TabletReplica, snap):
    """A request's snapshot: None (the latest), or (ts, chosen_by_table) made safe here
    first; a Table-chosen one reads as an MvccSnapshot (no ancient-history check)."""
    if snap is None:
        return None
    ts, chosen = snap
    r.wait_safe(ts)
    return MvccSnapshot.at(ts) if chosen else ts


class SchemaChanged(errors.EngineError):
    """A read named its columns by another schema version than the tablet has."""

    sqlstate = "40001"


def _check_version(r: TabletReplica, version: int | None) -> None:
    """A read planned for schema `version` (None: unchecked) runs only on a replica at that
    version: names may mean other columns at another one (RENAME then ADD COLUMN). A
    replica behind it refuses retryably (another replica, or this one later, has it); one
    ahead refuses with 40001 (the statement is run again with fresh metadata)."""
    if version is None:
        return
    have = r.tablet.schema_version
    if have < version:
        raise RemoteError(f"replica {r.uuid} of tablet {r.tablet_id} has not applied schema "
                          f"version {version} yet (it has {have}); retry", r.raft.leader_uuid)
    if have > version:
        raise SchemaChanged(
            f'table "{r.table_name}" was altered (ALTER TABLE; schema version {have}, this '
            f"statement was planned for {version}); run the statement again")


def load_or_create_uuid(data_dir: str) -> str:
    path = os.path.join(data_dir, "instance.json")
    try:
        with open(path) as f:
            return json.load(f)["uuid"]
    except FileNotFoundError:
        u = uuidlib.uuid4().hex
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"uuid": u}, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
        return u


class TabletServer:
    def __init__(self, data_dir: str, host: str, port: int, secret: str, masters: list[str],
                 tick_ms: int = 100, election_ticks: int = 10, heartbeat_ms: int = 1000,
                 fsync: bool = True, tablet_config: TabletConfig | None = None,
                 log_retention_entries: int = 10_000, http_port: int | None = None,
                 http_host: str = "127.0.0.1", tls: TlsConfig | None = None,
                 wal_segment_bytes: int | None = None,
                 max_clock_error_s: float = DEFAULT_MAX_ERROR_S):
        os.makedirs(os.path.join(data_dir, "tablets"), exist_ok=True)
        self.data_dir = data_dir
        self.uuid = load_or_create_uuid(data_dir)
        self.masters = list(masters)
        self.tick_s = tick_ms / 1000
        self.heartbeat_s = heartbeat_ms / 1000
        # tick_s: leader leases rely on `_tick_loop` never ticking faster than this
        self.raft_options = RaftOptions(heartbeat_ticks=1, election_timeout_ticks=election_ticks,
                                        log_retention_entries=log_retention_entries,
                                        tick_s=self.tick_s)
        self.config = tablet_config or TabletConfig(fsync=fsync,
                                                    wal_sync="commit" if fsync else "never")
        if wal_segment_bytes:
            self.config = dataclasses.replace(self.config, wal_segment_bytes=wal_segment_bytes)
        self.clock = HybridClock(max_error_s=max_clock_error_s)
        self.rpc_client = RpcClient(secret, tls=tls)  # masters, Raft peers, tablet copies
        self.transport = Transport(self.rpc_client)
        self.directory: dict[str, str] = {}  # server uuid -> address (from the master)
        self.replicas: dict[str, TabletReplica] = {}
        self.failed_replicas: dict[str, FailedReplica] = {}  # could not be opened at start
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._report_now = threading.Event()  # a replica's role changed: heartbeat now
        # steps delivered Raft messages: follower syncs and applies, leader commits
        self._raft_pool = cf.ThreadPoolExecutor(max_workers=8, thread_name_prefix="raft")
        self.mm = MaintenanceManager().start()
        self.copies = CopySessions(data_dir)
        self.metrics = m = ServerMetrics("tserver")
        self.http: StatusServer | None = None
        self.last_heartbeat: float | None = None  # monotonic time the master last took one
        self.tombstones: dict[str, dict] = {}  # tablet id -> what its tombstone keeps
        # the highest sys catalog term of a master this server acted on (memory only)
        self.master_term = 0
        self._incarnation = 0  # bumped per replica opened: a report's replicas, by age
        self._opened_at: dict[str, int] = {}  # tablet id -> incarnation it was opened at
        tdir = os.path.join(data_dir, "tablets")
        for name in os.listdir(tdir):  # a re-creation over a tombstone, interrupted
            if name.endswith(RECREATE_SUFFIX):
                base = os.path.join(tdir, name[:-len(RECREATE_SUFFIX)])
                if os.path.exists(base):
                    shutil.rmtree(os.path.join(tdir, name), ignore_errors=True)
                else:  # the tombstone goes back (its term and vote are kept)
                    shutil.rmtree(base + ".tmp", ignore_errors=True)
                    os.rename(os.path.join(tdir, name), base)
        for tid in sorted(os.listdir(tdir)):
            if tid.endswith(".tmp"):
                shutil.rmtree(os.path.join(data_dir, "tablets", tid), ignore_errors=True)
                continue
            try:
                info = _read_replica_info(self._replica_dir(tid))
                if info.get("state") == TOMBSTONED:
                    self._load_tombstone(tid, info)
                    continue
                self._open_replica(tid)
            except Exception as e:  # noqa: BLE001 - one broken replica must not stop the rest
                f = self.failed_replicas[tid] = FailedReplica.of(tid, self._replica_dir(tid), e)
                log.error("replica of tablet %s (table %s) could not be opened and is FAILED "
                          "(its files are left as they are): %s", tid, f.table_name, f.error,
                          exc_info=e)
        self.server = RpcServer(host, port, secret, m.instrument({
            "raft": self._h_raft, "create_replica": self._h_create, "delete_replica":
            self._h_delete, "lookup": self._h_lookup, "tablet_ts": self._h_tablet_ts,
            "wait_safe": self._h_wait_safe, "status": lambda p: self.status(),
            "safe_index": self._h_safe_index,
            "transfer_leader": self._h_transfer, "change_config": self._h_change_config,
            "copy_begin": lambda p: self.copies.begin(self.replica(p["tablet"])),
            "copy_fetch": self.copies.fetch, "copy_end": self.copies.end,
            "flush": self._h_flush, "alter_schema": self._h_alter_schema,
            "changes": self._h_changes, "ahm": self._h_ahm}),
            m.instrument_write(self._h_write, OP_COLUMN), m.instrument_scan(self._h_scan),
            tls=tls)
        self.addr = self.server.addr
        # the Arrow stream endpoint serving beside the RPC (kudusql/cluster.py starts it;
        # wire.arrow_stream.cluster_endpoint reads it from `status` to locate replicas;
        # reported in heartbeats, so a master can hand it to the JVM Spark connector)
        self.stream_addr: str | None = None
        m.status_collector(lambda: web_status(self))
        if http_port is not None:
            self.http = StatusServer(
                http_host, http_port, m.registry, lambda: web_status(self),
                f"kudusql tserver {self.uuid} ({self.addr})")
        self._threads = [threading.Thread(target=self._tick_loop, daemon=True, name="ticker"),
                         threading.Thread(target=self._heartbeat_loop, daemon=True,
                                          name="heartbeat")]
        for t in self._threads:
            t.start()

    # -- replicas ------------------------------------------------------------------------------
    def _replica_dir(self, tablet_id: str) -> str:
        return os.path.join(self.data_dir, "tablets", tablet_id)

    def _open_replica(self, tablet_id: str) -> TabletReplica:
        self._incarnation += 1
        self._opened_at[tablet_id] = self._incarnation
        r = TabletReplica(self._replica_dir(tablet_id), self.uuid, self.clock, self.transport,
                          self.raft_options, self.config, self.directory.get)
        r.rpc = self.rpc_client
        r.on_role_change = self._report_now.set

        def replaced(old, new):
            self.mm.unregister(old)
            self.mm.register(new)
        r.on_tablet_replaced = replaced

        def failed(rep):
            self.mm.unregister(rep.tablet)  # a half-applied tablet is not flushed
            self._report_now.set()
        r.on_replica_failed = failed
        with self._lock:
            self.replicas[tablet_id] = r
        self.mm.register(r.tablet)
        return r

    def replica(self, tablet_id: str) -> TabletReplica:
        r = self.replicas.get(tablet_id)
        if r is None or r.stopped:
            why = ""
            f = self.failed_replicas.get(tablet_id)
            if r is not None and r.failed is not None:
                why = f": the replica has failed ({r.failed})"
            elif f is not None:
                why = f": the replica has failed ({f.error})"
            raise TabletNotRunning(f"tablet {tablet_id} is not running on server {self.uuid} "
                                   f"({self.addr}){why}")
        return r

    def _master_says(self, p: dict) -> bool:
        """Whether to act on a request from a master of sys catalog term p["master_term"]
        (absent: an operator's or a test's RPC, acted on): not if a master of a higher
        term has been heard from, since the sender has been deposed (it may still think
        it leads). Caller holds self._lock."""
        term = p.get("master_term")
        if term is None:
            return True
        if term < self.master_term:
            return False
        self.master_term = term
        return True

    def _h_create(self, p: dict) -> dict:
        """Create a replica (idempotent). Over a tombstone of the tablet (re-replication
        back onto this server) the new replica starts at the tombstone's term with its
        vote: it can never vote twice in a term, whatever it forgot with its data."""
        tid = p["tablet_id"]
        with self._lock:
            self._master_says(p)  # a create is never refused: it destroys nothing
            if tid in self.replicas or tid in self.failed_replicas:
                # The master wants this replica (again: re-replication back onto this
                # server while the old one still runs takes it as the new member). A
                # delete it decided from a report taken before now is stale: the replica
                # counts as opened now, so `apply_master_answer` skips such a delete.
                self._incarnation += 1
                self._opened_at[tid] = self._incarnation
                return {"created": False}
            d = self._replica_dir(tid)
            tomb = self.tombstones.get(tid)
            if tomb is not None or not os.path.exists(d):
                TabletReplica.create(d if tomb is None else d + ".new", tid, p["table_id"],
                                     p["table_name"], Schema.from_dict(p["schema"]),
                                     [tuple(x) for x in p["peers"]], self.config, self.clock,
                                     p.get("schema_version", 0),
                                     term=0 if tomb is None else tomb["term"],
                                     voted_for=None if tomb is None else tomb["voted_for"],
                                     vote_floor=None if tomb is None else tomb["vote_floor"])
            if tomb is not None:
                # the tombstone's directory is replaced by the new one: set aside (a crash
                # now puts it back at the next start), the new one in, the old one gone
                os.rename(d, d + RECREATE_SUFFIX)
                os.rename(d + ".new", d)
                if self.config.fsync:
                    fsync_dir(os.path.dirname(d))
                shutil.rmtree(d + RECREATE_SUFFIX, ignore_errors=True)
                del self.tombstones[tid]
            self._open_replica(tid)
        return {"created": True}

    def _h_delete(self, p: dict) -> dict:
        """delete_replica {tablet_id, drop?, cas_config_index?, master_term?}.

        Default: tombstone (Kudu's TABLET_DATA_TOMBSTONED): the tablet's data and log go,
        its consensus metadata (term, vote, committed config) and replica.json (state
        TOMBSTONED) stay, so a replica created here again never votes twice in a term.
        `cas_config_index`: refused if this replica's committed configuration is newer
        (it learned of a configuration the master did not know when it decided).
        `drop`: the tablet itself is gone (DROP TABLE, DROP RANGE PARTITION): the whole
        directory goes, tombstone included. Refused from a deposed master (a request
        whose master_term is below the highest this server has seen)."""
        tid = p["tablet_id"]
        with self._lock:
            if not self._master_says(p):
                return {"deleted": False, "refused": "the master was deposed"}
            if tid in self.failed_replicas:
                return self._delete_failed(tid, bool(p.get("drop")))
            r = self.replicas.get(tid)
            cas = p.get("cas_config_index")
            if r is not None and cas is not None:
                have = r.raft.committed_config.opid_index
                if have > cas:
                    log.info("not deleting replica %s: its committed configuration (index "
                             "%d) is newer than the master's (%d)", tid, have, cas)
                    return {"deleted": False, "refused": "newer committed configuration"}
            floor = None
            if r is not None:
                self.replicas.pop(tid)
                self.mm.unregister(r.tablet)
                self.metrics.forget_tablet(tid)
                with r.lock:
                    meta = r.raft.metadata()
                    # the end of the log about to go (or of one lost before it): a replica
                    # created here again votes as if it still had it (raft.py)
                    try:
                        floor = (r.storage.last_term, r.storage.last_index)
                    except Exception:  # noqa: BLE001 - e.g. a log a failed install closed:
                        floor = None  # unknown, the tombstone's term stands in (below)
                    if floor is not None and r.vote_floor is not None:
                        floor = max(floor, (r.vote_floor.term, r.vote_floor.index))
                    r.close()
                # what the node holds is durable already (saved before any message that
                # depended on it); saved again so the tombstone is exact
                r.cmeta_store.save(meta)
            d = self._replica_dir(tid)
            if p.get("drop"):
                self.tombstones.pop(tid, None)
                shutil.rmtree(d, ignore_errors=True)
                return {"deleted": r is not None, "dropped": True}
            if r is None:
                return {"deleted": False, "tombstoned": tid in self.tombstones}
            info = _read_replica_info(d)
            info["state"] = TOMBSTONED
            if floor is not None:
                info["vote_floor"] = list(floor)
            else:
                info.pop("vote_floor", None)
            write_json_atomic(os.path.join(d, REPLICA_FILE), info, self.config.fsync)
            self._load_tombstone(tid, info)
        return {"deleted": True, "tombstoned": True}

    def _delete_failed(self, tid: str, drop: bool) -> dict:
        """Delete a FAILED replica (caller holds self._lock): its consensus metadata is
        kept as a tombstone when it can still be read (so a replica created here again
        never votes twice in a term); unreadable, or `drop`, the directory goes."""
        self.failed_replicas.pop(tid)
        self.metrics.forget_tablet(tid)
        d = self._replica_dir(tid)
        if not drop:
            try:
                info = _read_replica_info(d)
                info["state"] = TOMBSTONED
                if FileMetadataStore(d, fsync=self.config.fsync).load() is not None:
                    write_json_atomic(os.path.join(d, REPLICA_FILE), info, self.config.fsync)
                    self._load_tombstone(tid, info)
                    return {"deleted": True, "tombstoned": True}
            except Exception as e:  # noqa: BLE001 - unreadable: nothing to keep
                log.info("FAILED replica %s: consensus metadata unreadable (%s); removed "
                         "whole", tid, e)
        shutil.rmtree(d, ignore_errors=True)
        return {"deleted": True, "tombstoned": False}

    def _load_tombstone(self, tid: str, info: dict) -> None:
        """Finish a tombstone's removal of data (it may have been cut by a crash) and
        remember what it keeps (caller holds self._lock or is the constructor)."""
        d = self._replica_dir(tid)
        for name in os.listdir(d):
            if name not in (REPLICA_FILE, CMETA_FILE):
                path = os.path.join(d, name)
                if os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
        cmeta = FileMetadataStore(d, fsync=self.config.fsync).load()
        if cmeta is None:
            raise errors.Corruption(f"tombstone {d} lost its consensus metadata")
        cfg = cmeta.committed_config
        floor = info.get("vote_floor")
        if floor is None:
            # the lost log's end is unknown (a FAILED replica that could not be opened, a
            # tombstone of an older version): none of its entries has a term above the
            # tombstone's, so (that term, infinity) is a floor that is never too low
            floor = [cmeta.current_term, UNKNOWN_LOG_END]
        self.tombstones[tid] = {
            "table_id": info.get("table_id"), "table_name": info.get("table_name"),
            "term": cmeta.current_term, "voted_for": cmeta.voted_for,
            "vote_floor": [int(floor[0]), int(floor[1])],
            "committed_config_index": cfg.opid_index,
            "committed_peers": [x.uuid for x in cfg.peers]}

    # -- Raft ----------------------------------------------------------------------------------
    def _h_raft(self, batch: list) -> None:
        """Queue each replica's messages (RaftHost.deliver) and answer at once."""
        by_tablet: dict[str, list] = {}
        for tablet_id, msg in batch:
            by_tablet.setdefault(tablet_id, []).append(msg)
        for tablet_id, msgs in by_tablet.items():
            r = self.replicas.get(tablet_id)
            if r is not None:
                r.deliver(msgs, self._raft_pool)
        return None

    def _tick_loop(self) -> None:
        """Tick every replica on a grid `tick_s` apart. Never faster than that (leader
        leases count on it, engine/consensus/raft.py): each round waits for the next grid
        point, and after a late round the grid restarts from now, later, instead of
        catching up with a burst of ticks. The grid is in `clock.monotonic()` time, the
        clock leases are measured by (its rate is a failpoint: engine/clock.py)."""
        nxt = clock.monotonic()
        while not self._stop.is_set():
            nxt += self.tick_s
            for r in list(self.replicas.values()):
                try:
                    r.tick()
                    self.metrics.observe_raft(r.tablet_id, r.raft.term, r.raft.leader_uuid)
                except ReplicaFailed:
                    pass  # logged once, at CRITICAL, by RaftHost.fail; no longer ticked
                except Exception:  # noqa: BLE001 - one replica must not stop the others
                    log.exception("tick of tablet %s failed", r.tablet_id)
            delay = nxt - clock.monotonic()
            if delay < 0:
                nxt = clock.monotonic()
                delay = 0
            self._stop.wait(delay / clock.monotonic_rate())  # real seconds

    # -- master heartbeats -------------------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        """Every `heartbeat_s`, and at once (at most every 20 ms) when a replica's role,
        term or leader changed: the master's locations then name a new leader within a
        round trip (Kudu triggers a tablet report on such changes), so clients find it
        and a new table's CREATE can wait for its leaders."""
        while not self._stop.is_set():
            self._report_now.clear()
            try:
                self.heartbeat()
            except TlsMismatch as e:  # misconfigured, not down: say so (and keep trying)
                log.warning("heartbeat refused: %s", e)
            except Exception as e:  # noqa: BLE001 - the master may be down: keep trying
                log.debug("heartbeat failed: %s", e)
            self._report_now.wait(self.heartbeat_s)
            self._stop.wait(0.02)

    def heartbeat(self) -> None:
        with self._lock:
            seen = self._incarnation  # the replicas this report describes
            tablets = {tid: tombstone_report(t) for tid, t in self.tombstones.items()}
            replicas = list(self.replicas.items()) + list(self.failed_replicas.items())
        tablets.update({tid: replica_report(r) for tid, r in replicas})
        report = {"uuid": self.uuid, "addr": self.addr,
                  "http_addr": None if self.http is None else self.http.addr,
                  "stream_addr": self.stream_addr, "tablets": tablets}
        last = None
        for m in self.masters:
            try:
                resp = self.rpc_client.call(m, "tserver_heartbeat", report, timeout_s=3)
            except errors.EngineError as e:
                last = e
                continue
            if resp.get("not_leader"):
                continue
            self.last_heartbeat = time.monotonic()
            self.apply_master_answer(resp, seen)
            return
        if last is not None:
            raise last

    def apply_master_answer(self, resp: dict, seen: int) -> None:
        """Act on a leader master's heartbeat answer to a report of the replicas opened up
        to incarnation `seen`: create what it asks; tombstone (or, for a dropped tablet,
        delete) what it asks, unless the answer is from a deposed master (its `term` below
        the highest seen) or the replica was created after the report was taken (the
        master decided about an older one)."""
        self.directory.update(resp.get("directory", {}))
        term = resp.get("term")
        if isinstance(term, int):
            with self._lock:
                self._master_says({"master_term": term})
        for spec in resp.get("create", []):
            try:
                self._h_create(dict(spec, master_term=term))
            except Exception:  # noqa: BLE001 - retried at the next heartbeat
                log.exception("creating replica %s failed", spec.get("tablet_id"))
        for d in resp.get("delete", []):
            if not isinstance(d, dict) or term is None or "tablet_id" not in d:
                log.warning("ignoring a malformed delete from the master: %r", d)
                continue
            tid = d["tablet_id"]
            with self._lock:
                if self._opened_at.get(tid, 0) > seen:
                    continue  # created since the report: not what the master decided on
                out = self._h_delete(dict(d, master_term=term))
            log.info("master (term %s) asked to %s replica %s: %s", term,
                     "delete" if d.get("drop") else "tombstone", tid, out)

    # -- data RPCs -----------------------------------------------------------------------------
    def _h_write(self, cmd: dict, table: pa.Table) -> dict:
        r = self.replica(cmd["tablet"])
        if cmd.get("ts"):
            self.clock.update_bounded(cmd["ts"])
        ops = table.column(OP_COLUMN).to_numpy().astype(np.int8)
        rows = table.drop_columns([OP_COLUMN])
        return r.write(cmd["client_id"], cmd["seq"], cmd.get("first_incomplete", 0), ops,
                       rows, cmd.get("timeout_s", 10.0), cmd.get("schema_version"))

    def _h_alter_schema(self, p: dict) -> dict:
        return self.replica(p["tablet"]).alter_schema(p["schema"], p["version"],
                                                      p.get("timeout_s", 10.0))

    def _h_scan(self, t: dict):
        r = self.replica(t["tablet"])
        if t.get("ts"):
            self.clock.update_bounded(t["ts"])
        snapshot = t.get("snapshot")
        try:
            r.check_leader_ready(lease=True)
            if snapshot is None and t.get("ordered"):
                # READ_LATEST that may have to resume: pinned to the latest committed
                # timestamp, made safe; every batch carries it (docs/cluster.md, Scans)
                snapshot = (r.tablet.current_timestamp(), True)
            snap = _snapshot(r, snapshot)
        except (RemoteError, NotLeader):
            if snapshot is None or not t.get("any_replica"):
                raise
            # READ_AT_SNAPSHOT on a follower (or a leader still catching up)
            ts, chosen = snapshot
            r.wait_safe_follower(ts, float(t.get("safe_wait_s", 2.0)))
            snap = MvccSnapshot.at(ts) if chosen else ts
        tablet = r.tablet
        _check_version(r, t.get("schema_version"))
        schema = tablet.current_schema
        names = t.get("columns")
        names = schema.names if names is None else list(names)
        preds = [p if isinstance(p, ColumnPredicate) else ColumnPredicate(**p)
                 for p in t.get("predicates", ())]
        if not t.get("ordered"):
            it = tablet.scan(names, preds, snap, t.get("lower_key"), t.get("upper_key"),
                             t.get("lazy", True))
            return schema.arrow_schema(names), it
        out_schema, it = tablet.open_scan(names, preds, snap, t.get("lower_key"),
                                          t.get("upper_key"), t.get("lazy", True),
                                          order_mode=OrderMode.ORDERED,
                                          resume_after=t.get("resume_after"),
                                          batch_rows=t.get("batch_rows"))
        ts = snapshot[0]
        return out_schema, ((b, pa.py_buffer(codec.encode({"key": k, "ts": ts})))
                            for b, k in it)

    def _h_safe_index(self, p: dict) -> int:
        return self.replica(p["tablet"]).wait_safe(p["ts"])

    def _h_lookup(self, p: dict):
        r = self.replica(p["tablet"])
        r.check_leader_ready(lease=True)
        snap = _snapshot(r, p.get("snapshot"))
        _check_version(r, p.get("schema_version"))
        return r.tablet.lookup(tuple(p["key"]), p.get("columns"), snap)

    def _h_tablet_ts(self, p: dict) -> int:
        r = self.replica(p["tablet"])
        r.check_leader_ready(lease=True)
        return r.tablet.current_timestamp()

    def _h_changes(self, p: dict) -> bytes:
        """A diff scan (`per_commit` false) or the change feed (Tablet.changes) of one
        tablet in (start, end], on its leader (which holds every committed op up to end
        once end is safe), as an Arrow IPC stream. `end` is made safe through the
        snapshot barrier a READ_AT_SNAPSHOT scan passes (TabletReplica.wait_safe): the
        leader stamps a write before it reaches the tablet's MVCC, so the tablet's own
        wait alone could miss one stamped at or below `end` and still being replicated
        (`end` may be another tablet's latest, or a fresh timestamp: Table.safe_now)."""
        r = self.replica(p["tablet"])
        if p.get("ts"):
            self.clock.update_bounded(p["ts"])
        r.check_leader_ready(lease=True)
        r.wait_safe(int(p["end"]))
        _check_version(r, p.get("schema_version"))
        cols = p.get("columns")
        if p.get("per_commit"):
            out = r.tablet.changes(int(p["start"]), int(p["end"]), cols,
                                   bool(p.get("retained")))
        else:
            out = r.tablet.diff_scan(int(p["start"]), int(p["end"]), cols)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, out.schema) as w:
            w.write_table(out)
        return sink.getvalue().to_pybytes()

    def _h_ahm(self, p: dict) -> int:
        return self.replica(p["tablet"]).tablet.ancient_history_mark()

    def _h_wait_safe(self, p: dict) -> None:
        self.replica(p["tablet"]).wait_safe(p["ts"])
        return None

    def _h_flush(self, p: dict) -> dict:
        """Flush the MemRowSets of this server's replicas (of `tablets`, default all) now,
        as the maintenance manager would over time (benchmarks: scans of flushed data)."""
        want = set(p.get("tablets") or ()) if p else set()
        n = 0
        for tid, r in list(self.replicas.items()):
            if (not want or tid in want) and not r.stopped and r.tablet.mrs_rows():
                r.tablet.flush_mrs()
                n += 1
        return {"flushed": n}

    def _h_transfer(self, p: dict) -> dict:
        r = self.replica(p["tablet"])
        with r.lock:
            target = r.raft.transfer_leadership(p.get("target"))
            r.process()
        return {"target": target}

    def _h_change_config(self, p: dict) -> dict:
        r = self.replica(p["tablet"])
        with r.lock:
            if p["op"] != "replace":
                raise errors.InvalidArgument(f"unknown configuration change {p['op']!r}")
            try:
                with r.io_guard():
                    r.raft.replace_peer(p["old"], p["new"], addr=p.get("new_addr", ""))
            except errors.ServiceUnavailable as e:
                raise RemoteError(str(e), r.raft.leader_uuid) from None
            r.process()
        return {"ok": True}

    # -- status / lifecycle ------------------------------------------------------------------
    def _reports(self) -> dict[str, dict]:
        """Every replica's report (status.py), FAILED ones included."""
        every = list(self.replicas.items()) + list(self.failed_replicas.items())
        return {tid: dict(replica_report(r), table=r.table_name) for tid, r in every}

    def status(self) -> dict:
        return {"role": "tserver", "uuid": self.uuid, "addr": self.addr, "pid": os.getpid(),
                "http_addr": None if self.http is None else self.http.addr,
                "stream_addr": self.stream_addr,
                "tablets": self._reports(),
                "tombstones": {tid: dict(tombstone_report(t), table=t["table_name"])
                               for tid, t in list(self.tombstones.items())}}

    def stop(self) -> None:
        self._stop.set()
        self._report_now.set()
        for t in self._threads:
            t.join(timeout=5)
        if self.http is not None:
            self.http.stop()
        self.server.stop()
        self.transport.stop()
        self._raft_pool.shutdown(wait=True, cancel_futures=True)
        self.mm.shutdown()
        for r in list(self.replicas.values()):
            try:
                r.close()
            except Exception:  # noqa: BLE001 - shutting down: close the others
                log.exception("closing tablet %s", r.tablet_id)
        self.rpc_client.close()
