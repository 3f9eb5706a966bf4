"""Raft messages and configurations: plain frozen dataclasses, no I/O.

Names follow Kudu's consensus.proto where one exists:

    VoteRequest / VoteResponse     RequestConsensusVote (pre_vote = Kudu's pre-election,
                                   transfer = the "ignore live leader" flag of a
                                   leadership transfer)
    AppendEntries / AppendResponse UpdateConsensus (ConsensusRequestPB / ConsensusResponsePB):
                                   a batch of log entries after `prev`, the leader's commit
                                   index and its all-replicated index (for log GC); the
                                   leader's monotonic send time, echoed in the answer
                                   (`lease_sent` / `lease_echo`: leader leases, raft.py)
    TimeoutNow                     RunLeaderElection sent by a leader handing over
    StartTabletCopy                the leader asks a replica it can no longer feed from its
                                   log (the entries were GC'd) to copy the tablet from it
    BeginTabletCopySession,        the copy itself, pulled by the new replica from the source
    FetchData, EndTabletCopySession (tablet_copy.proto); the cluster layer carries them, the
                                   Raft node only sees the result (`install_tablet_copy`)

A `RaftConfig` is the set of peers with their member type (VOTER or NON_VOTER; a NON_VOTER
is Kudu's learner, shown as LEARNER) and the attributes of Kudu's 3-4-3 re-replication:
`promote` (promote to VOTER once caught up) and `replace` (evict once a promoted
replacement is a VOTER). It travels in CHANGE_CONFIG log entries as JSON.

Every message names its source and destination peer (`src`, `dest`: uuids) and carries the
sender's term, so a host only routes; the node validates.
"""

from __future__ import annotations

import dataclasses
import enum
import json

from engine.consensus.log import LogEntry


class MemberType(enum.IntEnum):
    VOTER = 1
    NON_VOTER = 2  # a learner: receives the log, does not vote or count for commit


@dataclasses.dataclass(frozen=True)
class RaftPeer:
    uuid: str
    member_type: MemberType = MemberType.VOTER
    promote: bool = False  # NON_VOTER: promote to VOTER once caught up
    replace: bool = False  # VOTER: remove once a promoted replacement is a VOTER
    addr: str = ""  # host:port for the cluster layer; unused by the node

    def to_dict(self) -> dict:
        return {"uuid": self.uuid, "member_type": self.member_type.name,
                "promote": self.promote, "replace": self.replace, "addr": self.addr}

    @staticmethod
    def from_dict(d: dict) -> "RaftPeer":
        return RaftPeer(d["uuid"], MemberType[d["member_type"]], d.get("promote", False),
                        d.get("replace", False), d.get("addr", ""))


@dataclasses.dataclass(frozen=True)
class RaftConfig:
    """A configuration; `opid_index` is the index of the CHANGE_CONFIG entry that set it
    (0 for the initial configuration written when the tablet was created)."""

    opid_index: int
    peers: tuple[RaftPeer, ...]

    def peer(self, uuid: str) -> RaftPeer | None:
        for p in self.peers:
            if p.uuid == uuid:
                return p
        return None

    def voters(self) -> list[str]:
        return [p.uuid for p in self.peers if p.member_type == MemberType.VOTER]

    def is_voter(self, uuid: str) -> bool:
        p = self.peer(uuid)
        return p is not None and p.member_type == MemberType.VOTER

    def majority(self) -> int:
        return len(self.voters()) // 2 + 1

    def to_dict(self) -> dict:
        return {"opid_index": self.opid_index, "peers": [p.to_dict() for p in self.peers]}

    @staticmethod
    def from_dict(d: dict) -> "RaftConfig":
        return RaftConfig(d["opid_index"], tuple(RaftPeer.from_dict(p) for p in d["peers"]))

    def encode(self) -> bytes:
        return json.dumps(self.to_dict(), sort_keys=True).encode()

    @staticmethod
    def decode(body: bytes, opid_index: int) -> "RaftConfig":
        return dataclasses.replace(RaftConfig.from_dict(json.loads(body)), opid_index=opid_index)


@dataclasses.dataclass(frozen=True, order=True)
class OpId:
    term: int
    index: int


@dataclasses.dataclass(frozen=True)
class VoteRequest:
    src: str
    dest: str
    term: int  # for a pre-vote: the term the candidate would start
    last_log: OpId
    pre_vote: bool = False
    transfer: bool = False  # sent after TimeoutNow: voters ignore their live leader


@dataclasses.dataclass(frozen=True)
class VoteResponse:
    src: str
    dest: str
    term: int  # granted: the request's term; refused: the voter's term
    granted: bool
    pre_vote: bool = False


@dataclasses.dataclass(frozen=True)
class AppendEntries:
    src: str
    dest: str
    term: int
    prev: OpId
    entries: tuple[LogEntry, ...]
    committed_index: int
    all_replicated_index: int  # every peer has the log up to here: followers GC below it
    lease_sent: float = 0.0  # the leader's monotonic clock when it built this message; the
    # follower echoes it (leader leases, raft.py); meaningless on any other node


@dataclasses.dataclass(frozen=True)
class AppendResponse:
    src: str
    dest: str
    term: int
    success: bool
    match_index: int  # success: the follower's log matches the leader's up to here
    last_index: int  # the follower's last log index
    committed_index: int  # the follower's commit index
    retry_index: int = 0  # refused: resend from here (its last index + 1 if it lacks `prev`,
    # else its commit index + 1: Kudu's one-round-trip jump back over a divergent suffix)
    lease_echo: float = 0.0  # the `lease_sent` of the AppendEntries this answers (0: none)


@dataclasses.dataclass(frozen=True)
class TimeoutNow:
    src: str
    dest: str
    term: int


@dataclasses.dataclass(frozen=True)
class StartTabletCopy:
    """Leader -> replica: copy the tablet from `src` (the caller's term guards staleness)."""

    src: str
    dest: str
    term: int
    tablet_id: str = ""
    copy_peer_addr: str = ""


Message = VoteRequest | VoteResponse | AppendEntries | AppendResponse | TimeoutNow | \
    StartTabletCopy


# -- tablet copy session (carried by the cluster layer; Kudu's tablet_copy.proto) ---------
@dataclasses.dataclass(frozen=True)
class BeginTabletCopySession:
    requestor_uuid: str
    tablet_id: str


@dataclasses.dataclass(frozen=True)
class TabletCopySessionInfo:
    """The source's answer: what the copy consists of. `last_opid` is the op the copied
    data files reflect (every op up to it is applied in them); the log segments hold the
    entries after it; the new replica installs them with
    `RaftConsensus.install_tablet_copy(last_opid, committed_config, log_suffix)`."""

    session_id: str
    tablet_id: str
    superblock: bytes  # the tablet metadata file (rowsets, schema, flushed indexes)
    data_files: tuple[str, ...]  # paths relative to the tablet directory
    wal_segments: tuple[str, ...]
    last_opid: OpId
    committed_config: RaftConfig
    source_term: int


@dataclasses.dataclass(frozen=True)
class FetchData:
    session_id: str
    file: str
    offset: int
    max_length: int


@dataclasses.dataclass(frozen=True)
class DataChunk:
    file: str
    offset: int
    data: bytes
    total_size: int
    crc32: int


@dataclasses.dataclass(frozen=True)
class EndTabletCopySession:
    session_id: str
    success: bool
