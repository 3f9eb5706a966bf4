"""A tablet: Kudu's unit of storage (MemRowSet, DiskRowSets, delta stores, MVCC).

Files, top down: tablet.py (the Tablet: read path, ALTER), tablet_write.py (its write
path: write, apply, the small-write entry points), row_ops.py (an op's rows applied to the
rowsets), small_write.py (the same for a few rows of plain values), tablet_bootstrap.py
(WAL replay), tablet_metadata.py (tablet-meta.json, the rowsets readers capture),
tablet_mm_ops.py (flushes, compactions,
history GC) and maintenance_manager.py (which op runs next); then the stores: memrowset.py,
diskrowset.py with delta_compaction.py, deltamemstore.py, deltafile.py, delta.py,
compaction.py, compaction_policy.py, rowset_tree.py; mvcc.py, scan_spec.py, write_op.py.
"""

from engine.config import TabletConfig
from engine.tablet.diskrowset import ScanStats
from engine.tablet.scan_spec import ColumnPredicate
from engine.tablet.tablet import Tablet
from engine.tablet.write_op import OpType, RowError, WriteOp, WriteResult

__all__ = ["Tablet", "TabletConfig", "ColumnPredicate", "OpType", "RowError", "WriteOp",
           "WriteResult", "ScanStats"]
