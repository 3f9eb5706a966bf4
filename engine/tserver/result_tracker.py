"""ResultTracker: exactly-once writes, decided from the replicated log alone (Kudu's name).

A write request carries (client id, sequence number, first_incomplete): the number stays
the same across all retries of one request, and first_incomplete is the lowest number the
client still waits for. All three travel inside the request's Raft entry
(tablet_replica.py `encode_request`), so every replica sees them in the same log order.

The state, per client: `stale_before` (the highest first_incomplete seen), `last_ts` (the
hybrid timestamp of its last entry) and `done` {seq: (index, result)} for requests applied
at or above stale_before. Applying entry `index` (timestamp `ts`) of (cid, seq, fi) —
`step` — decides:

  1. a client whose last entry is more than `retain_s` of *log* time older than `ts` is
     forgotten first (a client that went away; `RETAIN_S`, 10 minutes: retries come within
     the client's 30 s deadline);
  2. (cid, seq) recorded at an earlier index: a duplicate — not applied, the stored result;
  3. seq < stale_before: STALE — not applied, a `StaleRequest` error (XX000) as result: the
     client had already said it no longer waits for this request;
  4. otherwise the request is applied and its result recorded at `index`;
then stale_before rises to fi and results below it are dropped.

Every input of that decision is in the log prefix (the entries' own timestamps, not a local
clock), so every replica — one that restarted, one that was copied, a follower — decides
alike about every entry and the replicas cannot diverge. Expiry by age is logical (rule
1); `_sweep` only removes clients rule 1 already treats as gone, so when it runs does not
matter. `lookup` is the read-only version for the leader before it proposes a retry.

Durability (`TrackerCheckpoints`). A restart re-applies only the entries after the tablet's
flushed state F, and the log below the replay anchor is GC'd, so the state at F must be on
disk: the tablet calls `prepare(F)` (through its log view) *before* it writes the metadata
that makes F its flushed index, which rolls the checkpoint forward over the applied entries
noted since (`note`, in memory) and writes `result-tracker-<F>.bin` (fsync, write then
rename) into the tablet directory; `release(F)` (after the metadata write) deletes older
checkpoints. At start-up `load(F)` reads the newest checkpoint at or below F — exactly F
unless the replica predates checkpoints — and *registers* the retained entries between it
and F (decisions only; their results were not kept: `RESULT_NOT_KEPT`). A tablet copy
links the tablet directory, checkpoint included, so the copy carries the tracker as of the
copied index (tablet_copy.py).

A checkpoint file: magic, crc32, then a codec payload (engine/rpc/codec.py: results hold
row keys of any column type).
"""

from __future__ import annotations

import os
import re
import struct
import threading
import zlib

from engine import errors
from engine.clock import LOGICAL_BITS
from engine.fs import fsync_dir
from engine.rpc import codec

RETAIN_S = 600.0
CHECKPOINT_PREFIX = "result-tracker-"
_CKPT_RE = re.compile(r"^result-tracker-(\d{20})\.bin$")
_MAGIC = b"KSQLRT01"
_HDR = struct.Struct("<8sI")


StaleRequest = errors.StaleRequest


def stale_result(client_id: str, seq: int, stale_before: int) -> dict:
    return {"error": {"class": "StaleRequest", "sqlstate": StaleRequest.sqlstate,
                      "message": f"write request {seq} of client {client_id} was not applied: "
                                 f"the client had already reported that it no longer waits "
                                 f"for requests below {stale_before}"}}


# The result of a request applied before a restart whose checkpoint did not exist yet (a
# replica from before checkpoints): known to be applied, its outcome not kept.
RESULT_NOT_KEPT = {"error": {
    "class": "ResultNotKept", "sqlstate": "XX000",
    "message": "this write was applied before the tablet server restarted, but its result "
               "was not kept; check the rows before writing them again"}}


class _Client:
    __slots__ = ("stale_before", "last_ts", "done")

    def __init__(self, stale_before: int = 0, last_ts: int = 0, done=None):
        self.stale_before = stale_before
        self.last_ts = last_ts
        self.done: dict[int, tuple[int, dict]] = done if done is not None else {}


class ResultTracker:
    """The per-client state and the apply-time decision (see the module docstring)."""

    def __init__(self, retain_s: float = RETAIN_S):
        self.retain_s = retain_s
        self._retain_ts = int(retain_s * 1_000_000) << LOGICAL_BITS  # in hybrid time
        self._clients: dict[str, _Client] = {}
        self.index = 0  # the last entry this state includes
        self._next_sweep = 0

    # -- the decision --------------------------------------------------------------------------
    def step(self, index: int, ts: int, client_id: str, seq: int, first_incomplete: int,
             apply) -> tuple[dict, bool]:
        """Entry `index` (timestamp `ts`) of request (client_id, seq): returns (result,
        applied); `apply()` runs (and its result is recorded) only if the request is to be
        applied. A deterministic function of the entries stepped before."""
        c = self._clients.get(client_id)
        if c is not None and c.last_ts + self._retain_ts < ts:
            del self._clients[client_id]  # gone for longer than retain_s of log time
            c = None
        result, applied = None, False
        if c is not None:
            got = c.done.get(seq)
            if got is not None and got[0] < index:
                result = got[1]
            elif got is None and seq < c.stale_before:
                result = stale_result(client_id, seq, c.stale_before)
        if result is None:
            result, applied = apply(), True
        if c is None:
            c = self._clients[client_id] = _Client()
        if applied:
            c.done[seq] = (index, result)
        c.last_ts = max(c.last_ts, ts)
        if first_incomplete > c.stale_before:
            c.stale_before = first_incomplete
            for s in [s for s in c.done if s < first_incomplete]:
                del c.done[s]
        self.index = max(self.index, index)
        if ts >= self._next_sweep:
            self._sweep(ts)
        return result, applied

    def lookup(self, client_id: str, seq: int) -> dict | None:
        """(Leader, before proposing) the stored result of (client_id, seq), a STALE error if
        below the client's mark, else None (propose it; apply decides for good)."""
        c = self._clients.get(client_id)
        if c is None:
            return None
        got = c.done.get(seq)
        if got is not None:
            return got[1]
        return stale_result(client_id, seq, c.stale_before) if seq < c.stale_before else None

    def get(self, client_id: str, seq: int) -> dict | None:
        """The stored result of an applied request, or None."""
        got = self._clients.get(client_id, _Client()).done.get(seq)
        return None if got is None else got[1]

    def _sweep(self, ts: int) -> None:
        """Drop the clients rule 1 already treats as gone at `ts` (memory only)."""
        self._next_sweep = ts + self._retain_ts // 10
        for cid in [cid for cid, c in self._clients.items()
                    if c.last_ts + self._retain_ts < ts]:
            del self._clients[cid]

    def __len__(self) -> int:
        return sum(len(c.done) for c in self._clients.values())

    def clients(self) -> int:
        return len(self._clients)

    # -- (de)serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"index": self.index, "retain_s": self.retain_s,
                "clients": {cid: [c.stale_before, c.last_ts,
                                  [[s, i, r] for s, (i, r) in c.done.items()]]
                            for cid, c in self._clients.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "ResultTracker":
        t = cls(d.get("retain_s", RETAIN_S))
        t.index = d["index"]
        for cid, (sb, last, done) in d["clients"].items():
            t._clients[cid] = _Client(sb, last, {s: (i, r) for s, i, r in done})
        return t

    def clone(self) -> "ResultTracker":
        """An independent copy (results are shared: they are never changed)."""
        t = ResultTracker(self.retain_s)
        t.index = self.index
        t._next_sweep = self._next_sweep
        for cid, c in self._clients.items():
            t._clients[cid] = _Client(c.stale_before, c.last_ts, dict(c.done))
        return t


def checkpoint_name(index: int) -> str:
    return f"{CHECKPOINT_PREFIX}{index:020d}.bin"


def checkpoint_indexes(directory: str) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_CKPT_RE.match, names) if m)


def write_checkpoint(directory: str, state: ResultTracker, fsync: bool = True) -> str:
    body = codec.encode(state.to_dict())
    path = os.path.join(directory, checkpoint_name(state.index))
    tmp = path + ".tmp"  # a crash leaves only a .tmp, which the tablet's open removes
    with open(tmp, "wb") as f:
        f.write(_HDR.pack(_MAGIC, zlib.crc32(body)))
        f.write(body)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(directory)
    return path


def read_checkpoint(path: str) -> ResultTracker:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _HDR.size:
        raise errors.Corruption(f"{path}: result tracker checkpoint cut short")
    magic, crc = _HDR.unpack_from(data, 0)
    body = data[_HDR.size:]
    if magic != _MAGIC or zlib.crc32(body) != crc:
        raise errors.Corruption(f"{path}: result tracker checkpoint fails its checksum")
    return ResultTracker.from_dict(codec.decode(body))


class TrackerCheckpoints:
    """The tracker state at the tablet's flushed index, on disk (see the module docstring).

    `note` is called for every applied write entry in log order (under the replica's lock),
    `prepare`/`release` by the tablet while it persists its metadata (under the tablet's
    write lock, without the replica's), so this class has its own lock."""

    def __init__(self, directory: str, state: ResultTracker, fsync: bool = True):
        self.directory = directory
        self.fsync = fsync
        self._state = state  # the state at self._state.index (checkpointed or not yet)
        self._pending: list[tuple] = []  # (index, ts, cid, seq, fi, result) after it
        self._lock = threading.Lock()

    @property
    def index(self) -> int:
        return self._state.index

    def note(self, index: int, ts: int, client_id: str, seq: int, first_incomplete: int,
             result: dict) -> None:
        with self._lock:
            if index > self._state.index:
                self._pending.append((index, ts, client_id, seq, first_incomplete, result))

    def _roll(self, index: int) -> None:
        st, n = self._state, 0
        for item in self._pending:
            i, ts, cid, seq, fi, result = item
            if i > index:
                break
            st.step(i, ts, cid, seq, fi, lambda r=result: r)
            n += 1
        del self._pending[:n]
        st.index = max(st.index, index)

    def prepare(self, index: int) -> None:
        """Make the state as of `index` (<= the last applied entry) durable before the
        tablet's flushed index moves to it."""
        with self._lock:
            if index <= self._state.index and \
                    os.path.exists(os.path.join(self.directory, checkpoint_name(index))):
                return
            if index < self._state.index:
                raise errors.EngineError(
                    f"{self.directory}: result tracker checkpoint asked for {index}, "
                    f"behind its state at {self._state.index}")
            self._roll(index)
            write_checkpoint(self.directory, self._state, self.fsync)

    def release(self, index: int) -> None:
        """The tablet's flushed index is durably `index`: older checkpoints are unused."""
        with self._lock:
            for i in checkpoint_indexes(self.directory):
                if i < index:
                    try:
                        os.unlink(os.path.join(self.directory, checkpoint_name(i)))
                    except FileNotFoundError:
                        pass

    @classmethod
    def load(cls, directory: str, flushed: int, entries, fsync: bool = True
             ) -> tuple["TrackerCheckpoints", ResultTracker, int]:
        """The state at `flushed`: the newest checkpoint at or below it, then the write
        entries `entries(lo)` yields from lo on (index <= flushed) registered on top.
        Returns (checkpoints, the live tracker at `flushed`, entries registered)."""
        idx = checkpoint_indexes(directory)
        below = [i for i in idx if i <= flushed]
        for i in idx:
            if i > flushed:  # written just before a metadata write that did not happen
                os.unlink(os.path.join(directory, checkpoint_name(i)))
        state = read_checkpoint(os.path.join(directory, checkpoint_name(below[-1]))) \
            if below else ResultTracker()
        n = 0
        if state.index < flushed:
            for i, ts, cid, seq, fi in entries(state.index + 1):
                if i > flushed:
                    break
                state.step(i, ts, cid, seq, fi, lambda: RESULT_NOT_KEPT)
                n += 1
            state.index = flushed
        return cls(directory, state, fsync), state.clone(), n
