"""wire.protocol: the codec without sockets - framing, incremental decoding, malformed
input as ProtocolViolation, and the bytes of backend messages."""

from __future__ import annotations

import struct

import pytest

from wire import protocol as P


def startup(params: dict[str, str], code: int = P.PROTOCOL_3_0) -> bytes:
    body = struct.pack("!i", code) + b"".join(k.encode() + b"\0" + v.encode() + b"\0"
                                               for k, v in params.items()) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def typed(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def decode_all(data: bytes, chunk: int | None = None) -> list:
    d = P.FrontendDecoder()
    out = []
    step = chunk or len(data) or 1
    for i in range(0, len(data), step):
        d.feed(data[i:i + step])
        while (m := d.next()) is not None:
            out.append(m)
    return out


def test_startup_sequence_any_chunking():
    ssl = struct.pack("!ii", 8, P.SSL_REQUEST_CODE)
    data = ssl + startup({"user": "u", "database": "d", "client_encoding": "'utf-8'"}) + \
        typed(b"Q", b"select 1\0") + typed(b"S", b"") + typed(b"X", b"")
    for chunk in (None, 1, 3, 7):
        msgs = decode_all(data, chunk)
        assert msgs == [P.SSLRequest(),
                        P.StartupMessage(3, 0, {"user": "u", "database": "d",
                                                "client_encoding": "'utf-8'"}),
                        P.Query("select 1"), P.Sync(), P.Terminate()]


def test_cancel_request_after_ssl_request():
    data = struct.pack("!ii", 8, P.SSL_REQUEST_CODE) + struct.pack("!iiii", 16,
                                                                   P.CANCEL_REQUEST_CODE, 42, -7)
    assert decode_all(data) == [P.SSLRequest(), P.CancelRequest(42, -7)]


def test_extended_messages():
    parse = typed(b"P", b"s1\0select $1\0" + struct.pack("!hI", 1, 23))
    bind = typed(b"B", b"p1\0s1\0" + struct.pack("!hh", 1, 1) + struct.pack("!h", 2) +
                 struct.pack("!i", 4) + b"\0\0\0\7" + struct.pack("!i", -1) +
                 struct.pack("!hh", 1, 1))
    rest = typed(b"D", b"P" + b"p1\0") + typed(b"E", b"p1\0" + struct.pack("!i", 5)) + \
        typed(b"C", b"S" + b"s1\0") + typed(b"H", b"")
    msgs = decode_all(startup({"user": "u"}) + parse + bind + rest)[1:]
    assert msgs == [P.Parse("s1", "select $1", (23,)),
                    P.Bind("p1", "s1", (1,), (b"\0\0\0\7", None), (1,)),
                    P.Describe("P", "p1"), P.Execute("p1", 5), P.Close("S", "s1"), P.Flush()]


@pytest.mark.parametrize("data", [
    struct.pack("!i", 3),                                   # startup length < 8
    struct.pack("!i", 100000) + b"x" * 8,                   # startup packet too long
    startup({"user": "u"}, code=2 << 16),                   # protocol 2.0
    startup({"user": "u"}) + b"Z\0\0\0\4",                  # unknown message type
    startup({"user": "u"}) + b"Q\0\0\0\2",                  # length < 4
    startup({"user": "u"}) + typed(b"Q", b"no terminator"),
    startup({"user": "u"}) + typed(b"E", b"p\0\0\0"),        # truncated int32
    startup({"user": "u"}) + typed(b"S", b"junk"),          # trailing bytes
    startup({"user": "u"}) + typed(b"D", b"X\0"),           # bad describe kind
    startup({"user": "u"}) + typed(b"B", b"\0\0" + struct.pack("!hhh", 0, 1, 0) +
                                   struct.pack("!i", 50)),  # value runs past the end
])
def test_malformed_input_is_a_fatal_violation(data):
    with pytest.raises(P.ProtocolViolation) as ei:
        decode_all(data)
    assert ei.value.sqlstate in ("08P01", "0A000")
    assert ei.value.fatal


def test_invalid_utf8_is_not_fatal_and_keeps_the_stream_in_sync():
    d = P.FrontendDecoder()
    d.feed(startup({"user": "u"}) + typed(b"Q", b"select '\xff'\0") + typed(b"S", b""))
    assert isinstance(d.next(), P.StartupMessage)
    with pytest.raises(P.ProtocolViolation) as ei:
        d.next()
    assert not ei.value.fatal and ei.value.sqlstate == "22021" and ei.value.kind == b"Q"
    assert d.next() == P.Sync()


def test_message_length_limit():
    d = P.FrontendDecoder(max_message=100)
    d.feed(startup({"user": "u"}) + b"Q" + struct.pack("!i", 1000))
    d.next()
    with pytest.raises(P.ProtocolViolation):
        d.next()


def test_backend_messages():
    assert P.ready_for_query(b"I") == b"Z\0\0\0\5I"
    assert P.command_complete("SELECT 1") == b"C\0\0\0\15SELECT 1\0"
    assert P.parameter_status("a", "b") == b"S\0\0\0\10a\0b\0"
    assert P.backend_key_data(1, -1) == b"K\0\0\0\14\0\0\0\1\xff\xff\xff\xff"
    assert P.parameter_description([23, 25]) == b"t\0\0\0\16\0\2\0\0\0\27\0\0\0\31"
    rd = P.row_description([P.FieldDescription("a", 23, 4)])
    assert rd == b"T" + struct.pack("!ih", 4 + 2 + 2 + 18, 1) + b"a\0" + \
        struct.pack("!IhIhih", 0, 0, 23, 4, -1, 0)
    e = P.error_response(P.error_fields("ERROR", "42P01", "nope", position=15))
    assert e == b"E" + struct.pack("!i", len(e) - 1) + \
        b"SERROR\0VERROR\0C42P01\0Mnope\0P15\0\0"
    assert P.copy_in_response(True, 2) == b"G\0\0\0\13\1\0\2\0\1\0\1"
    assert P.auth_sasl(["SCRAM-SHA-256"]) == b"R\0\0\0\27\0\0\0\12SCRAM-SHA-256\0\0"
