"""What a SQL front end can learn about the cluster it runs on: servers and replicas.

    remote_catalog(catalog)  the RemoteCatalog under a (possibly wrapped) catalog, or None
                             in embedded mode
    list_replicas(rc)        every replica of every table, from the leader master's view
                             (its catalog + the tablet servers' last heartbeats): table,
                             tablet_id, partition (index in the table's tablet list), uuid,
                             addr, live, role, state, term, leader, member_type
    list_servers(rc)         every master (asked directly: `status`, answered by followers
                             too) and every tablet server the catalog knows (liveness, last
                             heartbeat and HTTP address as the leader master has them)

SHOW TABLETS and the kudu_system tables (planner/system_tables.py) read these. Each call is
one or a few RPCs; nothing is cached (these are operator queries, not a hot path).
"""

from __future__ import annotations

from typing import Any

from engine import errors
from engine.client.client import ClusterClient

MASTER_STATUS_TIMEOUT_S = 2.0


def remote_catalog(catalog: Any):
    """The RemoteCatalog a catalog (or a wrapper delegating to one) is, else None."""
    try:
        client = getattr(catalog, "client", None)
    except Exception:  # noqa: BLE001 - a wrapper may refuse unknown names
        return None
    return catalog if isinstance(client, ClusterClient) else None


def list_replicas(rc, timeout_s: float | None = None) -> list[dict]:
    return rc.client.master_call("list_replicas", timeout_s=timeout_s)


def list_servers(rc) -> list[dict]:
    client: ClusterClient = rc.client
    out = []
    for addr in client.masters:
        row = {"uuid": addr, "role": "master", "rpc_addr": addr, "http_addr": None,
               "live": False, "raft_role": None, "term": None, "last_heartbeat_s": None}
        try:
            st = client.rpc.call(addr, "status", timeout_s=MASTER_STATUS_TIMEOUT_S)
            row.update(uuid=st["uuid"], live=True, raft_role=st.get("raft_role"),
                       term=st.get("term"), http_addr=st.get("http_addr"))
        except errors.EngineError:
            pass  # down or unreachable: listed as not live
        out.append(row)
    for t in client.master_call("list_tservers"):
        out.append({"uuid": t["uuid"], "role": "tserver", "rpc_addr": t["addr"],
                    "http_addr": t.get("http_addr"), "live": t["live"], "raft_role": None,
                    "term": None, "last_heartbeat_s": t.get("last_heartbeat_s")})
    return out
