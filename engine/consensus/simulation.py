"""Deterministic simulation of a Raft-replicated tablet: the proof that RaftConsensus is safe.

    python -m engine.consensus.simulation --seeds 0:1000 [--nodes 3|5] [--faults all]

One seed drives everything (message delays and loss, partitions, crashes, clocks, clients,
configuration changes, every node's election timeouts), so a failing seed replays exactly:
run it again with `--seeds S:S+1 -v`.

The world, advanced one tick at a time:

    nodes      RaftConsensus over a MemoryLogStorage (a crash loses what was not synced) and
               a MemoryMetadataStore; its host persists metadata and syncs the log before
               sending what a Ready holds; a leader's own appends are synced in the
               background (the leader's write is not on the commit path); the state
               machine is a key-value map with a durable "flushed" copy, and the log is GC'd
               below min(Raft's bound, the flushed index + 1)
    network    every message gets a random delay (so reordering), may be lost or duplicated,
               and is dropped across a partition (symmetric or one-way) that later heals
    clocks     HybridClocks over simulated time, each node skewed, skews jumping; each
               node's monotonic clock (leader leases) has its own origin, so only
               differences of one node's readings mean anything, and (fault `drift`) its
               own rate, 1 +- `SimOptions.drift` / 2 seconds per simulated second: the
               node ticks on a grid of its own clock (tick k at simulated time
               ceil(k / rate), never early, as tablet_server.py `_tick_loop`), so a fast
               node's election timeouts and quiet periods are shorter and a slow leader's
               lease is longer in simulated time. Raft's leases hold while rates differ by
               less than about 11% (raft.py, Leader leases): the default drift, 0.1, stays
               inside; `--drift 1.8` (rates 0.1-1.9) shows the lease check firing
    clients    sequential clients put and get keys through whichever node they think leads;
               a get goes through the log (read-through-log), or, half the time when the
               node leads and holds its lease (`RaftConsensus.lease_valid`) and has applied
               an entry of its term, is answered from its state at once (a lease read); an
               op whose outcome never came back (timeout, crash) is recorded as unknown
    config     adding a learner (promoted once caught up), removing a voter, 3-4-3 replace
               (the replaced leader hands over leadership), leadership transfer; a node that
               fell behind the leader's GC'd log is caught up by tablet copy
    wipe       (only when named: `--faults all,wipe`, so the seeds of "all" replay as
               before) a follower's replica deleted and created again over its tombstone,
               as the master does when it re-replicates back onto a server: log, data and
               configuration gone, term and vote kept, the lost log's last op id its vote
               floor (`--broken no_vote_floor`: without, the checks fire); one member at a
               time, while the group has a leader

Checked after every step (message, tick, proposal), each check incremental:
  - at most one leader per term
  - log matching: an entry (index, term) is the same everywhere and has the same
    predecessor term (so equal entries imply equal prefixes)
  - timestamps increase along every log
  - leader completeness: a new leader's log holds every entry known committed
  - state-machine safety: every replica applies the same entry at an index (term,
    timestamp, op) and applies in index order
  - an acknowledged op is never lost (its entry stays the committed one at its index and
    is in the final leader's log)
  - safe time: no entry applied later has a timestamp <= a replica's safe time
  - leases: while a leader holds its lease, no node leads a later term
After the faults stop, the network heals and crashed nodes restart: a leader must be elected,
a new proposal must commit and every member must catch up within `heal_ticks` (liveness),
all members must then hold the same state, and the clients' history must be linearizable
(engine/consensus/linearizability.py).

`broken=` swaps in a deliberately wrong node (votes twice in a term, commits without a
majority) or a wrong client path (leaders answer reads from local state without a lease):
the tests show the simulator catches each. (A node that votes within the lease quiet
period is *not* caught by random faults in 400 seeds — the window is a few ticks; the
scenario tests in tests/engine/consensus/test_leases.py cover it.)

`pause(uuid)` / `resume(uuid)` (scenario tests) freeze a node as SIGSTOP does: it neither
ticks nor sends nor receives, while its monotonic clock runs on.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import json
import multiprocessing
import random
import sys
import time

from engine.clock import HybridClock
from engine.consensus.consensus_metadata import ConsensusMetadata, MemoryMetadataStore
from engine.consensus.linearizability import Operation, check
from engine.consensus.log import WRITE, LogEntry
from engine.consensus.log_storage import MemoryLogStorage
from engine.consensus.messages import OpId, RaftConfig, RaftPeer
from engine.consensus.raft import ConfigChangeRefused, NotLeader, RaftConsensus, RaftOptions, Role
from engine import errors

FAULTS = ("delay", "loss", "dup", "partition", "crash", "skew", "config", "transfer", "drift")
# only when named (not in "all", whose seeds must keep replaying the same runs): `wipe` -
# a follower's replica tombstoned and created again empty (module docstring)
EXTRA_FAULTS = ("wipe",)
BROKEN = ("double_vote", "commit_no_majority", "local_reads", "no_vote_floor")
TICK_US = 10_000  # one tick = 10 ms of simulated time
TICK_S = TICK_US / 1e6


class Violation(Exception):
    pass


@dataclasses.dataclass(eq=False)
class ClientOp(Operation):
    """A client's op as the simulator tracks it: where it was proposed and until when the
    client waits (`failed`: another entry won its index, so it never took effect)."""

    index: int = 0
    term: int = 0
    deadline: int = 0
    failed: bool = False


@dataclasses.dataclass(frozen=True)
class SimOptions:
    nodes: int = 3
    faults: frozenset = frozenset(FAULTS)
    ticks: int = 300  # with faults
    heal_ticks: int = 300  # liveness bound after healing
    clients: int = 3
    keys: int = 2
    broken: str | None = None
    drift: float = 0.1  # fault `drift`: a node's monotonic rate is 1 +- drift / 2
    raft: RaftOptions = RaftOptions(heartbeat_ticks=2, election_timeout_ticks=10,
                                    max_batch_entries=8, max_inflight=3,
                                    log_retention_entries=25, safe_time_noop_ticks=8,
                                    tick_s=TICK_S)


# -- deliberately broken nodes (only the simulator builds them) -----------------------------
class _DoubleVoteNode(RaftConsensus):
    def _may_vote_for(self, candidate: str) -> bool:
        return True  # BROKEN: grants every candidate of a term


class _LonelyCommitNode(RaftConsensus):
    def _advance_commit(self) -> None:
        n = self.log.durable_index  # BROKEN: commits what it alone has
        if n > self.commit_index and self.log.term(n) == self.term:
            self._set_commit(n)


_NODE_CLASS = {None: RaftConsensus, "local_reads": RaftConsensus,
               "no_vote_floor": RaftConsensus,
               "double_vote": _DoubleVoteNode, "commit_no_majority": _LonelyCommitNode}


class _CheckedLog(MemoryLogStorage):
    """The simulator's log: every append is checked against all entries ever seen."""

    def __init__(self, sim: "Simulation", uuid: str):
        super().__init__()
        self.sim, self.uuid = sim, uuid

    def append(self, entries: list[LogEntry]) -> None:
        super().append(entries)
        for e in entries:
            self.sim.check_entry(self.uuid, e, self.term(e.index - 1),
                                  self.timestamp(e.index - 1))


class SimNode:
    def __init__(self, sim: "Simulation", uuid: str, config: RaftConfig):
        self.uuid = uuid
        self.storage = _CheckedLog(sim, uuid)
        self.meta = MemoryMetadataStore(ConsensusMetadata(0, None, config))
        self.skew_us = 0
        self.mono_origin = 0.0  # this node's monotonic clock reads sim time x rate + this
        self.mono_rate = 1.0  # its seconds per simulated second (fault `drift`)
        self.paused = False
        self.node: RaftConsensus | None = None
        self.kv: dict = {}
        self.applied = 0
        self.flushed = (0, {})  # durable state machine: (index, kv)
        self.pending: dict[int, ClientOp] = {}  # index -> client op proposed here
        self.vote_floor: OpId | None = None  # the end of a log it lost (fault `wipe`)

    @property
    def alive(self) -> bool:
        return self.node is not None


class Simulation:
    def __init__(self, seed: int, opts: SimOptions = SimOptions(), verbose: bool = False):
        self.seed = seed
        self.opts = opts
        self.verbose = verbose
        self.rng = random.Random(seed)
        # the nodes' clock rates come from their own stream (not the one driving faults)
        self.drift_rng = random.Random(f"drift-{seed}")
        self.faults = set(opts.faults)
        self.now = 0
        self.events = 0  # global event counter: the history's time
        self.net: list = []
        self.seq = 0
        self.blocked: set[tuple[str, str]] = set()
        self.nodes: dict[str, SimNode] = {}
        self.next_id = opts.nodes
        self.leaders: dict[int, str] = {}
        self.completeness_checked: set[int] = set()
        self.committed: dict[int, tuple] = {}  # index -> (term, ts, type, body)
        self.seen: dict[tuple[int, int], tuple] = {}  # (index, term) -> (prev term, ...)
        self.history: list[ClientOp] = []
        self.acked: list[ClientOp] = []
        self.clients: list[dict] = [{"id": c, "op": None, "hint": None, "seq": 0}
                                    for c in range(opts.clients)]
        self.stats = {"elections": 0, "tablet_copies": 0, "config_changes": 0, "crashes": 0,
                      "acked": 0, "lease_reads": 0, "wipes": 0}
        config = RaftConfig(0, tuple(RaftPeer(f"n{i}") for i in range(opts.nodes)))
        for i in range(opts.nodes):
            n = SimNode(self, f"n{i}", config)
            if "skew" in self.faults:
                n.skew_us = self.rng.randint(-5 * TICK_US, 5 * TICK_US)
            n.mono_origin = self.rng.uniform(1, 1e6)
            self._drift(n)
            self.nodes[n.uuid] = n
            self._start(n)

    # -- hosting -----------------------------------------------------------------------------
    def _log(self, msg: str) -> None:
        if self.verbose:
            print(f"[t={self.now}] {msg}")

    def _start(self, n: SimNode) -> None:
        clock = HybridClock(wall=lambda n=n: (self.now * TICK_US + n.skew_us) * 1000)
        index, kv = n.flushed
        n.kv, n.applied = dict(kv), index
        cls = _NODE_CLASS[self.opts.broken]
        n.node = cls(n.uuid, n.storage, n.meta.load(), clock,
                     random.Random(self.rng.random()), self.opts.raft, applied_index=index,
                     monotonic=lambda n=n: self.now * TICK_S * n.mono_rate + n.mono_origin,
                     vote_floor=n.vote_floor)

    def _wipe(self, n: SimNode) -> None:
        """Fault `wipe`: the node's replica is tombstoned and created again, as the cluster
        does when the master re-replicates back onto its server (tablet_server.py): its
        data, log and configuration are gone, its term and vote kept, and (unless broken
        `no_vote_floor`) the lost log's last op id is its vote floor."""
        self._log(f"wipe {n.uuid}")
        meta = n.meta.load()
        s = n.storage
        lost = (s.last_term, s.last_index)
        if n.vote_floor is not None:
            lost = max(lost, (n.vote_floor.term, n.vote_floor.index))
        n.vote_floor = None if self.opts.broken == "no_vote_floor" else OpId(*lost)
        n.storage = _CheckedLog(self, n.uuid)
        n.meta = MemoryMetadataStore(ConsensusMetadata(meta.current_term, meta.voted_for,
                                                       RaftConfig(0, ())))
        n.flushed = (0, {})
        n.pending.clear()
        self.stats["wipes"] += 1
        self._start(n)
        self._drive(n)

    def _crash(self, n: SimNode) -> None:
        self._log(f"crash {n.uuid}")
        n.node = None
        n.storage.crash()
        n.pending.clear()
        self.stats["crashes"] += 1

    def _drive(self, n: SimNode) -> None:
        """Do what the node's Ready asks, in the order a real host must."""
        while n.node is not None:
            rd = n.node.ready()
            if rd.empty():
                break
            if rd.metadata is not None:
                n.meta.save(rd.metadata)
            if rd.sync_log:
                n.storage.sync()
                n.node.log_synced()
            for m in rd.messages:
                self._send(m)
            for e in rd.committed:
                self._apply(n, e)
            for req in rd.copy_requests:
                self._tablet_copy(n, req)
        self._check_leader(n)

    def _send(self, m) -> None:
        if (m.src, m.dest) in self.blocked or self._paused(m.src):
            return
        if "loss" in self.faults and self.rng.random() < 0.05:
            return
        copies = 2 if "dup" in self.faults and self.rng.random() < 0.03 else 1
        for _ in range(copies):
            delay = 1 + (self.rng.randrange(4) if "delay" in self.faults else 0)
            self.seq += 1
            heapq.heappush(self.net, (self.now + delay, self.seq, m))

    def _apply(self, n: SimNode, e: LogEntry) -> None:
        if e.index != n.applied + 1:
            raise Violation(f"{n.uuid} applied index {e.index} after {n.applied}")
        sig = (e.term, e.timestamp, e.type, e.body)
        prev = self.committed.get(e.index)
        if prev is None:
            self.committed[e.index] = sig
        elif prev != sig:
            raise Violation(f"state machine safety: {n.uuid} applied {sig[:2]} at index "
                            f"{e.index}, another replica {prev[:2]}")
        n.applied = e.index
        result = None
        if e.type == WRITE:
            op = json.loads(e.body)
            if op["kind"] == "put":
                n.kv[op["key"]] = op["value"]
            else:
                result = n.kv.get(op["key"])
        cop = n.pending.pop(e.index, None)
        if cop is not None:
            if e.term == cop.term:
                self.events += 1
                cop.ret, cop.output = self.events, result
                self.acked.append(cop)
                self.stats["acked"] += 1
            else:
                cop.failed = True  # another entry won the index: it never took effect
            self._client_done(cop)

    def _tablet_copy(self, n: SimNode, req) -> None:
        src = self.nodes.get(req.src)
        if src is None or not src.alive or (req.src, n.uuid) in self.blocked:
            return
        s = src.node
        if s.role != Role.LEADER or s.term != req.term:
            return
        a = s.last_applied
        suffix = s.log.entries(a + 1, s.log.last_index) if s.log.last_index > a else []
        if n.node.install_tablet_copy(OpId(s.log.term(a), a), s.log.timestamp(a),
                                      s.committed_config, suffix, req.term):
            self._log(f"tablet copy {req.src} -> {n.uuid} at {a}")
            self.stats["tablet_copies"] += 1
            n.kv, n.applied = dict(src.kv), a
            n.flushed = (a, dict(src.kv))
            n.pending.clear()

    def _flush_and_gc(self, n: SimNode) -> None:
        n.storage.sync()
        n.node.log_synced()
        n.flushed = (n.applied, dict(n.kv))
        n.storage.gc(min(n.node.log_gc_bound(), n.applied + 1))

    def _paused(self, uuid: str) -> bool:
        n = self.nodes.get(uuid)
        return n is not None and n.paused

    def pause(self, uuid: str) -> None:
        """Freeze a node as SIGSTOP would (see the module docstring)."""
        self.nodes[uuid].paused = True

    def resume(self, uuid: str) -> None:
        self.nodes[uuid].paused = False

    # -- checks ----------------------------------------------------------------------------
    def check_entry(self, uuid: str, e: LogEntry, prev_term, prev_ts) -> None:
        """Raft's safety checks on an entry node `uuid` appended (log matching: one entry
        per (index, term) everywhere; timestamps increase along the log)."""
        sig = (prev_term, e.timestamp, e.type, e.body)
        seen = self.seen.setdefault((e.index, e.term), sig)
        if seen != sig:
            raise Violation(f"log matching: {uuid} has a different entry ({e.index}, {e.term})"
                            f" (prev term {prev_term} vs {seen[0]})")
        if prev_ts is not None and e.timestamp <= prev_ts:
            raise Violation(f"timestamps: {uuid} entry {e.index} ts {e.timestamp} <= previous "
                            f"{prev_ts}")

    def _check_leader(self, n: SimNode) -> None:
        node = n.node
        if node is None or node.role != Role.LEADER:
            return
        other = self.leaders.setdefault(node.term, n.uuid)
        if other != n.uuid:
            raise Violation(f"two leaders in term {node.term}: {other} and {n.uuid}")
        if node.term not in self.completeness_checked:
            self.completeness_checked.add(node.term)
            self.stats["elections"] += 1
            self._log(f"{n.uuid} leads term {node.term}")
            log = n.storage
            for i in range(log.first_index, max(self.committed, default=0) + 1):
                c = self.committed.get(i)
                if c is not None and log.term(i) != c[0]:
                    raise Violation(f"leader completeness: {n.uuid} leads term {node.term} "
                                    f"without committed entry {i}")

    def _check_tick(self) -> None:
        leaders = [n for n in self.nodes.values() if n.alive and n.node.is_leader]
        for n in leaders:
            if n.node.lease_valid():
                for m in leaders:
                    if m.node.term > n.node.term:
                        raise Violation(f"lease: {n.uuid} holds its term-{n.node.term} lease "
                                        f"while {m.uuid} leads term {m.node.term}")
        for n in self.nodes.values():
            if n.alive:
                nxt = self.committed.get(n.applied + 1)
                if nxt is not None and nxt[1] <= n.node.safe_time():
                    raise Violation(f"safe time: {n.uuid} claims {n.node.safe_time()} but "
                                    f"entry {n.applied + 1} has ts {nxt[1]}")

    # -- clients -----------------------------------------------------------------------------
    def _client_done(self, op: ClientOp) -> None:
        c = self.clients[op.client]
        if c["op"] is op:
            c["op"] = None

    def _clients(self, healing: bool) -> None:
        for c in self.clients:
            op = c["op"]
            if op is not None and self.now > op.deadline:
                c["op"] = None  # outcome unknown: stays in the history with ret None
                for n in self.nodes.values():
                    if n.pending.get(op.index) is op:
                        del n.pending[op.index]
            if c["op"] is not None or (healing and c["id"] == 0) or self.rng.random() > 0.3:
                continue
            self._client_op(c)

    def _client_op(self, c: dict, kind: str | None = None) -> ClientOp | None:
        live = [n for n in self.nodes.values() if n.alive and not n.paused]
        if not live:
            return None
        target = self.nodes.get(c["hint"]) if c["hint"] else None
        if target is None or not target.alive or self.rng.random() < 0.1:
            target = self.rng.choice(live)
        c["seq"] += 1
        kind = kind or self.rng.choice(("put", "get"))
        key = f"k{self.rng.randrange(self.opts.keys)}"
        value = f"c{c['id']}-{c['seq']}" if kind == "put" else None
        node = target.node
        lease_read = kind == "get" and node.is_leader and (
            self.opts.broken == "local_reads"  # BROKEN: no check that it still leads
            or (node.lease_valid() and node.log.term(node.last_applied) == node.term
                and self.rng.random() < 0.5))
        if lease_read:
            self.stats["lease_reads"] += 1
            self.events += 1
            op = ClientOp(c["id"], kind, key, None, self.events)
            self.events += 1
            op.ret, op.output = self.events, target.kv.get(key)
            self.history.append(op)
            return op
        body = json.dumps({"kind": kind, "key": key, "value": value}).encode()
        try:
            e = target.node.propose(WRITE, body)
        except NotLeader as ex:
            c["hint"] = ex.leader_uuid
            return None
        c["hint"] = target.uuid
        self.events += 1
        op = ClientOp(c["id"], kind, key, value, self.events, index=e.index, term=e.term,
                      deadline=self.now + 40)
        self.history.append(op)
        target.pending[e.index] = op
        c["op"] = op
        self._drive(target)
        return op

    # -- faults ------------------------------------------------------------------------------
    def _leader(self) -> SimNode | None:
        best = None
        for n in self.nodes.values():
            if n.alive and n.node.is_leader and (best is None or n.node.term > best.node.term):
                best = n
        return best

    def _new_node(self) -> SimNode:
        uuid = f"n{self.next_id}"
        self.next_id += 1
        n = SimNode(self, uuid, RaftConfig(0, ()))
        if "skew" in self.faults:
            n.skew_us = self.rng.randint(-5 * TICK_US, 5 * TICK_US)
        self._drift(n)
        self.nodes[uuid] = n
        self._start(n)
        return n

    def _drift(self, n: SimNode) -> None:
        if "drift" in self.faults:
            d = self.opts.drift
            n.mono_rate = 1.0 + self.drift_rng.uniform(-d / 2, d / 2)

    def _ticks_due(self, n: SimNode) -> int:
        """Ticks of node n's grid that fall in (now - 1, now] of simulated time (its tick k
        comes at ceil(k / rate): never early, possibly two in one simulated tick)."""
        r = n.mono_rate
        if r == 1.0:
            return 1
        return int(self.now * r) - int((self.now - 1) * r)

    def _inject_faults(self) -> None:
        rng = self.rng
        names = list(self.nodes)
        if "partition" in self.faults:
            if not self.blocked and rng.random() < 0.02:
                side = [u for u in names if rng.random() < 0.5]
                other = [u for u in names if u not in side]
                one_way = rng.random() < 0.3
                for a in side:
                    for b in other:
                        self.blocked.add((a, b))
                        if not one_way:
                            self.blocked.add((b, a))
                self._log(f"partition {side} | {other}{' one-way' if one_way else ''}")
            elif self.blocked and rng.random() < 0.04:
                self.blocked.clear()
                self._log("heal")
        if "crash" in self.faults:
            for n in self.nodes.values():
                if n.alive and rng.random() < 0.004:
                    self._crash(n)
                elif not n.alive and rng.random() < 0.05:
                    self._log(f"restart {n.uuid}")
                    self._start(n)
                    self._drive(n)
        if "wipe" in self.faults and rng.random() < 0.01:
            # as the master does it: one member at a time (no other node is waiting for
            # its configuration), while the group has a leader, never the leader
            n = self.nodes[rng.choice(names)]
            lead = self._leader()
            if n.alive and not n.paused and lead is not None and lead is not n and \
                    all(m.alive and m.node.config.peers for m in self.nodes.values()
                        if m is not n):
                self._wipe(n)
        if "skew" in self.faults and rng.random() < 0.01:
            n = self.nodes[rng.choice(names)]
            n.skew_us += rng.randint(-10 * TICK_US, 10 * TICK_US)
        leader = self._leader()
        if leader is None:
            return
        node = leader.node
        me = node.config.peer(leader.uuid)
        if me is not None and me.replace:
            try:
                node.transfer_leadership()
            except errors.EngineError:
                pass
        if "transfer" in self.faults and rng.random() < 0.005:
            try:
                node.transfer_leadership()
                self._log(f"transfer from {leader.uuid}")
            except errors.EngineError:
                pass
        if "config" in self.faults and rng.random() < 0.02:
            self._config_change(leader)
        self._drive(leader)

    def _config_change(self, leader: SimNode) -> None:
        node = leader.node
        cfg = node.config
        voters = cfg.voters()
        others = [v for v in voters if v != leader.uuid]
        action = self.rng.choice(("add", "remove", "replace"))
        new = None
        try:
            if action == "add" and len(cfg.peers) < self.opts.nodes + 2:
                new = self._new_node()
                node.add_peer(new.uuid)
            elif action == "remove" and len(voters) > 3 and others:
                node.remove_peer(self.rng.choice(others))
            elif action == "replace" and len(cfg.peers) < self.opts.nodes + 2:
                new = self._new_node()
                node.replace_peer(self.rng.choice(voters), new.uuid)
            else:
                return
        except (ConfigChangeRefused, NotLeader, errors.AlreadyPresent, errors.NotFound):
            if new is not None:
                del self.nodes[new.uuid]
            return
        self.stats["config_changes"] += 1
        self._log(f"config change {action} {new.uuid if new else ''} by {leader.uuid}")

    # -- the run -----------------------------------------------------------------------------
    def _step_tick(self, faults: bool) -> None:
        self.now += 1
        if faults:
            self._inject_faults()
        while self.net and self.net[0][0] <= self.now:
            _, _, m = heapq.heappop(self.net)
            n = self.nodes.get(m.dest)
            if n is None or not n.alive or n.paused or (m.src, m.dest) in self.blocked:
                continue
            n.node.step(m)
            self._drive(n)
        for n in list(self.nodes.values()):
            for _ in range(self._ticks_due(n)):
                if n.alive and not n.paused:
                    n.node.tick()
                    self._drive(n)
        self._clients(healing=not faults)
        for n in list(self.nodes.values()):
            if not n.alive or n.paused:
                continue
            if n.storage.last_index > n.storage.durable_index and self.rng.random() < 0.5:
                n.storage.sync()
                n.node.log_synced()
                self._drive(n)
            if self.rng.random() < 0.05:
                self._flush_and_gc(n)
                self._drive(n)
        self._check_tick()

    def run(self) -> list[str]:
        try:
            for _ in range(self.opts.ticks):
                self._step_tick(True)
            self._heal()
            self._final_checks()
        except Violation as v:
            return [f"{v} (tick {self.now})"]
        except AssertionError as e:
            return [f"assertion failed in a node: {e} (tick {self.now})"]
        return []

    def _heal(self) -> None:
        """Stop the faults, heal, restart; then demand progress within heal_ticks."""
        self.faults -= {"loss", "dup", "partition", "crash", "config", "transfer", "wipe"}
        self.blocked.clear()
        for n in self.nodes.values():
            if not n.alive:
                self._start(n)
                self._drive(n)
        deadline = self.now + self.opts.heal_ticks
        probe = None
        while self.now < deadline:
            self._step_tick(False)
            leader = self._leader()
            if leader is None:
                continue
            if probe is None or (probe.ret is None and self.clients[0]["op"] is not probe):
                c = self.clients[0]
                if c["op"] is None:
                    c["hint"] = leader.uuid
                    probe = self._client_op(c, "put")
                continue
            if probe.ret is None:
                continue
            members = [self.nodes[p.uuid] for p in leader.node.config.peers
                       if p.uuid in self.nodes]
            if all(m.alive and m.applied >= probe.index for m in members):
                self.leader_at_end = leader
                return
        raise Violation("liveness: no leader committed a new proposal on every member "
                        f"within {self.opts.heal_ticks} ticks of healing")

    def _final_checks(self) -> None:
        leader = self.leader_at_end
        log = leader.storage
        for op in self.acked:
            if op.index >= log.first_index and log.term(op.index) != op.term:
                raise Violation(f"acknowledged op at index {op.index} lost from the leader's log")
            c = self.committed.get(op.index)
            if c is None or c[0] != op.term:
                raise Violation(f"acknowledged op at index {op.index} is not the committed one")
        members = [self.nodes[p.uuid] for p in leader.node.config.peers]
        for m in members:
            if m.applied == leader.applied and m.kv != leader.kv:
                raise Violation(f"replicas diverged: {m.uuid} and {leader.uuid} at index "
                                f"{m.applied}")
        ok, key = check([op for op in self.history if not op.failed])
        if ok is False:
            raise Violation(f"history of key {key} is not linearizable")
        if ok is None:
            raise Violation(f"linearizability search for key {key} too large")


    def fingerprint(self) -> str:
        """A digest of what happened (committed log, client history, counters): equal for
        two runs of one seed."""
        import hashlib
        h = hashlib.sha256(repr((self.now, sorted(self.committed.items()),
                                 [(o.client, o.kind, o.key, o.value, o.call, o.ret, o.output)
                                  for o in self.history],
                                 sorted(self.stats.items()))).encode())
        return h.hexdigest()


def run_seed(seed: int, opts: SimOptions = SimOptions(), verbose: bool = False
             ) -> tuple[int, list[str], dict]:
    sim = Simulation(seed, opts, verbose)
    return seed, sim.run(), sim.stats


def _run_seed_args(args):
    return run_seed(*args)


def parse_faults(s: str) -> frozenset:
    if s == "all":
        return frozenset(FAULTS)
    if s == "none":
        return frozenset()
    out = frozenset(x.strip() for x in s.split(",") if x.strip())
    if "all" in out:
        out = (out - {"all"}) | frozenset(FAULTS)
    bad = out - set(FAULTS) - set(EXTRA_FAULTS)
    if bad:
        raise argparse.ArgumentTypeError(f"unknown faults {sorted(bad)}; known: {FAULTS}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.consensus.simulation",
                                 description="Deterministic simulation of Raft per tablet.")
    ap.add_argument("--seeds", default="0:100", help="START:END (END exclusive)")
    ap.add_argument("--nodes", type=int, default=3, choices=(3, 5))
    ap.add_argument("--faults", type=parse_faults, default=frozenset(FAULTS),
                    help=f"all, none, or a comma list of {','.join(FAULTS)} (all: these), "
                         f"and of {','.join(EXTRA_FAULTS)} (only when named: all,wipe)")
    ap.add_argument("--ticks", type=int, default=SimOptions.ticks)
    ap.add_argument("--drift", type=float, default=SimOptions.drift,
                    help="fault drift: monotonic rates in [1 - DRIFT/2, 1 + DRIFT/2] "
                         "(default: %(default)s, inside the ~11%% leases rely on; below 2)")
    ap.add_argument("--broken", choices=BROKEN, default=None,
                    help="run a deliberately wrong node/client (the checks must fire)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("-v", "--verbose", action="store_true", help="trace events (one seed)")
    a = ap.parse_args(argv)
    start, end = (int(x) for x in a.seeds.split(":"))
    opts = SimOptions(nodes=a.nodes, faults=a.faults, ticks=a.ticks, broken=a.broken,
                      drift=a.drift)
    t0 = time.monotonic()
    work = [(s, opts, a.verbose) for s in range(start, end)]
    violations = 0
    totals: dict[str, int] = {}
    if a.jobs > 1:
        with multiprocessing.Pool(a.jobs) as pool:
            results = pool.imap(_run_seed_args, work, chunksize=8)
            for seed, v, stats in results:
                violations += _report(seed, v, stats, totals)
    else:
        for w in work:
            seed, v, stats = run_seed(*w)
            violations += _report(seed, v, stats, totals)
    dt = time.monotonic() - t0
    print(f"# {dt:.1f} s; " + ", ".join(f"{k} {v}" for k, v in totals.items()),
          file=sys.stderr)
    print(f"{end - start} seeds, {violations} violations")
    return 0 if violations == 0 else 1


def _report(seed: int, v: list[str], stats: dict, totals: dict) -> int:
    for k, x in stats.items():
        totals[k] = totals.get(k, 0) + x
    if v:
        print(f"seed {seed}: {v[0]}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
