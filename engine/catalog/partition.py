"""Partitioning: Kudu's PartitionSchema (paper §3.2) — zero or more hash levels, then ranges.

A table is split into *tablets*. Which tablet holds a row depends only on its primary key,
through the table's PartitionSchema:

    PartitionSchema
     ├── hash_schemas: HashBucketSchema(columns, num_buckets, seed) ...   zero or more levels
     ├── range_schema: RangeSchema(columns)                               () = no range level
     └── range_partitions: RangePartition(lower, upper) ...               [lower, upper)

The partitions are the cartesian product of the hash buckets of every level and the range
partitions, hash buckets first (level 0 major), ranges last — exactly Kudu's order, which is
also the order of their *partition keys*. A Partition's partition key range is Kudu's: the
bucket numbers as 4-byte big-endian integers, followed by the order-preserving encoding of
the range columns (`engine.key_encoding`, canonical form); an unbounded range end is widened
over the neighbouring buckets the way Kudu fills holes (`PartitionSchema::CreatePartitions`),
so the partitions of a table with a single unbounded range tile the key space.

Validation (Kudu's `PartitionSchema::Validate` and master checks, with Impala's wording
where Impala is the one that reports it):
- partition columns must be primary key columns ("Column 'c' in 'HASH (c) PARTITIONS 3' is
  not a key column. Only key columns can be used in PARTITION BY.");
- a hash level has at least two buckets, no column twice, and no two levels share a column
  ("hash bucket schema components must not contain columns in common"); its columns are
  sorted into key order (Kudu sorts them by column id: HASH(b, a) hashes like HASH(a, b));
  a level with no columns hashes every key column (Impala's `HASH PARTITIONS n`);
- at most one range level (there is one `range_schema` field), its columns distinct and in
  the given order; bounds are full tuples of the range columns, never NULL;
- ranges are [inclusive lower, exclusive upper), lower < upper, and may not overlap.

Bounds are given as `RangeSpec`s (or `(lower, upper)` pairs, or RangePartitions) and made
canonical on the way in: `RangeSpec.value(v)` (`PARTITION VALUE = v`) is [v, succ(v));
an exclusive lower bound v becomes succ(v) and an inclusive upper bound v becomes succ(v)
(`10 < VALUES <= 30` on integers is [11, 31)), where succ is Kudu's `IncrementKey`: add one
to the last column (append a NUL byte to a string), carrying into the previous column when
it is already the largest value. An inclusive upper bound with no successor is unbounded;
an exclusive lower bound with none is an error. Stored bounds are canonical Python values of
the columns' logical types (int, str, bytes, Decimal, date, naive UTC datetime).

Row → partition assignment (`partition_indexes`) is vectorised over Arrow key columns:

    bucket(level) = bucket_hash(encode_keys(level columns)) mod num_buckets
    range         = searchsorted(sorted encoded lower bounds, encoded range key) - 1,
                    kept only if the key is below that range's upper bound, else -1
    partition     = ((b0 * n1 + b1) * n2 + ...) * num_ranges + range, or -1

`bucket_hash` is `engine.cfile.bloom.hash_keys` (a murmur3-finaliser hash of the canonical
encoded key) when the seed is 0, and otherwise `fmix64(hash ^ fmix64((seed + 1) * GOLDEN))`.
Buckets are *persisted* — they decide which tablet holds a row — so this function, the key
encoding and `hash_keys` must never change; `tests/engine/catalog` pins known values.
Rows whose range key falls in no range get -1 (Kudu: "no tablet covering the requested
range partition"); the Table turns that into a per-row NO_PARTITION error.

Partition pruning (`prune`, from scan predicates) is engine.catalog.partition_pruner's
`PartitionPruner`, a class of its own over this one's public interface.

ADD/DROP RANGE PARTITION return a new PartitionSchema (`add_range_partition`,
`drop_range_partition`); the catalog creates or deletes the tablets of the difference.
Column names are stored, not ids: a column rename rewrites the schema (`renamed`).
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as _dt
import decimal
import functools
import itertools
import struct
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

import native
from engine import errors
from engine.cfile.bloom import fmix64, hash_key, hash_keys
from engine.catalog.partition_pruner import PartitionPruner
from engine.catalog.partition_pruner import int_limits as _int_limits
from engine.convert import cast_column, python_converter
from engine.key_encoding import (
    compile_key_encoder,
    decimal_unscaled_exact,
    encode_key,
    encode_keys,
    physical_value,
)
from engine.schema import ColumnSchema, Schema
from engine.tablet.scan_spec import ColumnPredicate
from engine.tablet.write_op import RowErrorCode
from engine.types import DataType, to_physical

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_F1 = 0xFF51AFD7ED558CCD
_F2 = 0xC4CEB9FE1A85EC53
_BYTES_TYPES = (DataType.STRING, DataType.VARCHAR, DataType.BINARY)


# -- the persisted hash ---------------------------------------------------------------------

def _seed_word(seed: int) -> int:
    return fmix64(((seed + 1) * _GOLDEN) & _M64)


def bucket_hashes(encoded: np.ndarray, seed: int = 0) -> np.ndarray:
    """uint64 bucket hash of every encoded key of an ``S<w>`` array (persisted: see above)."""
    h = hash_keys(encoded)
    if seed:
        with np.errstate(over="ignore"):
            h ^= np.uint64(_seed_word(seed))
            h ^= h >> np.uint64(33)
            h *= np.uint64(_F1)
            h ^= h >> np.uint64(33)
            h *= np.uint64(_F2)
            h ^= h >> np.uint64(33)
    return h


def bucket_hash_py(encoded: bytes, seed: int = 0) -> int:
    """The bucket hash of one canonical encoded key; equals `bucket_hashes` bit for bit.
    The specification of the compiled `bucket_hash` (native/_hashing.pyx)."""
    h = hash_key(encoded)
    return fmix64(h ^ _seed_word(seed)) if seed else h


_native = native.load("_hashing")
bucket_hash = _native.bucket_hash if _native is not None else bucket_hash_py


# -- metadata -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class HashBucketSchema:
    columns: tuple[str, ...]
    num_buckets: int
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(self.columns))

    def __str__(self) -> str:
        s = f"HASH ({', '.join(self.columns)}) PARTITIONS {self.num_buckets}"
        return s + (f" SEED {self.seed}" if self.seed else "")


@dataclasses.dataclass(frozen=True)
class RangeSchema:
    columns: tuple[str, ...] = ()  # () = no range partitioning (one unbounded range)

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(self.columns))

    def __str__(self) -> str:
        return f"RANGE ({', '.join(self.columns)})"


@dataclasses.dataclass(frozen=True)
class RangeSpec:
    """A range bound as written in SQL, before canonicalisation (see module docstring).

    `lower`/`upper`: a value (single range column) or a tuple of values; None = unbounded.
    """

    lower: Any = None
    upper: Any = None
    lower_inclusive: bool = True
    upper_inclusive: bool = False

    @staticmethod
    def value(v: Any) -> "RangeSpec":
        """`PARTITION VALUE = v`."""
        return RangeSpec(v, v, True, True)


@dataclasses.dataclass(frozen=True)
class RangePartition:
    """A canonical range [lower, upper): tuples of logical values, None = unbounded."""

    lower: tuple | None
    upper: tuple | None
    text: str = dataclasses.field(default="", compare=False, repr=False)

    def __str__(self) -> str:
        if self.text:
            return self.text
        return _range_text(self.lower, self.upper, False)


@dataclasses.dataclass(frozen=True)
class Partition:
    index: int  # position in PartitionSchema.partitions (changes when ranges change)
    hash_buckets: tuple[int, ...]
    range: RangePartition
    partition_key_start: bytes  # inclusive
    partition_key_end: bytes  # exclusive; b"" = unbounded

    @property
    def identity(self) -> tuple:
        """What stays the same across ADD/DROP RANGE PARTITION (index does not)."""
        return self.hash_buckets, self.range


RangeLike = RangeSpec | RangePartition | tuple


def _value_text(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bytes):
        return '"' + v.decode("latin-1").encode("unicode_escape").decode().replace(
            '"', '\\"') + '"'
    if isinstance(v, _dt.datetime):  # as SHOW CREATE TABLE writes it (engine.types.sql_literal)
        return v.isoformat(sep=" ", timespec="microseconds" if v.microsecond else "seconds")
    if isinstance(v, _dt.date):
        return v.isoformat()
    return str(v)


def _tuple_text(t: tuple) -> str:
    parts = [_value_text(v) for v in t]
    return parts[0] if len(parts) == 1 else f"({', '.join(parts)})"


def _range_text(lower: tuple | None, upper: tuple | None, single_value: bool) -> str:
    """Impala's SHOW RANGE PARTITIONS form (Kudu's Java client formatRangePartition)."""
    if lower is None and upper is None:
        return "UNBOUNDED"
    if single_value:
        return f"VALUE = {_tuple_text(lower)}"
    out = f"{_tuple_text(lower)} <= VALUES" if lower is not None else "VALUES"
    return out + (f" < {_tuple_text(upper)}" if upper is not None else "")


def _type_text(col: ColumnSchema) -> str:
    return col.type_sql()


def _json_value(v: Any, col: ColumnSchema) -> Any:
    """A canonical bound value as JSON: physical ints; strings as text; binary as hex."""
    p = physical_value(v, col)
    if isinstance(p, bytes):
        return p.decode() if col.type is not DataType.BINARY else {"hex": p.hex()}
    return p


def _from_json_value(v: Any, col: ColumnSchema) -> Any:
    if isinstance(v, dict):
        return bytes.fromhex(v["hex"])
    if isinstance(v, str):
        return v
    return python_converter(col)(v)


@dataclasses.dataclass(frozen=True)
class PartitionSchema:
    """See the module docstring. Build with `PartitionSchema.create(schema, ...)`."""

    hash_schemas: tuple[HashBucketSchema, ...]
    range_schema: RangeSchema
    range_partitions: tuple[RangePartition, ...]
    key_columns: tuple[ColumnSchema, ...] = dataclasses.field(repr=False)

    # -- construction and validation -------------------------------------------------------
    @staticmethod
    def create(schema: Schema, hash_schemas: Iterable[HashBucketSchema] = (),
               range_schema: RangeSchema | Sequence[str] | None = None,
               range_partitions: Iterable[RangeLike] | None = None) -> "PartitionSchema":
        """Validate and canonicalise a partitioning of `schema`.

        `range_schema` None or () means no range level (a single unbounded range). With
        range columns and `range_partitions` None, the table has one unbounded range
        (Kudu's default); an explicit empty list means no ranges at all (no row fits).
        """
        keys = tuple(schema.key_columns)
        key_names = [c.name for c in keys]
        pos = {n: i for i, n in enumerate(key_names)}
        hs_out = []
        seen: set[str] = set()
        for hs in hash_schemas:
            cols = tuple(hs.columns) if hs.columns else tuple(key_names)
            text = str(dataclasses.replace(hs, columns=cols))
            for c in cols:
                if c not in pos:
                    raise errors.InvalidArgument(
                        f"Column '{c}' in '{text}' is not a key column. Only key columns "
                        f"can be used in PARTITION BY.")
            if len(set(cols)) != len(cols):
                raise errors.InvalidArgument(f"duplicate column in hash partition: {text}")
            if not isinstance(hs.num_buckets, int) or isinstance(hs.num_buckets, bool) \
                    or hs.num_buckets < 2:
                raise errors.InvalidArgument(
                    f"must have at least two hash buckets: {text}")
            if not isinstance(hs.seed, int) or not 0 <= hs.seed < 2 ** 32:
                raise errors.InvalidArgument(f"hash seed must be a uint32: {text}")
            if seen & set(cols):
                raise errors.InvalidArgument(
                    "hash bucket schema components must not contain columns in common")
            seen |= set(cols)
            hs_out.append(HashBucketSchema(tuple(sorted(cols, key=pos.__getitem__)),
                                           hs.num_buckets, hs.seed))
        if range_schema is None:
            rs = RangeSchema(())
        elif isinstance(range_schema, RangeSchema):
            rs = range_schema
        else:
            rs = RangeSchema(tuple(range_schema))
        for c in rs.columns:
            if c not in pos:
                raise errors.InvalidArgument(
                    f"Column '{c}' in '{rs}' is not a key column. Only key columns can be "
                    f"used in PARTITION BY.")
        if len(set(rs.columns)) != len(rs.columns):
            dup = next(c for c in rs.columns if rs.columns.count(c) > 1)
            raise errors.InvalidArgument(f"duplicate column in range partition: {dup}")
        base = PartitionSchema(tuple(hs_out), rs, (RangePartition(None, None),), keys)
        if not rs.columns:
            if range_partitions:
                raise errors.InvalidArgument(
                    "range partitions were given but the table has no RANGE columns")
            return base
        if range_partitions is None:
            return base
        ranges = [base.canonical_range(r) for r in range_partitions]
        return PartitionSchema(tuple(hs_out), rs, tuple(ranges), keys)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hash_schemas", tuple(self.hash_schemas))
        object.__setattr__(self, "key_columns", tuple(self.key_columns))
        if not self.range_schema.columns and tuple(self.range_partitions) != (
                RangePartition(None, None),):
            raise errors.InvalidArgument("a table without RANGE columns has one unbounded range")
        enc = self.encode_range_bound
        ranges = sorted(self.range_partitions, key=lambda r: enc(r.lower) or b"")
        for a, b in zip(ranges, ranges[1:]):
            if a.upper is None or enc(a.upper) > (enc(b.lower) or b""):
                raise errors.InvalidArgument(
                    f"overlapping range partitions: first range partition: {a}, second "
                    f"range partition: {b}")
        object.__setattr__(self, "range_partitions", tuple(ranges))

    # -- pruning (engine/catalog/partition_pruner.py) -----------------------------------------
    def prune(self, predicates: Sequence[ColumnPredicate]) -> list[int]:
        """Indexes of the partitions that may hold rows matching every predicate (a
        conjunction): `PartitionPruner`."""
        return PartitionPruner(self).prune(predicates)

    # -- columns ---------------------------------------------------------------------------
    @functools.cached_property
    def key_columns_by_name(self) -> dict[str, ColumnSchema]:
        """The table's key columns by name."""
        return {c.name: c for c in self.key_columns}

    @functools.cached_property
    def hash_key_columns(self) -> list[list[ColumnSchema]]:
        """The columns of each hash level, as ColumnSchemas."""
        return [[self.key_columns_by_name[c] for c in hs.columns] for hs in self.hash_schemas]

    @functools.cached_property
    def range_key_columns(self) -> list[ColumnSchema]:
        """The range level's columns, as ColumnSchemas."""
        return [self.key_columns_by_name[c] for c in self.range_schema.columns]

    @property
    def column_names(self) -> list[str]:
        """Every column the partitioning reads, in key order."""
        used = {c for hs in self.hash_schemas for c in hs.columns} | set(
            self.range_schema.columns)
        return [c.name for c in self.key_columns if c.name in used]

    # -- ranges ----------------------------------------------------------------------------
    def encode_range_bound(self, bound: tuple | None) -> bytes | None:
        """Canonical encoding of a range bound tuple (logical values)."""
        if bound is None:
            return None
        return encode_key(bound, self.range_key_columns)

    def _physical_bound(self, v: Any) -> tuple | None:
        if v is None:
            return None
        vals = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        cols = self.range_key_columns
        if len(vals) != len(cols):
            raise errors.InvalidArgument(
                f"Number of specified range partition values is different than the number "
                f"of partitioning columns: ({len(vals)} vs {len(cols)})")
        out = []
        for x, col in zip(vals, cols):
            if x is None:
                raise errors.InvalidArgument("Range partition values cannot be NULL.")
            try:
                if col.type is DataType.DECIMAL:  # 1.234 does not fit DECIMAL(9,2): refuse
                    u = decimal_unscaled_exact(x, col.scale)
                    if u != u.to_integral_value():
                        raise errors.InvalidArgument("inexact")
                p = physical_value(x, col)
            except (errors.EngineError, TypeError, ValueError, OverflowError,
                    decimal.InvalidOperation):
                raise errors.InvalidArgument(
                    f"Range partition value {x!r} is not type compatible with partitioning "
                    f"column '{col.name}' (type: {_type_text(col)}).") from None
            out.append(p)
        return tuple(out)

    def _increment(self, phys: tuple) -> tuple | None:
        """Kudu's IncrementKey on a physical tuple; None if every column is at its max."""
        vals = list(phys)
        for j in range(len(vals) - 1, -1, -1):
            col = self.range_key_columns[j]
            if col.type in _BYTES_TYPES:
                vals[j] = vals[j] + b"\x00"
                return tuple(vals)
            lo, hi = _int_limits(col)
            if vals[j] < hi:
                vals[j] += 1
                return tuple(vals)
            vals[j] = lo  # carry into the previous column
        return None

    def _logical(self, phys: tuple | None) -> tuple | None:
        if phys is None:
            return None
        return tuple(python_converter(c)(v) for v, c in zip(phys, self.range_key_columns))

    def canonical_range(self, spec: RangeLike) -> RangePartition:
        """A RangeSpec / RangePartition / (lower, upper) pair -> canonical RangePartition."""
        if not self.range_schema.columns:
            raise errors.InvalidArgument(
                "the table has no RANGE partitioning columns, so it has no range partitions")
        if isinstance(spec, RangePartition):
            spec = RangeSpec(spec.lower, spec.upper)
        elif not isinstance(spec, RangeSpec):
            if not isinstance(spec, (tuple, list)) or len(spec) != 2:
                raise errors.InvalidArgument(
                    f"a range partition is a RangeSpec or a (lower, upper) pair, not {spec!r}")
            spec = RangeSpec(spec[0], spec[1])
        lower = self._physical_bound(spec.lower)
        upper = self._physical_bound(spec.upper)
        if lower is not None and not spec.lower_inclusive:
            inc = self._increment(lower)
            if inc is None:
                raise errors.InvalidArgument(
                    "Exclusive lower bound range partition key must not have maximum values "
                    f"for all components: {_tuple_text(self._logical(lower))}")
            lower = inc
        if upper is not None and spec.upper_inclusive:
            upper = self._increment(upper)  # no successor: unbounded (Kudu)
        lo_l, up_l = self._logical(lower), self._logical(upper)
        enc = self.encode_range_bound
        if lower is not None and upper is not None and enc(lo_l) >= enc(up_l):
            raise errors.InvalidArgument(
                "range partition lower bound must be less than the upper bound: "
                f"{_range_text(lo_l, up_l, False)}")
        single = lower is not None and upper is not None and self._increment(lower) == upper
        return RangePartition(lo_l, up_l, _range_text(lo_l, up_l, single))

    def _overlaps(self, a: RangePartition, b: RangePartition) -> bool:
        enc = self.encode_range_bound
        a_lo, b_lo = enc(a.lower) or b"", enc(b.lower) or b""
        return (a.upper is None or b_lo < enc(a.upper)) and (
            b.upper is None or a_lo < enc(b.upper))

    def add_range_partition(self, spec: RangeLike) -> "PartitionSchema":
        """ALTER TABLE ADD RANGE PARTITION: a new PartitionSchema with the range added."""
        rp = self.canonical_range(spec)
        if rp in self.range_partitions:
            raise RangePartitionExists(f"range partition already exists: {rp}")
        for existing in self.range_partitions:
            if self._overlaps(rp, existing):
                raise errors.InvalidArgument(
                    f"new range partition conflicts with existing one: {existing}")
        return dataclasses.replace(self, range_partitions=self.range_partitions + (rp,))

    def drop_range_partition(self, spec: RangeLike) -> "PartitionSchema":
        """ALTER TABLE DROP RANGE PARTITION: the range must match an existing one exactly."""
        rp = self.canonical_range(spec)
        if rp not in self.range_partitions:
            raise errors.InvalidArgument(f"no range partition to drop: {rp}")
        return dataclasses.replace(
            self, range_partitions=tuple(r for r in self.range_partitions if r != rp))

    def range_to_json(self, spec: RangeLike) -> dict:
        """A range as its canonical [lower, upper) bounds in to_dict's JSON form (how a
        cluster client sends ADD / DROP RANGE PARTITION to the master)."""
        rp = self.canonical_range(spec)
        cols = self.range_key_columns

        def bound(t):
            return None if t is None else [_json_value(v, c) for v, c in zip(t, cols)]
        return {"lower": bound(rp.lower), "upper": bound(rp.upper)}

    def range_from_json(self, d: dict) -> tuple:
        """`range_to_json`'s output back to a (lower, upper) pair this schema takes."""
        cols = self.range_key_columns

        def bound(b):
            return None if b is None else tuple(_from_json_value(v, c) for v, c in zip(b, cols))
        return bound(d["lower"]), bound(d["upper"])

    def has_range_partition(self, spec: RangeLike) -> bool:
        return self.canonical_range(spec) in self.range_partitions

    # -- partitions ------------------------------------------------------------------------
    @property
    def num_buckets(self) -> tuple[int, ...]:
        return tuple(hs.num_buckets for hs in self.hash_schemas)

    @functools.cached_property
    def partitions(self) -> tuple[Partition, ...]:
        out = []
        nb = self.num_buckets
        for buckets in itertools.product(*[range(n) for n in nb]):
            prefix = b"".join(struct.pack(">I", b) for b in buckets)
            for rp in self.range_partitions:
                start = prefix + (self.encode_range_bound(rp.lower) or b"")
                end = prefix + (self.encode_range_bound(rp.upper) or b"")
                if rp.lower is None:  # widen over the buckets below (Kudu fills holes)
                    for i in range(len(buckets) - 1, -1, -1):
                        if buckets[i] != 0:
                            break
                        start = start[: 4 * i]
                if rp.upper is None:
                    for i in range(len(buckets) - 1, -1, -1):
                        end = end[: 4 * i]
                        if buckets[i] + 1 != nb[i]:
                            end += struct.pack(">I", buckets[i] + 1)
                            break
                out.append(Partition(len(out), tuple(buckets), rp, start, end))
        return tuple(out)

    def partition_index(self, hash_buckets: Sequence[int], range_index: int) -> int:
        idx = 0
        for b, n in zip(hash_buckets, self.num_buckets):
            idx = idx * n + b
        return idx * len(self.range_partitions) + range_index

    # -- row -> partition (vectorised) -----------------------------------------------------
    @functools.cached_property
    def _range_arrays(self):
        lowers = [self.encode_range_bound(r.lower) or b"" for r in self.range_partitions]
        uppers = [self.encode_range_bound(r.upper) or b"" for r in self.range_partitions]
        has_upper = np.array([r.upper is not None for r in self.range_partitions], dtype=bool)
        return lowers, uppers, has_upper

    def bucket_indexes(self, level: int, columns: Mapping[str, pa.Array]) -> np.ndarray:
        """Bucket of every row for hash level `level` (physical key arrays, no nulls)."""
        hs, cols = self.hash_schemas[level], self.hash_key_columns[level]
        n = len(columns[cols[0].name])
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        enc = encode_keys([columns[c.name] for c in cols], cols)
        return (bucket_hashes(enc, hs.seed) % np.uint64(hs.num_buckets)).astype(np.int64)

    def range_indexes(self, columns: Mapping[str, pa.Array], n: int) -> np.ndarray:
        """Index into `range_partitions` of every row, -1 where no range covers it."""
        if not self.range_schema.columns:
            return np.zeros(n, dtype=np.int64)
        if not self.range_partitions or n == 0:
            return np.full(n, -1, dtype=np.int64)
        cols = self.range_key_columns
        enc = encode_keys([columns[c.name] for c in cols], cols)
        lowers, uppers, has_upper = self._range_arrays
        w = max(enc.dtype.itemsize, max(map(len, lowers + uppers)), 1)
        enc = enc.astype(f"S{w}")
        lo_arr = np.array(lowers, dtype=f"S{w}")
        up_arr = np.array(uppers, dtype=f"S{w}")
        idx = np.searchsorted(lo_arr, enc, side="right").astype(np.int64) - 1
        ok = idx >= 0
        sel = np.flatnonzero(ok)
        r = idx[sel]
        ok[sel] = ~has_upper[r] | (enc[sel] < up_arr[r])
        idx[~ok] = -1
        return idx

    def partition_indexes(self, columns: Mapping[str, pa.Array], n: int) -> np.ndarray:
        """Partition index of each of `n` rows, -1 if no range partition covers it.

        `columns`: physical Arrow arrays (see `physical_columns`) of every partition
        column, without nulls, each of length n.
        """
        ranges = self.range_indexes(columns, n)
        flat = np.zeros(n, dtype=np.int64)
        for level, hs in enumerate(self.hash_schemas):
            flat = flat * hs.num_buckets + self.bucket_indexes(level, columns)
        out = flat * len(self.range_partitions) + ranges
        out[ranges < 0] = -1
        return out

    def physical_columns(self, rows: pa.Table) -> tuple[dict[str, pa.Array], dict[int, tuple]]:
        """Logical Arrow columns of the rows -> physical arrays of the partition columns.

        Values are converted the way the tablet converts them on write (so a row is routed
        by the very key the tablet stores: VARCHAR truncated, timestamps to UTC micros,
        DECIMAL rescaled). Rows whose key cannot be converted (NULL, out of range, wrong
        type) are returned in `bad` as {row: (code, message)} and get a placeholder value;
        the caller reports them instead of routing them.
        """
        out: dict[str, pa.Array] = {}
        bad: dict[int, tuple] = {}
        for name in self.column_names:
            col = self.key_columns_by_name[name]
            arr = rows.column(name)
            arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
            out[name] = _key_column_physical(arr, col, bad)
        return out, bad

    # -- scalar path (point lookups) -------------------------------------------------------
    def bucket_of(self, level: int, values: Sequence[Any]) -> int:
        """The bucket of hash level `level` for its columns' logical values."""
        cols = self.hash_key_columns[level]
        hs = self.hash_schemas[level]
        return bucket_hash(encode_key(list(values), cols), hs.seed) % hs.num_buckets

    def partition_index_for_key(self, key: Mapping[str, Any]) -> int:
        """Partition index of one key given as {column: logical value}, or -1."""
        buckets = []
        for hs, cols in zip(self.hash_schemas, self.hash_key_columns):
            enc = encode_key([key[c.name] for c in cols], cols)
            buckets.append(bucket_hash(enc, hs.seed) % hs.num_buckets)
        if not self.range_schema.columns:
            r = 0
        else:
            enc = encode_key([key[c.name] for c in self.range_key_columns], self.range_key_columns)
            lowers, uppers, has_upper = self._range_arrays
            r = bisect.bisect_right(lowers, enc) - 1
            if r < 0 or (has_upper[r] and not enc < uppers[r]):
                return -1
        return self.partition_index(buckets, r)

    def partition_index_for_key_values(self, key: Sequence[Any]) -> int:
        """`partition_index_for_key` of a key given as its values in primary-key order
        (`key_columns`): the point-lookup and single-row-write router, with each hash
        level's and the range's key encoders compiled once per partition schema
        (`compile_key_encoder`) instead of the generic per-call encoder."""
        return self.route_key(key)[0]

    def route_key(self, key: Sequence[Any]) -> tuple[int, bytes | None]:
        """(`partition_index_for_key_values(key)`, the key's primary-key encoding when
        routing computed it anyway, else None). A hash level or a range over exactly the
        primary key's columns in key order encodes the whole key with the encoder the
        tablet uses (`compile_key_encoder` of the key columns): `Tablet.lookup(...,
        encoded=)` then does not encode it again."""
        levels, range_part, whole = self._point_router
        if len(key) != len(self.key_columns):
            raise errors.InvalidArgument(
                f"key has {len(key)} values, the primary key has "
                f"{len(self.key_columns)} columns")
        idx = 0
        encoded = None
        for i, (pos, enc, seed, n) in enumerate(levels):
            e = enc(key if i == whole else [key[p] for p in pos])
            if i == whole:
                encoded = e
            h = bucket_hash(e, seed)
            idx = idx * n + h % n
        if range_part is None:
            return idx, encoded     # one unbounded range: range index 0
        pos, enc = range_part
        e = enc(key if whole == -1 else [key[p] for p in pos])
        if whole == -1:
            encoded = e
        lowers, uppers, has_upper = self._range_arrays
        r = bisect.bisect_right(lowers, e) - 1
        if r < 0 or (has_upper[r] and not e < uppers[r]):
            return -1, encoded
        return idx * len(self.range_partitions) + r, encoded

    @functools.cached_property
    def _point_router(self):
        """([(key positions, compiled encoder, seed, buckets)] per hash level,
        (key positions, compiled encoder) of the range columns or None, which part
        encodes the whole primary key: a hash level's index, -1 for the range, None)."""
        where = {c.name: i for i, c in enumerate(self.key_columns)}
        every = list(range(len(self.key_columns)))
        levels = [([where[c.name] for c in cols], compile_key_encoder(cols), hs.seed,
                   hs.num_buckets) for hs, cols in zip(self.hash_schemas, self.hash_key_columns)]
        whole = next((i for i, lv in enumerate(levels) if lv[0] == every), None)
        rng = None
        if self.range_schema.columns:
            rng = ([where[c.name] for c in self.range_key_columns],
                   compile_key_encoder(self.range_key_columns))
            if whole is None and rng[0] == every:
                whole = -1
        return levels, rng, whole

    def partition_key_for(self, key: Mapping[str, Any]) -> bytes:
        """Kudu's partition key of one row: encoded buckets + encoded range columns."""
        out = b""
        for hs, cols in zip(self.hash_schemas, self.hash_key_columns):
            enc = encode_key([key[c.name] for c in cols], cols)
            out += struct.pack(">I", bucket_hash(enc, hs.seed) % hs.num_buckets)
        if self.range_schema.columns:
            out += encode_key([key[c.name] for c in self.range_key_columns], self.range_key_columns)
        return out

    # -- schema evolution and persistence ---------------------------------------------------
    def renamed(self, old: str, new: str, schema: Schema) -> "PartitionSchema":
        """The same partitioning after RENAME COLUMN old TO new (`schema` is the new one)."""
        def ren(cols):
            return tuple(new if c == old else c for c in cols)
        return PartitionSchema(
            tuple(dataclasses.replace(h, columns=ren(h.columns)) for h in self.hash_schemas),
            RangeSchema(ren(self.range_schema.columns)), self.range_partitions,
            tuple(schema.key_columns))

    def to_dict(self) -> dict:
        rcols = self.range_key_columns

        def bound(t):
            return None if t is None else [_json_value(v, c) for v, c in zip(t, rcols)]
        return {"hash_schemas": [{"columns": list(h.columns), "num_buckets": h.num_buckets,
                                  "seed": h.seed} for h in self.hash_schemas],
                "range_columns": list(self.range_schema.columns),
                "range_partitions": [{"lower": bound(r.lower), "upper": bound(r.upper)}
                                     for r in self.range_partitions]}

    @staticmethod
    def from_dict(d: dict, schema: Schema) -> "PartitionSchema":
        hs = [HashBucketSchema(tuple(h["columns"]), h["num_buckets"], h.get("seed", 0))
              for h in d["hash_schemas"]]
        rs = RangeSchema(tuple(d["range_columns"]))
        if not rs.columns:
            return PartitionSchema.create(schema, hs, rs)
        cols = [schema.column(c) for c in rs.columns]

        def bound(b):
            return None if b is None else tuple(_from_json_value(v, c) for v, c in zip(b, cols))
        return PartitionSchema.create(schema, hs, rs, [
            (bound(r["lower"]), bound(r["upper"])) for r in d["range_partitions"]])

    def __str__(self) -> str:
        parts = [str(h) for h in self.hash_schemas]
        if self.range_schema.columns:
            rs = ", ".join(f"PARTITION {r}" for r in self.range_partitions)
            parts.append(f"{self.range_schema} ({rs})")
        return ", ".join(parts) if parts else "UNPARTITIONED"


class RangePartitionExists(errors.AlreadyPresent):
    """ADD RANGE PARTITION of a range that exists exactly (Kudu: AlreadyPresent)."""

    sqlstate = "42710"


# -- logical -> physical key columns ---------------------------------------------------------

def _placeholder(col: ColumnSchema) -> Any:
    return b"" if col.type in _BYTES_TYPES else 0


def _key_column_physical(arr: pa.Array, col: ColumnSchema, bad: dict) -> pa.Array:
    """One key column converted exactly as the tablet converts it (engine.convert); NULL or
    unconvertible values are reported in `bad` and replaced by a placeholder."""
    phys = to_physical(cast_column(arr, col, bad), col.type, col.precision)
    if phys.null_count:
        for i in np.flatnonzero(phys.is_null().to_numpy(zero_copy_only=False)):
            bad.setdefault(int(i), (RowErrorCode.NOT_NULL.value,
                                    f'null value in column "{col.name}" violates not-null '
                                    f'constraint'))
        fill = bytes(16) if pa.types.is_fixed_size_binary(phys.type) else _placeholder(col)
        phys = phys.fill_null(pa.scalar(fill, type=phys.type))
    return phys


