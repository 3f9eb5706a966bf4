"""A tablet: Kudu's unit of storage (MemRowSet, DiskRowSets, delta stores, MVCC)."""

from engine.config import TabletConfig
from engine.tablet.diskrowset import ScanStats
from engine.tablet.scan_spec import ColumnPredicate
from engine.tablet.tablet import Tablet
from engine.tablet.write_op import OpType, RowError, WriteResult

__all__ = ["Tablet", "TabletConfig", "ColumnPredicate", "OpType", "RowError", "WriteResult",
           "ScanStats"]
