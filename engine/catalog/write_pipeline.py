"""The write pipeline of a Table: one path for every write, routing and applying as
strategies (Kudu has one WriteOp pipeline; the strategies are how rows arrive).

    Table.run_write(route, apply)   (run_write_deferred: the same, stopping before the
                                     wait for durability; the wire's key writes)
      route      route(meta) -> Routed: the row indexes (in the caller's batch) for
                 each partition, and the errors of rows that go nowhere
      hold       `Table._hold`: the tablets `route` picks, under one TableMetadata: one
                 open tablet pinned (TableCatalog.pin_tablet: a version check, no lease
                 object; every single-row write), else leased (lease_tablets: route runs
                 again if a DDL intervenes)
      apply      apply(meta, shares) -> ([(tablet handle, row indexes, WriteResult)],
                 more row errors): each tablet's share (`_tablet_rows`: its rows taken,
                 columns renamed to the tablet's names) written as a deferred tablet op,
                 then their WAL fsyncs waited for together (`Table.finish_all`)
      release    the pin or lease, whatever happened
      merge      `merge_results`: one TableWriteResult, row errors by caller's index

The strategies (engine/catalog/table.py, table_small_writes.py):

    strategy   rows                       route                     apply
    small      <= 8 rows, plain values    row by row, compiled      prepare every share,
                                          key router (the key       then apply (compact
                                          encoded once, handed to   WAL record, row records)
                                          the tablet)
    general    Arrow                      vectorised (`_route`)     one op per share,
                                                                    parallel when large
    pydict     dicts Arrow cannot type    row by row                one op per share
    in-order   Arrow INSERT / UPSERT      vectorised                under every tablet's
                                                                    write lock, up to the
                                                                    first failing row
    coalesced  <= 256 rows, concurrent    the general strategy of the group's leader
               writers                    (engine/catalog/coalesce.py)

`Table.write` picks the strategy from the input (small when it takes the op, else by
format and size); every strategy's outcome is the same per-row Kudu semantics.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from engine.tablet.write_op import RowError


@dataclasses.dataclass(frozen=True)
class TableWriteResult:
    timestamp: int  # the largest op timestamp among the tablets written (0: none)
    num_applied: int
    row_errors: list[RowError]  # sorted by index in the caller's batch
    tablet_timestamps: dict[str, int]  # tablet id -> the timestamp of its op

    @property
    def ok(self) -> bool:
        return not self.row_errors


@dataclasses.dataclass
class Routed:
    """A write's rows routed under one TableMetadata (a strategy's `route(meta)`, see
    `Table.run_write`): the row indexes, in the caller's batch, going to each partition
    (in the order the tablets are leased), and the errors of rows that go nowhere."""
    groups: list[tuple[int, Sequence[int]]]     # (partition index, row indexes)
    errors: list[RowError]


def merge_results(results, errors: list[RowError]) -> TableWriteResult:
    """One TableWriteResult of the tablets' results [(handle, row indexes, WriteResult)]
    (each tablet's row errors mapped back to the caller's row indexes) and `errors`."""
    if len(results) == 1 and not errors:
        slot, idx, r = results[0]
        if not r.row_errors:        # one tablet, every row applied: nothing to map
            return TableWriteResult(r.timestamp, r.num_applied, [],
                                    {slot.tablet_id: r.timestamp})
    errs = list(errors)
    stamps: dict[str, int] = {}
    applied = 0
    for slot, idx, r in results:
        applied += r.num_applied
        stamps[slot.tablet_id] = r.timestamp
        if r.row_errors:
            errs.extend(dataclasses.replace(e, index=int(idx[e.index]))
                        for e in r.row_errors)
    errs.sort(key=lambda e: e.index)
    return TableWriteResult(max(stamps.values(), default=0), applied, errs, stamps)


def carry_durable_at(finish, fin):
    """`finish`, a table's call that runs one tablet's finisher `fin`, named with the WAL
    position `fin` waits for (`durable_at`, Tablet.finish_op) when it names one, so a
    caller can make that position durable elsewhere first (wire/server.py `WalSync`)."""
    at = getattr(fin, "durable_at", None)
    if at is not None:
        finish.durable_at = at
    return finish
