"""SysCatalog: the cluster catalog as a replicated state machine (Kudu's sys catalog).

The state — tables (their `TableMetadata` in its catalog.json form), views (by name,
`ViewMetadata.to_dict`), each tablet's replica
placement (tablet id -> tablet-server uuids), and the tablet servers ever registered (uuid
-> RPC address) — changes only by CATALOG entries of the masters' Raft log (a JSON op per
entry), applied in log order on every master:

    {"op": "put_table", "table": {...}, "replicas": {tablet_id: [uuid, ...]},
     "views": [{...}, ...]}
        (CREATE TABLE, ALTER TABLE: tablets named for the first time are new, e.g. ADD
        RANGE PARTITION's; tablets the previous entry named and this one does not are
        forgotten, DROP RANGE PARTITION's; `views`, optional: views replaced in the same
        entry, those that follow a RENAME TO)
    {"op": "drop_table", "id": table_id, "views": [name, ...]}
        (the views: those DROP TABLE ... CASCADE drops along, engine/catalog/views.py)
    {"op": "put_view", "view": {...}}      (CREATE [OR REPLACE] VIEW: ViewMetadata.to_dict)
    {"op": "drop_views", "names": [name, ...]}
    {"op": "set_replicas", "tablet_id": t, "replicas": [uuid, ...], "config_index": i,
     "adding": uuid | None}
        (re-replication) `replicas` = a *committed* configuration of the tablet's Raft
        group (the one set by its entry `config_index`, as a replica reported it), plus
        `adding`, the server the master is adding (its placement decision, made before it
        asks the leader). An op with a lower config_index than recorded is ignored; one
        without config_index keeps the recorded one
    {"op": "register_tserver", "uuid": u, "addr": a}
    {"op": "noop"}   (a master confirming it still leads: `confirm_leadership`)

Per tablet the catalog keeps `replicas`, `config_index` (the committed configuration the
list follows; 0, the initial one, for a new tablet) and `adding`; and the ids of dropped
tablets (`dropped`: DROP TABLE, DROP RANGE PARTITION), whose replicas may be deleted
outright — a tablet the catalog does not know at all is never deleted anywhere (master.py,
"Deleting replicas").

The state lives in memory; a restarting master rebuilds it by applying the log again, from
index 1, once the Raft group has told it the commit index (RaftHost: nothing merely logged
is applied). The log of a catalog is small (one entry per DDL and per new server) and is
never GC'd. With one master the group has one voter (it elects itself); with three, DDL
needs a majority of masters and any of them can take over.

`propose(op)` (leader only) returns once the entry is applied here, or raises NotLeader.
`confirm_leadership(term)`: True once a no-op of `term` proposed now is applied, i.e. a
majority of masters accepted this master as leader of `term` after the call began (Raft's
ReadIndex, made with a log entry): a master deposed meanwhile (isolated, paused by SIGSTOP)
cannot commit it, and does nothing destructive on a decision it took from a stale catalog.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading
import time

from engine.consensus.log import LogEntry
from engine import errors
from engine.consensus.raft import NotLeader
from engine.rpc.rpc import RemoteError
from engine.tserver.raft_host import RaftHost

CATALOG = 5  # a Raft log entry type: one JSON catalog op


class SysCatalog(RaftHost):
    def __init__(self, *args, **kwargs):
        self.tables: dict[str, dict] = {}
        self.views: dict[str, dict] = {}  # view name -> ViewMetadata.to_dict()
        self.replicas: dict[str, list[str]] = {}  # tablet id -> tserver uuids
        self.initial: dict[str, list[str]] = {}  # tablet id -> the uuids it was created on
        # tablet id -> (schema dict, schema version) it was created with: what a replica
        # added later starts from, since it replays the tablet's log from the beginning
        # (or gets a tablet copy); the first put_table naming the tablet sets it
        self.created: dict[str, tuple[dict, int]] = {}
        self.tservers: dict[str, str] = {}  # uuid -> addr
        self.config_index: dict[str, int] = {}  # tablet id -> its recorded config's index
        self.adding: dict[str, str] = {}  # tablet id -> the server being added to it
        self.dropped: set[str] = set()  # tablets of dropped tables and ranges
        self._confirm_lock = threading.Lock()
        self._confirmed_at = (-1, float("-inf"))  # (term, when the last confirmation began)
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
            for v in op.get("views", ()):
                self.views[v["name"]] = v
            self.replicas.update(op.get("replicas", {}))
            self.initial.update(op.get("replicas", {}))
            for tid in op.get("replicas", {}):
                self.config_index.setdefault(tid, 0)
            ids = {x["tablet_id"] for x in t["tablets"]}
            for x in t["tablets"]:  # a tablet's first entry: the schema it is created with
                self.created.setdefault(x["tablet_id"], (t["schema"],
                                                         t.get("schema_version", 0)))
            if old is not None:  # DROP RANGE PARTITION: the range's tablets go
                for x in old["tablets"]:
                    if x["tablet_id"] not in ids:
                        self._forget_tablet(x["tablet_id"])
        elif kind == "set_replicas":
            tid = op["tablet_id"]
            if tid in self.replicas:
                index = op.get("config_index", self.config_index.get(tid, 0))
                if index >= self.config_index.get(tid, 0):
                    self.replicas[tid] = list(op["replicas"])
                    self.config_index[tid] = index
                    if op.get("adding"):
                        self.adding[tid] = op["adding"]
                    else:
                        self.adding.pop(tid, None)
        elif kind == "put_view":
            self.views[op["view"]["name"]] = op["view"]
        elif kind == "drop_views":
            for n in op["names"]:
                self.views.pop(n, None)
        elif kind == "drop_table":
            for n in op.get("views", ()):
                self.views.pop(n, None)
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
        self.config_index.pop(tid, None)
        self.adding.pop(tid, None)
        self.dropped.add(tid)

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

    def propose(self, op: dict, timeout_s: float = 10.0, term: int | None = None) -> None:
        """`term`: refused unless this master leads in that term (the entry is then of
        `term`, and the call returns only if that very entry is applied)."""
        with self.lock:
            if not self.ready_leader() or (term is not None and self.raft.term != term):
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

    def confirm_leadership(self, term: int, timeout_s: float = 2.0) -> bool:
        """Whether this master still leads in `term` now (module docstring): a no-op of
        that term committed and applied after this call began. Concurrent callers share
        one confirmation that began after they called."""
        asked = time.monotonic()
        if not self._confirm_lock.acquire(timeout=timeout_s):
            return False
        try:
            done_term, began = self._confirmed_at
            if done_term == term and began >= asked:
                return True  # a confirmation begun after we asked succeeded meanwhile
            began = time.monotonic()
            try:
                self.propose({"op": "noop"}, timeout_s=timeout_s, term=term)
            except (errors.EngineError, NotLeader):
                return False
            self._confirmed_at = (term, began)
            return True
        finally:
            self._confirm_lock.release()
