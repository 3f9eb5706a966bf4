"""RpcServer / RpcClient: every process of a cluster talks Arrow Flight.

Calls
    DoAction(name, payload)     control, heartbeats, Raft messages, lookups; the payload and
                                the answer are codec.py blobs
    DoPut(descriptor, batches)  writes: the descriptor's command is a codec payload (which
                                tablet, op types are the `__op` column, request id); the
                                answer comes back as one metadata message. The command
                                also carries the rows sent (PUT_ROWS), and the server
                                refuses an upload that delivered fewer (retryable, the
                                handler never runs): a call the client abandons (its
                                deadline passed, it was cancelled) ends the server's read
                                of the stream as if it were complete, so without the count
                                a write whose rows never arrived was replicated empty and
                                its request id answered "done" to the client's retry - an
                                acknowledged row lost (session 38, Jepsen set, seed 106)
    DoGet(ticket)               scans: the ticket is a codec payload, the answer a stream
                                of record batches, each with optional app metadata
                                (`_Stream.chunks`; an ordered scan's last key per batch)

Authentication: every call carries the cluster secret in the `x-kudusql-secret` header; the
server's middleware refuses a call without it (or with another one) before any handler runs
(compared in constant time). The secret lives in a file of mode 0600 (`create_secret_file`,
`read_secret_file` refuses a file others can read). Servers bind to loopback by default.

TLS (optional, `TlsConfig`): a server given a certificate and key binds `grpc+tls://`; a
client given a CA connects with `grpc+tls://` and trusts only certificates that CA signed,
whose subjectAltName must name the address dialled (a cluster started with `kudusql cluster
start --rpc-tls` has one self-signed certificate for 127.0.0.1 and localhost, and it is its
own CA: `create_self_signed_cert`, with the `openssl` command). The secret is still required
on top: TLS keeps it and the data private, the secret says who may call. There is no client
certificate (no mutual TLS). `load_tls` refuses a private key file that its group or others
can read, a key that does not match its certificate, and files that are not PEM.
A TLS/plaintext mismatch or a certificate the client does not trust is a configuration
error, not an outage: it raises `TlsMismatch` (SQLSTATE 08001) at once, which the cluster
client does not retry (a plaintext client facing a TLS server only sees the socket close:
one TLS handshake probe, `_speaks_tls`, tells that apart from a server going away).

Errors: a handler's EngineError crosses the wire as JSON (class, SQLSTATE, message, leader
hint) inside the Flight error and is raised again on the client as the same class with the
same SQLSTATE (`RemoteError` subclasses keep `leader_uuid`). A server that cannot be reached
or does not answer within the call's deadline raises `Unreachable` (SQLSTATE 08006).

Failpoint (for the nemesis of fault tests): `drop_traffic_to(addrs)` makes this process's
client refuse to send to those addresses, as if the network dropped the packets; servers
expose it as the `failpoint` action so a test can cut chosen links between live servers
(`{drop_to: [...]}`), skew the process's wall clock (`{clock_offset_s: x}`,
engine/clock.py), or make its DoGet streams slow (`{stream_delay_s: x}`: x seconds before
each batch, so a test's kill -9 lands while a scan is still being produced, not after the
whole result already sits in socket and gRPC buffers), or fail its disk
(`{inject_eio: {glob, after}}`: every fsync of a write-ahead log whose directory matches
`glob` fails with EIO after `after` more succeeded; `{inject_eio: null}` stops it;
engine/fs.py), or make its monotonic clock run fast or slow (`{monotonic_rate: r}`: r
seconds of the clock leader leases and Raft ticks use per real second, engine/clock.py).
The last two are refused unless the process runs with KUDUSQL_FAULT_INJECTION=1.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
import os
import secrets
import shutil
import socket
import ssl
import stat
import subprocess
import tempfile
import threading
import time
from typing import Callable

import pyarrow as pa
import pyarrow.flight as fl

from engine import clock, errors, fs
from engine.rpc import codec

log = logging.getLogger(__name__)

SECRET_HEADER = "x-kudusql-secret"
_ERR = "KUDUSQL-ERROR:"
DEFAULT_TIMEOUT_S = 10.0


class Unreachable(errors.ServiceUnavailable):
    """A server could not be reached or did not answer in time."""

    sqlstate = "08006"


class RemoteError(errors.ServiceUnavailable):
    """A retryable refusal from a server (not the leader, tablet not running here)."""

    sqlstate = "57P03"

    def __init__(self, msg: str, leader_uuid: str | None = None):
        super().__init__(msg)
        self.leader_uuid = leader_uuid


# -- the cluster secret -----------------------------------------------------------------------
def create_secret_file(path: str) -> str:
    """A new random secret in `path` (mode 0600, created exclusively); returns it."""
    secret = secrets.token_hex(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return secret


def read_secret_file(path: str) -> str:
    st = os.stat(path)
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise errors.InvalidArgument(
            f"the RPC secret file {path} is readable by others (mode "
            f"{stat.S_IMODE(st.st_mode):o}); chmod 600 it")
    with open(path) as f:
        secret = f.read().strip()
    if not secret:
        raise errors.InvalidArgument(f"the RPC secret file {path} is empty")
    return secret


# -- TLS ---------------------------------------------------------------------------------------
class TlsMismatch(errors.EngineError):
    """TLS on one side only, or a server certificate the client does not trust: retrying
    cannot help, so the cluster client fails at once (it retries only Unreachable and
    RemoteError)."""

    sqlstate = "08001"


@dataclasses.dataclass(frozen=True)
class TlsConfig:
    """PEM bytes. `cert`/`key`: what a server presents (None on a client-only config, e.g.
    the SQL front end or a Spark executor); `ca`: the roots a client trusts (the
    certificate itself for a self-signed cluster certificate)."""

    ca: bytes
    cert: bytes | None = None
    key: bytes | None = dataclasses.field(default=None, repr=False)

    @property
    def can_serve(self) -> bool:
        return self.cert is not None and self.key is not None


def _read_pem(path: str, what: str, marker: bytes) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise errors.InvalidArgument(f"cannot read the RPC {what} file {path}: "
                                     f"{e.strerror or e}") from None
    if b"-----BEGIN" not in data or marker not in data:
        raise errors.InvalidArgument(f"the RPC {what} file {path} is not a PEM {what}")
    return data


def load_tls(cert_file: str | None = None, key_file: str | None = None,
             ca_file: str | None = None, server: bool = False) -> TlsConfig | None:
    """The TLS configuration the flags name, or None for plaintext (no file given).
    A server needs `cert_file` and `key_file`; a client needs `ca_file` or `cert_file`
    (the CA defaults to the certificate: a self-signed cluster certificate)."""
    if not (cert_file or key_file or ca_file):
        return None
    if bool(cert_file) != bool(key_file) and (server or key_file):
        raise errors.InvalidArgument("TLS on RPC needs both --rpc-cert and --rpc-key")
    if server and not cert_file:
        raise errors.InvalidArgument("a server needs --rpc-cert and --rpc-key for TLS on "
                                     "RPC (--rpc-ca alone only sets what it trusts)")
    cert = key = None
    if cert_file:
        cert = _read_pem(cert_file, "certificate", b"CERTIFICATE")
    if key_file:
        try:
            st = os.stat(key_file)
        except OSError as e:
            raise errors.InvalidArgument(f"cannot read the RPC private key file {key_file}: "
                                         f"{e.strerror or e}") from None
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise errors.InvalidArgument(
                f"the RPC private key file {key_file} is readable by others (mode "
                f"{stat.S_IMODE(st.st_mode):o}); chmod 600 it")
        key = _read_pem(key_file, "private key", b"PRIVATE KEY")
        try:  # a key of another certificate would only fail when the server starts
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_file, key_file)
        except ssl.SSLError as e:
            raise errors.InvalidArgument(
                f"the RPC private key {key_file} does not match the certificate "
                f"{cert_file} ({e.reason or e})") from None
    ca = _read_pem(ca_file, "CA certificate", b"CERTIFICATE") if ca_file else cert
    try:
        ssl.create_default_context(cadata=ca.decode("ascii", "replace"))
    except ssl.SSLError as e:
        raise errors.InvalidArgument(f"the RPC CA certificate {ca_file or cert_file} "
                                     f"cannot be loaded ({e.reason or e})") from None
    return TlsConfig(ca, cert, key)


def create_self_signed_cert(cert_path: str, key_path: str,
                            hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
                            days: int = 3650) -> None:
    """A self-signed certificate (its own CA) for `hosts` in `cert_path` (mode 0644) and
    its P-256 key in `key_path` (mode 0600), made by the `openssl` command in a private
    temporary directory and then moved in place (the key is never readable by others)."""
    exe = shutil.which("openssl")
    if exe is None:
        raise errors.InvalidArgument("making a TLS certificate needs the openssl command "
                                     "(or give --rpc-cert/--rpc-key files)")
    san = ",".join(("IP:" if h.replace(".", "").isdigit() or ":" in h else "DNS:") + h
                   for h in hosts)
    tmp = tempfile.mkdtemp(prefix=".tls-", dir=os.path.dirname(os.path.abspath(cert_path)))
    try:
        c, k = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        r = subprocess.run(
            [exe, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-days", str(days), "-subj", "/CN=kudusql cluster",
             "-addext", f"subjectAltName={san}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-keyout", k, "-out", c], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise errors.InvalidArgument(f"openssl could not make a certificate: "
                                         f"{r.stderr.strip()[-500:]}")
        os.chmod(k, 0o600)
        os.chmod(c, 0o644)
        os.replace(k, key_path)
        os.replace(c, cert_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _speaks_tls(addr: str, timeout_s: float = 1.0) -> bool:
    """Whether the server at `addr` completes a TLS handshake (certificate not checked:
    this only tells a TLS server from one that went away)."""
    host, _, port = addr.rpartition(":")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as s:
            with ctx.wrap_socket(s):
                return True
    except (OSError, ValueError):
        return False


def _tls_failure(text: str, addr: str, tls: bool) -> TlsMismatch | None:
    """The configuration error a Flight 'unavailable' error stands for, or None."""
    at = text.find("routines::")
    reason = (text[at + 10:] if at >= 0 else text.rsplit(": ", 1)[-1]).split(". Detail")[0]
    if tls:
        if "wrong version number" in text:
            return TlsMismatch(
                f"server {addr} does not use TLS on RPC but this process does: start "
                f"every server of the cluster with --rpc-cert/--rpc-key, or none")
        if "certificate verify failed" in text:
            return TlsMismatch(
                f"the TLS certificate of server {addr} is not trusted ({reason}): give "
                f"--rpc-ca (Spark: rpc_ca_file) the CA certificate that signed the "
                f"cluster's certificate")
        if "is not in peer certificate" in text:
            return TlsMismatch(
                f"the TLS certificate of server {addr} does not name that address in its "
                f"subjectAltName: make the certificate for the host names clients dial")
        if "SSL_ERROR_SSL" in text and "unexpected eof" not in text:  # eof: it went away
            return TlsMismatch(f"the TLS handshake with server {addr} failed: {reason}")
        return None
    if ("Socket closed" in text or "reset by peer" in text) and _speaks_tls(addr):
        return TlsMismatch(
            f"server {addr} requires TLS on RPC but this process connects without it: give "
            f"it the cluster's CA certificate (--rpc-ca; a server: --rpc-cert/--rpc-key; "
            f"Spark: rpc_ca_file)")
    return None


# -- failpoint ----------------------------------------------------------------------------------
_dropped: set[str] = set()
_stream_delay = [0.0]       # seconds before each DoGet batch (`stream_delay_s`); 0: none


def drop_traffic_to(addrs) -> None:
    """Replace the set of addresses this process refuses to send to (empty: heal)."""
    global _dropped
    _dropped = set(addrs)


def dropped_addresses() -> set[str]:
    return set(_dropped)


# -- errors across the wire -----------------------------------------------------------------
def _error_json(e: BaseException) -> str:
    d = {"class": type(e).__name__, "message": str(e),
         "sqlstate": getattr(e, "sqlstate", "XX000"),
         "leader": getattr(e, "leader_uuid", None),
         "detail": getattr(e, "detail", None), "hint": getattr(e, "hint", None)}
    return _ERR + json.dumps(d)


_CLASSES = {c.__name__: c for c in (errors.InvalidArgument, errors.ColumnNotFound,
                                    errors.NotFound, errors.AlreadyPresent, errors.Corruption,
                                    errors.SnapshotTooOld, errors.ServiceUnavailable)}


def _raise_remote(e: fl.FlightError, addr: str, tls: bool = False):
    text = str(e)
    i = text.find(_ERR)
    if i < 0:
        if isinstance(e, fl.FlightUnavailableError):
            bad = _tls_failure(text, addr, tls)
            if bad is not None:
                raise bad from None
        if isinstance(e, (fl.FlightUnavailableError, fl.FlightTimedOutError,
                          fl.FlightCancelledError)):
            raise Unreachable(f"server {addr} is unreachable: "
                              f"{text.split('. Detail')[0][:200]}") from None
        if isinstance(e, fl.FlightUnauthenticatedError):
            raise errors.InvalidArgument(
                f"server {addr} refused the call: wrong or missing cluster secret") from None
        raise Unreachable(f"RPC to {addr} failed: {text[:300]}") from None
    d, _ = json.JSONDecoder().raw_decode(text[i + len(_ERR):])
    cls_name = d["class"]
    if cls_name in ("NotLeader", "RemoteError", "TabletNotRunning", "ConfigChangeRefused"):
        err = RemoteError(d["message"], d.get("leader"))
    elif cls_name == "Unreachable":
        err = Unreachable(d["message"])
    else:
        err = _CLASSES.get(cls_name, errors.EngineError)(d["message"])
        err.sqlstate = d["sqlstate"]
        if d.get("detail") or d.get("hint"):    # PostgreSQL's DETAIL / HINT (2BP01's)
            err.detail, err.hint = d.get("detail"), d.get("hint")
    err.remote_class = cls_name
    raise err from None


# DoPut: the command key carrying how many rows the client sent (the server checks them all
# arrived: module docstring, Calls)
PUT_ROWS = "_put_rows"


def put_descriptor(command, table: pa.Table) -> fl.FlightDescriptor:
    """A DoPut's descriptor: `command` (codec), with the row count when it is a dict."""
    if isinstance(command, dict):
        command = {**command, PUT_ROWS: table.num_rows}
    return fl.FlightDescriptor.for_command(codec.encode(command))


# -- server -----------------------------------------------------------------------------------
class _AuthFactory(fl.ServerMiddlewareFactory):
    def __init__(self, secret: str):
        self._secret = secret.encode()

    def start_call(self, info, headers):
        got = headers.get(SECRET_HEADER) or headers.get(SECRET_HEADER.encode())
        value = got[0] if got else b""
        if isinstance(value, str):
            value = value.encode()
        if not hmac.compare_digest(value, self._secret):
            raise fl.FlightUnauthenticatedError("missing or wrong cluster secret")
        return None


class RpcServer(fl.FlightServerBase):
    """Dispatches DoAction to `handlers[name](payload) -> payload`, DoPut to
    `put_handler(command, table) -> payload`, DoGet to `get_handler(ticket) ->
    (schema, iterator of batches)`. Handler errors go back as described above."""

    def __init__(self, host: str, port: int, secret: str,
                 handlers: dict[str, Callable], put_handler: Callable | None = None,
                 get_handler: Callable | None = None, tls: TlsConfig | None = None):
        if tls is not None and not tls.can_serve:
            raise errors.InvalidArgument("a server needs --rpc-cert and --rpc-key for TLS")
        if tls is None:
            super().__init__(f"grpc://{host}:{port}",
                             middleware={"auth": _AuthFactory(secret)})
        else:
            super().__init__(f"grpc+tls://{host}:{port}",
                             middleware={"auth": _AuthFactory(secret)},
                             tls_certificates=[fl.CertKeyPair(tls.cert, tls.key)])
        self.tls = tls is not None
        self.host = host
        self.addr = f"{host}:{self.port}"
        self.handlers = dict(handlers)
        self.handlers.setdefault("failpoint", self._failpoint)
        self.handlers.setdefault("ping", lambda p: {"ok": True})
        self.put_handler = put_handler
        self.get_handler = get_handler
        self._thread = threading.Thread(target=self.serve, name=f"rpc-{self.port}",
                                        daemon=True)
        self._thread.start()

    @staticmethod
    def _failpoint(p: dict) -> dict:
        """{drop_to: [addr...]} replaces the dropped links; {clock_offset_s: x} shifts this
        process's wall clock (engine/clock.py); {stream_delay_s: x} slows DoGet streams;
        {inject_eio: {glob, after} | null} fails WAL fsyncs; {monotonic_rate: r} runs the
        monotonic clock of leases and ticks at r (module docstring, Failpoint). Any key may
        be left out."""
        if "drop_to" in p:
            drop_traffic_to(p["drop_to"])
        if "clock_offset_s" in p:
            clock.set_wall_offset(float(p["clock_offset_s"]))
        if "stream_delay_s" in p:
            _stream_delay[0] = max(0.0, float(p["stream_delay_s"]))
        if "inject_eio" in p:
            if not fs.fault_injection_enabled():
                raise errors.InvalidArgument(
                    f"inject_eio is refused: this process was not started with "
                    f"{fs.FAULT_INJECTION_ENV}=1 (fault injection is for tests)")
            e = p["inject_eio"]
            fs.inject_eio(None if e is None else str(e.get("glob", "*")),
                          int(e.get("after", 0)) if e is not None else 0)
        if "monotonic_rate" in p:
            if not fs.fault_injection_enabled():
                raise errors.InvalidArgument(
                    f"monotonic_rate is refused: this process was not started with "
                    f"{fs.FAULT_INJECTION_ENV}=1 (fault injection is for tests)")
            clock.set_monotonic_rate(float(p["monotonic_rate"]))
        return {"dropped": sorted(_dropped), "clock_offset_s": clock.wall_offset(),
                "monotonic_rate": clock.monotonic_rate(),
                "stream_delay_s": _stream_delay[0], "inject_eio": fs.injected_eio()}

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except fl.FlightError:
            raise
        except errors.EngineError as e:
            raise fl.FlightServerError(_error_json(e)) from None
        except Exception as e:  # noqa: BLE001 - reported to the caller, logged here
            log.exception("RPC handler failed")
            raise fl.FlightServerError(_error_json(errors.EngineError(
                f"internal error on {self.addr}: {type(e).__name__}: {e}"))) from None

    def do_action(self, context, action):
        fn = self.handlers.get(action.type)
        if fn is None:
            raise fl.FlightServerError(_error_json(errors.InvalidArgument(
                f"unknown RPC {action.type!r}")))
        payload = codec.decode(action.body.to_pybytes()) if action.body.size else None
        out = self._guard(fn, payload)
        return [fl.Result(pa.py_buffer(codec.encode(out)))]

    def do_put(self, context, descriptor, reader, writer):
        if self.put_handler is None:
            raise fl.FlightServerError(_error_json(errors.InvalidArgument("no DoPut here")))
        cmd = codec.decode(descriptor.command)
        table = reader.read_all()
        sent = cmd.pop(PUT_ROWS, None) if isinstance(cmd, dict) else None
        if sent is not None and table.num_rows != sent:
            # the client gave up mid-call (a stream cut short reads as a complete one):
            # nothing is applied, and its request id stays unused for the retry
            log.warning("DoPut from a client that gave up: %d of %d rows arrived; refused",
                        table.num_rows, sent)
            raise fl.FlightServerError(_error_json(RemoteError(
                f"{table.num_rows} of the {sent} rows sent arrived (the call was cut "
                f"short); nothing was applied, retry")))
        out = self._guard(self.put_handler, cmd, table)
        writer.write(pa.py_buffer(codec.encode(out)))

    def do_get(self, context, ticket):
        if self.get_handler is None:
            raise fl.FlightServerError(_error_json(errors.InvalidArgument("no DoGet here")))
        schema, batches = self._guard(self.get_handler, codec.decode(ticket.ticket))
        return fl.GeneratorStream(schema, self._guarded_iter(batches))

    def _guarded_iter(self, batches):
        it = iter(batches)
        while True:
            if _stream_delay[0]:
                time.sleep(_stream_delay[0])        # the failpoint: a slow stream
            try:
                b = next(it)
            except StopIteration:
                return
            except errors.EngineError as e:
                raise fl.FlightServerError(_error_json(e)) from None
            yield b

    def stop(self) -> None:
        self.shutdown()
        self._thread.join(timeout=10)


# -- client -----------------------------------------------------------------------------------
class RpcClient:
    """Calls to any server of the cluster; one Flight connection per address (TLS when
    `tls` is given: every server then must speak it, with a certificate `tls.ca` signed)."""

    def __init__(self, secret: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 tls: TlsConfig | None = None):
        self._headers = [(SECRET_HEADER.encode(), secret.encode())]
        self.timeout_s = timeout_s
        self._tls_ca = tls.ca if tls is not None else None
        self.tls = tls is not None
        self._clients: dict[str, fl.FlightClient] = {}
        self._lock = threading.Lock()

    def _client(self, addr: str) -> fl.FlightClient:
        if addr in _dropped:
            raise Unreachable(f"server {addr} is unreachable (traffic dropped by failpoint)")
        c = self._clients.get(addr)
        if c is None:
            with self._lock:
                c = self._clients.get(addr)
                if c is None:
                    c = self._clients[addr] = (
                        fl.FlightClient(f"grpc://{addr}") if self._tls_ca is None else
                        fl.FlightClient(f"grpc+tls://{addr}", tls_root_certs=self._tls_ca))
        return c

    def _opts(self, timeout_s: float | None) -> fl.FlightCallOptions:
        return fl.FlightCallOptions(timeout=timeout_s or self.timeout_s, headers=self._headers)

    def _forget(self, addr: str, e: BaseException) -> None:
        """After a failure to reach `addr`, drop its channel: a new one connects at once
        when the server is back, where gRPC's own reconnect backoff of a failed channel
        grows to minutes. The old client is not closed here: other threads may be in a
        call on it (closing a FlightClient under a call crashes the process, see
        tests/cluster/test_rpc.py); it closes when the last of them lets go of it."""
        if isinstance(e, (fl.FlightUnavailableError, OSError)):
            with self._lock:
                if self._clients.get(addr) is not None:
                    del self._clients[addr]

    def call(self, addr: str, action: str, payload=None, timeout_s: float | None = None):
        c = self._client(addr)
        try:
            res = list(c.do_action(fl.Action(action, codec.encode(payload)),
                                   options=self._opts(timeout_s)))
        except fl.FlightError as e:
            self._forget(addr, e)
            _raise_remote(e, addr, self.tls)
        except OSError as e:
            raise Unreachable(f"server {addr} is unreachable: {e}") from None
        return codec.decode(res[0].body.to_pybytes()) if res else None

    def put(self, addr: str, command, table: pa.Table, timeout_s: float | None = None):
        c = self._client(addr)
        try:
            writer, reader = c.do_put(put_descriptor(command, table), table.schema,
                                      options=self._opts(timeout_s))
            try:
                writer.write_table(table)
                writer.done_writing()
                buf = reader.read()
            finally:
                writer.close()
        except fl.FlightError as e:
            self._forget(addr, e)
            _raise_remote(e, addr, self.tls)
        except (OSError, pa.ArrowException) as e:
            raise Unreachable(f"server {addr} is unreachable: {e}") from None
        return codec.decode(buf.to_pybytes())

    def get(self, addr: str, ticket, timeout_s: float | None = None):
        """A reader of record batches (`read_chunk()` / iteration); errors surface while
        reading as the same exceptions as `call`."""
        c = self._client(addr)
        try:
            return _Stream(c.do_get(fl.Ticket(codec.encode(ticket)),
                                    options=self._opts(timeout_s)), addr, c, self.tls)
        except fl.FlightError as e:
            self._forget(addr, e)
            _raise_remote(e, addr, self.tls)

    def close(self) -> None:
        """Forget every connection; each closes once no thread is in a call on it (as in
        `_forget`: a sender thread may still be finishing a call while its server stops)."""
        with self._lock:
            self._clients.clear()


class _Stream:
    def __init__(self, reader, addr: str, client: fl.FlightClient, tls: bool = False):
        self._reader = reader
        self._addr = addr
        self._tls = tls
        self._client = client  # the stream must not outlive its client (RpcClient._forget)

    @property
    def schema(self) -> pa.Schema:
        try:
            return self._reader.schema
        except fl.FlightError as e:
            _raise_remote(e, self._addr, self._tls)

    def __iter__(self):
        for data, _ in self.chunks():
            yield data

    def chunks(self):
        """(record batch, app metadata bytes or None) pairs: a server's handler may yield
        (batch, metadata buffer) tuples (ordered scans send each batch's last key)."""
        while True:
            try:
                chunk = self._reader.read_chunk()
            except StopIteration:
                return
            except fl.FlightError as e:
                _raise_remote(e, self._addr, self._tls)
            except OSError as e:
                raise Unreachable(f"server {self._addr} is unreachable: {e}") from None
            meta = chunk.app_metadata
            yield chunk.data, None if meta is None else meta.to_pybytes()

    def cancel(self) -> None:
        """Stop the stream (an abandoned scan): the server stops producing batches."""
        try:
            self._reader.cancel()
        except Exception:  # noqa: BLE001 - already finished or broken: nothing to stop
            pass
