"""The Postgres wire server: an asyncio listener, one `Connection` (an asyncio Protocol,
and one Session) per client, a thread pool for statements, a WAL sync thread for the
writes applied on the event loop (`WalSync`), the backend-key table for CancelRequest.

    server = Server(db, ServerConfig(port=5433))      # in a running event loop:
    await server.start(); ...; await server.close()

    ServerThread(db, config).start()   # the same, on a loop in a background thread
                                       # (tests, benchmarks); .port, .stop()

    serve(config, data_dir)            # `kudusql serve`: open the database, run until
                                       # SIGINT/SIGTERM, close everything

Contracts:
- Authentication (`ServerConfig.auth`): "trust" is only allowed when every listening
  address is a loopback one; `check_config` refuses the rest with a clear message, before
  anything is opened. Password methods: password (cleartext), md5, scram-sha-256.
- `max_connections` counts authenticated-or-authenticating sessions; one more gets FATAL
  53300 "sorry, too many clients already". CancelRequest connections do not count.
- A CancelRequest carries (pid, secret) from BackendKeyData; the secret is compared in
  constant time, a mismatch is ignored silently (PostgreSQL sends nothing either way).
- One connection's failure (malformed input -> FATAL 08P01, a crash in a handler) closes
  that connection only.
- TLS: with `tls_cert`/`tls_key`, SSLRequest is answered 'S' and the connection upgraded;
  `require_tls` refuses plain connections (28000).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import gc
import dataclasses
import hmac
import ipaddress
import logging
import os
import queue
import secrets
import signal
import socket
import ssl
import threading
import time

from wire.pg_catalog import PgCatalog
from wire.auth import DEFAULT_USER, METHODS, UserStore
from wire.connection import Connection
from wire.protocol import DEFAULT_MAX_MESSAGE

log = logging.getLogger("kudusql.wire")


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 5433                 # 0: any free port (tests)
    auth: str = "trust"              # trust | password | md5 | scram-sha-256
    max_connections: int = 100
    tls_cert: str | None = None
    tls_key: str | None = None
    require_tls: bool = False
    # -- Arrow Flight (wire/flight.py, docs/spark.md): the columnar endpoint of the PySpark
    # data source, on `host`; None/0 = not started. No authentication: loopback only.
    flight_port: int | None = None
    # the Arrow IPC stream endpoint of the JVM Spark connector (wire/arrow_stream.py), next
    # to Flight when flight_port is set: 0 = any free port (printed)
    arrow_port: int = 0
    # rows per encoded DataRow batch, and the batch size from which encoding moves off the
    # event loop into the pool (small results are encoded inline: a pool hop costs more)
    batch_rows: int = 16384
    inline_encode_rows: int = 2048
    flush_bytes: int = 256 * 1024    # write out once this much output is pending
    read_bytes: int = 256 * 1024
    max_message_bytes: int = DEFAULT_MAX_MESSAGE
    # per-statement memory limit, bytes or '2GB' (planner/guard.py); None: a quarter of RAM
    query_mem_limit: str | None = None
    # wire/fastpath.py's hot cases: prepared point reads and key writes answered from the
    # receive buffer on the event loop, and a pipelined run of Bind/Execute of one
    # prepared INSERT written as one batch; False: every message takes the ordinary path
    # (the differential tests' reference)
    fast_paths: bool = True
    # `kudusql serve`'s event loop: asyncio | uvloop | auto (uvloop when installed).
    # asyncio by default: uvloop measured no gain in server CPU per point read (66 vs 67
    # us under load, docs/wire.md); KUDUSQL_EVENT_LOOP overrides it for A/B runs
    event_loop: str = "asyncio"
    # `kudusql serve`'s cyclic garbage collector: a collection of the youngest generation
    # every `gc_threshold` net container allocations instead of Python's 700, and what
    # exists once the database is open frozen out of collections (`gc.freeze`). A
    # pipelined batch allocates a few tuples per row, a point read dozens of objects: with
    # the default the collector ran every few dozen ops and scanned the server's young
    # objects each time (measured: the batch decoder at 5.1 us per row with it, 0.3 with
    # 20,000). 0 keeps Python's defaults
    gc_threshold: int = 20_000
    # `kudusql serve`'s WAL commit delay (engine/config.py `wal_commit_delay_us` /
    # `wal_commit_siblings`, PostgreSQL's commit_delay / commit_siblings): None keeps the
    # engine's default
    commit_delay_us: int | None = None
    commit_siblings: int | None = None


class ConfigError(Exception):
    pass


def _is_loopback(host: str) -> bool:
    if not host or host in ("*", "0.0.0.0", "::"):
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return False
        return all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def check_config(config: ServerConfig) -> None:
    """Refuse unsafe or inconsistent settings (raises ConfigError with the reason)."""
    if config.auth not in METHODS:
        raise ConfigError(f"unknown --auth {config.auth!r} (one of {', '.join(METHODS)})")
    hosts = [h.strip() for h in config.host.split(",")]
    if config.auth == "trust" and not all(_is_loopback(h) for h in hosts):
        raise ConfigError(
            f"refusing to listen on {config.host} with trust authentication: anyone who "
            "can reach the port could connect as any user. Use --auth scram-sha-256 (or "
            "md5/password) for non-loopback addresses, or --host 127.0.0.1.")
    if bool(config.tls_cert) != bool(config.tls_key):
        raise ConfigError("--tls-cert and --tls-key go together")
    if config.require_tls and not config.tls_cert:
        raise ConfigError("--require-tls needs --tls-cert and --tls-key")
    if config.max_connections < 1:
        raise ConfigError("--max-connections must be at least 1")
    if (config.commit_delay_us or 0) < 0 or (config.commit_siblings or 0) < 0:
        raise ConfigError("--commit-delay and --commit-siblings must not be negative")
    if config.query_mem_limit is not None:
        from planner.guard import parse_bytes
        from planner.errors import SqlError
        try:
            parse_bytes(config.query_mem_limit)
        except SqlError:
            raise ConfigError(f"--query-mem-limit {config.query_mem_limit!r} is not a size "
                              "(e.g. 2GB, 512MB, 0 for no limit)") from None


class Server:
    """`session_factory(connection) -> Session` makes each connection's session (default: a
    session whose names resolve through pg_catalog / information_schema views for the
    connection's user and database, wire/pg_catalog/)."""

    def __init__(self, db, config: ServerConfig | None = None,
                 users: UserStore | None = None, session_factory=None):
        self.db = db
        self.session_factory = session_factory or (lambda conn: db.session(
            catalog=PgCatalog(db.catalog, user=conn.user, database=conn.database,
                              settings=conn.settings, pid=conn.pid,
                              prepared=conn.prepared_statements)))
        self.config = config or ServerConfig()
        check_config(self.config)
        self.users = users or UserStore(getattr(db.catalog, "data_dir", None))
        self.pool = cf.ThreadPoolExecutor(max_workers=self.config.max_connections + 4,
                                          thread_name_prefix="kudusql-wire")
        self.connections: dict[int, Connection] = {}
        self.ssl_context = None
        if self.config.tls_cert:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(self.config.tls_cert, self.config.tls_key)
            self.ssl_context = ctx
        self._server: asyncio.base_events.Server | None = None
        self._open: set[Connection] = set()      # every open client connection
        # the engine's commit delay (engine/config.py `wal_commit_delay_us`), applied once
        # per batch by the WAL sync thread (`WalSync`); a cluster client has no WAL here
        tc = getattr(getattr(db, "catalog", None), "config", None)
        self.wal_sync = WalSync(self.pool,
                                commit_delay_us=getattr(tc, "wal_commit_delay_us", 0),
                                commit_siblings=getattr(tc, "wal_commit_siblings", 0))
        self.port = self.config.port

    def auth_method(self, conn: Connection) -> str:
        return self.config.auth

    def new_backend_key(self) -> tuple[int, int]:
        while True:
            pid = secrets.randbelow(2**31 - 2) + 1
            if pid not in self.connections:
                return pid, secrets.randbelow(2**32) - 2**31

    def register(self, conn: Connection) -> bool:
        if len(self.connections) >= self.config.max_connections:
            return False
        self.connections[conn.pid] = conn
        return True

    def unregister(self, conn: Connection) -> None:
        if self.connections.get(conn.pid) is conn:
            del self.connections[conn.pid]

    def cancel(self, pid: int, secret: int) -> None:
        conn = self.connections.get(pid)
        if conn is not None and hmac.compare_digest(
                secret.to_bytes(4, "big", signed=True), conn.secret.to_bytes(4, "big",
                                                                           signed=True)):
            conn.cancel("user")

    def opened(self, conn: Connection) -> None:
        """A client connected (Connection.connection_made)."""
        self._open.add(conn)

    def closed(self, conn: Connection) -> None:
        """A connection ended (after `unregister`)."""
        self._open.discard(conn)

    async def start(self) -> None:
        hosts = [h.strip() for h in self.config.host.split(",")]
        self._server = await asyncio.get_running_loop().create_server(
            lambda: Connection(self), hosts if len(hosts) > 1 else hosts[0],
            self.config.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("kudusql listening on %s port %d (auth %s%s)", self.config.host, self.port,
                 self.config.auth, ", TLS" if self.ssl_context else "")

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        conns = list(self._open)
        for conn in conns:
            if conn.backend is not None:
                conn.cancel("shutdown")
            conn.abort()                # connection_lost: each one ends (`done`)
        if conns:
            await asyncio.wait([c.done for c in conns], timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):    # shutting down: best effort
                await asyncio.wait_for(self._server.wait_closed(), 5)
        self.wal_sync.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)


class WalSync:
    """The server's WAL sync thread: it waits for the WAL fsyncs of writes applied on the
    event loop (`Table.write_small_deferred`), runs their finishing calls (each commits
    in MVCC, releases its tablet, returns the result) and resolves their futures on the
    loop (`call_soon_threadsafe`), so the loop never waits for an fsync and no key write
    takes a trip through the statement pool.

    One thread by default (`threads`), taking every write queued when it wakes
    (`_take`), not one write per wake-up. A finishing call names the WAL position it
    waits for (`durable_at = (log, index)`: a local tablet's one-tablet write,
    engine/tablet/tablet.py
    `finish_op`); for each log of the batch the thread waits once, for its highest index
    (`log.wait_durable`: at most one fsync, which engine/consensus/log.py's group commit
    also shares with writers waiting on that log elsewhere), then runs that log's calls -
    they no longer block - and sends their outcomes. Why one thread and batches: the
    server's kernel time per key write was mostly thread hand-offs (perf: futex waits and
    wake-ups under `finish_task_switch`), each of four sync threads taking the GIL from
    the loop several times per write; one thread taking batches makes about half the
    futex calls and context switches per write, and no more fsyncs (docs/wire.md, "the
    write path (sixth pass)"). A finishing call that names no WAL position (a write over
    several tablets, a remote tablet's: it waits for itself, maybe long) runs on the
    statement pool (`pool`) instead, so it never holds up the key writes behind it; with
    no pool, on the sync thread after the batch's others.
    Outcomes go to the loop in batches: one `call_soon_threadsafe` (one wake-up of the
    loop) for all those that end before the loop has run them.

    Commit delay (engine/consensus/log.py, "Commit delay"): when a batch holds more than
    `commit_siblings` writes, the thread first sleeps `commit_delay_us` - the event loop
    applies and queues the writes arriving meanwhile - then takes those into the batch
    too, so one fsync per log covers and acknowledges them all; its waits then pass
    `delay=False` (the delay is taken once per batch, not once per log). A batch of one
    write (a lone client) never waits. Measured in docs/wire.md, "tenth pass"."""

    def __init__(self, pool=None, threads: int = 1, commit_delay_us: int = 0,
                 commit_siblings: int = 0):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._pool = pool
        self._n = threads
        self._delay = commit_delay_us / 1e6
        self._siblings = commit_siblings
        self.delays = 0         # batches that waited the commit delay
        self._lock = threading.Lock()
        # outcomes waiting for their loop, by loop: one wake-up of a loop resolves every
        # outcome that arrived meanwhile (a group commit ends several writes at once)
        self._ready: dict = {}

    def submit(self, loop: asyncio.AbstractEventLoop, finish) -> asyncio.Future:
        """A future (of `loop`) for `finish()`, run on the sync thread (or the pool: class
        docstring)."""
        if self._pool is not None and getattr(finish, "durable_at", None) is None:
            return loop.run_in_executor(self._pool, finish)
        fut = loop.create_future()
        if not self._threads:
            with self._lock:
                if not self._threads:
                    for i in range(self._n):
                        t = threading.Thread(target=self._run, daemon=True,
                                             name=f"kudusql-wal-sync-{i}")
                        t.start()
                        self._threads.append(t)
        self._queue.put((loop, fut, finish))
        return fut

    def _take(self) -> tuple[list, bool]:
        """(the calls queued now - waiting for the first -, whether `stop` asked this
        thread to end). A stop marker taken beyond the first goes back for another
        thread."""
        q = self._queue
        batch = [q.get()]
        while True:
            try:
                batch.append(q.get_nowait())
            except queue.Empty:
                break
        items = [it for it in batch if it is not None]
        for _ in range(len(batch) - len(items) - 1):
            q.put(None)
        return items, len(items) < len(batch)

    def _more(self) -> list:
        """The calls queued since the batch was taken (no wait); a stop marker met goes
        back to the queue, for `_take` to find next."""
        q = self._queue
        more = []
        while True:
            try:
                item = q.get_nowait()
            except queue.Empty:
                return more
            if item is None:
                q.put(None)
                return more
            more.append(item)

    def _run(self) -> None:
        while True:
            items, stop = self._take()
            if items:
                if self._delay and len(items) > self._siblings:
                    self.delays += 1
                    time.sleep(self._delay)
                    items += self._more()
                self._finish(items)
            if stop:
                return

    def _finish(self, items: list) -> None:
        """Run a batch's finishing calls (class docstring) and send their outcomes: for
        each log named, one wait for its highest index, then its calls; then the rest."""
        groups: dict = {}       # log -> [highest index, its calls]
        others = []
        for item in items:
            at = getattr(item[2], "durable_at", None)
            if at is None:
                others.append(item)
                continue
            g = groups.get(at[0])
            if g is None:
                groups[at[0]] = [at[1], [item]]
            else:
                if g[0] < at[1]:
                    g[0] = at[1]
                g[1].append(item)
        for log, (index, group) in groups.items():
            try:
                log.wait_durable(index, len(group), False)
            except BaseException:  # noqa: BLE001 - each call raises it again below
                pass
            self._send([(loop, fut, _outcome(finish)) for loop, fut, finish in group])
        if others:
            self._send([(loop, fut, _outcome(finish)) for loop, fut, finish in others])

    def _send(self, done: list) -> None:
        """Queue outcomes [(loop, future, outcome)] for their loops, waking each loop once
        unless a wake-up is already on its way."""
        loops: dict = {}
        with self._lock:
            for loop, fut, outcome in done:
                batch = self._ready.get(loop)
                if batch is None:
                    batch = self._ready[loop] = []
                    loops[loop] = True
                batch.append((fut, outcome))
        for loop in loops:
            try:
                loop.call_soon_threadsafe(self._resolve_ready, loop)
            except RuntimeError:    # the loop is closed: nobody waits any more
                with self._lock:
                    self._ready.pop(loop, None)

    def _resolve_ready(self, loop) -> None:
        """On `loop`: resolve the futures of every outcome that arrived for it."""
        with self._lock:
            batch = self._ready.pop(loop, ())
        for fut, outcome in batch:
            _resolve(fut, outcome)

    def stop(self) -> None:
        threads, self._threads = self._threads, []
        for _ in threads:
            self._queue.put(None)
        for t in threads:
            t.join(timeout=10)


def _outcome(finish) -> tuple:
    """(finish(), None), or (None, the exception it raised)."""
    try:
        return finish(), None
    except BaseException as e:  # noqa: BLE001 - the writer's, on its loop
        return None, e


def _resolve(fut, outcome) -> None:
    if fut.done():
        return
    value, exc = outcome
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


class ServerThread:
    """A Server on its own event loop in a background thread."""

    def __init__(self, db, config: ServerConfig | None = None, users: UserStore | None = None,
                 session_factory=None):
        self.server = Server(db, config, users, session_factory)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="kudusql-wire-loop",
                                        daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def port(self) -> int:
        return self.server.port

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.start())
        except BaseException as e:  # noqa: BLE001 - handed to start()
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.server.close())
        self.loop.close()

    def start(self) -> ServerThread:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> ServerThread:  # noqa: PYI034 - start() returns self
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def tablet_config(config: ServerConfig):
    """The engine configuration `serve` opens the database with: the defaults, with the
    server's commit delay settings where given (None: all defaults)."""
    from engine.config import TabletConfig

    over = {}
    if config.commit_delay_us is not None:
        over["wal_commit_delay_us"] = config.commit_delay_us
    if config.commit_siblings is not None:
        over["wal_commit_siblings"] = config.commit_siblings
    return TabletConfig(**over) if over else None


def serve(config: ServerConfig, data_dir: str, on_open=None) -> int:
    """Run the server until SIGINT/SIGTERM (`kudusql serve`). `on_open(db)`: called with
    the opened Database (the `kudusql` command starts the status page with it); what it
    returns is stopped (`.stop()`) at the end if not None."""
    from session import Database

    check_config(config)
    os.makedirs(data_dir, exist_ok=True)
    db = Database.open(data_dir, query_mem_limit=config.query_mem_limit,
                       config=tablet_config(config))
    extra = None
    try:
        extra = on_open(db) if on_open is not None else None
        users = UserStore(data_dir)
        pw = os.environ.get("KUDUSQL_PASSWORD")
        if pw:
            users.set_password(DEFAULT_USER, pw)
        if config.auth != "trust":
            u = users.get(DEFAULT_USER)
            if u is not None and not (u.scram or u.md5):
                log.warning("user %s has no password: with --auth %s nobody can log in as it "
                            "(set KUDUSQL_PASSWORD, or ALTER USER over a trust connection)",
                            DEFAULT_USER, config.auth)

        flight_server = _start_flight(db, config)
        tune_gc(config.gc_threshold)

        async def main() -> None:
            server = Server(db, config, users)
            await server.start()
            print(f"kudusql: serving {os.path.abspath(data_dir)} on {config.host}:"
                  f"{server.port} (auth {config.auth}); Ctrl-C stops", flush=True)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, stop.set)
                except (NotImplementedError, RuntimeError):  # pragma: no cover
                    pass
            await stop.wait()
            await server.close()

        try:
            _run_loop(main(), config.event_loop)
        finally:
            if flight_server is not None:
                flight_server.shutdown()
    finally:
        if extra is not None:
            extra.stop()
        db.close()
    return 0


def tune_gc(threshold: int) -> None:
    """The server process's garbage collector (`ServerConfig.gc_threshold`): what exists
    now frozen (never scanned again), the youngest generation collected every `threshold`
    allocations, the older ones every 10 collections of the one below (Python's ratio).
    Changes the whole process: for `serve`, not for a server thread inside a test."""
    if threshold > 0:
        gc.collect()
        gc.freeze()
        gc.set_threshold(threshold, 10, 10)


def _run_loop(coro, kind: str):
    """Run the server's main coroutine on uvloop (kind "uvloop", or "auto" when it is
    installed: libuv's socket writes and reads cost the loop less per message than
    asyncio's selector transport) or on asyncio's own loop ("asyncio"). The environment
    variable KUDUSQL_EVENT_LOOP overrides `kind` (A/B runs of bench/wire_bench.py)."""
    kind = os.environ.get("KUDUSQL_EVENT_LOOP", kind)
    if kind not in ("auto", "uvloop", "asyncio"):
        raise ConfigError(f"unknown event loop {kind!r} (auto, uvloop or asyncio)")
    if kind != "asyncio":
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                raise ConfigError("event loop uvloop: the uvloop package is not installed")
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(coro)
    return asyncio.run(coro)


# -- Arrow Flight (docs/spark.md) --------------------------------------------------------------
def _start_flight(db, config: ServerConfig):
    """The Flight endpoint next to the pg-wire server when `config.flight_port` is set."""
    if not config.flight_port:
        return None
    host = config.host.split(",")[0].strip()
    if not _is_loopback(host):
        raise ConfigError(f"--flight-port has no authentication: listen on a loopback "
                          f"address, not {host}")
    from wire.arrow_stream import start_endpoints

    fs = start_endpoints(db, host, config.flight_port, config.arrow_port)
    print(f"kudusql: Arrow Flight on {fs.location}, Arrow stream endpoint on "
          f"{fs.stream_address}", flush=True)
    return fs
