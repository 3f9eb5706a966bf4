"""Tunables of the engine in one place (Kudu's gflags, as a frozen dataclass)."""

from __future__ import annotations

import dataclasses

MiB = 1 << 20


@dataclasses.dataclass(frozen=True)
class TabletConfig:
    # Rows per page. Pages of all columns of a DiskRowSet cover the same row ranges, so a
    # page index is also a block index for lazy materialization (Kudu sizes pages in bytes;
    # aligned row counts make "skip the other columns for this block" exact).
    page_rows: int = 65536
    # A flush or compaction rolls to a new DiskRowSet after this many encoded bytes
    # (Kudu: --budgeted_compaction_target_rowset_size = 32 MiB).
    drs_target_bytes: int = 32 * MiB
    # MemRowSet size that callers (the benchmark; later the maintenance manager) flush at.
    mrs_flush_bytes: int = 256 * MiB
    # DeltaMemStore size at which a flush to a REDO DeltaFile is worthwhile.
    dms_flush_bytes: int = 16 * MiB
    # Bloom filter false-positive rate (Kudu: --tablet_bloom_target_fp_rate = 0.0001; a
    # blocked filter at 1% costs ~10 bits a key and is probed only after the rowset tree).
    bloom_fp_rate: float = 0.01
    # Decoded pages kept for point lookups and key-index probes.
    block_cache_bytes: int = 256 * MiB
    # fsync files written by flushes (tests may turn it off for speed).
    fsync: bool = True
    # WAL durability: "commit" = fsync before acknowledging (group commit), "never" = OS
    # page cache only (bulk loads).
    wal_sync: str = "commit"
    wal_segment_bytes: int = 8 * MiB  # Kudu: --log_segment_size_mb = 8
