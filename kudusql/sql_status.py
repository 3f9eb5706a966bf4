"""The SQL front end's status page data (`kudusql serve --http-port`, engine/metrics).

Embedded (`serve --data-dir`): the process is the whole database, so the page lists every
tablet (role LEADER: the only replica; state RUNNING when open in this process, CLOSED
before its first use), with its MemRowSet rows and WAL bytes, and the maintenance
manager's ops. Over a cluster (`serve --masters`): the masters it talks to and every
replica as the leader master reports it (one RPC per page view), or the error if no
master answers.
"""

from __future__ import annotations

import os

from engine.client.cluster_info import list_replicas, remote_catalog
from engine.metrics.metrics import dir_bytes, maintenance_rows, process_status


def _embedded_tablets(cat) -> list[dict]:
    out = []
    open_tablet = getattr(cat, "open_tablet", None)   # the embedded Catalog's
    for name in cat.list_tables():
        meta = cat.get_table(name)
        for tid in meta.tablet_ids:
            t = open_tablet(tid) if open_tablet is not None else None
            out.append({"tablet_id": tid, "table": name, "role": "LEADER",
                        "state": "RUNNING" if t is not None else "CLOSED",
                        "memrowset_rows": t.mrs_rows() if t is not None else None,
                        "rowsets": t.num_rowsets() if t is not None else None,
                        "wal_bytes": dir_bytes(os.path.join(cat.tablet_path(tid), "wal"))})
    return out


def sql_status(db, http, masters, ask_master: bool = True) -> dict:
    """`ask_master` False: no RPC (a Prometheus scrape must not wait for a master)."""
    st = {"role": "sql", "http_addr": None if http is None else http.addr,
          **process_status(db.metrics)}
    rc = remote_catalog(db.catalog)
    if rc is None:
        st["mode"] = "embedded"
        st["data_dir"] = getattr(db.catalog, "data_dir", None)
        st["tablets"] = _embedded_tablets(db.catalog)
        st["maintenance"] = maintenance_rows(db.maintenance)
        return st
    st["mode"] = "cluster"
    st["masters"] = ", ".join(masters or rc.client.masters)
    if not ask_master:
        return st
    try:
        st["replicas"] = [{k: r[k] for k in ("table", "tablet_id", "uuid", "addr", "role",
                                             "state", "term", "live")}
                          for r in list_replicas(rc, timeout_s=5.0)]
    except Exception as e:  # noqa: BLE001 - shown on the page: no master answers
        st["replicas_error"] = str(e)
    return st
