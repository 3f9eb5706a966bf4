"""TableScan: one table scan's rows, read from its tablets at one snapshot (Kudu's client
scanner, KuduScanner, over the tablets a scan was pruned to).

`Table.scan` (table.py) prunes the partitions, leases and opens the tablets and starts one
`Tablet.scan` generator on each; this file picks the snapshot they all read at
(`pick_snapshot`) and is the iterator the caller reads (`TableScan`), with what the scan did
(`TableScanStats`, for EXPLAIN ANALYZE). Closing the TableScan (or reading it to its end)
releases the tablet lease.

Snapshot. With `snapshot=None` the scan reads at T = max over the scanned tablets of
`current_timestamp()` (the last committed op of each): every write acknowledged before the
scan started, on any of those tablets, has a timestamp <= T. Each tablet is first made
safe at T (`Tablet.wait_safe`: its clock moved past T, so no later op can take a
timestamp <= T, and its in-flight ops <= T waited for) — then read with `MvccSnapshot.at(T)`,
so the result is a consistent cut across tablets and repeatable: `scan(snapshot=T)` later
returns the same rows (until T falls behind the ancient history mark). T is at or after
every op of every scanned tablet, so it reads the latest retained state and needs no
history check. A given `snapshot` (an int) is passed to every tablet as is (the tablet
refuses one older than its ancient history mark).

Parallel scan. Tablet scans are generators; each is advanced on the catalog's pool a
chunk of `SCAN_CHUNK_BATCHES` batches at a time, at most `parallelism` chunks in flight,
and the caller receives batches in completion order. A task never waits for the consumer
(it returns its chunk and is resubmitted), so scans that are consumed slowly, nested
(a self-join) or abandoned cannot exhaust the pool or deadlock it; memory is bounded by
the chunks in flight. A single-tablet scan runs in the caller's thread.

Work on each chunk (`filter_chunks`). The caller may hand the scan a function of a chunk's
batches (the SQL executor's residual WHERE filter) that the pool thread which read the
chunk runs at once, so that it runs on both cores beside the reading of the other tablets,
not after it on the caller's one thread; it runs in a copy of the caller's `contextvars`
taken when the chunk was submitted (the session's time zone, the statement's time). A
single-tablet scan runs it in the caller's thread on up to `SCAN_CHUNK_BATCHES` batches at
a time. An exception it raises comes out of the TableScan's iteration unchanged.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextvars
import dataclasses
from collections import deque
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from engine import errors
from engine.tablet.diskrowset import ScanStats
from engine.tablet.mvcc import MvccSnapshot

# A scan task returns after this many batches of one tablet (then it is resubmitted).
SCAN_CHUNK_BATCHES = 4


@dataclasses.dataclass
class TableScanStats:
    """What a table scan did (EXPLAIN ANALYZE). `scan` totals are complete once the scan
    is exhausted."""

    tablets_total: int = 0
    tablets_scanned: int = 0
    tablets_pruned: int = 0
    per_tablet: dict[str, ScanStats] = dataclasses.field(default_factory=dict)

    @property
    def scan(self) -> ScanStats:
        total = ScanStats()
        for s in self.per_tablet.values():
            total.add(s)
        return total

    @property
    def rows_scanned(self) -> int:
        return self.scan.rows_scanned

    @property
    def rows_returned(self) -> int:
        return self.scan.rows_returned


def _advance(it: Iterator[pa.RecordBatch], k: int) -> tuple[list[pa.RecordBatch], bool]:
    """Next up to k batches of a tablet scan; True when the scan is exhausted."""
    out = []
    for b in it:
        out.append(b)
        if len(out) >= k:
            return out, False
    return out, True


def _advance_chunk(it: Iterator[pa.RecordBatch], k: int, fix, fn, ctx: contextvars.Context
                   ) -> tuple[list[pa.RecordBatch], bool]:
    """`_advance`, then the column fix and `fn` over the chunk (in `ctx`), on the thread
    that read it."""
    batches, finished = _advance(it, k)
    if batches:
        batches = ctx.run(fn, [fix(b) for b in batches])
    return batches, finished


class TableScan:
    """Iterator of RecordBatches over the pruned tablets at one snapshot (see above)."""

    def __init__(self, release, iters: list, fix, timestamp: int, stats: TableScanStats,
                 pool: cf.Executor | None, parallelism: int):
        self.timestamp = timestamp
        self.stats = stats
        self._release_fn = release
        self._iters = iters
        self._fix = fix
        self._pool = pool
        self._parallelism = parallelism
        self._pending: dict[cf.Future, int] = {}
        self._chunk_fn = None
        self._gen = self._run()

    def __iter__(self) -> "TableScan":
        return self

    def __next__(self) -> pa.RecordBatch:
        return next(self._gen)

    def filter_chunks(self, fn) -> None:
        """Have `fn(batches) -> batches` (thread-safe; list in, list out) applied to each
        chunk of batches where it is read, before the caller gets them (module docstring).
        Called before the first batch is read."""
        self._chunk_fn = fn

    def close(self) -> None:
        self._gen.close()
        self._release()

    def __enter__(self) -> "TableScan":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _release(self) -> None:
        fn, self._release_fn = self._release_fn, None
        if fn is None:
            return
        for f in self._pending:
            f.cancel()
        cf.wait(list(self._pending))  # running chunks finish before tablets may go
        self._pending.clear()
        fn()

    def _run(self) -> Iterator[pa.RecordBatch]:
        fix, fn = self._fix, self._chunk_fn
        try:
            if self._pool is None or len(self._iters) <= 1:
                for it in self._iters:
                    if fn is None:
                        for b in it:
                            yield fix(b)
                        continue
                    finished = False
                    while not finished:
                        batches, finished = _advance(it, SCAN_CHUNK_BATCHES)
                        if batches:
                            yield from fn([fix(b) for b in batches])
                return
            queue = deque(range(len(self._iters)))
            pending = self._pending

            def submit(i: int) -> None:
                if fn is None:
                    f = self._pool.submit(_advance, self._iters[i], SCAN_CHUNK_BATCHES)
                else:
                    f = self._pool.submit(_advance_chunk, self._iters[i], SCAN_CHUNK_BATCHES,
                                          fix, fn, contextvars.copy_context())
                pending[f] = i

            while queue and len(pending) < self._parallelism:
                submit(queue.popleft())
            while pending:
                done, _ = cf.wait(list(pending), return_when=cf.FIRST_COMPLETED)
                for f in done:
                    i = pending.pop(f)
                    batches, finished = f.result()
                    if not finished:
                        queue.append(i)
                    while queue and len(pending) < self._parallelism:
                        submit(queue.popleft())
                    if fn is not None:
                        yield from batches              # fixed and filtered already
                    else:
                        for b in batches:
                            yield fix(b)
        finally:
            self._release()


def pick_snapshot(tablets: list, snapshot) -> tuple[Any, int]:
    """(what to pass to Tablet.scan, the snapshot timestamp) of a scan over `tablets` (the
    opened Tablets) - see the module docstring."""
    if snapshot is not None:
        if isinstance(snapshot, MvccSnapshot):
            return snapshot, snapshot.all_committed_before - 1
        if isinstance(snapshot, bool) or not isinstance(snapshot, (int, np.integer)):
            raise errors.InvalidArgument(f"a snapshot is a timestamp (int), not {snapshot!r}")
        return int(snapshot), int(snapshot)
    ts = max((t.current_timestamp() for t in tablets), default=0)
    for t in tablets:
        t.wait_safe(ts)
    return MvccSnapshot.at(ts), ts
