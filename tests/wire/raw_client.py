"""A raw v3 protocol client for differential tests of the wire server: send frontend
messages as bytes, read back every backend message up to ReadyForQuery as comparable
tuples (ErrorResponse as its SQLSTATE, message and detail)."""

from __future__ import annotations

import socket
import struct

INT2, INT4, INT8, TEXT = 21, 23, 20, 25


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _cstr(s: str) -> bytes:
    return s.encode() + b"\0"


def parse(name: str, sql: str, oids: tuple[int, ...]) -> bytes:
    return _msg(b"P", _cstr(name) + _cstr(sql) + struct.pack(f"!h{len(oids)}I", len(oids),
                                                             *oids))


def bind(stmt: str, values: list, binary: bool = False, result_formats: tuple = ()
         ) -> bytes:
    """Text-format values (str), or with `binary` every value in binary format (bytes, as
    given: a test may make some of the wrong size on purpose)."""
    body = _cstr("") + _cstr(stmt) + (struct.pack("!hh", 1, 1) if binary else
                                      struct.pack("!h", 0)) + struct.pack("!h", len(values))
    for v in values:
        b = v if isinstance(v, bytes) or v is None else v.encode()
        body += struct.pack("!i", -1) if b is None else struct.pack("!i", len(b)) + b
    return _msg(b"B", body + struct.pack(f"!h{len(result_formats)}h", len(result_formats),
                                         *result_formats))


def describe_statement(name: str) -> bytes:
    return _msg(b"D", b"S" + _cstr(name))


def describe_portal() -> bytes:
    return _msg(b"D", b"P" + _cstr(""))


def execute(max_rows: int = 0) -> bytes:
    return _msg(b"E", _cstr("") + struct.pack("!i", max_rows))


SYNC = _msg(b"S", b"")


class Raw:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        body = struct.pack("!i", 196608) + _cstr("user") + _cstr("kudusql") + \
            _cstr("database") + _cstr("kudusql") + b"\0"
        self.sock.sendall(struct.pack("!i", len(body) + 4) + body)
        self.buf = b""
        self.until_ready()

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def until_ready(self) -> list:
        """Backend messages up to ReadyForQuery, as comparable tuples."""
        out = []
        while True:
            kind, n = struct.unpack("!ci", self._read(5))
            body = self._read(n - 4)
            if kind == b"Z":
                out.append(("Z", body))
                return out
            if kind == b"E":
                fields = dict((f[:1].decode(), f[1:].decode()) for f in body.split(b"\0") if f)
                out.append(("E", fields.get("C"), fields.get("M"), fields.get("D")))
            elif kind == b"C":
                out.append(("C", body))
            elif kind in (b"1", b"2", b"n", b"T", b"D", b"t", b"I", b"N", b"s"):
                out.append((kind.decode(), body))
            # AuthenticationOk, ParameterStatus, BackendKeyData: startup noise

    def run(self, data: bytes) -> list:
        self.sock.sendall(data)
        return self.until_ready()

    def query(self, sql: str) -> list:
        return self.run(_msg(b"Q", _cstr(sql)))

    def close(self) -> None:
        self.sock.sendall(_msg(b"X", b""))
        self.sock.close()
