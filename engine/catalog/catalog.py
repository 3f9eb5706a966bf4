"""Catalog: the master's catalog manager (paper §3.4.1) for one node — tables and tablets.

    DATA_DIR/
     ├── catalog.json           every table: id, name, Schema, PartitionSchema, replication
     │                          factor, the tablet id of each partition, comment, properties;
     │                          every view (engine/catalog/views.py: its query text, columns,
     │                          the relations it reads)
     └── tablets/<tablet_id>/   one engine Tablet per partition (Tablet.create / open)

Kudu keeps the catalog in a single-tablet system table with a write-through in-memory cache;
here the cache is a dict of immutable `TableMetadata` and the durable copy is one JSON file
replaced atomically (write a temporary file, fsync, rename, fsync the directory), so a
reader of the file sees the catalog before or after a DDL, never half of it.

DDL and crash safety. DDL operations are serialised (`_ddl_lock`). Each one writes tablets
first and the catalog last, and deletes tablets only after the catalog stopped naming them:

    CREATE TABLE / ADD RANGE PARTITION   create tablet dirs -> write catalog -> publish
    DROP TABLE / DROP RANGE PARTITION    write catalog -> publish -> delete tablet dirs
    ADD / DROP COLUMN                    write catalog (target schema, pending) -> alter
                                         every tablet in place -> write catalog (schema =
                                         target, version + 1) -> publish

A crash at any point leaves at worst tablet directories the catalog does not name; `open`
deletes them (Kudu's master deletes replicas no table owns). The catalog never names a
tablet that does not exist. If creating a tablet fails, the ones already created are
removed before the error is raised.

Tablets are opened lazily, on first use, and stay open: one Tablet object per tablet,
shared by every Table facade and thread. Every operation that uses tablets takes a
reference on them for its duration (a scan until it is exhausted or closed) through the
public contract Table uses (`lease_tablets` and the rest of `TableCatalog`, leases.py;
`_TabletSlot` is this catalog's `TabletHandle`; `pin_tablet` is the one-tablet reference
of a read that must not wait); a dropped
tablet is closed and its directory deleted when the last reference goes, so a scan or
write racing with DROP finishes against a consistent tablet (Kudu: an op racing with a
drop either completes before it or fails; here it completes, then the data goes).

All tablets share one clock (a tablet server has one HybridClock) and one TabletConfig; a
MaintenanceManager, if given, gets every tablet registered when it is opened.

Schema changes. RENAME COLUMN is metadata only: tablets keep their column ids, and the
Table facade maps names by column id, so it works on tables with data. ADD COLUMN and DROP
COLUMN change every tablet's schema in place (`Tablet.alter_schema`, Kudu's AlterSchema:
the tablet flushes and swaps its schema atomically; rows keep their data, an added column
reads as its DEFAULT or NULL, a dropped one's data is left to compactions). A table has a
schema version (`TableMetadata.schema_version`); each tablet records the version it has,
and altering a tablet to a version it already has does nothing, so an alter can be re-sent.
The order, Kudu's master's (it records the change, then pushes it to the tablets until
every one has it, then marks the table done):
  1. wait (up to `busy_timeout_s`) for the table's running writes and open scans, and in
     the same critical section publish the table with `pending_schema` = the target: from
     then on new operations on the table wait for the DDL (`_PendingAlter`);
  2. persist the catalog with the pending target;
  3. alter every tablet to (target, version + 1), in parallel;
  4. persist and publish the table with schema = target, version + 1, nothing pending.
Tablets are only ever ahead of the catalog while it records the alter as pending, so they
never disagree silently. A crash before 2 leaves the old table; after 2, `open` rolls the
alter forward (tablets that already have it skip it) — the user's ALTER had not returned,
so either outcome is allowed, and forward is the one that needs no undo of a DROP. If a
tablet's alter fails (e.g. disk full), the error is raised and the alter stays pending:
the table's next operation, DDL or `open` retries it, and reports the error if it fails
again. Operations racing with the DDL see the table before or after it, never a mix: a
scan opened before finishes with the old columns; a write naming a dropped column fails
with ColumnNotFound. New tablets (ADD RANGE PARTITION) are created at the table's version.

Limits (kudu-facts §2.5, single node): replication factor odd, 1..7 and at most the number
of tablet servers (1 here unless told otherwise; `None` picks 3 if there are 3 servers,
else 1); at most 300 columns; identifiers of 1..256 UTF-8 bytes; at most
`max_create_tablets_per_ts` (60) x servers tablets at CREATE TABLE. Kudu skips the last
check when the replication factor is 1; it is applied always here, because each tablet
costs a directory, a WAL and open files on this one machine. Tables created with more
tablets must add range partitions afterwards (Kudu's own advice in that message).

Names are case-sensitive (the SQL layer folds case). Errors: `TableExists` (42P07),
`errors.NotFound` (42P01), `ColumnExists` (42701), `NotSupported` (0A000, for callers'
requests the engine cannot carry out), and `errors.InvalidArgument` for every validation
failure.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Sequence

from engine import errors
from engine.catalog.partition import (
    PartitionSchema,
    RangeLike,
    RangePartitionExists,
)
from engine.catalog.coalesce import WriteCoalescer
from engine.catalog.leases import TabletLease
from engine.catalog.metadata import TableMetadata
from engine.catalog.table import Table
from engine.catalog.views import ViewMetadata, check_create, check_drop, check_rename
from engine.fs import DirectoryLock, fsync_dir, write_json_atomic
from engine.clock import Clock, HybridClock
from engine.config import TabletConfig
from engine.schema import ColumnSchema, Schema
from engine.tablet.tablet import Tablet

CATALOG_FILE = "catalog.json"
TABLETS_DIR = "tablets"
FORMAT_VERSION = 1

MAX_NUM_COLUMNS = 300  # Kudu --max_num_columns
MAX_IDENTIFIER_LENGTH = 256  # Kudu --max_identifier_length
MAX_NUM_REPLICAS = 7  # Kudu --max_num_replicas
DEFAULT_NUM_REPLICAS = 3  # Kudu --default_num_replicas
MAX_CREATE_TABLETS_PER_TS = 60  # Kudu --max_create_tablets_per_ts
_POOL_PREFIX = "kudusql-tablet"


class TableExists(errors.AlreadyPresent):
    sqlstate = "42P07"


class ColumnExists(errors.AlreadyPresent):
    sqlstate = "42701"


class NotSupported(errors.EngineError):
    """A valid request the engine cannot carry out yet (SQLSTATE feature_not_supported)."""

    sqlstate = "0A000"


def validate_replication_factor(rf: int | None, num_tablet_servers: int) -> int:
    """The replication factor a new table gets: `rf` checked (a positive odd integer, at
    most MAX_NUM_REPLICAS and the live tablet servers) or, when None, the default (3 with
    at least 3 servers, else 1). Shared by the embedded catalog and the master."""
    if rf is None:
        return DEFAULT_NUM_REPLICAS if num_tablet_servers >= DEFAULT_NUM_REPLICAS else 1
    if isinstance(rf, bool) or not isinstance(rf, int):
        raise errors.InvalidArgument(f"illegal replication factor {rf!r} (not an integer)")
    if rf <= 0:
        raise errors.InvalidArgument(
            f"illegal replication factor {rf} (replication factor must be positive)")
    if rf % 2 == 0:
        raise errors.InvalidArgument(
            f"illegal replication factor {rf} (replication factor must be odd)")
    if rf > MAX_NUM_REPLICAS:
        raise errors.InvalidArgument(
            f"illegal replication factor {rf} (max replication factor is "
            f"{MAX_NUM_REPLICAS})")
    if rf > num_tablet_servers:
        raise errors.InvalidArgument(
            f"replication factor {rf} exceeds the number of tablet servers "
            f"({num_tablet_servers}): not enough live tablet servers to create a "
            f"table with the requested replication factor {rf}")
    return rf


class _TabletSlot:
    """One tablet of the catalog: opened on first use, shared, reference counted (the
    embedded `TabletHandle` of leases.py)."""

    def __init__(self, catalog: "Catalog", tablet_id: str, tablet: Tablet | None = None):
        self.catalog = catalog
        self.tablet_id = tablet_id
        self.path = catalog.tablet_path(tablet_id)
        self._tablet = tablet
        self._open_lock = threading.Lock()
        self.refs = 0  # guarded by the catalog's _lock
        self.dropped = False
        self.renames: tuple | None = None  # (table Schema, {table name: tablet name})

    def tablet(self) -> Tablet:
        t = self._tablet
        if t is None:
            with self._open_lock:
                if self._tablet is None:
                    t = Tablet.open(self.path, config=self.catalog.config,
                                    clock=self.catalog.clock)
                    if self.catalog.maintenance is not None:
                        self.catalog.maintenance.register(t)
                    self._tablet = t
                t = self._tablet
        return t

    @property
    def is_open(self) -> bool:
        return self._tablet is not None

    @property
    def tablet_if_open(self) -> Tablet | None:
        """The tablet if it is open now, else None (never opens it)."""
        return self._tablet

    def close(self) -> None:
        with self._open_lock:
            t, self._tablet = self._tablet, None
        if t is not None:
            if self.catalog.maintenance is not None:
                self.catalog.maintenance.unregister(t)
            t.close()

    def column_renames(self, schema: Schema) -> dict[str, str] | None:
        """{table column name: tablet column name} where they differ (matched by id)."""
        cached = self.renames
        if cached is not None and cached[0] is schema:
            return cached[1]
        ts = self.tablet().schema
        m = {}
        for c in schema.columns:
            if not ts.has_column_id(c.id):
                raise errors.Corruption(
                    f"tablet {self.tablet_id} has no column with id {c.id} ({c.name})")
            tn = ts.column_by_id(c.id).name
            if tn != c.name:
                m[c.name] = tn
        out = m or None
        self.renames = (schema, out)
        return out


# how long a new tablet reference waits for an ALTER that drains the table (catalog._acquire)
DRAIN_YIELD_S = 1.0

class _StaleMetadata(Exception):
    """The table changed between reading its metadata and taking its tablets: retry."""


class _PendingAlter(Exception):
    """The table has an unfinished ADD / DROP COLUMN: finish it (`_complete_alter`), retry."""


def check_identifier(kind: str, name: str) -> None:
    """InvalidArgument unless `name` is a valid Kudu table / column name (Kudu's messages)."""
    if not isinstance(name, str) or not name:
        raise errors.InvalidArgument(f"invalid {kind} name: empty string not a valid identifier")
    if len(name.encode()) > MAX_IDENTIFIER_LENGTH:
        raise errors.InvalidArgument(
            f"invalid {kind} name: identifier '{name}' longer than maximum permitted length "
            f"{MAX_IDENTIFIER_LENGTH}")


def check_num_columns(n: int) -> None:
    """InvalidArgument when a schema has more columns than Kudu permits."""
    if n > MAX_NUM_COLUMNS:
        raise errors.InvalidArgument(
            f"number of columns {n} is greater than the permitted maximum {MAX_NUM_COLUMNS}")


class Catalog:
    """Tables of one data directory. Use `Catalog.open`; thread-safe."""

    def __init__(self, data_dir: str, config: TabletConfig, clock: Clock,
                 num_tablet_servers: int, maintenance, parallelism: int,
                 max_create_tablets_per_ts: int, busy_timeout_s: float):
        self.data_dir = data_dir
        self.config = config
        self.clock = clock
        self.num_tablet_servers = num_tablet_servers
        self.maintenance = maintenance
        self.parallelism = parallelism
        self.max_create_tablets_per_ts = max_create_tablets_per_ts
        self.busy_timeout_s = busy_timeout_s
        self._tables: dict[str, TableMetadata] = {}  # id -> metadata (replaced, never mutated)
        self._by_name: dict[str, str] = {}
        self._views: dict[str, ViewMetadata] = {}  # name -> view (replaced, never mutated)
        self._slots: dict[str, _TabletSlot] = {}
        self._coalescers: dict[str, WriteCoalescer] = {}  # table id -> its small writes
        self._lock = threading.RLock()  # maps, slots, references (held briefly)
        self._released = threading.Condition(self._lock)
        # tables an ADD / DROP COLUMN is waiting to see idle: a new reference waits a little
        # (DRAIN_YIELD_S) so that a hot writer or scanner cannot starve the DDL
        self._draining: set[str] = set()
        self._ddl_lock = threading.RLock()  # serialises DDL (held for the whole DDL)
        self._pool = ThreadPoolExecutor(max_workers=parallelism,
                                        thread_name_prefix=_POOL_PREFIX)
        self._closed = False
        self._dir_lock: DirectoryLock | None = None
        # bumped whenever the published tables or views change (every DDL): a cache of
        # name resolution (planner/plan_cache.py) that saw this version needs no recheck
        self.catalog_version = 0

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def open(cls, data_dir: str, *, config: TabletConfig | None = None,
             clock: Clock | None = None, num_tablet_servers: int = 1, maintenance=None,
             parallelism: int | None = None,
             max_create_tablets_per_ts: int = MAX_CREATE_TABLETS_PER_TS,
             busy_timeout_s: float = 10.0) -> "Catalog":
        """Open (or create) the catalog in `data_dir`; removes orphan tablet directories.

        `parallelism`: threads that scan / write tablets concurrently (default: the CPU
        count, 2..8).
        """
        if num_tablet_servers < 1:
            raise errors.InvalidArgument("a catalog needs at least one tablet server")
        os.makedirs(os.path.join(data_dir, TABLETS_DIR), exist_ok=True)
        # One owner per data directory, before anything in it is read or repaired
        # (engine.fs.DirectoryLock: 55006 naming the PID that holds it).
        lock = DirectoryLock.acquire(data_dir)
        try:
            par = parallelism or max(2, min(8, os.cpu_count() or 2))
            cat = cls(data_dir, config or TabletConfig(), clock or HybridClock(),
                      num_tablet_servers, maintenance, par, max_create_tablets_per_ts,
                      busy_timeout_s)
            cat._dir_lock = lock
            cat._load()
            cat._remove_orphans()
            cat._finish_pending_alters()
        except BaseException:
            if "cat" in locals():
                cat._pool.shutdown(wait=False)
            lock.release()
            raise
        return cat

    def close(self) -> None:
        """Close every open tablet (and delete dropped ones still referenced)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            slots = list(self._slots.values())
            self._slots.clear()
        self._pool.shutdown(wait=True)
        try:
            for s in slots:
                s.close()
                if s.dropped:
                    shutil.rmtree(s.path, ignore_errors=True)
        finally:
            if self._dir_lock is not None:      # the last step: the directory is let go
                self._dir_lock.release()

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def tablet_path(self, tablet_id: str) -> str:
        return os.path.join(self.data_dir, TABLETS_DIR, tablet_id)

    def _load(self) -> None:
        path = os.path.join(self.data_dir, CATALOG_FILE)
        try:
            with open(path) as f:
                d = json.load(f)
        except FileNotFoundError:
            return
        except ValueError as e:
            raise errors.Corruption(f"{path}: {e}") from e
        if d.get("format") != FORMAT_VERSION:
            raise errors.Corruption(f"{path}: unknown catalog format {d.get('format')!r}")
        for td in d["tables"]:
            meta = TableMetadata.from_dict(td)
            self._tables[meta.id] = meta
            self._by_name[meta.name] = meta.id
        self._views = {v.name: v for v in map(ViewMetadata.from_dict, d.get("views", ()))}
        self.catalog_version += 1

    def _remove_orphans(self) -> None:
        """Delete tablet directories no table names (a crash in the middle of a DDL)."""
        named = {tid for m in self._tables.values() for tid in m.tablet_ids}
        tdir = os.path.join(self.data_dir, TABLETS_DIR)
        for name in os.listdir(tdir):
            if name not in named:
                shutil.rmtree(os.path.join(tdir, name), ignore_errors=True)
        tmp = os.path.join(self.data_dir, CATALOG_FILE + ".tmp")
        if os.path.exists(tmp):
            os.unlink(tmp)

    def _finish_pending_alters(self) -> None:
        """Roll forward the ADD / DROP COLUMNs a crash interrupted (see the module doc).
        One that fails again stays pending: the table's next use retries it and reports
        the error (other tables stay usable)."""
        with self._ddl_lock:
            for meta in list(self._tables.values()):
                if meta.pending_schema is not None:
                    try:
                        self._finish_alter(meta)
                    except errors.EngineError:
                        pass

    def _persist(self, tables: dict[str, TableMetadata],
                 views: dict[str, ViewMetadata] | None = None) -> None:
        views = self._views if views is None else views
        doc = {"format": FORMAT_VERSION,
               "tables": [m.to_dict() for m in sorted(tables.values(), key=lambda m: m.name)],
               "views": [views[n].to_dict() for n in sorted(views)]}
        write_json_atomic(os.path.join(self.data_dir, CATALOG_FILE), doc, self.config.fsync,
                          indent=1)

    def _publish(self, tables: dict[str, TableMetadata],
                 views: dict[str, ViewMetadata] | None = None) -> None:
        """Make a persisted catalog state current (caller holds _ddl_lock)."""
        with self._lock:
            self._tables = tables
            self._by_name = {m.name: m.id for m in tables.values()}
            if views is not None:
                self._views = views
            self.catalog_version += 1

    # -- lookups ---------------------------------------------------------------------------
    def list_tables(self) -> list[str]:
        with self._lock:
            return sorted(self._by_name)

    def has_table(self, name: str) -> bool:
        with self._lock:
            return name in self._by_name

    def get_table(self, name: str) -> TableMetadata:
        with self._lock:
            tid = self._by_name.get(name)
            if tid is None:
                raise errors.NotFound(f'table "{name}" does not exist')
            return self._tables[tid]

    def table(self, name: str) -> Table:
        """The Table facade (reads, writes) of a table; it follows later DDL by table id."""
        return Table(self, self.get_table(name).id)

    def tablet(self, tablet_id: str) -> Tablet:
        """The open Tablet object of a tablet (tools and tests; no reference is taken)."""
        with self._lock:
            slot = self._slots.get(tablet_id)
            if slot is None:
                if not any(tablet_id in m.tablet_ids for m in self._tables.values()):
                    raise errors.NotFound(f"no tablet {tablet_id}")
                slot = self._slots[tablet_id] = _TabletSlot(self, tablet_id)
        return slot.tablet()

    def open_tablet(self, tablet_id: str) -> Tablet | None:
        """The tablet if this catalog has it open now, else None: status pages and
        SHOW TABLET STATS read an open tablet's in-memory state and never open one."""
        slot = self._slots.get(tablet_id)
        return slot.tablet_if_open if slot is not None else None

    # -- the TableCatalog contract (engine/catalog/leases.py), used by Table -------------
    @property
    def executor(self) -> ThreadPoolExecutor:
        return self._pool

    def write_coalescer(self, table_id: str) -> WriteCoalescer:
        c = self._coalescers.get(table_id)
        if c is None:
            with self._lock:
                c = self._coalescers.setdefault(table_id, WriteCoalescer())
        return c

    def table_metadata(self, table_id: str) -> TableMetadata:
        with self._lock:
            meta = self._tables.get(table_id)
        if meta is None:
            raise errors.NotFound(f"table with id {table_id} does not exist (it was dropped)")
        return meta

    def lease_tablets(self, table_id: str,
                      pick: Callable[[TableMetadata], Sequence[str]]) -> TabletLease:
        """Reference the tablets `pick(metadata)` names, retried if a DDL intervenes."""
        for _ in range(100):
            meta = self.table_metadata(table_id)
            tids = pick(meta)
            try:
                return TabletLease(meta, self._acquire(meta, tids), self._release)
            except _StaleMetadata:
                continue
            except _PendingAlter:  # an ADD / DROP COLUMN is under way: wait for it
                self._complete_alter(table_id)
                continue
        raise errors.ServiceUnavailable(f'table "{meta.name}" keeps changing; retry')

    def tablets_ready(self, table_id: str) -> bool:
        meta = self.table_metadata(table_id)
        if meta.pending_schema is not None:
            return False
        slots = self._slots
        for tid in meta.tablet_ids:
            slot = slots.get(tid)
            if slot is None or not slot.is_open:
                return False
        return True

    def pin_tablet(self, meta: TableMetadata, tablet_id: str) -> _TabletSlot | None:
        """A reference on one open tablet of `meta`, for a read that must not wait (an
        event loop's point lookup, `Table.lookup_now`) or a write routed to one tablet
        (`Table._hold`): its handle, or None (nothing
        taken) when `meta` is no longer the table's current version, an ADD / DROP COLUMN
        is pending or waits for the table to drain, the catalog is closed, or the tablet
        is not open. Give it back with `unpin_tablet`. While held it protects the tablet
        as a lease does (not closed, not deleted, no ALTER starts); it only skips the
        lease's retry loop, its waits and its lease object."""
        with self._lock:
            if self._closed or self._tables.get(meta.id) is not meta or \
                    meta.pending_schema is not None or meta.id in self._draining:
                return None
            slot = self._slots.get(tablet_id)
            if slot is None or not slot.is_open:
                return None
            slot.refs += 1
            return slot

    def unpin_tablet(self, slot: _TabletSlot) -> None:
        """Give back a `pin_tablet` reference."""
        with self._lock:
            # nobody waits on _released unless an ALTER drains a table (_draining), and a
            # dropped tablet is finalised by the general release
            if not slot.dropped and not self._draining:
                slot.refs -= 1
                return
        self._release((slot,))

    def _acquire(self, meta: TableMetadata, tablet_ids: Iterable[str]) -> list[_TabletSlot]:
        """Reference the tablets of `meta`; raises _StaleMetadata if the table changed."""
        with self._lock:
            if self._closed:
                raise errors.ServiceUnavailable("the catalog is closed")
            if self._tables.get(meta.id) is not meta:
                if meta.id not in self._tables:
                    raise errors.NotFound(f'table "{meta.name}" does not exist (dropped)')
                raise _StaleMetadata()
            if meta.pending_schema is not None:
                raise _PendingAlter()
            if meta.id in self._draining:
                # an ALTER waits for this table to be idle: give it the window (bounded, so
                # an operation that already holds a lease on the table and takes another
                # cannot deadlock with the ALTER)
                until = time.monotonic() + DRAIN_YIELD_S
                while meta.id in self._draining and time.monotonic() < until:
                    self._released.wait(until - time.monotonic())
                if self._tables.get(meta.id) is not meta:
                    raise _StaleMetadata()
            out = []
            for tid in tablet_ids:
                slot = self._slots.get(tid)
                if slot is None:
                    slot = self._slots[tid] = _TabletSlot(self, tid)
                slot.refs += 1
                out.append(slot)
            return out

    def _release(self, slots: Sequence[_TabletSlot]) -> None:
        finalize = []
        with self._lock:
            for s in slots:
                s.refs -= 1
                if s.refs == 0 and s.dropped:
                    if self._slots.get(s.tablet_id) is s:
                        del self._slots[s.tablet_id]
                    finalize.append(s)
            self._released.notify_all()
        for s in finalize:
            self._delete_tablet(s)

    def _delete_tablet(self, slot: _TabletSlot) -> None:
        slot.close()
        shutil.rmtree(slot.path, ignore_errors=True)

    def _drop_tablets(self, tablet_ids: Iterable[str]) -> None:
        """Delete tablets the published catalog no longer names (deferred while in use)."""
        now = []
        with self._lock:
            for tid in tablet_ids:
                slot = self._slots.get(tid)
                if slot is None:
                    slot = _TabletSlot(self, tid)
                slot.dropped = True
                if slot.refs == 0:
                    self._slots.pop(tid, None)
                    now.append(slot)
        for s in now:
            self._delete_tablet(s)

    def _create_tablets(self, schema: Schema, n: int, schema_version: int = 0
                        ) -> list[tuple[str, Tablet]]:
        created: list[tuple[str, Tablet]] = []
        try:
            for _ in range(n):
                tid = uuid.uuid4().hex
                created.append((tid, Tablet.create(self.tablet_path(tid), schema,
                                                   config=self.config, clock=self.clock,
                                                   schema_version=schema_version)))
            if self.config.fsync:
                fsync_dir(os.path.join(self.data_dir, TABLETS_DIR))
        except BaseException:
            self._discard_created(created)
            raise
        return created

    def _discard_created(self, created: Sequence[tuple[str, Tablet]]) -> None:
        for tid, t in created:
            try:
                t.close()
            finally:
                shutil.rmtree(self.tablet_path(tid), ignore_errors=True)

    def _adopt(self, created: Sequence[tuple[str, Tablet]]) -> None:
        """Keep freshly created (open) tablets as slots."""
        with self._lock:
            for tid, t in created:
                self._slots[tid] = _TabletSlot(self, tid, t)
                if self.maintenance is not None:
                    self.maintenance.register(t)

    def _commit(self, tables: dict[str, TableMetadata],
                created: Sequence[tuple[str, Tablet]] = (),
                views: dict[str, ViewMetadata] | None = None) -> None:
        """Persist, then publish; on a failed write remove the tablets created for it."""
        try:
            self._persist(tables, views)
        except BaseException:
            self._discard_created(created)
            raise
        self._adopt(created)
        self._publish(tables, views)

    # -- views (engine/catalog/views.py) ----------------------------------------------------
    def views(self) -> dict[str, ViewMetadata]:
        """Every view by name (a snapshot: DDL publishes a new dict)."""
        with self._lock:
            return self._views

    def create_view(self, view: ViewMetadata, replace: bool = False) -> ViewMetadata:
        """CREATE [OR REPLACE] VIEW: 42P07 if the name is a table's (or a view's, without
        `replace`), 42P01 if a relation it reads is gone meanwhile."""
        check_identifier("view", view.name)
        with self._ddl_lock:
            check_create(self._views, self._by_name.__contains__, view, replace)
            old = self._views.get(view.name)
            view = dataclasses.replace(view, id=old.id if old else uuid.uuid4().hex)
            self._commit(self._tables, views={**self._views, view.name: view})
            return view

    def drop_views(self, names: Sequence[str], if_exists: bool = False,
                   cascade: bool = False) -> list[str]:
        """DROP VIEW a, b [CASCADE]: every name checked first; the views dropped along
        (CASCADE) are returned. 2BP01 while another view reads one of them."""
        with self._ddl_lock:
            names = [n for n in names if n in self._views or not if_exists]
            for n in names:
                if n not in self._views:
                    raise errors.NotFound(f'view "{n}" does not exist')
            along = check_drop(self._views, "view", list(names), cascade)
            gone = set(names) | set(along)
            self._commit(self._tables, views={k: v for k, v in self._views.items()
                                              if k not in gone})
            return along

    # -- validation ------------------------------------------------------------------------
    def _table_meta(self, name: str, finish_alter: bool = True) -> TableMetadata:
        """A table's metadata for a DDL (caller holds _ddl_lock); an unfinished ADD / DROP
        COLUMN of it is finished first, so DDLs apply in order."""
        tid = self._by_name.get(name)
        if tid is None:
            raise errors.NotFound(f'table "{name}" does not exist')
        meta = self._tables[tid]
        if finish_alter and meta.pending_schema is not None:
            meta = self._finish_alter(meta)
        return meta

    # -- DDL -------------------------------------------------------------------------------
    def create_table(self, name: str, schema: Schema,
                     partition_schema: PartitionSchema | None = None, *,
                     replication_factor: int | None = None, comment: str | None = None,
                     properties: dict | None = None,
                     if_not_exists: bool = False) -> TableMetadata:
        """CREATE TABLE: one tablet per partition (no partitioning: one tablet)."""
        check_identifier("table", name)
        for c in schema.columns:
            check_identifier("column", c.name)
        check_num_columns(len(schema.columns))
        rf = validate_replication_factor(replication_factor, self.num_tablet_servers)
        ps = partition_schema if partition_schema is not None else PartitionSchema.create(schema)
        if tuple(ps.key_columns) != tuple(schema.key_columns):
            raise errors.InvalidArgument(
                "the partition schema was built for a different primary key than the table's")
        n = len(ps.partitions)
        limit = self.max_create_tablets_per_ts * self.num_tablet_servers
        if n > limit:
            raise errors.InvalidArgument(
                f"The requested number of tablets is over the maximum permitted at creation "
                f"time ({limit}). Additional tablets may be added by adding range partitions "
                f"to the table post-creation.")
        with self._ddl_lock:
            if name in self._by_name:
                if if_not_exists:
                    return self._table_meta(name)
                raise TableExists(f'table "{name}" already exists')
            if name in self._views:
                raise TableExists(f'relation "{name}" already exists')
            created = self._create_tablets(schema, n)
            meta = TableMetadata(uuid.uuid4().hex, name, schema, ps, rf,
                                 tuple(tid for tid, _ in created), comment,
                                 dict(properties or {}))
            self._commit({**self._tables, meta.id: meta}, created)
            return meta

    def drop_table(self, name: str, if_exists: bool = False, cascade: bool = False
                   ) -> list[str]:
        """DROP TABLE: the catalog forgets it, then its tablets are deleted. 2BP01 while a
        view reads it; with `cascade` those views go in the same catalog change (returned).
        """
        with self._ddl_lock:
            if name not in self._by_name:
                if if_exists:
                    return []
                raise errors.NotFound(f'table "{name}" does not exist')
            along = check_drop(self._views, "table", [name], cascade)
            meta = self._table_meta(name, finish_alter=False)
            tables = {k: v for k, v in self._tables.items() if k != meta.id}
            self._commit(tables, views={k: v for k, v in self._views.items()
                                        if k not in along} if along else None)
            with self._lock:
                self._coalescers.pop(meta.id, None)
            self._drop_tablets(meta.tablet_ids)
            return along

    def rename_table(self, name: str, new_name: str,
                     views: Sequence[ViewMetadata] = ()) -> TableMetadata:
        """ALTER TABLE RENAME TO; `views`: the views that read the table, rewritten to
        read `new_name` (engine/catalog/views.py `check_rename`), replaced in the same
        commit."""
        check_identifier("table", new_name)
        with self._ddl_lock:
            meta = self._table_meta(name)
            if new_name in self._by_name:
                raise TableExists(f'table "{new_name}" already exists')
            if new_name in self._views:
                raise TableExists(f'relation "{new_name}" already exists')
            after = check_rename(self._views, name, new_name, views)
            new = dataclasses.replace(meta, name=new_name)
            self._commit({**self._tables, meta.id: new}, views=after)
            return new

    def set_properties(self, name: str, properties: dict | None = None,
                       comment: Any = ..., unset: Iterable[str] = ()) -> TableMetadata:
        """ALTER TABLE SET/UNSET TBLPROPERTIES, COMMENT (comment=None clears it)."""
        with self._ddl_lock:
            meta = self._table_meta(name)
            props = {**meta.properties, **(properties or {})}
            for k in unset:
                props.pop(k, None)
            new = dataclasses.replace(meta, properties=props,
                                      comment=meta.comment if comment is ... else comment)
            self._commit({**self._tables, meta.id: new})
            return new

    def _repartition(self, meta: TableMetadata, ps: PartitionSchema) -> TableMetadata:
        """Publish `ps`: create tablets for new partitions, drop those of removed ones."""
        old = {p.identity: tid for p, tid in meta.tablets()}
        fresh = [p for p in ps.partitions if p.identity not in old]
        created = self._create_tablets(meta.schema, len(fresh), meta.schema_version)
        new_ids = dict(zip((p.identity for p in fresh), (tid for tid, _ in created)))
        ids = tuple(old.get(p.identity) or new_ids[p.identity] for p in ps.partitions)
        new = dataclasses.replace(meta, partition_schema=ps, tablet_ids=ids)
        self._commit({**self._tables, meta.id: new}, created)
        self._drop_tablets(set(meta.tablet_ids) - set(ids))
        return new

    def add_range_partition(self, name: str, spec: RangeLike,
                            if_not_exists: bool = False) -> TableMetadata:
        """ALTER TABLE ADD [IF NOT EXISTS] RANGE PARTITION (one new tablet per hash bucket)."""
        with self._ddl_lock:
            meta = self._table_meta(name)
            try:
                ps = meta.partition_schema.add_range_partition(spec)
            except RangePartitionExists:
                if if_not_exists:
                    return meta
                raise
            return self._repartition(meta, ps)

    def drop_range_partition(self, name: str, spec: RangeLike,
                             if_exists: bool = False) -> TableMetadata:
        """ALTER TABLE DROP [IF EXISTS] RANGE PARTITION: deletes that range's rows."""
        with self._ddl_lock:
            meta = self._table_meta(name)
            if if_exists and not meta.partition_schema.has_range_partition(spec):
                return meta
            return self._repartition(meta, meta.partition_schema.drop_range_partition(spec))

    def add_column(self, name: str, column: ColumnSchema,
                   if_not_exists: bool = False) -> TableMetadata:
        """ALTER TABLE ADD COLUMN: every tablet altered in place (see the module docstring)."""
        check_identifier("column", column.name)
        with self._ddl_lock:
            meta = self._table_meta(name)
            if meta.schema.has_column(column.name):
                if if_not_exists:
                    return meta
                raise ColumnExists(f'column "{column.name}" of relation "{name}" already exists')
            check_num_columns(len(meta.schema.columns) + 1)
            return self._alter_columns(meta, meta.schema.add_column(column), "ADD COLUMN")

    def drop_column(self, name: str, column: str, if_exists: bool = False) -> TableMetadata:
        """ALTER TABLE DROP COLUMN: every tablet altered in place; the data goes with the next
        compactions (see the module docstring)."""
        with self._ddl_lock:
            meta = self._table_meta(name)
            if not meta.schema.has_column(column):
                if if_exists:
                    return meta
                raise errors.ColumnNotFound(
                    f'column "{column}" of relation "{name}" does not exist')
            return self._alter_columns(meta, meta.schema.drop_column(column), "DROP COLUMN")

    def rename_column(self, name: str, old: str, new: str) -> TableMetadata:
        """ALTER TABLE CHANGE old new: metadata only, works on tables with data."""
        check_identifier("column", new)
        with self._ddl_lock:
            meta = self._table_meta(name)
            if meta.schema.has_column(new):
                raise ColumnExists(f'column "{new}" of relation "{name}" already exists')
            schema = meta.schema.rename_column(old, new)
            new_meta = dataclasses.replace(
                meta, schema=schema,
                partition_schema=meta.partition_schema.renamed(old, new, schema))
            self._commit({**self._tables, meta.id: new_meta})
            return new_meta

    def _alter_columns(self, meta: TableMetadata, schema: Schema, what: str
                       ) -> TableMetadata:
        """ADD / DROP COLUMN: record the target schema as pending, alter the tablets in
        place, then publish it (caller holds _ddl_lock; see the module docstring)."""
        target = dataclasses.replace(meta, pending_schema=schema)
        deadline = time.monotonic() + self.busy_timeout_s
        with self._released:
            # Wait for the table's running scans and writes; new ones see the pending
            # alter from the moment it is published (same critical section) and wait for
            # this DDL (they take _ddl_lock in _complete_alter). Meanwhile new references
            # hold back (_draining): a writer in a tight loop starved this wait (found when
            # the small-write path made single-row writes fast).
            self._draining.add(meta.id)
            try:
                while True:
                    busy = [s for s in (self._slots.get(t) for t in meta.tablet_ids)
                            if s is not None and s.refs]
                    left = deadline - time.monotonic()
                    if not busy or left <= 0:
                        break
                    self._released.wait(left)
            finally:
                self._draining.discard(meta.id)
                self._released.notify_all()
            if busy:
                raise errors.ServiceUnavailable(
                    f'ALTER TABLE {what}: table "{meta.name}" is busy (open scans or '
                    f'writes did not finish within {self.busy_timeout_s} s); retry')
            self._tables = {**self._tables, meta.id: target}
            self.catalog_version += 1
        try:
            self._persist(self._tables)
        except BaseException:
            with self._lock:
                self._tables = {**self._tables, meta.id: meta}
                self.catalog_version += 1
            raise
        return self._finish_alter(target)

    def _finish_alter(self, meta: TableMetadata) -> TableMetadata:
        """Bring every tablet to `meta.pending_schema` (idempotent: a tablet already at the
        target version does nothing), then persist and publish the table with it. Caller
        holds _ddl_lock; on failure the alter stays pending and is retried later."""
        schema, version = meta.pending_schema, meta.schema_version + 1
        with self._lock:
            slots = []
            for tid in meta.tablet_ids:
                slot = self._slots.get(tid)
                if slot is None:
                    slot = self._slots[tid] = _TabletSlot(self, tid)
                slots.append(slot)

        def alter(slot: _TabletSlot) -> None:
            slot.tablet().alter_schema(schema, version)
            slot.renames = None  # tablet names now equal the table's

        in_pool = threading.current_thread().name.startswith(_POOL_PREFIX)
        if len(slots) > 1 and not in_pool:  # a pool task must not wait for the pool
            list(self._pool.map(alter, slots))
        else:
            for slot in slots:
                alter(slot)
        new = dataclasses.replace(meta, schema=schema, schema_version=version,
                                  pending_schema=None)
        self._commit({**self._tables, meta.id: new})
        return new

    def _complete_alter(self, table_id: str) -> None:
        """A table op found the table's alter pending: wait for the DDL running it, or, if
        none is (it failed, or a crash interrupted it), finish it here."""
        with self._ddl_lock:
            meta = self._tables.get(table_id)
            if meta is not None and meta.pending_schema is not None:
                self._finish_alter(meta)
