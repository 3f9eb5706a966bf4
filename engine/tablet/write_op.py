"""Write ops, row operations and their per-row results.

A `WriteOp` is what the tablet logs, replays and (with the cluster) replicates: N row
operations (`ops`, one OpType each) over N rows (`rows`, an Arrow table of logical values,
columns by name). It carries no timestamp and no log index: those are assigned by whoever
orders the op (the tablet itself in embedded mode, a Raft leader later) and passed to
`Tablet.apply` with it. `encode`/`decode` are its WAL entry body (the body of a
`LogEntry` of type WRITE), so an op read back from the log is the op that was applied.

The tablet applies each row on its own (Kudu: a batch is not atomic) and returns N
outcomes as one `WriteResult`: the op's timestamp, how many rows were applied, and one
`RowError` for every row that was not. Rows are never reported by raising.
"""

from __future__ import annotations

import dataclasses
import enum
import struct

import numpy as np
import pyarrow as pa

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


@dataclasses.dataclass(frozen=True)
class RowError:
    index: int  # position of the row in the batch
    code: str
    message: str
    key: tuple

    @property
    def sqlstate(self) -> str:
        return {"ALREADY_PRESENT": "23505", "NOT_FOUND": "02000", "NOT_NULL": "23502",
                "INVALID": "22P02", "NO_PARTITION": "23514"}[self.code]


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

    @staticmethod
    def decode(body: bytes) -> "WriteOp":
        return WriteOp(*decode_write(body))


def encode_write(ops: np.ndarray, rows: pa.Table) -> bytes:
    """A write op as a WAL entry body: row count, op types, then the rows as Arrow IPC."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as w:
        w.write_table(rows)
    return struct.pack("<I", len(ops)) + np.asarray(ops, dtype=np.int8).tobytes() + \
        sink.getvalue().to_pybytes()


def decode_write(body: bytes) -> tuple[np.ndarray, pa.Table]:
    (n,) = struct.unpack_from("<I", body, 0)
    ops = np.frombuffer(body, dtype=np.int8, count=n, offset=4).copy()
    rows = pa.ipc.open_stream(pa.py_buffer(body[4 + n:])).read_all()
    return ops, rows
