"""The PostgreSQL v3 wire protocol codec: bytes in, messages out, and back. No I/O.

Frontend (client -> server) traffic has two framings:

    startup phase   int32 length (incl. itself) | int32 code | body
                    code 196608 (3.0) StartupMessage, 80877103 SSLRequest,
                    80877104 GSSENCRequest, 80877102 CancelRequest
    after startup   byte type | int32 length (incl. itself, not the type byte) | body

`scan(buf, pos, startup)` is the frame scanner: it finds the frame at `buf[pos]` where it
lies - (type, body start, end) or None until it is complete - without copying or making
an object; `parse(kind, body)` turns a frame into its message, a frozen dataclass, and
`decode_bind(buf, start, end)` a Bind body into a plain tuple of its fields (the one Bind
decoder: the `Bind` message is made from it). The protocol core (wire/backend.py) reads
its receive buffer with these. `FrontendDecoder` is the same as a message stream: fed
whatever arrived (`feed(data)`), it hands back complete messages one at a time
(`next()`), switching from the startup framing to the typed framing by itself after a
StartupMessage; SSLRequest, GSSENCRequest and CancelRequest keep it in the startup
phase (a client may send a CancelRequest after an SSLRequest was answered `N`, as
asyncpg does).

`scan`, `decode_bind`, `scan_run` and `batch_replies` are compiled (native/_wire.pyx)
when the compiled core is built; `scan_py`, `decode_bind_py`, `scan_run_py` and
`batch_replies_py` here are their twins and specification, and take every
case the kernels hand back (errors included). docs/compiled-core.md.

Contract for bad input: the decoder never raises anything but `ProtocolViolation`. A
framing error (length below 4 or above the limit, an unknown message type, a startup packet
of an unknown code) or a message whose body does not parse exactly (a string without its
NUL, counts that run past the end, bytes left over) is `fatal`: the caller sends a FATAL
08P01 ErrorResponse and closes the connection, because the byte stream can no longer be
trusted. Invalid UTF-8 in a string field is the one non-fatal case (22021, like
PostgreSQL's "invalid byte sequence for encoding"): the frame itself was sound.

Backend (server -> client) messages are built by the small functions at the bottom
(`ready_for_query(b"I")`, `error_response(fields)`, ...), each returning the complete
message as bytes. Result rows (DataRow) are built a whole batch at a time by
`wire.pg_types.data_rows`, not here.
"""

from __future__ import annotations

import dataclasses
import struct

import native

PROTOCOL_3_0 = 196608
SSL_REQUEST_CODE = 80877103
GSSENC_REQUEST_CODE = 80877104
CANCEL_REQUEST_CODE = 80877102

# PostgreSQL's MAX_STARTUP_PACKET_LENGTH.
MAX_STARTUP_PACKET = 10000
# PostgreSQL's PQ_LARGE_MESSAGE_LIMIT is 1 GiB - 1.
DEFAULT_MAX_MESSAGE = (1 << 30) - 1

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_I32I32 = struct.Struct("!ii")
_TYPE_LEN = struct.Struct("!ci")


class ProtocolViolation(Exception):
    """Bad frontend input. `fatal`: send FATAL and close; else ERROR and carry on."""

    def __init__(self, message: str, sqlstate: str = "08P01", fatal: bool = True):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.fatal = fatal
        self.kind = b""     # type byte of the message it was found in


# -- frontend messages ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SSLRequest:
    pass


@dataclasses.dataclass(frozen=True)
class GSSENCRequest:
    pass


@dataclasses.dataclass(frozen=True)
class CancelRequest:
    pid: int
    secret: int


@dataclasses.dataclass(frozen=True)
class StartupMessage:
    major: int
    minor: int
    params: dict[str, str]


@dataclasses.dataclass(frozen=True)
class Query:
    sql: str


@dataclasses.dataclass(frozen=True)
class Parse:
    name: str
    sql: str
    param_oids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Bind:
    portal: str
    statement: str
    param_formats: tuple[int, ...]
    params: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Describe:
    kind: str  # "S" statement, "P" portal
    name: str


@dataclasses.dataclass(frozen=True)
class Execute:
    portal: str
    max_rows: int  # 0: all


@dataclasses.dataclass(frozen=True)
class Close:
    kind: str  # "S" or "P"
    name: str


@dataclasses.dataclass(frozen=True)
class Sync:
    pass


@dataclasses.dataclass(frozen=True)
class Flush:
    pass


@dataclasses.dataclass(frozen=True)
class Terminate:
    pass


@dataclasses.dataclass(frozen=True)
class CopyData:
    data: bytes


@dataclasses.dataclass(frozen=True)
class CopyDone:
    pass


@dataclasses.dataclass(frozen=True)
class CopyFail:
    message: str


@dataclasses.dataclass(frozen=True)
class PasswordMessage:
    """'p': a password, SASLInitialResponse or SASLResponse; the auth state decides."""

    data: bytes


@dataclasses.dataclass(frozen=True)
class FunctionCall:
    data: bytes


Message = (SSLRequest | GSSENCRequest | CancelRequest | StartupMessage | Query | Parse | Bind
           | Describe | Execute | Close | Sync | Flush | Terminate | CopyData | CopyDone
           | CopyFail | PasswordMessage | FunctionCall)


class _Reader:
    """Cursor over one message body; every short read is a fatal ProtocolViolation."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str):
        self.buf, self.pos, self.what = buf, 0, what

    def _bad(self, why: str) -> ProtocolViolation:
        return ProtocolViolation(f"invalid {self.what} message format: {why}")

    def int16(self) -> int:
        if self.pos + 2 > len(self.buf):
            raise self._bad("truncated int16")
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def int32(self) -> int:
        if self.pos + 4 > len(self.buf):
            raise self._bad("truncated int32")
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def byte(self) -> str:
        if self.pos >= len(self.buf):
            raise self._bad("truncated")
        v = chr(self.buf[self.pos])
        self.pos += 1
        return v

    def bytes_(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise self._bad("value length out of range")
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def cstr(self) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise self._bad("string not NUL-terminated")
        raw = self.buf[self.pos:end]
        self.pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolViolation('invalid byte sequence for encoding "UTF8"', "22021",
                                    fatal=False) from None

    def rest(self) -> bytes:
        v = self.buf[self.pos:]
        self.pos = len(self.buf)
        return v

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise self._bad("trailing bytes")


def _count(r: _Reader) -> int:
    n = r.int16()
    if n < 0:
        raise r._bad("negative count")
    return n


def _parse_startup(body: bytes) -> Message:
    r = _Reader(body, "startup packet")
    code = r.int32()
    if code == SSL_REQUEST_CODE:
        r.end()
        return SSLRequest()
    if code == GSSENC_REQUEST_CODE:
        r.end()
        return GSSENCRequest()
    if code == CANCEL_REQUEST_CODE:
        pid, secret = r.int32(), r.int32()
        r.end()
        return CancelRequest(pid, secret)
    major, minor = code >> 16, code & 0xFFFF
    if major != 3:
        raise ProtocolViolation(f"unsupported frontend protocol {major}.{minor}: server "
                                "supports 3.0", "0A000")
    params: dict[str, str] = {}
    while True:
        key = r.cstr()
        if key == "":
            break
        params[key] = r.cstr()
    r.end()
    return StartupMessage(major, minor, params)


def _parse_bind(r: _Reader) -> Bind:
    """Bind as a message object: `decode_bind`'s fields."""
    portal, stmt, pf, values, rf = decode_bind(r.buf, r.pos, len(r.buf))
    r.pos = len(r.buf)
    return Bind(portal, stmt, pf, values, rf)


def _bind_int16s(buf, pos: int, end: int) -> tuple[tuple[int, ...], int]:
    """A Bind's int16 count and that many int16s (its format codes) at `pos`: (the
    codes, the position after them)."""
    if pos + 2 > end:
        raise _bind_bad("truncated int16")
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise _bind_bad("negative count")
    if pos + 2 * n > end:
        raise _bind_bad("truncated int16")
    if n == 0:
        return (), pos
    if n == 1:
        return (_I16.unpack_from(buf, pos)[0],), pos + 2
    return struct.unpack_from(f"!{n}h", buf, pos), pos + 2 * n


def decode_bind_py(buf, start: int, end: int) -> tuple:
    """A Bind body `buf[start:end]` as (portal, statement, parameter formats, values,
    result formats): no message object. The one Bind decoder: the message path
    (`Bind`) and the connection's hot cases (wire/hot.py) both use it, so they decode
    alike. Bad input raises the fatal ProtocolViolation `_Reader` would ("invalid B
    message format: ..."); a name that is not UTF-8 the non-fatal 22021. Values are
    `bytes` (or None for NULL)."""
    portal, z1 = _bind_name(buf, start, end)
    stmt, z2 = _bind_name(buf, z1 + 1, end)
    pf, pos = _bind_int16s(buf, z2 + 1, end)
    if pos + 2 > end:
        raise _bind_bad("truncated int16")
    (nv,) = _I16.unpack_from(buf, pos)
    pos += 2
    if nv < 0:
        raise _bind_bad("negative count")
    values: list[bytes | None] = []
    unpack = _I32.unpack_from
    for _ in range(nv):         # per value: its length decides where the next one starts
        if pos + 4 > end:
            raise _bind_bad("truncated int32")
        (n,) = unpack(buf, pos)
        pos += 4
        if n == -1:
            values.append(None)
            continue
        if n < 0 or pos + n > end:
            raise _bind_bad("value length out of range")
        values.append(bytes(buf[pos:pos + n]))
        pos += n
    rf, pos = _bind_int16s(buf, pos, end)
    if pos != end:
        raise _bind_bad("trailing bytes")
    return portal, stmt, pf, tuple(values), rf


def _bind_name(buf, start: int, end: int) -> tuple[str, int]:
    z = buf.find(0, start, end)
    if z < 0:
        raise _bind_bad("string not NUL-terminated")
    if z == start:
        return "", z
    try:
        return buf[start:z].decode("utf-8"), z
    except UnicodeDecodeError:
        e = ProtocolViolation('invalid byte sequence for encoding "UTF8"', "22021",
                              fatal=False)
        e.kind = b"B"
        raise e from None


def _bind_bad(why: str) -> ProtocolViolation:
    e = ProtocolViolation(f"invalid B message format: {why}")
    e.kind = b"B"
    return e


def _parse_typed(kind: bytes, body: bytes) -> Message:
    r = _Reader(body, kind.decode("latin-1"))
    match kind:
        case b"Q":
            m: Message = Query(r.cstr())
        case b"P":
            name, sql = r.cstr(), r.cstr()
            m = Parse(name, sql, tuple(r.int32() & 0xFFFFFFFF for _ in range(_count(r))))
        case b"B":
            m = _parse_bind(r)
        case b"D" | b"C":
            k = r.byte()
            if k not in ("S", "P"):
                raise r._bad(f"invalid {'DESCRIBE' if kind == b'D' else 'CLOSE'} type "
                             f"{k!r}")
            name = r.cstr()
            m = Describe(k, name) if kind == b"D" else Close(k, name)
        case b"E":
            m = Execute(r.cstr(), r.int32())
        case b"S":
            m = Sync()
        case b"H":
            m = Flush()
        case b"X":
            m = Terminate()
        case b"d":
            m = CopyData(r.rest())
        case b"c":
            m = CopyDone()
        case b"f":
            m = CopyFail(r.cstr())
        case b"p":
            m = PasswordMessage(r.rest())
        case b"F":
            m = FunctionCall(r.rest())
        case _:
            raise ProtocolViolation(f"invalid frontend message type {kind[0]}")
    r.end()
    return m


STARTUP = -1      # `scan`'s kind for a startup-phase packet (no type byte)


def scan_py(buf, pos: int, startup: bool, max_message: int = DEFAULT_MAX_MESSAGE):
    """The frame starting at `buf[pos]`: (kind, body start, end) - kind the type byte as
    an int (STARTUP for a startup-phase packet), the body `buf[start:end]`, the next frame
    at `end` - or None until the rest of it arrives. Framing errors (a length below 4
    or above the limit, an unknown type, a startup packet too long) raise the fatal
    ProtocolViolation: the stream can no longer be trusted. The connection's frame
    scanner: no message object, so hot cases read frames where they lie."""
    have = len(buf) - pos
    if startup:
        if have < 4:
            return None
        (n,) = _I32.unpack_from(buf, pos)
        if n < 8 or n > MAX_STARTUP_PACKET:
            raise ProtocolViolation("invalid length of startup packet")
        if have < n:
            return None
        return STARTUP, pos + 4, pos + n
    if have < 5:
        return None
    kind = buf[pos]
    (n,) = _I32.unpack_from(buf, pos + 1)
    if n < 4 or n > max_message:
        raise ProtocolViolation(f"invalid message length {n}")
    if kind not in _KNOWN_KINDS:
        raise ProtocolViolation(f"invalid frontend message type {kind}")
    if have < n + 1:
        return None
    return kind, pos + 5, pos + 1 + n


def parse(kind: int, body: bytes) -> Message:
    """The message object of a frame `scan` found (body as bytes). A startup packet's
    message is `StartupMessage`, `SSLRequest`, `GSSENCRequest` or `CancelRequest`; bad
    bodies raise ProtocolViolation (module docstring), with `kind` set to the type byte."""
    if kind == STARTUP:
        return _parse_startup(body)
    k = _KIND_BYTES[kind]
    try:
        return _parse_typed(k, body)
    except ProtocolViolation as e:
        e.kind = k
        raise


def scan_run_py(buf, p: int, fields, bind_end: int, portal: str, statement: str,
                parse: bytes, describe: bytes, execute: bytes, base: int, items: list,
                limit: int, max_message: int = DEFAULT_MAX_MESSAGE) -> bool:
    """The batch decoder of pipelined runs (wire/fastpath.py `_run`): items

        [parse] Bind(portal, statement) [describe] execute int32

    read where they lie from `p` (the start of the next item; or, with `fields` given,
    the end of an item's Bind already decoded, at `bind_end`), each appended to `items`
    as (its end - `base`, its Bind's fields from `decode_bind`) until `items` holds
    `limit`. True when the run ended (a frame that is not its next item - another kind,
    another portal or statement, a frame that does not scan or decode: the ordinary
    path reports it - or the limit); False when everything received could still belong
    to the run (more input needed). `parse`, `describe`, `execute` are the exact frames
    expected (`parse` may be empty: never expected); `execute` without its int32."""
    while len(items) < limit:
        if fields is None:
            q = p
            if parse and buf.startswith(parse, q):
                q += len(parse)
            try:
                frame = scan(buf, q, False, max_message)
            except ProtocolViolation:
                return True
            if frame is None:
                return False
            kind, start, bind_end = frame
            if kind != 66:
                return True
            try:
                fields = decode_bind(buf, start, bind_end)
            except ProtocolViolation:
                return True
            if fields[0] != portal or fields[1] != statement:
                return True
        q = bind_end
        if buf.startswith(describe, q):
            q += len(describe)
        if len(buf) < q + len(execute) + 4:
            return False
        if not buf.startswith(execute, q):
            return True
        q += len(execute) + 4
        items.append((q - base, fields))
        p, fields = q, None
    return True


def batch_replies_py(buf, p: int, end: int, parse_complete: bytes, bind_complete: bytes,
                     no_data: bytes, done: bytes) -> bytes:
    """The replies of a pipelined batch's applied items (wire/fastpath.py `_batch`), one
    per frame of `buf[p:end]` - whole frames, as `scan_run` found them - in order:
    `parse_complete` for a Parse, `bind_complete` for a Bind, `no_data` for a Describe,
    `done` (the CommandComplete) for anything else (the Execute), as one bytes object.
    A frame that does not lie within the span raises ProtocolViolation."""
    out = []
    q = p
    while q < end:       # a loop per frame: the twin of the compiled kernel
        if end - q < 5:
            raise ProtocolViolation("a frame runs past the batch")
        n = _I32.unpack_from(buf, q + 1)[0]
        if n < 4 or end - q - 1 < n:
            raise ProtocolViolation("a frame runs past the batch")
        kind = buf[q]
        out.append(parse_complete if kind == 80 else bind_complete if kind == 66 else
                   no_data if kind == 68 else done)
        q += 1 + n
    return b"".join(out)


# the compiled twins (native/_wire.pyx) when built: same answers, errors handed back to
# the functions above (docs/compiled-core.md)
_native = native.load("_wire")
if _native is not None:
    _native.fallback(scan_py, decode_bind_py)
    _native.fallback_run(scan_run_py)
    _native.fallback_replies(batch_replies_py)
    scan = _native.scan
    decode_bind = _native.decode_bind
    scan_run = _native.scan_run
    batch_replies = _native.batch_replies
else:
    scan = scan_py
    decode_bind = decode_bind_py
    scan_run = scan_run_py
    batch_replies = batch_replies_py


class FrontendDecoder:
    """Incremental frontend message decoder (see the module docstring): `scan` and
    `parse` over a buffer of what was fed."""

    def __init__(self, max_message: int = DEFAULT_MAX_MESSAGE):
        self._buf = bytearray()
        self._startup = True
        self.max_message = max_message

    @property
    def in_startup(self) -> bool:
        return self._startup

    def feed(self, data: bytes) -> None:
        self._buf += data

    def buffered(self) -> int:
        return len(self._buf)

    def next(self) -> Message | None:
        """The next complete message, or None until more bytes arrive."""
        buf = self._buf
        frame = scan(buf, 0, self._startup, self.max_message)
        if frame is None:
            return None
        kind, start, end = frame
        body = bytes(buf[start:end])
        del buf[:end]
        msg = parse(kind, body)
        if type(msg) is StartupMessage:
            self._startup = False
        return msg


_KNOWN_KINDS = frozenset(b"QPBDCESHXdcfpF")
_KIND_BYTES = {k: bytes([k]) for k in range(256)}


# -- backend messages -----------------------------------------------------------------------
def _msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + _I32.pack(len(body) + 4) + body


def _cstr(s: str) -> bytes:
    return s.encode("utf-8").replace(b"\0", b"") + b"\0"


def auth_ok() -> bytes:
    return _msg(b"R", _I32.pack(0))


def auth_cleartext() -> bytes:
    return _msg(b"R", _I32.pack(3))


def auth_md5(salt: bytes) -> bytes:
    return _msg(b"R", _I32.pack(5) + salt)


def auth_sasl(mechanisms: list[str]) -> bytes:
    return _msg(b"R", _I32.pack(10) + b"".join(_cstr(m) for m in mechanisms) + b"\0")


def auth_sasl_continue(data: bytes) -> bytes:
    return _msg(b"R", _I32.pack(11) + data)


def auth_sasl_final(data: bytes) -> bytes:
    return _msg(b"R", _I32.pack(12) + data)


def parameter_status(name: str, value: str) -> bytes:
    return _msg(b"S", _cstr(name) + _cstr(value))


def backend_key_data(pid: int, secret: int) -> bytes:
    return _msg(b"K", _I32I32.pack(pid, secret))


def negotiate_protocol_version(minor: int, unrecognized: list[str]) -> bytes:
    return _msg(b"v", _I32I32.pack(minor, len(unrecognized))
                + b"".join(_cstr(o) for o in unrecognized))


def ready_for_query(status: bytes) -> bytes:
    return _msg(b"Z", status)


def command_complete(tag: str) -> bytes:
    return _msg(b"C", _cstr(tag))


def empty_query_response() -> bytes:
    return b"I\0\0\0\4"


def parse_complete() -> bytes:
    return b"1\0\0\0\4"


def bind_complete() -> bytes:
    return b"2\0\0\0\4"


def close_complete() -> bytes:
    return b"3\0\0\0\4"


def no_data() -> bytes:
    return b"n\0\0\0\4"


def portal_suspended() -> bytes:
    return b"s\0\0\0\4"


def copy_done() -> bytes:
    return b"c\0\0\0\4"


def copy_data(data: bytes) -> bytes:
    return _msg(b"d", data)


def parameter_description(oids: list[int]) -> bytes:
    return _msg(b"t", _I16.pack(len(oids)) + b"".join(struct.pack("!I", o) for o in oids))


@dataclasses.dataclass(frozen=True)
class FieldDescription:
    name: str
    type_oid: int
    type_len: int
    type_mod: int = -1
    format: int = 0
    table_oid: int = 0
    column: int = 0


_FIELD = struct.Struct("!IhIhih")


def row_description(fields: list[FieldDescription]) -> bytes:
    parts = [_I16.pack(len(fields))]
    for f in fields:
        parts.append(_cstr(f.name))
        parts.append(_FIELD.pack(f.table_oid, f.column, f.type_oid, f.type_len, f.type_mod,
                                 f.format))
    return _msg(b"T", b"".join(parts))


def _copy_response(kind: bytes, binary: bool, ncols: int) -> bytes:
    fmt = 1 if binary else 0
    return _msg(kind, bytes([fmt]) + _I16.pack(ncols) + _I16.pack(fmt) * ncols)


def copy_in_response(binary: bool, ncols: int) -> bytes:
    return _copy_response(b"G", binary, ncols)


def copy_out_response(binary: bool, ncols: int) -> bytes:
    return _copy_response(b"H", binary, ncols)


def _fields(fields: dict[str, str]) -> bytes:
    return b"".join(k.encode("ascii") + _cstr(v) for k, v in fields.items()
                    if v is not None) + b"\0"


def error_response(fields: dict[str, str]) -> bytes:
    """Fields by code: S (severity), V, C (SQLSTATE), M, D, H, P (1-based position), W..."""
    return _msg(b"E", _fields(fields))


def notice_response(fields: dict[str, str]) -> bytes:
    return _msg(b"N", _fields(fields))


def error_fields(severity: str, sqlstate: str, message: str, *, detail: str | None = None,
                 hint: str | None = None, position: int | None = None,
                 where: str | None = None, routine: str | None = None) -> dict[str, str]:
    f = {"S": severity, "V": severity, "C": sqlstate, "M": message}
    if detail:
        f["D"] = detail
    if hint:
        f["H"] = hint
    if position is not None:
        f["P"] = str(position)
    if where:
        f["W"] = where
    if routine:
        f["R"] = routine
    return f
