"""Tablet bootstrap: bring a tablet back to the state of its last acknowledged write.

Opening a tablet (`Tablet.open`, then `Tablet._bootstrap`), as Kudu's TabletBootstrap
does it:

  1. load the TabletMetadata (tablet_metadata.py) and delete the orphans a crash left;
  2. open the rowsets it names: the flushed state, each store knowing the last op index
     whose effects it holds (the MemRowSet's inserts: `mrs_flushed_index`; each
     DiskRowSet's mutations: its `flushed_index`);
  3. replay the WAL from the *log anchor* — the oldest index whose effects may exist only
     in the log, min(flushed indexes) + 1 — through `Tablet.apply(op, timestamp,
     index=i)`, the same apply path live writes take (`replay` here);
  4. reopen the log for appending after the last entry read, let MVCC treat every
     replayed timestamp as committed, and persist the metadata (which lets log GC drop
     what the replay proved flushed).

What makes replay exact (the contract `Tablet.apply` keeps when it is given an index):
  - every op comes back with its original timestamp, so time travel reads the same rows
    after a restart, and the clock is moved past each (no later op can reuse one);
  - effects already in flushed files are filtered row by row: an insert is skipped if
    op index <= mrs_flushed_index, a mutation of a DiskRowSet row if op index <= that
    rowset's flushed_index; everything else is applied again;
  - an op sees the state it saw the first time, although flushed rowsets may already hold
    its future (a later DELETE in a REDO file, a re-insertion flushed into another
    rowset): with an index, the write path asks a DiskRowSet whether a row was live just
    before the op (`DiskRowSet.live_at`), not whether it is live now (see
    `RowOps.locate`, row_ops.py). History needed for that is never collected while a log entry that
    needs it remains (`Tablet.history_gc_mark`).
  - only WRITE entries change rows; an entry of another type is skipped (none exist yet;
    Raft's configuration changes will be such entries).

The same apply-with-index path is what a Raft follower will use for committed entries:
the leader's timestamp and log index come with the op. Replay needs no lock of its own:
nothing else uses the tablet until `Tablet.open` returns it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from engine.consensus.log import WRITE, Log
from engine.tablet.write_op import WriteOp


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    ops_replayed: int  # WRITE entries applied again
    last_index: int  # the last index read from the log (0 if none)


def replay(log: Log, anchor_index: int,
           apply: Callable[[WriteOp, int, int], object]) -> ReplayResult:
    """Step 3 of the bootstrap: every entry at or after `anchor_index`, in log order, given
    to `apply(op, timestamp, index)` (the tablet's `apply`). The log validates each record
    and truncates a torn tail as it reads (engine/consensus/log.py)."""
    ops = last = 0
    for entry in log.read_from(anchor_index):
        last = entry.index
        if entry.type != WRITE:
            continue
        apply(WriteOp.decode(entry.body), entry.timestamp, entry.index)
        ops += 1
    return ReplayResult(ops, last)
