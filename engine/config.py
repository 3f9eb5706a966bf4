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
    # Commit delay (PostgreSQL's commit_delay / commit_siblings; engine/consensus/log.py):
    # a writer about to lead a WAL fsync first waits this many microseconds when at least
    # `wal_commit_siblings` other writers are waiting for an fsync in the process, so
    # more records share the fsync. 0 = off. A lone writer never waits. Off by default,
    # like PostgreSQL's, and siblings 5, its default: measured with four tablet logs on a
    # 2-core machine, 100-500 us raised the updates per fsync at 8-16 writers by 25-60%
    # but neither the CPU per update nor the rate (docs/wire.md, "tenth pass").
    wal_commit_delay_us: int = 0
    wal_commit_siblings: int = 5
    # Tablet history max age: reads older than now - this are refused and the history
    # behind them is garbage collected (the history GC design doc's default, 15 minutes).
    # With a LogicalClock the unit is timestamps, not seconds.
    history_max_age_s: float = 900.0
    # Maintenance triggers (Kudu: --flush_threshold_secs, minor/major compaction flags).
    mrs_flush_age_s: float = 120.0
    dms_flush_age_s: float = 120.0
    minor_compact_min_files: int = 4
    major_compact_min_ratio: float = 0.1
    compaction_budget_bytes: int = 256 * MiB
    # In-memory stores (MemRowSets + DeltaMemStores) may not exceed this; past
    # memory_soft_fraction of it writes are slowed while flushes run.
    memory_limit_bytes: int = 2048 * MiB
    memory_soft_fraction: float = 0.8
