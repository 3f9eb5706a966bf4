"""The RPC payload codec: JSON for structure, raw bytes for blobs, no pickle.

A payload is a tree of dicts, lists, str, int, float, bool, None, bytes and a few value
types (Decimal, date, datetime, time, timedelta) and *registered* frozen dataclasses (Raft
messages, log entries, predicates). It is encoded as

    u32 header length | header (UTF-8 JSON) | blob 0 | blob 1 | ...

where bytes values become {"$b": i} (i-th blob, its length in the header) and the other
typed values {"$t": name, ...}. Only registered dataclasses can be decoded, so a peer can
never make this process build an arbitrary object (the reason this is not pickle). Raft
entries carry their bodies (Arrow IPC write ops) as blobs, not base64.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import enum
import json
import struct

from engine import errors

_REGISTRY: dict[str, type] = {}
_ENUMS: dict[str, type] = {}


def register(*classes: type) -> None:
    for c in classes:
        if isinstance(c, type) and issubclass(c, enum.Enum):
            _ENUMS[c.__name__] = c
        else:
            _REGISTRY[c.__name__] = c


def _enc(v, blobs: list):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, enum.Enum):
        return {"$t": "enum", "c": type(v).__name__, "v": v.name}
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        blobs.append(bytes(v))
        return {"$b": len(blobs) - 1}
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            if "$t" in v or "$b" in v:
                return {"$t": "dict", "items": [[k, _enc(x, blobs)] for k, x in v.items()]}
            return {k: _enc(x, blobs) for k, x in v.items()}
        return {"$t": "dict", "items": [[_enc(k, blobs), _enc(x, blobs)] for k, x in v.items()]}
    if isinstance(v, list):
        return [_enc(x, blobs) for x in v]
    if isinstance(v, tuple):
        return {"$t": "tuple", "v": [_enc(x, blobs) for x in v]}
    if dataclasses.is_dataclass(v) and type(v).__name__ in _REGISTRY:
        return {"$t": type(v).__name__,
                "f": {f.name: _enc(getattr(v, f.name), blobs) for f in dataclasses.fields(v)}}
    if isinstance(v, decimal.Decimal):
        return {"$t": "dec", "v": str(v)}
    if isinstance(v, _dt.datetime):
        return {"$t": "dtm", "v": v.isoformat()}
    if isinstance(v, _dt.date):
        return {"$t": "date", "v": v.isoformat()}
    if isinstance(v, _dt.time):
        return {"$t": "time", "v": v.isoformat()}
    if isinstance(v, _dt.timedelta):
        return {"$t": "td", "v": [v.days, v.seconds, v.microseconds]}
    if hasattr(v, "item"):  # numpy scalar
        return _enc(v.item(), blobs)
    raise errors.InvalidArgument(f"cannot send a value of type {type(v).__name__} over RPC")


def _dec(v, blobs: list):
    if isinstance(v, list):
        return [_dec(x, blobs) for x in v]
    if not isinstance(v, dict):
        return v
    if "$b" in v:
        return blobs[v["$b"]]
    t = v.get("$t")
    if t is None:
        return {k: _dec(x, blobs) for k, x in v.items()}
    if t == "tuple":
        return tuple(_dec(x, blobs) for x in v["v"])
    if t == "dict":
        return {_hashable(_dec(k, blobs)): _dec(x, blobs) for k, x in v["items"]}
    if t == "enum":
        return _ENUMS[v["c"]][v["v"]]
    if t == "dec":
        return decimal.Decimal(v["v"])
    if t == "dtm":
        return _dt.datetime.fromisoformat(v["v"])
    if t == "date":
        return _dt.date.fromisoformat(v["v"])
    if t == "time":
        return _dt.time.fromisoformat(v["v"])
    if t == "td":
        return _dt.timedelta(*v["v"])
    cls = _REGISTRY.get(t)
    if cls is None:
        raise errors.Corruption(f"RPC payload names an unknown type {t!r}")
    return cls(**{k: _dec(x, blobs) for k, x in v["f"].items()})


def _hashable(k):
    return tuple(k) if isinstance(k, list) else k


def encode(obj) -> bytes:
    blobs: list[bytes] = []
    tree = _enc(obj, blobs)
    header = json.dumps({"v": tree, "blobs": [len(b) for b in blobs]},
                        separators=(",", ":")).encode()
    return b"".join([struct.pack("<I", len(header)), header, *blobs])


def decode(data: bytes):
    data = memoryview(data)
    (n,) = struct.unpack_from("<I", data, 0)
    head = json.loads(bytes(data[4:4 + n]))
    blobs, off = [], 4 + n
    for ln in head["blobs"]:
        blobs.append(bytes(data[off:off + ln]))
        off += ln
    return _dec(head["v"], blobs)


def _register_defaults() -> None:
    from engine.consensus import messages as m
    from engine.consensus.log import LogEntry
    from engine.tablet.scan_spec import ColumnPredicate
    register(LogEntry, ColumnPredicate, m.RaftPeer, m.RaftConfig, m.OpId, m.VoteRequest,
             m.VoteResponse, m.AppendEntries, m.AppendResponse, m.TimeoutNow,
             m.StartTabletCopy, m.MemberType)


_register_defaults()
