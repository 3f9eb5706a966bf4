"""A tablet server's status as the master, `cluster status` and the status page see it.

Replica states (reported in heartbeats; the master keeps the last report per replica):

    RUNNING        serving its role: a leader takes writes and reads, a follower applies
                   what the leader commits
    BOOTSTRAPPING  opened with log entries past its applied state and no leader known yet:
                   those entries wait until a leader tells it the commit index (after a
                   restart, docs/cluster.md "Restart")
    COPYING        copying the tablet from the leader (its log was GC'd past what it needs)
    STOPPED        shut down (the server is stopping, or the replica is being deleted)
    TOMBSTONED     deleted by the master, its consensus metadata kept (term, vote,
                   committed configuration; tablet_server.py `_h_delete`): no data, no
                   reads or writes, no Raft traffic (it answers no vote)

Every report carries the replica's committed configuration (`committed_config_index`: the
index of the entry that set it, 0 for the initial one; `committed_peers`) besides the
active one (`peers`): the master records only committed configurations, and tombstones a
replica only if its committed configuration is older than the one the master knows
(master.py, "Deleting replicas").

The master adds FAILED (the replica's server missed heartbeats for the unresponsive
timeout) and INITIALIZED (placed in the catalog, not yet reported by its server).
"""

from __future__ import annotations

import os
import time

from engine.metrics.metrics import dir_bytes, maintenance_rows, process_status


RUNNING, BOOTSTRAPPING, COPYING, STOPPED = "RUNNING", "BOOTSTRAPPING", "COPYING", "STOPPED"
TOMBSTONED = "TOMBSTONED"


def replica_state(r) -> str:
    if r.stopped:
        return STOPPED
    if r.copying:
        return COPYING
    raft = r.raft
    if raft.leader_uuid is None and r.storage.last_index > raft.last_applied:
        return BOOTSTRAPPING
    return RUNNING


def replica_report(r) -> dict:
    """What a heartbeat reports of one replica: its Raft status, state and the schema
    version its tablet has applied (ALTER TABLE)."""
    return dict(r.status(), state=replica_state(r), schema_version=r.tablet.schema_version)


def tombstone_report(t: dict) -> dict:
    """What a heartbeat reports of a tombstone (TabletServer.tombstones' entry)."""
    return {"state": TOMBSTONED, "role": "NONE", "term": t["term"], "leader": None,
            "member_type": "NONE", "committed_config_index": t["committed_config_index"],
            "committed_peers": list(t["committed_peers"])}


def web_status(ts) -> dict:
    """The status page's data for a TabletServer (engine/metrics/webserver.py)."""
    tablets = []
    for tid, r in sorted(list(ts.replicas.items()), key=lambda x: (x[1].table_name, x[0])):
        st = r.status()
        tablets.append({"tablet_id": tid, "table": r.table_name, "role": st["role"],
                        "state": replica_state(r), "term": st["term"],
                        "leader": st["leader"], "commit_index": st["commit_index"],
                        "applied_index": st["applied_index"],
                        "wal_bytes": dir_bytes(os.path.join(r.directory, "raft-wal")),
                        "peers": st["peers"]})
    last = ts.last_heartbeat
    return {"role": "tserver", "uuid": ts.uuid, "rpc_addr": ts.addr,
            "http_addr": ts.http.addr if ts.http is not None else None,
            **process_status(ts.metrics), "masters": ", ".join(ts.masters),
            "heartbeat_age_s": None if last is None else round(time.monotonic() - last, 3),
            "tablets": tablets, "maintenance": maintenance_rows(ts.mm),
            "tombstones": [{"tablet_id": tid, "table": t["table_name"], "term": t["term"],
                            "committed_config_index": t["committed_config_index"]}
                           for tid, t in sorted(list(ts.tombstones.items()))]}
