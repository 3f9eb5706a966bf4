"""Write ops, row operations and their per-row results.

A `WriteOp` is what the tablet logs, replays and (with the cluster) replicates: N row
operations (`ops`, one OpType each) over N rows (`rows`, an Arrow table of logical values,
columns by name). It carries no timestamp and no log index: those are assigned by whoever
orders the op (the tablet itself in embedded mode, a Raft leader later) and passed to
`Tablet.apply` with it. `encode`/`decode` are its WAL entry body (the body of a
`LogEntry` of type WRITE), so an op read back from the log is the op that was applied.

Two body formats, one decoder (`decode_write`), so every record ever written stays
readable and the cluster (whose Raft log is this WAL) needs no second path:

    Arrow   count u32 | op types (int8 each) | the rows as an Arrow IPC stream
            (`encode_write`: bulk and general writes)
    compact 0xFFFFFFFF | version u8 | column count u16 | names (u16 length + UTF-8) ...
            | row count u32 | op types (int8 each) | values, row by row, each a tag byte
            and its bytes (`encode_small`: the small-write path, tablet_write.py)

An Arrow body starts with its row count, which is never 2**32 - 1 (that body would be
over 4 GiB), so the first four bytes tell the formats apart. A compact body holds plain
Python values only (None, bool, int within int64, float, str, bytes, date, naive datetime,
Decimal); its tags fix each value's type, and decoding gives the Arrow table the small
write would have been as a general write (int64, float64, string, binary, bool, date32,
timestamp[us], decimal128 inferred), so replaying either body applies the same rows.
Encoding a compact body costs ~1 us per value instead of an Arrow IPC stream's ~40 us of
fixed cost per op.

The tablet applies each row on its own (Kudu: a batch is not atomic) and returns N
outcomes as one `WriteResult`: the op's timestamp, how many rows were applied, and one
`RowError` for every row that was not. Rows are never reported by raising.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal
import enum
import struct
from typing import Sequence

import numpy as np
import pyarrow as pa

import native
from engine import errors


class OpType(enum.IntEnum):
    INSERT = 1
    UPDATE = 2
    DELETE = 3
    UPSERT = 5


class RowErrorCode(str, enum.Enum):
    ALREADY_PRESENT = "ALREADY_PRESENT"  # INSERT of a key that is live (SQLSTATE 23505)
    NOT_FOUND = "NOT_FOUND"  # UPDATE/DELETE of a key that is not live (02000)
    NOT_NULL = "NOT_NULL"  # NULL into a NOT NULL column (23502)
    INVALID = "INVALID"  # a value the column cannot hold (22P02 / 22003)
    NO_PARTITION = "NO_PARTITION"  # no range partition covers the row's key (23514)
    # an UPDATE / DELETE whose read precondition failed: the row has a mutation newer
    # than the read's snapshot (row_check.py; the SQL layer re-reads it, else 40001)
    CHANGED = "CHANGED"


# A write's per-row read precondition travels as this extra int64 column of the op's rows
# (so it is logged, replicated and replayed with the op, in either body format): for an
# UPDATE / DELETE row, the timestamp S of the snapshot its values were computed from; the
# row applies only if its live version has no mutation (update, delete, re-insertion)
# after S (engine/tablet/row_check.py). NULL or absent: no precondition. A NUL byte
# cannot start a column name (SQL identifiers never hold one).
READ_TS_COLUMN = "\x00read_ts"


@dataclasses.dataclass(frozen=True)
class RowError:
    index: int  # position of the row in the batch
    code: str
    message: str
    key: tuple

    @property
    def sqlstate(self) -> str:
        return {"ALREADY_PRESENT": "23505", "NOT_FOUND": "02000", "NOT_NULL": "23502",
                "INVALID": "22P02", "NO_PARTITION": "23514",
                "CHANGED": "40001"}[self.code]


@dataclasses.dataclass(frozen=True)
class WriteResult:
    timestamp: int
    num_applied: int
    row_errors: list[RowError]

    @property
    def ok(self) -> bool:
        return not self.row_errors


@dataclasses.dataclass(frozen=True, eq=False)
class WriteOp:
    """N row operations over N rows (see the module docstring); immutable once built."""

    ops: np.ndarray  # int8 OpType per row
    rows: pa.Table

    def __post_init__(self):
        if len(self.ops) != self.rows.num_rows:
            raise errors.InvalidArgument(
                f"{len(self.ops)} op types for {self.rows.num_rows} rows")

    def encode(self) -> bytes:
        return encode_write(self.ops, self.rows)

    def encode_for_log(self) -> bytes | pa.Buffer:
        """`encode`'s bytes, or for a large op the Arrow buffer they are in (no copy out
        of it): a local tablet's WAL (`Log.append_write`) writes and checksums any
        buffer-protocol object. Measured on 64k lineitem rows: 54-66 -> 37-41 ns a row
        (docs/spark.md, "The put's WAL body, once")."""
        return encode_write(self.ops, self.rows, as_buffer=True)

    @staticmethod
    def decode(body: bytes) -> "WriteOp":
        return WriteOp(*decode_write(body))


# Bodies up to this size come as bytes even `as_buffer` (the WAL joins a record this small
# into one write: consensus.log.JOIN_MAX_BYTES)
_BUFFER_MIN_BYTES = 64 << 10


def encode_write(ops: np.ndarray, rows: pa.Table, as_buffer: bool = False
                 ) -> bytes | pa.Buffer:
    """A write op as a WAL entry body: row count, op types, then the rows as Arrow IPC.
    `as_buffer`: a body above 64 KiB is returned as the Arrow buffer it was written into
    (`WriteOp.encode_for_log`), not copied into bytes."""
    sink = pa.BufferOutputStream()
    sink.write(struct.pack("<I", len(ops)))
    sink.write(np.ascontiguousarray(ops, dtype=np.int8))
    with pa.ipc.new_stream(sink, rows.schema) as w:   # one buffer
        w.write_table(rows)
    buf = sink.getvalue()
    if as_buffer and buf.size > _BUFFER_MIN_BYTES:
        return buf
    return buf.to_pybytes()


def decode_write(body: bytes) -> tuple[np.ndarray, pa.Table]:
    """Either body format (module docstring) -> (op types, rows as Arrow)."""
    if body[:4] == COMPACT_TAG:
        return _decode_small(body)
    (n,) = struct.unpack_from("<I", body, 0)
    ops = np.frombuffer(body, dtype=np.int8, count=n, offset=4).copy()
    rows = pa.ipc.open_stream(pa.py_buffer(body[4 + n:])).read_all()
    return ops, rows


# -- the compact body (see the module docstring) ---------------------------------------------
COMPACT_TAG = b"\xff\xff\xff\xff"
COMPACT_VERSION = 1
_NONE, _INT, _FLOAT, _STR, _BYTES, _FALSE, _TRUE, _DATE, _DATETIME, _DECIMAL = range(10)
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_US = _dt.timedelta(microseconds=1)
_U16, _U32, _I32, _I64, _F64 = (struct.Struct(f) for f in ("<H", "<I", "<i", "<q", "<d"))
_ARROW_TYPE = {_INT: pa.int64(), _FLOAT: pa.float64(), _STR: pa.string(),
               _BYTES: pa.binary(), _FALSE: pa.bool_(), _TRUE: pa.bool_(),
               _DATE: pa.date32(), _DATETIME: pa.timestamp("us")}


_INT_TAG = bytes((_INT,))    # encode_small writes ints itself, without the call


def _encode_value(v, out: list) -> None:
    """One value as tag + bytes; TypeError for a value the compact body does not hold
    (the caller then writes the general way)."""
    t = type(v)
    if v is None:
        out.append(b"\x00")
    elif t is int:
        out.append(_INT_TAG + _I64.pack(v))         # struct.error (a ValueError) if too big
    elif t is float:
        out.append(b"\x02" + _F64.pack(v))
    elif t is str:
        b = v.encode("utf-8")                         # UnicodeEncodeError: a ValueError
        out.append(b"\x03" + _U32.pack(len(b)) + b)
    elif t is bytes:
        out.append(b"\x04" + _U32.pack(len(v)) + v)
    elif t is bool:
        out.append(b"\x06" if v else b"\x05")
    elif t is _dt.date:
        out.append(b"\x07" + _I32.pack(v.toordinal() - _EPOCH_ORDINAL))
    elif t is _dt.datetime and v.tzinfo is None:
        out.append(b"\x08" + _I64.pack((v - _EPOCH) // _US))
    elif t is decimal.Decimal and v.is_finite():
        b = str(v).encode("ascii")
        out.append(b"\x09" + _U16.pack(len(b)) + b)
    else:
        raise TypeError(f"no compact encoding for {t.__name__}")


def encode_small_head(columns: Sequence[str]) -> bytes:
    """The start of a compact body naming `columns` (the same for every op naming them:
    the tablet keeps it per column list, small_write.py `SmallPlan`)."""
    out = [COMPACT_TAG, bytes((COMPACT_VERSION,)), _U16.pack(len(columns))]
    for name in columns:
        b = name.encode("utf-8")
        out.append(_U16.pack(len(b)) + b)
    return b"".join(out)


def encode_small_py(ops: Sequence[int], columns: Sequence[str], rows: Sequence[Sequence],
                    head: bytes | None = None) -> bytes:
    """A small write op as a compact WAL body (module docstring); raises TypeError or
    ValueError for a value it cannot hold exactly (the op is then logged as Arrow).
    `head`: `encode_small_head(columns)` if the caller has it. The specification of the
    compiled `encode_small` (native/_write.pyx), which hands it every call it does not
    decide itself; `encode_small` is whichever of the two runs."""
    out = [encode_small_head(columns) if head is None else head,
           _U32.pack(len(ops)), bytes([int(o) & 0xFF for o in ops])]
    ncols = len(columns)
    try:
        for row in rows:   # a loop per value: the compact body is for a few rows only
            if len(row) != ncols:
                raise ValueError("a row with the wrong number of values")
            for v in row:
                if type(v) is int:          # the commonest value, without a call
                    out.append(_INT_TAG + _I64.pack(v))
                else:
                    _encode_value(v, out)
    except struct.error as e:   # an int beyond int64
        raise ValueError(str(e)) from e
    return b"".join(out)


encode_small = native.kernel("_write", "encode_small", encode_small_py, "fallback_small")


def _decode_small(body: bytes) -> tuple[np.ndarray, pa.Table]:
    if body[4] != COMPACT_VERSION:
        raise errors.Corruption(f"unknown compact write record version {body[4]}")
    p = 5
    (ncols,) = _U16.unpack_from(body, p)
    p += 2
    names = []
    for _ in range(ncols):
        (ln,) = _U16.unpack_from(body, p)
        names.append(body[p + 2:p + 2 + ln].decode("utf-8"))
        p += 2 + ln
    (n,) = _U32.unpack_from(body, p)
    p += 4
    ops = np.frombuffer(body, dtype=np.int8, count=n, offset=p).copy()
    p += n
    cols: list[list] = [[] for _ in range(ncols)]
    kinds = [None] * ncols
    for _ in range(n):      # a loop per value: compact bodies hold a few rows
        for j in range(ncols):
            tag = body[p]
            p += 1
            if tag == _NONE:
                v = None
            elif tag == _INT:
                v = _I64.unpack_from(body, p)[0]
                p += 8
            elif tag == _FLOAT:
                v = _F64.unpack_from(body, p)[0]
                p += 8
            elif tag in (_STR, _BYTES):
                (ln,) = _U32.unpack_from(body, p)
                v = body[p + 4:p + 4 + ln]
                v = v.decode("utf-8") if tag == _STR else bytes(v)
                p += 4 + ln
            elif tag in (_FALSE, _TRUE):
                v = tag == _TRUE
            elif tag == _DATE:
                v = _dt.date.fromordinal(_I32.unpack_from(body, p)[0] + _EPOCH_ORDINAL)
                p += 4
            elif tag == _DATETIME:
                v = _EPOCH + _I64.unpack_from(body, p)[0] * _US
                p += 8
            elif tag == _DECIMAL:
                (ln,) = _U16.unpack_from(body, p)
                v = decimal.Decimal(body[p + 2:p + 2 + ln].decode("ascii"))
                p += 2 + ln
            else:
                raise errors.Corruption(f"unknown value tag {tag} in a compact write record")
            if tag != _NONE:
                kinds[j] = tag
            cols[j].append(v)
    arrays = []
    for vals, kind in zip(cols, kinds):
        if kind is None:
            arrays.append(pa.nulls(n))
        elif kind == _DECIMAL:
            arrays.append(pa.array(vals))     # decimal128 wide enough for every value
        else:
            arrays.append(pa.array(vals, type=_ARROW_TYPE[kind]))
    return ops, pa.Table.from_arrays(arrays, names=names)
