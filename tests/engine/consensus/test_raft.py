"""RaftConsensus scenario by scenario, with a small synchronous harness (no simulator).

The harness hosts nodes over MemoryLogStorage the way a real host must (metadata stored and
log synced before messages leave) and delivers messages in FIFO order, optionally dropping
those across a cut. Each test drives one rule of engine/consensus/raft.py's docstring:
elections and the NO_OP, pre-vote keeping a rejoining node from disrupting the leader (and
the same scenario without pre-vote bumping the term, to show what pre-vote buys),
check-quorum step-down, leadership transfer, divergent-suffix truncation, leader
timestamps and safe time, votes persisted before they are sent, one-at-a-time config
change with learner promotion and 3-4-3 replacement, tablet copy when the log was GC'd.
"""

from __future__ import annotations

import random

import pytest

from engine import errors
from engine.clock import LogicalClock
from engine.consensus.consensus_metadata import ConsensusMetadata, MemoryMetadataStore
from engine.consensus.log import CHANGE_CONFIG, NO_OP, WRITE
from engine.consensus.log_storage import MemoryLogStorage
from engine.consensus.messages import (
    MemberType,
    OpId,
    RaftConfig,
    RaftPeer,
    StartTabletCopy,
    VoteRequest,
    VoteResponse,
)
from engine.consensus.raft import (
    ConfigChangeRefused,
    NotLeader,
    RaftConsensus,
    RaftOptions,
    Role,
)

OPTS = RaftOptions(heartbeat_ticks=1, election_timeout_ticks=10, max_batch_entries=4,
                   max_inflight=2, log_retention_entries=5)


class Host:
    def __init__(self, cluster: "Cluster", uuid: str, config: RaftConfig, opts: RaftOptions,
                 seed: int):
        self.uuid = uuid
        self.log = MemoryLogStorage()
        self.meta = MemoryMetadataStore(ConsensusMetadata(0, None, config))
        self.clock = LogicalClock()
        self.node = RaftConsensus(uuid, self.log, self.meta.load(), self.clock,
                                  random.Random(seed), opts)
        self.applied: list = []
        self.copy_requests: list[StartTabletCopy] = []
        self.readies: list = []


class Cluster:
    def __init__(self, n: int = 3, opts: RaftOptions = OPTS, seed: int = 1):
        config = RaftConfig(0, tuple(RaftPeer(f"n{i}") for i in range(n)))
        self.opts = opts
        self.hosts = {f"n{i}": Host(self, f"n{i}", config, opts, seed * 100 + i)
                      for i in range(n)}
        self.queue: list = []
        self.cut: set[str] = set()  # isolated nodes

    def add(self, uuid: str) -> Host:
        h = Host(self, uuid, RaftConfig(0, ()), self.opts, 999)
        self.hosts[uuid] = h
        return h

    def drive(self, h: Host) -> None:
        while True:
            rd = h.node.ready()
            if rd.empty():
                return
            h.readies.append(rd)
            if rd.metadata is not None:
                h.meta.save(rd.metadata)
            if rd.sync_log:
                h.log.sync()
            h.log.sync()  # the tests' leaders sync at once too
            h.node.log_synced()
            self.queue.extend(rd.messages)
            h.applied.extend(rd.committed)
            h.copy_requests.extend(rd.copy_requests)

    def deliver(self) -> None:
        budget = 20_000  # a message storm (two nodes answering each other forever) fails
        while self.queue:
            budget -= 1
            assert budget, "message storm: delivery never quiesced"
            m = self.queue.pop(0)
            if m.src in self.cut or m.dest in self.cut or m.dest not in self.hosts:
                continue
            h = self.hosts[m.dest]
            h.node.step(m)
            self.drive(h)

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            for h in self.hosts.values():
                h.node.tick()
                self.drive(h)
            self.deliver()

    def leaders(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.node.role == Role.LEADER]

    def leader(self) -> Host:
        for _ in range(200):
            ls = [h for h in self.leaders() if h.uuid not in self.cut]
            if len(ls) == 1:
                return ls[0]
            self.tick()
        raise AssertionError("no leader")

    def propose(self, value: bytes) -> tuple[Host, object]:
        h = self.leader()
        e = h.node.propose(WRITE, value)
        self.drive(h)
        self.deliver()
        return h, e


def test_elects_one_leader_whose_noop_commits_first():
    c = Cluster()
    ld = c.leader()
    c.tick(3)
    assert len(c.leaders()) == 1
    for h in c.hosts.values():
        assert h.applied and h.applied[0].type == NO_OP and h.applied[0].term == ld.node.term
        assert h.node.leader_uuid == ld.uuid
    _, e = c.propose(b"x")
    c.tick(2)
    assert all(h.applied[-1] == e for h in c.hosts.values())


def test_vote_is_persisted_with_the_message_that_grants_it():
    c = Cluster()
    c.leader()
    for h in c.hosts.values():
        for rd in h.readies:
            grants = [m for m in rd.messages
                      if isinstance(m, VoteResponse) and m.granted and not m.pre_vote]
            for m in grants:
                assert rd.metadata is not None and rd.metadata.voted_for == m.dest
                assert rd.metadata.current_term == m.term
            asks = [m for m in rd.messages if isinstance(m, VoteRequest) and not m.pre_vote]
            if asks:  # a candidate's own vote is stored before it asks
                assert rd.metadata is not None and rd.metadata.voted_for == h.uuid


@pytest.mark.parametrize("pre_vote", [True, False])
def test_rejoining_node_disrupts_only_without_pre_vote(pre_vote):
    import dataclasses
    c = Cluster(opts=dataclasses.replace(OPTS, pre_vote=pre_vote))
    ld = c.leader()
    term = ld.node.term
    lonely = next(h for h in c.hosts.values() if h is not ld)
    c.cut = {lonely.uuid}
    c.tick(100)
    c.cut = set()
    c.tick(30)
    if pre_vote:
        assert lonely.node.term == term  # its pre-votes never won: no term was burnt
        assert ld.node.role == Role.LEADER and ld.node.term == term
    else:
        assert lonely.node.term > term + 3  # it kept starting elections alone
        assert c.leader().node.term > term  # and deposed the healthy leader on return


def test_leader_without_majority_steps_down():
    c = Cluster()
    ld = c.leader()
    c.cut = {h.uuid for h in c.hosts.values() if h is not ld}
    c.tick(2 * OPTS.election_timeout_ticks + 1)
    assert ld.node.role != Role.LEADER
    with pytest.raises(NotLeader):
        ld.node.propose(WRITE, b"x")


def test_leadership_transfer_hands_over_and_refuses_writes_meanwhile():
    c = Cluster()
    ld = c.leader()
    target = next(h for h in c.hosts.values() if h is not ld)
    term = ld.node.term
    assert ld.node.transfer_leadership(target.uuid) == target.uuid
    with pytest.raises(NotLeader):
        ld.node.propose(WRITE, b"x")
    c.drive(ld)
    c.deliver()
    c.tick(2)
    assert target.node.role == Role.LEADER and target.node.term == term + 1
    assert ld.node.role == Role.FOLLOWER and ld.node.leader_uuid == target.uuid


def test_divergent_suffix_of_a_deposed_leader_is_replaced():
    c = Cluster()
    old, e = c.propose(b"committed")
    c.tick(2)
    c.cut = {old.uuid}
    stale = [old.node.propose(WRITE, f"lost{i}".encode()) for i in range(3)]
    c.drive(old)
    c.queue.clear()
    new = c.leader()
    assert new is not old
    _, e2 = c.propose(b"new")
    c.tick(2)
    c.cut = set()
    c.tick(OPTS.election_timeout_ticks * 3)
    assert old.node.role == Role.FOLLOWER
    for s in stale:  # the uncommitted entries were cut and replaced
        assert old.log.term(s.index) != s.term or s.index > old.log.last_index
    assert [x.body for x in old.applied if x.type == WRITE] == [b"committed", b"new"]
    lo = new.log
    assert [(i, old.log.term(i)) for i in range(1, old.log.last_index + 1)] == \
        [(i, lo.term(i)) for i in range(1, lo.last_index + 1)]


def test_followers_apply_the_leaders_timestamps_and_know_their_safe_time():
    c = Cluster()
    ld = c.leader()
    entries = [c.propose(f"v{i}".encode())[1] for i in range(10)]
    c.tick(3)
    stamps = [e.timestamp for e in entries]
    assert stamps == sorted(stamps) and len(set(stamps)) == 10
    for h in c.hosts.values():
        got = {x.index: x.timestamp for x in h.applied}
        assert [got[e.index] for e in entries] == stamps  # the leader's, everywhere
        assert h.node.safe_time() == h.applied[-1].timestamp
        assert h.clock.now() > stamps[-1]  # a follower's clock moved past what it saw
    # a new leader's timestamps continue above everything in its log
    c.cut = {ld.uuid}
    nl = c.leader()
    _, e = c.propose(b"after")
    assert e.timestamp > stamps[-1] and nl is not ld


def test_config_change_is_one_at_a_time_and_learners_get_promoted():
    c = Cluster()
    ld = c.leader()
    c.tick(2)
    c.add("n3")
    ld.node.add_peer("n3")
    with pytest.raises(ConfigChangeRefused):
        ld.node.add_peer("n4")  # the first change is still pending
    with pytest.raises(ConfigChangeRefused):
        ld.node.remove_peer(ld.uuid)
    p = ld.node.config.peer("n3")
    assert p.member_type == MemberType.NON_VOTER and p.promote
    c.drive(ld)
    c.deliver()
    c.tick(10)
    assert ld.node.committed_config.is_voter("n3")  # caught up, promoted automatically
    assert c.hosts["n3"].node.config.is_voter("n3")
    assert len(ld.node.config.voters()) == 4 and ld.node.config.majority() == 3
    # the promotion travelled through the log as CHANGE_CONFIG entries
    assert sum(1 for x in ld.applied if x.type == CHANGE_CONFIG) == 2
    ld.node.remove_peer("n3")
    c.drive(ld)
    c.deliver()
    c.tick(3)
    assert ld.node.committed_config.voters() == ["n0", "n1", "n2"]


def test_replace_is_3_4_3():
    c = Cluster()
    ld = c.leader()
    c.tick(2)
    old = next(u for u in ("n0", "n1", "n2") if u != ld.uuid)
    c.add("n5")
    ld.node.replace_peer(old, "n5")
    c.drive(ld)
    c.deliver()
    c.tick(30)
    configs = [RaftConfig.decode(x.body, x.index) for x in ld.applied if x.type == CHANGE_CONFIG]
    # learner added (old marked REPLACE), promoted (4 voters), then the old one evicted
    assert [len(cf.voters()) for cf in configs] == [3, 4, 3]
    assert configs[0].peer(old).replace and not configs[0].is_voter("n5")
    assert sorted(ld.node.committed_config.voters()) == sorted(
        [u for u in ("n0", "n1", "n2") if u != old] + ["n5"])
    _, e = c.propose(b"after replace")
    c.tick(3)
    assert c.hosts["n5"].applied[-1] == e


def test_a_peer_behind_the_gcd_log_is_asked_to_copy_the_tablet():
    c = Cluster()
    ld = c.leader()
    for i in range(20):
        c.propose(f"v{i}".encode())
    c.tick(2)
    for h in c.hosts.values():
        h.log.gc(h.node.log_gc_bound())
    assert ld.log.first_index > 1
    new = c.add("n3")
    ld.node.add_peer("n3")
    c.drive(ld)
    c.deliver()
    c.tick(2)
    assert new.copy_requests and new.copy_requests[0].src == ld.uuid
    req = new.copy_requests[0]
    # the cluster layer would copy rowsets + metadata; the log suffix comes along
    a = ld.node.last_applied
    suffix = ld.log.entries(a + 1, ld.log.last_index) if ld.log.last_index > a else []
    assert new.node.install_tablet_copy(OpId(ld.log.term(a), a), ld.log.timestamp(a),
                                        ld.node.committed_config, suffix, req.term)
    assert not new.node.install_tablet_copy(OpId(ld.log.term(a), a), 0,
                                            ld.node.committed_config, [], req.term)  # stale
    c.drive(new)
    c.tick(10)
    _, e = c.propose(b"after copy")
    c.tick(3)
    assert new.applied[-1] == e
    assert ld.node.committed_config.is_voter("n3")


def test_log_gc_bound_respects_lagging_peers_up_to_the_copy_threshold():
    c = Cluster()
    ld = c.leader()
    lag = next(h for h in c.hosts.values() if h is not ld)
    c.cut = {lag.uuid}
    for i in range(3):
        c.propose(f"v{i}".encode())
    assert ld.node.log_gc_bound() <= lag.log.last_index + 1  # still needed by the laggard
    for i in range(20):
        c.propose(f"w{i}".encode())
    # beyond log_retention_entries of lag the log is released (the peer gets a copy)
    assert ld.node.log_gc_bound() == ld.log.last_index + 1 - OPTS.log_retention_entries


def test_non_leaders_refuse_proposals_with_a_leader_hint():
    c = Cluster()
    ld = c.leader()
    c.tick(2)
    f = next(h for h in c.hosts.values() if h is not ld)
    with pytest.raises(NotLeader) as ei:
        f.node.propose(WRITE, b"x")
    assert ei.value.leader_uuid == ld.uuid
    assert ei.value.sqlstate  # one error hierarchy with SQLSTATEs
    with pytest.raises(errors.InvalidArgument):
        ld.node.transfer_leadership("nobody")


def test_follower_whose_last_entry_diverges_catches_up():
    """Regression (simulator seed 57): a follower shorter than the leader whose *last*
    entry is divergent must be walked back to its commit index, not re-sent its own
    last index forever."""
    c = Cluster()
    logs = {"n0": [(1, 1), (3, 2), (3, 3)], "n1": [(1, 1), (2, 2)], "n2": [(1, 1), (3, 2), (3, 3)]}
    from engine.consensus.log import LogEntry
    for uuid, entries in logs.items():
        h = c.hosts[uuid]
        h.log.append([LogEntry(t, i, 10 * i + t, WRITE, b"%d" % t) for t, i in entries])
        h.log.sync()
        h.meta.save(ConsensusMetadata(3, None, h.node.committed_config))
        h.node = RaftConsensus(uuid, h.log, h.meta.load(), h.clock, random.Random(7), OPTS)
    ld = c.leader()
    assert ld.uuid in ("n0", "n2")
    c.tick(5)
    f = c.hosts["n1"]
    assert [f.log.term(i) for i in range(1, f.log.last_index + 1)] == \
        [ld.log.term(i) for i in range(1, ld.log.last_index + 1)]


def test_idle_leader_keeps_follower_safe_time_moving():
    import dataclasses
    c = Cluster(opts=dataclasses.replace(OPTS, safe_time_noop_ticks=3))
    ld = c.leader()
    c.propose(b"only write")
    c.tick(2)
    f = next(h for h in c.hosts.values() if h is not ld)
    before = f.node.safe_time()
    c.tick(12)  # no proposals: the leader's keep-alive NO_OPs commit and advance it
    assert f.node.safe_time() > before
    assert all(x.type == NO_OP for x in f.applied if x.timestamp > before)
    c2 = Cluster()  # without the option an idle follower's safe time stands still
    c2.leader()
    c2.tick(3)
    f2 = c2.hosts["n1"]
    s = f2.node.safe_time()
    c2.tick(12)
    assert f2.node.safe_time() == s
