"""What every operator of the executor shares: per-node statistics (`NodeStats`, EXPLAIN
ANALYZE), common subexpressions, chunk and size helpers for the guard's memory metering, and
the hash of a key tuple (`hash_key`) that joins, DISTINCT and set operations agree on.
"""

from __future__ import annotations

import dataclasses

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
