"""The cluster commands: `kudusql master`, `kudusql tserver`, `kudusql serve --masters`,
`kudusql cluster start|stop|status` (docs/cluster.md).

    kudusql master  --data-dir D --rpc-addr H:P [--masters A,B,C] [--rpc-secret-file F]
                    [--rpc-cert F --rpc-key F [--rpc-ca F]] [--http-port N] [--arrow-port N]
    kudusql tserver --data-dir D --rpc-addr H:P --masters A,B,C [--rpc-secret-file F]
                    [--rpc-cert F --rpc-key F [--rpc-ca F]] [--http-port N] [--arrow-port N]
    kudusql serve   --masters A,B,C [--rpc-secret-file F] [--rpc-ca F] [--port N]
                    [--http-port N] [--replica-selection LEADER_ONLY|CLOSEST_REPLICA] ...
    kudusql cluster start  --data-dir D [--tservers 3] [--masters 1|3] [--port 5433]
                           [--sql-frontends 1] [--rpc-tls]
    kudusql cluster stop   --data-dir D
    kudusql cluster status --data-dir D [--json]

`cluster start` lays out D (a cluster secret in D/rpc-secret, mode 0600; one directory per
process; logs in D/logs), starts every process in the background (own session, so it
outlives the command), records them in D/cluster.json and returns once a SQL query through
the front end succeeds, printing the address (like `pg_ctl start`). `cluster stop` sends
SIGTERM and, after 10 s, SIGKILL. `cluster status` lists every process: role, uuid, RPC
address, HTTP address, PID, alive or not, tablets led and followed, and each FAILED
replica of a tablet server with its error (engine/tserver/status.py).

TLS on RPC (engine/rpc): `cluster start --rpc-tls` (first start) makes a self-signed
certificate for 127.0.0.1 and localhost with the openssl command, D/rpc-cert.pem (0644) and
its key D/rpc-key.pem (0600), and records `"tls": true` in cluster.json: masters and tablet
servers get `--rpc-cert/--rpc-key` (the certificate is also the CA they trust), the SQL
front end `--rpc-ca` only; `cluster status`, restarts and `cluster_credentials` /
`rpc_client_for` / `remote_catalog_for` (what tests and benchmarks use to reach a local
cluster) follow cluster.json. The cluster secret is required on top of TLS.

Arrow stream endpoints (wire/arrow_stream.py, docs/spark.md): `cluster start` gives every
tablet server one (reads and writes for the JVM Spark connector) and every master one
(`locate`: the tablet servers' endpoints, from their heartbeats), each on a free port of
127.0.0.1 chosen at the first start and kept in cluster.json as `arrow_port`.

HTTP: every process started by `cluster start` serves /metrics (Prometheus), /status.json
and a status page at / on a free port of 127.0.0.1 chosen at the first start and kept in
cluster.json (`cluster status` shows it; engine/metrics). Standalone processes serve HTTP
only when given `--http-port N` (0 or none: off); `--http-host` (default 127.0.0.1) binds
another address.

The server commands run until SIGTERM or SIGINT. The secret defaults to the file
`rpc-secret` next to the data directory's cluster.json when started by `cluster start`;
standalone processes need --rpc-secret-file (or the KUDUSQL_RPC_SECRET variable).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

CLUSTER_FILE = "cluster.json"
SECRET_FILE = "rpc-secret"
CERT_FILE = "rpc-cert.pem"  # `cluster start --rpc-tls`: self-signed, its own CA
KEY_FILE = "rpc-key.pem"


# -- helpers ----------------------------------------------------------------------------------
def _split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise SystemExit(f"kudusql: bad address {addr!r} (want HOST:PORT)")
    return host, int(port)


def rpc_secret(args) -> str:
    """The cluster's shared secret: --rpc-secret-file, else $KUDUSQL_RPC_SECRET, else exit."""
    from engine.rpc.rpc import read_secret_file
    if args.rpc_secret_file:
        return read_secret_file(args.rpc_secret_file)
    env = os.environ.get("KUDUSQL_RPC_SECRET")
    if env:
        return env
    raise SystemExit("kudusql: the cluster secret is needed: --rpc-secret-file FILE "
                     "(mode 0600) or KUDUSQL_RPC_SECRET")


def tls_config(args, server: bool):
    """The TLS configuration of --rpc-cert/--rpc-key/--rpc-ca (None: plaintext)."""
    from engine.errors import EngineError
    from engine.rpc.rpc import load_tls
    try:
        return load_tls(args.rpc_cert, args.rpc_key, args.rpc_ca, server=server)
    except EngineError as e:
        raise SystemExit(f"kudusql: {e}") from None


def _tls_note(tls) -> str:
    return " (RPC over TLS)" if tls is not None else ""


def parse_masters(s: str) -> list[str]:
    """"host:port,host:port" -> the master addresses."""
    return [m.strip() for m in s.split(",") if m.strip()]


def _wait_for_signal() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *a: stop.set())
    while not stop.wait(1.0):
        pass


def _logging(args) -> None:
    from kudusql import logs
    logs.configure(getattr(args, "verbose", False))


# -- server processes -------------------------------------------------------------------------
def cmd_master(args) -> int:
    from engine.master.master import Master
    _logging(args)
    host, port = _split_addr(args.rpc_addr)
    tls = tls_config(args, server=True)
    m = Master(args.data_dir, host, port, rpc_secret(args),
               parse_masters(args.masters) if args.masters else None, tick_ms=args.tick_ms,
               election_ticks=args.election_ticks,
               tserver_unresponsive_s=args.tserver_unresponsive_timeout,
               fsync=not args.no_fsync, http_port=args.http_port or None,
               http_host=args.http_host, tls=tls, max_clock_error_s=args.max_clock_error)
    stream = None
    if args.arrow_port is not None:
        from wire.arrow_stream import master_endpoint
        stream = master_endpoint(m, host, args.arrow_port)
    note = "" if stream is None else f" (Arrow stream endpoint {stream.address})"
    print(f"kudusql master {m.uuid} on {m.addr}{_tls_note(tls)}{_http_note(m.http)}{note}",
          flush=True)
    try:
        _wait_for_signal()
    finally:
        if stream is not None:
            stream.shutdown()
        m.stop()
    return 0


def cmd_tserver(args) -> int:
    from engine.tserver.tablet_server import TabletServer
    _logging(args)
    host, port = _split_addr(args.rpc_addr)
    tls = tls_config(args, server=True)
    ts = TabletServer(args.data_dir, host, port, rpc_secret(args), parse_masters(args.masters),
                      tick_ms=args.tick_ms, election_ticks=args.election_ticks,
                      heartbeat_ms=args.heartbeat_ms, fsync=not args.no_fsync,
                      http_port=args.http_port or None, http_host=args.http_host, tls=tls,
                      log_retention_entries=args.log_retention_entries,
                      wal_segment_bytes=args.wal_segment_bytes,
                      max_clock_error_s=args.max_clock_error)
    stream = None
    if args.arrow_port is not None:
        from engine.client.client import RemoteCatalog
        from wire.arrow_stream import cluster_endpoint
        catalog = RemoteCatalog.connect(parse_masters(args.masters), rpc_secret(args),
                                        replica_selection="CLOSEST_REPLICA", tls=tls)
        stream = cluster_endpoint(catalog, host, args.arrow_port, ts.addr)
        ts.stream_addr = stream.address
    note = "" if stream is None else f" (Arrow stream endpoint {stream.address})"
    print(f"kudusql tserver {ts.uuid} on {ts.addr}{_tls_note(tls)}{_http_note(ts.http)}"
          f"{note}", flush=True)
    try:
        _wait_for_signal()
    finally:
        if stream is not None:
            stream.shutdown()
            catalog.close()
        ts.stop()
    return 0


def _http_note(http) -> str:
    return "" if http is None else f" (status page http://{http.addr}/)"


def start_sql_status(db, port: int | None, host: str = "127.0.0.1", masters=None):
    """The SQL front end's HTTP port (engine/metrics): statement metrics for every
    session of `db`, and its status (embedded: tablets, WAL, maintenance; on a cluster:
    the masters and the tablet locations it has cached). None when `port` is 0/None."""
    if not port:
        return None
    from engine.metrics.metrics import ServerMetrics
    from engine.metrics.webserver import StatusServer
    from kudusql.sql_status import sql_status
    metrics = db.metrics = ServerMetrics("sql")
    holder: dict = {}
    status = lambda: sql_status(db, holder.get("http"), masters)  # noqa: E731
    metrics.status_collector(lambda: sql_status(db, holder.get("http"), masters, False))
    http = holder["http"] = StatusServer(host, port, metrics.registry, status,
                                         "kudusql SQL front end")
    db.http_addr = http.addr
    # on stderr: the first line on stdout stays the SQL address (scripts read it)
    print(f"kudusql: status page http://{http.addr}/ (metrics at /metrics)", file=sys.stderr,
          flush=True)
    return http


def serve_cluster(config, masters: list[str], secret: str,
                  replica_selection: str = "LEADER_ONLY", http_port: int | None = None,
                  http_host: str = "127.0.0.1", tls=None) -> int:
    """The Postgres wire server over a cluster (stateless: several may run); `tls` (a
    TlsConfig: the CA it trusts) makes its RPC to masters and tablet servers TLS."""
    import asyncio

    from engine.client.client import RemoteCatalog
    from kudusql.session import Database
    from wire.auth import UserStore
    from wire.server import Server, check_config

    check_config(config)
    db = Database(RemoteCatalog.connect(masters, secret, replica_selection=replica_selection,
                                        tls=tls),
                  None, config.query_mem_limit)
    http = start_sql_status(db, http_port, http_host, masters)
    try:
        async def main() -> None:
            server = Server(db, config, UserStore(None))
            await server.start()
            print(f"kudusql: serving the cluster of masters {','.join(masters)}"
                  f"{_tls_note(tls)} on {config.host}:{server.port}; Ctrl-C stops",
                  flush=True)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
            await server.close()
        asyncio.run(main())
    finally:
        if http is not None:
            http.stop()
        db.close()
    return 0


# -- cluster start / stop / status -----------------------------------------------------------
_handed_out: set[int] = set()


def _free_port() -> int:
    """A port free on 127.0.0.1 now, never one this process handed out before: the ports
    of a cluster are all chosen before any process binds them, and the kernel may give a
    just-closed port to the next bind(0) (a tserver's status page then found its port
    taken by another process of the same cluster: 'Address already in use')."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def _port_free(port: int) -> bool:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _load(data_dir: str) -> dict:
    try:
        with open(os.path.join(data_dir, CLUSTER_FILE)) as f:
            return json.load(f)
    except FileNotFoundError:
        raise SystemExit(f"kudusql cluster: no cluster in {data_dir} (run `kudusql cluster "
                         f"start --data-dir {data_dir}`)") from None


def cluster_credentials(data_dir: str):
    """(secret, TlsConfig or None) to call the local cluster in `data_dir` as a client
    (the TLS config holds only the CA: the cluster's certificate)."""
    from engine.rpc.rpc import load_tls, read_secret_file
    data_dir = os.path.abspath(data_dir)
    doc = _load(data_dir)
    secret = read_secret_file(os.path.join(data_dir, SECRET_FILE))
    tls = load_tls(ca_file=os.path.join(data_dir, CERT_FILE)) if doc.get("tls") else None
    return secret, tls


def rpc_client_for(data_dir: str, timeout_s: float | None = None):
    """An RpcClient of the local cluster in `data_dir` (secret, TLS as cluster.json says);
    the caller closes it."""
    from engine.rpc.rpc import DEFAULT_TIMEOUT_S, RpcClient
    secret, tls = cluster_credentials(data_dir)
    return RpcClient(secret, timeout_s or DEFAULT_TIMEOUT_S, tls=tls)


def remote_catalog_for(data_dir: str, **kw):
    """A RemoteCatalog (engine/client) of the local cluster in `data_dir`; `kw` go to
    ClusterClient (timeout_s, replica_selection, ...). The caller closes it."""
    from engine.client.client import RemoteCatalog
    secret, tls = cluster_credentials(data_dir)
    masters = [m["addr"] for m in _load(os.path.abspath(data_dir))["masters"]]
    return RemoteCatalog.connect(masters, secret, tls=tls, **kw)


def _save(data_dir: str, doc: dict) -> None:
    tmp = os.path.join(data_dir, CLUSTER_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, os.path.join(data_dir, CLUSTER_FILE))


def _spawn(data_dir: str, name: str, argv: list[str]) -> int:
    logs = os.path.join(data_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    out = open(os.path.join(logs, f"{name}.log"), "ab")
    p = subprocess.Popen([sys.executable, "-m", "kudusql.cli", *argv], stdout=out,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    out.close()
    return p.pid


def _log_argv(doc: dict) -> list[str]:
    """A tablet server's log flags as `cluster start` was given them (older cluster.json
    files have none: the defaults)."""
    out = []
    if doc.get("log_retention_entries"):
        out += ["--log-retention-entries", str(doc["log_retention_entries"])]
    if doc.get("wal_segment_bytes"):
        out += ["--wal-segment-bytes", str(doc["wal_segment_bytes"])]
    return out


def _log_args(p) -> None:
    p.add_argument("--log-retention-entries", type=int, default=10_000,
                   help="Raft log entries a replica keeps for peers that fall behind; one "
                        "further behind gets a tablet copy (Kudu: --log_max_segments_to_"
                        "retain; default: %(default)s)")
    p.add_argument("--wal-segment-bytes", type=int, default=None,
                   help="size at which a replica's log rolls to a new segment; the log is "
                        "GC'd a segment at a time (Kudu: --log_segment_size_mb; default: "
                        "8 MiB)")


def _proc_argv(data_dir: str, proc: dict, doc: dict) -> list[str]:
    masters = ",".join(m["addr"] for m in doc["masters"])
    common = ["--rpc-secret-file", os.path.join(data_dir, SECRET_FILE)]
    timing = ["--tick-ms", str(doc["tick_ms"]), "--election-ticks", str(doc["election_ticks"]),
              "--max-clock-error", str(doc.get("max_clock_error_s", 10.0))]
    if doc.get("no_fsync"):
        timing.append("--no-fsync")
    if proc.get("http_port"):
        common += ["--http-port", str(proc["http_port"])]
    cert = os.path.join(data_dir, CERT_FILE)
    # servers present the certificate (and trust it: it is its own CA); the SQL front end
    # is only a client and gets the certificate alone, not the key
    tls = ["--rpc-cert", cert, "--rpc-key", os.path.join(data_dir, KEY_FILE)] \
        if doc.get("tls") else []
    d = os.path.join(data_dir, proc["name"])
    arrow = ["--arrow-port", str(proc["arrow_port"])] if proc.get("arrow_port") else []
    if proc["role"] == "master":
        return ["master", "--data-dir", d, "--rpc-addr", proc["addr"], "--masters", masters,
                "--tserver-unresponsive-timeout", str(doc["tserver_unresponsive_s"])] + \
            common + tls + timing + arrow
    if proc["role"] == "tserver":
        return ["tserver", "--data-dir", d, "--rpc-addr", proc["addr"], "--masters",
                masters, "--heartbeat-ms", str(doc["heartbeat_ms"])] + common + tls + timing \
            + _log_argv(doc) + arrow
    return ["serve", "--masters", masters, "--host", "127.0.0.1", "--port",
            str(proc["port"])] + common + (["--rpc-ca", cert] if doc.get("tls") else [])


def _wait_sql(port: int, timeout_s: float, procs: list[dict]) -> None:
    import asyncio

    import asyncpg

    deadline = time.monotonic() + timeout_s
    last = None

    async def once():
        conn = await asyncpg.connect(host="127.0.0.1", port=port, user="kudusql",
                                     database="kudusql", timeout=5)
        try:
            await conn.fetch("SELECT count(*) FROM (SELECT 1) t")
        finally:
            await conn.close()
    while time.monotonic() < deadline:
        dead = [p["name"] for p in procs if not _alive(p.get("pid"))]
        if dead:
            raise SystemExit(f"kudusql cluster start: {', '.join(dead)} exited; see the logs "
                             f"in the data directory's logs/")
        try:
            asyncio.run(once())
            return
        except Exception as e:  # noqa: BLE001 - not up yet: retry until the deadline
            last = e
            time.sleep(0.2)
    raise SystemExit(f"kudusql cluster start: SQL did not answer on port {port} within "
                     f"{timeout_s:.0f} s (last error: {last})")


def _wait_tservers(doc: dict, n: int, timeout_s: float) -> None:
    """Until the leader master sees n live tablet servers."""
    from engine.rpc.rpc import TlsMismatch
    rpc = rpc_client_for(doc["data_dir"], 2)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for m in doc["masters"]:
                try:
                    ts = rpc.call(m["addr"], "list_tservers")
                    if sum(1 for t in ts if t["live"]) >= n:
                        return
                except TlsMismatch as e:  # waiting cannot fix it
                    raise SystemExit(f"kudusql cluster start: {e}") from None
                except Exception:  # noqa: BLE001 - not up or not the leader yet
                    pass
            time.sleep(0.2)
    finally:
        rpc.close()
    raise SystemExit(f"kudusql cluster start: {n} tablet servers did not register with the "
                     f"master within {timeout_s:.0f} s")


def cmd_cluster_start(args) -> int:
    from engine.errors import EngineError
    from engine.rpc.rpc import create_secret_file, create_self_signed_cert
    data_dir = os.path.abspath(args.data_dir)
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, CLUSTER_FILE)
    if os.path.exists(path):
        doc = _load(data_dir)
        running = [p["name"] for p in doc["processes"] if _alive(p.get("pid"))]
        if running:
            print(f"kudusql cluster: already running in {data_dir} ({', '.join(running)})",
                  file=sys.stderr)
            return 1
        if args.rpc_tls and not doc.get("tls"):
            raise SystemExit(f"kudusql cluster start: the cluster in {data_dir} was created "
                             f"without --rpc-tls (TLS is chosen at the first start)")
    else:
        if args.masters not in (1, 3):
            raise SystemExit("kudusql cluster start: --masters is 1 or 3")
        if args.sql_frontends < 1:
            raise SystemExit("kudusql cluster start: --sql-frontends is at least 1")
        _handed_out.add(args.port)             # the SQL port is the caller's choice
        procs = [{"role": "master", "name": f"master-{i}",
                  "addr": f"127.0.0.1:{_free_port()}"} for i in range(args.masters)]
        procs += [{"role": "tserver", "name": f"tserver-{i}",
                   "addr": f"127.0.0.1:{_free_port()}"} for i in range(args.tservers)]
        procs.append({"role": "sql", "name": "sql", "port": args.port})
        # more stateless front ends over the same masters (fault tests use two)
        procs += [{"role": "sql", "name": f"sql-{i}", "port": _free_port()}
                  for i in range(1, args.sql_frontends)]
        doc = {"data_dir": data_dir, "processes": procs,
               "masters": [p for p in procs if p["role"] == "master"],
               "tick_ms": args.tick_ms, "election_ticks": args.election_ticks,
               "heartbeat_ms": args.heartbeat_ms,
               "tserver_unresponsive_s": args.tserver_unresponsive_timeout,
               "log_retention_entries": args.log_retention_entries,
               "wal_segment_bytes": args.wal_segment_bytes,
               "no_fsync": args.no_fsync, "tls": bool(args.rpc_tls),
               "max_clock_error_s": args.max_clock_error}
        if not os.path.exists(os.path.join(data_dir, SECRET_FILE)):
            create_secret_file(os.path.join(data_dir, SECRET_FILE))
    cert, key = os.path.join(data_dir, CERT_FILE), os.path.join(data_dir, KEY_FILE)
    if doc.get("tls") and not (os.path.exists(cert) and os.path.exists(key)):
        # every process is down here: a lost certificate is replaced, all get the new one
        try:
            create_self_signed_cert(cert, key)
        except EngineError as e:
            raise SystemExit(f"kudusql cluster start: {e}") from None
    for p in doc["processes"]:             # ports the cluster already uses: not again
        if p.get("addr"):
            _handed_out.add(int(p["addr"].rsplit(":", 1)[1]))
        _handed_out.update(x for x in (p.get("port"), p.get("http_port"), p.get("arrow_port"))
                           if x)
    for p in doc["processes"]:
        # an HTTP port per process, chosen once (a cluster.json from before they existed
        # gets them at its next start); one taken meanwhile by another program is replaced
        # (the status page moves; `cluster status` reads the new one) rather than failing
        # the start
        if not p.get("http_port") or not _port_free(p["http_port"]):
            p["http_port"] = _free_port()
        # every tablet server serves the Arrow stream endpoint (the JVM Spark connector's
        # "endpoint" on a cluster: docs/spark.md), on a port chosen once like the HTTP one;
        # every master serves one too, answering "locate" (the connector's "masters")
        if p["role"] in ("tserver", "master") and (not p.get("arrow_port")
                                                   or not _port_free(p["arrow_port"])):
            p["arrow_port"] = _free_port()
    for p in doc["processes"]:
        p["pid"] = _spawn(data_dir, p["name"], _proc_argv(data_dir, p, doc))
        _save(data_dir, doc)
    n_ts = sum(1 for p in doc["processes"] if p["role"] == "tserver")
    _wait_tservers(doc, n_ts, args.timeout)
    sql = next(p for p in doc["processes"] if p["role"] == "sql")
    _wait_sql(sql["port"], args.timeout, doc["processes"])
    print(f"kudusql cluster started: SQL at 127.0.0.1:{sql['port']} "
          f"(psql -h 127.0.0.1 -p {sql['port']} -U kudusql); masters "
          f"{','.join(m['addr'] for m in doc['masters'])}"
          f"{' (RPC over TLS, certificate ' + cert + ')' if doc.get('tls') else ''}",
          flush=True)
    return 0


def restart_process(data_dir: str, name: str) -> int:
    """Start one process of the cluster again (same address and directory): fault tests
    restart a server they killed. Returns the new PID."""
    data_dir = os.path.abspath(data_dir)
    doc = _load(data_dir)
    p = next(p for p in doc["processes"] if p["name"] == name)
    if _alive(p.get("pid")):
        raise SystemExit(f"kudusql cluster: {name} is running (PID {p['pid']})")
    p["pid"] = _spawn(data_dir, name, _proc_argv(data_dir, p, doc))
    _save(data_dir, doc)
    return p["pid"]


def cmd_cluster_stop(args) -> int:
    data_dir = os.path.abspath(args.data_dir)
    doc = _load(data_dir)
    procs = [p for p in doc["processes"] if _alive(p.get("pid"))]
    # the front end first, masters last (tablet servers keep heartbeating to them)
    order = {"sql": 0, "tserver": 1, "master": 2}
    procs.sort(key=lambda p: order[p["role"]])
    for p in procs:
        os.kill(p["pid"], signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p["pid"]) for p in procs):
        time.sleep(0.1)
    for p in procs:
        if _alive(p["pid"]):
            os.kill(p["pid"], signal.SIGKILL)
    print(f"kudusql cluster stopped ({len(procs)} processes)")
    return 0


def cluster_status(data_dir: str) -> list[dict]:
    doc = _load(data_dir)
    rpc = rpc_client_for(data_dir, 2)
    out = []
    try:
        for p in doc["processes"]:
            row = {"role": p["role"], "name": p["name"], "pid": p.get("pid"),
                   "alive": _alive(p.get("pid")), "uuid": None,
                   "addr": p.get("addr") or f"127.0.0.1:{p.get('port')}",
                   "http_addr": f"127.0.0.1:{p['http_port']}" if p.get("http_port") else None,
                   "leads": None, "follows": None, "rpc_tls": bool(doc.get("tls"))}
            if row["alive"] and p["role"] in ("master", "tserver"):
                try:
                    st = rpc.call(p["addr"], "status")
                    row["uuid"] = st["uuid"]
                    if p["role"] == "tserver":
                        tablets = st["tablets"]
                        roles = [t["role"] for t in tablets.values()
                                 if t.get("state") != "FAILED"]
                        row["leads"] = roles.count("LEADER")
                        row["follows"] = len(roles) - row["leads"]
                        row["failed"] = {tid: f"{t.get('table', '?')}: {t.get('error')}"
                                         for tid, t in tablets.items()
                                         if t.get("state") == "FAILED"}
                    else:
                        row["raft_role"] = st["raft_role"]
                except Exception as e:  # noqa: BLE001 - reported in the listing
                    row["error"] = str(e)
            out.append(row)
    finally:
        rpc.close()
    return out


def cmd_cluster_status(args) -> int:
    rows = cluster_status(os.path.abspath(args.data_dir))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'NAME':<11} {'ROLE':<8} {'PID':>7} {'ALIVE':<6} {'ADDRESS':<22} "
          f"{'HTTP':<22} {'LEADS':>5} {'FOLLOWS':>7}  UUID")
    for r in rows:
        print(f"{r['name']:<11} {r['role']:<8} {r['pid'] or '':>7} "
              f"{'yes' if r['alive'] else 'NO':<6} {r['addr']:<22} "
              f"{r['http_addr'] or '-':<22} "
              f"{'' if r['leads'] is None else r['leads']:>5} "
              f"{'' if r['follows'] is None else r['follows']:>7}  {r['uuid'] or ''}")
        if r.get("error"):
            print(f"{'':<11} error: {r['error']}")
        for tid, why in sorted((r.get("failed") or {}).items()):
            print(f"{'':<11} FAILED replica {tid} ({why})")
    if rows and rows[0]["rpc_tls"]:
        cert = os.path.join(os.path.abspath(args.data_dir), CERT_FILE)
        print(f"RPC over TLS (certificate {cert})")
    return 0


# -- argument parsing --------------------------------------------------------------------------
def _timing(p, tick_ms=100, election_ticks=10) -> None:
    p.add_argument("--tick-ms", type=int, default=tick_ms,
                   help="Raft tick: heartbeats go out every tick (default: %(default)s)")
    p.add_argument("--election-ticks", type=int, default=election_ticks,
                   help="minimum election timeout in ticks, randomised up to twice that "
                        "(default: %(default)s)")
    p.add_argument("--no-fsync", action="store_true",
                   help="do not fsync WALs and metadata (tests only: a machine crash loses "
                        "acknowledged writes)")
    p.add_argument("--max-clock-error", type=float, default=10.0, metavar="SECONDS",
                   help="refuse a client's timestamp (or snapshot) more than this far ahead "
                        "of the server's clock, with SQLSTATE 22008 (Kudu's "
                        "--max_clock_error; default: %(default)s)")


def _http_args(p, default_note: str = "off") -> None:
    p.add_argument("--http-port", type=int, default=None,
                   help="serve /metrics (Prometheus), /status.json and a status page on "
                        f"this port (0: off; default: {default_note})")
    p.add_argument("--http-host", default="127.0.0.1",
                   help="address for --http-port (no authentication: keep it on a trusted "
                        "network; default: %(default)s)")


def _secret_arg(p) -> None:
    p.add_argument("--rpc-secret-file", default=None,
                   help="file (mode 0600) holding the cluster secret every RPC must carry "
                        "(default: the KUDUSQL_RPC_SECRET environment variable)")


def _tls_args(p, server: bool) -> None:
    if server:
        p.add_argument("--rpc-cert", default=None, metavar="FILE",
                       help="PEM certificate this server presents: serve RPC over TLS (with "
                            "--rpc-key) and call the other servers over TLS; its "
                            "subjectAltName must name the address in --rpc-addr "
                            "(default: plaintext)")
        p.add_argument("--rpc-key", default=None, metavar="FILE",
                       help="PEM private key of --rpc-cert (mode 0600: refused if its group "
                            "or others can read it)")
        p.add_argument("--rpc-ca", default=None, metavar="FILE",
                       help="PEM CA certificate(s) other servers' certificates must be "
                            "signed by (default: --rpc-cert itself, for one self-signed "
                            "cluster certificate)")
    else:
        p.add_argument("--rpc-ca", default=None, metavar="FILE",
                       help="on a cluster whose RPC is TLS: the PEM CA certificate the "
                            "servers' certificates are signed by (the certificate itself "
                            "for a self-signed one; `cluster start --rpc-tls` makes "
                            "D/rpc-cert.pem); all a front end needs")
        p.add_argument("--rpc-cert", default=None, metavar="FILE",
                       help="the servers' PEM certificate, trusted as the CA when --rpc-ca "
                            "is not given (accepted so a front end can share the servers' "
                            "flags: the front end presents no certificate)")
        p.add_argument("--rpc-key", default=None, metavar="FILE",
                       help="the key of --rpc-cert; checked (mode 0600, matches) but not "
                            "used: the front end presents no certificate")


def add_commands(sub) -> None:
    m = sub.add_parser("master", help="run a master (the cluster's catalog)",
                       description="Run a master: the catalog of tables and tablet replicas, "
                                   "replicated by Raft among 1 or 3 masters.")
    m.add_argument("--data-dir", required=True, help="the master's directory")
    m.add_argument("--rpc-addr", required=True, help="HOST:PORT to serve RPC on (loopback "
                                                     "unless you mean otherwise)")
    m.add_argument("--masters", default=None,
                   help="every master's HOST:PORT, comma-separated (default: this one)")
    m.add_argument("--tserver-unresponsive-timeout", type=float, default=60.0,
                   help="seconds without a heartbeat before a tablet server counts as dead "
                        "(default: %(default)s)")
    m.add_argument("--arrow-port", type=int, default=None,
                   help="serve an Arrow IPC stream endpoint answering \"locate\" (the tablet "
                        "servers' endpoints; the JVM Spark connector's \"masters\", "
                        "docs/spark.md) on this port of the RPC host, which must be a "
                        "loopback address; off by default; `cluster start` gives every "
                        "master one")
    _secret_arg(m)
    _tls_args(m, server=True)
    _http_args(m)
    _timing(m)
    m.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    m.set_defaults(func=cmd_master)

    t = sub.add_parser("tserver", help="run a tablet server",
                       description="Run a tablet server: hosts tablet replicas, each a Raft "
                                   "peer with its WAL, MVCC and maintenance.")
    t.add_argument("--data-dir", required=True, help="the tablet server's directory")
    t.add_argument("--rpc-addr", required=True, help="HOST:PORT to serve RPC on")
    t.add_argument("--masters", required=True, help="the masters' HOST:PORT, comma-separated")
    t.add_argument("--heartbeat-ms", type=int, default=1000,
                   help="heartbeat interval to the master (default: %(default)s)")
    t.add_argument("--arrow-port", type=int, default=None,
                   help="serve the Arrow IPC stream endpoint (the JVM Spark connector's "
                        "\"endpoint\", docs/spark.md) on this port of the RPC host, which "
                        "must be a loopback address (no authentication); off by default; "
                        "`cluster start` gives every tablet server one")
    _log_args(t)
    _secret_arg(t)
    _tls_args(t, server=True)
    _http_args(t)
    _timing(t)
    t.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    t.set_defaults(func=cmd_tserver)

    c = sub.add_parser("cluster", help="start, stop or inspect a local cluster",
                       description="A local cluster of background processes (masters, "
                                   "tablet servers, one SQL front end) in one directory.")
    csub = c.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    s = csub.add_parser("start", help="start the cluster; returns once SQL works",
                        description="Start (or restart) the local cluster in --data-dir and "
                                    "return once a SQL query succeeds; prints the SQL address.")
    s.add_argument("--data-dir", required=True, help="the cluster's directory")
    s.add_argument("--tservers", type=int, default=3,
                   help="tablet servers (first start only; default: %(default)s)")
    s.add_argument("--masters", type=int, default=1,
                   help="masters, 1 or 3 (first start only; default: %(default)s)")
    s.add_argument("--port", type=int, default=5433,
                   help="the SQL front end's port (first start only; default: %(default)s)")
    s.add_argument("--sql-frontends", type=int, default=1,
                   help="SQL front ends (first start only): the first on --port, the others "
                        "on free ports named in cluster.json and `cluster status` (default: "
                        "%(default)s)")
    _log_args(s)
    s.add_argument("--heartbeat-ms", type=int, default=500,
                   help="tablet server heartbeat interval (default: %(default)s)")
    s.add_argument("--tserver-unresponsive-timeout", type=float, default=60.0,
                   help="seconds before the master counts a silent tablet server as dead "
                        "(default: %(default)s)")
    s.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for SQL to work (default: %(default)s)")
    s.add_argument("--rpc-tls", action="store_true",
                   help="run every RPC between the processes over TLS (first start only): "
                        "makes a self-signed certificate for 127.0.0.1 and localhost with "
                        "the openssl command, D/rpc-cert.pem and its key D/rpc-key.pem "
                        "(mode 0600); the cluster secret is still required")
    _timing(s)
    s.set_defaults(func=cmd_cluster_start)
    st = csub.add_parser("stop", help="stop every process of the cluster",
                         description="SIGTERM every process (SIGKILL after 10 s).")
    st.add_argument("--data-dir", required=True, help="the cluster's directory")
    st.set_defaults(func=cmd_cluster_stop)
    ss = csub.add_parser("status", help="list the cluster's processes",
                         description="Every process: role, uuid, RPC address, HTTP address "
                                     "(status page and /metrics), PID, alive or not, tablets "
                                     "led and followed.")
    ss.add_argument("--data-dir", required=True, help="the cluster's directory")
    ss.add_argument("--json", action="store_true", help="machine-readable output")
    ss.set_defaults(func=cmd_cluster_status)


def add_serve_arguments(s) -> None:
    s.add_argument("--masters", default=None,
                   help="serve a cluster: the masters' HOST:PORT, comma-separated (instead "
                        "of --data-dir; needs the cluster secret)")
    s.add_argument("--replica-selection", default="LEADER_ONLY",
                   choices=["LEADER_ONLY", "CLOSEST_REPLICA"], type=str.upper,
                   help="on a cluster: which replica a snapshot scan reads (CLOSEST_REPLICA: "
                        "followers too, once safe at the snapshot; docs/cluster.md)")
    _secret_arg(s)
    _tls_args(s, server=False)
    _http_args(s)
