"""TabletReplica: one replica of one tablet — a Raft peer (RaftHost) over a Tablet.

    <data>/tablets/<tablet_id>/
        replica.json          tablet id, table id and name (what the master assigned)
        consensus-meta.json   term, vote, committed config (cmeta)
        raft-wal/             the Raft log = this replica's WAL (WalLogStorage)
        tablet/               the Tablet's flushed data and metadata (its own `wal/` stays
                              empty: the tablet never logs, Raft does)

Writes. The leader validates a write, proposes it as one REPLICATED_WRITE entry (body: the
request id envelope below + `WriteOp.encode()`, the engine's one write-op encoding) and
waits until that entry is applied. Every replica applies committed entries in log order
with `Tablet.apply(op, entry.timestamp, index=entry.index)` — the leader's timestamp, so
all replicas have the same MVCC history. Several writes to one tablet may be in flight at
once (each DoPut handler proposes and waits on its own future); Raft pipelines their
entries to the followers (up to `max_inflight` AppendEntries per peer) while the leader's
own fsync runs in the background (raft_host.py), and an entry is committed once a
majority, counting the leader only up to its durable index, has it on disk.

Schema changes (ALTER TABLE ADD / DROP / RENAME COLUMN). The master asks the leader
(`alter_schema`) to propose an ALTER_SCHEMA entry; every replica applies it in log order
with `Tablet.alter_schema(schema, version)`, which flushes (so the replay anchor lands on
the entry itself: after a restart only the entry and later ones are applied again) and does
nothing at a version it already has. Writes that name their schema version are
VERSIONED_WRITE entries; at apply time a version other than the tablet's refuses the write
whole (`schema_mismatch`, the tablet's schema in the answer) — the same decision on every
replica, since it depends only on the entries before it — and the client converts the rows
by column id and sends them again.

Leader election of a new tablet: the first replica of the master's initial placement (and
a sole voter, RF=1, also after a restart) campaigns at once instead of after an election
timeout (`_eager_ticks`, each tick until a leader is known); the server reports role
changes to the master at once, so a CREATE TABLE can wait for its leaders (engine/client).

Exactly once (result_tracker.py, Kudu's ResultTracker). A request carries (client id,
sequence number, first_incomplete), all three inside its Raft entry's envelope
(`encode_request`), and every replica decides about each write entry at apply time from
the log prefix alone (`ResultTracker.step`): recorded at an earlier index -> skipped, the
stored result; below the client's first_incomplete mark -> skipped, STALE (XX000); else
applied and recorded. So
  - a retry that reaches a replica which has applied it gets the stored result;
  - a retry of a request still pending here waits for the same entry;
  - a retry proposed again while an earlier copy is in the log (a leader change in
    between) is skipped on every replica alike;
  - replicas never decide differently: expiry (clients idle for 10 minutes) counts in the
    entries' hybrid timestamps, not a local clock, and the state survives what used to
    reset it — a restart (a checkpoint as of the flushed index, written before the tablet's
    metadata moves it and hence before the log below it is GC'd) and a tablet copy (the
    checkpoint is a file of the copied tablet directory).
The leader answers a retry it can already decide (`lookup`) without proposing it.

The tablet's log view. The Tablet asks its `log` for the last index (to stamp flushes), tells
it a new replay anchor before persisting it (`before_anchor`: the tracker checkpoint) and
asks it to GC below the anchor after. Here `last_index` is the last *applied* index, and GC only
records the anchor: the host GCs the Raft log under its lock, below min(anchor, Raft's own
bound) — never from inside the tablet's write lock, which apply holds.

Tablet copy: when the leader asks (StartTabletCopy: the entries this replica needs were
GC'd), `on_copy_request` copies the tablet from it in a thread (tablet_copy.py) while the
replica ignores Raft traffic, then `install_copy` stages the new replica state (data, a
Raft log after the copied state, consensus metadata), commits it with one rename and
reopens the Tablet and the Raft node from it. Opening a replica first finishes or undoes an
install a crash interrupted (`tablet_copy.recover_install`), so its data, log and
consensus metadata always come from the same side of the install.

Failure: a replica whose Raft core hit a safety violation, whose apply raised or whose disk
failed (its log's fsync or write: errors.IOFailure) is FAILED and stopped (RaftHost.fail;
a leader hands leadership over first); `on_failed` fails its waiting writes and calls the server's
hook (`on_replica_failed`: off the maintenance manager, report to the master now).

Reads are served by the leader once it has applied an entry of its own term (before that a
new leader may not have applied everything committed) and while it holds its leader lease
(`check_leader_ready(lease=True)`; engine/consensus/raft.py, Leader leases): a deposed
leader that has not noticed yet (paused, partitioned) must not answer from stale state.
Without a lease the read waits up to two heartbeat periods for the next round of echoes to
renew it, then is refused retryably (RemoteError: the client tries the other replicas). A
snapshot read at `ts` first moves the clock past `ts` (bounded: `--max-clock-error`,
engine/clock.py) and waits until the log entry `RaftConsensus.snapshot_barrier` names is
applied with its term: every entry the leader had appended, plus a NO_OP stamped above
`ts` when `ts` is above all of them, so no op with a timestamp <= ts is still on its way
(the leader's safe time) and no later leader stamps a write at or below `ts`.

Snapshot reads on any replica (READ_AT_SNAPSHOT, `wait_safe_follower`): a replica may serve
a read at `ts` once it has applied an entry stamped >= ts (timestamps increase along the
log, so everything at or before ts is applied), or once it has applied the index its leader
names for ts (`wait_safe` on the leader returns it; asked with the `safe_index` RPC). The
wait is bounded; then the client tries another replica.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import logging
import os
import shutil
import struct
import threading
import time

import numpy as np
import pyarrow as pa

from engine import errors
from engine.clock import Clock
from engine.config import TabletConfig
from engine.consensus.consensus_metadata import ConsensusMetadata
from engine.consensus.log import LogEntry
from engine.consensus.messages import OpId, RaftConfig, RaftPeer
from engine.consensus.raft import NotLeader, RaftOptions
from engine.rpc.rpc import RemoteError
from engine.schema import Schema
from engine.tablet.tablet import Tablet
from engine.tablet.tablet_metadata import TabletMetadata
from engine.tablet.write_op import READ_TS_COLUMN, WriteOp
from engine.tserver.raft_host import RaftHost, Transport
from engine.tserver.tablet_copy import (
    commit_install,
    failpoint,
    recover_install,
    run_copy,
    stage_install,
)
from engine.tserver.result_tracker import ResultTracker, TrackerCheckpoints

GC_MIN_ENTRIES = 1000  # the Raft log is GC'd in steps of at least this many entries
REPLICATED_WRITE = 4  # a Raft log entry type: request id envelope + WriteOp body
ALTER_SCHEMA = 6  # a Raft log entry type: JSON {schema, version} (ALTER TABLE columns)
# a Raft log entry type: the schema version the client wrote for (u32) + REPLICATED_WRITE's
VERSIONED_WRITE = 7
_VERSION = struct.Struct("<I")
REPLICA_FILE = "replica.json"
# The request id envelope: u16 client id length | u64 seq | [u64 first_incomplete] | client
# id | WriteOp. Bit 15 of the length says first_incomplete is there (entries written before
# it was added have it clear and decode with first_incomplete 0: they never raise a mark).
_ENV = struct.Struct("<HQ")
_FI = struct.Struct("<Q")
_HAS_FI = 0x8000
log = logging.getLogger(__name__)


def encode_request(client_id: str, seq: int, op: WriteOp, first_incomplete: int = 0) -> bytes:
    cid = client_id.encode()
    return _ENV.pack(len(cid) | _HAS_FI, seq) + _FI.pack(first_incomplete) + cid + op.encode()


def decode_request(body: bytes) -> tuple[str, int, int, bytes]:
    """(client id, seq, first_incomplete, WriteOp bytes) of a REPLICATED_WRITE body."""
    n, seq = _ENV.unpack_from(body, 0)
    off, fi = _ENV.size, 0
    if n & _HAS_FI:
        n &= ~_HAS_FI
        fi = _FI.unpack_from(body, off)[0]
        off += _FI.size
    return body[off:off + n].decode(), seq, fi, body[off + n:]


def write_request(e: LogEntry) -> tuple[str, int, int, int | None, bytes] | None:
    """(client id, seq, first_incomplete, schema version or None, WriteOp bytes) of a write
    entry; None for other entry types."""
    if e.type != REPLICATED_WRITE and e.type != VERSIONED_WRITE:
        return None
    body, version = e.body, None
    if e.type == VERSIONED_WRITE:
        version = _VERSION.unpack_from(body, 0)[0]
        body = body[_VERSION.size:]
    cid, seq, fi, body = decode_request(body)
    return cid, seq, fi, version, body


class TabletNotRunning(RemoteError):
    """This server holds no running replica of the tablet (retry elsewhere)."""


class _RaftLogView:
    """What the Tablet sees as its log (see the module docstring)."""

    def __init__(self, replica: "TabletReplica"):
        self.replica = replica
        self.applied = 0
        self.anchor = 1

    @property
    def last_index(self) -> int:
        return self.applied

    def next_index(self) -> int:
        raise errors.InvalidArgument("a replicated tablet is written through Raft only")

    def before_anchor(self, anchor_index: int) -> None:
        ckpt = self.replica.checkpoints
        if ckpt is not None:  # the result tracker as of the new flushed index, on disk
            ckpt.prepare(anchor_index - 1)

    def gc(self, anchor_index: int) -> int:
        ckpt = self.replica.checkpoints
        if ckpt is not None:
            ckpt.release(anchor_index - 1)
        self.anchor = anchor_index
        return 0

    def size_bytes(self) -> int:
        try:
            return self.replica.storage.log.size_bytes()
        except OSError:
            return 0

    def ts_at_or_before(self, index: int) -> int | None:
        # called from maintenance under the tablet's locks, so without the replica lock
        # (apply takes them in the other order): a concurrent GC may move the log's start
        s = self.replica.storage
        try:
            i = max(index, s.first_index)
            return s.timestamp(i) if i <= s.last_index else None
        except IndexError:
            return None

    def close(self) -> None:
        pass


class TabletReplica(RaftHost):
    def __init__(self, directory: str, server_uuid: str, clock: Clock, transport: Transport,
                 options: RaftOptions, config: TabletConfig, resolve_addr=None):
        recover_install(directory, config.fsync)  # a tablet copy a crash interrupted
        with open(os.path.join(directory, REPLICA_FILE)) as f:
            info = json.load(f)
        self.tablet_id = info["tablet_id"]
        self.table_id = info["table_id"]
        self.table_name = info["table_name"]
        self.copying = False
        self.on_tablet_replaced = None  # (old Tablet, new Tablet): the server's MM hook
        self.rpc = None  # set by the server: for tablet copies
        self.on_role_change = None  # the server's hook: report to the master now
        self.on_replica_failed = None  # the server's hook: this replica became FAILED
        self._reported_role = None
        self._view = _RaftLogView(self)
        self._config = config
        self._clock = clock
        tablet = self.tablet = self._open_tablet(os.path.join(directory, "tablet"))
        applied = tablet.anchor_index() - 1
        self._view.applied = applied
        self.checkpoints: TrackerCheckpoints | None = None  # set once the log is open (below)
        self.tracker = ResultTracker()
        self._waiters: dict[int, tuple[int, cf.Future]] = {}
        self._inflight: dict[tuple[str, int], cf.Future] = {}
        self._applied_cond = threading.Condition()
        floor = info.get("vote_floor")  # created over a tombstone: its lost log's end
        super().__init__(self.tablet_id, server_uuid, directory, clock, transport, options,
                         applied_index=applied, fsync=config.fsync, resolve_addr=resolve_addr,
                         segment_bytes=config.wal_segment_bytes,
                         vote_floor=None if floor is None else OpId(*floor))
        self._load_tracker(applied)
        ts = self.storage.timestamp(applied) or 0
        # ops up to the flushed state are committed in MVCC; later ones are applied again
        tablet.mvcc.adjust_for_replay(ts)
        # Campaign at once rather than after an election timeout (1-2 s by default) when
        # that cannot disturb a leader: the sole voter (RF=1, also after a restart), or the
        # first replica of a new tablet's initial placement (Kudu's designated candidate;
        # the master spreads those over the servers). Repeated each tick until a leader is
        # known, since the other replicas may not exist yet when the first pre-vote goes out.
        voters = self.raft.config.voters()
        fresh = self.raft.term == 0 and self.storage.last_index == 0
        first = self.raft.config.peers[0].uuid if self.raft.config.peers else None
        self._eager_ticks = 3 * options.election_timeout_ticks \
            if voters == [server_uuid] or (fresh and first == server_uuid) else 0

    def _load_tracker(self, flushed: int) -> None:
        """The result tracker as of the tablet's flushed index (result_tracker.py): its
        checkpoint in the tablet directory, plus the retained write entries after it."""
        s = self.storage

        def entries(lo: int):
            lo = max(lo, s.first_index)
            hi = min(flushed, s.last_index)
            while lo <= hi:
                batch = s.entries(lo, min(hi, lo + 999))
                for e in batch:
                    w = write_request(e)
                    if w is not None:
                        yield e.index, e.timestamp, w[0], w[1], w[2]
                lo = batch[-1].index + 1
        self.checkpoints, self.tracker, n = TrackerCheckpoints.load(
            self.tablet.path, flushed, entries, self._config.fsync)
        if n:
            log.info("tablet %s: %d write entries before the flushed state registered with "
                     "the result tracker (no checkpoint covered them)", self.tablet_id, n)

    def _open_tablet(self, tpath: str) -> Tablet:
        """Open the tablet's flushed state, without replaying any log (see RaftHost)."""
        meta = TabletMetadata.load(tpath)
        meta.remove_orphans(tpath)
        tablet = Tablet(tpath, meta.schema, self._config, self._clock, meta)
        tablet.log.close()
        tablet.log = self._view
        return tablet

    # -- tablet copy (tablet_copy.py) --------------------------------------------------------
    def on_copy_request(self, req) -> None:
        if self.copying or self.rpc is None or self.stopped:
            return
        addr = self._addr_of(req.src)
        if not addr:
            return
        self.copying = True

        def run():
            try:
                ok = run_copy(self, self.rpc, addr)
                log.info("tablet copy of %s from %s: %s", self.tablet_id, addr,
                         "installed" if ok else "stale, discarded")
            except Exception as e:  # noqa: BLE001 - the leader asks again later
                log.warning("tablet copy of %s from %s failed: %s", self.tablet_id, addr, e)
            finally:
                self.copying = False
        threading.Thread(target=run, daemon=True, name=f"copy-{self.tablet_id}").start()

    def install_copy(self, staging: str, last, timestamp: int, config, suffix: list,
                     source_term: int) -> bool:
        """Install a fetched copy (`staging`/tablet holds its files) as this replica's
        state in one atomic step (tablet_copy.py, Install) and reopen the Tablet and the
        Raft node from it. False if stale (what RaftConsensus.install_tablet_copy refuses:
        an older term, or not ahead of our commit index). An error after the old state was
        closed leaves the replica FAILED (the next start's recovery sorts out the files)."""
        with self.lock:
            r = self.raft
            if self.stopped or source_term < r.term or last.index <= r.commit_index:
                return False
            # the state Raft would reach by install_tablet_copy, made durable up front
            term = max(r.term, source_term)
            cmeta = ConsensusMetadata(term, r.voted_for if term == r.term else None, config)
            stage_install(staging, last, timestamp, suffix, cmeta,
                          self._config.wal_segment_bytes, self.fsync)
            old = self.tablet
            try:
                old.close()
                self.storage.close()
                commit_install(self.directory, self.fsync)
                tablet = self._open_tablet(os.path.join(self.directory, "tablet"))
                tablet.mvcc.adjust_for_replay(timestamp)
                self.clock.update(timestamp)
                self._view.applied = last.index
                self.open_raft(last.index)
                failpoint("installed")
            except Exception as e:
                # the old state is closed and the new one may be half in place: stop here
                raise self.fail("tablet copy install failed", e) from e
            self.tablet = tablet  # published once the Raft state matches it
            self._load_tracker(last.index)  # the copy's checkpoint, from its tablet directory
            self._eager_ticks = 0
            if self.on_tablet_replaced is not None:
                self.on_tablet_replaced(old, tablet)
            self.process()
            return True

    def on_failed(self) -> None:
        for _, fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(TabletNotRunning(
                    f"replica {self.uuid} of tablet {self.tablet_id} has failed: "
                    f"{self.failed}"))
        self._waiters.clear()
        self._inflight.clear()
        if self.on_replica_failed is not None:
            self.on_replica_failed(self)

    # -- creation --------------------------------------------------------------------------
    @staticmethod
    def create(directory: str, tablet_id: str, table_id: str, table_name: str,
               schema: Schema, peers: list[tuple[str, str]], config: TabletConfig,
               clock: Clock, schema_version: int = 0, term: int = 0,
               voted_for: str | None = None, vote_floor: list | None = None) -> None:
        """Lay out a new replica (before its first open): tablet, initial Raft config.
        `term`, `voted_for`, `vote_floor` ([term, index]: the last entry of the log the
        tombstone's replica held): what a tombstone of this tablet on this server
        remembers (tablet_server.py): a replica created again never forgets a vote it
        gave, nor grants one to a candidate behind the log it lost (raft.py)."""
        tmp = directory + ".tmp"
        if os.path.exists(tmp):
                shutil.rmtree(tmp)
        os.makedirs(tmp)
        t = Tablet.create(os.path.join(tmp, "tablet"), schema, config=config, clock=clock,
                          schema_version=schema_version)
        t.close()
        cfg = RaftConfig(0, tuple(RaftPeer(u, addr=a) for u, a in peers))
        RaftHost.create_metadata(tmp, ConsensusMetadata(term, voted_for, cfg), config.fsync)
        with open(os.path.join(tmp, REPLICA_FILE), "w") as f:
            info = {"tablet_id": tablet_id, "table_id": table_id, "table_name": table_name}
            if vote_floor is not None:
                info["vote_floor"] = [int(vote_floor[0]), int(vote_floor[1])]
            json.dump(info, f)
        os.rename(tmp, directory)  # a replica directory is complete or absent

    # -- apply -------------------------------------------------------------------------------
    def apply_entries(self, entries: list[LogEntry]) -> None:
        for e in entries:
            result = None
            w = write_request(e)
            if w is not None:
                cid, seq, fi, version, body = w

                def apply(version=version, body=body, e=e):
                    if version is not None and version != self.tablet.schema_version:
                        return self._schema_mismatch()
                    return self._apply_write(body, e)
                # a duplicate or STALE entry is skipped (result_tracker.py): the same
                # decision on every replica, from the log prefix alone
                result, _ = self.tracker.step(e.index, e.timestamp, cid, seq, fi, apply)
                self.checkpoints.note(e.index, e.timestamp, cid, seq, fi, result)
                self._inflight.pop((cid, seq), None)
            elif e.type == ALTER_SCHEMA:
                result = self._apply_alter(e.body)
            w = self._waiters.pop(e.index, None)
            if w is not None:
                term, fut = w
                if term == e.term and result is not None:
                    fut.set_result(result)
                else:
                    fut.set_exception(NotLeader(
                        f"tablet {self.tablet_id}: the write was replaced by a new leader's "
                        f"log; retry", self.raft.leader_uuid))
            self._view.applied = e.index
        with self._applied_cond:
            self._applied_cond.notify_all()

    def _schema_mismatch(self) -> dict:
        """A write made for another schema version than the tablet's: refused whole (in log
        order, so alike on every replica), with the tablet's schema, for the client to
        convert the rows by column id and send them again."""
        t = self.tablet
        return {"schema_mismatch": {"schema": t.schema.to_dict(),
                                    "version": t.schema_version}}

    def _apply_alter(self, body: bytes) -> dict:
        d = json.loads(body)
        try:
            v = self.tablet.alter_schema(Schema.from_dict(d["schema"]), d["version"])
        except errors.InvalidArgument as ex:  # the same on every replica: same schema
            return {"error": {"class": type(ex).__name__, "message": str(ex),
                              "sqlstate": ex.sqlstate}}
        return {"version": v}

    def _apply_write(self, body: bytes, e: LogEntry) -> dict:
        try:
            r = self.tablet.apply(WriteOp.decode(body), e.timestamp, index=e.index)
        except errors.EngineError as ex:
            return {"error": {"class": type(ex).__name__, "message": str(ex),
                              "sqlstate": ex.sqlstate}}
        return {"timestamp": r.timestamp, "num_applied": r.num_applied,
                "row_errors": [[x.index, x.code, x.message, list(x.key)]
                               for x in r.row_errors]}

    def step_many(self, msgs: list) -> None:
        if not self.copying:  # while copying, answers would ack a log about to be replaced
            super().step_many(msgs)

    def tick(self) -> None:
        if self.copying:
            return
        if self._eager_ticks:
            with self.lock:
                self._eager_ticks -= 1
                if self.raft.leader_uuid is not None:
                    self._eager_ticks = 0
                elif not self.stopped:
                    with self.io_guard():
                        self.raft.campaign()
        super().tick()

    def after_process(self) -> None:
        role = (self.raft.role, self.raft.term, self.raft.leader_uuid)
        if role != self._reported_role:
            self._reported_role = role
            if self.on_role_change is not None:
                self.on_role_change()
        if not self.raft.is_leader and self._waiters:
            hint = self.raft.leader_uuid
            for _, fut in self._waiters.values():
                fut.set_exception(NotLeader(
                    f"replica {self.uuid} of tablet {self.tablet_id} lost leadership before "
                    f"the write committed; retry", hint))
            self._waiters.clear()
            self._inflight.clear()
        s = self.storage
        bound = min(self._view.anchor, self.raft.log_gc_bound())
        if bound - s.first_index > min(GC_MIN_ENTRIES, self.raft.opts.log_retention_entries):
            s.gc(bound)

    # -- leader-side requests -------------------------------------------------------------
    def _not_leader(self) -> NotLeader:
        return NotLeader(f"replica {self.uuid} of tablet {self.tablet_id} is not the leader",
                         self.raft.leader_uuid)

    def check_leader_ready(self, lease: bool = False) -> None:
        """Raise unless this replica leads and has applied an entry of its own term; with
        `lease` (reads), also unless it holds its leader lease: if it does not, wait for
        the next heartbeat round to renew it, at most two heartbeat periods (no round trip
        of its own while the lease holds), then refuse retryably."""
        deadline = None
        while True:
            with self.lock:
                r = self.raft
                if not r.is_leader:
                    raise self._not_leader()
                if self.storage.term(r.last_applied) != r.term:
                    raise RemoteError(f"tablet {self.tablet_id}: the new leader is still "
                                      f"catching up; retry", self.uuid)
                if not lease or r.lease_valid():
                    return
                o = r.opts
            now = time.monotonic()
            if deadline is None:
                deadline = now + 2 * o.heartbeat_ticks * o.tick_s
            elif now >= deadline:
                raise RemoteError(
                    f"replica {self.uuid} of tablet {self.tablet_id} leads but a majority "
                    f"has not confirmed its leader lease within "
                    f"{2 * o.heartbeat_ticks * o.tick_s:.2f} s (it may have been deposed); "
                    f"retry", None)
            time.sleep(min(deadline - now, o.tick_s / 5))

    def write(self, client_id: str, seq: int, first_incomplete: int, ops: np.ndarray,
              rows: pa.Table, timeout_s: float, schema_version: int | None = None) -> dict:
        """Replicate and apply one write; `schema_version`: the table schema version the
        client named its columns by (None: unchecked, the tablet's current schema). A
        write for another version than the tablet has when the write's entry is applied is
        refused whole with the tablet's schema (`schema_mismatch`), never applied by name
        under a schema whose names mean other columns."""
        with self.lock:
            done = self.tracker.lookup(client_id, seq)  # stored result, or STALE
            if done is not None:
                return done
            fut = self._inflight.get((client_id, seq))
        if fut is None:
            tablet = self.tablet
            schema, current = tablet.schema, tablet.schema_version
            if schema_version is not None and schema_version < current:
                return self._schema_mismatch()  # versions only grow: refused at apply too
            if schema_version is None or schema_version == current:
                for name in rows.column_names:
                    if name != READ_TS_COLUMN:  # a read precondition (row_check.py)
                        schema.index_of(name)  # raises ColumnNotFound
                for c in schema.key_columns:
                    if c.name not in rows.column_names:
                        raise errors.InvalidArgument(
                            f"key column {c.name!r} missing from the rows")
            # (a newer version: an ALTER_SCHEMA entry is ahead in the log; apply decides)
            self.tablet.admit_write()  # memory back-pressure, as on the local write path
            body = encode_request(client_id, seq, WriteOp(ops, rows), first_incomplete)
            kind = REPLICATED_WRITE
            if schema_version is not None:
                body, kind = _VERSION.pack(schema_version) + body, VERSIONED_WRITE
            with self.lock:
                if self.stopped:
                    raise TabletNotRunning(f"tablet {self.tablet_id} is shutting down")
                done = self.tracker.lookup(client_id, seq)
                if done is not None:
                    return done
                fut = self._inflight.get((client_id, seq))
                if fut is None:
                    try:
                        with self.io_guard():
                            entry = self.raft.propose(kind, body)
                    except NotLeader:
                        raise self._not_leader() from None
                    fut = cf.Future()
                    self._waiters[entry.index] = (entry.term, fut)
                    self._inflight[(client_id, seq)] = fut
                    self.process()
        try:
            return fut.result(timeout=timeout_s)
        except cf.TimeoutError:
            raise RemoteError(f"tablet {self.tablet_id}: the write was not replicated to a "
                              f"majority within {timeout_s:.0f} s; retry",
                              self.raft.leader_uuid) from None

    def alter_schema(self, schema: dict, version: int, timeout_s: float) -> dict:
        """(Leader) ALTER TABLE ADD / DROP / RENAME COLUMN on this tablet: one ALTER_SCHEMA
        entry, applied on every replica in log order with `Tablet.alter_schema(schema,
        version)` (idempotent by version: a replay, a re-sent alter or a second entry for
        the same version does nothing); returns {"version"} once applied here."""
        self.check_leader_ready()
        with self.lock:
            if self.tablet.schema_version >= version:
                return {"version": self.tablet.schema_version}
            if self.stopped:
                raise TabletNotRunning(f"tablet {self.tablet_id} is shutting down")
            try:
                with self.io_guard():
                    entry = self.raft.propose(ALTER_SCHEMA, json.dumps(
                        {"schema": schema, "version": version}).encode())
            except NotLeader:
                raise self._not_leader() from None
            fut = cf.Future()
            self._waiters[entry.index] = (entry.term, fut)
            self.process()
        try:
            out = fut.result(timeout=timeout_s)
        except cf.TimeoutError:
            raise RemoteError(f"tablet {self.tablet_id}: the schema change was not "
                              f"replicated to a majority within {timeout_s:.0f} s; retry",
                              self.raft.leader_uuid) from None
        if "error" in out:
            e = errors.InvalidArgument(out["error"]["message"])
            raise e
        return out

    def wait_safe(self, ts: int, timeout_s: float = 10.0) -> int:
        """(Leader, holding its lease) make a read at `ts` safe here; returns the log index
        every entry with a timestamp <= ts is at or below (what a follower must apply to
        read at ts). Waits until the barrier entry (`RaftConsensus.snapshot_barrier`: the
        last one, or a NO_OP stamped above ts) is applied with its term, i.e. committed:
        then no future leader stamps a write at or below ts. A `ts` more than the maximum
        clock error ahead is refused (ClockError, 22008)."""
        self.check_leader_ready(lease=True)
        self.clock.update_bounded(ts)
        with self.lock:
            try:
                with self.io_guard():
                    target, term = self.raft.snapshot_barrier(ts)
            except NotLeader:
                raise self._not_leader() from None
            self.process()
        deadline = time.monotonic() + timeout_s
        with self._applied_cond:
            while self._view.applied < target:  # (raft.last_applied moves before apply)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RemoteError(f"tablet {self.tablet_id}: timed out waiting for safe "
                                      f"time", None)
                self._applied_cond.wait(min(left, 0.05))
        with self.lock:
            got = self.storage.term(target)  # None: GC'd or copied over, so committed
        if got is not None and got != term:  # a new leader's entry took the index: ours was never committed
            raise RemoteError(f"tablet {self.tablet_id}: leadership changed while making "
                              f"the snapshot safe; retry", self.raft.leader_uuid)
        self.tablet.wait_safe(ts)
        return target

    def safe_time(self) -> int:
        """The timestamp of the last applied entry: an entry applied later has a greater one
        in every future leader's log (engine/consensus/raft.py, Safe time)."""
        with self.lock:
            try:
                return self.storage.timestamp(self._view.applied) or 0
            except IndexError:  # the entry was GC'd (after a restart): not known here
                return 0

    def wait_safe_follower(self, ts: int, timeout_s: float) -> None:
        """Make a snapshot read at `ts` safe on this replica, leader or not (READ_AT_SNAPSHOT
        on any replica): done once an applied entry has a timestamp >= ts, or once this
        replica has applied the index the leader names for ts (`safe_index`, asked once when
        the leader is known and reachable). Raises a retryable RemoteError after
        `timeout_s` (the client tries another replica)."""
        deadline = time.monotonic() + timeout_s
        need, asked = None, False
        while True:
            if self.stopped or self.copying:
                raise TabletNotRunning(f"tablet {self.tablet_id} is not serving here")
            if self.safe_time() >= ts or (need is not None and self._view.applied >= need):
                break
            left = deadline - time.monotonic()
            leader = self.raft.leader_uuid
            if left <= 0:
                raise RemoteError(f"replica {self.uuid} of tablet {self.tablet_id} is not "
                                  f"safe at the snapshot {ts} after {timeout_s:.1f} s; try "
                                  f"another replica", leader)
            if not asked and leader and leader != self.uuid and self.rpc is not None:
                asked = True
                addr = self._addr_of(leader)
                if addr:
                    try:
                        need = self.rpc.call(addr, "safe_index", {"tablet": self.tablet_id,
                                                                  "ts": ts},
                                             timeout_s=max(0.2, min(left, 3.0)))
                    except errors.EngineError as e:  # the leader is down: wait for entries
                        log.debug("safe_index from %s failed: %s", addr, e)
                continue
            with self._applied_cond:
                self._applied_cond.wait(min(left, 0.05))
        self.tablet.wait_safe(ts)

    def close(self) -> None:
        with self.lock:
            for _, fut in self._waiters.values():
                fut.set_exception(TabletNotRunning(f"tablet {self.tablet_id} is shutting down"))
            self._waiters.clear()
            try:
                if self.failed is None:  # a FAILED replica's files stay as the failure left
                    self.tablet.close()  # them (after a failed install `tablet` is stale)
            finally:
                super().close()
