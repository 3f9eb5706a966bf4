"""Leader leases, snapshots a new leader cannot undercut, bounded clock updates (issue 24).

Deterministic scenarios on the simulator (engine/consensus/simulation.py, no random faults:
every message takes one tick) for the rules of engine/consensus/raft.py's docstring
(Leader leases, Snapshots), and HybridClock's bound (engine/clock.py):

  - a deposed leader, paused (SIGSTOP) or partitioned, holds no lease once a new leader
    was elected, so it cannot answer a read from stale state after the new one took a write
  - a voter restarted within the lease, or told of a higher term, still refuses votes
  - a leadership transfer ends the lease at once; a lapsed one whose TimeoutNow left
    makes the leader step down
  - a snapshot the old leader served (its wall clock ahead, the new leader's behind) is
    below every write of the next leader
  - HybridClock refuses a client's timestamp beyond the maximum clock error
The random-fault suite (test_simulation.py) also serves half the gets as lease reads and
checks linearizability and that no lease overlaps a later term's leader.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from engine.clock import ClockError, HybridClock, from_micros, physical_micros
from engine.consensus.log import NO_OP, WRITE
from engine.consensus.messages import OpId, VoteRequest, VoteResponse
from engine.consensus.raft import Role
from engine.consensus.simulation import SimNode, SimOptions, Simulation


def _sim(seed: int = 5) -> Simulation:
    opts = SimOptions(faults=frozenset(), clients=0,
                      raft=dataclasses.replace(SimOptions.raft, safe_time_noop_ticks=0))
    return Simulation(seed, opts)


def _tick(sim: Simulation, n: int = 1) -> None:
    for _ in range(n):
        sim._step_tick(False)


def _until(sim: Simulation, cond, limit: int = 300, what: str = "condition") -> None:
    for _ in range(limit):
        if cond():
            return
        _tick(sim)
    raise AssertionError(f"{what} not reached within {limit} ticks")


def _ready_leader(sim: Simulation, exclude: SimNode | None = None) -> SimNode:
    """A leader (not `exclude`) that applied an entry of its term and holds its lease."""
    found = []

    def ok():
        for n in sim.nodes.values():
            nd = n.node
            if n is not exclude and n.alive and not n.paused and nd.is_leader \
                    and nd.log.term(nd.last_applied) == nd.term and nd.lease_valid():
                found[:] = [n]
                return True
        return False
    _until(sim, ok, what="a leader holding its lease")
    return found[0]


def _put(sim: Simulation, leader: SimNode, key: str, value: str):
    e = leader.node.propose(WRITE, json.dumps({"kind": "put", "key": key,
                                               "value": value}).encode())
    sim._drive(leader)
    _until(sim, lambda: leader.applied >= e.index, what=f"put {key}={value} applied")
    assert leader.node.log.term(e.index) == e.term
    return e


def _lease_read(n: SimNode, key: str):
    """What a tablet server does for a READ_LATEST lookup (TabletReplica.check_leader_ready
    with lease=True): serve from local state only as a leader holding its lease."""
    nd = n.node
    if not (nd.is_leader and nd.log.term(nd.last_applied) == nd.term and nd.lease_valid()):
        return "refused"
    return n.kv.get(key)


def test_a_paused_leader_cannot_serve_a_read_after_a_new_leader_took_a_write():
    sim = _sim()
    old = _ready_leader(sim)
    _put(sim, old, "k", "v1")
    assert _lease_read(old, "k") == "v1"
    sim.pause(old.uuid)  # SIGSTOP: no ticks, no messages; its monotonic clock runs on
    new = _ready_leader(sim, exclude=old)
    _put(sim, new, "k", "v2")
    sim.resume(old.uuid)
    # back from the pause it still believes it leads (it has not ticked or heard anything)
    assert old.node.is_leader and old.kv["k"] == "v1"
    assert _lease_read(old, "k") == "refused"
    assert _lease_read(new, "k") == "v2"


def test_a_partitioned_leader_loses_its_lease_before_anyone_else_leads():
    sim = _sim(7)
    old = _ready_leader(sim)
    _put(sim, old, "k", "v1")
    for u in sim.nodes:
        if u != old.uuid:
            sim.blocked |= {(old.uuid, u), (u, old.uuid)}
    new_leader_tick = None
    for _ in range(300):
        _tick(sim)
        others = [n for n in sim.nodes.values() if n is not old and n.node.is_leader]
        if others:
            new_leader_tick = new_leader_tick or sim.now
            # the moment (and ever after) another node leads, the old one serves nothing
            assert _lease_read(old, "k") == "refused", sim.now
        if others and others[0].node.log.term(others[0].node.last_applied) == \
                others[0].node.term:
            break
    assert new_leader_tick is not None
    new = _ready_leader(sim, exclude=old)
    _put(sim, new, "k", "v2")
    assert _lease_read(old, "k") == "refused"


def _vote(sim: Simulation, voter: SimNode, cand: SimNode, pre_vote: bool) -> bool:
    c = cand.node
    voter.node.step(VoteRequest(cand.uuid, voter.uuid, c.term + 1,
                                OpId(c.log.last_term, c.log.last_index), pre_vote))
    rd = voter.node.ready()
    if rd.metadata is not None:
        voter.meta.save(rd.metadata)
    answers = [m for m in rd.messages if isinstance(m, VoteResponse) and m.dest == cand.uuid]
    assert len(answers) == 1
    return answers[0].granted


def test_a_voter_restarted_within_the_lease_refuses_to_vote():
    sim = _sim()
    leader = _ready_leader(sim)
    _put(sim, leader, "k", "v1")
    f, cand = [n for n in sim.nodes.values() if n is not leader]
    assert leader.node.lease_valid()
    sim._crash(f)
    sim._start(f)  # it acked the leader's last heartbeat just before; it forgot the leader
    assert f.node.leader_uuid is None
    assert not _vote(sim, f, cand, pre_vote=True)
    assert not _vote(sim, f, cand, pre_vote=False)
    assert leader.node.lease_valid() and leader.node.is_leader


def test_a_higher_term_message_does_not_end_a_voters_quiet_period():
    sim = _sim()
    leader = _ready_leader(sim)
    f, cand = [n for n in sim.nodes.values() if n is not leader]
    # a stray refusal of a higher term (a vote answered long ago) clears the leader it knows
    f.node.step(VoteResponse(cand.uuid, f.uuid, f.node.term + 1, False))
    sim._drive(f)
    assert f.node.leader_uuid is None
    assert leader.node.lease_valid()
    assert not _vote(sim, f, cand, pre_vote=False)


def test_a_fresh_replica_votes_at_once():
    """Term 0: it never acked a leader, so a new tablet's first election is not delayed."""
    sim = _sim()
    a, b = list(sim.nodes.values())[:2]
    assert a.node.term == 0
    assert _vote(sim, a, b, pre_vote=True)


def test_a_transfer_ends_the_lease_and_a_lapsed_one_steps_the_leader_down():
    sim = _sim()
    leader = _ready_leader(sim)
    target = next(n for n in sim.nodes.values() if n is not leader)
    sim.blocked.add((leader.uuid, target.uuid))  # the TimeoutNow is lost (or delayed)
    assert leader.node.transfer_leadership(target.uuid) == target.uuid
    assert not leader.node.lease_valid()
    sim._drive(leader)
    _tick(sim, sim.opts.raft.election_timeout_ticks + 2)
    # a TimeoutNow left: it may still arrive and win votes regardless of quiet periods
    assert leader.node.role == Role.FOLLOWER


def test_a_new_leader_never_stamps_below_a_snapshot_the_old_one_served():
    sim = _sim(3)
    old = _ready_leader(sim)
    _put(sim, old, "k", "v1")
    for n in sim.nodes.values():  # the old leader's wall clock 2 s ahead, the others' behind
        n.skew_us = 2_000_000 if n is old else -2_000_000
    # Table picked a snapshot above everything in this tablet (from another tablet, or the
    # old leader's fast clock); wait_safe moves the clock there and serves once the
    # barrier is applied (TabletReplica.wait_safe)
    ts = old.node.clock.now() + from_micros(1000)
    old.node.clock.update_bounded(ts)
    index, term = old.node.snapshot_barrier(ts)
    sim._drive(old)
    _until(sim, lambda: old.applied >= index, what="the snapshot barrier applied")
    assert old.node.log.term(index) == term
    served = ts  # a scan at `ts` was answered: it saw no write above v1
    sim.pause(old.uuid)
    new = _ready_leader(sim, exclude=old)
    e = _put(sim, new, "k", "v2")
    assert e.timestamp > served, "the new leader wrote below a snapshot already served"
    assert physical_micros(new.node.clock.now()) >= physical_micros(served)


def test_the_barrier_is_the_last_entry_when_the_snapshot_is_not_above_it():
    sim = _sim()
    leader = _ready_leader(sim)
    e = _put(sim, leader, "k", "v1")
    last = leader.node.log.last_index
    assert leader.node.snapshot_barrier(e.timestamp) == (last, leader.node.log.term(last))
    assert leader.node.log.last_index == last  # no NO_OP needed
    index, _ = leader.node.snapshot_barrier(leader.node.clock.now() + 5)
    assert index == last + 1 and leader.node.log.entries(index, index)[0].type == NO_OP


def test_hybrid_clock_refuses_a_timestamp_beyond_the_max_error():
    wall_ns = 1_700_000_000 * 10**9
    clock = HybridClock(wall=lambda: wall_ns, max_error_s=10)
    now_us = wall_ns // 1000
    ok = from_micros(now_us + 9_000_000)
    clock.update_bounded(ok)
    assert clock.now() > ok
    with pytest.raises(ClockError) as ei:
        clock.update_bounded(from_micros(now_us + 11_000_000))
    assert ei.value.sqlstate == "22008" and "max" in str(ei.value)
    assert physical_micros(clock.now()) < now_us + 10_000_000  # not moved by the refusal
    # Raft traffic between servers is accepted (logged): a leader's entry is history
    far = from_micros(now_us + 60_000_000)
    clock.update(far)
    assert clock.now() > far
