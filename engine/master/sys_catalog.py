"""SysCatalog: the cluster catalog as a replicated state machine (Kudu's sys catalog).

The state — tables (their `TableMetadata` in its catalog.json form), each tablet's replica
placement (tablet id -> tablet-server uuids), and the tablet servers ever registered (uuid
-> RPC address) — changes only by CATALOG entries of the masters' Raft log (a JSON op per
entry), applied in log order on every master:

    {"op": "put_table", "table": {...}, "replicas": {tablet_id: [uuid, ...]}}
        (CREATE TABLE, ALTER TABLE: tablets named for the first time are new, e.g. ADD
        RANGE PARTITION's; tablets the previous entry named and this one does not are
        forgotten, DROP RANGE PARTITION's)
    {"op": "drop_table", "id": table_id}
    {"op": "set_replicas", "tablet_id": t, "replicas": [uuid, ...]}   (re-replication)
    {"op": "register_tserver", "uuid": u, "addr": a}

The state lives in memory; a restarting master rebuilds it by applying the log again, from
index 1, once the Raft group has told it the commit index (RaftHost: nothing merely logged
is applied). The log of a catalog is small (one entry per DDL and per new server) and is
never GC'd. With one master the group has one voter (it elects itself); with three, DDL
needs a majority of masters and any of them can take over.

`propose(op)` (leader only) returns once the entry is applied here, or raises NotLeader.
"""

from __future__ import annotations

import concurrent.futures as cf
import json

from engine.consensus.log import LogEntry
from engine.consensus.raft import NotLeader
from engine.rpc.rpc import RemoteError
from engine.tserver.raft_host import RaftHost

CATALOG = 5  # a Raft log entry type: one JSON catalog op


class SysCatalog(RaftHost):
    def __init__(self, *args, **kwargs):
        self.tables: dict[str, dict] = {}
        self.replicas: dict[str, list[str]] = {}  # tablet id -> tserver uuids
        self.initial: dict[str, list[str]] = {}  # tablet id -> the uuids it was created on
        # tablet id -> (schema dict, schema version) it was created with: what a replica
        # added later starts from, since it replays the tablet's log from the beginning
        # (or gets a tablet copy); the first put_table naming the tablet sets it
        self.created: dict[str, tuple[dict, int]] = {}
        self.tservers: dict[str, str] = {}  # uuid -> addr
        self._waiters: dict[int, tuple[int, cf.Future]] = {}
        super().__init__(*args, applied_index=0, **kwargs)

    def apply_entries(self, entries: list[LogEntry]) -> None:
        for e in entries:
            if e.type == CATALOG:
                self._apply(json.loads(e.body))
            w = self._waiters.pop(e.index, None)
            if w is not None:
                term, fut = w
                if term == e.term:
                    fut.set_result(e.index)
                else:
                    fut.set_exception(NotLeader("the catalog change was lost in a master "
                                                "leader change; retry"))

    def _apply(self, op: dict) -> None:
        kind = op["op"]
        if kind == "put_table":
            t = op["table"]
            old = self.tables.get(t["id"])
            self.tables[t["id"]] = t
            self.replicas.update(op.get("replicas", {}))
            self.initial.update(op.get("replicas", {}))
            ids = {x["tablet_id"] for x in t["tablets"]}
            for x in t["tablets"]:  # a tablet's first entry: the schema it is created with
                self.created.setdefault(x["tablet_id"], (t["schema"],
                                                         t.get("schema_version", 0)))
            if old is not None:  # DROP RANGE PARTITION: the range's tablets go
                for x in old["tablets"]:
                    if x["tablet_id"] not in ids:
                        self._forget_tablet(x["tablet_id"])
        elif kind == "set_replicas":
            if op["tablet_id"] in self.replicas:
                self.replicas[op["tablet_id"]] = list(op["replicas"])
        elif kind == "drop_table":
            t = self.tables.pop(op["id"], None)
            if t is not None:
                for x in t["tablets"]:
                    self._forget_tablet(x["tablet_id"])
        elif kind == "register_tserver":
            self.tservers[op["uuid"]] = op["addr"]

    def _forget_tablet(self, tid: str) -> None:
        self.replicas.pop(tid, None)
        self.initial.pop(tid, None)
        self.created.pop(tid, None)

    def after_process(self) -> None:
        if not self.raft.is_leader and self._waiters:
            for _, fut in self._waiters.values():
                fut.set_exception(NotLeader("this master lost leadership; retry",
                                            self.raft.leader_uuid))
            self._waiters.clear()

    def ready_leader(self) -> bool:
        """Leads and has applied an entry of its term (the state is complete)."""
        with self.lock:
            r = self.raft
            return r.is_leader and self.storage.term(r.last_applied) == r.term

    def propose(self, op: dict, timeout_s: float = 10.0) -> None:
        with self.lock:
            if not self.ready_leader():
                raise RemoteError("this master is not the leader", self.raft.leader_uuid)
            entry = self.raft.propose(CATALOG, json.dumps(op).encode())
            fut = cf.Future()
            self._waiters[entry.index] = (entry.term, fut)
            self.process()
        try:
            fut.result(timeout=timeout_s)
        except cf.TimeoutError:
            raise RemoteError("the catalog change was not replicated to a majority of "
                              "masters in time; retry") from None
