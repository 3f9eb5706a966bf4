"""RaftConsensus: one tablet replica's Raft node, as a pure state machine (no I/O inside).

The node is driven by its host (a tablet server, or the simulator) through four inputs

    step(message)   a message from a peer            tick()        one unit of logical time
    propose(type, body) -> LogEntry (leader only)    install_tablet_copy(...)

and one output, `ready()`, which hands over everything the inputs produced:

    Ready.metadata   new ConsensusMetadata (term, vote, committed config) to store durably
    Ready.sync_log   the log must be synced (then call `log_synced()`)
    Ready.messages   to send, *after* the two above are durable (a vote or an ack must never
                     outlive a crash that forgot it)
    Ready.committed  entries to apply, in index order, with the leader's timestamps
    Ready.copy_requests  StartTabletCopy from a leader: the host copies the tablet from it
                     and calls install_tablet_copy

The log itself is behind `LogStorage` (appends reach the OS or memory; durability is the
host's `sync`), the clock is an injected `engine.clock.Clock`, monotonic time (leases) an
injected function, randomness an injected `random.Random`: the same code runs in a tablet
server and, deterministically, in the simulator (engine/consensus/simulation.py).

Roles:

      timeout, voter    pre-vote majority         vote majority
    FOLLOWER ------> PRE_CANDIDATE ------> CANDIDATE ------> LEADER
       ^  ^______________|  refused/timeout   |                |
       |_____________________________________|________________|
            higher term, AppendEntries of this term, lost quorum, transfer

- **Pre-vote** (Kudu's pre-election): a candidate first asks whether it *would* win term+1
  without changing anyone's term, so a node back from a partition cannot depose a healthy
  leader. Voters that heard from a leader within the minimum election timeout refuse (leader
  stickiness) unless the request is a leadership transfer; see Leader leases for exactly
  when (and for why a node does not campaign within that time either).
- **Election timeouts** are randomized in [T, (2 + backoff) T) from the injected RNG, with a
  backoff that grows after failed elections (paper §3.3, improvement 1).
- **Leader**: appends a NO_OP of its term first (entries of earlier terms commit only
  through it); replicates with AppendEntries batching up to `max_batch_entries` (and
  `max_batch_bytes` of bodies, but at least one entry) per message
  and pipelining up to `max_inflight` batches per peer; commits the majority-replicated
  index only if that entry is of its own term (counting its own *durable* log: the leader's
  local write is not on the commit path, paper §3.3); steps down when no majority answered
  within an election timeout (check-quorum); hands over leadership on request
  (`transfer_leadership`: wait for the target to catch up, send TimeoutNow, refuse writes;
  if the target has not taken over after an election timeout the transfer is dropped, and
  the leader steps down if a TimeoutNow had left, see Leader leases).
- **Follower**: checks `prev` (index and term), cuts a divergent suffix (never a committed
  entry), appends, acks `match_index = prev.index + len(entries)` (what this message
  proves, not its log length). A refused check answers with its last and committed
  indexes; the leader retries from the committed index (paper §3.3, improvement 2).
- **Timestamps** (paper §2.6): the leader stamps each entry with its HybridClock and moves the
  clock past its last log entry when elected, so timestamps increase along the log; every
  replica updates its clock from entries it receives and applies entries with the leader's
  timestamp, so all replicas have the same MVCC history.
- **Safe time**: `safe_time()` is the timestamp of the last applied entry. Entries after it
  have greater timestamps in every future leader's log (those logs contain the applied
  entry), so a snapshot scan at or below it is complete on this replica. It advances with
  the commit index (an idle leader's heartbeat NO_OP keeps it moving, see
  `safe_time_noop_ticks`), not with a leader-propagated lease, which would need bounded
  clock error to stay safe across leader changes.
- **Leader leases** (`lease_valid`, `lease_expiry`): a leader answers reads from its own
  state only while no other leader can exist, without a round trip per read. Every
  AppendEntries carries the leader's monotonic time when it was built (`lease_sent`); the
  follower echoes it (`lease_echo`, in refusals too: it took the sender as its leader
  before checking `prev`). The lease runs until E + `lease_s`, E the majority-th latest
  echo over the voters (the leader counting as now), and

      lease_s = election_timeout_ticks x tick_s x (1 - lease_drift) - lease_margin_ticks x tick_s

  (defaults: 10 x 0.1 s x 0.9 - 0.1 s = 0.8 s). Why no one else leads before it ends: a
  voter processes that message at time P >= E and is *quiet* (`_quiet`: only then does it
  vote, pre-vote or not, or campaign) after more than `election_timeout_ticks` ticks since
  it last heard from a leader. Hosts never tick faster than `tick_s` (each tick waits for
  the next point of a grid `tick_s` apart, and the grid only moves forward:
  tablet_server.py `_tick_loop`; a late tick is not made up for), so that is at least
  T = election_timeout_ticks x tick_s of the voter's monotonic time after P. A new leader
  needs the votes of a majority, which shares a voter with the echoing majority: that
  voter granted no vote before P + T, and the lease ends at E + lease_s < P + T as long as
  no server's monotonic clock runs more than 1/(1 - lease_drift) (about 11%) faster than
  another's: the stated drift bound, far above a quartz clock's 0.01% (it is there for
  virtual machines and scheduling); the margin absorbs timer slop. A process paused
  meanwhile (SIGSTOP, GC) only ticks later, which is safe; a paused leader's lease simply
  lapses (its monotonic clock runs on). The shared voter may be the old leader itself: a
  leader refuses every vote, and after stepping down it is not quiet for T either. Hence:
    - the quiet period counts from *any* message of a current leader and never depends on
      `leader_uuid` being known (a higher-term message clears it); start-up counts as
      "just heard from a leader" (a restarted voter may have acked one just before; a
      replica still at term 0 has acked nothing and is quiet at once, so a new tablet's
      first election is not delayed);
    - a leadership transfer ends the lease when it starts (`transfer_leadership`): the
      target's election is granted regardless of quiet periods; and a TimeoutNow still on
      its way may start it later, so a leader whose transfer lapsed after a TimeoutNow left
      steps down instead of carrying on (no lease of that term could be trusted again);
    - a configuration changes one voter at a time, so the echoing majority (counted over
      the active configuration) meets every electing majority of the old or the new one.
  Reads still wait, as before, until the leader has applied an entry of its own term.
- **Snapshots a new leader cannot undercut** (`snapshot_barrier`, Kudu's KUDU-1188): a
  leader asked to serve a snapshot at `ts` above every entry of its log (Table chose `ts`
  from another tablet, or a client named one) moves its clock past `ts` and appends a
  NO_OP, stamped above `ts`; the host serves once that entry is applied with its term,
  i.e. committed. Every later leader has the NO_OP (leader completeness) and moves its
  clock past its last entry when elected, so its writes are stamped above every snapshot
  served before it. The argument rests on the log's durability and quorum intersection,
  not on clocks, so it survives restarts (a clock value carried by heartbeats and votes
  would not: clocks are not durable, and a voter that restarted forgets what it was told).
  For `ts` at or below the last entry's timestamp the barrier is that entry: once it is
  committed every future leader has it and starts above it.
- **Configuration change** one peer at a time (paper §3.3.1): a configuration takes effect
  when appended; a new change is refused while one is pending or before the leader has
  committed an entry of its term. Peers join as NON_VOTER (learners) and the leader
  promotes one with `promote` once its match index reaches the commit index; a VOTER marked
  `replace` is evicted once no promotion is pending (Kudu's 3-4-3 re-replication). The
  leader cannot remove or demote itself (transfer leadership first).
- **Tablet copy**: a peer whose next entry the leader no longer has gets StartTabletCopy
  (re-sent every election timeout); the host copies the leader's data and log suffix and
  calls `install_tablet_copy`.
- **Votes after a lost log** (`vote_floor`; Kudu's tombstoned replicas vote with their
  last logged op id for the same reason): a replica created again where one of the tablet
  was deleted (a tombstone: data and log gone, term and vote kept) starts with an empty
  log. Voting on that log alone, it would grant a candidate lacking entries the lost log
  had acked - and a lagging candidate may still count it as a voter of an old
  configuration, so the two could elect a leader without a committed entry. The host
  passes the lost log's last op id (or, when unknown, (its term, infinity): no entry of it
  can have a later term) and a candidate must be at least as up to date as that too.
- **Log GC**: `log_gc_bound()` is the lowest index Raft still needs: the all-replicated index
  (or, past `log_retention_entries` of lag, what the tablet-copy threshold allows), never
  above the commit or applied index. The host GCs below min(that, the tablet's own replay
  anchor).
"""

from __future__ import annotations

import dataclasses
import enum
import random
import time
from typing import Callable

from engine import errors
from engine.clock import Clock
from engine.consensus.consensus_metadata import ConsensusMetadata
from engine.consensus.log import CHANGE_CONFIG, NO_OP, LogEntry
from engine.consensus.log_storage import LogStorage
from engine.consensus.messages import (
    AppendEntries,
    AppendResponse,
    MemberType,
    Message,
    OpId,
    RaftConfig,
    RaftPeer,
    StartTabletCopy,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from engine.consensus.peer_message_queue import PeerMessageQueue, PeerProgress


class Role(enum.Enum):
    FOLLOWER = "FOLLOWER"
    PRE_CANDIDATE = "PRE_CANDIDATE"
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"


class NotLeader(errors.ServiceUnavailable):
    """This replica cannot take the request now; `leader_uuid` is its best guess."""

    def __init__(self, msg: str, leader_uuid: str | None = None):
        super().__init__(msg)
        self.leader_uuid = leader_uuid


class ConfigChangeRefused(errors.ServiceUnavailable):
    """A configuration change is pending, or the change is not one-at-a-time."""


@dataclasses.dataclass(frozen=True)
class RaftOptions:
    heartbeat_ticks: int = 1
    election_timeout_ticks: int = 10  # minimum; randomized above it
    max_batch_entries: int = 64
    max_batch_bytes: int = 4 << 20  # entry bodies per AppendEntries (0: no cap); >= 1 entry
    max_inflight: int = 4
    log_retention_entries: int = 10_000  # tablet copy threshold: lag beyond this is not kept
    pre_vote: bool = True
    check_quorum: bool = True
    safe_time_noop_ticks: int = 0  # > 0: an idle leader appends a NO_OP this often
    # Leader leases (module docstring): the host's tick period in seconds (ticks must never
    # come faster than this), the bound on how much faster one server's monotonic clock
    # may run than another's, and a safety margin in ticks.
    tick_s: float = 0.1
    lease_drift: float = 0.1
    lease_margin_ticks: int = 1

    @property
    def lease_s(self) -> float:
        """How long after the send time a majority echoed the leader may serve reads."""
        t = self.election_timeout_ticks * self.tick_s
        return max(0.0, t * (1 - self.lease_drift) - self.lease_margin_ticks * self.tick_s)


@dataclasses.dataclass
class Ready:
    messages: list
    metadata: ConsensusMetadata | None
    sync_log: bool
    committed: list[LogEntry]
    copy_requests: list[StartTabletCopy]

    def empty(self) -> bool:
        return not (self.messages or self.metadata or self.sync_log or self.committed
                    or self.copy_requests)


class RaftConsensus:
    def __init__(self, uuid: str, log: LogStorage, cmeta: ConsensusMetadata, clock: Clock,
                 rng: random.Random, options: RaftOptions | None = None,
                 applied_index: int = 0, monotonic: Callable[[], float] = time.monotonic,
                 vote_floor: OpId | None = None):
        """`cmeta`: the stored ConsensusMetadata (a new replica: term 0, its initial or an
        empty config). `applied_index`: how far the host's state machine is (after a
        restart: what its flushed data covers); entries after it are applied again once
        known to be committed. `monotonic`: seconds, never going back (leader leases).
        `vote_floor`: the last entry a log this replica held before it lost it (a replica
        created again over its tombstone: module docstring, Votes after a lost log)."""
        self.uuid = uuid
        self.vote_floor = vote_floor
        self.log = log
        self.clock = clock
        self._mono = monotonic
        self.rng = rng
        self.opts = options or RaftOptions()
        self.term = cmeta.current_term
        self.voted_for = cmeta.voted_for
        self.role = Role.FOLLOWER
        self.leader_uuid: str | None = None
        assert applied_index >= log.first_index - 1, (applied_index, log.first_index)
        self.commit_index = applied_index
        self.last_applied = applied_index
        self._configs: list[RaftConfig] = [cmeta.committed_config]
        self._scan_configs(max(log.first_index, cmeta.committed_config.opid_index + 1))
        ts = log.timestamp(log.last_index)
        if ts:
            clock.update(ts)
        self._tick = 0
        self._election_elapsed = 0
        self._failed_elections = 0
        # ticks since a leader was heard from. Start-up counts as "just heard": this voter
        # may have acked a leader's message just before it restarted, and that leader's
        # lease may rest on the ack. Term 0: it never acked anything (a term is stored
        # before any answer leaves), so a new tablet's election is not held up.
        self._since_leader = 0 if self.term > 0 else 1 << 30
        self._lease_echo: dict[str, float] = {}  # leader: peer -> latest echoed send time
        self._timeout_now_sent = False  # leader: a TimeoutNow left in this term
        self._heartbeat_elapsed = 0
        self._idle_ticks = 0
        self._votes: dict[str, bool] = {}
        self.queue = PeerMessageQueue(uuid)
        self._transfer_target: str | None = None
        self._transfer_elapsed = 0
        self._all_replicated = 0
        self._outbox: list = []
        self._copy_requests: list[StartTabletCopy] = []
        self._meta_dirty = False
        self._sync_needed = False
        self._reset_election_timeout()

    # -- state -----------------------------------------------------------------------------
    @property
    def config(self) -> RaftConfig:
        """The active configuration: the latest in the log, committed or not."""
        return self._configs[-1]

    @property
    def committed_config(self) -> RaftConfig:
        return self._configs[0]

    @property
    def is_leader(self) -> bool:
        return self.role == Role.LEADER

    def metadata(self) -> ConsensusMetadata:
        return ConsensusMetadata(self.term, self.voted_for, self.committed_config)

    def safe_time(self) -> int:
        """No entry applied from now on has a timestamp <= this (see module docstring)."""
        return self.log.timestamp(self.last_applied) or 0

    def lease_expiry(self) -> float:
        """(Leader) the monotonic time until which no other leader can exist, so reads of
        the local state are linearizable: the majority-th latest send time echoed by the
        voters (the leader counting as now) + `lease_s`. -inf when not leading or while
        handing leadership over."""
        if self.role != Role.LEADER or self._transfer_target is not None:
            return float("-inf")
        voters = self.config.voters()
        sent = sorted((float("inf") if v == self.uuid else self._lease_echo.get(v, float("-inf"))
                       for v in voters), reverse=True)
        base = sent[self.config.majority() - 1] if sent else float("-inf")
        return base + self.opts.lease_s

    def lease_valid(self) -> bool:
        """(Leader) the lease holds now (see `lease_expiry`)."""
        return self._mono() < self.lease_expiry()

    def snapshot_barrier(self, ts: int) -> tuple[int, int]:
        """(Leader) make a snapshot read at `ts` (the host moved the clock past it first)
        safe to serve: returns the (index, term) of the log entry the host must see applied
        with that term before it serves the read. If `ts` is above every entry's timestamp,
        a NO_OP is appended, stamped above `ts`: once it is committed, every future leader
        has it in its log and starts its clock past it, so it never stamps a write at or
        below a snapshot this leader served (module docstring, Snapshots)."""
        if self.role != Role.LEADER:
            raise NotLeader(f"replica {self.uuid} is not the leader", self.leader_uuid)
        if self._transfer_target is not None:
            raise NotLeader(f"replica {self.uuid} is handing leadership over",
                            self._transfer_target)
        last = self.log.last_index
        if ts > (self.log.timestamp(last) or 0):
            self.clock.update(ts)
            last = self._append_local(NO_OP, b"").index
        return last, self.log.term(last)

    def member_type(self) -> str:
        p = self.config.peer(self.uuid)
        if p is None:
            return "NONE"
        return "VOTER" if p.member_type == MemberType.VOTER else "LEARNER"

    # -- host interface --------------------------------------------------------------------
    def ready(self) -> Ready:
        if self.role == Role.LEADER:
            self._replicate()
        committed: list[LogEntry] = []
        if self.commit_index > self.last_applied:
            committed = self.log.entries(self.last_applied + 1, self.commit_index)
            self.last_applied = self.commit_index
        rd = Ready(self._outbox, self.metadata() if self._meta_dirty else None,
                   self._sync_needed, committed, self._copy_requests)
        self._outbox, self._copy_requests = [], []
        self._meta_dirty = self._sync_needed = False
        return rd

    def log_synced(self) -> None:
        """The host synced the log (`log.durable_index` moved): the leader may commit."""
        if self.role == Role.LEADER:
            self._advance_commit()

    def tick(self) -> None:
        self._tick += 1
        self._since_leader += 1
        if self.role == Role.LEADER:
            self._tick_leader()
            return
        self._election_elapsed += 1
        if self._election_elapsed >= self._election_timeout and self._quiet() \
                and self.config.is_voter(self.uuid):
            if self.role != Role.FOLLOWER:
                self._failed_elections += 1
            self._start_election(pre_vote=self.opts.pre_vote)

    def campaign(self) -> bool:
        """Start a (pre-)election now instead of at the election timeout, if this voter
        knows no leader and is not already a candidate (a new tablet's designated first
        replica; a sole voter after a restart). True if an election was started. Safe at
        any time for Raft's safety; not within the lease quiet period (`_quiet`), except
        for a sole voter, whose only possible lease holder is its own earlier
        incarnation."""
        if self.role in (Role.LEADER, Role.CANDIDATE) or self.leader_uuid is not None \
                or not self.config.is_voter(self.uuid):
            return False
        if not self._quiet() and self.config.voters() != [self.uuid]:
            return False
        self._start_election(pre_vote=self.opts.pre_vote)
        return True

    def propose(self, type_: int, body: bytes) -> LogEntry:
        """Append an op as leader; it is replicated at the next `ready()`. Returns the entry
        (term, index and the leader's timestamp): the op is done when an entry with that
        index *and term* is applied."""
        if self.role != Role.LEADER:
            raise NotLeader(f"replica {self.uuid} is not the leader", self.leader_uuid)
        if self._transfer_target is not None:
            raise NotLeader(f"replica {self.uuid} is handing leadership over",
                            self._transfer_target)
        return self._append_local(type_, body)

    def step(self, m: Message) -> None:
        if m.dest != self.uuid:
            return
        if isinstance(m, VoteRequest):
            self._on_vote_request(m)
            return
        if m.term > self.term:
            if not (isinstance(m, VoteResponse) and m.pre_vote and m.granted):
                leader = m.src if isinstance(m, (AppendEntries, StartTabletCopy)) else None
                self._become_follower(m.term, leader)
        elif m.term < self.term:
            if isinstance(m, AppendEntries):  # tell a stale leader about the new term
                self._send(AppendResponse(self.uuid, m.src, self.term, False, 0,
                                          self.log.last_index, self.commit_index))
            return
        match m:
            case AppendEntries():
                self._on_append(m)
            case AppendResponse():
                self._on_append_response(m)
            case VoteResponse():
                self._on_vote_response(m)
            case TimeoutNow():
                if self.role != Role.LEADER and self.config.is_voter(self.uuid):
                    self._start_election(pre_vote=False, transfer=True)
            case StartTabletCopy():
                if self.role != Role.LEADER:
                    self.leader_uuid = m.src
                    self._copy_requests.append(m)

    # -- elections -------------------------------------------------------------------------
    def _reset_election_timeout(self) -> None:
        t = self.opts.election_timeout_ticks
        spread = t * (1 + min(self._failed_elections, 3))
        self._election_timeout = t + self.rng.randrange(spread)
        self._election_elapsed = 0

    def _become_follower(self, term: int, leader: str | None) -> None:
        if self.role == Role.LEADER:
            # our own lease may run until now + lease_s: vote for nobody before it ended
            self._since_leader = 0
        if term > self.term:
            self.term = term
            self.voted_for = None
            self._meta_dirty = True
        self.role = Role.FOLLOWER
        self.leader_uuid = leader
        self._transfer_target = None
        self._votes = {}
        self._reset_election_timeout()

    def _start_election(self, pre_vote: bool, transfer: bool = False) -> None:
        self.leader_uuid = None
        self._votes = {self.uuid: True}
        if pre_vote:
            self.role = Role.PRE_CANDIDATE
            term = self.term + 1
        else:
            self.role = Role.CANDIDATE
            self.term += 1
            self.voted_for = self.uuid
            self._meta_dirty = True
            term = self.term
        self._reset_election_timeout()
        if self._tally():
            return
        last = OpId(self.log.last_term, self.log.last_index)
        for v in self.config.voters():
            if v != self.uuid:
                self._send(VoteRequest(self.uuid, v, term, last, pre_vote, transfer))

    def _tally(self) -> bool:
        """Count votes; act on a decided election. True if decided."""
        voters = self.config.voters()
        granted = sum(1 for v in voters if self._votes.get(v) is True)
        refused = sum(1 for v in voters if self._votes.get(v) is False)
        need = self.config.majority()
        if granted >= need:
            if self.role == Role.PRE_CANDIDATE:
                self._start_election(pre_vote=False)
            else:
                self._become_leader()
            return True
        if refused > len(voters) - need:
            self._become_follower(self.term, None)
            return True
        return False

    def _log_up_to_date(self, last: OpId) -> bool:
        """Whether a candidate whose log ends at `last` may have this voter's (pre-)vote:
        its log is at least as up to date as ours - and as the log we lost, if we lost
        one (`vote_floor`)."""
        ours = (self.log.last_term, self.log.last_index)
        if self.vote_floor is not None:
            ours = max(ours, (self.vote_floor.term, self.vote_floor.index))
        return (last.term, last.index) >= ours

    def _quiet(self) -> bool:
        """More than a minimum election timeout of ticks since this node last heard from a
        leader (or was one, or started): only then may it vote, or campaign, without
        breaking a lease (module docstring, Leader leases)."""
        return self._since_leader > self.opts.election_timeout_ticks

    def _on_vote_request(self, m: VoteRequest) -> None:
        # Not `leader_uuid is not None`: a message of a higher term clears it and a restart
        # forgets it, yet the lease of the leader we last heard from still runs.
        sticky = self.role == Role.LEADER or not self._quiet()
        if sticky and not m.transfer:
            self._send(VoteResponse(self.uuid, m.src, self.term, False, m.pre_vote))
            return
        if m.pre_vote:
            grant = m.term > self.term and self._log_up_to_date(m.last_log)
            self._send(VoteResponse(self.uuid, m.src, m.term if grant else self.term, grant,
                                    True))
            return
        if m.term < self.term:
            self._send(VoteResponse(self.uuid, m.src, self.term, False))
            return
        if m.term > self.term:
            self._become_follower(m.term, None)
        grant = self._may_vote_for(m.src) and self._log_up_to_date(m.last_log)
        if grant:
            self.voted_for = m.src
            self._meta_dirty = True
            self._election_elapsed = 0
        self._send(VoteResponse(self.uuid, m.src, self.term, grant))

    def _may_vote_for(self, candidate: str) -> bool:
        return self.voted_for is None or self.voted_for == candidate

    def _on_vote_response(self, m: VoteResponse) -> None:
        if m.pre_vote:
            if self.role != Role.PRE_CANDIDATE or (m.granted and m.term != self.term + 1):
                return
        elif self.role != Role.CANDIDATE or m.term != self.term:
            return
        self._votes.setdefault(m.src, m.granted)
        self._tally()

    def _become_leader(self) -> None:
        self.role = Role.LEADER
        self.leader_uuid = self.uuid
        self._votes = {}
        self._failed_elections = 0
        self._heartbeat_elapsed = 0
        self._idle_ticks = 0
        self._transfer_target = None
        self._lease_echo = {}
        self._timeout_now_sent = False
        self.clock.update(self.log.timestamp(self.log.last_index) or 0)
        self.queue.reset(self.config, self.log.last_index + 1, self._tick)
        self._append_local(NO_OP, b"")
        self._broadcast(heartbeat=True)

    # -- leader ----------------------------------------------------------------------------
    def _append_local(self, type_: int, body: bytes) -> LogEntry:
        e = LogEntry(self.term, self.log.last_index + 1, self.clock.now(), type_, body)
        self.log.append([e])
        self._idle_ticks = 0
        if type_ == CHANGE_CONFIG:
            self._configs.append(RaftConfig.decode(body, e.index))
            self.queue.track(self.config, e.index, self._tick)
        return e

    def _tick_leader(self) -> None:
        t = self.opts.election_timeout_ticks
        if self.opts.check_quorum and self._tick % t == 0:
            if self.queue.live_voters(self.config, self._tick - t) < self.config.majority():
                self._become_follower(self.term, None)  # lost the majority: step down
                return
        if self._transfer_target is not None:
            self._transfer_elapsed += 1
            if self._transfer_elapsed > t:
                self._transfer_target = None  # the target did not take over
                if self._timeout_now_sent:
                    # A TimeoutNow still on its way may start an election that voters grant
                    # regardless of their quiet period: no lease of this term is safe any
                    # more, and a leader without one cannot serve reads. Step down; the
                    # next election (after the quiet period) picks a leader afresh.
                    self._become_follower(self.term, None)
                    return
        self._idle_ticks += 1
        n = self.opts.safe_time_noop_ticks
        if n and self._idle_ticks >= n and self._transfer_target is None:
            self._append_local(NO_OP, b"")
        self._heartbeat_elapsed += 1
        if self._heartbeat_elapsed >= self.opts.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            self._broadcast(heartbeat=True)

    def _broadcast(self, heartbeat: bool) -> None:
        stale = max(2 * self.opts.heartbeat_ticks, self.opts.election_timeout_ticks // 2)
        for uuid, p in self.queue.peers.items():
            if p.inflight and self._tick - p.last_ack_tick >= stale:
                # nothing came back for a while: assume the batches in flight were lost
                # and probe again from the match index
                p.next_index, p.inflight, p.probing = p.match_index + 1, 0, True
            self._send_append(uuid, p, heartbeat)

    def _replicate(self) -> None:
        """Send pending entries to every peer with room in its pipeline."""
        for uuid, p in self.queue.peers.items():
            limit = 1 if p.probing else self.opts.max_inflight
            while p.next_index <= self.log.last_index and p.inflight < limit:
                if not self._send_append(uuid, p, False):
                    break

    def _send_append(self, uuid: str, p: PeerProgress, heartbeat: bool) -> bool:
        """Send the batch at p.next_index (or, as a heartbeat while batches are in flight,
        an empty message after the match index). True if entries were sent."""
        log = self.log
        if p.next_index < log.first_index:
            # The peer needs entries GC'd here: ask it to copy the tablet, and keep probing
            # (empty, at our log's start) so we learn when the copy is in place.
            if p.copy_sent_tick is None or \
                    self._tick - p.copy_sent_tick >= self.opts.election_timeout_ticks:
                p.copy_sent_tick = self._tick
                self._send(StartTabletCopy(self.uuid, uuid, self.term))
            if not heartbeat:
                return False
            prev, entries = log.first_index - 1, ()
        elif heartbeat and p.inflight and p.match_index >= log.first_index - 1:
            prev, entries = p.match_index, ()
        else:
            if not heartbeat and p.next_index > log.last_index:
                return False
            hi = min(log.last_index, p.next_index + self.opts.max_batch_entries - 1)
            entries = tuple(log.entries(p.next_index, hi)) if hi >= p.next_index else ()
            cap = self.opts.max_batch_bytes
            if cap and len(entries) > 1:
                size, n = 0, 0
                for e in entries:  # at least one entry, however large
                    size += len(e.body)
                    if n and size > cap:
                        break
                    n += 1
                entries = entries[:n]
            prev = p.next_index - 1
        self._send(AppendEntries(self.uuid, uuid, self.term, OpId(log.term(prev), prev),
                                 entries, self.commit_index,
                                 self.queue.all_replicated(log.durable_index), self._mono()))
        if entries:
            p.next_index = entries[-1].index + 1
            p.inflight += 1
        return bool(entries)

    def _on_append_response(self, m: AppendResponse) -> None:
        if self.role != Role.LEADER:
            return
        p = self.queue.peers.get(m.src)
        if p is None:
            return
        p.last_ack_tick = self._tick
        if m.lease_echo > self._lease_echo.get(m.src, 0.0):
            # (a refusal echoes too: the follower took us as its leader before checking prev)
            self._lease_echo[m.src] = m.lease_echo
        if m.success:
            if m.match_index >= p.match_index:
                p.match_sent = max(p.match_sent, m.lease_echo)
            p.match_index = max(p.match_index, m.match_index)
            p.next_index = max(p.next_index, p.match_index + 1)
            p.inflight = max(0, p.inflight - 1)
            p.probing = False
            p.copy_sent_tick = None
            self._advance_commit()
            if self._transfer_target == m.src and p.match_index == self.log.last_index:
                self._send_timeout_now(m.src)
            self._maybe_change_membership()
            return
        if m.last_index < p.match_index and m.lease_echo > p.match_sent:
            # A refusal of a message built after the one it last acked, from a log shorter
            # than what it acked: the peer lost it - its replica was deleted and created
            # again empty (a tombstone, engine/tserver/tablet_server.py). Feed it from
            # where its log ends, or else it is probed at match + 1 forever and never
            # catches up. Its match index stays: what it acked counted once, and its
            # vote floor keeps that safe. (An older refusal, overtaken by the ack, is
            # not this and changes nothing.)
            p.next_index = min(m.retry_index, p.next_index)
        else:
            p.next_index = max(min(m.retry_index, p.next_index), p.match_index + 1)
        p.inflight = 0
        p.probing = True
        self._send_append(m.src, p, False)  # entries at once; a bare probe waits a heartbeat

    def _advance_commit(self) -> None:
        n = self.queue.majority_replicated(self.config, self.log.durable_index)
        if n > self.commit_index and self.log.term(n) == self.term:
            self._set_commit(n)

    def _set_commit(self, n: int) -> None:
        self.commit_index = n
        while len(self._configs) > 1 and self._configs[1].opid_index <= n:
            self._configs.pop(0)
            self._meta_dirty = True  # the committed config moved

    def _maybe_change_membership(self) -> None:
        """Promote a caught-up learner; evict a replaced voter (3-4-3)."""
        if len(self._configs) > 1 or self.log.term(self.commit_index) != self.term:
            return
        cfg = self.config
        for peer in cfg.peers:
            if peer.member_type == MemberType.NON_VOTER and peer.promote:
                p = self.queue.peers.get(peer.uuid)
                if p is not None and p.match_index >= self.commit_index:
                    self._change_config(tuple(
                        dataclasses.replace(q, member_type=MemberType.VOTER, promote=False)
                        if q.uuid == peer.uuid else q for q in cfg.peers))
                return  # promotions first
        for peer in cfg.peers:
            if peer.replace and peer.member_type == MemberType.VOTER and peer.uuid != self.uuid:
                self._change_config(tuple(q for q in cfg.peers if q.uuid != peer.uuid))
                return

    # -- configuration change (leader API) ---------------------------------------------------
    def add_peer(self, uuid: str, member_type: MemberType = MemberType.NON_VOTER,
                 promote: bool = True, addr: str = "") -> LogEntry:
        if self.config.peer(uuid) is not None:
            raise errors.AlreadyPresent(f"peer {uuid} is already in the configuration")
        return self._propose_config(self.config.peers + (
            RaftPeer(uuid, member_type, promote and member_type == MemberType.NON_VOTER,
                     addr=addr),))

    def remove_peer(self, uuid: str) -> LogEntry:
        if self.config.peer(uuid) is None:
            raise errors.NotFound(f"peer {uuid} is not in the configuration")
        return self._propose_config(tuple(p for p in self.config.peers if p.uuid != uuid))

    def replace_peer(self, old: str, new: str, addr: str = "") -> LogEntry:
        """3-4-3: add `new` as a learner to promote, mark `old` to evict once it is in."""
        if self.config.peer(old) is None:
            raise errors.NotFound(f"peer {old} is not in the configuration")
        if self.config.peer(new) is not None:
            raise errors.AlreadyPresent(f"peer {new} is already in the configuration")
        return self._propose_config(tuple(
            dataclasses.replace(p, replace=True) if p.uuid == old else p
            for p in self.config.peers) + (RaftPeer(new, MemberType.NON_VOTER, True,
                                                    addr=addr),))

    def _propose_config(self, peers: tuple[RaftPeer, ...]) -> LogEntry:
        if self.role != Role.LEADER or self._transfer_target is not None:
            raise NotLeader(f"replica {self.uuid} is not the leader", self.leader_uuid)
        if len(self._configs) > 1:
            raise ConfigChangeRefused("a configuration change is already pending")
        if self.log.term(self.commit_index) != self.term:
            raise ConfigChangeRefused("the leader has not committed an entry of its term yet")
        return self._change_config(peers)

    def _change_config(self, peers: tuple[RaftPeer, ...]) -> LogEntry:
        old = set(self.config.voters())
        new = {p.uuid for p in peers if p.member_type == MemberType.VOTER}
        if len(old ^ new) > 1:
            raise ConfigChangeRefused("voters may change one at a time")
        if self.uuid not in new:
            raise ConfigChangeRefused("the leader cannot remove or demote itself; "
                                      "transfer leadership first")
        return self._append_local(CHANGE_CONFIG, RaftConfig(0, peers).encode())

    def transfer_leadership(self, target: str | None = None) -> str:
        """Hand leadership to `target` (default: the most caught-up voter); writes are
        refused until it took over or an election timeout passed."""
        if self.role != Role.LEADER:
            raise NotLeader(f"replica {self.uuid} is not the leader", self.leader_uuid)
        voters = [v for v in self.config.voters() if v != self.uuid and v in self.queue.peers]
        if target is None:
            if not voters:
                raise errors.InvalidArgument("no other voter to transfer leadership to")
            target = max(voters, key=lambda v: (self.queue.peers[v].match_index, v))
        elif target not in voters:
            raise errors.InvalidArgument(f"{target} is not a voter of this tablet")
        self._transfer_target = target
        self._transfer_elapsed = 0
        if self.queue.peers[target].match_index == self.log.last_index:
            self._send_timeout_now(target)
        return target

    def abdicate(self) -> TimeoutNow | None:
        """(For a host stopping this peer for good, e.g. its disk failed.) Stop leading:
        become a follower of this term and return a TimeoutNow for the most caught-up
        other voter, which starts an election at once (no pre-vote, past stickiness)
        instead of after an election timeout; None if this peer does not lead or has no
        other voter. The caller sends it itself (it will not drain `ready()` again) and
        must not feed this node anything more: its lease ends here, as with a transfer."""
        if self.role != Role.LEADER:
            return None
        voters = [v for v in self.config.voters() if v != self.uuid and v in self.queue.peers]
        self._become_follower(self.term, None)
        if not voters:
            return None
        target = max(voters, key=lambda v: (self.queue.peers[v].match_index, v))
        return TimeoutNow(self.uuid, target, self.term)

    def _send_timeout_now(self, target: str) -> None:
        self._timeout_now_sent = True
        self._send(TimeoutNow(self.uuid, target, self.term))

    # -- follower --------------------------------------------------------------------------
    def _on_append(self, m: AppendEntries) -> None:
        if self.role != Role.FOLLOWER:
            self._become_follower(self.term, m.src)
        self.leader_uuid = m.src
        self._election_elapsed = 0
        self._since_leader = 0
        self._failed_elections = 0
        log = self.log
        prev, entries = m.prev, m.entries
        if prev.index > log.last_index:
            self._refuse(m, log.last_index + 1)  # short of `prev`
            return
        base = log.first_index - 1
        if prev.index < base:
            # Entries up to `base` are committed (GC'd or installed by a tablet copy): they
            # match the leader's. Skip those of the message.
            entries = tuple(e for e in entries if e.index > base)
            prev = OpId(log.term(base), base)
        elif log.term(prev.index) != prev.term:
            self._refuse(m, self.commit_index + 1)  # divergent: back to what is committed
            return
        verified = m.prev.index + len(m.entries)
        new = []
        for i, e in enumerate(entries):
            t = log.term(e.index) if e.index <= log.last_index else None
            if t is None:
                new = list(entries[i:])
                break
            if t != e.term:
                assert e.index > self.commit_index, \
                    f"{self.uuid}: leader {m.src} overwrites committed entry {e.index}"
                new = list(entries[i:])
                break
        if new:
            if new[0].index <= log.last_index:
                self._configs = [c for c in self._configs
                                 if c.opid_index < new[0].index] or self._configs[:1]
            log.append(new)
            self.clock.update(new[-1].timestamp)
            for e in new:
                if e.type == CHANGE_CONFIG:
                    self._configs.append(RaftConfig.decode(e.body, e.index))
        commit = min(m.committed_index, verified)
        if commit > self.commit_index:
            self._set_commit(commit)
        self._all_replicated = max(self._all_replicated, min(m.all_replicated_index, verified))
        if verified > log.durable_index:
            self._sync_needed = True
        self._send(AppendResponse(self.uuid, m.src, self.term, True, verified, log.last_index,
                                  self.commit_index, lease_echo=m.lease_sent))

    def _refuse(self, m: AppendEntries, retry_index: int) -> None:
        self._send(AppendResponse(self.uuid, m.src, self.term, False, 0, self.log.last_index,
                                  self.commit_index, retry_index, m.lease_sent))

    # -- tablet copy, GC -------------------------------------------------------------------
    def install_tablet_copy(self, last: OpId, timestamp: int, committed_config: RaftConfig,
                            suffix: list[LogEntry], source_term: int) -> bool:
        """Replace this replica's log by a copy taken from a leader of `source_term`: its
        data reflects every op up to `last` (at `timestamp`); `suffix` is its log after.
        Refused (False) if stale: from an older term, or not ahead of our commit index."""
        if source_term < self.term or last.index <= self.commit_index:
            return False
        if source_term > self.term:
            self._become_follower(source_term, None)
        self.log.reset(last.index, last.term, timestamp)
        self.log.append(list(suffix))
        if suffix:
            self.clock.update(suffix[-1].timestamp)
        self.clock.update(timestamp)
        self.commit_index = self.last_applied = last.index
        self._configs = [committed_config]
        self._scan_configs(committed_config.opid_index + 1)
        self._meta_dirty = True
        self._sync_needed = True
        return True

    def _scan_configs(self, lo: int) -> None:
        lo = max(lo, self.log.first_index)
        if lo <= self.log.last_index:
            for e in self.log.entries(lo, self.log.last_index):
                if e.type == CHANGE_CONFIG:
                    self._configs.append(RaftConfig.decode(e.body, e.index))

    def log_gc_bound(self) -> int:
        """Raft needs the log from this index on (see module docstring)."""
        if self.role == Role.LEADER:
            low = self.queue.all_replicated(self.log.durable_index) + 1
        else:
            low = self._all_replicated + 1
        low = max(low, self.log.last_index + 1 - self.opts.log_retention_entries)
        return min(low, self.commit_index + 1, self.last_applied + 1)

    # -- plumbing --------------------------------------------------------------------------
    def _send(self, m: Message) -> None:
        self._outbox.append(m)
