"""Master: the process that keeps the catalog and places replicas (`kudusql master`).

State: the SysCatalog (sys_catalog.py, replicated by Raft among 1 or 3 masters; on disk in
`<data>/sys-catalog/`: its WAL and consensus metadata) and, in memory only, what tablet
servers report in their heartbeats (liveness, each replica's role and term).

A master's Raft uuid is its RPC address as given on the command line (`--rpc-addr`), so
the masters of a cluster know each other from `--masters` alone.

With `tls` (engine/rpc: `--rpc-cert/--rpc-key`) it serves RPC over TLS and calls the other
masters and the tablet servers over TLS (the certificate's CA, `--rpc-ca`, trusted).

RPCs (DoAction; all but `status` and `ping` are answered by the leader master only)
    tserver_heartbeat   a tablet server's report {uuid, addr, http_addr, stream_addr (its Arrow
                        stream endpoint, or None), tablets: {id: raft status
                        with the active and the committed configuration, state}}, tombstones
                        included; the answer: replicas to create (assigned here, not
                        reported), replicas to tombstone or delete ("Deleting replicas"),
                        the directory of server addresses, and this master's sys catalog
                        `term` (a server ignores deletes from a term below one it has seen)
    create_table        {name, schema, partition_schema, replication_factor, comment,
                        properties, if_not_exists}: placement by power-of-two choices among
                        live servers (the less loaded of two random candidates, per
                        replica); refused if fewer live servers than replicas
    drop_table, rename_table, list_tables, get_table {name} (metadata + locations),
    alter_table         {name, kind, ...}: SET/UNSET properties and comment, ADD/DROP RANGE
                        PARTITION (placement as create_table), ADD/DROP/RENAME COLUMN (the
                        target recorded as pending, replicated by every tablet's leader as
                        an ALTER_SCHEMA Raft entry, then published; `_h_alter_table`)
    locations {table_id}: every tablet's replicas with their address and last reported
                        role; `leader` is the replica that reported LEADER in the
                        highest term
    list_tservers, status
    list_replicas       every replica of every table with its server, role, term and state
                        (SHOW TABLETS and kudu_system.replicas on a cluster)
    stream_locate       {table?}: what the JVM Spark connector needs to find a cluster
                        (`stream_locate`); a follower master's Arrow stream endpoint asks the
                        leader with it

Arrow stream endpoint (`kudusql master --arrow-port`, wire.arrow_stream.master_endpoint):
answers `locate` to clients that hold no cluster secret (the JVM Spark connector given
`masters`), from this RPC's answer: only addresses and tablet ids, nothing secret.

Metrics and status page (engine/metrics): every RPC is counted and timed; with `http_port`
the master serves /metrics, /status.json and / (tablet servers with liveness and last
heartbeat, tables, the sys catalog's Raft role and term).

Liveness: a tablet server is live if it heartbeated within `tserver_unresponsive_s`
(servers not heard from since this master became leader get that long from then).

Re-replication (Kudu's 3-4-3, `_rereplicate`, every second on the leader master): for a
tablet with a replica on a dead server and a live leader whose configuration matches the
catalog, the master picks a new live server (power of two choices), records it in the
catalog, creates an empty replica there (no configuration: it cannot vote or campaign
until the leader's log gives it one) and asks the leader to `replace` the dead peer: the
leader adds the new one as a learner, promotes it once caught up and then evicts the dead
one (engine/consensus/raft.py). The new server is recorded first (`set_replicas` with
`adding`: the master's own placement decision, so no heartbeat has the new replica
tombstoned); a re-replication the leader never took in is given up after 30 s, and at once
when the new replica could not be created (the leader was not asked). The
catalog then follows the tablet's *committed* configuration, as any live replica reports
it with the index of the entry that set it (`set_replicas` with `config_index`, only when
newer than the recorded one): never the leader's active configuration, which a new leader
may still cut from its log. A server that holds a tombstone of the tablet may be chosen
(the new replica keeps the tombstone's term and vote), and a server the catalog names as a
member that reports only a tombstone gets a new empty replica over it in its heartbeat
answer (a stale delete may have tombstoned a learner being added). A replica that reports TOMBSTONED
but is in the catalog's configuration is replaced like one on a dead server, and so is one
that reports FAILED (Kudu's rule for a failed tablet: its disk failed, or a safety check or
an apply stopped it; it neither votes nor serves, so the group is one voter short). The new
replica catches up from the leader's log; if that log was GC'd past what it needs, the
leader's Raft asks for a tablet copy and the new replica copies the tablet's files from
the leader (engine/tserver/tablet_copy.py; docs/cluster.md, "Failure handling").

Deleting replicas (Kudu's rule; `_deletion`). A heartbeat's answer asks a server to
  - delete a replica whole (`drop`) only if its tablet is in the catalog's `dropped` set
    (DROP TABLE, DROP RANGE PARTITION committed: no Raft group is left to harm);
  - tombstone it (data gone, term, vote and committed configuration kept) only if the
    server is not in the catalog's configuration of the tablet AND the replica's reported
    committed configuration index is strictly lower than the catalog's (`config_index`);
    the request carries `cas_config_index` and the server refuses if it has meanwhile
    committed a newer configuration.
Never for a tablet the catalog does not know at all (a lagging catalog), never on a report
without a committed configuration index, never for a replica that is COPYING or STOPPED.
Before answering with any deletion the master confirms it still leads in the term it
decided in (`SysCatalog.confirm_leadership`: a no-op committed by a majority of masters
after the decision); a master that cannot (isolated, paused, deposed) answers without
deletions. Re-replication's catalog changes are themselves proposals of the decision's
term, which a deposed master cannot commit.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import threading
import time
import uuid as uuidlib

from engine import clock, errors
from engine.catalog.catalog import ColumnExists, TableExists, check_identifier, \
    check_num_columns, validate_replication_factor
from engine.catalog.partition import RangePartitionExists
from engine.catalog.metadata import TableMetadata
from engine.catalog.views import ViewMetadata, check_create, check_drop, check_rename
from engine.catalog.partition import PartitionSchema
from engine.clock import DEFAULT_MAX_ERROR_S, HybridClock
from engine.consensus.consensus_metadata import ConsensusMetadata
from engine.consensus.messages import RaftConfig, RaftPeer
from engine.consensus.raft import RaftOptions
from engine.rpc.rpc import RemoteError, RpcClient, RpcServer, TlsConfig
from engine.schema import ColumnSchema, Schema
from engine.master.sys_catalog import SysCatalog
from engine.metrics.metrics import ServerMetrics, dir_bytes, process_status
from engine.metrics.webserver import StatusServer
from engine.tserver.raft_host import RaftHost, Transport
from engine.tserver.status import BOOTSTRAPPING, FAILED, RUNNING, TOMBSTONED

log = logging.getLogger(__name__)


class AlterPending(errors.ServiceUnavailable):
    """A schema change not yet applied by every tablet (their leaders did not answer in
    time); it stays recorded as pending and the master finishes it in the background."""

    sqlstate = "57P03"


class Master:
    def __init__(self, data_dir: str, host: str, port: int, secret: str,
                 masters: list[str] | None = None, tick_ms: int = 100,
                 election_ticks: int = 10, tserver_unresponsive_s: float = 60.0,
                 fsync: bool = True, http_port: int | None = None,
                 http_host: str = "127.0.0.1", tls: TlsConfig | None = None,
                 max_clock_error_s: float = DEFAULT_MAX_ERROR_S):
        self.data_dir = data_dir
        self.tserver_unresponsive_s = tserver_unresponsive_s
        self.rpc_client = RpcClient(secret, tls=tls)  # other masters, tablet servers
        self.transport = Transport(self.rpc_client)
        self._live: dict[str, tuple[str, float]] = {}  # tserver uuid -> (addr, last heard)
        self._reports: dict[str, dict[str, dict]] = {}  # tablet id -> uuid -> raft status
        self._http: dict[str, str | None] = {}  # tserver uuid -> its status page's address
        self._stream: dict[str, str | None] = {}  # tserver uuid -> its Arrow stream endpoint
        self._lock = threading.RLock()
        self._ddl_lock = threading.Lock()
        self._stop = threading.Event()
        self.metrics = ServerMetrics("master")
        self.http: StatusServer | None = None
        # The RPC server starts before the sys catalog exists (this master's Raft uuid is
        # the address it binds); calls that come meanwhile are refused retryably.
        self._started = threading.Event()
        self.server = RpcServer(host, port, secret, self.metrics.instrument({
            name: self._once_started(fn) for name, fn in {
                "raft": self._h_raft, "tserver_heartbeat": self._h_heartbeat,
                "create_table": self._h_create_table, "drop_table": self._h_drop_table,
                "rename_table": self._h_rename_table, "alter_table": self._h_alter_table,
                "list_tables": self._h_list_tables, "get_table": self._h_get_table,
                "create_view": self._h_create_view, "drop_views": self._h_drop_views,
                "list_views": self._h_list_views,
                "locations": self._h_locations, "list_tservers": lambda p: self.tservers(),
                "status": lambda p: self.status(),
                "list_replicas": self._h_list_replicas,
                "stream_locate": self.stream_locate}.items()}), tls=tls)
        self.addr = self.server.addr
        self.uuid = self.addr
        masters = list(masters or [self.addr])
        if self.addr not in masters:
            raise errors.InvalidArgument(f"--masters {','.join(masters)} does not name this "
                                         f"master's --rpc-addr {self.addr}")
        self.masters = masters
        d = os.path.join(data_dir, "sys-catalog")
        os.makedirs(d, exist_ok=True)
        if not os.path.exists(os.path.join(d, "consensus-meta.json")):
            cfg = RaftConfig(0, tuple(RaftPeer(m, addr=m) for m in masters))
            RaftHost.create_metadata(d, ConsensusMetadata(0, None, cfg), fsync)
        # tick_s: the sys catalog's ticks (`_tick_loop`: a wait of tick_s between rounds)
        # never come faster, as Raft's quiet period needs (engine/consensus/raft.py)
        self.catalog = SysCatalog("sys-catalog", self.uuid, d,
                                  HybridClock(max_error_s=max_clock_error_s), self.transport,
                                  RaftOptions(heartbeat_ticks=1,
                                              election_timeout_ticks=election_ticks,
                                              tick_s=tick_ms / 1000),
                                  fsync=fsync)
        self._tick_s = tick_ms / 1000
        self._leader_since: float | None = None
        self._led_term, self._led_since = -1, 0.0
        self._pending: dict[str, float] = {}  # tablet id -> when a replacement was started
        self._refused_alters: set[tuple[str, int]] = set()  # (table id, version) refused
        self._started.set()
        self._thread = threading.Thread(target=self._tick_loop, daemon=True, name="ticker")
        self._thread.start()
        self._monitor = threading.Thread(target=self._monitor_loop, daemon=True,
                                         name="rereplication")
        self._monitor.start()
        self.metrics.status_collector(self.web_status)
        if http_port is not None:
            self.http = StatusServer(
                http_host, http_port, self.metrics.registry, self.web_status,
                f"kudusql master {self.addr}")

    def _once_started(self, fn):
        def handler(p):
            if not self._started.is_set():
                # (self.addr may not be set yet either: the server binds it)
                raise RemoteError("this master is starting; retry", None)
            return fn(p)
        return handler

    # -- Raft ----------------------------------------------------------------------------------
    def _h_raft(self, batch: list) -> None:
        for group, msg in batch:
            if group == "sys-catalog":
                self.catalog.step(msg)

    def _tick_loop(self) -> None:
        # tick_s of this process's `clock.monotonic()` (its rate is a failpoint), which the
        # sys catalog's leases are measured by (raft_host.py)
        while not self._stop.wait(self._tick_s / clock.monotonic_rate()):
            try:
                self.catalog.tick()
            except Exception:  # noqa: BLE001 - keep ticking
                log.exception("sys catalog tick failed")

    def _require_leader(self) -> None:
        if not self.catalog.ready_leader():
            raise RemoteError(f"master {self.addr} is not the leader master",
                              self.catalog.raft.leader_uuid)

    # -- tablet servers ------------------------------------------------------------------------
    def _h_heartbeat(self, rep: dict) -> dict:
        if not self.catalog.ready_leader():
            return {"not_leader": True, "leader": self.catalog.raft.leader_uuid}
        term = self.catalog.raft.term  # read before deciding: confirmed after (below)
        u, addr = rep["uuid"], rep["addr"]
        reported = rep.get("tablets", {})
        with self._lock:
            self._live[u] = (addr, time.monotonic())
            self._http[u] = rep.get("http_addr")
            self._stream[u] = rep.get("stream_addr")
            for tid, st in reported.items():
                self._reports.setdefault(tid, {})[u] = st
        cat = self.catalog
        if cat.tservers.get(u) != addr:
            cat.propose({"op": "register_tserver", "uuid": u, "addr": addr})
        create = []
        for t in list(cat.tables.values()):
            for x in t["tablets"]:
                tid = x["tablet_id"]
                if u not in cat.replicas.get(tid, []):
                    continue
                st = reported.get(tid)
                if st is None:
                    create.append(self._replica_spec(t, tid, u))
                elif st.get("state") == TOMBSTONED:
                    # a member (or the server being added) holds a tombstone of the tablet:
                    # a new empty replica over it, fed by the leader's log or a tablet copy
                    # (it keeps the tombstone's term and vote, and votes as if it had the
                    # log the tombstone lost: tablet_server.py). Not only the one being
                    # added: a stale delete can tombstone a learner after the catalog
                    # recorded it as a member, and a 3-4-3 stuck with four members is
                    # never replaced (`_rereplicate`), so nothing else would revive it.
                    create.append(self._replica_spec(t, tid, u, initial=False))
        delete = [d for d in (self._deletion(u, tid, st) for tid, st in reported.items())
                  if d is not None]
        if delete and not cat.confirm_leadership(term):
            log.warning("not asking %s to delete %d replicas: this master could not confirm "
                        "it still leads (term %d)", u, len(delete), term)
            delete = []
        return {"create": create, "delete": delete, "directory": dict(cat.tservers),
                "term": term}

    def _deletion(self, u: str, tid: str, st: dict) -> dict | None:
        """Whether server `u`'s replica of `tid`, reported as `st`, is to go (module
        docstring, "Deleting replicas"): {tablet_id, drop: True} if the tablet was dropped;
        {tablet_id, cas_config_index} (a tombstone) if the replica's committed
        configuration is older than the catalog's and `u` is not in the catalog's; None
        otherwise, and whenever the report lacks what the decision needs."""
        cat = self.catalog
        if tid in cat.dropped:
            return {"tablet_id": tid, "drop": True}
        if tid not in cat.replicas or u in cat.replicas[tid] or \
                st.get("state") not in (RUNNING, BOOTSTRAPPING, FAILED):
            return None  # unknown to this catalog, a member, or a tombstone already,
            # or COPYING (its configuration is about to change), STOPPED, unknown state
            # (a FAILED one evicted from the group goes: it reports its committed
            # configuration if it failed while running, and is kept if it cannot)
        index, ours = st.get("committed_config_index"), cat.config_index.get(tid)
        if not isinstance(index, int) or isinstance(index, bool) or not isinstance(ours, int):
            return None
        if index >= ours:
            return None  # it may know of a configuration newer than ours: keep it
        return {"tablet_id": tid, "cas_config_index": ours}

    def _replica_spec(self, t: dict, tid: str, uuid: str | None = None,
                      initial: bool = True) -> dict:
        """What a server needs to create a replica: a replica of the initial placement
        starts with the initial configuration; one added later (`initial` False: always
        for re-replication, even back onto a server of the initial placement) starts with
        none (it learns its configuration from the leader's log)."""
        cat = self.catalog
        first = cat.initial.get(tid, [])
        peers = [[p, cat.tservers.get(p, "")] for p in first] \
            if initial and (uuid is None or uuid in first) else []
        schema, version = cat.created.get(tid, (t["schema"], t.get("schema_version", 0)))
        return {"tablet_id": tid, "table_id": t["id"], "table_name": t["name"],
                "schema": schema, "schema_version": version, "peers": peers,
                "master_term": cat.raft.term}

    def live_tservers(self) -> dict[str, str]:
        now = time.monotonic()
        with self._lock:
            return {u: a for u, (a, t) in self._live.items()
                    if now - t <= self.tserver_unresponsive_s}

    # -- re-replication --------------------------------------------------------------------
    def _monitor_loop(self) -> None:
        while not self._stop.wait(1.0):
            self.monitor_round()

    def monitor_round(self) -> None:
        """One round of the leader master's background work: pending ALTERs finished,
        re-replication. Never raises; losing leadership mid-round is no error."""
        try:
            if not self.catalog.ready_leader():
                self._leader_since = None
                return
            if self._leader_since is None:
                self._leader_since = time.monotonic()
            self._finish_pending_alters()
            self._rereplicate()
        except errors.ServiceUnavailable as e:
            # this master lost leadership mid-round, or a majority of masters did not
            # answer in time: expected under faults, retried at the next round
            log.info("re-replication round stopped: %s", e)
        except Exception:  # noqa: BLE001 - retried at the next round
            log.exception("re-replication round failed")

    def _reported_leader(self, tid: str, live: dict | None = None
                         ) -> tuple[str, dict] | None:
        """The live replica of `tid` reporting itself leader in the highest term; `live`:
        the caller's view of the live servers (a re-replication round reads one view, or
        a server coming back mid-round could lead here and be missing there)."""
        if live is None:
            live = self.live_tservers()
        best = None
        for u, st in self._reports.get(tid, {}).items():
            if st.get("role") == "LEADER" and u in live and \
                    (best is None or st.get("term", 0) > best[1].get("term", 0)):
                best = (u, st)
        return best

    def _committed_report(self, tid: str, live: dict | None = None
                          ) -> tuple[int, list[str]] | None:
        """The newest committed configuration any live replica of `tid` reports (index,
        peers): committed, so the group will never go back on it. `live`: as for
        `_reported_leader`."""
        if live is None:
            live = self.live_tservers()
        best = None
        for u, st in list(self._reports.get(tid, {}).items()):
            index, peers = st.get("committed_config_index"), st.get("committed_peers")
            if u in live and isinstance(index, int) and isinstance(peers, list) and peers \
                    and st.get("state") != TOMBSTONED and (best is None or index > best[0]):
                best = (index, list(peers))
        return best

    def _rereplicate(self) -> None:
        now = time.monotonic()
        if now - self._leader_since < self.tserver_unresponsive_s:
            return  # give every server a chance to report to the new leader master
        cat = self.catalog
        term = cat.raft.term
        live = self.live_tservers()
        for t in list(cat.tables.values()):
            rf = t["replication_factor"]
            for x in t["tablets"]:
                tid = x["tablet_id"]
                peers = cat.replicas.get(tid, [])
                committed = self._committed_report(tid, live)
                if committed is not None and committed[0] > cat.config_index.get(tid, 0):
                    # the group committed a newer configuration: record it (never an
                    # uncommitted one, which a new leader may still cut from the log)
                    cat.propose({"op": "set_replicas", "tablet_id": tid,
                                 "replicas": committed[1], "config_index": committed[0]},
                                term=term)
                    continue
                lead = self._reported_leader(tid, live)  # the round's one view of live
                if lead is None:
                    continue
                leader, st = lead
                adding = cat.adding.get(tid)
                if adding is not None:
                    if now - self._pending.get(tid, -1e9) >= 30 and \
                            adding not in st.get("peers", [adding]):
                        # the leader never took the new server in: give up on it (its
                        # empty replica goes once the configuration moves past ours)
                        log.info("re-replication of %s onto %s did not start; choosing "
                                 "again", tid, adding)
                        cat.propose({"op": "set_replicas", "tablet_id": tid,
                                     "replicas": [p for p in peers if p != adding]},
                                    term=term)
                    continue
                reports = self._reports.get(tid, {})
                dead = [u for u in peers if u not in live
                        or reports.get(u, {}).get("state") in (TOMBSTONED, FAILED)]
                if not dead or len(peers) != rf or now - self._pending.get(tid, -1e9) < 10:
                    continue
                cands = [u for u in live if u not in peers]
                if not cands:
                    continue
                new = self._place(1, 1, cands)[0][0]
                self._pending[tid] = now
                log.info("re-replicating tablet %s: replacing dead %s by %s", tid, dead[0], new)
                # recorded first (a majority of masters accepting it also confirms this
                # master still leads in `term`), so no heartbeat has the new replica deleted
                cat.propose({"op": "set_replicas", "tablet_id": tid,
                             "replicas": peers + [new], "adding": new}, term=term)
                try:
                    self.rpc_client.call(live[new], "create_replica",
                                         self._replica_spec(t, tid, new, initial=False),
                                         timeout_s=5)
                except errors.EngineError as e:
                    # The leader was not asked: nothing was started, so give the choice up
                    # now (the next try comes after 10 s), not after the 30 s a started
                    # replacement gets - a server killed less than the unresponsive timeout
                    # ago still counts as live and is often chosen (harness, membership)
                    log.info("re-replication of %s onto %s: %s; choosing again", tid, new, e)
                    cat.propose({"op": "set_replicas", "tablet_id": tid, "replicas": peers},
                                term=term)
                    continue
                try:
                    self.rpc_client.call(live[leader], "change_config", {
                        "tablet": tid, "op": "replace", "old": dead[0], "new": new,
                        "new_addr": live[new]}, timeout_s=5)
                except errors.EngineError as e:
                    log.info("re-replication of %s: %s (retried)", tid, e)

    def tservers(self) -> list[dict]:
        live = self.live_tservers()
        now = time.monotonic()
        out = []
        for u, a in sorted(self.catalog.tservers.items()):
            seen = self._live.get(u)
            out.append({"uuid": u, "addr": a, "live": u in live,
                        "last_heartbeat_s": None if seen is None else round(now - seen[1], 3),
                        "http_addr": self._http.get(u), "stream_addr": self._stream.get(u)})
        return out

    def stream_locate(self, p: dict | None) -> dict:
        """What a client of the tablet servers' Arrow stream endpoints needs to find them
        (the JVM Spark connector given `masters`): {"endpoints": the live tablet servers'
        endpoints, by uuid}; with {"table": name} also "table_id" and "tablets": per
        tablet in partition order {tablet_id, "endpoints": the endpoints of its live
        replicas' servers, the reported leader first}. Servers that serve no endpoint
        (`tserver` without --arrow-port) are left out. Answered by the leader master, whose
        heartbeats say what is live; a follower asks the leader (`_require_leader`)."""
        self._require_leader()
        p = p or {}
        live = self.live_tservers()
        with self._lock:
            stream = {u: a for u, a in self._stream.items() if a and u in live}
        out: dict = {"endpoints": [stream[u] for u in sorted(stream)]}
        if p.get("table"):
            t = self._by_name(p["table"])
            if t is None:
                raise errors.NotFound(f'table "{p["table"]}" does not exist')
            locs = self._locations(t)
            tablets = []
            for x in t["tablets"]:
                loc = locs[x["tablet_id"]]
                ids = [r["uuid"] for r in loc["replicas"]]
                if loc["leader"] in ids:
                    ids.remove(loc["leader"])
                    ids.insert(0, loc["leader"])
                tablets.append({"tablet_id": x["tablet_id"],
                                "endpoints": [stream[u] for u in ids if u in stream]})
            out.update(table_id=t["id"], tablets=tablets)
        return out

    def _leader_age(self) -> float:
        """Seconds since this master became leader (of its current term)."""
        term = self.catalog.raft.term
        if self._led_term != term:
            self._led_term, self._led_since = term, time.monotonic()
        return time.monotonic() - self._led_since

    def _wait_live(self, want: int, settle_s: float = 5.0) -> list[str]:
        """Live servers; a master that has just become leader has heard from nobody yet,
        so it waits (up to `settle_s` into its leadership) for `want` of them to report."""
        while True:
            live = sorted(self.live_tservers())
            left = settle_s - self._leader_age()
            if len(live) >= want or left <= 0:
                return live
            time.sleep(min(0.1, left))

    def _place(self, n_tablets: int, rf: int, live: list[str]) -> list[list[str]]:
        """Power-of-two choices: each replica goes to the less loaded of two random live
        servers not yet holding the tablet (load = replicas placed, counting this table);
        the first of a tablet's list (its designated first leader) is the one of them
        designated for the fewest tablets."""
        load = {u: 0 for u in live}
        for peers in self.catalog.replicas.values():
            for u in peers:
                if u in load:
                    load[u] += 1
        # The first replica of a tablet campaigns at once (tablet_replica.py): put there
        # the chosen server designated for the fewest tablets, so leaders start spread.
        leads = {u: 0 for u in live}
        for peers in self.catalog.initial.values():
            if peers and peers[0] in leads:
                leads[peers[0]] += 1
        out = []
        for _ in range(n_tablets):
            chosen: list[str] = []
            for _ in range(rf):
                cands = [u for u in live if u not in chosen]
                pick = random.sample(cands, min(2, len(cands)))
                best = min(pick, key=lambda u: (load[u], u))
                chosen.append(best)
                load[best] += 1
            first = min(chosen, key=lambda u: (leads[u], random.random()))
            chosen.remove(first)
            chosen.insert(0, first)
            leads[first] += 1
            out.append(chosen)
        return out

    # -- DDL -----------------------------------------------------------------------------------
    def _h_create_table(self, p: dict) -> dict:
        self._require_leader()
        name = p["name"]
        schema = Schema.from_dict(p["schema"])
        ps = PartitionSchema.from_dict(p["partition_schema"], schema) \
            if p.get("partition_schema") else PartitionSchema.create(schema)
        want = p.get("replication_factor")
        if not isinstance(want, int) or isinstance(want, bool):
            want = len(self.catalog.tservers)  # the default RF depends on how many are live
        live = self._wait_live(want)
        if not live:
            raise errors.InvalidArgument("no live tablet servers: cannot create a table")
        rf = validate_replication_factor(p.get("replication_factor"), len(live))
        with self._ddl_lock:
            existing = self._by_name(name)
            if existing is not None:
                if p.get("if_not_exists"):
                    return existing
                raise TableExists(f'table "{name}" already exists')
            if name in self.catalog.views:
                raise TableExists(f'relation "{name}" already exists')
            n = len(ps.partitions)
            tids = [uuidlib.uuid4().hex for _ in range(n)]
            meta = TableMetadata(uuidlib.uuid4().hex, name, schema, ps, rf, tuple(tids),
                                 p.get("comment"), dict(p.get("properties") or {}))
            placement = self._place(n, rf, live)
            t = meta.to_dict()
            self.catalog.propose({"op": "put_table", "table": t,
                                  "replicas": dict(zip(tids, placement))})
        self._push_replicas(t)
        return t

    def _push_replicas(self, t: dict, only: set[str] | None = None) -> None:
        """Ask the chosen servers to create the replicas (of the tablets in `only`, default
        all) now (heartbeats retry it)."""
        specs = []
        for x in t["tablets"]:
            if only is not None and x["tablet_id"] not in only:
                continue
            spec = self._replica_spec(t, x["tablet_id"])
            for u, addr in spec["peers"]:
                specs.append((addr, spec))

        def one(addr_spec):
            addr, spec = addr_spec
            try:
                self.rpc_client.call(addr, "create_replica", spec, timeout_s=5)
            except errors.EngineError as e:
                log.info("creating replica of %s on %s: %s (retried by heartbeats)",
                         spec["tablet_id"], addr, e)
        threads = [threading.Thread(target=one, args=(s,), daemon=True) for s in specs]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=6)

    def _by_name(self, name: str) -> dict | None:
        for t in self.catalog.tables.values():
            if t["name"] == name:
                return t
        return None

    def _h_drop_table(self, p: dict) -> dict:
        self._require_leader()
        with self._ddl_lock:
            t = self._by_name(p["name"])
            if t is None:
                if p.get("if_exists"):
                    return {"dropped": False}
                raise errors.NotFound(f'table "{p["name"]}" does not exist')
            along = check_drop(self._views(), "table", [t["name"]], bool(p.get("cascade")))
            peers = {x["tablet_id"]: list(self.catalog.replicas.get(x["tablet_id"], []))
                     for x in t["tablets"]}
            self.catalog.propose({"op": "drop_table", "id": t["id"], "views": along})
        self._delete_replicas(peers)
        return {"dropped": True, "views": along}

    def _h_rename_table(self, p: dict) -> dict:
        self._require_leader()
        with self._ddl_lock:
            t = self._by_name(p["name"])
            if t is None:
                raise errors.NotFound(f'table "{p["name"]}" does not exist')
            if self._by_name(p["new_name"]) is not None:
                raise TableExists(f'table "{p["new_name"]}" already exists')
            if p["new_name"] in self.catalog.views:
                raise TableExists(f'relation "{p["new_name"]}" already exists')
            after = check_rename(self._views(), p["name"], p["new_name"],
                                 [ViewMetadata.from_dict(d) for d in p.get("views") or ()])
            t = dict(t, name=p["new_name"])
            op = {"op": "put_table", "table": t}
            if after is not None:       # the views that follow the rename, in the same entry
                op["views"] = [after[d["name"]].to_dict() for d in p["views"]]
            self.catalog.propose(op)
        return t

    def _h_alter_table(self, p: dict) -> dict:
        """ALTER TABLE on a cluster: {name, kind, ...}; the table's new entry back.

        kind `set_properties` {properties, unset, comment?}: metadata only (SET / UNSET
        TBLPROPERTIES, COMMENT ON TABLE; a missing `comment` keeps the comment).
        kind `add_range_partition` {range, if_not_exists}: one new tablet per hash bucket,
        placed like CREATE TABLE's (power of two choices among live servers, refused if
        fewer than the replication factor are live), recorded, created on the servers.
        kind `drop_range_partition` {range, if_exists}: the range's tablets leave the
        catalog, then their replicas are deleted (the rows go with them).
        `range`: PartitionSchema.range_to_json.
        kinds `add_column` {column, if_not_exists}, `drop_column` {column, if_exists},
        `rename_column` {old, new}: a schema change (`_alter_columns`).
        A table whose schema change is still pending has it finished first."""
        self._require_leader()
        kind = p.get("kind")
        handler = {"set_properties": self._alter_properties,
                   "add_range_partition": self._alter_add_range,
                   "drop_range_partition": self._alter_drop_range,
                   "add_column": self._alter_columns, "drop_column": self._alter_columns,
                   "rename_column": self._alter_columns}.get(kind)
        if handler is None:
            raise errors.InvalidArgument(f"unknown ALTER TABLE kind {kind!r}")
        with self._ddl_lock:
            t = self._by_name(p["name"])
            if t is None:
                raise errors.NotFound(f'table "{p["name"]}" does not exist')
            meta = TableMetadata.from_dict(t)
            timeout_s = min(120.0, max(1.0, float(p.get("timeout_s") or 30.0)))
            if meta.pending_schema is not None:
                pending = meta
                meta = TableMetadata.from_dict(self._finish_alter(pending, timeout_s))
                if handler == self._alter_columns:
                    try:
                        target = self._column_target(pending, p)
                    except errors.EngineError:
                        target = None
                    if target is not None and target == pending.pending_schema:
                        # this very ALTER, retried (e.g. after a master failover): done
                        return meta.to_dict()
            if handler == self._alter_columns:
                return handler(meta, p, timeout_s)
            return handler(meta, p)

    def _alter_properties(self, meta: TableMetadata, p: dict) -> dict:
        props = {**meta.properties, **(p.get("properties") or {})}
        for k in p.get("unset") or ():
            props.pop(k, None)
        new = dataclasses.replace(meta, properties=props,
                                  comment=p["comment"] if "comment" in p else meta.comment)
        t = new.to_dict()
        self.catalog.propose({"op": "put_table", "table": t})
        return t

    def _alter_add_range(self, meta: TableMetadata, p: dict) -> dict:
        ps0 = meta.partition_schema
        try:
            ps = ps0.add_range_partition(ps0.range_from_json(p["range"]))
        except RangePartitionExists:
            if p.get("if_not_exists"):
                return meta.to_dict()
            raise
        old = {x.identity: tid for x, tid in meta.tablets()}
        fresh = [x for x in ps.partitions if x.identity not in old]
        rf = meta.replication_factor
        live = self._wait_live(rf)
        if len(live) < rf:
            raise errors.InvalidArgument(
                f"not enough live tablet servers to add a range partition to table "
                f'"{meta.name}" with replication factor {rf}: {len(live)} live')
        new_ids = {x.identity: uuidlib.uuid4().hex for x in fresh}
        ids = tuple(old.get(x.identity) or new_ids[x.identity] for x in ps.partitions)
        new = dataclasses.replace(meta, partition_schema=ps, tablet_ids=ids)
        placement = self._place(len(fresh), rf, live)
        t = new.to_dict()
        self.catalog.propose({"op": "put_table", "table": t,
                              "replicas": dict(zip(new_ids.values(), placement))})
        self._push_replicas(t, set(new_ids.values()))
        return t

    def _alter_drop_range(self, meta: TableMetadata, p: dict) -> dict:
        ps0 = meta.partition_schema
        spec = ps0.range_from_json(p["range"])
        if p.get("if_exists") and not ps0.has_range_partition(spec):
            return meta.to_dict()
        ps = ps0.drop_range_partition(spec)
        keep = {x.identity for x in ps.partitions}
        gone = [tid for x, tid in meta.tablets() if x.identity not in keep]
        ids = tuple(tid for x, tid in meta.tablets() if x.identity in keep)
        new = dataclasses.replace(meta, partition_schema=ps, tablet_ids=ids)
        peers = {tid: list(self.catalog.replicas.get(tid, [])) for tid in gone}
        t = new.to_dict()
        self.catalog.propose({"op": "put_table", "table": t})
        self._delete_replicas(peers)
        return t

    @staticmethod
    def _column_target(meta: TableMetadata, p: dict) -> Schema | None:
        """The schema an ADD / DROP / RENAME COLUMN request makes of `meta`'s (None: an IF
        [NOT] EXISTS that does nothing); raises the request's SQL error."""
        kind, schema, name = p["kind"], meta.schema, meta.name
        if kind == "add_column":
            col = ColumnSchema.from_dict(p["column"])
            check_identifier("column", col.name)
            if schema.has_column(col.name):
                if p.get("if_not_exists"):
                    return None
                raise ColumnExists(f'column "{col.name}" of relation "{name}" already exists')
            check_num_columns(len(schema.columns) + 1)
            target = schema.add_column(col)
        elif kind == "drop_column":
            col = p["column"]
            if not schema.has_column(col):
                if p.get("if_exists"):
                    return None
                raise errors.ColumnNotFound(
                    f'column "{col}" of relation "{name}" does not exist')
            target = schema.drop_column(col)
        else:
            old, new = p["old"], p["new"]
            check_identifier("column", new)
            if not schema.has_column(old):
                raise errors.ColumnNotFound(
                    f'column "{old}" of relation "{name}" does not exist')
            if schema.has_column(new):
                raise ColumnExists(f'column "{new}" of relation "{name}" already exists')
            target = schema.rename_column(old, new)
        return target

    def _alter_columns(self, meta: TableMetadata, p: dict, timeout_s: float = 30.0) -> dict:
        """ADD / DROP / RENAME COLUMN (Kudu's AlterTable): the target schema is recorded as
        pending (put_table), then each tablet's leader replicates it through the tablet's
        Raft log (`alter_schema`: an ALTER_SCHEMA entry every replica applies in log order
        with Tablet.alter_schema(schema, version), idempotent by version), and once every
        tablet's leader has applied it the table is published with schema = target and
        schema_version + 1 (`_finish_alter`). If a tablet does not answer in time the alter
        stays pending: the monitor loop and the table's next DDL finish it."""
        target = self._column_target(meta, p)
        if target is None:
            return meta.to_dict()
        pending = dataclasses.replace(meta, pending_schema=target)
        self.catalog.propose({"op": "put_table", "table": pending.to_dict()})
        return self._finish_alter(pending, timeout_s)

    def _finish_alter(self, meta: TableMetadata, timeout_s: float = 30.0) -> dict:
        """Bring every tablet of `meta` to its pending schema (version + 1) through its
        leader, then publish. Caller holds _ddl_lock. Raises ServiceUnavailable (the alter
        stays pending) if a tablet has not applied it within `timeout_s`."""
        target, version = meta.pending_schema, meta.schema_version + 1
        body = target.to_dict()
        deadline = time.monotonic() + timeout_s
        failed: dict[str, str] = {}

        def one(tid: str) -> None:
            delay, last = 0.05, "no leader"
            while True:
                lead = self._reported_leader(tid)
                cands = [self.catalog.tservers.get(lead[0])] if lead else []
                cands += [self.catalog.tservers.get(u) for u in
                          self.catalog.replicas.get(tid, []) if not lead or u != lead[0]]
                for addr in [a for a in cands if a]:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    try:
                        self.rpc_client.call(addr, "alter_schema", {
                            "tablet": tid, "schema": body, "version": version,
                            "timeout_s": max(0.5, min(10.0, left - 0.5))},
                            timeout_s=max(1.0, min(11.0, left)))
                        return
                    except errors.InvalidArgument as e:
                        failed[tid] = f"refused: {e}"
                        return
                    except errors.EngineError as e:  # not the leader, unreachable, timeout
                        last = str(e)
                if time.monotonic() + delay > deadline:
                    failed[tid] = last
                    return
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

        threads = [threading.Thread(target=one, args=(tid,), daemon=True)
                   for tid in meta.tablet_ids]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=timeout_s + 15)
        refused = {t: w for t, w in failed.items() if w.startswith("refused")}
        if refused:  # deterministic (every replica applies the same entry): no retries
            self._refused_alters.add((meta.id, version))
            tid, why = next(iter(refused.items()))
            raise errors.InvalidArgument(
                f'ALTER TABLE "{meta.name}": tablet {tid} {why}; the change stays pending '
                f"and is not retried in the background")
        if failed:
            tid, why = next(iter(failed.items()))
            raise AlterPending(
                f'ALTER TABLE "{meta.name}": {len(failed)} of {len(meta.tablet_ids)} '
                f"tablets did not apply the schema change within {timeout_s:.0f} s (tablet "
                f"{tid}: {why}); it stays pending and the master finishes it when they "
                f"answer")
        ps = meta.partition_schema
        for c in target.columns:  # RENAME COLUMN renames partition columns too
            if meta.schema.has_column_id(c.id):
                was = meta.schema.column_by_id(c.id).name
                if was != c.name:
                    ps = ps.renamed(was, c.name, target)
        new = dataclasses.replace(meta, schema=target, schema_version=version,
                                  partition_schema=ps, pending_schema=None)
        t = new.to_dict()
        self.catalog.propose({"op": "put_table", "table": t})
        return t

    def _finish_pending_alters(self) -> None:
        """(Monitor loop) roll forward the schema changes left pending."""
        if not self._ddl_lock.acquire(blocking=False):
            return
        try:
            for t in list(self.catalog.tables.values()):
                if t.get("pending_schema") is not None and \
                        (t["id"], t.get("schema_version", 0) + 1) not in self._refused_alters:
                    try:
                        self._finish_alter(TableMetadata.from_dict(t), timeout_s=5.0)
                        log.info("finished the pending schema change of table %s", t["name"])
                    except errors.EngineError as e:
                        log.info("pending schema change of %s: %s", t["name"], e)
        finally:
            self._ddl_lock.release()

    def _delete_replicas(self, peers: dict[str, list[str]]) -> None:
        """Ask the servers to delete these replicas of dropped tablets now, whole
        (heartbeats finish it: a server reporting a dropped tablet is told to delete
        it). Called after the drop committed in the catalog: no Raft group is left."""
        term = self.catalog.raft.term
        for tid, us in peers.items():
            for u in us:
                addr = self.catalog.tservers.get(u)
                try:
                    self.rpc_client.call(addr, "delete_replica", {
                        "tablet_id": tid, "drop": True, "master_term": term}, timeout_s=3)
                except errors.EngineError:
                    pass

    # -- views (engine/catalog/views.py: the same rules as the embedded catalog's) ---------
    def _views(self) -> dict[str, ViewMetadata]:
        return {n: ViewMetadata.from_dict(d) for n, d in self.catalog.views.items()}

    def _h_create_view(self, p: dict) -> dict:
        """{view: ViewMetadata.to_dict(), replace}: the view's entry back."""
        self._require_leader()
        view = ViewMetadata.from_dict(p["view"])
        with self._ddl_lock:
            names = {t["name"] for t in self.catalog.tables.values()}
            check_create(self._views(), names.__contains__, view, bool(p.get("replace")))
            old = self.catalog.views.get(view.name)
            d = dict(view.to_dict(), id=old["id"] if old else uuidlib.uuid4().hex)
            self.catalog.propose({"op": "put_view", "view": d})
        return d

    def _h_drop_views(self, p: dict) -> dict:
        """{names, if_exists, cascade}: {"views": the views dropped along}."""
        self._require_leader()
        with self._ddl_lock:
            names = [n for n in p["names"]
                     if n in self.catalog.views or not p.get("if_exists")]
            for n in names:
                if n not in self.catalog.views:
                    raise errors.NotFound(f'view "{n}" does not exist')
            along = check_drop(self._views(), "view", names, bool(p.get("cascade")))
            if names or along:
                self.catalog.propose({"op": "drop_views", "names": names + along})
        return {"views": along}

    def _h_list_views(self, p) -> list[dict]:
        self._require_leader()
        return [self.catalog.views[n] for n in sorted(self.catalog.views)]

    def _h_list_tables(self, p) -> list[str]:
        self._require_leader()
        return sorted(t["name"] for t in self.catalog.tables.values())

    def _h_get_table(self, p: dict) -> dict:
        self._require_leader()
        t = self._by_name(p["name"])
        if t is None:
            raise errors.NotFound(f'table "{p["name"]}" does not exist')
        return {"table": t, "locations": self._locations(t)}

    def _h_locations(self, p: dict) -> dict:
        self._require_leader()
        t = self.catalog.tables.get(p["table_id"])
        if t is None:
            raise errors.NotFound(f"table with id {p['table_id']} does not exist (dropped)")
        return {"table": t, "locations": self._locations(t)}

    def _locations(self, t: dict) -> dict:
        cat = self.catalog
        live = self.live_tservers()
        out = {}
        for x in t["tablets"]:
            tid = x["tablet_id"]
            reps = self._reports.get(tid, {})
            leader, best = None, -1
            for u, st in reps.items():
                if st.get("role") == "LEADER" and st.get("term", 0) > best and u in live:
                    leader, best = u, st["term"]
            out[tid] = {"leader": leader, "replicas": [
                self._replica_info(u, reps.get(u), u in live) for u in cat.replicas.get(tid, [])]}
        return out

    def _replica_info(self, u: str, rep: dict | None, live: bool) -> dict:
        """One replica as the catalog and its server's last heartbeat know it. State:
        the reported one (engine/tserver/status.py; a FAILED replica's `error` with it);
        FAILED if its server is not live; INITIALIZED if placed but never reported."""
        rep = rep or {}
        state = rep.get("state", "RUNNING") if rep else "INITIALIZED"
        if not live:
            state = "FAILED"
        return {"uuid": u, "addr": self.catalog.tservers.get(u, ""), "live": live,
                "role": rep.get("role", "UNKNOWN"), "state": state,
                "term": rep.get("term"), "leader": rep.get("leader"),
                "member_type": rep.get("member_type"), "error": rep.get("error")}

    def _h_list_replicas(self, p) -> list[dict]:
        """Every replica of every table: {table, table_id, tablet_id, partition index,
        uuid, addr, live, role, state, term, leader, member_type}."""
        self._require_leader()
        cat = self.catalog
        live = self.live_tservers()
        out = []
        for t in sorted(cat.tables.values(), key=lambda t: t["name"]):
            for i, x in enumerate(t["tablets"]):
                tid = x["tablet_id"]
                reps = self._reports.get(tid, {})
                for u in cat.replicas.get(tid, []):
                    out.append(dict(self._replica_info(u, reps.get(u), u in live),
                                    table=t["name"], table_id=t["id"], tablet_id=tid,
                                    partition=i))
        return out

    # -- status / lifecycle ------------------------------------------------------------------
    def status(self) -> dict:
        st = self.catalog.status()
        return {"role": "master", "uuid": self.uuid, "addr": self.addr, "pid": os.getpid(),
                "raft_role": st["role"], "leader": st["leader"], "term": st["term"],
                "tables": len(self.catalog.tables), "tservers": self.tservers(),
                "http_addr": None if self.http is None else self.http.addr}

    def web_status(self) -> dict:
        """The status page's data (engine/metrics/webserver.py)."""
        st = self.catalog.status()
        cat = self.catalog
        tables = [{"name": t["name"], "id": t["id"], "tablets": len(t["tablets"]),
                   "replication_factor": t["replication_factor"]}
                  for t in sorted(list(cat.tables.values()), key=lambda t: t["name"])]
        return {"role": "master", "uuid": self.uuid, "rpc_addr": self.addr,
                "http_addr": None if self.http is None else self.http.addr,
                **process_status(self.metrics), "masters": ", ".join(self.masters),
                "raft_role": st["role"], "term": st["term"], "leader": st["leader"],
                "tablets": [{"tablet_id": "sys-catalog", "table": "(sys catalog)",
                             "role": st["role"], "state": "RUNNING", "term": st["term"],
                             "leader": st["leader"], "commit_index": st["commit_index"],
                             "applied_index": st["applied_index"],
                             "wal_bytes": dir_bytes(os.path.join(self.data_dir, "sys-catalog",
                                                                 "raft-wal"))}],
                "tservers": self.tservers(), "tables": tables}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._monitor.join(timeout=5)
        if self.http is not None:
            self.http.stop()
        self.server.stop()
        self.transport.stop()
        self.catalog.close()
        self.rpc_client.close()
