"""PeerMessageQueue: the leader's view of how far each peer has the log (Kudu's name).

Per peer (voters and NON_VOTER learners alike):

    next_index     the next entry to send; advanced optimistically when a batch is sent,
                   so several AppendEntries can be in flight (pipelining)
    match_index    the peer's log is known to equal the leader's up to here (from acks)
    inflight       batches sent and not yet acknowledged (at most `max_inflight`; 1 while
                   probing, i.e. after a refusal until the next success)
    last_ack_tick  when the peer last answered (check-quorum, stale-peer detection)
    copy_sent_tick when StartTabletCopy was last sent (re-sent after an election timeout)

Derived values: the majority-replicated index of a configuration (what the leader may
commit, if the entry there is of its own term) and the all-replicated index (below which
no peer needs the log; followers learn it in AppendEntries and GC below it).
"""

from __future__ import annotations

import dataclasses

from engine.consensus.messages import RaftConfig


@dataclasses.dataclass
class PeerProgress:
    next_index: int
    match_index: int = 0
    inflight: int = 0
    probing: bool = True
    last_ack_tick: int = 0
    copy_sent_tick: int | None = None
    # when the leader built the message whose success last raised match_index (its
    # `lease_sent`, echoed back): a refusal of a message built later that reports a log
    # shorter than match_index means the peer lost what it acked (RaftConsensus)
    match_sent: float = float("-inf")


class PeerMessageQueue:
    def __init__(self, local_uuid: str):
        self.local_uuid = local_uuid
        self.peers: dict[str, PeerProgress] = {}

    def reset(self, config: RaftConfig, next_index: int, tick: int) -> None:
        self.peers = {}
        self.track(config, next_index, tick)

    def track(self, config: RaftConfig, next_index: int, tick: int) -> None:
        """Follow the peers of `config`: new ones start probing at next_index, removed
        ones are forgotten."""
        want = [p.uuid for p in config.peers if p.uuid != self.local_uuid]
        self.peers = {u: self.peers.get(u) or PeerProgress(next_index, last_ack_tick=tick)
                      for u in want}

    def majority_replicated(self, config: RaftConfig, local_durable: int) -> int:
        matches = sorted((local_durable if v == self.local_uuid else
                          (self.peers[v].match_index if v in self.peers else 0))
                         for v in config.voters())
        if not matches:
            return 0
        return matches[len(matches) - config.majority()]

    def all_replicated(self, local_durable: int) -> int:
        return min([local_durable] + [p.match_index for p in self.peers.values()])

    def live_voters(self, config: RaftConfig, since_tick: int) -> int:
        """Voters heard from since `since_tick`, counting the leader itself."""
        n = 0
        for v in config.voters():
            if v == self.local_uuid or (v in self.peers
                                        and self.peers[v].last_ack_tick >= since_tick):
                n += 1
        return n
