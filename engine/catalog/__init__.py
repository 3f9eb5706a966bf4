"""Catalog and partitioning: Kudu's master catalog (tables -> tablets) on one node.

`partition.py` maps primary keys to partitions (hash levels then ranges), `catalog.py`
persists tables and owns their tablets, `table.py` routes a table's reads and writes.
"""

from engine.catalog.catalog import (
    Catalog,
    ColumnExists,
    NotSupported,
    TableExists,
    TableMetadata,
)
from engine.catalog.partition import (
    HashBucketSchema,
    Partition,
    PartitionSchema,
    RangePartition,
    RangePartitionExists,
    RangeSchema,
    RangeSpec,
)
from engine.catalog.table import (
    NO_PARTITION,
    PartitionRowError,
    Table,
    TableScan,
    TableScanStats,
    TableWriteResult,
)

__all__ = ["Catalog", "ColumnExists", "NotSupported", "TableExists", "TableMetadata",
           "HashBucketSchema", "Partition", "PartitionSchema", "RangePartition",
           "RangePartitionExists", "RangeSchema", "RangeSpec", "NO_PARTITION",
           "PartitionRowError", "Table", "TableScan", "TableScanStats", "TableWriteResult"]
