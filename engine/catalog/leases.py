"""The catalog as a Table sees it: table metadata and tablet leases (a public contract).

`Table` (table.py) routes one table's reads and writes to its tablets. It uses the catalog
through this contract only, so the same Table code runs over the embedded `Catalog`
(catalog.py: local tablets in one process) and, later, over a remote catalog client (the
cluster: metadata cached from the master, tablets reached through their leader replicas).

`TableCatalog` — what a catalog offers a Table:

  table_metadata(table_id) -> TableMetadata
        The table's current version (metadata.py): name, schema, schema version and the
        partition directory (`partition_schema.partitions[i]` is held by tablet
        `tablet_ids[i]`). NotFound once the table is dropped.
  lease_tablets(table_id, pick) -> TabletLease
        Reference the tablets one operation uses, for its duration. `pick(metadata)` gets
        the current metadata and returns the tablet ids the operation needs (it routes rows
        or prunes partitions with that metadata, and may raise on bad input: the error
        reaches the caller). The lease's metadata is the version `pick` saw; the catalog
        retries with the new version if a DDL published another in between, and waits for
        (or finishes) an ADD / DROP COLUMN under way, so an operation never runs over half
        a DDL. ServiceUnavailable if the table keeps changing or the catalog is closed.
  tablets_ready(table_id) -> bool
        True when an operation would open no tablet and wait for no DDL (an event loop
        may then run a point lookup itself instead of handing it to a worker thread).
  pin_tablet(metadata, tablet_id) -> TabletHandle | None; unpin_tablet(handle)  (optional)
        A reference on one tablet of that metadata version, for a read that must not
        wait (`Table.lookup_now` on an event loop) and for a write routed to one tablet
        (`Table._hold`: cheaper than a lease): None, nothing taken, when the version is
        no longer current, an ADD / DROP COLUMN is pending or drains the table, or the
        tablet is not open (a write then takes a lease). It protects the tablet as a
        lease does. A catalog without them (the remote one: every call is a round trip)
        never serves such reads, and leases for every write.
  write_coalescer(table_id) -> WriteCoalescer
        Where small concurrent writes to the table meet (coalesce.py).
  executor, parallelism
        The thread pool that runs tablet operations in parallel, and how many may run at
        once (a scan keeps at most `parallelism` chunks in flight).

`TabletLease` — the result of `lease_tablets`: `metadata`, and one `TabletHandle` per
picked id, in order. `release()` gives the references back (once; later calls do nothing);
a lease is also a context manager. While a lease is held the catalog neither closes its
tablets nor deletes them (a DROP that races with it deletes them at the release), and no
ADD / DROP COLUMN starts on the table.

`TabletHandle` — one leased tablet: `tablet_id`, `is_open`, `tablet()` (the tablet, opened
on first use: the engine Tablet API of docs/engine-api.md) and `column_renames(schema)`
({table column name: tablet column name} where RENAME COLUMN made them differ; tablets
keep their names, the table schema is authoritative, columns match by id).
"""

from __future__ import annotations

import concurrent.futures as cf
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from engine.catalog.metadata import TableMetadata
from engine.schema import Schema

if TYPE_CHECKING:  # annotations only
    from engine.catalog.coalesce import WriteCoalescer
    from engine.tablet.tablet import Tablet


class TabletHandle(Protocol):
    tablet_id: str

    @property
    def is_open(self) -> bool: ...

    def tablet(self) -> "Tablet": ...

    def column_renames(self, schema: Schema) -> dict[str, str] | None: ...


class TabletLease:
    """References on the tablets of one operation (see the module docstring)."""

    __slots__ = ("metadata", "handles", "_release")

    def __init__(self, metadata: TableMetadata, handles: Sequence[TabletHandle],
                 release: Callable[[Sequence[TabletHandle]], None]):
        self.metadata = metadata
        self.handles = tuple(handles)
        self._release = release

    def release(self) -> None:
        fn, self._release = self._release, None
        if fn is not None:
            fn(self.handles)

    def __enter__(self) -> "TabletLease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class TableCatalog(Protocol):
    parallelism: int

    @property
    def executor(self) -> cf.Executor: ...

    def table_metadata(self, table_id: str) -> TableMetadata: ...

    def lease_tablets(self, table_id: str,
                      pick: Callable[[TableMetadata], Sequence[str]]) -> TabletLease: ...

    def tablets_ready(self, table_id: str) -> bool: ...

    def write_coalescer(self, table_id: str) -> "WriteCoalescer": ...
