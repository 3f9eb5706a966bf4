"""Sorting and set operations: `Sort` (a sample sort on the first key for numeric and temporal
keys, one kernel call otherwise; top-N per morsel; PostgreSQL's NULL order), `Distinct`
(Acero's hash aggregation over the row hash, -0.0 equal to 0.0), UNION / INTERSECT / EXCEPT
(types unified first, hash joins on the not-distinct key), and WITH RECURSIVE's
`RecursiveUnion` (step after step over a `WorkTable`).
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from planner import logical as L
from planner.errors import SqlError
from planner.expr import ArrayType, parse_array_literal, pg_name as _pg_type
from planner import guard as _guard
from planner.executor.kernels import (combine_chunks, check_hashable, concat_tables,
                                      empty_rows, hash_keys, slice_rows, table_nbytes,
                                      take_rows)
from planner.executor.joins import hash_join


def _sortable_numpy(a) -> np.ndarray:
    """A numeric/temporal column as numbers that order as its values do (NULLs as 0:
    the NULL flag column sorts them)."""
    a = combine_chunks(a)
    if not (pa.types.is_integer(a.type) or pa.types.is_floating(a.type)):
        a = a.view(pa.int32() if a.type.bit_width == 32 else pa.int64())
    return pc.fill_null(a, 0).to_numpy(zero_copy_only=False)


def add_sort_key(work: dict, sort_keys: list, name: str, arr, k: L.SortKey) -> None:
    """Sort columns for one ORDER BY key with PostgreSQL's NULL order (last for ASC, first
    for DESC, unless NULLS FIRST/LAST): a NULL flag column first when there are NULLs."""
    nulls_first = k.nulls_first if k.nulls_first is not None else k.desc
    if arr.null_count:
        work[f"{name}$null"] = pc.is_null(arr)
        sort_keys.append((f"{name}$null", "descending" if nulls_first else "ascending"))
    if pa.types.is_floating(arr.type) and pc.any(pc.is_nan(arr)).as_py():
        # NaN is above every other float (PostgreSQL); Arrow places NaNs at the end
        # whatever the direction, so a NaN flag orders them first
        work[f"{name}$nan"] = pc.fill_null(pc.is_nan(arr), False)
        sort_keys.append((f"{name}$nan", "descending" if k.desc else "ascending"))
    if isinstance(arr.type, ArrayType):
        arr = _array_rank(arr)
    if pa.types.is_interval(arr.type):
        # Arrow cannot sort MonthDayNano; PostgreSQL orders intervals by their span with a
        # month as 30 days: (whole days, nanoseconds within the day) after normalising
        days, nanos = interval_span(arr)
        work[f"{name}$days"] = days
        sort_keys.append((f"{name}$days", "descending" if k.desc else "ascending"))
        arr = nanos
    work[name] = arr
    sort_keys.append((name, "descending" if k.desc else "ascending"))


_DAY_NS = 86_400_000_000_000


def _array_rank(arr) -> pa.Array:
    """Arrays (stored as their text) -> int64 ranks in PostgreSQL's array order: element
    by element in the element type's order, NULL elements after the others, a prefix
    before the longer array. A Python loop per distinct array: Arrow cannot sort lists,
    and arrays as sort keys are rare and short."""
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    vt = arr.type.value_type
    if pa.types.is_integer(vt) or pa.types.is_floating(vt) or pa.types.is_decimal(vt):
        conv = float if pa.types.is_floating(vt) else (
            decimal.Decimal if pa.types.is_decimal(vt) else int)
    else:
        conv = str

    def key(text: str) -> tuple:
        return tuple((1, 0) if e is None else (0, conv(e)) for e in parse_array_literal(text))
    dictionary = pc.unique(a.storage)
    texts = [t for t in dictionary.to_pylist() if t is not None]
    rank = {t: i for i, t in enumerate(sorted(texts, key=key))}
    ranks = pa.array([rank.get(t) for t in dictionary.to_pylist()], pa.int64())
    return ranks.take(pc.index_in(a.storage, value_set=dictionary))


def interval_span(arr) -> tuple[pa.Array, pa.Array]:
    """MonthDayNano intervals -> (days, ns within the day) int64 arrays, months as 30 days:
    ordering by the pair is PostgreSQL's interval order (a span in int64 nanoseconds would
    overflow after ~292 years). Read from the values buffer (16 bytes a value), vectorised."""
    a = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    rec = np.frombuffer(a.buffers()[1], dtype=np.dtype(
        [("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]))[a.offset:a.offset + len(a)]
    nanos = rec["nanos"]
    days = rec["months"].astype(np.int64) * 30 + rec["days"] + nanos // _DAY_NS
    return pa.array(days), pa.array(nanos % _DAY_NS)


def _not_distinct_key(a) -> tuple:
    """A join key column as (values with NULLs replaced, is NULL): equal pairs mean IS NOT
    DISTINCT FROM. The replacement is one fixed value of the type (the same on both sides
    of the join; only the flag tells NULLs apart)."""
    a = combine_chunks(a)
    if pa.types.is_null(a.type):
        a = a.cast(pa.int8())
    flags = pc.is_null(a)
    if a.null_count == 0:
        return a, flags
    for seed in (pa.scalar(0, pa.int32()), pa.scalar(decimal.Decimal(0)),
                 pa.scalar(0, pa.int64()), pa.scalar(""), pa.scalar(b""),
                 pa.scalar(pa.MonthDayNano([0, 0, 0]), pa.month_day_nano_interval())):
        # a zero / empty value of the type (date, timestamp, interval ...)
        try:
            return pc.fill_null(a, seed.cast(a.type)), flags
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    raise SqlError(f"cannot compare values of type {_pg_type(a.type)} in a set operation",
                   "42883")


def _setop_types(left: pa.Table, right: pa.Table, keys: list[str]
                 ) -> tuple[pa.Table, pa.Table]:
    """Both inputs of a set operation renamed to `keys`, each column pair cast to its common
    type by the expression rules (PostgreSQL's: int and numeric give numeric, numeric and
    double give double), not Arrow's promotion; 42804 when there is none."""
    from planner.expr import cast as _cast, supertype as _supertype
    lcols, rcols = [], []
    for a, b in zip(left.columns, right.columns):
        if a.type != b.type and not pa.types.is_null(a.type) and not pa.types.is_null(b.type):
            t = _supertype([a.type, b.type])
            if t is None:
                raise SqlError(f"UNION/INTERSECT/EXCEPT types {_pg_type(a.type)} and "
                               f"{_pg_type(b.type)} cannot be matched", "42804")
            a = a if a.type == t else _cast(combine_chunks(a), t, None)
            b = b if b.type == t else _cast(combine_chunks(b), t, None)
        lcols.append(a)
        rcols.append(b)
    return (pa.Table.from_arrays(lcols, names=keys), pa.Table.from_arrays(rcols, names=keys))


def concat_promote(parts: list, name: str) -> pa.Array:
    """One VALUES column from its rows' values: the common type by the expression rules
    (1 and 1.5 give DECIMAL, as in PostgreSQL), 42804 when there is none."""
    from planner.expr import cast as _cast, supertype as _supertype
    types = [p.type for p in parts if not pa.types.is_null(p.type)]
    target = _supertype(types) if types else pa.null()
    if target is None:
        raise SqlError("VALUES types " + " and ".join(sorted({_pg_type(t) for t in types}))
                       + " cannot be matched", "42804")
    try:
        cast = [p if p.type == target else _cast(p, target, None) for p in parts]
        return pa.chunked_array([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
                                 for c in cast], type=target).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        raise SqlError("VALUES types cannot be matched", "42804") from None


def _occurrences(t: pa.Table, keys: list[str]) -> pa.Array:
    """Each row's 1-based number among the rows of `t` equal to it on `keys` (DISTINCT's
    equality: NULL equals NULL, -0.0 equals 0.0), by one hash grouping of the row numbers."""
    n = t.num_rows
    k = t.select(keys)
    if _needs_hash_keys(k.schema):
        k = hash_keys(k)
    k = k.append_column("$row", pa.array(np.arange(n, dtype=np.int64)))
    lists = combine_chunks(k.group_by(keys, use_threads=False).aggregate(
        [("$row", "list")]).column("$row_list"))
    rows = pc.list_flatten(lists).to_numpy()
    parent = pc.list_parent_indices(lists).to_numpy()
    starts = lists.offsets.to_numpy()[:-1] - lists.offsets[0].as_py()
    occ = np.empty(n, dtype=np.int64)
    occ[rows] = np.arange(len(rows), dtype=np.int64) - starts[parent] + 1
    return pa.array(occ)


def _recursive_type(t: pa.DataType) -> pa.DataType:
    """The type a recursive CTE's column keeps: the anchor's, a DECIMAL widened to 38
    digits (PostgreSQL's numeric has no precision: 1.0 doubling step by step must not
    overflow the literal's DECIMAL(2,1))."""
    return pa.decimal128(38, t.scale) if pa.types.is_decimal(t) else t


def _cast_columns(t: pa.Table, types: list[pa.DataType], keys: list[str]) -> pa.Table:
    """`t`'s columns, by position, named `keys` and in the anchor's column types (42804
    when one cannot be)."""
    from planner.expr import cast as _cast
    cols = []
    for i, (c, typ) in enumerate(zip(t.columns, types)):
        if c.type != typ and not pa.types.is_null(typ):
            try:                             # (a value out of range: the cast's 22003)
                c = _cast(combine_chunks(c), typ, None)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                raise SqlError(f"recursive query column {i + 1} has type {_pg_type(typ)} in "
                               f"its non-recursive term but type {_pg_type(c.type)} in its "
                               "recursive term", "42804") from None
        cols.append(c)
    return pa.Table.from_arrays(cols, names=keys)


def _needs_hash_keys(schema: pa.Schema) -> bool:
    """Whether a column's values need hash_key's rewriting to compare as SQL's = does
    (floats: -0.0 is 0.0; intervals: '1 mon' is '30 days')."""
    return any(pa.types.is_floating(f.type) or pa.types.is_interval(f.type) for f in schema)


def distinct(t: pa.Table) -> pa.Table:
    if t.num_columns == 0:
        return empty_rows(min(t.num_rows, 1))
    for f in t.schema:
        check_hashable(f.type)
    if _needs_hash_keys(t.schema):
        t = hash_keys(t)
    r = t.group_by(t.column_names, use_threads=True).aggregate([])
    return r.select(t.column_names)


class SortOperators:
    """Sort (sample sort, top-N), Distinct and set operations.

    One part of a statement's `Executor` (`Executor.sorts`), which it reaches
    through its public members only: `ex.run(node)` for its inputs, `ex.eval`,
    `ex.guard`, `ex.stats`, ... and `ex.work_tables`."""

    def __init__(self, ex):
        self.ex = ex            # the Executor whose statement this part runs

    def run_distinct(self, node: L.Distinct) -> pa.Table:
        t = self.ex.run(node.input)
        return self.distinct(t)

    def distinct(self, t: pa.Table) -> pa.Table:
        if t.num_columns == 0 or t.num_rows <= _guard.MORSEL_ROWS:
            return distinct(t)
        for f in t.schema:
            check_hashable(f.type)
        # -0.0 and 0.0 are one value, as in the one-call distinct()
        prepare = hash_keys if _needs_hash_keys(t.schema) else None
        return self.ex.aggregates.aggregate_plan(t, t.column_names, [], prepare).select(t.column_names)

    def run_sort(self, node: L.Sort) -> pa.Table:
        t = self.ex.run(node.input)
        if t.num_rows <= 1:
            return t
        work: dict = {}
        sort_keys: list = []
        for i, k in enumerate(node.keys):
            add_sort_key(work, sort_keys, f"s{i}", self.ex.eval(k.expr, t), k)
        keys_table = pa.table(work)
        if node.limit is not None and node.limit < t.num_rows // 8:
            idx = self._top_k(keys_table, node.limit, sort_keys)
            idx = idx.take(pc.sort_indices(keys_table.take(idx), sort_keys=sort_keys))
        else:
            idx = self.sort_indices(keys_table, sort_keys)
            if node.limit is not None:
                idx = idx.slice(0, node.limit)
        return self.take(t, idx)

    def sort_indices(self, keys: pa.Table, sort_keys: list) -> pa.Array:
        """`pc.sort_indices(keys, sort_keys)` (stable), cut into steps with a check between:
        a sample sort on the first key when it is numeric or temporal. Splitters from an
        evenly strided sample cut the rows into buckets of ~4 morsels by the first key's
        value (a morsel at a time); each bucket is sorted on its own, in bucket order. Rows
        with equal first keys share a bucket, rows keep their order inside a bucket, so
        the permutation is the one the single kernel call gives. Other key types, and a
        first key too skewed to split, are sorted in one call."""
        n, step = keys.num_rows, _guard.MORSEL_ROWS
        self.ex.guard.check()
        col, order = sort_keys[0]
        nulls = None
        if col.endswith("$null") and len(sort_keys) > 1:     # the NULL flag of the key
            nulls, (col, order) = (sort_keys[0][0], sort_keys[0][1]), sort_keys[1]
        typ = keys.schema.field(col).type
        if n <= 4 * step or not (pa.types.is_integer(typ) or pa.types.is_floating(typ) or
                                 pa.types.is_date(typ) or pa.types.is_timestamp(typ) or
                                 pa.types.is_time(typ) or pa.types.is_duration(typ)):
            return pc.sort_indices(keys, sort_keys=sort_keys)
        vals = _sortable_numpy(keys.column(col))
        if vals.dtype.kind == "f" and np.isnan(vals).any():    # Arrow's NaN order: one call
            return pc.sort_indices(keys, sort_keys=sort_keys)
        flag = None
        if nulls is not None:
            flag = keys.column(nulls[0]).to_numpy(zero_copy_only=False)
        sample = vals[:: max(1, n // 8192)]
        if flag is not None:
            sample = sample[~flag[:: max(1, n // 8192)]]
        nb = max(2, n // (4 * step))
        splitters = np.unique(np.quantile(sample, np.linspace(0, 1, nb + 1)[1:-1],
                                          method="lower")) if len(sample) else sample
        if len(splitters) < 2:
            return pc.sort_indices(keys, sort_keys=sort_keys)
        nbk = len(splitters) + 3                # NULLs first | values ... | NULLs last
        members: list[list[np.ndarray]] = [[] for _ in range(nbk)]
        for start in range(0, n, step):
            self.ex.guard.check()
            v = vals[start:start + step]
            b = np.searchsorted(splitters, v, side="right")
            if order == "descending":
                b = len(splitters) - b
            b = b + 1                           # 1..len(splitters)+1
            if flag is not None:
                f = flag[start:start + step]
                # NULLs first (the flag sorts descending): bucket 0; else the last one
                b = np.where(f, 0 if nulls[1] == "descending" else nbk - 1, b)
            pos = np.argsort(b, kind="stable")
            counts = np.bincount(b, minlength=nbk)
            at = 0
            for i, c in enumerate(counts):
                if c:
                    members[i].append(pos[at:at + c] + start)
                    at += c
        out = []
        for parts in members:
            if not parts:
                continue
            self.ex.guard.check()
            rows = pa.array(np.concatenate(parts))
            out.append(rows.take(pc.sort_indices(keys.take(rows), sort_keys=sort_keys)))
        return pa.concat_arrays(out).cast(pa.uint64())     # sort_indices' type

    def _top_k(self, keys_table: pa.Table, k: int, sort_keys) -> pa.Array:
        """Row numbers of the first `k` rows in `sort_keys` order (unordered): the top k
        of each morsel, then the top k of those candidates."""
        step = _guard.MORSEL_ROWS
        n = keys_table.num_rows
        if n <= step:
            return pc.select_k_unstable(keys_table, k=k, sort_keys=sort_keys)
        cands = []
        for start in range(0, n, step):
            self.ex.guard.check()
            m = keys_table.slice(start, step)
            i = pc.select_k_unstable(m, k=min(k, m.num_rows), sort_keys=sort_keys)
            cands.append(pc.add(i.cast(pa.int64()), start))
        cand = pa.concat_arrays(cands)
        best = pc.select_k_unstable(keys_table.take(cand), k=k, sort_keys=sort_keys)
        return cand.take(best)

    def take(self, t: pa.Table, idx) -> pa.Table:
        """`t.take(idx)`, a morsel of indices at a time."""
        step = _guard.MORSEL_ROWS
        if len(idx) <= step:
            return take_rows(t, idx)
        parts = []
        for start in range(0, len(idx), step):
            self.ex.guard.check()
            part = take_rows(t, idx.slice(start, step))
            self.ex.guard.charge(table_nbytes(part))
            parts.append(part)
        return concat_tables(parts)

    # -- set operations --------------------------------------------------------------------
    def run_recursiveunion(self, node: L.RecursiveUnion) -> pa.Table:
        """WITH RECURSIVE (L.RecursiveUnion): step after step, the recursive term over the
        rows the last step added (its WorkTable reads `ex.work_tables[ref]`), each step's rows
        cast to the anchor's column types; UNION keeps a row only the first time it is
        seen (a hash grouping of all rows so far per step: O(rows x steps)). Each step is
        charged to the memory meter and checks for cancel, so a recursion that never ends
        stops at query_mem_limit, statement_timeout or a cancel."""
        first = self.ex.run(node.anchor).select(L.output_keys(node.anchor))
        if not node.all:
            first = self.distinct(first)
        types = [_recursive_type(f.type) for f in first.schema]
        first = _cast_columns(first, types, node.keys)
        parts, seen = [first], first
        work = first
        rkeys = L.output_keys(node.recursive)
        while work.num_rows:
            self.ex.guard.charge(table_nbytes(work))
            self.ex.work_tables[node.ref] = work
            step = _cast_columns(self.ex.run(node.recursive).select(rkeys), types, node.keys)
            if not node.all and step.num_rows:
                # one chunk: a hash grouping over a table of one chunk per step was most
                # of the time (30x at 2,000 steps)
                both = concat_tables([seen, step]).combine_chunks()
                new = np.flatnonzero(_occurrences(both, node.keys).to_numpy() == 1)
                step = take_rows(both, pa.array(new[new >= seen.num_rows]))
                seen = concat_tables([seen, step])
            parts.append(step)
            work = step
        self.ex.work_tables.pop(node.ref, None)
        return concat_tables(parts)

    def run_worktable(self, node: L.WorkTable) -> pa.Table:
        work = self.ex.work_tables[node.ref]
        return pa.Table.from_arrays(work.columns, names=node.keys)

    def run_setop(self, node: L.SetOp) -> pa.Table:
        left = self.ex.run(node.left)
        right = self.ex.run(node.right)
        left, right = _setop_types(left, right, node.keys)
        try:
            both = pa.concat_tables([left, right], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise SqlError(f"UNION/INTERSECT/EXCEPT types cannot be matched: {e}",
                           "42804") from None
        if node.kind == "union":
            return both if node.all else self.distinct(both)
        left, right = slice_rows(both, 0, left.num_rows), slice_rows(both, left.num_rows)
        if any(isinstance(f.type, pa.ExtensionType) or pa.types.is_list(f.type)
               for f in both.schema):
            raise SqlError(f"{node.kind.upper()} over array columns is not supported",
                           "0A000")
        if not node.all:
            left, right = self.distinct(left), self.distinct(right)
        # rows are compared as in DISTINCT (NULL matches NULL), which a hash join does not
        # do: each key is joined as (value with NULL filled in, is NULL)
        keys = [p for k in node.keys for p in _not_distinct_key(left.column(k))]
        rkeys = [p for k in node.keys for p in _not_distinct_key(right.column(k))]
        if node.all:
            # the k-th copy of a row on the left meets the k-th copy on the right: INTERSECT
            # ALL keeps min(m, n) copies of a row m times left and n times right, EXCEPT ALL
            # max(m - n, 0)
            keys.append(_occurrences(left, node.keys))
            rkeys.append(_occurrences(right, node.keys))
        # the join carries only a row number (Acero refuses NULL-typed payload columns,
        # `SELECT NULL, 1 EXCEPT ...`); the surviving rows are taken from `left`
        rows = pa.table({"$row": pa.array(np.arange(left.num_rows, dtype=np.int64))})
        other = pa.table({"$pad": pa.nulls(right.num_rows, pa.int8())})
        kept = hash_join(rows, other, keys, rkeys,
                         "left semi" if node.kind == "intersect" else "left anti", self.ex)
        return self.take(left, kept.column("$row"))

