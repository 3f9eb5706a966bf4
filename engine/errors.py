"""Engine error types, each carrying the SQLSTATE the SQL layer reports for it.

The engine sits at the bottom of the import graph, so it cannot use the PEP 249 classes of
`kudusql`; those wrap these by SQLSTATE at the boundary. Per-row write failures are *not*
exceptions: a write batch returns one `RowError` per failing row (see `write_op.py`).
"""

from __future__ import annotations


class EngineError(Exception):
    sqlstate = "XX000"


class InvalidArgument(EngineError):
    sqlstate = "22023"


class ColumnNotFound(EngineError):
    sqlstate = "42703"


class NotFound(EngineError):
    sqlstate = "42P01"


class AlreadyPresent(EngineError):
    sqlstate = "23505"


class NotSupported(EngineError):
    """What this kind of tablet or table cannot do (e.g. a cluster's remote tablets and the
    in-order writes of a driver's pipelined batch)."""

    sqlstate = "0A000"


class Corruption(EngineError):
    sqlstate = "XX001"


class IOFailure(EngineError):
    """An fsync (or a write) of the write-ahead log failed: whether the entries it covered
    reached the disk is unknown (after a failed fsync the kernel may drop the dirty pages
    and report the next fsync as a success), so the log refuses every later write and wait
    until the server restarts and replays what is really on disk. PostgreSQL's io_error."""

    sqlstate = "58030"


class SnapshotTooOld(EngineError):
    """A time-travel read before the ancient history mark."""

    sqlstate = "22023"


class ServiceUnavailable(EngineError):
    """Memory pressure: the write was refused, retry later."""

    sqlstate = "53200"


class StaleRequest(EngineError):
    """A write below its client's first_incomplete mark (engine/tserver/result_tracker.py):
    never applied. XX000, not 40001: a client only sends numbers it still waits for, so a
    waiting client that gets this reached a state it should not (its id reused, a bug), and
    running the statement again automatically would hide that."""
