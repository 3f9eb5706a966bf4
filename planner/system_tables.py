"""kudu_system: the servers and tablet replicas of the database, as SQL tables.

    SELECT * FROM kudu_system.servers
    SELECT table_name, tablet_id, rpc_addr, role, state FROM kudu_system.replicas
      WHERE role = 'LEADER'

Name resolution: the binder turns a schema-qualified name `kudu_system.servers` into the
one identifier `kudu_system$servers` (planner/binder/bind.py) and asks the catalog for it;
`SystemTables` wraps the session's catalog (Session does it for every session, embedded
and wire) and answers those names itself, delegating everything else. The schema name is
`kudu_system` rather than Kudu's `sys` or PostgreSQL's `pg_stat_*` so that it can collide
neither with a user table (a bare name never resolves here) nor with the pg_catalog views
the wire server adds. The tables are read-only (42809), rebuilt on every scan (operator
queries: a few RPCs to the masters, nothing cached), and the planner filters, joins and
aggregates them like any system view (`virtual`).

    servers   uuid, role (master | tserver | embedded), rpc_addr, http_addr, live,
              raft_role (a master's role in the sys catalog's Raft group), term,
              last_heartbeat_s (a tablet server's, as the leader master sees it),
              replicas, leaders (tablet replicas it hosts / leads)
    replicas  table_name, tablet_id, partition (SHOW TABLETS' text), server_uuid, rpc_addr,
              role (LEADER | FOLLOWER | LEARNER | UNKNOWN), state (RUNNING, BOOTSTRAPPING,
              COPYING, STOPPED, FAILED, INITIALIZED: engine/tserver/status.py), term, live

On a cluster they come from the leader master (engine/client/cluster_info.py): the
catalog's placement plus each tablet server's last heartbeat, so a role is as fresh as the
last heartbeat (500 ms with `cluster start`). Embedded, there is one server (uuid
`embedded`, role `embedded`, the HTTP address of `serve --http-port` if any) holding one
replica of every tablet, role LEADER; its state is RUNNING when the tablet is open in this
process and CLOSED when it has not been opened yet (it opens on first use).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from engine.client.cluster_info import list_replicas, list_servers, remote_catalog
from engine.schema import ColumnSchema, Schema
from engine.types import DataType
from planner.errors import SqlError
from planner.utility import partition_text

SCHEMA_NAME = "kudu_system"

_T = {"string": (DataType.STRING, pa.string()), "bool": (DataType.BOOL, pa.bool_()),
      "int64": (DataType.INT64, pa.int64()), "double": (DataType.DOUBLE, pa.float64())}

TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "servers": (("uuid", "string"), ("role", "string"), ("rpc_addr", "string"),
                ("http_addr", "string"), ("live", "bool"), ("raft_role", "string"),
                ("term", "int64"), ("last_heartbeat_s", "double"), ("replicas", "int64"),
                ("leaders", "int64")),
    "replicas": (("table_name", "string"), ("tablet_id", "string"), ("partition", "string"),
                 ("server_uuid", "string"), ("rpc_addr", "string"), ("role", "string"),
                 ("state", "string"), ("term", "int64"), ("live", "bool")),
}


def _schema(cols) -> Schema:
    out = [ColumnSchema(n, _T[t][0], nullable=i > 0) for i, (n, t) in enumerate(cols)]
    return Schema(out, key=[out[0].name])


_SCHEMAS = {name: _schema(cols) for name, cols in TABLES.items()}


class SystemTable:
    """One kudu_system table: what the planner scans (`virtual`, like pg_catalog views)."""

    virtual = True

    def __init__(self, owner: "SystemTables", name: str):
        self._owner = owner
        self._name = name
        self.name = f"{SCHEMA_NAME}${name}"
        self.schema = _SCHEMAS[name]

    def to_arrow(self, columns: list[str]) -> pa.Table:
        rows = self._owner.rows(self._name)
        cols = TABLES[self._name]
        t = pa.table({n: pa.array([r.get(n) for r in rows], _T[typ][1]) for n, typ in cols})
        return t.select(columns)

    def _refuse(self, *args, **kwargs):
        raise SqlError(f'cannot change system table "{SCHEMA_NAME}.{self._name}"', "42809")

    insert = upsert = update = delete = write = scan = diff_scan = _refuse

    def __repr__(self) -> str:
        return f"SystemTable({SCHEMA_NAME}.{self._name})"


def _system_name(name: str) -> str | None:
    """`kudu_system$x` (the binder's form) or `kudu_system.x` (utility statements') -> x."""
    if name.startswith((SCHEMA_NAME + "$", SCHEMA_NAME + ".")):
        return name[len(SCHEMA_NAME) + 1:]
    return None


class SystemTables:
    """A catalog plus the kudu_system tables (module docstring). `db` is the Database
    (its engine catalog, and `http_addr` when `serve --http-port` runs)."""

    def __init__(self, catalog: Any, db: Any = None):
        self._catalog = catalog
        self._db = db

    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)

    @property
    def catalog_source(self) -> Any:
        """The catalog whose `catalog_version` numbers what this one shows (the wrapped
        one's source): read once by the plan cache instead of through `__getattr__`."""
        return getattr(self._catalog, "catalog_source", self._catalog)

    def has_table(self, name: str) -> bool:
        sys_name = _system_name(name)
        if sys_name is not None:
            return sys_name in TABLES
        return self._catalog.has_table(name)

    def table(self, name: str) -> Any:
        sys_name = _system_name(name)
        if sys_name is not None:
            if sys_name not in TABLES:
                raise SqlError(f'relation "{SCHEMA_NAME}.{sys_name}" does not exist', "42P01")
            return SystemTable(self, sys_name)
        return self._catalog.table(name)

    def _refuse_ddl(method: str):
        def call(self, name, *args, **kwargs):
            if _system_name(name) is not None:
                raise SqlError(f'permission denied: "{name.replace("$", ".")}" is a system '
                               f'table', "42501")
            return getattr(self._catalog, method)(name, *args, **kwargs)
        call.__name__ = method
        return call

    drop_table = _refuse_ddl("drop_table")
    rename_table = _refuse_ddl("rename_table")
    add_column = _refuse_ddl("add_column")
    drop_column = _refuse_ddl("drop_column")
    rename_column = _refuse_ddl("rename_column")
    set_properties = _refuse_ddl("set_properties")
    del _refuse_ddl

    # -- rows --------------------------------------------------------------------------------
    def _engine_catalog(self) -> Any:
        return getattr(self._db, "catalog", None) if self._db is not None else self._catalog

    def rows(self, name: str) -> list[dict]:
        cat = self._engine_catalog()
        rc = remote_catalog(cat)
        if rc is not None:
            replicas = _cluster_replicas(rc)
            if name == "replicas":
                return replicas
            servers = list_servers(rc)
        else:
            replicas = _embedded_replicas(cat)
            if name == "replicas":
                return replicas
            servers = [{"uuid": "embedded", "role": "embedded", "rpc_addr": None,
                        "http_addr": getattr(self._db, "http_addr", None), "live": True}]
        for s in servers:
            if s["role"] != "master":
                mine = [r for r in replicas if r["server_uuid"] == s["uuid"]]
                s["replicas"] = len(mine)
                s["leaders"] = sum(1 for r in mine if r["role"] == "LEADER")
        return servers


def _partition_texts(meta) -> dict[str, str]:
    """tablet id -> SHOW TABLETS' partition text."""
    ps = meta.partition_schema
    return {tid: partition_text(ps, p) for p, tid in meta.tablets()}


def _cluster_replicas(rc) -> list[dict]:
    texts: dict[str, dict[str, str]] = {}
    out = []
    for r in list_replicas(rc):
        if r["table"] not in texts:
            try:
                texts[r["table"]] = _partition_texts(rc.get_table(r["table"]))
            except Exception:  # noqa: BLE001 - dropped meanwhile: no partition text
                texts[r["table"]] = {}
        out.append({"table_name": r["table"], "tablet_id": r["tablet_id"],
                    "partition": texts[r["table"]].get(r["tablet_id"]),
                    "server_uuid": r["uuid"], "rpc_addr": r["addr"], "role": r["role"],
                    "state": r["state"], "term": r["term"], "live": r["live"]})
    return out


def _embedded_replicas(cat) -> list[dict]:
    out = []
    open_tablet = getattr(cat, "open_tablet", None)   # the embedded Catalog's
    for name in cat.list_tables():
        meta = cat.get_table(name)
        for tid, text in _partition_texts(meta).items():
            is_open = open_tablet is not None and open_tablet(tid) is not None
            out.append({"table_name": name, "tablet_id": tid, "partition": text,
                        "server_uuid": "embedded", "rpc_addr": None, "role": "LEADER",
                        "state": "RUNNING" if is_open else "CLOSED", "term": None,
                        "live": True})
    return out
