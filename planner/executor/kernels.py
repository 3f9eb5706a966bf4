"""What every operator of the executor shares: per-node statistics (`NodeStats`, EXPLAIN
ANALYZE), common subexpressions, chunk and size helpers for the guard's memory metering, and
the hash of a key tuple (`hash_key`) that joins, DISTINCT and set operations agree on;
short text keys as int64 codes for the hash aggregation (`pack_short` / `unpack_short`) and
the one-bit column count(x) reads (`validity_only`).
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.tablet.diskrowset import ScanStats
from planner.errors import SqlError
from planner.logical import AvgOf, SubqueryRef, keycol
from planner.expr import intervals
from planner.expr import Const


@dataclasses.dataclass
class NodeStats:
    rows: int = 0
    seconds: float = 0.0
    scan: ScanStats | None = None
    tablets: tuple[int, int] | None = None
    detail: list[str] = dataclasses.field(default_factory=list)


def empty_rows(n: int) -> pa.Table:
    """A table with `n` rows and no columns (SELECT without FROM, count(*) scans)."""
    return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])


# A table without columns keeps its row count in Arrow only as long as no kernel has to
# build a new one: pa.concat_tables of such tables has 0 rows, Table.take returns 0 rows
# and Table.slice does not clamp its length. (A 6-way cross join of 15 rows -- 11.4M rows,
# made in chunks -- counted 0.) Every executor step that concatenates or takes rows of a
# table that may have no columns goes through these (and slices with slice_rows).
def concat_tables(parts: list[pa.Table], **kw) -> pa.Table:
    """pa.concat_tables that keeps the row count of column-less tables."""
    if parts and parts[0].num_columns == 0:
        return empty_rows(sum(p.num_rows for p in parts))
    return pa.concat_tables(parts, **kw)


def slice_rows(t: pa.Table, start: int, length: int | None = None) -> pa.Table:
    """t.slice(start, length), clamped to the table's rows also when it has no columns."""
    if t.num_columns == 0:
        left = max(0, t.num_rows - start)
        return empty_rows(left if length is None else min(left, max(0, length)))
    return t.slice(start) if length is None else t.slice(start, length)


def take_rows(t: pa.Table, idx) -> pa.Table:
    """t.take(idx) that keeps the row count of a column-less table."""
    if t.num_columns == 0:
        return empty_rows(len(idx))
    return t.take(idx)


# -- kernels ---------------------------------------------------------------------------------
def common_subexpressions(exprs: list[exp.Expression]
                          ) -> tuple[list[tuple[str, exp.Expression]], list[exp.Expression]]:
    """Computed subexpressions that occur more than once across `exprs` -> (prelude of
    (key, expression) to evaluate once, `exprs` rewritten to read those keys). Largest
    first; a repeat inside an already shared expression is not shared again."""
    counts: dict[str, int] = {}
    nodes: dict[str, exp.Expression] = {}
    for e in exprs:
        for n in e.walk():
            if isinstance(n, (exp.Column, exp.Literal, Const, exp.Paren, exp.Identifier,
                              exp.DataType)) or n.find(SubqueryRef, AvgOf) is not None \
                    or not n.find(exp.Column):
                continue
            k = n.sql()
            counts[k] = counts.get(k, 0) + 1
            nodes.setdefault(k, n)
    shared = sorted((k for k, c in counts.items() if c > 1), key=len, reverse=True)
    prelude: list[tuple[str, exp.Expression]] = []
    keys: dict[str, str] = {}
    for k in shared:
        if any(k in big for big in keys):   # only occurs inside a shared expression
            continue
        keys[k] = f"$cse{len(keys)}"
    if not keys:
        return [], exprs
    for k, key in keys.items():
        prelude.append((key, nodes[k]))

    def sub(n):
        if not isinstance(n, (exp.Column, exp.Literal)):
            key = keys.get(n.sql())
            if key is not None:
                return keycol(key)
        return n
    return prelude, [e.transform(sub) for e in exprs]


def combine_chunks(a):
    """A ChunkedArray as one Array (anything else as it is)."""
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def change_flags(a) -> np.ndarray:
    """For sorted values: True where a row differs from the previous one (NULLs equal)."""
    a = combine_chunks(a)
    if len(a) < 2:
        return np.zeros(max(len(a) - 1, 0), dtype=bool)
    cur, prev = a.slice(1), a.slice(0, len(a) - 1)
    diff = pc.fill_null(pc.not_equal(cur, prev), True)
    nul_c, nul_p = pc.is_null(cur), pc.is_null(prev)
    same_null = pc.and_(nul_c, nul_p)
    diff = pc.and_(diff, pc.invert(same_null))
    return diff.to_numpy(zero_copy_only=False)


def table_nbytes(t) -> int:
    """Bytes of Arrow buffers `t` keeps alive (shared buffers counted once per column)."""
    try:
        return t.get_total_buffer_size()
    except (AttributeError, pa.ArrowException):
        return 0


def array_nbytes(a) -> int:
    """Bytes of Arrow buffers a Value keeps alive (0 for a Scalar)."""
    if isinstance(a, pa.Scalar):
        return 0
    try:
        return a.get_total_buffer_size()
    except (AttributeError, pa.ArrowException):
        return a.nbytes


def join_parts(parts: list):
    """Per-morsel results -> one ChunkedArray (a morsel typed NULL, e.g. all-NULL CASE
    arms, takes the others' type)."""
    chunks = [c for p in parts for c in (p.chunks if isinstance(p, pa.ChunkedArray) else
                                         [p])]
    types = {c.type for c in chunks}
    if len(types) > 1 and all(pa.types.is_decimal(t) or pa.types.is_null(t) for t in types):
        # morsels typed by their own values (avg of integers: digits and scale from the
        # data): one type holding every morsel's integer digits and its largest scale
        decs = [t for t in types if pa.types.is_decimal(t)]
        digits = max(t.precision - t.scale for t in decs)
        scale = min(max(t.scale for t in decs), max(38 - digits, 0))
        target = pa.decimal128(min(digits + scale, 38), scale)
        chunks = [c if c.type == target else c.cast(target) for c in chunks]
        types = {target}
    if len(types) > 1:
        target = next((c.type for c in chunks if not pa.types.is_null(c.type)), chunks[0].type)
        chunks = [c if c.type == target else c.cast(target) for c in chunks]
        types = {target}
    return pa.chunked_array(chunks, type=types.pop() if types else pa.null())


def as_chunked(a, n: int):
    """An expression's Value over `n` rows as an Array / ChunkedArray (a Scalar repeated)."""
    if isinstance(a, pa.Scalar):
        return pa.repeat(a, n)
    return a


def check_hashable(typ: pa.DataType) -> None:
    """0A000 for an array as a GROUP BY, DISTINCT, UNION, PARTITION BY or join key: Arrow
    hashes and sorts no list values (it was XX000 from Acero)."""
    if isinstance(typ, pa.ExtensionType) or pa.types.is_list(typ):
        raise SqlError("array values as a GROUP BY, DISTINCT, UNION, PARTITION BY or join "
                       "key are not supported", "0A000",
                       hint="Group by array_to_string(x, ',') or by the elements "
                            "(unnest) instead.")


def hash_key(a):
    """A column as a hash key (GROUP BY, DISTINCT, join keys): floats get -0.0 -> 0.0, since
    SQL has -0.0 = 0.0 but Arrow's hashing tells them apart; arrays are 0A000."""
    check_hashable(a.type)
    if pa.types.is_floating(a.type):
        return pc.add(a, pa.scalar(0.0, a.type))
    if pa.types.is_interval(a.type):
        return _interval_span(a)
    return a


def _interval_span(a):
    """Intervals as PostgreSQL's = sees them ('1 mon' = '30 days' = '720:00:00'): each
    value rewritten as whole days (a month as 30) and a time of the same sign below a day,
    so that equal spans are equal values (a group shows that form: '30 days')."""
    if isinstance(a, pa.ChunkedArray):
        return pa.chunked_array([_interval_span(c) for c in a.chunks], a.type)
    f = intervals.columns(a, len(a))
    span_days = f.months * 30 + f.days
    whole = np.trunc(f.us / 86_400_000_000).astype(np.int64)
    days, us = span_days + whole, f.us - whole * 86_400_000_000
    up = (days > 0) & (us < 0)
    down = (days < 0) & (us > 0)
    days = np.where(up, days - 1, np.where(down, days + 1, days))
    us = np.where(up, us + 86_400_000_000, np.where(down, us - 86_400_000_000, us))
    return intervals.build(intervals.Fields(np.zeros(len(a), np.int64), days, us, f.valid))


def hash_keys(t: pa.Table) -> pa.Table:
    """Every column of `t` as a hash key (floats: -0.0 -> 0.0)."""
    return pa.Table.from_arrays([hash_key(c) for c in t.columns], names=t.column_names)


# -- short text keys as integers -------------------------------------------------------------
# Acero hashes a string key column per row through its variable-length path; an int64
# column takes its fixed-width one, and a GROUP BY over text keys of a few bytes (TPC-H
# Q01's l_returnflag / l_linestatus, Q12's l_shipmode) pays for the former on millions of
# rows to find a handful of groups. `pack_short` writes each value of at most SHORT_BYTES
# bytes into one int64 - its length in the low byte, byte j in byte j + 1 - which is
# injective (equal codes iff equal values), and `unpack_short` turns the groups' codes back
# into the values, byte for byte.
SHORT_BYTES = 7
_LITTLE_ENDIAN = sys.byteorder == "little"
_PACKABLE = (pa.string(), pa.binary(), pa.large_string(), pa.large_binary())


def packable(typ: pa.DataType) -> bool:
    """Whether `pack_short` may encode a column of `typ`."""
    return typ in _PACKABLE


def _one_chunk(a):
    """An Array, or a ChunkedArray's only chunk (combine_chunks copies even that)."""
    if isinstance(a, pa.ChunkedArray):
        return a.chunk(0) if a.num_chunks == 1 else a.combine_chunks()
    return a


def pack_short(a) -> pa.Array | None:
    """A text / binary column's values as int64 codes (NULL where the value is NULL), or
    None when a value is longer than SHORT_BYTES bytes."""
    a = _one_chunk(a)
    n = len(a)
    bufs = a.buffers()
    wide = pa.types.is_large_string(a.type) or pa.types.is_large_binary(a.type)
    offsets = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32,
                            count=a.offset + n + 1)[a.offset:]
    if not n:
        return pa.array([], pa.int64())
    first, end = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and end > first \
        else np.zeros(0, np.uint8)
    # code = length | byte 0 << 8 | byte 1 << 16 ...
    if (end - first) % n == 0 and (end - first) // n <= SHORT_BYTES and \
            (end - first == 0 or np.all(np.diff(offsets) == (end - first) // n)):
        # every value the same width (CHAR(n), flags, codes): the bytes are one block
        width = (end - first) // n
        block = data[first:end].reshape(n, width)
        if _LITTLE_ENDIAN:
            # each code's eight bytes written in place (byte 0 the length, byte j + 1 the
            # value's byte j) and read as int64: one zeroed buffer and two strided copies,
            # ~5x fewer passes than shifting each byte column in (TPC-H Q01's flags)
            raw = np.zeros((n, 8), dtype=np.uint8)
            raw[:, 0] = width
            raw[:, 1:width + 1] = block
            codes = raw.view(np.int64).reshape(n)
        else:
            codes = np.full(n, width, dtype=np.int64)
            for j in range(width):
                codes |= block[:, j].astype(np.int64) << (8 * (j + 1))
    else:
        lens = np.diff(offsets)
        if a.null_count:      # a NULL slot's bytes are anything: 0 of them, not a refusal
            lens = np.where(a.is_valid().to_numpy(zero_copy_only=False), lens, 0)
        longest = int(lens.max())
        if longest > SHORT_BYTES:
            return None
        codes = lens.astype(np.int64)
        starts = offsets[:-1]
        for j in range(longest):
            has = lens > j
            codes[has] |= data[starts[has] + j].astype(np.int64) << (8 * (j + 1))
    validity = None
    if a.null_count:
        validity = pc.is_valid(a).buffers()[1]
        codes[~a.is_valid().to_numpy(zero_copy_only=False)] = 0   # NULL: one code
    return pa.Array.from_buffers(pa.int64(), n, [validity, pa.py_buffer(codes)],
                                 null_count=a.null_count)


def unpack_short(codes, typ: pa.DataType) -> pa.Array:
    """The values of `typ` that `pack_short` encoded as `codes` (NULL stays NULL)."""
    codes = combine_chunks(codes)
    n = len(codes)
    valid = codes.is_valid().to_numpy(zero_copy_only=False) if codes.null_count else None
    c = codes.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
    lens = (c & np.uint64(0xFF)).astype(np.int64)
    shifts = np.arange(1, SHORT_BYTES + 1, dtype=np.uint64) * np.uint64(8)
    matrix = ((c[:, None] >> shifts[None, :]) & np.uint64(0xFF)).astype(np.uint8)
    data = matrix[np.arange(SHORT_BYTES)[None, :] < lens[:, None]]   # row-major: in order
    wide = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
    offsets = np.zeros(n + 1, dtype=np.int64 if wide else np.int32)
    np.cumsum(lens, out=offsets[1:])
    validity = None if valid is None else pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offsets),
                                          pa.py_buffer(np.ascontiguousarray(data))],
                                 null_count=0 if valid is None else int(n - valid.sum()))


_TRUES = [pa.array(np.ones(1 << 17, dtype=np.bool_))]   # grown to the longest seen


def validity_only(a) -> pa.Array:
    """A column for count(x): true where `a` is not NULL, NULL where it is. Counting it
    gives count(x), and it is one bit a row where `a` may be 16 bytes (a DECIMAL); without
    NULLs it is a slice of one shared array, not a new one."""
    n = len(a)
    if a.null_count:
        return pa.array(np.ones(n, dtype=np.bool_), pa.bool_(),
                        mask=~combine_chunks(a.is_valid()).to_numpy(zero_copy_only=False))
    if n > len(_TRUES[0]):
        _TRUES[0] = pa.array(np.ones(n, dtype=np.bool_))
    return _TRUES[0].slice(0, n)
