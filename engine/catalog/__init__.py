"""Catalog and partitioning: Kudu's master catalog (tables -> tablets) on one node.

`partition.py` maps primary keys to partitions (hash levels then ranges), `metadata.py`
is one table's immutable entry (schema, version, partition -> tablet directory),
`catalog.py` persists tables and owns their tablets, `table.py` routes a table's reads and
writes, `table_scanner.py` is a scan's iterator over its tablets at one snapshot
(`TableScan`). Table uses the catalog only through the public contract of `leases.py`
(`TableCatalog`: table metadata, tablet leases, the write coalescer, the thread pool),
which a remote catalog client can implement too. Imports point one way:
catalog -> table -> (table_scanner, leases -> metadata -> partition).
"""

from engine.catalog.catalog import Catalog, ColumnExists, NotSupported, TableExists
from engine.catalog.leases import TableCatalog, TabletHandle, TabletLease
from engine.catalog.metadata import TableMetadata
from engine.catalog.partition import (
    HashBucketSchema,
    Partition,
    PartitionSchema,
    RangePartition,
    RangePartitionExists,
    RangeSchema,
    RangeSpec,
)
from engine.catalog.table import NO_PARTITION, PartitionRowError, Table, TableWriteResult
from engine.catalog.table_scanner import TableScan, TableScanStats

__all__ = ["Catalog", "ColumnExists", "NotSupported", "TableExists", "TableMetadata",
           "TableCatalog", "TabletHandle", "TabletLease",
           "HashBucketSchema", "Partition", "PartitionSchema", "RangePartition",
           "RangePartitionExists", "RangeSchema", "RangeSpec", "NO_PARTITION",
           "PartitionRowError", "Table", "TableScan", "TableScanStats", "TableWriteResult"]
