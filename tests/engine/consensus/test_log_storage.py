"""The Raft log on disk (WalLogStorage over engine/consensus/log.py) and ConsensusMetadata.

- Log: range reads of an open log across segments, suffix truncation inside and across
  segments (appends continue after the cut, a reopen sees exactly the kept entries), reset.
- WalLogStorage against MemoryLogStorage as an oracle: random appends that overlap the
  tail (Raft's divergent-suffix cut), syncs, GCs and reopens must leave both with the same
  entries, terms, timestamps and boundary.
- FileMetadataStore: round trip, atomic replace (a stray .tmp from a crash is ignored).
- Three RaftConsensus nodes on real WAL directories: elect, replicate, "crash" a follower
  and the leader (objects dropped, reopened from disk): term, vote and log come back, the
  cluster carries on and every log ends equal.
"""

from __future__ import annotations

import os
import random

import pytest

from engine.clock import LogicalClock
from engine.consensus.consensus_metadata import (
    CMETA_FILE,
    ConsensusMetadata,
    FileMetadataStore,
)
from engine.consensus.log import WRITE, Log, LogEntry
from engine.consensus.log_storage import MemoryLogStorage, WalLogStorage
from engine.consensus.messages import RaftConfig, RaftPeer
from engine.consensus.raft import RaftConsensus, RaftOptions, Role


def _e(term: int, index: int, body: bytes = b"") -> LogEntry:
    return LogEntry(term, index, index * 10 + term, WRITE, body or f"{term}/{index}".encode())


def test_log_read_range_and_truncate_across_segments(tmp_path):
    log = Log(str(tmp_path), segment_bytes=200)
    log.open_for_append(1)
    for i in range(1, 41):
        log.append(_e(1, i))
    assert len(log.segments()) > 3
    assert [e.index for e in log.read_range(7, 23)] == list(range(7, 24))
    log.truncate_after(25)
    assert log.last_index == 25
    for i in range(26, 31):
        log.append(_e(2, i))
    assert [(e.term, e.index) for e in log.read_range(24, 40)] == \
        [(1, 24), (1, 25)] + [(2, i) for i in range(26, 31)]
    log.close()
    log = Log(str(tmp_path), segment_bytes=200)
    got = [(e.term, e.index) for e in log.read_from(1)]
    assert got == [(1, i) for i in range(1, 26)] + [(2, i) for i in range(26, 31)]
    log.open_for_append(31)
    log.truncate_after(3)  # back into the first segment
    log.append(_e(3, 4))
    log.close()
    log = Log(str(tmp_path), segment_bytes=200)
    assert [(e.term, e.index) for e in log.read_from(1)] == [(1, 1), (1, 2), (1, 3), (3, 4)]
    log.reset(100)
    log.append(_e(4, 100))
    log.close()
    assert [e.index for e in Log(str(tmp_path)).read_from(1)] == [100]


@pytest.mark.parametrize("seed", range(3))
def test_wal_storage_matches_memory_oracle(tmp_path, seed):
    rng = random.Random(seed)
    path = str(tmp_path / "wal")
    wal = WalLogStorage(path, segment_bytes=600, cache_entries=8)
    mem = MemoryLogStorage()
    term = 1
    for step in range(120):
        r = rng.random()
        if r < 0.6:
            lo = max(mem.first_index, mem.last_index + 1 - rng.randrange(4))
            lo = max(lo, mem.durable_index + 1 - 2) if mem.durable_index else lo
            lo = max(lo, mem.first_index)
            term += rng.random() < 0.3
            batch = [_e(term, i) for i in range(lo, lo + 1 + rng.randrange(5))]
            wal.append(batch)
            mem.append(batch)
        elif r < 0.75:
            wal.sync()
            mem.sync()
        elif r < 0.85:
            below = rng.randint(1, mem.durable_index + 1)
            wal.gc(below)
            # the WAL frees whole segments only: the oracle GCs to where the WAL did
            mem.gc(wal.first_index)
        else:
            wal.sync()
            mem.sync()
            wal.close()
            wal = WalLogStorage(path, segment_bytes=600, cache_entries=8)
        assert (wal.first_index, wal.last_index) == (mem.first_index, mem.last_index)
        assert wal.term(wal.first_index - 1) == mem.term(mem.first_index - 1)
        if mem.last_index >= mem.first_index:
            lo = rng.randint(mem.first_index, mem.last_index)
            assert wal.entries(lo, mem.last_index) == mem.entries(lo, mem.last_index)
            i = rng.randint(mem.first_index, mem.last_index)
            assert (wal.term(i), wal.timestamp(i)) == (mem.term(i), mem.timestamp(i))
    wal.close()


def test_wal_storage_reset_survives_reopen(tmp_path):
    path = str(tmp_path / "wal")
    wal = WalLogStorage(path)
    wal.append([_e(1, i) for i in range(1, 6)])
    wal.sync()
    wal.reset(500, 7, 12345)
    wal.append([_e(7, 501), _e(8, 502)])
    wal.sync()
    wal.close()
    wal = WalLogStorage(path)
    assert (wal.first_index, wal.last_index) == (501, 502)
    assert (wal.term(500), wal.timestamp(500)) == (7, 12345)
    assert wal.term(499) is None
    assert [e.term for e in wal.entries(501, 502)] == [7, 8]
    wal.close()


def test_file_metadata_store_round_trip_and_atomic_replace(tmp_path):
    store = FileMetadataStore(str(tmp_path))
    assert store.load() is None
    cfg = RaftConfig(3, (RaftPeer("a"), RaftPeer("b", addr="127.0.0.1:7051")))
    store.save(ConsensusMetadata(4, "b", cfg))
    with open(os.path.join(tmp_path, CMETA_FILE + ".tmp"), "w") as f:
        f.write("{half a write")  # a crash mid-save leaves only the temporary file
    got = FileMetadataStore(str(tmp_path)).load()
    assert got == ConsensusMetadata(4, "b", cfg)


class DiskNode:
    """A replica whose Raft state lives in a directory: WAL + consensus-meta.json."""

    def __init__(self, root: str, uuid: str, config: RaftConfig, seed: int):
        self.dir = os.path.join(root, uuid)
        self.uuid, self.config, self.seed = uuid, config, seed
        self.applied: dict[int, LogEntry] = {}
        self.open()

    def open(self) -> None:
        self.log = WalLogStorage(os.path.join(self.dir, "wal"), segment_bytes=512)
        self.meta = FileMetadataStore(self.dir)
        cmeta = self.meta.load() or ConsensusMetadata(0, None, self.config)
        self.node = RaftConsensus(self.uuid, self.log, cmeta, LogicalClock(),
                                  random.Random(self.seed),
                                  RaftOptions(election_timeout_ticks=8))
        self.seed += 1000

    def crash(self) -> None:
        self.log.close()  # the process dies; what reached the OS stays
        self.node = None


def test_raft_over_real_wal_recovers_term_vote_and_log(tmp_path):
    cfg = RaftConfig(0, tuple(RaftPeer(f"d{i}") for i in range(3)))
    nodes = {f"d{i}": DiskNode(str(tmp_path), f"d{i}", cfg, i) for i in range(3)}
    queue: list = []

    def drive(n: DiskNode) -> None:
        while n.node is not None:
            rd = n.node.ready()
            if rd.empty():
                return
            if rd.metadata is not None:
                n.meta.save(rd.metadata)
            n.log.sync()
            n.node.log_synced()
            queue.extend(rd.messages)
            for e in rd.committed:
                n.applied[e.index] = e

    def run(ticks: int) -> None:
        for _ in range(ticks):
            for n in nodes.values():
                if n.node is not None:
                    n.node.tick()
                    drive(n)
            while queue:
                m = queue.pop(0)
                n = nodes[m.dest]
                if n.node is not None:
                    n.node.step(m)
                    drive(n)

    def leader() -> DiskNode:
        for _ in range(100):
            ls = [n for n in nodes.values() if n.node is not None and n.node.role == Role.LEADER]
            if len(ls) == 1:
                return ls[0]
            run(1)
        raise AssertionError("no leader")

    done = []
    for i in range(60):
        ld = leader()
        done.append(ld.node.propose(WRITE, f"op{i}".encode()))
        drive(ld)
        run(1)
        if i == 20:  # a follower dies and comes back from its directory
            f = next(n for n in nodes.values() if n is not ld)
            before = (f.node.term, f.node.voted_for, f.log.last_index)
            f.crash()
            f.open()
            assert (f.node.term, f.node.voted_for, f.log.last_index) == before
        if i == 40:  # the leader dies: a new one is elected, then it rejoins
            term = ld.node.term
            ld.crash()
            assert leader().node.term > term
            ld.open()
            assert ld.node.term == term and ld.node.role == Role.FOLLOWER
    run(20)
    ld = leader()
    for e in done:
        if ld.log.term(e.index) == e.term:
            assert all(n.applied[e.index] == e for n in nodes.values())
    logs = [[(n.log.term(i), n.log.timestamp(i)) for i in range(1, n.log.last_index + 1)]
            for n in nodes.values()]
    assert logs[0] == logs[1] == logs[2]
    assert sum(1 for e in done if ld.log.term(e.index) == e.term) >= 55
    for n in nodes.values():
        n.crash()
