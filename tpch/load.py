"""Loading TPC-H parquet into kudusql: CREATE TABLE, then batched inserts, per table.

    load(target, parquet_dir, progress)      target: a kudusql connection or a Catalog
      for table in TABLES (dimensions first, lineitem last):
        CREATE TABLE   conn.cursor().execute(stmt)            (a connection: the SQL path)
                       create_table_spec(stmt) + catalog       (a Catalog: no SQL layer needed)
        for each parquet record batch of `batch_rows` rows:
          catalog.table(name).insert(batch)  -> every row applied, else LoadError
          flush the largest MemRowSets while the table's together pass
            config.mrs_flush_bytes (only when no maintenance manager looks after them)
        flush every tablet's MemRowSet (unless flush=False)

Rows go straight to the engine's Table facade, which routes each one to its hash
partition; inserting through SQL `INSERT` would only add parsing. tpchgen's
decimal128(15, 2), date32 and int32/int64 columns are already the columns' Arrow types;
string_view is cast to string here (`insertable`: the partitioned write path cannot `take`
string_view rows). Tables must not exist yet (CREATE TABLE fails with TableExists
otherwise): load into a fresh data directory.

The final flush leaves the data in DiskRowSets, the state a bulk-loaded Kudu table reaches
after its MemRowSets are flushed, so that query timings do not depend on when maintenance
happens to run. Pass `flush=False` to keep rows in MemRowSets.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from engine.catalog import Catalog
from tpch.data import parquet_files
from tpch.schema import TABLES, create_statement

Progress = Callable[[str, int, int], None]  # (table, rows_done, rows_total)
DEFAULT_BATCH_ROWS = 200_000


class LoadError(RuntimeError):
    """Some rows of a TPC-H table were not applied."""


def _catalog_of(target) -> Catalog:
    if isinstance(target, Catalog):
        return target
    db = getattr(target, "database", None)
    cat = getattr(db, "catalog", None)
    if cat is None:
        raise TypeError(f"expected a kudusql connection or an engine Catalog, got {target!r}")
    return cat


def create_tables(target, tables=TABLES) -> None:
    """CREATE the TPC-H tables: through SQL on a connection, through the catalog on a
    Catalog (with the planner's CREATE TABLE mapping, the same the SQL layer uses)."""
    if isinstance(target, Catalog):
        from planner.ddl import create_table_spec

        for t in tables:
            spec = create_table_spec(create_statement(t))
            target.create_table(spec.name, spec.schema, spec.partition_schema,
                                replication_factor=spec.replication_factor)
        return
    cur = target.cursor()
    try:
        for t in tables:
            cur.execute(create_statement(t))
    finally:
        close = getattr(cur, "close", None)
        if close:
            close()


def _tablets(catalog: Catalog, table: str) -> list:
    return [catalog.tablet(tid) for tid in catalog.get_table(table).tablet_ids]


def _flush_big_mrs(catalog: Catalog, table: str) -> None:
    """Bound the memory of a bulk load on tablets no maintenance manager looks after:
    while their MemRowSets together hold config.mrs_flush_bytes or more, flush the largest
    (the engine benchmark flushes one tablet at that size; a table's load spreads over
    all its tablets, so the bound here is on their sum)."""
    limit = catalog.config.mrs_flush_bytes
    tablets = [t for t in _tablets(catalog, table) if t.maintenance is None]
    while tablets and sum(t.mrs_bytes() for t in tablets) >= limit:
        biggest = max(tablets, key=lambda t: t.mrs_bytes())
        biggest.flush_mrs()
        tablets.remove(biggest)


def flush_table(catalog: Catalog, table: str) -> None:
    """Flush every tablet's MemRowSet of `table` to DiskRowSets."""
    for t in _tablets(catalog, table):
        if t.mrs_rows():
            t.flush_mrs()


def insertable(batch: pa.RecordBatch) -> pa.RecordBatch:
    """string_view / large_string columns -> string (the engine's STRING Arrow type).

    The engine converts string_view itself on a single tablet, but a partitioned table's
    write path splits the batch per tablet with `take` first, and pyarrow (26) has no
    `take` kernel for string_view; converting here also spares that per-tablet work.
    """
    if not any(pa.types.is_string_view(t) or pa.types.is_large_string(t)
               for t in batch.schema.types):
        return batch
    fields, arrays = [], []
    for f, a in zip(batch.schema, batch.columns):
        if pa.types.is_string_view(f.type) or pa.types.is_large_string(f.type):
            a = a.cast(pa.string())
            f = f.with_type(pa.string())
        fields.append(f)
        arrays.append(a)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def insert_parquet(catalog: Catalog, table: str, files: list[str],
                   batch_rows: int = DEFAULT_BATCH_ROWS, progress: Progress | None = None
                   ) -> int:
    """Insert the rows of parquet `files` into `table`; the number of rows inserted."""
    total = sum(pq.read_metadata(f).num_rows for f in files)
    tbl = catalog.table(table)
    done = 0
    if progress:
        progress(table, 0, total)
    for path in files:
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=batch_rows):
            r = tbl.insert(insertable(batch))
            if r.row_errors or r.num_applied != batch.num_rows:
                shown = "; ".join(f"row {done + e.index}: {e.code} {e.message}"
                                  for e in r.row_errors[:5])
                raise LoadError(f"{table}: {batch.num_rows - r.num_applied} of "
                                f"{batch.num_rows} rows not applied ({len(r.row_errors)} "
                                f"row errors) from {path}: {shown}")
            done += batch.num_rows
            _flush_big_mrs(catalog, table)
            if progress:
                progress(table, done, total)
    return done


def load(target, parquet_dir: str, progress: Progress | None = None,
         batch_rows: int = DEFAULT_BATCH_ROWS, flush: bool = True,
         tables=TABLES) -> dict[str, int]:
    """Create the TPC-H tables in `target` (a kudusql connection or an engine Catalog)
    and load them from the parquet in `parquet_dir`; table -> rows loaded.

    `progress(table, rows_done, rows_total)` is called before the first and after every
    batch of a table.
    """
    catalog = _catalog_of(target)
    files = parquet_files(parquet_dir)
    create_tables(target, tables)
    rows = {}
    for t in tables:
        rows[t] = insert_parquet(catalog, t, files[t], batch_rows, progress)
        if flush:
            flush_table(catalog, t)
    return rows


def parquet_row_counts(parquet_dir: str) -> dict[str, int]:
    """table -> rows in its parquet files (from the footers, no data read)."""
    return {t: sum(pq.read_metadata(f).num_rows for f in fs)
            for t, fs in parquet_files(parquet_dir).items()}

