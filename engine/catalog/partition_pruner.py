"""Partition pruning (Kudu's partition_pruner.cc): which partitions of a PartitionSchema may
hold rows matching a conjunction of scan predicates.

Partition pruning (`prune`) takes scan predicates (`ColumnPredicate`, a conjunction) and
returns the partitions that may hold matching rows. It is conservative: it may keep a
partition without matches, never drop one with a match (a property test checks it).
- Each key column's predicates are bound exactly like the scan binds them (`BoundPredicate`:
  `i < 10.5` on an INT column is `i <= 10`), then folded into a value set (= and IN, or a
  small integer range) and/or inclusive bounds; an impossible conjunction prunes everything.
- A hash level whose every column has a value set keeps only the buckets of the
  combinations (at most `MAX_PRUNE_COMBINATIONS`); otherwise all its buckets.
- The range columns are walked in order: value sets extend a list of key prefixes, the
  first column without one contributes its bounds; this gives encoded key intervals, and
  only ranges overlapping one of them are kept.

`PartitionPruner` is made for one PartitionSchema (`PartitionSchema.prune` makes one per
call). What it uses of the partition schema is its public interface, nothing private
(tests/engine/test_tablet_interfaces.py holds that): `hash_schemas`, `range_schema`,
`range_partitions`, `key_columns_by_name`, `hash_key_columns`, `range_key_columns`,
`encode_range_bound`, `partition_index` and `bucket_of`.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as _dt
import decimal
import itertools
from typing import Any, Sequence

import numpy as np

from engine import errors
from engine.convert import python_converter
from engine.key_encoding import encode_key, encode_key_prefix, physical_value, successor_prefix
from engine.schema import ColumnSchema
from engine.tablet.scan_spec import BoundPredicate, ColumnPredicate
from engine.types import INTEGER_RANGES, DataType

# Pruning enumerates at most this many value combinations per hash level / range prefix.
MAX_PRUNE_COMBINATIONS = 4096
# An integer range predicate spanning at most this many values is treated as an IN list.
_SMALL_INT_RANGE = 16
_DAYS_MIN = (_dt.date(1, 1, 1) - _dt.date(1970, 1, 1)).days  # Kudu's DATE range
_DAYS_MAX = (_dt.date(9999, 12, 31) - _dt.date(1970, 1, 1)).days
_MICROS_MIN = -62135596800 * 1_000_000  # 0001-01-01T00:00:00
_MICROS_MAX = 253402300799 * 1_000_000 + 999_999  # 9999-12-31T23:59:59.999999


def int_limits(col: ColumnSchema) -> tuple[int, int] | None:
    """The physical value range of an integer-like key column (ints, DATE, TIMESTAMP,
    DECIMAL), None for other types."""
    t = col.type
    if t in INTEGER_RANGES:
        return INTEGER_RANGES[t]
    if t is DataType.DATE:
        return _DAYS_MIN, _DAYS_MAX
    if t is DataType.TIMESTAMP:
        return _MICROS_MIN, _MICROS_MAX
    if t is DataType.DECIMAL:
        m = 10 ** col.precision - 1
        return -m, m
    return None


@dataclasses.dataclass
class _Constraint:
    values: set | None = None  # physical values a matching row may have
    lo: Any = None  # physical inclusive bounds (conservative)
    hi: Any = None


def _bound_physical(v: Any, col: ColumnSchema) -> Any:
    """A BoundPredicate literal (physical, or logical Decimal for DECIMAL(p>18)) -> physical."""
    if isinstance(v, decimal.Decimal):
        return physical_value(v, col)
    return v


class PartitionPruner:
    """Partition pruning of one PartitionSchema (Kudu's PartitionPruner; see the module
    docstring)."""

    def __init__(self, ps) -> None:
        # `ps`: the PartitionSchema (not imported here: partition.py imports this module)
        self.ps = ps

    def prune(self, predicates: Sequence[ColumnPredicate]) -> list[int]:
        """Indexes of the partitions that may hold rows matching every predicate."""
        cons = self._constraints(predicates)
        if cons is None:
            return []
        bucket_sets = []
        for level, hs in enumerate(self.ps.hash_schemas):
            bucket_sets.append(self._prune_level(level, cons))
        ranges = self._prune_ranges(cons)
        out = []
        for buckets in itertools.product(*bucket_sets):
            for r in ranges:
                out.append(self.ps.partition_index(buckets, r))
        return sorted(out)

    def _constraints(self, predicates: Sequence[ColumnPredicate]) -> dict | None:
        """{column: _Constraint} for key columns; None if no row can match."""
        cons: dict[str, _Constraint] = {}
        for p in predicates:
            col = self.ps.key_columns_by_name.get(p.column)
            if col is None:
                continue
            if p.kind == "is_null":
                return None  # key columns are NOT NULL
            if p.kind == "is_not_null":
                continue
            try:
                bp = BoundPredicate(p, col)
            except errors.EngineError:
                continue  # the tablet scan reports it; no pruning from it
            if bp.always_false:
                return None
            c = cons.setdefault(p.column, _Constraint())
            if p.kind == "in":
                vals = {_bound_physical(v, col) for v in bp.values.to_pylist()}
                c.values = vals if c.values is None else c.values & vals
                continue
            lo = None if bp.lower is None else _bound_physical(bp.lower.as_py(), col)
            hi = None if bp.upper is None else _bound_physical(bp.upper.as_py(), col)
            if lo is not None and (c.lo is None or lo > c.lo):
                c.lo = lo
            if hi is not None and (c.hi is None or hi < c.hi):
                c.hi = hi
        for name, c in cons.items():
            col = self.ps.key_columns_by_name[name]
            limits = int_limits(col)
            if c.values is None and c.lo is not None and c.lo == c.hi:
                c.values = {c.lo}  # equality (conservatively also `> x AND < x`)
            if c.values is None and limits is not None:
                lo = c.lo if c.lo is not None else limits[0]
                hi = c.hi if c.hi is not None else limits[1]
                if hi - lo < _SMALL_INT_RANGE:
                    c.values = set(range(lo, hi + 1))
            if c.values is not None:
                c.values = {v for v in c.values if (c.lo is None or v >= c.lo) and (
                    c.hi is None or v <= c.hi)}
                if not c.values:
                    return None
            elif c.lo is not None and c.hi is not None and c.lo > c.hi:
                return None
        return cons

    def _prune_level(self, level: int, cons: dict) -> list[int]:
        hs, cols = self.ps.hash_schemas[level], self.ps.hash_key_columns[level]
        every = list(range(hs.num_buckets))
        sets = [cons.get(c.name) for c in cols]
        if any(s is None or s.values is None for s in sets):
            return every
        if np.prod([len(s.values) for s in sets], dtype=np.float64) > MAX_PRUNE_COMBINATIONS:
            return every
        try:
            out = set()
            for combo in itertools.product(*[sorted(s.values) for s in sets]):
                logical = [python_converter(c)(v) for v, c in zip(combo, cols)]
                out.add(self.ps.bucket_of(level, logical))
        except (errors.EngineError, OverflowError, ValueError):
            return every
        return sorted(out)

    def _key_intervals(self, cons: dict) -> list[tuple[bytes | None, bytes | None]]:
        """Encoded range-key intervals [lo, hi) (None = unbounded) covering every match."""
        cols = self.ps.range_key_columns
        prefixes: list[list] = [[]]
        for col in cols:
            c = cons.get(col.name)
            conv = python_converter(col)
            if c is not None and c.values is not None and \
                    len(prefixes) * len(c.values) <= MAX_PRUNE_COMBINATIONS:
                vals = [conv(v) for v in sorted(c.values)]
                prefixes = [p + [v] for p in prefixes for v in vals]
                continue
            lo_v = hi_v = None
            if c is not None:
                if c.values is not None:
                    lo_v, hi_v = min(c.values), max(c.values)
                else:
                    lo_v, hi_v = c.lo, c.hi
            out = []
            for p in prefixes:
                lo = encode_key_prefix(p + [conv(lo_v)], cols) if lo_v is not None else (
                    encode_key_prefix(p, cols) if p else None)
                hi_prefix = p + [conv(hi_v)] if hi_v is not None else p
                hi = successor_prefix(encode_key_prefix(hi_prefix, cols)) if hi_prefix else None
                out.append((lo, hi))
            return out
        out = []
        for p in prefixes:
            enc = encode_key(p, cols)
            out.append((enc, successor_prefix(enc)))
        return out

    def _prune_ranges(self, cons: dict) -> list[int]:
        every = list(range(len(self.ps.range_partitions)))
        range_cols = self.ps.range_schema.columns
        if not range_cols or not any(c in cons for c in range_cols):
            return every
        try:
            intervals = self._key_intervals(cons)
        except (errors.EngineError, OverflowError, ValueError):
            return every
        # merge into disjoint intervals sorted by lower bound; +inf sorts last
        inf = (1, b"")
        ivs = sorted(((iv[0] or b""), (0, iv[1]) if iv[1] is not None else inf)
                     for iv in intervals)
        merged: list[list] = []
        for lo, hi in ivs:
            if merged and (0, lo) <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        his = [m[1] for m in merged]
        out = []
        for i, rp in enumerate(self.ps.range_partitions):
            lo = self.ps.encode_range_bound(rp.lower) or b""
            j = bisect.bisect_right(his, (0, lo))  # first interval ending above lo
            if j < len(merged) and (rp.upper is None
                                    or merged[j][0] < self.ps.encode_range_bound(rp.upper)):
                out.append(i)
        return out
