"""kudusql's storage engine: Kudu's tablet (MemRowSet, DiskRowSets, delta stores, MVCC).

The engine is the bottom layer: it never imports planner, wire, shell or sqlglot.
"""
