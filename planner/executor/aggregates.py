"""Aggregation and windows: `Aggregate` (Acero hash aggregation fed by morsels; whole-column
kernels without GROUP BY; DISTINCT arguments; array_agg / string_agg's values in order and
the ordered-set aggregates over them; one aggregation per grouping set) and
`Window` (partition and peer boundaries from one sort, running and whole-frame aggregates,
ranking functions).

array_agg and list_agg (string_agg's non-NULL values) with their DISTINCT and ORDER BY run
in the same pass as the other aggregates: the hash aggregation also collects each group's
row numbers (`hash_list`), the input is sorted once per such aggregate by (group, ORDER BY
keys) - stable, so ties keep the input order - and each group's values are a slice of the
sorted column (`_list_aggregate`): O(n log n), where a query per group was O(groups x n).

The hash aggregation's input is cheapened where that is exact: text keys of a few bytes can
go as int64 codes (`kernels.pack_short`, with `LongKeys` redoing the aggregation should a
later value not fit; off by default, `PACK_SHORT_KEYS`), count(x) reads x's validity
only, and keys that come in runs (the first morsel decides) are pre-aggregated per run in
each morsel (`_run_partials`) - a streamed input's partials with one integer key are then
summed by sorting, not hashed (`_sorted_sums`). A scan-fed aggregation's morsels are
prepared on the scan's pool threads once the first has fixed the plan (`PrepareInScan`).
"""

from __future__ import annotations

import dataclasses
import decimal
import itertools
import threading
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.types import real_range_lost
from planner import logical as L
from planner.errors import SqlError
from planner import guard as _guard
from planner.expr import evaluate, pg_name as _pg_name
from planner.executor.kernels import (
    change_flags,
    as_chunked,
    combine_chunks,
    check_hashable,
    common_subexpressions,
    empty_rows,
    NodeStats,
    hash_key,
    slice_rows,
    pack_short,
    packable,
    unpack_short,
    validity_only,
)
from planner.executor import scaled as _scaled
from planner.executor.group_keys import split_groups
from planner.executor.sort import add_sort_key, interval_span
from planner.expr import integer_avg, intervals, list_to_array
from planner.expr.subplans import HostCall, InSubPlan, SubPlan


def _window_keys(a) -> list:
    """A PARTITION BY / ORDER BY value as the arrays a window compares it by: itself, or
    an interval as its span (whole days with a month as 30, ns within the day; NULLs
    kept), as PostgreSQL compares intervals ('1 day' and '24 hours' are peers). Arrow can
    neither sort nor compare month-day-nano values."""
    if not pa.types.is_interval(a.type):
        return [a]
    days, nanos = interval_span(a)
    if a.null_count:
        valid = pc.is_valid(a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a)
        days = pc.if_else(valid, days, pa.scalar(None, pa.int64()))
        nanos = pc.if_else(valid, nanos, pa.scalar(None, pa.int64()))
    return [days, nanos]



def _decimal_cumsum(x: pa.Array) -> pa.Array:
    """Running sum of a decimal128 array without NULLs (Arrow has no decimal kernel): on the
    unscaled integers - int64 when every running total fits, else Python ints (exact)."""
    n = len(x)
    words = np.frombuffer(x.buffers()[1], dtype=np.int64,
                          count=2 * (x.offset + n))[2 * x.offset:].reshape(n, 2) if n else \
        np.zeros((0, 2), dtype=np.int64)
    lo, hi = words[:, 0], words[:, 1]
    fits = bool(np.all(hi == (lo >> 63)))           # every value is an int64
    if fits:
        approx = np.cumsum(lo.astype(np.float64))
        fits = bool(np.all(np.abs(approx) < 2.0 ** 62))
    if fits:
        total = np.cumsum(lo)
        data = np.empty(2 * n, dtype=np.int64)
        data[0::2] = total
        data[1::2] = total >> 63
        # |total| < 2^62 has at most 19 digits: a label that leaves room to subtract
        return pa.Array.from_buffers(pa.decimal128(max(19, x.type.scale + 1), x.type.scale),
                                     n, [None, pa.py_buffer(data)])
    # Rare (totals beyond 2^62 unscaled): exact Python arithmetic, one step per row.
    acc, out = decimal.Decimal(0), []
    for v in x.to_pylist():
        acc += v
        out.append(acc)
    try:
        return pa.array(out, pa.decimal128(37, x.type.scale))
    except (pa.ArrowInvalid, OverflowError):
        raise SqlError("numeric field overflow in a window sum", "22003") from None


def decimal_digits_needed(col, typ: pa.DataType) -> int:
    """The decimal precision the values of DECIMAL column `col` need (at least scale + 1)."""
    mm = pc.min_max(col)
    big = max((abs(v.as_py()) for v in (mm["min"], mm["max"]) if v.is_valid),
              default=decimal.Decimal(0))
    return min(38, max(len(str(int(big.scaleb(typ.scale)))), typ.scale + 1))


def _float_window_sum(x: pa.Array, first: np.ndarray, last: np.ndarray,
                      typed: bool = True) -> pa.Array:
    """Sums of x[first[i] .. last[i]] (first <= last) by differences of one cumulative sum, with the
    non-finite values counted apart: an infinity or NaN in one partition must not turn the
    differences of every later row into NaN (inf - inf). In x's type (sum(real) is real),
    or double precision when not `typed` (avg(real) divides the double sum)."""
    v = x.to_numpy(zero_copy_only=False).astype(np.float64)
    finite = np.isfinite(v)

    def window(c: np.ndarray) -> np.ndarray:
        return _span(np.cumsum(c), first, last)
    total = window(np.where(finite, v, 0.0))
    pos, neg, nan = (window(m.astype(np.int64)) for m in (v == np.inf, v == -np.inf,
                                                           np.isnan(v)))
    total = np.where(pos > 0, np.inf, total)
    total = np.where(neg > 0, -np.inf, total)
    total = np.where((nan > 0) | ((pos > 0) & (neg > 0)), np.nan, total)
    return pa.array(total).cast(x.type) if typed else pa.array(total)


_HASH_AGG = {
    "sum": ("sum", None), "min": ("min", None), "max": ("max", None),
    "count": ("count", pc.CountOptions(mode="only_valid")), "count_star": ("count_all", None),
    "stddev": ("stddev", pc.VarianceOptions(ddof=1)),
    "stddev_pop": ("stddev", pc.VarianceOptions(ddof=0)),
    "variance": ("variance", pc.VarianceOptions(ddof=1)),
    "variance_pop": ("variance", pc.VarianceOptions(ddof=0)),
    "bool_and": ("all", None), "bool_or": ("any", None),
}
_DISTINCT_AGG = {
    "count": ("count_distinct", pc.CountOptions(mode="only_valid")),
    "min": ("min", None), "max": ("max", None),
}


def _aggregate_lists(a: L.AggCall, lists) -> pa.Array:
    """`a` (non-DISTINCT form) over each list of a list column (hash_distinct's output):
    one vectorised group_by over the flattened values keyed by list index; an empty list
    (a group without non-NULL values) gives NULL."""
    lists = combine_chunks(lists)
    n = len(lists)
    fn, opts = _HASH_AGG[a.func]
    flat = pa.table({"i": pc.list_parent_indices(lists), "v": pc.list_flatten(lists)})
    r = flat.group_by("i").aggregate([("v", fn, opts) if opts else ("v", fn)])
    pos = pc.index_in(pa.array(np.arange(n)), r.column("i"))
    return pc.take(r.column(f"v_{fn}"), pos)


_NUMERIC_AGGREGATES = {"sum", "avg", "stddev", "stddev_pop", "variance", "variance_pop"}


def _check_aggregate_arg(func: str, key: str, typ: pa.DataType) -> None:
    """42883 as PostgreSQL words it for an aggregate over a type it has no form for
    (`sum(text)`, `bool_and(integer)`); Arrow's kernels would fail with their own text."""
    if func in _NUMERIC_AGGREGATES:
        ok = pa.types.is_integer(typ) or pa.types.is_floating(typ) or \
            pa.types.is_decimal(typ) or pa.types.is_null(typ) or \
            (func in ("sum", "avg") and pa.types.is_interval(typ))   # sum, avg of intervals
    elif func == "percentile_cont":
        ok = pa.types.is_integer(typ) or pa.types.is_floating(typ) or \
            pa.types.is_decimal(typ) or pa.types.is_null(typ)
        if not ok:
            raise SqlError(f"function percentile_cont(double precision, {_pg_name(typ)}) "
                           "does not exist", "42883",
                           hint="No function matches the given name and argument types. "
                                "You might need to add explicit type casts.")
    elif func in ("bool_and", "bool_or"):
        ok = pa.types.is_boolean(typ) or pa.types.is_null(typ)
    elif func in ("min", "max"):                  # no min(boolean): use bool_and
        ok = not pa.types.is_boolean(typ)
    else:
        return
    if not ok:
        name = "avg" if key.endswith(".sum") else func    # avg is bound as sum / count
        raise SqlError(f"function {name}({_pg_name(typ)}) does not exist", "42883",
                       hint="No function matches the given name and argument types. You "
                            "might need to add explicit type casts.")


def _aggregate_all(a: L.AggCall, arr, n: int) -> pa.Array:
    """One aggregate over a whole column (no GROUP BY) -> a one-element array."""
    if a.distinct and a.func not in _DISTINCT_AGG:     # sum/avg(DISTINCT x), ...
        arr = pc.unique(combine_chunks(arr))
    if a.func == "count_star":
        return pa.array([n], pa.int64())
    if a.func == "count":
        v = pc.count_distinct(arr, mode="only_valid") if a.distinct else \
            pc.count(arr, mode="only_valid")
        return pa.array([v.as_py()], pa.int64())
    if a.func == "sum" and pa.types.is_interval(arr.type):
        return _interval_sums(*(pc.sum(c, min_count=1)
                                for c in _interval_field_sums(combine_chunks(arr))))
    if a.func == "sum":
        s = pc.sum(arr, min_count=1)
        return pa.array([s.as_py()], s.type)
    if a.func in ("min", "max"):
        s = pc.min_max(arr)[a.func]
        if a.func == "max" and pa.types.is_floating(arr.type) and \
                pc.any(pc.is_nan(arr)).as_py():
            return pa.array([float("nan")], arr.type)      # NaN is the largest float
        return pa.array([s.as_py()], arr.type)
    if a.func in ("stddev", "stddev_pop", "variance", "variance_pop"):
        ddof = 0 if a.func.endswith("_pop") else 1
        f = pc.stddev if a.func.startswith("stddev") else pc.variance
        s = f(arr, ddof=ddof, min_count=1)
        return pa.array([s.as_py()], pa.float64())
    if a.func in ("bool_and", "bool_or"):
        s = (pc.all if a.func == "bool_and" else pc.any)(arr, min_count=1)
        return pa.array([s.as_py()], pa.bool_())
    raise SqlError(f"aggregate {a.func} is not supported", "0A000")


_ORDERED_SET = ("percentile_cont", "percentile_disc", "mode")
# aggregates over each group's values in order: the sort path of _aggregate_lists
_LIST_AGGREGATES = ("array_agg", "list_agg") + _ORDERED_SET


def _ordered_set_value(a: L.AggCall, vals: pa.Array, group: np.ndarray,
                       counts: np.ndarray) -> pa.Array:
    """percentile_cont / percentile_disc / mode of each group, from its non-NULL values
    `vals` sorted by (group, the WITHIN GROUP order) - PostgreSQL's definitions: cont
    interpolates in double precision between the values at ranks floor and ceil of
    f * (n - 1); disc is the value at rank max(ceil(f * n), 1) (1-based); mode is the most
    frequent value, the first in the order among equally frequent ones. A group without
    values (or a NULL fraction) gives NULL."""
    groups = len(counts)
    start = np.cumsum(counts) - counts
    empty = counts == 0
    if a.func != "mode" and a.param is None:
        return pa.nulls(groups, pa.float64() if a.func == "percentile_cont" else vals.type)
    if a.func == "percentile_cont":
        v = vals.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        pos = a.param * np.maximum(counts - 1, 0)
        lo, hi = np.floor(pos).astype(np.int64), np.ceil(pos).astype(np.int64)
        first = v[np.minimum(start + lo, max(len(v) - 1, 0))] if len(v) else np.zeros(groups)
        second = v[np.minimum(start + hi, max(len(v) - 1, 0))] if len(v) else first
        with np.errstate(invalid="ignore", over="ignore"):
            out = np.where(lo == hi, first, first + (pos - lo) * (second - first))
        return pa.array(out, pa.float64(), mask=empty)
    if a.func == "percentile_disc":
        rank = np.maximum(np.ceil(a.param * counts), 1).astype(np.int64)
        return vals.take(pa.array(start + rank - 1, mask=empty))
    # mode: runs of equal values within a group; the longest, first in order on a tie
    new_run = np.ones(len(vals), dtype=bool)
    if len(vals) > 1:
        new_run[1:] = ~(_same_as_previous(vals) & (group[1:] == group[:-1]))
    run_start = np.flatnonzero(new_run)
    run_len = np.diff(np.append(run_start, len(vals)))
    run_group = group[run_start]
    best = np.lexsort((run_start, -run_len, run_group))      # by group, longest, first
    first_of_group = np.ones(len(best), dtype=bool)
    first_of_group[1:] = run_group[best][1:] != run_group[best][:-1]
    pick = np.zeros(groups, dtype=np.int64)
    pick[run_group[best][first_of_group]] = run_start[best][first_of_group]
    return vals.take(pa.array(pick, mask=empty))


_INTERVAL_FIELDS = ("months", "days", "us")


def _interval_field_sums(arr) -> list[pa.Array]:
    """An interval column's months, days and microseconds as decimal(38, 0) columns to sum
    (PostgreSQL's sum(interval) adds field by field; Arrow cannot sum month_day_nano, and
    an int64 sum would wrap around)."""
    f = intervals.columns(arr, len(arr))
    mask = None if f.valid is None else ~f.valid
    return [pa.array(x, mask=mask).cast(pa.decimal128(38, 0))
            for x in (f.months, f.days, f.us)]


def _interval_sums(months, days, us) -> pa.Array:
    """The sums of _interval_field_sums' columns back as intervals (22008 past the range)."""
    months, days, us = (pa.array([c.as_py()], pa.decimal128(38, 0))
                        if isinstance(c, pa.Scalar) else c for c in (months, days, us))
    valid = pc.is_valid(months).to_numpy(zero_copy_only=False)
    fields = []
    for c in (months, days, us):
        c = pc.fill_null(c, 0)
        if len(c) and pc.max(pc.abs(c)).as_py() >= 2**62:
            raise SqlError("interval out of range", "22008")
        fields.append(c.cast(pa.int64()).to_numpy(zero_copy_only=False))
    return intervals.build(intervals.Fields(*fields, None if valid.all() else valid))


_DAY_US = 86_400_000_000
_KEY = pa.decimal256(76, 0)


def _interval_key(arr) -> pa.Array:
    """Intervals -> a decimal(76, 0) key that min and max order as PostgreSQL orders
    intervals (by the span with a month as 30 days) and that keeps the value itself:
    (span in whole days << 101) + (the rest of the span in microseconds, 0 <= rest < a
    day, << 64) + (months, days as two offset 32-bit words), written straight into the
    256-bit words."""
    a = combine_chunks(arr)
    f = intervals.columns(a, len(a))
    span_days = f.months * 30 + f.days + np.floor_divide(f.us, _DAY_US)
    rest = np.mod(f.us, _DAY_US)                        # 0 <= rest < 2**37
    code = ((f.months + 2**31).astype(np.uint64) << np.uint64(32)) | \
        (f.days + 2**31).astype(np.uint64)
    words = np.zeros((len(a), 4), np.uint64)
    words[:, 0] = code
    words[:, 1] = rest.astype(np.uint64) | ((span_days.astype(np.uint64) & np.uint64(2**27 - 1))
                                            << np.uint64(37))
    words[:, 2] = (span_days >> 27).astype(np.uint64)   # |span_days| < 2**40: sign-filled
    words[:, 3] = np.where(span_days < 0, np.uint64(2**64 - 1), np.uint64(0))
    validity = None if f.valid is None else pa.array(f.valid).buffers()[1]
    return pa.Array.from_buffers(_KEY, len(a), [validity, pa.py_buffer(words.tobytes())],
                                 null_count=-1 if f.valid is not None else 0)


def _interval_from_key(key: pa.Array) -> pa.Array:
    """The interval an _interval_key holds."""
    key = key.cast(_KEY)
    n = len(key)
    words = np.frombuffer(key.buffers()[1], np.uint64)[4 * key.offset:4 * (key.offset + n)]
    words = words.reshape(n, 4) if n else np.zeros((0, 4), np.uint64)
    valid = key.is_valid().to_numpy(zero_copy_only=False)
    months = (words[:, 0] >> np.uint64(32)).astype(np.int64) - 2**31
    days = (words[:, 0] & np.uint64(2**32 - 1)).astype(np.int64) - 2**31
    rest = (words[:, 1] & np.uint64(2**37 - 1)).astype(np.int64)
    span_days = words[:, 2].view(np.int64) * 2**27 + (words[:, 1] >> np.uint64(37)).astype(
        np.int64)
    us = (span_days - months * 30 - days) * _DAY_US + rest
    return intervals.build(intervals.Fields(months, days, us, None if valid.all() else valid))


def _hash_spec(gkeys: list[str], aggs: list, per_list: set, max_aggs: list,
               interval_sums: frozenset = frozenset()) -> list:
    """Acero's aggregation spec for `aggs` (hash_* with GROUP BY keys, scalar without);
    a sum of intervals (`interval_sums`) is three sums, of its fields."""
    hashed = "hash_" if gkeys else ""
    spec = []
    for a in aggs:
        if a.key in interval_sums:
            spec.extend((f"{a.key}$arg.{f}", hashed + "sum", None, f"{a.key}.{f}")
                        for f in _INTERVAL_FIELDS)
            continue
        if a.key in per_list:     # each group's distinct values, then aggregated
            fn, opts = "distinct", pc.CountOptions(mode="only_valid")
        else:
            fn, opts = _HASH_AGG[a.func] if not a.distinct else _DISTINCT_AGG[a.func]
        spec.append(([] if a.func == "count_star" else f"{a.key}$arg", hashed + fn, opts,
                     a.key))
    for a in max_aggs:
        spec.append((f"{a.key}$nan", hashed + "any", None, f"{a.key}$nan"))
    return spec


def _hash_results(r: pa.Table, gkeys: list[str], aggs: list, per_list: set,
                  max_aggs: list, interval_sums: frozenset = frozenset()) -> dict:
    """Output columns from the aggregation's result `r` (see _hash_spec)."""
    def result(a):
        if a.key in interval_sums:
            return _interval_sums(*(combine_chunks(r.column(f"{a.key}.{f}"))
                                    for f in _INTERVAL_FIELDS))
        return _aggregate_lists(a, r.column(a.key)) if a.key in per_list \
            else r.column(a.key)
    out = {**{k: r.column(k) for k in gkeys}, **{a.key: result(a) for a in aggs}}
    for a in max_aggs:
        if pa.types.is_floating(out[a.key].type):
            nan = pa.scalar(float("nan"), out[a.key].type)
            out[a.key] = pc.if_else(pc.fill_null(r.column(f"{a.key}$nan"), False), nan,
                                    out[a.key])
    return out


def _scaled_spec(entry: tuple, trees: dict, mode: str) -> list:
    """An aggregation spec entry, where its argument runs on the scaled-integer path: the
    sum of its int64 values (SINGLE), or of their high and low parts (SPLIT)."""
    col, fn, opts, name = entry
    if not isinstance(col, str) or col not in trees:
        return [entry]
    if mode == _scaled.SINGLE:
        return [(f"{col}.s", fn, opts, f"{name}.s")]
    return [(f"{col}.hi", fn, opts, f"{name}.hi"), (f"{col}.lo", fn, opts, f"{name}.lo")]


def _distinct_calls(calls: list) -> tuple[list, list]:
    """(the calls to compute, [(a repeated call, the computed call it equals)]): calls of
    the same function, DISTINCT-ness and argument (sqlglot's structural equality) are
    computed once; calls with an ORDER BY or a parameter are always kept."""
    kept: list = []
    seen: dict = {}
    copies: list = []
    for a in calls:
        if a.order or a.param is not None or a.arg is None:
            kept.append(a)
            continue
        sig = (a.func, a.distinct, a.arg)
        first = seen.get(sig)
        if first is None:
            seen[sig] = a
            kept.append(a)
        else:
            copies.append((a, first))
    return kept, copies


def _prelude_read(prelude: list, exprs: list) -> set:
    """The keys of the shared subexpressions that `exprs` read."""
    keys = {k for k, _ in prelude}
    return {c.name for e in exprs for c in e.find_all(exp.Column) if c.name in keys}


def _same_as_previous(a) -> np.ndarray:
    """For each row after the first: whether it holds the value of the row before it (NULLs
    equal, NaN equal to NaN, intervals by their span as PostgreSQL's = has them)."""
    a = combine_chunks(a)
    if len(a) < 2:
        return np.zeros(max(len(a) - 1, 0), dtype=bool)
    if isinstance(a.type, pa.ExtensionType):
        a = a.storage
    if pa.types.is_interval(a.type):
        nul = pc.is_null(a).to_numpy(zero_copy_only=False)
        days, nanos = interval_span(a)
        same = _same_as_previous(days) & _same_as_previous(nanos)
        return (same & (nul[1:] == nul[:-1])) | (nul[1:] & nul[:-1])
    cur, prev = a.slice(1), a.slice(0, len(a) - 1)
    same = pc.fill_null(pc.equal(cur, prev), False)
    if pa.types.is_floating(a.type):
        same = pc.or_(same, pc.and_(pc.fill_null(pc.is_nan(cur), False),
                                    pc.fill_null(pc.is_nan(prev), False)))
    same = pc.or_(same, pc.and_(pc.is_null(cur), pc.is_null(prev)))
    return same.to_numpy(zero_copy_only=False)


def _frame_bounds(c, pos, row_start, row_end, peer_id, peer_last, part_id=None, okey=None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Each sorted row's frame as positions [first, last]; first > last: an empty frame
    (`ROWS BETWEEN 3 PRECEDING AND 2 PRECEDING` on a partition's first rows). `okey`: the
    sorted values of the ORDER BY key (RANGE frames with offsets)."""
    if c.range is not None:
        return _range_bounds(c, okey, row_start, row_end, peer_id, peer_last, part_id)
    if c.rows is not None:
        n = len(pos)                 # offsets past the row count reach as far: no overflow
        lo, hi = (None if b is None else max(-n - 1, min(n + 1, b)) for b in c.rows)
        first = row_start if lo is None else np.clip(pos + lo, row_start, row_end)
        last = row_end - 1 if hi is None else np.clip(pos + hi, row_start - 1, row_end - 1)
        return first, last
    if c.frame == "partition":
        return row_start, row_end - 1
    if c.frame == "rows":
        return row_start, pos
    return row_start, peer_last[peer_id]        # RANGE: up to the current row's last peer


def _range_search_space(okey: pa.Array, offset, desc: bool
                        ) -> tuple[np.ndarray, Callable[[int], np.ndarray], bool]:
    """The sorted ORDER BY key as int64 (exact: integers, DECIMALs by their unscaled
    value, dates and timestamps in microseconds; NULLs 0) or float64; a function
    move(sign) -> the keys moved by sign * offset in that space (calendar arithmetic for an
    interval; an integer bound past the int64 range saturates, reaching every row on that
    side); and whether it is float."""
    typ = okey.type
    iv = isinstance(offset, pa.MonthDayNano)
    if pa.types.is_date(typ) or pa.types.is_timestamp(typ):
        if not iv:
            raise SqlError(f"RANGE with offset PRECEDING/FOLLOWING is not supported for "
                           f"column type {_pg_name(typ)} and offset type "
                           f"{type(offset).__name__}", "0A000",
                           hint="Use an interval offset (INTERVAL '7 days').")
        ts = okey.cast(pa.timestamp("us"))

        def move(sign: int):
            from planner.expr.temporal import shift_timestamps
            m, d, us = (sign * offset.months, sign * offset.days,
                        sign * (offset.nanoseconds // 1000))
            return pc.fill_null(shift_timestamps(ts, m, d, us).cast(pa.int64()),
                                0).to_numpy(zero_copy_only=False)
        x = pc.fill_null(ts.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        return x, move, False
    if iv:
        raise SqlError(f"RANGE with offset PRECEDING/FOLLOWING is not supported for column "
                       f"type {_pg_name(typ)} and offset type interval", "0A000")
    if pa.types.is_floating(typ) or isinstance(offset, float) or (
            pa.types.is_integer(typ) and isinstance(offset, decimal.Decimal)
            and offset != int(offset)):
        x = pc.fill_null(okey.cast(pa.float64()), 0).to_numpy(zero_copy_only=False)

        def move(sign: int):
            return x + sign * float(offset)
        return x, move, True
    scale = 0
    if pa.types.is_decimal(typ):
        scale = max(typ.scale, -decimal.Decimal(offset).as_tuple().exponent, 0)
    if not (pa.types.is_integer(typ) or pa.types.is_decimal(typ)):
        raise SqlError(f"RANGE with offset PRECEDING/FOLLOWING is not supported for column "
                       f"type {_pg_name(typ)}", "0A000")
    x = _unscaled(okey, scale) if pa.types.is_decimal(typ) else \
        pc.fill_null(okey.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    step = int(decimal.Decimal(offset).scaleb(scale))

    def move(sign: int):
        s = sign * step                   # exact: the overflow test is on Python ints
        lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
        if not lo <= s <= hi:
            return np.full_like(x, hi if s > 0 else lo)
        over = x > hi - s if s > 0 else x < lo - s
        with np.errstate(over="ignore"):
            return np.where(over, hi if s > 0 else lo, x + np.int64(s))
    return x, move, False


def _unscaled(a: pa.Array, scale: int) -> np.ndarray:
    """A DECIMAL array's values times 10^scale as int64 (NULLs 0), exact: the low words of
    its 128-bit values at that scale; 0A000 past the int64 range."""
    try:
        d = pc.fill_null(a, 0).cast(pa.decimal128(38, scale))
    except pa.ArrowInvalid:
        d = None
    words = np.frombuffer(d.buffers()[1], dtype="<i8")[2 * d.offset:2 * (d.offset + len(d))] \
        .reshape(-1, 2) if d is not None else None
    if words is None or np.any(words[:, 1] != (words[:, 0] >> 63)):
        raise SqlError("RANGE frame keys too large for an exact offset search", "0A000")
    return words[:, 0].copy()


def _range_bounds(c, okey, row_start, row_end, peer_id, peer_last, part_id
                  ) -> tuple[np.ndarray, np.ndarray]:
    """[first, last] of each row's RANGE frame with offsets, PostgreSQL's rules: `k
    PRECEDING` reaches the rows whose key is within k before the current row's (after, for
    DESC), `CURRENT ROW` the row's peers; a row whose key is NULL has its NULL peers as
    the frame of an offset bound, and NULL keys are in no other row's. By one merge of
    the rows' keys with the bounds sought (a lexsort over partition, value, side) per
    bound."""
    n = len(okey)
    key = c.order[0]
    desc = bool(key.desc)
    nulls_first = key.nulls_first if key.nulls_first is not None else desc
    nul = pc.is_null(okey).to_numpy(zero_copy_only=False) if n else np.zeros(0, bool)
    peer_first = np.r_[0, peer_last[:-1] + 1][peer_id]     # after the group before ends
    # NULL keys sort before or after every value (a rank, not a sentinel value: any
    # int64 may be a key); the bounds sought are never NULL
    null_rank = np.where(nul, 0 if nulls_first else 2, 1)

    def search(kind: str, offset, right: bool) -> np.ndarray:
        """Per row: the rows of its partition before the first (right: after the last)
        whose key is within the bound, counted from the start of the table."""
        x, move, is_float = _range_search_space(okey, offset, desc)
        sign = -1 if kind == "preceding" else 1
        t = move(-sign if desc else sign)
        if desc:                    # ascending in the search space: ~ reverses int64 order
            x, t = (-x, -t) if is_float else (~x, ~t)   # without overflow (~x = -x - 1)
        allp = np.concatenate([part_id, part_id])
        alln = np.concatenate([null_rank, np.ones(n, dtype=null_rank.dtype)])
        allv = np.concatenate([x, t])
        # a bound sorts before the keys equal to it (left) or after them (right)
        flag = np.concatenate([np.zeros(n), np.ones(n)]) if right else \
            np.concatenate([np.ones(n), np.zeros(n)])
        order = np.lexsort((flag, allv, alln, allp))
        is_key = order < n
        keys_before = np.cumsum(is_key) - is_key
        out = np.empty(n, dtype=np.int64)
        out[order[~is_key] - n] = keys_before[~is_key]
        return out

    (s_kind, s_off), (e_kind, e_off) = c.range
    if s_kind == "unbounded_preceding":
        first = row_start
    elif s_kind == "current":
        first = peer_first
    else:
        first = np.where(nul, peer_first, search(s_kind, s_off, right=False))
    if e_kind == "unbounded_following":
        last = row_end - 1
    elif e_kind == "current":
        last = peer_last[peer_id]
    else:
        last = np.where(nul, peer_last[peer_id], search(e_kind, e_off, right=True) - 1)
    return first, last


def _span(cum: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """cum[last] - cum[first - 1], the sum of first..last of the array `cum` accumulates
    (meaningful where first <= last)."""
    return cum[np.maximum(last, 0)] - np.where(first > 0, cum[np.maximum(first - 1, 0)], 0)


def _range_extreme(r: np.ndarray, lo: np.ndarray, hi: np.ndarray, op) -> np.ndarray:
    """op (np.minimum / np.maximum) of r[lo[i] .. hi[i]] for each i (lo <= hi): a sparse
    table, level k holding op over the 2^k values from each position, and each range
    answered by the two overlapping power-of-two blocks that cover it."""
    levels = [r]
    width = 1
    longest = int((hi - lo).max()) + 1 if len(lo) else 1
    while width * 2 <= longest:
        prev = levels[-1]
        levels.append(op(prev[:-width], prev[width:]))
        width *= 2
    length = hi - lo + 1
    k = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
    out = np.empty(len(lo), dtype=r.dtype)
    for level in range(len(levels)):            # one vectorised pass per level (log n)
        sel = k == level
        if sel.any():
            table = levels[level]
            a, b = lo[sel], hi[sel] - (1 << level) + 1
            out[sel] = op(table[a], table[b])
    return out


def _ntile(buckets, r: np.ndarray, size: np.ndarray) -> np.ndarray:
    """ntile(buckets) of the row at 0-based place `r` of a partition of `size` rows:
    PostgreSQL's split, the first size % buckets buckets one row larger."""
    if buckets is None:
        return np.full(len(r), None, dtype=object)
    if buckets <= 0:
        raise SqlError("argument of ntile must be greater than zero", "22014")
    small, extra = size // buckets, size % buckets
    big_rows = extra * (small + 1)
    return np.where(r < big_rows, r // (small + 1),
                    extra + (r - big_rows) // np.maximum(small, 1)) + 1


# Text GROUP BY keys of a few bytes as int64 codes (kernels.pack_short): off. It cuts
# Acero's hashing, but when the codes were made in the plan's one source thread TPC-H Q01
# at SF1 took ~20% longer with it on (quiet machine, bench.tpch_bench --queries 1,13,18
# alternated twice), its CPU about the same. A scan-fed aggregation now makes them on the
# scan's threads (PrepareInScan); its CPU is still about even (Q01 at SF1: ~0.13 s of
# codes against ~0.12 s of Acero's hashing saved), and it was not measured quiet again.
# tests/planner/test_short_keys.py runs with it on.
PACK_SHORT_KEYS = False

_RUN_ROWS = "$run_rows"        # a morsel row's count of input rows (runs mode)


def _runs_spec(spec: list, trees: dict, scaled) -> list | None:
    """The spec of an aggregation fed partial aggregates of runs (`_run_partials`), or
    None when one of its aggregates has no partial form here: only int64 sums of the
    scaled path's single sums (Budget bounds every partial sum too), count(x) and
    count(*), whose partials are summed."""
    out = []
    for col, fn, opts, name in spec:
        if fn == "hash_sum" and scaled == _scaled.SINGLE and isinstance(col, str) and \
                col.endswith(".s") and col[:-2] in trees:
            out.append((col, fn, opts, name))
        elif fn == "hash_count" and isinstance(col, str):
            out.append((col, "hash_sum", None, name))
        elif fn == "hash_count_all":
            out.append((_RUN_ROWS, "hash_sum", None, name))
        else:
            return None
    return out


def _comparable(typ: pa.DataType) -> bool:
    """Whether `_run_starts` can compare neighbouring keys of `typ`."""
    return (pa.types.is_integer(typ) or pa.types.is_floating(typ) or
            pa.types.is_decimal(typ) or pa.types.is_boolean(typ) or
            pa.types.is_date(typ) or pa.types.is_timestamp(typ) or
            pa.types.is_time(typ) or pa.types.is_string(typ) or
            pa.types.is_large_string(typ) or pa.types.is_binary(typ) or
            pa.types.is_large_binary(typ))


def _run_starts(keys: list) -> np.ndarray:
    """The first row of each run of equal keys (NULLs equal) in key columns `keys`."""
    n = len(keys[0])
    if not n:
        return np.zeros(0, dtype=np.int64)
    flags = None
    for k in keys:
        k = combine_chunks(k)
        if not k.null_count and (pa.types.is_integer(k.type) or pa.types.is_date(k.type)
                                 or pa.types.is_timestamp(k.type)):
            v = k.to_numpy(zero_copy_only=False)      # (no copy for these: one compare)
            f = v[1:] != v[:-1]
        else:
            f = change_flags(k)
        flags = f if flags is None else flags | f
    return np.concatenate(([0], np.flatnonzero(flags) + 1)).astype(np.int64)


def _run_partials(cols: dict, gkeys: list[str], sums: list[str], counts: list[str],
                  rows: bool, n: int) -> dict:
    """A morsel's aggregation input as partial aggregates: where its group keys come in
    runs of equal values (a scan of a table whose key starts with them - TPC-H's lineitem
    by l_orderkey, four rows an order), one row per run, with its rows' count, each
    count(x)'s count and each sum's sum (NULL when the run has no value); else one row
    per row in the same form (`rows`: with the row counts, for count(*)). The hash
    aggregation then sums the partials: a quarter of the rows to hash for Q18's 1.5M
    groups."""
    starts = _run_starts([cols[k] for k in gkeys])
    out = dict(cols)
    if len(starts) * 2 > n:            # few runs: the rows as they are, counts as 0 / 1
        for k in counts:
            out[k] = pa.array(combine_chunks(cols[k]).is_valid().to_numpy(
                zero_copy_only=False).astype(np.int64))
        if rows:
            out[_RUN_ROWS] = pa.array(np.ones(n, dtype=np.int64))
        return out
    idx = pa.array(starts)
    for k in gkeys:
        out[k] = combine_chunks(cols[k]).take(idx)
    for k in counts:
        valid = combine_chunks(cols[k]).is_valid().to_numpy(zero_copy_only=False)
        out[k] = pa.array(np.add.reduceat(valid.astype(np.int64), starts))
    if rows:
        out[_RUN_ROWS] = pa.array(np.diff(np.append(starts, n)))
    for k in sums:
        a = combine_chunks(cols[k])
        v = np.add.reduceat(a.fill_null(0).to_numpy(zero_copy_only=False), starts)
        if a.null_count:
            seen = np.add.reduceat(a.is_valid().to_numpy(zero_copy_only=False)
                                   .astype(np.int64), starts)
            out[k] = pa.array(v, pa.int64(), mask=seen == 0)
        else:
            out[k] = pa.array(v, pa.int64())
    return out


def _sorted_sums(t: pa.Table, key: str, spec: list) -> pa.Table | None:
    """The hash_sum aggregation `spec` of `t` grouped by its integer column `key`, by a
    stable sort of the keys and one `reduceat` per column, or None where the key is not an
    integer column without NULLs (the caller hashes instead). For run partials
    (`_run_partials`: TPC-H Q18's 1.5M orders): their keys arrive as sorted stretches of
    each tablet, which the stable sort (timsort) merges in a few passes, where Acero's
    threaded hash aggregation of as many groups as rows cost ~7x the CPU (each thread's
    table of 1.5M groups, then merged). A sum is NULL where its group has no value, as
    hash_sum; the int64 sums are proved not to wrap by the caller (Budget), counts and
    row counts cannot."""
    k = combine_chunks(t.column(key))
    if k.null_count or not pa.types.is_integer(k.type):
        return None
    n = len(k)
    if not n:
        return pa.table({key: k, **{name: pa.array([], pa.int64()) for _, _, _, name in spec}})
    kv = k.to_numpy(zero_copy_only=False)
    order = np.argsort(kv, kind="stable")
    ks = kv[order]
    starts = np.flatnonzero(np.concatenate(([True], ks[1:] != ks[:-1])))
    out = {key: k.take(pa.array(order[starts]))}
    for col, fn, _opts, name in spec:
        assert fn == "hash_sum", fn
        a = combine_chunks(t.column(col))
        v = (a.fill_null(0) if a.null_count else a).to_numpy(zero_copy_only=False)
        sums = np.add.reduceat(v.astype(np.int64, copy=False)[order], starts)
        if a.null_count:
            seen = np.add.reduceat(a.is_valid().to_numpy(zero_copy_only=False)[order]
                                   .astype(np.int64), starts)
            out[name] = pa.array(sums, pa.int64(), mask=seen == 0)
        else:
            out[name] = pa.array(sums, pa.int64())
    return pa.table(out)


class LongKeys(_scaled.Fallback):
    """A text GROUP BY key hashed as int64 codes (kernels.pack_short) met a value longer
    than a code holds: aggregate again without packing."""


class PreparedMorsels:
    """A scan chunk's rows already turned into the aggregation's input (`PrepareInScan`):
    its `batches`, and `num_rows`, the scan rows they came from (EXPLAIN ANALYZE)."""

    __slots__ = ("batches", "num_rows")

    def __init__(self, batches: list, num_rows: int):
        self.batches, self.num_rows = batches, num_rows


class PrepareInScan:
    """The work a streamed aggregation hands its table scan (`Executor.stream_batches`'s
    `post`, run by `TableScan.filter_chunks` on the pool thread that read each chunk): once
    armed with the aggregation's `prepare` and its input schema, a chunk's rows become the
    aggregation's input columns there, a morsel at a time, as one `PreparedMorsels`; before
    that (the first morsel decides the plan: packed keys, runs, int64 sums) chunks pass as
    they are and the consumer prepares them. So the expressions, the int64 sums and the
    run partials of a scan-fed GROUP BY (TPC-H Q01, Q18's subquery) run on both cores
    beside the reading, not on the Acero plan's one source thread, which bounded its wall
    time. Armed only where `prepare` may run on any thread (`_aggregate_by`: no subquery,
    host function or data-typed avg in its expressions; its shared counters locked)."""

    __slots__ = ("prepare", "schema")

    def __init__(self):
        self.prepare = None
        self.schema = None

    def arm(self, prepare, schema: pa.Schema) -> None:
        self.schema = schema
        self.prepare = prepare

    def __call__(self, batches: list) -> list:
        prepare = self.prepare
        batches = [b for b in batches if b.num_rows]
        if prepare is None or not batches:
            return batches
        t = pa.Table.from_batches(batches)
        out = []
        for start in range(0, t.num_rows, _guard.MORSEL_ROWS):
            m = prepare(slice_rows(t, start, _guard.MORSEL_ROWS))
            if m.schema != self.schema:
                m = m.cast(self.schema)
            out.extend(m.to_batches())
        return [PreparedMorsels(out, t.num_rows)]


class StreamedInput:
    """An aggregation's input as the stream of batches of a scan (`Executor.stream_batches`): the
    first batch is read at once for the schema (`slice(0, 0)`: typing the aggregates); the
    rest flow into the Acero plan by `reader`, each prepared and with a guard check - by
    the scan's pool threads where `hook` (a `PrepareInScan` the scan was given) is armed
    and `pool_safe` is set by the aggregation, else here."""

    def __init__(self, batches, hook: PrepareInScan | None = None):
        self.hook = hook
        self.pool_safe = False
        self.pooled = self.here = 0     # chunks prepared by the scan / morsels here
        self._it = self._gen = iter(batches)
        first = next(self._it)            # a scan stream yields an empty batch at least
        self._first = first.slice(0, _guard.MORSEL_ROWS)
        if first.num_rows > _guard.MORSEL_ROWS:
            self._it = itertools.chain([first.slice(_guard.MORSEL_ROWS)], self._it)
        self.schema = self._first.schema

    def head(self) -> pa.Table:
        """The first morsel (read already, not consumed)."""
        return pa.Table.from_batches([self._first])

    def slice(self, start: int, length: int) -> pa.Table:
        assert start == 0 and length == 0
        return pa.Table.from_batches([], schema=self.schema)

    def reader(self, prepare, guard) -> pa.RecordBatchReader:
        first = prepare(pa.Table.from_batches([self._first]))
        schema = first.schema
        if self.hook is not None and self.pool_safe:
            self.hook.arm(prepare, schema)     # later chunks come prepared (PrepareInScan)

        def gen():
            self.here += 1
            yield from first.to_batches()
            step = _guard.MORSEL_ROWS
            for b in self._it:
                if isinstance(b, PreparedMorsels):
                    guard.check()
                    self.pooled += 1
                    yield from b.batches
                    continue
                for start in range(0, b.num_rows, step):     # morsels, a check before each
                    guard.check()
                    self.here += 1
                    m = prepare(pa.Table.from_batches([b.slice(start, step)]))
                    if m.schema != schema:
                        m = m.cast(schema)
                    yield from m.to_batches()
        return pa.RecordBatchReader.from_batches(schema, gen())

    def close(self) -> None:
        close = getattr(self._gen, "close", None)
        if close is not None:
            close()          # the engine scan ends with its generator (also on errors)


class AggregateOperators:
    """Aggregate (Acero hash aggregation or whole-column kernels) and Window.

    One part of a statement's `Executor` (`Executor.aggregates`), which it reaches
    through its public members only: `ex.run(node)` for its inputs, `ex.eval`,
    `ex.guard`, `ex.stats`, ... and `ex.stream_batches`."""

    def __init__(self, ex):
        self.ex = ex            # the Executor whose statement this part runs

    def aggregate_plan(self, t: pa.Table, keys: list[str], spec: list, prepare,
                       sort_sums: bool = False) -> pa.Table:
        """Acero hash (or, without keys, scalar) aggregation of `t`'s morsels, each turned
        into the aggregation's input columns by `prepare` on its way in. `sort_sums`: a
        streamed input of run partials (one integer key, int64 sums only) is summed by
        sorting instead (`_sorted_sums`)."""
        from pyarrow import acero
        agg = acero.Declaration("aggregate", acero.AggregateNodeOptions(spec, keys=keys))
        if isinstance(t, StreamedInput) and sort_sums:
            reader = t.reader(prepare, self.ex.guard)
            batches = []
            try:
                for b in reader:        # (the reader checks the guard before each morsel)
                    self.ex.guard.charge(b.nbytes)
                    batches.append(b)
            finally:
                reader.close()
            whole = pa.Table.from_batches(batches, schema=reader.schema)
            out = _sorted_sums(whole, keys[0], spec)
            if out is not None:
                return out
            src = acero.Declaration("table_source", acero.TableSourceNodeOptions(whole))
            return acero.Declaration.from_sequence([src, agg]).to_table(use_threads=True)
        if isinstance(t, StreamedInput):
            decl = acero.Declaration.from_sequence([
                acero.Declaration("record_batch_reader_source",
                                  acero.RecordBatchReaderSourceNodeOptions(
                                      t.reader(prepare, self.ex.guard))),
                agg])
            return self.ex.collect(decl.to_reader(use_threads=True))
        if t.num_rows <= _guard.MORSEL_ROWS:     # one morsel of work: no stream to set up
            src = acero.Declaration("table_source", acero.TableSourceNodeOptions(
                prepare(t) if prepare is not None else t))
            return acero.Declaration.from_sequence([src, agg]).to_table(use_threads=True)
        decl = acero.Declaration.from_sequence([
            acero.Declaration("record_batch_reader_source",
                              acero.RecordBatchReaderSourceNodeOptions(
                                  self.ex.source(t, prepare))),
            agg])
        return self.ex.collect(decl.to_reader(use_threads=True))

    # -- window functions ------------------------------------------------------------------
    def run_window(self, node: L.Window) -> pa.Table:
        t = self.ex.run(node.input)
        for c in node.calls:
            t = t.append_column(c.key, self.window_call(c, t))
        return t

    def window_call(self, c: L.WindowCall, t: pa.Table) -> pa.Array:
        """One window function over all rows of `t`: rows are sorted by (partition, order)
        once, each function is computed on the sorted rows with numpy/pyarrow segment
        arithmetic, and the result is put back in the input's row order."""
        n = t.num_rows
        work, sort_keys = {}, []
        parts = [x for e in c.partition for x in _window_keys(as_chunked(self.ex.eval(e, t), n))]
        orders = [as_chunked(self.ex.eval(k.expr, t), n) for k in c.order]
        for i, a in enumerate(parts):
            check_hashable(a.type)
            work[f"p{i}"] = a
            sort_keys.append((f"p{i}", "ascending"))
        for i, (k, a) in enumerate(zip(c.order, orders)):
            add_sort_key(work, sort_keys, f"o{i}", a, k)
        if sort_keys and n:
            idx = self.ex.sorts.sort_indices(pa.table(work), sort_keys).to_numpy()
        else:
            idx = np.arange(n, dtype=np.int64)
        pos = np.arange(n, dtype=np.int64)
        new_part = np.zeros(n, dtype=bool)
        if n:
            new_part[0] = True
        for a in parts:
            new_part[1:] |= change_flags(a.take(pa.array(idx)))
        new_peer = new_part.copy()
        for a in orders:
            for x in _window_keys(a):
                new_peer[1:] |= change_flags(x.take(pa.array(idx)))
        part_id = np.cumsum(new_part) - 1
        starts = np.flatnonzero(new_part)
        ends = np.append(starts[1:], n)                 # exclusive
        row_start, row_end = starts[part_id], ends[part_id]
        peer_id = np.cumsum(new_peer) - 1
        peer_starts = np.flatnonzero(new_peer)
        peer_last = np.append(peer_starts[1:], n) - 1
        okey = combine_chunks(orders[0].take(pa.array(idx))) if c.range else None
        f = c.func
        if f == "row_number":
            vals = pa.array(pos - row_start + 1)
        elif f == "rank":
            vals = pa.array(peer_starts[peer_id] - row_start + 1)
        elif f == "dense_rank":
            vals = pa.array(peer_id - peer_id[row_start] + 1)
        elif f in ("lag", "lead"):
            x = as_chunked(self.ex.eval(c.args[0], t), n).take(pa.array(idx))
            k = 1
            if len(c.args) > 1:
                k = self.ex.constant(c.args[1])
            src = pos - k if f == "lag" else pos + k
            ok = (src >= row_start) & (src < row_end)
            vals = x.take(pa.array(np.where(ok, src, 0)))
            default = pa.scalar(self.ex.constant(c.args[2]) if len(c.args) > 2 else None,
                                vals.type)
            vals = pc.if_else(pa.array(ok), vals, default)
        elif f == "percent_rank":                       # (rank - 1) / (rows - 1)
            size = row_end - row_start
            rank0 = peer_starts[peer_id] - row_start
            vals = pa.array(np.where(size > 1, rank0 / np.maximum(size - 1, 1), 0.0))
        elif f == "cume_dist":                          # rows up to the last peer / rows
            vals = pa.array((peer_last[peer_id] - row_start + 1) / (row_end - row_start))
        elif f == "ntile":
            vals = pa.array(_ntile(self._window_constant(c, 0), pos - row_start,
                                   row_end - row_start), pa.int32())
        elif f in ("first_value", "last_value", "nth_value"):
            x = as_chunked(self.ex.eval(c.args[0], t), n).take(pa.array(idx))
            first, last = _frame_bounds(c, pos, row_start, row_end, peer_id, peer_last,
                                        part_id, okey)
            if f == "nth_value":
                k = self._window_constant(c, 1)
                if k is not None and k <= 0:
                    raise SqlError("argument of nth_value must be greater than zero",
                                   "22016")
                src = first + (k - 1 if k is not None else n)
            else:
                src = first if f == "first_value" else last
            ok = (first <= last) & (src >= first) & (src <= last)
            vals = pc.if_else(pa.array(ok), x.take(pa.array(np.where(ok, src, 0))),
                              pa.scalar(None, x.type))
        else:
            first, last = _frame_bounds(c, pos, row_start, row_end, peer_id, peer_last,
                                        part_id, okey)
            vals = self._window_aggregate(c, t, idx, part_id, first, last, pos)
        inverse = np.empty(n, dtype=np.int64)
        inverse[idx] = pos
        return combine_chunks(vals).take(pa.array(inverse))

    def _window_constant(self, c, i: int):
        """A window function's argument that must be a constant (ntile's bucket count,
        nth_value's n): 0A000 for an expression over the row."""
        if any(isinstance(n, exp.Column) for n in c.args[i].walk()):
            raise SqlError(f"a non-constant argument of {c.func} is not supported", "0A000")
        return self.ex.constant(c.args[i])

    def _window_aggregate(self, c, t, idx, part_id, first, last, pos):
        """An aggregate over each row's frame, sorted rows first..last (empty where
        first > last): counts and sums by differences of cumulative sums; min / max by
        running extremes when every frame starts at its partition's start, else by a
        sparse table of range minima."""
        n = t.num_rows
        f = c.func
        if f == "count_star":
            valid = np.ones(n, dtype=np.int64)
            x = None
        else:
            x = as_chunked(self.ex.eval(c.args[0], t), n).take(pa.array(idx))
            _check_aggregate_arg(f, f, x.type)
            valid = pc.is_valid(x).to_numpy(zero_copy_only=False).astype(np.int64)
        nonempty = first <= last
        count = np.where(nonempty, _span(np.cumsum(valid), first, last), 0)
        if f in ("count", "count_star"):
            return pa.array(count)
        if f in ("sum", "avg") and pa.types.is_interval(x.type):
            # field by field: running sums of months, days and microseconds (int64: a
            # window's total past it is 22008 from intervals.build)
            fl = intervals.columns(combine_chunks(x), n)
            keep = np.ones(n, bool) if fl.valid is None else fl.valid
            li, fi = np.maximum(last, 0), np.maximum(first - 1, 0)
            totals = []
            for col in (fl.months, fl.days, fl.us):
                cs = np.cumsum(np.where(keep, col, 0))
                totals.append(cs[li] - np.where(first > 0, cs[fi], 0) if n else cs)
            total = intervals.Fields(*totals, count > 0)
            if f == "avg":
                total = intervals.scale(total, np.maximum(count, 1).astype(np.float64), None,
                                        True)
            return intervals.build(total)
        if f in ("sum", "avg"):
            if pa.types.is_decimal(x.type):      # running sums need SUM's width
                x = x.cast(pa.decimal128(38, x.type.scale))
            elif pa.types.is_int64(x.type):       # sum(bigint) is NUMERIC: no wrap-around
                x = x.cast(pa.decimal128(38, 0))
            elif pa.types.is_integer(x.type):
                x = x.cast(pa.int64())
            zero = pa.scalar(decimal.Decimal(0) if pa.types.is_decimal(x.type) else 0, x.type)
            filled = combine_chunks(pc.fill_null(x, zero))
            if pa.types.is_floating(x.type):
                total = _float_window_sum(filled, first, last, typed=f == "sum")
                total = pc.if_else(pa.array(count > 0), total, pa.scalar(None, total.type))
                if f == "sum":
                    return total
                return pc.divide(total, pa.array(np.where(count > 0, count, 1).astype(
                    np.float64)))
            csum = _decimal_cumsum(filled) if pa.types.is_decimal(x.type) else \
                pc.cumulative_sum_checked(filled)
            zero = pa.scalar(decimal.Decimal(0) if pa.types.is_decimal(csum.type) else 0,
                             csum.type)
            at_last = csum.take(pa.array(np.maximum(last, 0)))
            prev = pc.if_else(pa.array(first > 0),
                              csum.take(pa.array(np.maximum(first - 1, 0))), zero)
            total = pc.subtract(at_last, prev)
            total = pc.if_else(pa.array(count > 0), total, pa.scalar(None, total.type))
            if pa.types.is_decimal(total.type):
                total = total.cast(pa.decimal128(38, total.type.scale))
            if f == "sum":
                return total
            if pa.types.is_integer(total.type) or total.type.scale == 0:
                return integer_avg(total, pa.array(count))     # avg of integers: numeric
            if pa.types.is_decimal(total.type):
                total = total.cast(pa.float64())
            return pc.divide(pc.cast(total, pa.float64()),
                             pa.array(np.where(count > 0, count, 1).astype(np.float64)))
        # min / max over dense ranks (any sortable type, decimals and strings included)
        x = combine_chunks(x)
        if pa.types.is_interval(x.type):
            # Arrow cannot rank intervals: dense ranks of the span (a month as 30 days)
            fl = intervals.columns(x, n)
            span = np.stack([fl.months * 30 + fl.days + np.floor_divide(fl.us, _DAY_US),
                             np.mod(fl.us, _DAY_US)], axis=1)
            _, inv = np.unique(span, axis=0, return_inverse=True)
            ranks = np.asarray(inv).reshape(-1).astype(np.int64) + 1
            if fl.valid is not None:
                ranks = np.where(fl.valid, ranks, int(ranks.max(initial=0)) + 1)
        else:
            ranks = pc.rank(x, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(
                np.int64)                               # 1..d (NULLs ranked last)
        valid_mask = valid.astype(bool)
        d = int(ranks.max()) if n else 0
        where = np.empty(d + 2, dtype=np.int64)
        where[ranks] = pos                              # a row holding each rank
        li = np.maximum(last, 0)
        if (c.rows is None or c.rows[0] is None) and (
                c.range is None or c.range[0][0] == "unbounded_preceding"):
            # every frame starts at its partition's start: running extremes, partitions
            # kept apart by offsetting the ranks so that one accumulate restarts at each
            span = d + 2
            nparts = int(part_id[-1]) + 1 if n else 0
            if f == "min":
                r = np.where(valid_mask, ranks, d + 1) + (nparts - 1 - part_id) * span
                run = np.minimum.accumulate(r) - (nparts - 1 - part_id) * span
            else:
                r = np.where(valid_mask, ranks, 0) + part_id * span
                run = np.maximum.accumulate(r) - part_id * span
            picked = run[li] if n else run
        else:
            # sliding frames: min / max of ranks over [first, last] from a sparse table
            r = np.where(valid_mask, ranks, d + 1 if f == "min" else 0)
            picked = _range_extreme(r, np.minimum(first, li), li,
                                    np.minimum if f == "min" else np.maximum) if n else r
        none = ~nonempty | (picked == (d + 1 if f == "min" else 0))
        vals = x.take(pa.array(where[np.clip(picked, 1, max(d, 1))] if n else picked))
        return pc.if_else(pa.array(~none), vals, pa.scalar(None, x.type))

    # -- aggregation -----------------------------------------------------------------------
    def run_aggregate(self, node: L.Aggregate) -> pa.Table:
        """GROUP BY keys that the other keys determine (group_keys.split_groups: TPC-H
        Q10's customer columns, by c_custkey) are not hashed: the aggregation groups by
        the others and finds each group's first input row (min of a row number), and the
        dependent keys are those rows' values (one `take` of the group count). Not for a
        streamed input (no row numbers across its morsels) nor grouping sets."""
        if node.sets is not None or any(a.func in _LIST_AGGREGATES for a in node.aggs) \
                or (node.groups and self.ex.streamable(node.input)):
            return self._run_aggregate(node)
        groups, dependent = split_groups(node, self.ex.catalog)
        if not dependent:
            return self._run_aggregate(node)
        t = self.ex.run(node.input)
        if self.ex.analyze:
            self.ex.stats.setdefault(id(node), NodeStats()).detail.append(
                f"hashed {len(groups)} of {len(node.groups)} GROUP BY keys; taken from "
                f"each group's first row: {', '.join(L.explain_sql(e) for _, e in dependent)}")
        row = f"{node.groups[0][0]}$first_row"
        first = L.AggCall(key=row, func="min", arg=L.keycol(row))
        out = self._aggregate_by(
            t.append_column(row, pa.array(np.arange(t.num_rows, dtype=np.int64))),
            groups, list(node.aggs) + [first])
        rows = out.column(row)
        cols = {k: out.column(k) for k, _ in groups}
        # (as a hashed key would show it: a float's -0.0 as 0.0)
        cols.update((k, hash_key(t.column(e.name).take(rows))) for k, e in dependent)
        return pa.table({**{k: cols[k] for k, _ in node.groups},
                         **{a.key: out.column(a.key) for a in node.aggs},
                         **{k: pa.array(np.zeros(out.num_rows, np.int32))
                            for k, _ in node.grouping}})

    def _run_aggregate(self, node: L.Aggregate) -> pa.Table:
        if node.sets is None and node.groups and self.ex.streamable(node.input) and \
                not any(a.func in _LIST_AGGREGATES for a in node.aggs):
            # GROUP BY over a scan (with filters / projections): its batches stream into
            # the hash aggregation, so the input is never held whole (TPC-H Q01 at SF10:
            # 4 GB of lineitem columns)
            t = self._streamed(node.input)
            mode, pack = _scaled.SINGLE, True
            try:
                while True:
                    try:
                        out = self._aggregate_by(t, node.groups, node.aggs, scaled=mode,
                                                 pack=pack)
                        break
                    except _scaled.Fallback as e:
                        # a sum the int64 path cannot prove exact (as one int64 sum: split
                        # it; at all: the decimal path), or a text key too long for its
                        # int64 code: scan again (the stream is spent); the input's row
                        # counts start over, or EXPLAIN ANALYZE would count both readings
                        if isinstance(e, LongKeys):
                            pack = False
                        else:
                            mode = _scaled.next_mode(mode, e)
                        t.close()
                        for n in L.walk(node.input):
                            st = self.ex.stats.get(id(n))
                            if st is not None:
                                st.rows = 0
                        if self.ex.analyze:
                            self.ex.stats.setdefault(id(node), NodeStats()).detail.append(
                                "input read again: a text key longer than its int64 code"
                                if isinstance(e, LongKeys) else
                                "input read again: a sum the int64 path could not prove "
                                "exact, " + ("summed as split int64 halves"
                                             if mode else "summed as decimals"))
                        t = self._streamed(node.input)
            finally:
                t.close()
            if self.ex.analyze:
                self.ex.stats.setdefault(id(node), NodeStats()).detail.append(
                    f"input prepared on the scan's threads: {t.pooled} chunks; "
                    f"here: {t.here} morsels")
            for k, _ in node.grouping:
                out = out.append_column(k, pa.array(np.zeros(out.num_rows, np.int32)))
            return out
        t = self.ex.run(node.input)
        if node.sets is None:
            out = self._aggregate_by(t, node.groups, node.aggs)
            for k, _ in node.grouping:
                out = out.append_column(k, pa.array(np.zeros(out.num_rows, np.int32)))
            return out
        # GROUPING SETS: one aggregation of the input per set (each evaluates its own
        # keys and arguments), the keys a set lacks NULL in its rows
        parts = []
        for s in node.sets:
            self.ex.guard.check()
            parts.append((s, self._aggregate_by(t, [node.groups[i] for i in s], node.aggs)))
        types = {k: part.column(k).type for _, part in parts for k in part.column_names}
        out_parts = []
        for s, part in parts:
            cols = {}
            for i, (k, _) in enumerate(node.groups):
                cols[k] = part.column(k) if i in s else \
                    pa.nulls(part.num_rows, types.get(k, pa.null()))
            for a in node.aggs:
                cols[a.key] = part.column(a.key)
            for k, args in node.grouping:
                bits = sum(1 << (len(args) - 1 - j) for j, i in enumerate(args) if i not in s)
                cols[k] = pa.array(np.full(part.num_rows, bits, np.int32))
            out_parts.append(pa.table(cols))
        return pa.concat_tables(out_parts, promote_options="default")

    def _streamed(self, node: L.Node) -> StreamedInput:
        """A scan-fed aggregation's input stream, its scan given a `PrepareInScan`."""
        hook = PrepareInScan()
        return StreamedInput(self.ex.stream_batches(node, post=hook), hook)

    def _aggregate_by(self, t: pa.Table, groups: list[tuple[str, exp.Expression]],
                      calls: list[L.AggCall], scaled: str | None = _scaled.SINGLE,
                      pack: bool = True) -> pa.Table:
        """`calls` over the rows of `t` grouped by `groups` (one row without groups).
        `scaled` (SINGLE, SPLIT or None): sums of DECIMAL expressions may run on unscaled
        int64 values (executor/scaled.py); on a `Fallback` from a Table input the
        aggregation is redone in the next mode (a StreamedInput's caller redoes it, with a
        new stream). A call that repeats another (same function and argument: TPC-H Q01's
        sum(l_quantity) and avg(l_quantity)'s sum) is computed once and copied.
        `pack`: text GROUP BY keys of at most SHORT_BYTES bytes are hashed as int64 codes
        (kernels.pack_short), decided per key on the first morsel; a later morsel with a
        longer value raises `LongKeys`, and the aggregation is redone without packing.
        count(x) counts a one-bit column of x's validity, not x itself."""
        given, (calls, copies) = calls, _distinct_calls(calls)
        exprs = [e for _, e in groups] + [a.arg for a in calls if a.arg is not None] \
            + [k.expr for a in calls for k in a.order]
        prelude, rewritten = common_subexpressions(exprs)
        items: list[tuple[str, exp.Expression]] = []     # the aggregation's input columns
        it = iter(rewritten)
        for k, _ in groups:
            items.append((k, next(it)))
        args: dict[str, L.AggCall] = {}                  # arg column -> its aggregate
        for a in calls:
            if a.arg is not None:
                e = next(it)
                if f"{a.key}$arg" not in {k for k, _ in items}:
                    items.append((f"{a.key}$arg", e))
                    args[f"{a.key}$arg"] = a
        for a in calls:
            for i, _k in enumerate(a.order):
                e = next(it)
                if f"{a.key}$ord{i}" not in {k for k, _ in items}:
                    items.append((f"{a.key}$ord{i}", e))
        aggs = list({a.key: a for a in calls}.values())
        max_aggs = [a for a in aggs if a.func == "max" and a.arg is not None]
        real_sums: set[str] = set()     # sums of real arguments (double in Arrow)
        interval_extremes: set[str] = set()     # min / max of intervals (by a span key)

        group_keys = {k for k, _ in groups}      # (not array_agg's ORDER BY keys)
        # group key -> its text type while it is hashed as int64 codes, None when not;
        # fixed by the first morsel each key is evaluated over, since every morsel of
        # one aggregation must have the same schema. Only the hash plan packs (`packing`).
        packed: dict[str, pa.DataType | None] = {}
        packing = [False]

        def column(k: str, e, m: pa.Table):
            """One input column of the aggregation, evaluated over morsel `m`."""
            arg = as_chunked(evaluate(self.ex.prepare(e, m), m), m.num_rows)
            a = args.get(k)
            if a is not None:
                _check_aggregate_arg(a.func, a.key, arg.type)
            if a is not None and a.key in interval_extremes:
                return _interval_key(arg)              # min/max(interval) by its span
            if k in group_keys or (a is not None and a.distinct):
                arg = hash_key(arg)                      # -0.0 and 0.0 are one value
            if k in group_keys and packing[0] and packable(arg.type):
                if k not in packed:         # the first morsel decides (an empty one: no)
                    codes = pack_short(arg) if m.num_rows else None
                    packed[k] = arg.type if codes is not None else None
                    return arg if codes is None else codes
                if packed[k] is not None:
                    codes = pack_short(arg)
                    if codes is None:
                        raise LongKeys()
                    return codes
            if a is not None and a.func == "count" and not a.distinct:
                return validity_only(arg)                # count(x) needs x's NULLs only
            if a is not None and a.func == "sum" and pa.types.is_int64(arg.type):
                # sum(bigint) is NUMERIC, as in PostgreSQL: Arrow's int64 sum wraps
                # around silently on overflow
                return arg.cast(pa.decimal128(38, 0))
            if a is not None and a.func == "sum" and pa.types.is_float32(arg.type):
                real_sums.add(a.key)
            return arg

        def prelude_of(m: pa.Table, only: set | None = None) -> pa.Table:
            for k, e in prelude:      # shared subexpressions once (Q1's price * (1 - disc))
                if only is None or k in only:
                    m = m.append_column(k, as_chunked(evaluate(self.ex.prepare(e, m), m),
                                                      m.num_rows))
            return m

        trees: dict[str, _scaled.Tree] = {}     # arg column -> its int64 plan
        runs: list = []             # runs mode: [sum columns, count columns, count(*)]
        slow_prelude: set | None = None         # the prelude the other columns read
        fed = [0]
        budget = _scaled.Budget()               # SINGLE: the bounds of the sums so far
        lock = threading.Lock()     # fed and budget: prepare may run on the scan's threads

        def prepare(m: pa.Table) -> pa.Table:
            """A morsel of the input -> the aggregation's input columns."""
            if trees:
                with lock:
                    fed[0] += m.num_rows
                    over = fed[0] >= _scaled.MAX_ROWS
                if over:
                    raise _scaled.Fallback()
                read: dict = {}
                ints = {k: tree.values(m, read) for k, tree in trees.items()}
            m = prelude_of(m, slow_prelude)
            cols = {k: column(k, e, m) for k, e in items if k not in trees}
            for k, tree in trees.items():   # sums on unscaled int64 (executor/scaled.py)
                v, valid, bound = ints[k]
                if scaled == _scaled.SINGLE:
                    with lock:
                        budget.add(k, bound, m.num_rows)
                    cols[f"{k}.s"] = _scaled.single(v, valid, m.num_rows)
                else:
                    cols[f"{k}.hi"], cols[f"{k}.lo"] = _scaled.split(v, valid, m.num_rows)
            for k, a in args.items():
                if (a.func == "count" or a.distinct) and pa.types.is_null(cols[k].type):
                    # count(DISTINCT NULL) has no kernel, and Acero's hash_distinct over a
                    # NULL-typed column crashes the process (sum(DISTINCT NULL) GROUP BY)
                    cols[k] = cols[k].cast(pa.int8())
            for k in interval_sums:   # sum(interval): its three fields, summed apart
                for f, c in zip(_INTERVAL_FIELDS, _interval_field_sums(
                        combine_chunks(cols.pop(f"{k}$arg")))):
                    cols[f"{k}$arg.{f}"] = c
            for a in max_aggs:        # max over floats is NaN when a NaN is present
                arg = cols[f"{a.key}$arg"]
                cols[f"{a.key}$nan"] = pc.fill_null(pc.is_nan(arg), False) \
                    if pa.types.is_floating(arg.type) else pa.nulls(len(arg), pa.bool_())
            if runs:
                cols = _run_partials(cols, gkeys, *runs, m.num_rows)
            return pa.table(cols)

        gkeys = [k for k, _ in groups]
        interval_sums: frozenset = frozenset()
        if any(a.func in ("sum", "min", "max") and a.arg is not None for a in aggs):
            # which sums, minima and maxima are of intervals: the argument's type, from
            # no rows
            probe = pa.table({k: column(k, e, prelude_of(t.slice(0, 0)))
                              for k, e in items if k in args})
            of_intervals = {a.key: a.func for a in aggs if a.arg is not None
                            and a.func in ("sum", "min", "max")
                            and pa.types.is_interval(probe.column(f"{a.key}$arg").type)}
            interval_sums = frozenset(k for k, f in of_intervals.items() if f == "sum")
            interval_extremes.update(k for k, f in of_intervals.items() if f != "sum")
            if any(a.distinct for a in aggs if a.key in interval_sums):
                raise SqlError("sum(DISTINCT interval) is not supported", "0A000")
        if not items:               # count(*) only, or nothing: the row count is enough
            return pa.table({a.key: pa.array([t.num_rows], pa.int64()) for a in aggs}) \
                if aggs else empty_rows(1)
        per_list = {a.key for a in aggs if a.distinct and a.func not in _DISTINCT_AGG}
        if any(a.func in _LIST_AGGREGATES for a in aggs):
            out = self._aggregate_lists(t, gkeys, aggs, max_aggs, prepare, interval_sums)
        elif not gkeys and (t.num_rows <= _guard.MORSEL_ROWS or per_list):
            # one morsel (the scalar kernels, no plan to set up), or sum/avg(DISTINCT x),
            # which has no scalar plan kernel: the input columns are still evaluated a
            # morsel at a time with a check between, then aggregated whole
            work = prepare(t) if t.num_rows <= _guard.MORSEL_ROWS else \
                pa.Table.from_batches(list(self.ex.source(t, prepare)))
            out = pa.table({a.key: _aggregate_all(a, work[f"{a.key}$arg"] if a.arg
                                                  is not None else None, t.num_rows)
                            if a.key not in interval_sums else _interval_sums(
                                *(pc.sum(work[f"{a.key}$arg.{f}"], min_count=1)
                                  for f in _INTERVAL_FIELDS))
                            for a in aggs})
        else:
            spec = _hash_spec(gkeys, aggs, per_list, max_aggs, interval_sums)
            if scaled:
                trees.update(self._scaled_sums(t, items, args, prelude, prelude_of,
                                               per_list | interval_sums))
            if trees:
                slow_prelude = _prelude_read(prelude, [e for k, e in items if k not in trees])
                spec = [part for s in spec for part in _scaled_spec(s, trees, scaled)]
            run_spec = _runs_spec(spec, trees, scaled) if gkeys else None
            if run_spec is not None and self._keys_in_runs(t, items, group_keys, column,
                                                           prelude_of):
                spec = run_spec
                runs[:] = [[c for c, fn, _, _ in run_spec if fn == "hash_sum"
                            and c != _RUN_ROWS and c.endswith(".s")],
                           [c for c, fn, _, _ in run_spec if fn == "hash_sum"
                            and c != _RUN_ROWS and not c.endswith(".s")],
                           any(c == _RUN_ROWS for c, _, _, _ in run_spec)]
            packing[0] = PACK_SHORT_KEYS and pack and bool(gkeys)  # (after _keys_in_runs)
            if isinstance(t, StreamedInput):
                # prepare may run on the scan's pool threads (PrepareInScan) unless an
                # expression runs a subquery or a host function (a pool thread waiting
                # on its own pool's scan deadlocks it) or types avg by the morsel's data
                t.pool_safe = all(
                    e.find(L.SubqueryRef, L.AvgOf, SubPlan, InSubPlan, HostCall) is None
                    for e in [e for _, e in items] + [e for _, e in prelude])
            try:
                r = self.aggregate_plan(t, gkeys, spec, prepare,
                                        sort_sums=bool(runs) and len(gkeys) == 1)
            except _scaled.Fallback as e:
                if isinstance(t, StreamedInput):
                    raise
                if isinstance(e, LongKeys):
                    return self._aggregate_by(t, groups, given, scaled=scaled, pack=False)
                return self._aggregate_by(t, groups, given,
                                          scaled=_scaled.next_mode(scaled, e), pack=pack)
            for k, typ in packed.items():
                if typ is not None:
                    r = r.set_column(r.schema.get_field_index(k), k,
                                     unpack_short(r.column(k), typ))
            for k, tree in trees.items():
                a = args[k]
                r = r.append_column(a.key, _scaled.widen(r.column(f"{a.key}.s"), tree.scale)
                                    if scaled == _scaled.SINGLE else _scaled.combine(
                    r.column(f"{a.key}.hi"), r.column(f"{a.key}.lo"), tree.scale))
            out = pa.table(_hash_results(r, gkeys, aggs, per_list, max_aggs, interval_sums))
        for k in interval_extremes:
            i = out.schema.get_field_index(k)
            out = out.set_column(i, k, _interval_from_key(combine_chunks(out.column(k))))
        for copy, a in copies:
            out = out.append_column(copy.key, out.column(a.key))
            if a.key in real_sums:
                real_sums.add(copy.key)
        for k in real_sums:
            if k.endswith(".sum"):
                continue       # sum(real) is real in PostgreSQL; avg(real)'s sum stays double
            col = out.column(k)
            as_real = col.cast(pa.float32(), safe=False)
            if pc.any(real_range_lost(col, as_real)[0]).as_py():
                raise SqlError("value out of range: overflow", "22003")
            out = out.set_column(out.schema.get_field_index(k), k, as_real)
        return out

    def _keys_in_runs(self, t, items, group_keys, column, prelude_of) -> bool:
        """Whether the first morsel's group keys come in runs of at least two rows on
        average, and at least half the runs are of groups no other run has (then the
        aggregation is fed partial aggregates of runs)."""
        head = t.head() if isinstance(t, StreamedInput) else \
            slice_rows(t, 0, _guard.MORSEL_ROWS)
        if head.num_rows < 2:
            return False
        m = prelude_of(head)
        keys = [column(k, e, m) for k, e in items if k in group_keys]
        if not all(_comparable(k.type) for k in keys):
            return False        # (intervals: no equality kernel; their spans are structs)
        starts = _run_starts(keys)
        if len(starts) * 2 > head.num_rows:
            return False
        # runs of few groups (TPC-H Q01's flags: four groups, runs of ~3 rows) cost more to
        # cut than Acero spends on a hash table that small: only runs that are mostly of
        # different groups (a table stored in the keys' order) are worth it
        idx = pa.array(starts)
        firsts = pa.table({f"k{i}": combine_chunks(k).take(idx) for i, k in enumerate(keys)})
        groups = firsts.group_by(firsts.column_names).aggregate([]).num_rows
        return groups * 2 >= len(starts)

    def _scaled_sums(self, t, items, args, prelude, prelude_of, excluded) -> dict:
        """{arg column: Tree} for the plain sums whose DECIMAL argument qualifies for the
        int64 path (executor/scaled.py); node types from an evaluation over no rows."""
        cand = {k: e for k, e in items if k in args and args[k].func == "sum"
                and not args[k].distinct and args[k].key not in excluded}
        if not cand:
            return {}
        empty = prelude_of(t.slice(0, 0))

        def type_of(node):
            try:
                return evaluate(self.ex.prepare(node, empty), empty).type
            except SqlError:
                return None
        inline = dict(prelude)
        out = {}
        for k, e in cand.items():
            tree = _scaled.plan_sum(e, type_of, inline)
            if tree is not None:
                out[k] = tree
        return out

    def _aggregate_lists(self, t: pa.Table, gkeys: list[str], aggs: list, max_aggs: list,
                         prepare, interval_sums: frozenset = frozenset()) -> pa.Table:
        """An Aggregate with array_agg / list_agg among its calls (module docstring): the
        input columns whole, the other aggregates and each group's row numbers in one hash
        aggregation, then each list aggregate from one sort."""
        work = prepare(t) if t.num_rows <= _guard.MORSEL_ROWS else \
            pa.Table.from_batches(list(self.ex.source(t, prepare)))
        n = work.num_rows
        others = [a for a in aggs if a.func not in _LIST_AGGREGATES]
        if gkeys:
            work = work.append_column("$row", pa.array(np.arange(n, dtype=np.int64)))
            per_list = {a.key for a in others if a.distinct and a.func not in _DISTINCT_AGG}
            spec = _hash_spec(gkeys, others, per_list, max_aggs, interval_sums) + [
                ("$row", "hash_list", None, "$rows")]
            r = self.aggregate_plan(work, gkeys, spec, None)
            out = _hash_results(r, gkeys, others, per_list, max_aggs, interval_sums)
            rows, groups = combine_chunks(r.column("$rows")), r.num_rows
        else:
            out = {a.key: _aggregate_all(a, work[f"{a.key}$arg"] if a.arg is not None
                                         else None, n) if a.key not in interval_sums
                   else _interval_sums(*(pc.sum(work[f"{a.key}$arg.{f}"], min_count=1)
                                         for f in _INTERVAL_FIELDS)) for a in others}
            rows, groups = None, 1
        group = np.zeros(n, dtype=np.int64)           # each input row's group
        if rows is not None and n:
            group[pc.list_flatten(rows).to_numpy()] = \
                pc.list_parent_indices(rows).to_numpy()
        for a in aggs:
            if a.func in _LIST_AGGREGATES:
                self.ex.guard.check()
                out[a.key] = self._list_aggregate(a, work, group, groups)
        return pa.table(out)

    def _list_aggregate(self, a: L.AggCall, work: pa.Table, group: np.ndarray,
                        groups: int) -> pa.Array:
        """One array_agg / list_agg: the values sorted by (group, ORDER BY keys), DISTINCT
        ones (sorted by the value when there is no ORDER BY) kept once, list_agg's NULLs
        dropped; a group left without values is NULL."""
        vals = combine_chunks(work[f"{a.key}$arg"])
        keys: dict = {"$g": pa.array(group)}
        sort_keys: list = [("$g", "ascending")]
        order = a.order or ((L.SortKey(None),) if a.distinct else ())
        for i, k in enumerate(order):
            col = vals if k.expr is None else combine_chunks(work[f"{a.key}$ord{i}"])
            add_sort_key(keys, sort_keys, f"$o{i}", col, k)
        if len(sort_keys) > 1 or groups > 1:
            perm = self.ex.sorts.sort_indices(pa.table(keys), sort_keys)
            vals, group = vals.take(perm), group[perm.to_numpy()]
        keep = np.ones(len(vals), dtype=bool)
        if a.distinct and len(vals) > 1:
            keep[1:] = ~(_same_as_previous(vals) & (group[1:] == group[:-1]))
        if a.func != "array_agg":
            keep &= pc.is_valid(vals).to_numpy(zero_copy_only=False)
        if not keep.all():
            vals, group = vals.filter(pa.array(keep)), group[keep]
        counts = np.bincount(group, minlength=groups)
        if a.func in _ORDERED_SET:
            return _ordered_set_value(a, vals, group, counts)
        if pa.types.is_null(vals.type):
            vals = vals.cast(pa.string())         # array_agg(NULL): text[] as PostgreSQL's
        offsets = np.zeros(groups + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        lists = pa.ListArray.from_arrays(pa.array(offsets), vals,
                                         mask=pa.array(counts == 0))
        return lists if a.func == "list_agg" else list_to_array(lists)

