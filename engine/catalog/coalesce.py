"""Write coalescing: small concurrent writes to one table go to the tablets as one op.

A one-row INSERT costs the engine nearly what a thousand-row one does: routing, conversion,
key encoding, bloom probes, the WAL record and the MVCC op are each paid per write, and in
Python that fixed cost (~1 ms) dwarfs the per-row work. Sixteen clients writing single rows
would each pay it, one after another under the GIL. The coalescer lets them share it, the
way the WAL's group commit lets them share an fsync:

- A writer queues its request (ops + rows) under the rows' Arrow schema. If nobody is
  writing that schema to the table it becomes the leader: it takes every request queued
  for the schema, concatenates them and writes them as one batch; else it waits.
- Requests that arrive while the leader writes queue behind it; when the leader is done it
  hands leadership to the first of them, which writes the whole next group. There is no
  timer: a writer alone writes at once, and batches form only from real concurrency.
- Each request gets its own result: its rows' errors with indexes into its own rows (row
  semantics are Kudu's per-row semantics either way, so one request's bad row never affects
  another's), and its own applied count. An exception of the shared write (a concurrent
  DDL, memory back-pressure) is raised to every request of the group.

Contract: `write(ops, rows, write_now)` behaves as `write_now(ops, rows)` would, except
that rows of concurrent requests may share one MVCC timestamp per tablet (they are applied
as one op, atomically together) and the timestamps in the result cover the whole group.
Within a group requests are applied in arrival order, so two requests touching the same key
see each other as consecutive writes would (the tablet applies a batch in rounds).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

import numpy as np
import pyarrow as pa

MAX_GROUP_ROWS = 4096    # a group stops growing here (bounds one op's size and latency)


class _Request:
    __slots__ = ("ops", "rows", "done", "lead", "result", "error")

    def __init__(self, ops: np.ndarray, rows: pa.Table):
        self.ops, self.rows = ops, rows
        self.done = threading.Event()
        self.lead = False              # set (with `done`) when promoted to leader
        self.result = None
        self.error: BaseException | None = None


class WriteCoalescer:
    """One per table (`TableCatalog.write_coalescer`, leases.py); `write_now` is the leader's own direct write."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queues: dict[pa.Schema, list[_Request]] = {}
        self._busy: set[pa.Schema] = set()
        self.groups = 0                # writes sent to the tablets (for tests and stats)
        self.requests = 0

    def write(self, ops: np.ndarray, rows: pa.Table, write_now: Callable):
        key = rows.schema
        me = _Request(ops, rows)
        with self._lock:
            self._queues.setdefault(key, []).append(me)
            lead = key not in self._busy
            if lead:
                self._busy.add(key)
        if not lead:
            try:
                me.done.wait()
            except BaseException:   # KeyboardInterrupt while waiting: step out cleanly
                self._abandon(key, me)
                raise
            if not me.lead:
                return _outcome(me)
        try:
            with self._lock:
                group = self._take(key)
            self._run(group, write_now)
        finally:
            with self._lock:
                self._pass_on(key)
        return _outcome(me)

    def _pass_on(self, key) -> None:
        """Leadership of `key` to the first waiter, or `key` is free (lock held)."""
        waiting = self._queues.get(key)
        if waiting:
            waiting[0].lead = True
            waiting[0].done.set()
        else:
            self._queues.pop(key, None)
            self._busy.discard(key)

    def _abandon(self, key, me: _Request) -> None:
        """A waiter leaves before its turn: out of the queue, and if it had just been made
        leader, the leadership goes on (else every later writer would wait forever)."""
        with self._lock:
            queue = self._queues.get(key, [])
            if me not in queue:
                return                      # already taken into a group: nothing to undo
            queue.remove(me)
            if me.lead:
                self._pass_on(key)

    def _take(self, key) -> list[_Request]:
        """The queued requests of `key` up to MAX_GROUP_ROWS rows (at least one)."""
        queue = self._queues[key]
        n, rows = 0, 0
        while n < len(queue) and (n == 0 or rows + queue[n].rows.num_rows <= MAX_GROUP_ROWS):
            rows += queue[n].rows.num_rows
            n += 1
        group, self._queues[key] = queue[:n], queue[n:]
        return group

    def _run(self, group: list[_Request], write_now: Callable) -> None:
        self.groups += 1
        self.requests += len(group)
        try:
            if len(group) == 1:
                r = group[0]
                r.result = write_now(r.ops, r.rows)
                return
            rows = pa.concat_tables([r.rows for r in group]).combine_chunks()
            result = write_now(np.concatenate([r.ops for r in group]), rows)
            _split(result, group)
        except BaseException as e:  # noqa: BLE001 - every request of the group sees it
            for r in group:
                r.error = e
        finally:
            for r in group:
                if not r.lead:
                    r.done.set()


def _split(result, group: list[_Request]) -> None:
    """The group's TableWriteResult -> one per request (row indexes made local)."""
    errors = result.row_errors          # sorted by index
    i = off = 0
    for r in group:
        n = r.rows.num_rows
        mine = []
        while i < len(errors) and errors[i].index < off + n:
            mine.append(dataclasses.replace(errors[i], index=errors[i].index - off))
            i += 1
        r.result = dataclasses.replace(result, num_applied=n - len(mine), row_errors=mine)
        off += n


def _outcome(r: _Request):
    if r.error is not None:
        raise r.error
    return r.result
