"""ServerMetrics: one process's Prometheus metrics (see the package docstring).

A ServerMetrics owns a CollectorRegistry of its own. Request-path metrics are counters and
histograms updated as requests run (`instrument` wraps RPC handlers; `statement` records a
SQL statement); state metrics are read from the server's `status()` dict at scrape time
(`status_collector`), so /metrics and /status.json always agree and nothing is kept twice.

The status dict a server hands over may hold (every key optional):

    tablets       [{tablet_id, table, role, state, term, leader, commit_index,
                    applied_index, wal_bytes}]
    maintenance   [{op, runs, seconds, work, last_seconds, last_run}]
    heartbeat_age_s                      seconds since the last heartbeat the master took
    tservers      [{uuid, addr, live, last_heartbeat_s}]            (master)
    tables        [{name, ...}], raft_role, term                    (master)
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterable

import numpy as np
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from engine import errors

# Latency buckets from 0.5 ms to 30 s: a point write on a quiet server is ~1 ms, a
# replicated one a few ms, a scan of a large tablet seconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0)
WRITE_COMMANDS = frozenset({"INSERT", "UPSERT", "UPDATE", "DELETE", "COPY"})
# The `_created` timestamp series double every counter's lines for no use to a scraper
# (process-wide setting of prometheus_client; Prometheus itself ignores them).
disable_created_metrics()
OP_NAMES = {1: "insert", 2: "update", 3: "delete", 5: "upsert"}  # engine OpType values


def _outcome(e: BaseException | None) -> str:
    """ok / refused (a retryable refusal: not the leader, tablet not here, timed out
    waiting for a majority) / error (anything else)."""
    if e is None:
        return "ok"
    if isinstance(e, errors.ServiceUnavailable):
        return "refused"
    return "error"


def rss_bytes() -> int | None:
    """This process's resident set size (Linux /proc), or None elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def dir_bytes(path: str) -> int:
    """Bytes of the regular files under `path` (0 if it does not exist)."""
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        elif e.is_file(follow_symlinks=False):
                            total += e.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        pass  # removed while we looked (a WAL segment GC'd)
        except (FileNotFoundError, NotADirectoryError):
            pass
    return total


def _utc(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def maintenance_rows(mm) -> list[dict]:
    """A MaintenanceManager's per-op statistics as status rows."""
    if mm is None:
        return []
    out = []
    for name, st in sorted(dict(mm.stats).items()):
        out.append({"op": name, "runs": st.runs, "seconds": round(st.seconds, 6),
                    "work": st.work, "last_seconds": round(getattr(st, "last_seconds", 0.0), 6),
                    "last_run": _utc(getattr(st, "last_run", None))})
    return out


class _StatusCollector(Collector):
    def __init__(self, status: Callable[[], dict]):
        self._status = status

    def collect(self) -> Iterable:
        try:
            st = self._status()
        except Exception:  # noqa: BLE001 - a scrape must not fail because a server is busy
            return []
        return list(status_families(st))


def status_families(st: dict) -> Iterable:
    """Prometheus metric families derived from a status dict (module docstring)."""
    tablets = st.get("tablets")
    if tablets is not None:
        by = {}
        for t in tablets:
            k = (t.get("role") or "UNKNOWN", t.get("state") or "UNKNOWN")
            by[k] = by.get(k, 0) + 1
        g = GaugeMetricFamily("kudusql_tablet_replicas", "Tablet replicas on this server by "
                              "Raft role and state", labels=["role", "state"])
        for (role, state), n in sorted(by.items()):
            g.add_metric([role, state], n)
        yield g
        term = GaugeMetricFamily("kudusql_raft_term", "Raft term of each tablet replica",
                                 labels=["tablet", "table"])
        lag = GaugeMetricFamily("kudusql_raft_apply_lag_entries", "Committed entries not yet "
                                "applied, per tablet replica", labels=["tablet", "table"])
        wal = GaugeMetricFamily("kudusql_wal_bytes", "Bytes of each tablet's WAL on disk",
                                labels=["tablet", "table"])
        for t in tablets:
            lab = [t["tablet_id"], t.get("table") or ""]
            if t.get("term") is not None:
                term.add_metric(lab, t["term"])
            if t.get("commit_index") is not None and t.get("applied_index") is not None:
                lag.add_metric(lab, max(0, t["commit_index"] - t["applied_index"]))
            if t.get("wal_bytes") is not None:
                wal.add_metric(lab, t["wal_bytes"])
        yield term
        yield lag
        yield wal
    mm = st.get("maintenance")
    if mm is not None:
        runs = CounterMetricFamily("kudusql_maintenance_op_runs", "Maintenance ops run "
                                   "(flushes, compactions, GC) by op", labels=["op"])
        secs = CounterMetricFamily("kudusql_maintenance_op_seconds", "Seconds spent in "
                                   "maintenance ops by op", labels=["op"])
        last = GaugeMetricFamily("kudusql_maintenance_op_last_seconds", "Duration of the "
                                 "last run of each maintenance op", labels=["op"])
        for m in mm:
            runs.add_metric([m["op"]], m["runs"])
            secs.add_metric([m["op"]], m["seconds"])
            last.add_metric([m["op"]], m.get("last_seconds") or 0.0)
        yield runs
        yield secs
        yield last
    if "heartbeat_age_s" in st:
        age = st["heartbeat_age_s"]
        yield GaugeMetricFamily("kudusql_heartbeat_age_seconds", "Seconds since the master "
                                "last accepted this tablet server's heartbeat (-1: never)",
                                value=-1 if age is None else age)
    ts = st.get("tservers")
    if ts is not None:
        live = sum(1 for t in ts if t.get("live"))
        g = GaugeMetricFamily("kudusql_tservers", "Tablet servers known to the catalog by "
                              "liveness", labels=["state"])
        g.add_metric(["live"], live)
        g.add_metric(["dead"], len(ts) - live)
        yield g
        age = GaugeMetricFamily("kudusql_tserver_heartbeat_age_seconds", "Seconds since each "
                                "tablet server's last heartbeat (as seen by this master)",
                                labels=["uuid", "addr"])
        for t in ts:
            if t.get("last_heartbeat_s") is not None:
                age.add_metric([t["uuid"], t["addr"]], t["last_heartbeat_s"])
        yield age
    if isinstance(st.get("tables"), list):
        yield GaugeMetricFamily("kudusql_tables", "Tables in the catalog",
                                value=len(st["tables"]))
    if st.get("raft_role") is not None:
        yield GaugeMetricFamily("kudusql_master_is_leader", "1 if this master leads the "
                                "sys catalog's Raft group",
                                value=1 if st["raft_role"] == "LEADER" else 0)
        if st.get("term") is not None:
            yield GaugeMetricFamily("kudusql_sys_catalog_term", "Raft term of the masters' "
                                    "sys catalog", value=st["term"])


class ServerMetrics:
    """The metrics of one server process (`role`: master, tserver or sql)."""

    def __init__(self, role: str):
        self.role = role
        self.started = time.time()
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)  # process_resident_memory_bytes, cpu, open fds
        if role in ("master", "tserver"):
            self.rpc_requests = Counter("kudusql_rpc_requests", "RPCs handled by method and "
                                        "outcome (ok, refused: retryable, error)",
                                        ["method", "outcome"], registry=r)
            self.rpc_seconds = Histogram("kudusql_rpc_duration_seconds", "RPC handling time "
                                         "by method", ["method"], buckets=LATENCY_BUCKETS,
                                         registry=r)
        if role == "tserver":
            self.rows_written = Counter("kudusql_rows_written", "Rows applied by writes this "
                                        "server led, by operation", ["op"], registry=r)
            self.row_errors = Counter("kudusql_row_errors", "Rows refused by writes (duplicate "
                                      "key, not found, ...), by code", ["code"], registry=r)
            self.write_seconds = Histogram("kudusql_write_duration_seconds", "Write RPC "
                                           "latency: validation, Raft replication to a "
                                           "majority, apply", buckets=LATENCY_BUCKETS,
                                           registry=r)
            self.scans = Counter("kudusql_scans", "Scans served (DoGet), by outcome",
                                 ["outcome"], registry=r)
            self.scan_rows = Counter("kudusql_scan_rows_returned", "Rows returned by scans",
                                     registry=r)
            self.scan_seconds = Histogram("kudusql_scan_duration_seconds", "Scan time from "
                                          "the request to the last batch sent",
                                          buckets=LATENCY_BUCKETS, registry=r)
            self.elections = Counter("kudusql_raft_elections", "Raft elections seen by this "
                                     "server's replicas (term increases)", registry=r)
            self.leader_changes = Counter("kudusql_raft_leader_changes", "Changes of a "
                                          "tablet's known leader on this server's replicas",
                                          registry=r)
            self._raft_seen: dict[str, tuple[int, str | None]] = {}
        if role == "sql":
            self.statements = Counter("kudusql_sql_statements", "SQL statements run by command "
                                      "and outcome (ok or the SQLSTATE class)",
                                      ["command", "outcome"], registry=r)
            self.statement_seconds = Histogram("kudusql_sql_statement_duration_seconds",
                                               "SQL statement latency by command",
                                               ["command"], buckets=LATENCY_BUCKETS,
                                               registry=r)
            self.statement_rows = Counter("kudusql_sql_rows_affected", "Rows "
                                          "affected by INSERT, UPDATE, DELETE, UPSERT, by command",
                                          ["command"], registry=r)

    def status_collector(self, status: Callable[[], dict]) -> None:
        """Derive gauges from `status()` at every scrape."""
        self.registry.register(_StatusCollector(status))

    # -- RPC handlers (master, tserver) ------------------------------------------------------
    def instrument(self, handlers: dict[str, Callable]) -> dict[str, Callable]:
        """The same DoAction handlers, each counted and timed by method and outcome."""
        return {name: self._timed(name, fn) for name, fn in handlers.items()}

    def _timed(self, name: str, fn: Callable) -> Callable:
        requests, seconds = self.rpc_requests, self.rpc_seconds

        def call(payload):
            t0 = time.perf_counter()
            err = None
            try:
                return fn(payload)
            except BaseException as e:
                err = e
                raise
            finally:
                seconds.labels(name).observe(time.perf_counter() - t0)
                requests.labels(name, _outcome(err)).inc()
        call.__name__ = getattr(fn, "__name__", name)
        return call

    def instrument_write(self, fn: Callable, op_column: str) -> Callable:
        """A DoPut write handler (cmd, rows with `op_column`) -> result, counted: rows
        applied by op type (the batch's ops less the rows that came back as errors)."""
        requests = self.rpc_requests

        def call(cmd, table):
            t0 = time.perf_counter()
            err = None
            try:
                out = fn(cmd, table)
            except BaseException as e:
                err = e
                raise
            finally:
                dt = time.perf_counter() - t0
                self.rpc_seconds.labels("write").observe(dt)
                self.write_seconds.observe(dt)
                requests.labels("write", _outcome(err)).inc()
            if isinstance(out, dict) and "num_applied" in out:
                self._count_rows(table, op_column, out.get("row_errors") or [])
            return out
        return call

    def _count_rows(self, table, op_column: str, row_errors: list) -> None:
        # vectorised: one bincount per batch, a Python step per refused row only
        ops = np.asarray(table.column(op_column).to_numpy(), dtype=np.int64)
        counts = np.bincount(ops, minlength=8)
        for e in row_errors:
            i, code = e[0], e[1]
            if 0 <= i < len(ops):
                counts[ops[i]] -= 1
            self.row_errors.labels(str(code)).inc()
        for op, n in enumerate(counts):
            if n > 0:
                self.rows_written.labels(OP_NAMES.get(op, str(op))).inc(int(n))

    def instrument_scan(self, fn: Callable) -> Callable:
        """A DoGet scan handler ticket -> (schema, batches), counted: the batches are
        counted as they are sent; the latency runs until the last one (or a failure)."""
        requests, seconds = self.rpc_requests, self.rpc_seconds

        def call(ticket):
            t0 = time.perf_counter()
            try:
                schema, it = fn(ticket)
            except BaseException as e:
                seconds.labels("scan").observe(time.perf_counter() - t0)
                requests.labels("scan", _outcome(e)).inc()
                self.scans.labels(_outcome(e)).inc()
                raise

            def counted():
                err = None
                try:
                    for b in it:    # a batch, or (batch, metadata): an ordered scan's
                        self.scan_rows.inc((b[0] if isinstance(b, tuple) else b).num_rows)
                        yield b
                except BaseException as e:
                    err = e
                    raise
                finally:
                    dt = time.perf_counter() - t0
                    seconds.labels("scan").observe(dt)
                    self.scan_seconds.observe(dt)
                    requests.labels("scan", _outcome(err)).inc()
                    self.scans.labels(_outcome(err)).inc()
            return schema, counted()
        return call

    # -- Raft (tserver) ---------------------------------------------------------------------
    def observe_raft(self, tablet_id: str, term: int, leader: str | None) -> None:
        """Called every tick per replica: a term increase is an election (each term is
        started by one), a different known leader a leader change. A replica seen for the
        first time (server start, new replica) counts nothing."""
        prev_term, prev_leader = self._raft_seen.get(tablet_id, (None, None))
        if prev_term is not None and term > prev_term:
            self.elections.inc(term - prev_term)
        if leader is not None and prev_leader is not None and leader != prev_leader:
            self.leader_changes.inc()
        self._raft_seen[tablet_id] = (term, leader if leader is not None else prev_leader)

    def forget_tablet(self, tablet_id: str) -> None:
        self._raft_seen.pop(tablet_id, None)

    # -- SQL (serve) ------------------------------------------------------------------------
    def statement(self, command: str, seconds: float, rows: int | None,
                  sqlstate: str | None = None) -> None:
        cmd = (command or "UNKNOWN").split()[0].upper()
        self.statements.labels(cmd, "ok" if sqlstate is None else sqlstate[:2]).inc()
        self.statement_seconds.labels(cmd).observe(seconds)
        if rows is not None and rows > 0 and cmd in WRITE_COMMANDS:
            self.statement_rows.labels(cmd).inc(rows)


def process_status(metrics: ServerMetrics | None = None) -> dict[str, Any]:
    """The process facts every status page shows."""
    return {"pid": os.getpid(), "rss_bytes": rss_bytes(),
            "uptime_s": None if metrics is None else round(time.time() - metrics.started, 1)}
