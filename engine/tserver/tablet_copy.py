"""Tablet copy (Kudu's remote bootstrap): a replica the leader can no longer feed from its
log (the entries it needs were GC'd) copies the tablet from the leader.

Source side (`CopySessions`, on the server of the replica named in StartTabletCopy):

    copy_begin {tablet} -> session: under the replica's lock the tablet's MemRowSet and
        DeltaMemStores are flushed, so every op up to A = (its replay anchor - 1) is in its
        files; then, under the tablet's flush lock (no flush or compaction swaps files
        meanwhile), every file of the tablet directory is hard-linked into a session
        directory — the links pin exactly that version even if compactions delete the
        originals later. The answer names the files and sizes, `last` = (term, A), A's
        timestamp, the committed Raft configuration, the source's term and the log suffix
        (entries A+1 .. last: retained, since the log is never GC'd past the anchor). The
        files include the result tracker's checkpoint as of A (`result-tracker-<A>.bin`,
        engine/tserver/result_tracker.py), so a copied replica recognises retries of
        requests applied before A and decides later entries exactly as the source did.
    copy_fetch {session, file, offset, length} -> bytes (with their CRC32)
    copy_end {session}: the links are removed

Destination side (`TabletReplica.on_copy_request` -> `run_copy`): in a thread, while the
replica ignores Raft traffic (`copying`): begin, fetch every file into the staging
directory's `tablet/` (checked against size and CRC, each fsync'd), then
`TabletReplica.install_copy` — unless the copy is stale (from an older term, or not ahead
of our commit index: what RaftConsensus would refuse) — installs it.

Install: one atomic step (Kudu writes the copied superblock and cmeta and flips the tablet
data state durably). The replica's state is three things that must agree — the tablet's
data, the Raft log and the consensus metadata — so a complete new set is prepared beside
the old one and switched in by a single rename:

    <replica>/copy.staging/            being prepared (never read; removed at open)
        tablet/                        the fetched files
        raft-wal/                      a fresh Raft log: boundary (A, term of A, its
                                       timestamp) in raft-log.json, then the source's
                                       suffix A+1.. (synced)
        consensus-meta.json            term = max(ours, source's) (= the source's: a copy
                                       from an older term is refused), our vote if that
                                       term is ours, the source's committed config
    rename copy.staging -> copy.ready  THE COMMIT POINT (after fsyncing the staged tree and
                                       then the replica directory)
    roll forward, for tablet, raft-wal, consensus-meta.json in turn:
        X -> X.old, copy.ready/X -> X, X.old removed
    copy.ready removed

`recover_install(replica_dir)` runs first whenever a replica is opened (server start, and
right after the commit of a live install): `copy.ready` present -> the roll forward above
is finished (each move is skipped if done, so it may be interrupted and run again);
`copy.staging` present -> removed (the install never happened); then every `X.old` is
removed, or renamed back to X if X is missing (the former two-rename install could leave
that). So a crash at any step opens either the old state or the new one, never a mix. The
in-memory Tablet and RaftConsensus are then reopened from the directory
(`TabletReplica.install_copy`); if the live install fails after the old state was closed,
the replica is FAILED (its files are left for the next start's recovery).

Failpoints (tests): with KUDUSQL_TABLET_COPY_FAILPOINT=<step> the process exits at once
(os._exit, no cleanup: what kill -9 leaves) when the install reaches <step>, one of
INSTALL_STEPS; with <step>:raise it raises `CopyFailpoint` there instead, and the files are
left as that crash would leave them (the replica is FAILED if its old state was closed).
The result tracker's checkpoint (result_tracker.py) is an ordinary file of the tablet
directory, written by the source at A under the flush lock: it is installed with the data
in the same commit, and `TabletReplica.install_copy` loads it.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid as uuidlib
import zlib

from engine import errors
from engine.consensus.consensus_metadata import CMETA_FILE, ConsensusMetadata, \
    FileMetadataStore
from engine.consensus.log import LogEntry
from engine.consensus.log_storage import WalLogStorage
from engine.consensus.messages import OpId
from engine.fs import fsync_dir
from engine.rpc.rpc import RemoteError

log = logging.getLogger(__name__)

CHUNK = 1 << 20
STAGING = "copy.staging"  # a new replica state being prepared (see the module docstring)
READY = "copy.ready"  # a committed one, being moved into place
# what an install replaces, in the order it is moved into place
STATE = ("tablet", "raft-wal", CMETA_FILE)

FAILPOINT_ENV = "KUDUSQL_TABLET_COPY_FAILPOINT"
INSTALL_STEPS = ("fetched", "staged", "committed", "moved-tablet", "moved-raft-wal",
                 "moved-" + CMETA_FILE, "installed")


class CopyFailpoint(RuntimeError):
    """Raised at an install step named by KUDUSQL_TABLET_COPY_FAILPOINT=<step>:raise."""


def failpoint(step: str) -> None:
    """Crash here (os._exit: no cleanup, like kill -9) or raise if the failpoint names
    `step` (see the module docstring)."""
    want = os.environ.get(FAILPOINT_ENV)
    if not want:
        return
    name, _, action = want.partition(":")
    if name != step:
        return
    if action == "raise":
        raise CopyFailpoint(f"tablet copy failpoint at {step}")
    log.critical("tablet copy failpoint at %s: exiting", step)
    logging.shutdown()
    os._exit(137)


class CopySessions:
    """The source side: open copy sessions of this server's replicas."""

    def __init__(self, data_dir: str):
        self.root = os.path.join(data_dir, "copy-sessions")
        shutil.rmtree(self.root, ignore_errors=True)  # sessions do not survive a restart
        os.makedirs(self.root)
        self._lock = threading.Lock()
        self._sessions: dict[str, str] = {}

    def begin(self, replica) -> dict:
        sid = uuidlib.uuid4().hex
        sdir = os.path.join(self.root, sid)
        with replica.lock:
            r = replica.raft
            tablet = replica.tablet
            tablet.flush_mrs()
            tablet.flush_dms()
            with tablet.flush_lock:  # no flush or compaction swaps files while we link
                a = tablet.anchor_index() - 1
                # the result tracker as of A, in the tablet directory (normally written
                # when the anchor moved to A+1; here if not yet): linked with the data
                replica.checkpoints.prepare(a)
                src = tablet.path
                files = []
                try:
                    for dirpath, dirs, names in os.walk(src):
                        rel = os.path.relpath(dirpath, src)
                        if rel == "wal" or rel.startswith("wal" + os.sep):
                            continue
                        os.makedirs(os.path.join(sdir, rel), exist_ok=True)
                        for n in names:
                            p = os.path.join(dirpath, n)
                            os.link(p, os.path.join(sdir, rel, n))
                            files.append([os.path.normpath(os.path.join(rel, n)),
                                          os.path.getsize(p)])
                except FileNotFoundError as e:
                    shutil.rmtree(sdir, ignore_errors=True)
                    raise RemoteError(f"tablet copy of {replica.tablet_id}: files changed "
                                      f"while linking ({e}); retry") from None
            storage = replica.storage
            suffix = storage.entries(a + 1, storage.last_index) \
                if storage.last_index > a else []
            info = {"session": sid, "files": files, "last": [storage.term(a), a],
                    "timestamp": storage.timestamp(a) or 0,
                    "config": r.committed_config.to_dict(), "term": r.term,
                    "suffix": suffix}
        with self._lock:
            self._sessions[sid] = sdir
        return info

    def fetch(self, p: dict) -> dict:
        sdir = self._sessions.get(p["session"])
        if sdir is None:
            raise errors.NotFound(f"no tablet copy session {p['session']}")
        path = os.path.normpath(os.path.join(sdir, p["file"]))
        if not path.startswith(sdir + os.sep):
            raise errors.InvalidArgument("a tablet copy file outside its session")
        with open(path, "rb") as f:
            f.seek(p["offset"])
            data = f.read(min(p.get("length", CHUNK), CHUNK))
        return {"data": data, "crc32": zlib.crc32(data)}

    def end(self, p: dict) -> dict:
        with self._lock:
            sdir = self._sessions.pop(p["session"], None)
        if sdir is not None:
            shutil.rmtree(sdir, ignore_errors=True)
        return {}


def run_copy(replica, rpc, source_addr: str) -> bool:
    """The destination side (see the module docstring). True if installed."""
    from engine.consensus.messages import RaftConfig

    info = rpc.call(source_addr, "copy_begin", {"tablet": replica.tablet_id}, timeout_s=60)
    sid = info["session"]
    staging = os.path.join(replica.directory, STAGING)
    dst = os.path.join(staging, "tablet")
    crashed = False
    try:
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(dst)
        for rel, size in info["files"]:
            path = os.path.join(dst, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                off = 0
                while off < size:
                    chunk = rpc.call(source_addr, "copy_fetch", {
                        "session": sid, "file": rel, "offset": off, "length": CHUNK},
                        timeout_s=30)
                    data = chunk["data"]
                    if zlib.crc32(data) != chunk["crc32"] or not data:
                        raise errors.Corruption(f"tablet copy: bad chunk of {rel} at {off}")
                    f.write(data)
                    off += len(data)
                f.flush()
                os.fsync(f.fileno())
        failpoint("fetched")
        last = OpId(info["last"][0] or 0, info["last"][1])
        return replica.install_copy(staging, last, info["timestamp"],
                                    RaftConfig.from_dict(info["config"]),
                                    list(info["suffix"]), info["term"])
    except CopyFailpoint:
        crashed = True  # a simulated crash: leave the files as a crash would
        raise
    finally:
        if not crashed:
            shutil.rmtree(staging, ignore_errors=True)  # (gone once committed: renamed)
        try:
            rpc.call(source_addr, "copy_end", {"session": sid}, timeout_s=10)
        except errors.EngineError:
            pass


# -- install: staging, commit, roll forward, recovery ------------------------------------------
def stage_install(staging: str, last: OpId, timestamp: int, suffix: list[LogEntry],
                  cmeta: ConsensusMetadata, segment_bytes: int, fsync: bool = True) -> None:
    """Complete the staged replica state beside the fetched `tablet/`: a Raft log that
    continues after `last` (at `timestamp`) holding `suffix`, and `cmeta`; then make the
    whole tree durable."""
    storage = WalLogStorage(os.path.join(staging, "raft-wal"), segment_bytes, fsync=fsync)
    try:
        storage.reset(last.index, last.term, timestamp)
        storage.append(list(suffix))
        storage.sync()
    finally:
        storage.close()
    FileMetadataStore(staging, fsync=fsync).save(cmeta)
    if fsync:
        fsync_tree(staging)
    failpoint("staged")


def commit_install(replica_dir: str, fsync: bool = True) -> None:
    """The commit point: the staged state becomes the replica's (one rename), then it is
    moved into place (`roll_forward`)."""
    os.rename(os.path.join(replica_dir, STAGING), os.path.join(replica_dir, READY))
    if fsync:
        fsync_dir(replica_dir)
    failpoint("committed")
    roll_forward(replica_dir, fsync)


def roll_forward(replica_dir: str, fsync: bool = True) -> None:
    """Move a committed install (`copy.ready/`) into place; safe to run again after a crash
    at any point of it (a part already moved is skipped)."""
    ready = os.path.join(replica_dir, READY)
    for name in STATE:
        src, dst = os.path.join(ready, name), os.path.join(replica_dir, name)
        if not os.path.lexists(src):
            continue  # moved before the crash
        if os.path.isdir(src):
            old = dst + ".old"
            if os.path.lexists(dst):
                shutil.rmtree(old, ignore_errors=True)
                os.rename(dst, old)
            os.rename(src, dst)
            if fsync:
                fsync_dir(replica_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(src, dst)
            if fsync:
                fsync_dir(replica_dir)
        failpoint("moved-" + name)
    shutil.rmtree(ready, ignore_errors=True)
    if fsync:
        fsync_dir(replica_dir)


def recover_install(replica_dir: str, fsync: bool = True) -> str | None:
    """Finish or undo an install a crash interrupted (see the module docstring), before
    the replica is opened. Returns what was done ("rolled forward", "rolled back") or
    None."""
    done = None
    if os.path.isdir(os.path.join(replica_dir, READY)):
        roll_forward(replica_dir, fsync)
        done = "rolled forward"
    for leftover in (STAGING, "tablet.copy"):  # (tablet.copy: the older install's)
        p = os.path.join(replica_dir, leftover)
        if os.path.lexists(p):
            shutil.rmtree(p, ignore_errors=True)
            done = done or "rolled back"
    for name in ("tablet", "raft-wal"):
        old = os.path.join(replica_dir, name + ".old")
        if os.path.lexists(old):
            if os.path.lexists(os.path.join(replica_dir, name)):
                shutil.rmtree(old, ignore_errors=True)
            else:  # the older two-rename install stopped between its renames
                os.rename(old, os.path.join(replica_dir, name))
                done = done or "rolled back"
    if done and fsync:
        fsync_dir(replica_dir)
    if done:
        log.warning("%s: an interrupted tablet copy install was %s", replica_dir, done)
    return done


def fsync_tree(root: str) -> None:
    """fsync every file and directory under `root` (and `root`), deepest first."""
    for dirpath, _, names in os.walk(root, topdown=False):
        for n in names:
            fd = os.open(os.path.join(dirpath, n), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)
