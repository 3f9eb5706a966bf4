"""Runtime join filters: sideways information passing inside an inner MultiJoin, as Impala
pushes a hash join's build side into its Kudu scans.

A MultiJoin runs its inputs smallest first (`estimate_rows`: the table's row count, halved
per filtered scan); before an input runs, every equality `x = y` of the join whose `x` is
one of that input's columns and whose `y` reads one input already run becomes a
`RuntimeFilter` on `x`: the set of `y`'s values (NULL never equals). A row of the new input
whose `x` is not in the set can join nothing, so it is dropped as its scan batch arrives,
before the tables are held whole or hashed; the inputs run earlier were filtered the same
way, so the reduction carries along the chain (TPC-H Q05: region -> nation -> supplier and
customer -> orders -> lineitem, which then holds ~0.6% of its rows).

The set is a bitmap over [min, max] of the values (exact, one numpy gather per batch) for
integer-like keys (integers, DATE, TIMESTAMP) whose span is at most MAX_BITMAP values;
wider spans keep the min/max test alone. Other key types get no filter. A filter that has
seen ADAPT_ROWS rows and kept more than KEEP_FRACTION of them switches itself off: it
costs a gather per row and saves nothing.

Where the table scans in this process (`member_predicates`), the filter goes into the
engine scan itself as a `ColumnPredicate.member` (`ScanTest`): a block whose zone map
(min / max of the key) holds no key of the filter is skipped undecoded, and the scan's lazy
materialisation decodes the other columns only at the rows the filter keeps (TPC-H Q12,
Q21: lineitem's wide columns at the few rows whose order survived). Elsewhere (a cluster's
remote scans) it applies to each batch as it arrives (`apply`).
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_BITMAP = 1 << 27          # bytes of the membership bitmap, at most (one per value)
ZONE_SPAN = 1 << 16           # a zone-map test reads at most this many bitmap entries
ADAPT_ROWS = 1 << 18          # rows a filter sees before it may switch itself off
KEEP_FRACTION = 0.9           # ... when it kept more than this fraction of them


def _family(typ: pa.DataType) -> str | None:
    """Key types whose values compare as the same integers ("int": any integer width)."""
    if pa.types.is_integer(typ):
        return "int"
    if pa.types.is_date32(typ) or pa.types.is_timestamp(typ):
        return str(typ)
    return None


def _int64s(a) -> np.ndarray:
    """An integer-like Arrow array without NULLs as int64 numpy values."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    if not pa.types.is_integer(a.type):
        a = a.cast(pa.int32() if pa.types.is_date32(a.type) else pa.int64())
    return a.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


class RuntimeFilter:
    """Membership of a probe column's values in a build side's key values."""

    __slots__ = ("key", "source", "family", "lo", "hi", "bits", "count",
                 "seen", "kept", "active")

    def __init__(self, key: str, source: str, family: str, values: np.ndarray):
        self.key = key                    # the probe input's internal column key
        self.source = source              # the build side's expression (EXPLAIN ANALYZE)
        self.family = family
        self.count = len(values)
        self.seen = self.kept = 0
        self.active = True
        self.bits = None
        if not len(values):
            self.lo, self.hi = 1, 0        # no value: every row is dropped
            return
        self.lo, self.hi = int(values.min()), int(values.max())
        span = self.hi - self.lo + 1
        if span <= MAX_BITMAP:
            self.bits = np.zeros(span, dtype=bool)
            self.bits[values - self.lo] = True

    @classmethod
    def build(cls, key: str, probe_type: pa.DataType, values, source: str
              ) -> "RuntimeFilter | None":
        """A filter on `key` (typed `probe_type`) from the build side's key `values`
        (an Arrow array), or None where the types do not allow one."""
        fam = _family(probe_type)
        if fam is None or isinstance(values, pa.Scalar) or _family(values.type) != fam:
            return None
        if values.null_count:
            values = pc.drop_null(values)
        return cls(key, source, fam, _int64s(values))

    @property
    def nbytes(self) -> int:
        return 0 if self.bits is None else self.bits.nbytes

    def mask(self, col) -> np.ndarray:
        """True where the row's value may join (NULL never does)."""
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if col.null_count:
            valid = col.is_valid().to_numpy(zero_copy_only=False)
            col = col.fill_null(0)
        else:
            valid = None
        v = _int64s(col)
        if self.bits is None:
            m = (v >= self.lo) & (v <= self.hi)
        else:
            idx = v - self.lo
            m = idx.view(np.uint64) < np.uint64(len(self.bits))    # below lo wraps around
            m[m] = self.bits[idx[m]]
        return m if valid is None else (m & valid)

    def may_match(self, vmin, vmax) -> bool:
        """Can a block whose key values lie in [vmin, vmax] hold a key of the filter?"""
        if vmin is None or vmax is None:
            return True
        a, b = max(int(vmin), self.lo), min(int(vmax), self.hi)
        if a > b:
            return False
        if self.bits is None or b - a >= ZONE_SPAN:
            return True
        return bool(self.bits[a - self.lo: b - self.lo + 1].any())

    def describe(self) -> str:
        kind = "bitmap" if self.bits is not None else "min/max"
        state = "" if self.active else "; switched off: it kept most rows"
        return (f"runtime filter {self.key} IN {self.source} ({self.count} keys, {kind}): "
                f"{self.seen} -> {self.kept} rows{state}")


def apply(filters: list[RuntimeFilter], batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` without the rows some active filter drops; updates the filters' counts and
    switches off the ones that keep nearly everything."""
    mask = None
    for f in filters:
        if not f.active:
            continue
        m = f.mask(batch.column(batch.schema.get_field_index(f.key)))
        f.seen += len(m)
        f.kept += int(np.count_nonzero(m))
        if f.seen >= ADAPT_ROWS and f.kept > KEEP_FRACTION * f.seen:
            f.active = False
        mask = m if mask is None else (mask & m)
    if mask is None or mask.all():
        return batch
    return batch.filter(pa.array(mask))


class ScanTest:
    """A RuntimeFilter as an engine scan predicate (`ColumnPredicate.member`): the engine
    calls `may_match` per block (its zone map) and `mask` on the key's physical values (the
    same integers: days, microseconds). The tablets are scanned on several threads, so the
    counts are kept under a lock."""

    __slots__ = ("f", "_lock")

    def __init__(self, f: RuntimeFilter):
        self.f = f
        self._lock = threading.Lock()

    def _count(self, seen: int, kept: int) -> None:
        f = self.f
        with self._lock:
            f.seen += seen
            f.kept += kept
            if f.active and f.seen >= ADAPT_ROWS and f.kept > KEEP_FRACTION * f.seen:
                f.active = False

    def may_match(self, vmin, vmax, null_count: int, num_rows: int) -> bool:
        f = self.f
        if not f.active:
            return True
        if null_count >= num_rows or not f.may_match(vmin, vmax):
            self._count(num_rows, 0)
            return False
        return True

    def mask(self, arr) -> np.ndarray:
        f = self.f
        if not f.active:
            return np.ones(len(arr), dtype=bool)
        m = f.mask(arr)
        self._count(len(m), int(np.count_nonzero(m)))
        return m
