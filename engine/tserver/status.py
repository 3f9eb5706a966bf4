"""A tablet server's status as the master, `cluster status` and the status page see it.

Replica states (reported in heartbeats; the master keeps the last report per replica):

    RUNNING        serving its role: a leader takes writes and reads, a follower applies
                   what the leader commits
    BOOTSTRAPPING  opened with log entries past its applied state and no leader known yet:
                   those entries wait until a leader tells it the commit index (after a
                   restart, docs/cluster.md "Restart")
    COPYING        copying the tablet from the leader (its log was GC'd past what it needs)
    STOPPED        shut down (the server is stopping, or the replica is being deleted)
    FAILED         stopped for good, with the reason (`error`): it could not be opened at
                   start (corrupt or unreadable files: a `FailedReplica`, its files kept
                   untouched), or its Raft core hit a safety violation, an apply raised,
                   its disk failed (the log's fsync or write) or a tablet copy install
                   failed half-way (RaftHost.fail). It neither votes nor serves; its role
                   is reported as UNKNOWN. Restarting the server opens it again. The
                   master replaces it in its group (3-4-3, as a dead server's) when a
                   live server is free, and tombstones it once evicted if it reports a
                   committed configuration (one that failed while running); a
                   `delete_replica` keeps its consensus metadata as a tombstone when it
                   can still be read, and removes the directory otherwise or on DROP.
    TOMBSTONED     deleted by the master, its consensus metadata kept (term, vote,
                   committed configuration; tablet_server.py `_h_delete`): no data, no
                   reads or writes, no Raft traffic (it answers no vote)

Every report carries the replica's committed configuration (`committed_config_index`: the
index of the entry that set it, 0 for the initial one; `committed_peers`) besides the
active one (`peers`): the master records only committed configurations, and tombstones a
replica only if its committed configuration is older than the one the master knows
(master.py, "Deleting replicas").

The master also reports FAILED for every replica of a server that missed heartbeats for
the unresponsive timeout, and INITIALIZED (placed in the catalog, not yet reported by its
server).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from engine.metrics.metrics import dir_bytes, maintenance_rows, process_status


RUNNING, BOOTSTRAPPING, COPYING, STOPPED = "RUNNING", "BOOTSTRAPPING", "COPYING", "STOPPED"
TOMBSTONED = "TOMBSTONED"
FAILED = "FAILED"


@dataclasses.dataclass(frozen=True)
class FailedReplica:
    """A replica its server could not open at start (TabletServer): reported FAILED with
    the error; its directory is left as it was found."""

    tablet_id: str
    directory: str
    error: str
    table_name: str = "?"

    @staticmethod
    def of(tablet_id: str, directory: str, exc: BaseException) -> "FailedReplica":
        name = "?"
        try:  # the table's name, if the replica's own file can still be read
            with open(os.path.join(directory, "replica.json")) as f:
                name = json.load(f).get("table_name", "?")
        except (OSError, ValueError, AttributeError):
            pass
        return FailedReplica(tablet_id, directory, f"{type(exc).__name__}: {exc}", name)


def replica_state(r) -> str:
    if isinstance(r, FailedReplica) or r.failed is not None:
        return FAILED
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
    version its tablet has applied (ALTER TABLE); a FAILED one: role UNKNOWN (never
    LEADER: nobody may route to it) and the `error`."""
    if isinstance(r, FailedReplica):
        return {"role": "UNKNOWN", "state": "FAILED", "error": r.error, "term": None,
                "leader": None, "peers": []}
    rep = dict(r.status(), state=replica_state(r), schema_version=r.tablet.schema_version)
    if r.failed is not None:
        rep.update(role="UNKNOWN", error=r.failed)
    return rep


def tombstone_report(t: dict) -> dict:
    """What a heartbeat reports of a tombstone (TabletServer.tombstones' entry)."""
    return {"state": TOMBSTONED, "role": "NONE", "term": t["term"], "leader": None,
            "member_type": "NONE", "committed_config_index": t["committed_config_index"],
            "committed_peers": list(t["committed_peers"])}


def web_status(ts) -> dict:
    """The status page's data for a TabletServer (engine/metrics/webserver.py)."""
    tablets = []
    every = list(ts.replicas.items()) + list(ts.failed_replicas.items())
    for tid, r in sorted(every, key=lambda x: (x[1].table_name, x[0])):
        wal_bytes = dir_bytes(os.path.join(r.directory, "raft-wal"))
        if isinstance(r, FailedReplica):
            tablets.append({"tablet_id": tid, "table": r.table_name, "role": "UNKNOWN",
                            "state": "FAILED", "wal_bytes": wal_bytes, "error": r.error})
            continue
        st = replica_report(r)
        tablets.append({"tablet_id": tid, "table": r.table_name, "role": st["role"],
                        "state": st["state"], "term": st["term"],
                        "leader": st["leader"], "commit_index": st["commit_index"],
                        "applied_index": st["applied_index"],
                        "wal_bytes": wal_bytes, "peers": st["peers"],
                        **({"error": st["error"]} if "error" in st else {})})
    last = ts.last_heartbeat
    return {"role": "tserver", "uuid": ts.uuid, "rpc_addr": ts.addr,
            "http_addr": ts.http.addr if ts.http is not None else None,
            **process_status(ts.metrics), "masters": ", ".join(ts.masters),
            "heartbeat_age_s": None if last is None else round(time.monotonic() - last, 3),
            "tablets": tablets, "maintenance": maintenance_rows(ts.mm),
            "tombstones": [{"tablet_id": tid, "table": t["table_name"], "term": t["term"],
                            "committed_config_index": t["committed_config_index"]}
                           for tid, t in sorted(list(ts.tombstones.items()))]}
