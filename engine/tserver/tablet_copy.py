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
replica ignores Raft traffic (`copying`): begin, fetch every file into `tablet.copy/`
(checked against size and CRC), then under the replica's lock — unless the copy is stale
(RaftConsensus would refuse it: older term, not ahead of our commit index) — swap the
directory in, reopen the Tablet and call `install_tablet_copy(last, ts, config, suffix,
term)`, which resets the Raft log to continue after A; the result tracker is then loaded
from the copied checkpoint (it came in with the directory, so it is in place exactly when
the data is). A crash in the middle of the swap
leaves `tablet.copy/` or `tablet.old/` behind; the replica is then reopened from whichever
`tablet/` exists (a partial copy is never renamed into place).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid as uuidlib
import zlib

from engine import errors
from engine.consensus.messages import OpId
from engine.rpc.rpc import RemoteError

log = logging.getLogger(__name__)

CHUNK = 1 << 20


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
            with tablet._flush_lock:  # no flush or compaction swaps files while we link
                a = tablet._anchor_index() - 1
                # the result tracker as of A, in the tablet directory (normally written
                # when the anchor moved to A+1; here if not yet): linked with the data
                replica._ckpt.prepare(a)
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
    dst = os.path.join(replica.directory, "tablet.copy")
    try:
        shutil.rmtree(dst, ignore_errors=True)
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
        last = OpId(info["last"][0] or 0, info["last"][1])
        return replica.install_copy(dst, last, info["timestamp"],
                                    RaftConfig.from_dict(info["config"]),
                                    list(info["suffix"]), info["term"])
    finally:
        shutil.rmtree(dst, ignore_errors=True)
        try:
            rpc.call(source_addr, "copy_end", {"session": sid}, timeout_s=10)
        except errors.EngineError:
            pass
