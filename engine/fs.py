"""File-system primitives for crash safety, used by every layer that persists state.

`write_json_atomic` is the write-fsync-rename-fsync-dir sequence: after a crash the file
holds either the old or the new content, never a mix. `fsync_dir` makes a rename or an
unlink in a directory durable.

`DirectoryLock` makes one process the only owner of a data directory (Kudu's FsManager
instance lock, PostgreSQL's postmaster.pid). Two writers on one WAL and one set of metadata
files is how acknowledged data gets lost, so the engine takes it where a data directory is
opened (`Catalog.open`) and holds it until the catalog is closed or the process ends:

    DATA_DIR/LOCK     flock(LOCK_EX | LOCK_NB) on this file; it holds the owner's PID

- Another process that opens the directory gets `DirectoryLocked` (SQLSTATE 55006,
  object_in_use) naming the directory and the PID that holds it.
- A stale lock is no lock: flock locks belong to the open file and the kernel drops them
  when the owner exits, however it exits (kill -9 included). The next owner overwrites the
  PID; nothing has to be cleaned up by hand.
- In one process: a directory open twice at the same time is refused too (flock on a second
  descriptor of the file conflicts with the first; the error then says "in this process").
  Opening it again after `close` works. Sharing one open catalog is the caller's business
  (`kudusql.connect` sessions share a `Database`).
- A child made by fork() without exec inherits the open lock file and so keeps the lock while
  it lives (the descriptor is close-on-exec, so a spawned program does not).
- Advisory: a process that does not use this lock is not kept out; NFS may not honour flock.

Fault injection (tests only; Kudu's `--env_inject_eio` / `--env_inject_eio_globs`):
`inject_eio(glob, after)` makes `fsync(fd, path)` raise `OSError(EIO)` for every path
matching `glob` once `after` more fsyncs of matching paths have succeeded; `inject_eio(None)`
stops it. The write-ahead log (engine/consensus/log.py) fsyncs through `fsync`. A server
exposes it as the `failpoint` RPC's `inject_eio` key (engine/rpc/rpc.py), which it honours
only when the process was started with the environment variable
KUDUSQL_FAULT_INJECTION=1 (`fault_injection_enabled`), so a production server cannot be
made to lose its disk by an RPC.
"""

from __future__ import annotations

import errno
import fcntl
import fnmatch
import json
import os
import threading
from typing import Any

from engine import errors

LOCK_FILE = "LOCK"


FAULT_INJECTION_ENV = "KUDUSQL_FAULT_INJECTION"
_eio: list = []  # [glob, fsyncs of matching paths still to succeed]; empty: none injected
_eio_lock = threading.Lock()


def fault_injection_enabled() -> bool:
    return os.environ.get(FAULT_INJECTION_ENV) == "1"


def inject_eio(glob: str | None, after: int = 0) -> None:
    """Fail every fsync of a path matching `glob` with EIO once `after` more of them have
    succeeded (None: stop failing). See the module docstring."""
    with _eio_lock:
        _eio[:] = [] if glob is None else [glob, max(0, int(after))]


def injected_eio() -> dict | None:
    with _eio_lock:
        return None if not _eio else {"glob": _eio[0], "after": _eio[1]}


def fsync(fd: int, path: str) -> None:
    """os.fsync(fd), or the injected EIO (module docstring); `path` names what is synced
    for the injection's glob (the write-ahead log passes its directory)."""
    if _eio:
        with _eio_lock:
            if _eio and fnmatch.fnmatchcase(path, _eio[0]):
                if _eio[1] <= 0:
                    raise OSError(errno.EIO, f"injected EIO (fsync of {path})")
                _eio[1] -= 1
    os.fsync(fd)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: str, obj: Any, fsync: bool = True, indent: int | None = None
                      ) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=indent)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")


class DirectoryLocked(errors.EngineError):
    """Another process (or another open in this one) owns the data directory."""

    sqlstate = "55006"


_held: dict[str, "DirectoryLock"] = {}     # real path -> the lock this process holds
_held_lock = threading.Lock()


class DirectoryLock:
    """The exclusive owner lock of one data directory; see the module docstring."""

    def __init__(self, path: str, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: str) -> "DirectoryLock":
        real = os.path.realpath(path)
        with _held_lock:
            if real in _held:
                raise DirectoryLocked(
                    f'data directory "{path}" is already open in this process '
                    f"(PID {os.getpid()}); close it before opening it again")
            fd = os.open(os.path.join(real, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                owner = _read_pid(fd)
                os.close(fd)
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                who = f"PID {owner}" if owner else "another process"
                raise DirectoryLocked(
                    f'data directory "{path}" is in use by another process ({who}); '
                    "stop that process or use another --data-dir") from None
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            except OSError:
                os.close(fd)
                raise
            lock = _held[real] = cls(real, fd)
            return lock

    def release(self) -> None:
        with _held_lock:
            if self._fd is None:
                return
            fd, self._fd = self._fd, None
            if _held.get(self.path) is self:
                del _held[self.path]
            # The PID stays in the file: a reader that can take the lock knows it is stale.
            os.close(fd)            # closing the file drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
