"""The tablet server (docs/cluster.md): replicas of tablets, each a Raft peer.

    raft_host.py      RaftHost: runs one RaftConsensus over a WAL, handles its Ready in the
                      persistence order of docs/consensus.md; Transport: ships Raft messages
                      to peers over RPC (shared with the master's sys catalog); a safety
                      violation or failed apply stops the peer (FAILED)
    tablet_replica.py TabletReplica: RaftHost + Tablet + result tracker
    result_tracker.py exactly-once writes: the apply-time decision (duplicate, STALE, apply)
                      from the log alone, and its checkpoints in the tablet directory
    tablet_copy.py    tablet copy: source sessions (hard-linked files), the fetch loop and
                      the atomic install (staging, one-rename commit, recovery at open)
    tablet_server.py  TabletServer: the process (RPC handlers, tick loop, heartbeats)
    status.py         replica states (RUNNING, BOOTSTRAPPING, COPYING, STOPPED, FAILED),
                      FailedReplica (could not be opened), the heartbeat's replica report
                      and the status page's data
"""
