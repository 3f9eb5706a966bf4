"""RaftHost: one Raft peer hosted in a server process, and the Transport between peers.

A RaftHost owns a `RaftConsensus` (engine/consensus/raft.py, sans-I/O), its log
(`WalLogStorage`: the Raft log is the WAL) and its `FileMetadataStore` (cmeta). Every input
(a message, a tick, a proposal) is fed under `self.lock` and followed by `process()`, which
drains `ready()` in the order docs/consensus.md prescribes:

  1. new metadata (term, vote, committed config) is saved (write-fsync-rename) first;
  2. a follower or candidate syncs the log here if it holds entries not yet durable (an
     ack or a vote must not outlive a crash that forgot it), then `log_synced()`;
  3. messages are handed to the Transport (which sends them asynchronously);
  4. committed entries are applied in index order through `apply_entries` (subclass);
  5. tablet copy requests go to `on_copy_request` (subclass).

`process()` loops until `ready()` is empty, since `log_synced()` can commit more.

Failure (Kudu's FAILED tablet state). Two kinds of error stop a peer for good (`fail`):
  - a Raft safety violation: an `AssertionError` out of the Raft core while stepping or
    ticking (e.g. raft.py's "leader overwrites committed entry"), or a corrupt log
    (`errors.Corruption`) — this peer's log or state can no longer be trusted;
  - any exception from `apply_entries`: Raft has already counted those entries applied
    (`ready()` moved `last_applied`), so the state machine may be half-applied, and going
    on would skip them or apply them twice.
  - a failed disk: the log's fsync or write failed (`errors.IOFailure`, raised for good by
    the WAL from then on, engine/consensus/log.py) or the consensus metadata could not be
    saved. Whether the entries since the last good sync are on disk is unknown, so the peer
    must not ack, vote or lead on that log (Kudu marks such a tablet FAILED): wherever the
    host feeds Raft or syncs (`step_many`, `tick`, `process`, the background sync, and the
    subclass's proposals through `io_guard`) the error fails the peer. A leader first hands
    over (`RaftConsensus.abdicate`: a TimeoutNow to its most caught-up voter, sent
    directly), so the tablet has a new leader within a round trip or two instead of after
    an election timeout; the others commit without it (a majority of the other two).
The peer is then `failed` (the reason, with the error) and `stopped`: it steps, ticks,
votes and serves no more; the reason is logged once at CRITICAL level ("SAFETY
VIOLATION" / "apply failed", with the traceback) for operators and test harnesses that
scan the logs; `on_failed` (the subclass's hook) is called. Its files are left as they are
(a restart reopens them; that the replica then works is not assumed). Any other error
while stepping a message (the network's or a peer's, e.g. a `RemoteError`) is logged and
the peer goes on: Raft resends what matters.

The leader's own appends are synced in the background instead (`_sync_loop`, one thread
per host while there is something to sync, Kudu's log appender): its AppendEntries leave in
step 3 while its fsync runs, so a write waits for max(leader fsync, follower round trip +
fsync), not their sum (Raft thesis §10.2.1). That keeps "acknowledged = majority-durable":
the leader counts itself towards the commit majority only up to `durable_index`, which the
sync thread advances (`WalLogStorage.sync_begin/run/done`; a log cut in between voids it).
Appends that arrive during an fsync are covered by the next one (group commit), so the
leader's lock is never held across an fsync and acks, proposals and ticks go on meanwhile.

Messages from the network are queued (`deliver`) and stepped by a pool task, one per host
at a time, in arrival order; all messages queued meanwhile are stepped before one
`process()`, so a follower syncs once for several AppendEntries (group commit).

Restart: the host passes `applied_index` = what its state machine holds durably (a tablet:
the lowest flushed index; the master's in-memory catalog: 0). There are no COMMIT records
in the WAL, so entries after it are applied again only once a leader has told this peer
the commit index (Raft's own commit path) — never an entry that was merely logged. The
cost: after a restart a replica's data (past its flushed state) is visible only once a
leader exists and has committed an entry of its term.

Transport: per destination address up to LANES_PER_PEER sender threads ("lanes") for
messages that carry entries; each group (tablet) is given one lane of an address, in turn,
and keeps it, so its entries go out in order while other tablets' go out at the same time
on other lanes. Everything else (heartbeats, acks, votes) shares one light lane per
address, so idle tablets cost one RPC per tick per peer. A lane sends
what has queued as one `raft` DoAction (a list of (group id, message)). A send that fails
is dropped — Raft retries (heartbeats, probes) — and the queues are bounded, so a dead or
paused peer never blocks the sender of another. The receiving server only queues the
messages (`deliver`) and answers; a pool steps them, one task per replica at a time.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
from typing import Callable

from engine import errors
from engine import clock as clocks
from engine.clock import Clock
from engine.consensus.consensus_metadata import ConsensusMetadata, FileMetadataStore
from engine.consensus.log import LogEntry
from engine.consensus.log_storage import WalLogStorage
from engine.consensus.messages import OpId
from engine.consensus.raft import RaftConsensus, RaftOptions, Role
from engine.rpc.rpc import RemoteError, RpcClient

log = logging.getLogger(__name__)

MAX_QUEUED_PER_PEER = 2000
# Sender threads per peer address for messages that carry entries ("entry lanes"). Each
# tablet's entries to a peer go through one lane (in order); several tablets' go through
# different lanes at once, so one tablet's large AppendEntries does not hold the others'
# behind it. Messages without entries share one more lane per address (Transport.send).
# A lane batches what has queued, of all its tablets, into one `raft` call.
LANES_PER_PEER = 4


# Entry bytes a replica may have queued, not yet stepped (RaftHost.deliver); beyond this,
# messages carrying entries are dropped (Raft sends them again). Without the bound a
# follower slower than its leader (fsync, apply) queued every resent copy: a tablet server
# grew to 12 GB during a TPC-H SF1 load before it was killed for it.
MAX_INBOX_BYTES = 64 << 20


def _entry_bytes(m) -> int:
    entries = getattr(m, "entries", None)
    return sum(len(e.body) for e in entries) if entries else 0


class Transport:
    """Asynchronous, lossy, batched delivery of Raft messages to peer addresses."""

    def __init__(self, rpc: RpcClient, timeout_s: float = 2.0, lanes: int = LANES_PER_PEER):
        self.rpc = rpc
        self.timeout_s = timeout_s
        self.lanes = lanes
        self._queues: dict[tuple[str, int], queue.Queue] = {}
        self._lane_of: dict[tuple[str, str], int] = {}
        self._groups_per_addr: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopped = False

    def _queue(self, addr: str, group: str | None) -> queue.Queue:
        """The lane of (addr, group): groups take the entry lanes of an address in turn,
        and a group keeps its lane, so its entries stay in order; group None: the
        address's light lane."""
        if group is None:
            q = self._queues.get((addr, -1))
            if q is None:
                with self._lock:
                    q = self._queues.get((addr, -1))
                    if q is None:
                        q = self._queues[(addr, -1)] = queue.Queue()
                        threading.Thread(target=self._run, args=(addr, q), daemon=True,
                                         name=f"raft-send-{addr}-L").start()
            return q
        lane = self._lane_of.get((addr, group))
        q = None if lane is None else self._queues.get((addr, lane))
        if q is not None:
            return q
        with self._lock:
            lane = self._lane_of.get((addr, group))
            if lane is None:
                n = self._groups_per_addr.get(addr, 0)
                self._groups_per_addr[addr] = n + 1
                lane = self._lane_of[(addr, group)] = n % self.lanes
            q = self._queues.get((addr, lane))
            if q is None:
                q = self._queues[(addr, lane)] = queue.Queue()
                threading.Thread(target=self._run, args=(addr, q), daemon=True,
                                 name=f"raft-send-{addr}-{lane}").start()
        return q

    def send(self, addr: str, group: str, msg) -> None:
        if not addr or self._stopped:
            return
        # Messages with entries go through their tablet's entry lane, in order; the rest
        # (heartbeats, acks, votes) through one light lane per address, so that idle
        # tablets cost one RPC per tick per peer. Heartbeats may overtake entries: a
        # heartbeat sent while entries are in flight names the acked index, which the
        # follower has (raft.py `_send_append`), and responses all share the light lane.
        q = self._queue(addr, group if getattr(msg, "entries", None) else None)
        if q.qsize() >= MAX_QUEUED_PER_PEER:
            try:
                q.get_nowait()  # drop the oldest: Raft resends what matters
            except queue.Empty:
                pass
        q.put((group, msg))

    def _run(self, addr: str, q: queue.Queue) -> None:
        while not self._stopped:
            try:
                first = q.get(timeout=0.5)
            except queue.Empty:
                continue
            if first is None:
                return
            batch = [first]
            while len(batch) < 256:
                try:
                    m = q.get_nowait()
                except queue.Empty:
                    break
                if m is None:
                    return
                batch.append(m)
            try:
                self.rpc.call(addr, "raft", batch, timeout_s=self.timeout_s)
            except Exception as e:  # noqa: BLE001 - lossy by design: Raft retries
                log.debug("raft messages to %s dropped: %s", addr, e)

    def stop(self) -> None:
        self._stopped = True
        with self._lock:
            for q in self._queues.values():
                q.put(None)


class ReplicaFailed(RemoteError):
    """This Raft peer stopped for good: a safety violation or a failed apply (RaftHost.fail).
    Retryable elsewhere (a RemoteError): the other replicas serve."""


# What `fail` logs: a Raft safety violation, an exception while applying committed entries,
# or a failed disk (the log's fsync or write, the consensus metadata's save)
SAFETY_VIOLATION = "SAFETY VIOLATION"
APPLY_FAILED = "apply failed"
DISK_FAILED = "disk failed"


class _IoGuard:
    """RaftHost.io_guard: IOFailure inside -> the peer fails (DISK_FAILED)."""

    def __init__(self, host: "RaftHost"):
        self.host = host

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if typ is not None and issubclass(typ, errors.IOFailure):
            raise self.host.fail(DISK_FAILED, exc) from exc
        return False


class RaftHost:
    """One Raft peer in this process (see the module docstring)."""

    def __init__(self, group_id: str, uuid: str, directory: str, clock: Clock,
                 transport: Transport, options: RaftOptions, applied_index: int = 0,
                 fsync: bool = True, resolve_addr: Callable[[str], str] | None = None,
                 segment_bytes: int = 8 << 20, vote_floor: OpId | None = None):
        self.group_id = group_id
        # the last op id of a log this peer lost (created over a tombstone): its votes
        # need candidates at least that far (raft.py, Votes after a lost log)
        self.vote_floor = vote_floor
        self.uuid = uuid
        self.directory = directory
        self.clock = clock
        self.transport = transport
        self.fsync = fsync
        self.resolve_addr = resolve_addr or (lambda uuid: "")
        self.options = options
        self.segment_bytes = segment_bytes
        self.lock = threading.RLock()
        self.open_raft(applied_index)
        self.stopped = False
        self.failed: str | None = None  # why this peer stopped for good (`fail`)
        self._syncing = False  # the background log sync thread runs (leader)
        self._inbox: list = []  # delivered messages not yet stepped
        self._inbox_bytes = 0  # entry bodies in _inbox
        self.inbox_dropped = 0  # messages with entries dropped because the inbox was full
        self._inbox_lock = threading.Lock()
        self._draining = False

    def open_raft(self, applied_index: int) -> None:
        """(Re)open the Raft log, the consensus metadata and the Raft node from
        `directory` (at start, and after a tablet copy replaced them on disk; the caller
        has closed the old log)."""
        d = self.directory
        self.storage = WalLogStorage(f"{d}/raft-wal", self.segment_bytes, fsync=self.fsync)
        self.cmeta_store = FileMetadataStore(d, fsync=self.fsync)
        cmeta = self.cmeta_store.load()
        if cmeta is None:
            raise FileNotFoundError(f"{d}: no consensus metadata")
        self.raft = RaftConsensus(self.uuid, self.storage, cmeta, self.clock,
                                  random.Random(), self.options, applied_index=applied_index,
                                  monotonic=clocks.monotonic, vote_floor=self.vote_floor)

    @staticmethod
    def create_metadata(directory: str, cmeta: ConsensusMetadata, fsync: bool = True) -> None:
        FileMetadataStore(directory, fsync=fsync).save(cmeta)

    # -- inputs --------------------------------------------------------------------------------
    def step(self, msg) -> None:
        self.step_many([msg])

    def step_many(self, msgs: list) -> None:
        """Feed messages in order, then drain ready() once (one log sync covers them all)."""
        with self.lock:
            if self.stopped:
                return
            try:
                for m in msgs:
                    self.raft.step(m)
            except (AssertionError, errors.Corruption) as e:
                raise self.fail(SAFETY_VIOLATION, e) from e
            except errors.IOFailure as e:  # a follower's append
                raise self.fail(DISK_FAILED, e) from e
            self.process()

    def deliver(self, msgs: list, executor) -> None:
        """Queue messages from the network and return at once; a task on `executor` steps
        everything queued, in arrival order, one task per host at a time. The RPC that
        carried them does not wait for this peer's fsync or apply, so the sender's next
        messages (to this or another tablet on the server) are not held behind them, and
        messages that queue up meanwhile share one log sync (a follower's group commit)."""
        with self._inbox_lock:
            for m in msgs:
                size = _entry_bytes(m)
                if size and self._inbox_bytes + size > MAX_INBOX_BYTES:
                    # the replica is behind on what it has queued: drop, as a congested
                    # network would (the leader sends again from the acked index), rather
                    # than queueing copies of the entries without bound
                    self.inbox_dropped += 1
                    continue
                self._inbox_bytes += size
                self._inbox.append(m)
            if self._draining or not self._inbox:
                return
            self._draining = True
        try:
            executor.submit(self._drain)
        except RuntimeError:  # the executor is shut down: the server is stopping
            with self._inbox_lock:
                self._inbox.clear()
                self._draining = False

    def _drain(self) -> None:
        while True:
            with self._inbox_lock:
                msgs, self._inbox = self._inbox, []
                self._inbox_bytes = 0
                if not msgs:
                    self._draining = False
                    return
            try:
                self.step_many(msgs)
            except ReplicaFailed:
                pass  # logged once, at CRITICAL, by `fail`; the peer steps nothing more
            except Exception:  # noqa: BLE001 - lossy like the network: Raft resends
                log.exception("%s: stepping %d messages failed", self.group_id, len(msgs))

    def tick(self) -> None:
        with self.lock:
            if self.stopped:
                return
            try:
                self.raft.tick()
            except (AssertionError, errors.Corruption) as e:
                raise self.fail(SAFETY_VIOLATION, e) from e
            except errors.IOFailure as e:  # a new leader's NO_OP, an idle leader's
                raise self.fail(DISK_FAILED, e) from e
            self.process()

    def io_guard(self):
        """A context for the caller's own calls into Raft that may append (proposals,
        snapshot barriers, configuration changes, campaigns): a failed disk fails this peer
        (`DISK_FAILED`) and raises ReplicaFailed instead. Caller holds self.lock."""
        return _IoGuard(self)

    # -- the Ready loop ------------------------------------------------------------------------
    def process(self) -> None:
        """Drain ready() (caller holds self.lock). A failed disk (the log's sync, the
        metadata's save) fails the peer: ReplicaFailed."""
        try:
            self._process()
        except errors.IOFailure as e:
            raise self.fail(DISK_FAILED, e) from e

    def _process(self) -> None:
        for _ in range(100):
            rd = self.raft.ready()
            storage = self.storage
            lagging = storage.durable_index < storage.last_index
            # A follower or candidate syncs before it answers (an ack or a vote must not
            # outlive a crash that forgot it); a leader's own appends are synced in the
            # background while its AppendEntries are already on their way (Raft thesis
            # §10.2.1): the leader counts itself towards a majority only once durable.
            inline = rd.sync_log or (lagging and not self.raft.is_leader)
            if rd.empty() and not inline:
                break
            if rd.metadata is not None:
                try:
                    self.cmeta_store.save(rd.metadata)
                except OSError as e:  # a vote or term must not be sent unsaved, ever
                    raise self.fail(DISK_FAILED, e) from e
            if inline:
                storage.sync()
                self.raft.log_synced()
            for m in rd.messages:
                self.transport.send(self._addr_of(m.dest), self.group_id, m)
            if rd.committed:
                try:
                    self.apply_entries(rd.committed)
                except Exception as e:  # noqa: BLE001 - the state machine may be half-applied
                    raise self.fail(APPLY_FAILED, e, f"entries {rd.committed[0].index}.."
                                    f"{rd.committed[-1].index}") from e
            for req in rd.copy_requests:
                self.on_copy_request(req)
        if self.raft.is_leader and self.storage.durable_index < self.storage.last_index:
            self._sync_in_background()
        self.after_process()

    def _sync_in_background(self) -> None:
        """Start the leader's log sync thread unless it runs (caller holds self.lock)."""
        if self._syncing or self.stopped:
            return
        self._syncing = True
        threading.Thread(target=self._sync_loop, daemon=True,
                         name=f"log-sync-{self.group_id[:8]}").start()

    def _sync_loop(self) -> None:
        """Sync the log outside the lock until it is durable, a group of appends per fsync
        (Kudu's log appender thread); each sync may commit (`log_synced`)."""
        failed = False
        try:
            while True:
                with self.lock:
                    s = self.storage
                    if self.stopped or s.durable_index >= s.last_index:
                        return
                    epoch = s.sync_begin()
                try:
                    index = s.sync_run()
                except errors.IOFailure as e:
                    # the disk failed (fail-stop: the log refuses every later sync):
                    # this peer stops for good, handing leadership over first
                    failed = True
                    with self.lock:
                        if not self.stopped:
                            self.fail(DISK_FAILED, e)
                    return
                except (OSError, ValueError) as e:
                    # closed underneath us (stopping), or a failing disk: the next
                    # process() starts another try; nothing is counted durable meanwhile
                    failed = True
                    log.warning("%s: log sync failed: %s", self.group_id, e)
                    return
                with self.lock:
                    if self.stopped:
                        return
                    if s.sync_done(index, epoch):
                        self.raft.log_synced()
                        try:
                            self.process()
                        except ReplicaFailed:
                            return  # logged once, at CRITICAL, by `fail`
        finally:
            with self.lock:
                self._syncing = False
                if not failed and self.raft.is_leader and \
                        self.storage.durable_index < self.storage.last_index:
                    self._sync_in_background()  # appended after the last check

    def _addr_of(self, uuid: str) -> str:
        p = self.raft.config.peer(uuid) or self.raft.committed_config.peer(uuid)
        if p is not None and p.addr:
            return p.addr
        return self.resolve_addr(uuid)

    # -- for subclasses ----------------------------------------------------------------------
    def apply_entries(self, entries: list[LogEntry]) -> None:
        raise NotImplementedError

    def on_copy_request(self, req) -> None:
        log.warning("%s: tablet copy requested by %s, not implemented", self.group_id, req.src)

    def after_process(self) -> None:
        pass

    def on_failed(self) -> None:
        """Called once, under the lock, after `fail` stopped this peer."""

    # -- failure -------------------------------------------------------------------------------
    def fail(self, what: str, exc: BaseException, detail: str = "") -> ReplicaFailed:
        """Stop this peer for good (see the module docstring): `what` names the kind
        (SAFETY_VIOLATION, APPLY_FAILED, or a subclass's, e.g. a failed tablet copy install).
        Logs at CRITICAL with the traceback; returns the error for the caller to raise.
        Idempotent (the first reason is kept). Caller holds self.lock."""
        if self.failed is None:
            where = f" ({detail})" if detail else ""
            self.failed = f"{what}{where}: {type(exc).__name__}: {exc}"
            self.stopped = True
            try:
                handover = self.raft.abdicate()
                if handover is not None:
                    self.transport.send(self._addr_of(handover.dest), self.group_id,
                                        handover)
            except Exception:  # noqa: BLE001 - the others elect after a timeout anyway
                log.exception("%s: handing leadership over", self.group_id)
            log.critical("%s: replica %s stopped for good: %s", self.group_id, self.uuid,
                         self.failed, exc_info=exc)
            try:
                self.on_failed()
            except Exception:  # noqa: BLE001 - the peer is stopped either way
                log.exception("%s: on_failed hook", self.group_id)
        return ReplicaFailed(f"replica {self.uuid} of {self.group_id} has failed: "
                             f"{self.failed}")

    # -- status --------------------------------------------------------------------------------
    @property
    def role(self) -> str:
        r = self.raft.role
        if r == Role.LEADER:
            return "LEADER"
        return "LEARNER" if self.raft.member_type() == "LEARNER" else "FOLLOWER"

    def status(self) -> dict:
        with self.lock:
            return {"role": self.role, "term": self.raft.term, "leader": self.raft.leader_uuid,
                    "commit_index": self.raft.commit_index,
                    "first_index": self.storage.first_index,
                    "last_index": self.storage.last_index,
                    "applied_index": self.raft.last_applied,
                    "member_type": self.raft.member_type(),
                    # the active configuration (the latest in the log, maybe uncommitted)
                    "peers": [p.uuid for p in self.raft.config.peers],
                    # the committed one and the index of the entry that set it (0: the
                    # initial configuration): what the master records (master.py)
                    "committed_config_index": self.raft.committed_config.opid_index,
                    "committed_peers": [p.uuid for p in self.raft.committed_config.peers]}

    def close(self) -> None:
        with self.lock:
            self.stopped = True
            self.storage.close()
