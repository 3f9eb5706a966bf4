"""Joins: `Join` (Acero hash join: inner, left / full outer, semi, anti, the null-aware anti join
of NOT IN; a residual condition through an inner join and row numbers), `MultiJoin` (greedy
operator ordering over the actual inputs: |A|*|B| / max(ndv_A, ndv_B) from measured distinct
key counts, the side with fewer bytes building: `build_cost`) and cross joins (chunked,
each chunk filtered by the join's conditions as it is made, guarded: cancel /
statement_timeout between chunks, the query memory limit on what is kept; no row cap).
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner import logical as L
from planner.logical import output_keys, refs
from planner.errors import SqlError
from planner import guard as _guard
from planner.guard import QueryGuard
from planner.executor.kernels import (as_chunked, check_hashable, concat_tables, empty_rows,
                                      hash_key, NodeStats, table_nbytes)
from planner.executor import runtime_filters as _rf


class _Comp:
    """A MultiJoin component: joined inputs and their result, with cached key NDVs. (`ex`
    arguments here are the Executor, which holds JoinOperators as `ex.joins`; not
    annotated, so that this file does not import the one that imports it.)"""

    def __init__(self, table: pa.Table, inputs: set[int]):
        self.table = table
        self.inputs = inputs
        self._ndv: dict[str, int] = {}

    def ndv(self, e: exp.Expression, ex) -> int:
        k = e.sql()
        v = self._ndv.get(k)
        if v is None:
            v = self._ndv[k] = estimate_ndv(ex.eval(e, self.table))
        return v


NDV_SAMPLE = 65536


def estimate_ndv(arr) -> int:
    """Distinct values of `arr`: exact below NDV_SAMPLE rows, else the GEE estimator over
    an evenly strided sample (sqrt(N/n) * singletons + the other distinct values), which is
    within a small factor either way - enough to order joins."""
    check_hashable(arr.type)              # a join on arrays: 0A000, not Arrow's error
    n = len(arr)
    if n <= NDV_SAMPLE:
        return max(1, pc.count_distinct(arr).as_py())
    step = n // NDV_SAMPLE
    if (pa.types.is_integer(arr.type) or pa.types.is_date32(arr.type)) and not arr.null_count:
        # numpy: a strided view of each chunk and one sort (Arrow's take over a chunked
        # array plus value_counts cost ~10x more, once per candidate pair of inputs)
        parts, pos = [], 0
        for ch in (arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]):
            if pa.types.is_date32(ch.type):
                ch = ch.cast(pa.int32())
            parts.append(ch.to_numpy(zero_copy_only=False)[(-pos) % step::step])
            pos += len(ch)
        sample = np.concatenate(parts)
        _, counts = np.unique(sample, return_counts=True)
        d, f1 = len(counts), int(np.count_nonzero(counts == 1))
    else:
        sample = arr.take(pa.array(np.arange(0, n, step, dtype=np.int64)))
        counts = pc.value_counts(sample).field("counts")
        d = len(counts)
        f1 = pc.sum(pc.equal(counts, 1)).as_py() or 0
    return max(1, min(n, int((n / len(sample)) ** 0.5 * f1 + (d - f1))))


def _is_key_of(c, keys) -> bool:
    for x, y in keys:
        if isinstance(c, exp.EQ) and ((c.this is x and c.expression is y) or
                                      (c.this is y and c.expression is x) or
                                      (c.this == x and c.expression == y) or
                                      (c.this == y and c.expression == x)):
            return True
    return False


def _split_equi(c, a_inputs, b_inputs, owner):
    if not isinstance(c, exp.EQ) or isinstance(c.expression, (exp.Any, exp.All)) or (
            isinstance(c.expression, exp.Anonymous)
            and c.expression.name.lower() in ("all", "any", "some")):
        return None     # `x = ANY (array)` / ALL (sqlglot: a call) compares each element
    x, y = c.this, c.expression
    rx = {owner.get(k) for k in refs(x)}
    ry = {owner.get(k) for k in refs(y)}
    if not rx or not ry or None in rx or None in ry:
        return None
    if rx <= a_inputs and ry <= b_inputs:
        return x, y
    if ry <= a_inputs and rx <= b_inputs:
        return y, x
    return None


def _common_key_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    if a == b:
        return None
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        return pa.int64()
    if pa.types.is_decimal(a) and pa.types.is_decimal(b) or \
            (pa.types.is_decimal(a) and pa.types.is_integer(b)) or \
            (pa.types.is_integer(a) and pa.types.is_decimal(b)):
        def ps(t):
            return (t.precision, t.scale) if pa.types.is_decimal(t) else (19, 0)
        (p1, s1), (p2, s2) = ps(a), ps(b)
        s = max(s1, s2)
        p = min(38, max(p1 - s1, p2 - s2) + s)
        return pa.decimal128(p, s)
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        return pa.float64()
    if (pa.types.is_string(a) or pa.types.is_large_string(a)) and \
            (pa.types.is_string(b) or pa.types.is_large_string(b)):
        return pa.string()
    if pa.types.is_date(a) and pa.types.is_timestamp(b):
        return b
    if pa.types.is_timestamp(a) and pa.types.is_date(b):
        return a
    return None


def hash_join(left: pa.Table, right: pa.Table, lk: list, rk: list, join_type: str,
              ex=None, each=None, columns: set[str] | None = None) -> pa.Table:
    """Acero hash join of `left` and `right` on evaluated key arrays `lk` / `rk`. With an
    executor `ex`, both inputs stream into the plan as morsels and the output is read
    batch by batch, so its guard is consulted while the hash table is built, while it is
    probed and while the output grows. `each(t) -> t` (the conditions over both sides
    that are not join keys, the columns needed above) applies to each output batch as it
    is read, as `cross_join`'s chunk_filter does: what is kept, and charged to the query's
    memory limit, is what passes it, not the whole fan-out. Streamed, Acero writes only
    the columns `each` and the nodes above read (`columns`: None, every one) and never
    its evaluated copies of the keys: each output column is a fresh buffer per batch
    (TPC-H Q13 at SF10: 15M rows of the left join, 5 columns of which 2 are read)."""
    ln, rn = [], []
    for i, (a, b) in enumerate(zip(lk, rk)):
        a, b = as_chunked(a, left.num_rows), as_chunked(b, right.num_rows)
        common = _common_key_type(a.type, b.type)
        if common is not None:
            # integers beyond 2**53 compared with a double round, as in PostgreSQL (int8 =
            # float8 converts the integer); Arrow's safe cast would refuse them
            unsafe = pa.types.is_floating(common)
            a, b = a.cast(common, safe=not unsafe), b.cast(common, safe=not unsafe)
        elif a.type != b.type:
            from planner.expr import pg_name
            raise SqlError(f"operator does not exist: {pg_name(a.type)} = {pg_name(b.type)}",
                           "42883")
        a, b = hash_key(a), hash_key(b)
        left = left.append_column(f"$lk{i}", a)
        right = right.append_column(f"$rk{i}", b)
        ln.append(f"$lk{i}")
        rn.append(f"$rk{i}")
    if left.num_columns == len(ln) and join_type in ("inner", "left outer"):
        left = left.append_column("$lpad", pa.nulls(left.num_rows, pa.int8()))
    if right.num_columns == len(rn) and join_type in ("inner", "left outer", "full outer"):
        right = right.append_column("$rpad", pa.nulls(right.num_rows, pa.int8()))
    # Acero builds its hash table on the right input: keep the cheaper side there
    if build_cost(right) > build_cost(left) and join_type in _SWAPPED:
        left, right, ln, rn, join_type = right, left, rn, ln, _SWAPPED[join_type]
    fanout = right.num_rows / max(1, estimate_ndv(right.column(rn[0]))) \
        if ex is not None and right.num_rows else 1.0
    if ex is None or (max(left.num_rows, right.num_rows) <= _guard.MORSEL_ROWS and
                      left.num_rows * max(fanout, 1.0) <= 4 * _guard.MORSEL_ROWS):
        # small inputs and output (a few morsels of work): one Acero call, no streaming
        out = left.join(right, keys=ln, right_keys=rn, join_type=join_type,
                        coalesce_keys=False, use_threads=True)
        if each is not None:
            return each(out.drop_columns([c for c in out.column_names
                                          if c.startswith(_INTERNAL)]))
    else:
        from pyarrow import acero

        def src(t, rows=None):
            return acero.Declaration("record_batch_reader_source",
                                     acero.RecordBatchReaderSourceNodeOptions(
                                         ex.source(t, rows=rows)))
        # One probe batch is one uninterruptible Acero task, and its work is its output:
        # with F build rows per key, probe morsels of JOIN_OUTPUT_ROWS / F rows keep a
        # task to about JOIN_OUTPUT_ROWS output rows (a self-join on a 2-valued key makes
        # thousands of rows of every probe row).
        probe_rows = max(64, min(_guard.MORSEL_ROWS, int(JOIN_OUTPUT_ROWS / max(fanout, 1))))
        lout, rout = (_output_columns(side, columns) for side in (left, right))
        if join_type in ("left semi", "left anti"):
            rout = []
        elif join_type in ("right semi", "right anti"):
            lout = []
        opts = acero.HashJoinNodeOptions(join_type, ln, rn, left_output=lout,
                                         right_output=rout)
        decl = acero.Declaration("hashjoin", opts, inputs=[src(left, probe_rows), src(right)])
        reader = decl.to_reader(use_threads=True)
        internal = [c for c in reader.schema.names if c.startswith(_INTERNAL)]
        if each is not None:
            return ex.collect(reader, lambda t: each(t.drop_columns(internal)))
        out = ex.collect(reader)
    return out.drop_columns([c for c in out.column_names if c.startswith(_INTERNAL)])


_INTERNAL = ("$lk", "$rk", "$lpad", "$rpad")     # hash_join's own columns


def build_cost(t: pa.Table) -> int:
    """What making `t` a hash join's build side costs, about, in bytes: Acero copies
    every build row - its keys and the columns it carries - into its row format, while
    the probe side's columns are only gathered at the matches. So the side with fewer
    bytes builds, not the one with fewer rows: TPC-H Q10's 57k orders (two integers)
    build in under half the CPU of its 42k customers (four text columns), and 115k
    narrow lineitem rows in ~2/3 of the 57k wide customer-order rows. Each row also
    counts as 16 bytes for its hash table entry."""
    return t.nbytes + 16 * t.num_rows


def _output_columns(side: pa.Table, columns: set[str] | None) -> list[str]:
    """The columns of one side of a streamed hash join that its output carries: not the
    evaluated keys, and only those in `columns` (None: all); one at least (its first,
    dropped afterwards if it is hash_join's own), so that the side's rows are there."""
    out = [c for c in side.column_names
           if not c.startswith(("$lk", "$rk")) and (columns is None or c in columns)]
    return out or side.column_names[:1]


def _integer_like(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_date32(t) or pa.types.is_timestamp(t)


def _differs_pair(node: L.Join, left: pa.Table, right: pa.Table) -> tuple[str, str] | None:
    """(left column, right column) when the join's residual is exactly `x <> y` of a
    left and a right column of one integer-like type (`JoinOperators._differs_join`);
    else None."""
    r = node.residual
    while isinstance(r, exp.Paren):
        r = r.this
    if not isinstance(r, exp.NEQ) or not isinstance(r.this, exp.Column) or \
            not isinstance(r.expression, exp.Column):
        return None
    a, b = r.this.name, r.expression.name
    ln, rn = set(left.column_names), set(right.column_names)
    if a in ln and b in rn and a not in rn and b not in ln:
        lcol, rcol = a, b
    elif b in ln and a in rn and b not in rn and a not in ln:
        lcol, rcol = b, a
    else:
        return None
    lt, rt = left.schema.field(lcol).type, right.schema.field(rcol).type
    if lt != rt or not _integer_like(lt):
        return None
    return lcol, rcol


def trace_key(node: L.Node, key: str) -> tuple[L.Scan, str] | None:
    """(the Scan, its key) that `node`'s output column `key` comes from unchanged, through
    operators that keep or drop whole rows by it - filters, projections, GROUP BY keys,
    DISTINCT, full sorts, inner joins and the left side of left / semi / anti joins - so
    that dropping the scan's rows whose value of it is not in a set drops exactly the
    output rows whose `key` is not in it; None where no such scan is (LIMIT, windows,
    grouping sets, set operations, computed values)."""
    while True:
        if isinstance(node, L.Scan):
            return (node, key) if not node.changes and key in output_keys(node) else None
        if isinstance(node, L.Filter) or isinstance(node, L.Distinct) or (
                isinstance(node, L.Sort) and node.limit is None):
            node = node.input
            continue
        if isinstance(node, (L.Project, L.Aggregate)):
            if isinstance(node, L.Aggregate) and node.sets is not None:
                return None
            e = dict(node.items if isinstance(node, L.Project) else node.groups).get(key)
            if not isinstance(e, exp.Column):
                return None
            node, key = node.input, e.name
            continue
        if isinstance(node, L.MultiJoin):
            node = next((i for i in node.inputs if key in output_keys(i)), None)
            if node is None:
                return None
            continue
        if isinstance(node, L.Join) and node.kind in ("left", "semi", "anti") and \
                key in output_keys(node.left):
            node = node.left
            continue
        return None


SELECTIVE = 0.9        # an input run that kept more of its estimate filters nothing


def _filter_links(node: L.MultiJoin, owner: dict[str, int]) -> list[list[tuple]]:
    """For each input i: (probe key of i, build expression, build input j) of the equalities
    that may filter i's rows by j's: the join's `column = expression` conditions, and every
    two columns of different inputs that equalities of columns make equal (a = b AND b = c
    gives a = c: TPC-H Q09's part filters partsupp through lineitem's l_partkey)."""
    parent: dict[str, str] = {}

    def find(k):
        while parent.get(k, k) != k:
            k = parent[k]
        return k
    links: list[list[tuple]] = [[] for _ in node.inputs]
    seen = set()

    def add(i, x, y, j):
        if (i, x, y.sql()) not in seen:
            seen.add((i, x, y.sql()))
            links[i].append((x, y, j))
    for c in node.conditions:
        for i in range(len(node.inputs)):
            for j in range(len(node.inputs)):
                if i == j:
                    continue
                pair = _split_equi(c, {i}, {j}, owner)
                if pair is None:
                    continue
                x, y = pair
                if isinstance(x, exp.Column):
                    if isinstance(y, exp.Column):
                        parent.setdefault(x.name, x.name)
                        parent.setdefault(y.name, y.name)
                        parent[find(x.name)] = find(y.name)
                    else:
                        add(i, x.name, y, j)
    classes: dict[str, list[str]] = {}
    for k in list(parent):
        classes.setdefault(find(k), []).append(k)
    for members in classes.values():
        for a in members:
            for b in members:
                if owner[a] != owner[b]:
                    add(owner[a], a, L.keycol(b), owner[b])
    return links


JOIN_OUTPUT_ROWS = 1 << 17      # output rows one probe morsel may make, about

_SWAPPED = {"inner": "inner", "left semi": "right semi", "left anti": "right anti",
            "left outer": "right outer"}


CROSS_JOIN_CHUNK_ROWS = 1 << 20


def cross_join(left: pa.Table, right: pa.Table, check_cancel=None, chunk_filter=None
               ) -> pa.Table:
    """Every left row with every right row, built in chunks of at most about a million
    output rows (CROSS_JOIN_CHUNK_ROWS: both sides are split, so a chunk is ~10-50 ms of
    `take`); before each chunk the guard checks for cancel / statement_timeout, and each
    chunk kept is charged to the query's memory limit (53200 past it). `chunk_filter(t)`
    (a join condition, a projection) applies to each chunk as it is made, so a non-equi
    join holds only its matches, never the whole product. No row cap: what stops a product
    too large to hold is the memory limit, and a cancel or timeout stops a long one."""
    nl, nr = left.num_rows, right.num_rows
    rstep = max(1, min(nr, CROSS_JOIN_CHUNK_ROWS))
    lstep = max(1, CROSS_JOIN_CHUNK_ROWS // rstep)
    guard = check_cancel if isinstance(check_cancel, QueryGuard) else None
    parts = []
    for ls in range(0, max(nl, 1), lstep):
        lrows = min(lstep, nl - ls)              # (slicing a column-less table does not
        chunk = left.slice(ls, lrows)            # clamp its length: count explicitly)
        for rs in range(0, max(nr, 1), rstep):
            if check_cancel is not None:
                check_cancel()
            rrows = min(rstep, nr - rs)
            m = lrows * rrows
            li = np.repeat(np.arange(lrows, dtype=np.int64), rrows)
            ri = np.tile(np.arange(rs, rs + rrows, dtype=np.int64), lrows)
            out = chunk.take(pa.array(li)) if chunk.num_columns else empty_rows(m)
            rt = right.take(pa.array(ri))
            for name in rt.column_names:
                out = out.append_column(name, rt.column(name))
            if chunk_filter is not None:
                out = chunk_filter(out)
            if guard is not None:
                guard.charge(table_nbytes(out))
            parts.append(out)
    return concat_tables(parts) if len(parts) != 1 else parts[0]


class JoinOperators:
    """Join, MultiJoin (greedy operator ordering) and cross joins.

    One part of a statement's `Executor` (`Executor.joins`), which it reaches
    through its public members only: `ex.run(node)` for its inputs, `ex.eval`,
    `ex.guard`, `ex.stats`, ... and `ex.runtime_filters`."""

    def __init__(self, ex):
        self.ex = ex            # the Executor whose statement this part runs

    # -- joins -----------------------------------------------------------------------------
    def run_join(self, node: L.Join) -> pa.Table:
        if node.kind == "semi" and isinstance(node.left, L.MultiJoin) and node.left_keys and \
                self.estimate_rows(node.right) < self.estimate_rows(node.left):
            # Semi-join reduction: run the subquery side first; if it is smaller than the
            # inner-join input that owns the semi join's left columns, filter that input
            # before the inner joins (TPC-H Q18: 57 order keys against 6M joined rows). The
            # semi join is applied again on top, where it is then cheap. Taken when the
            # subquery is estimated smaller than the joins; else the left side runs first
            # and filters the subquery's scan by its keys (TPC-H Q21).
            right = self.ex.run(node.right)
            rk = [self.ex.eval(e, right) for e in node.right_keys]
            # the right keys as runtime filters on the left's scans (through the inner
            # joins: the other inputs are then filtered by the reduced one); where no key
            # comes from a scan, the input that owns them is semi-joined before the joins
            filters = self._key_filters(node.left, node.left_keys, node.right_keys, rk)
            if not filters:
                left_refs = set().union(*(refs(e) for e in node.left_keys))
                if node.residual is not None:
                    left_refs |= refs(node.residual) - set(output_keys(node.right))
                for i, inp in enumerate(node.left.inputs):
                    if left_refs <= set(output_keys(inp)):
                        self.ex.prefilter[id(node.left)] = (i, node, right)
                        break
            left = self.run_filtered(node.left, filters, node)
            lk = [self.ex.eval(e, left) for e in node.left_keys]
        else:
            left = self.ex.run(node.left)
            lk = [self.ex.eval(e, left) for e in node.left_keys]
            # the right side's rows whose key no left row has cannot change the result
            right = self.run_filtered(node.right, self._join_filters(node, lk), node)
        rk = [self.ex.eval(e, right) for e in node.right_keys]
        kind = node.kind
        if node.null_aware:
            if right.num_rows == 0:
                return left
            if any(k.null_count for k in rk):
                return left.slice(0, 0)
            keep = pc.invert(pc.is_null(lk[0]))
            left, lk = left.filter(keep), [k.filter(keep) for k in lk]
        if node.residual is None:
            if not lk:
                if kind in ("semi", "anti"):
                    has = right.num_rows > 0
                    return left if has == (kind == "semi") else left.slice(0, 0)
                return self._cross_outer(left, right, kind)
            return hash_join(left, right, lk, rk, {"left": "left outer", "full": "full outer",
                                                   "semi": "left semi",
                                                   "anti": "left anti"}[kind], self.ex,
                             columns=self.ex.needed_above(node))
        return self._residual_join(node, left, right, lk, rk)

    def _join_filters(self, node: L.Join, lk: list) -> list:
        """Runtime filters on the right side of a left / semi / anti join from the left
        keys (not NOT IN's null-aware anti join: a NULL on the right decides it)."""
        if node.kind not in ("left", "semi", "anti") or node.null_aware or self.ex.schema_only:
            return []
        return self._key_filters(node.right, node.right_keys, node.left_keys, lk)

    def _key_filters(self, probe: L.Node, probe_keys, build_keys, build_values) -> list:
        """Runtime filters on `probe`'s key columns (those a scan below it gives unchanged)
        from the values of the other side's keys."""
        if self.ex.schema_only:
            return []
        filters = []
        for pe, be, vals in zip(probe_keys, build_keys, build_values):
            if not isinstance(pe, exp.Column):
                continue
            typ = self._probe_types(probe, [pe.name]).get(pe.name)
            if typ is None:
                continue
            f = _rf.RuntimeFilter.build(pe.name, typ, vals, be.sql())
            if f is not None:
                self.ex.guard.charge(f.nbytes)
                filters.append(f)
        return filters

    def _semi_filter(self, node: L.Join, left: pa.Table, right: pa.Table) -> pa.Table:
        lk = [self.ex.eval(e, left) for e in node.left_keys]
        rk = [self.ex.eval(e, right) for e in node.right_keys]
        if node.residual is None:
            return hash_join(left, right, lk, rk, "left semi", self.ex)
        return self._residual_join(node, left, right, lk, rk)

    def _residual_join(self, node, left, right, lk, rk) -> pa.Table:
        """semi/anti/left join with a non-equi condition: inner join on the equi keys (or a
        cross join), residual filter, matched left row numbers, then shape the result."""
        rid = "$rid"
        lt = left.append_column(rid, pa.array(np.arange(left.num_rows, dtype=np.int64)))
        pair = _differs_pair(node, left, right) if lk and node.kind in ("semi", "anti") \
            else None
        if pair is not None:
            return self._differs_join(node, left, lt, right, lk, rk, *pair)
        if lk:
            matched = hash_join(lt, right, lk, rk, "inner", self.ex)
            matched = self.ex.filter_table(matched, node.residual)
        else:           # the residual is applied to each chunk of the product as it is made
            matched = cross_join(lt, right, self.ex.check_cancel,
                                 lambda t: self.ex.filter_table(t, node.residual))
        if node.kind in ("semi", "anti"):
            ids = pc.unique(matched.column(rid))
            mask = pc.is_in(lt.column(rid), value_set=ids)
            if node.kind == "anti":
                mask = pc.invert(mask)
            return left.filter(mask)
        if node.kind == "left":
            ids = pc.unique(matched.column(rid))
            unmatched = left.filter(pc.invert(pc.is_in(lt.column(rid), value_set=ids)))
            pad = unmatched
            for f in right.schema:
                pad = pad.append_column(f.name, pa.nulls(unmatched.num_rows, f.type))
            return concat_tables([matched.drop_columns([rid]).select(pad.column_names), pad])
        raise SqlError("FULL JOIN with a non-equality condition is not supported", "0A000")

    def _differs_join(self, node, left, lt, right, lk, rk, lcol: str, rcol: str
                      ) -> pa.Table:
        """EXISTS / NOT EXISTS (semi / anti join) on equal keys with the one residual
        `right.y <> left.x` over integer-like columns (TPC-H Q21: another supplier on the
        same order): a right row with y <> x exists for a left row iff its key's group of
        non-NULL y holds a value other than x, i.e. iff x is not NULL and the group's min
        or max differs from x. The right side is grouped (min, max of y by key) and joined
        to the left rows, one match each at most, instead of every left row meeting every
        right row of its key before the residual is tested."""
        keys = [f"$gk{i}" for i in range(len(rk))]
        cols = {k: hash_key(as_chunked(a, right.num_rows)) for k, a in zip(keys, rk)}
        cols["$y"] = right.column(rcol)
        groups = self.ex.aggregates.aggregate_plan(
            pa.table(cols), keys, [("$y", "hash_min", None, "$mn"),
                                   ("$y", "hash_max", None, "$mx")], None)
        probe = pa.table({"$rid": lt.column("$rid"), "$x": left.column(lcol)})
        matched = hash_join(probe, groups, lk, [groups.column(k) for k in keys], "inner",
                            self.ex)
        x = matched.column("$x")
        differs = pc.or_kleene(pc.not_equal(matched.column("$mn"), x),
                               pc.not_equal(matched.column("$mx"), x))
        ids = pc.unique(matched.column("$rid").filter(pc.fill_null(differs, False)))
        mask = pc.is_in(lt.column("$rid"), value_set=ids)
        if node.kind == "anti":
            mask = pc.invert(mask)
        return left.filter(mask)

    def _cross_outer(self, left, right, kind) -> pa.Table:
        if kind == "left" and right.num_rows == 0:
            pad = left
            for f in right.schema:
                pad = pad.append_column(f.name, pa.nulls(left.num_rows, f.type))
            return pad
        if kind == "full":
            raise SqlError("FULL JOIN without an equality condition is not supported", "0A000")
        return cross_join(left, right, self.ex.check_cancel)

    # -- runtime filters: the inputs of a MultiJoin, smallest first ------------------------
    def estimate_rows(self, node: L.Node, runtime: bool = True, filters: bool = True
                      ) -> float:
        """A cheap upper estimate of a plan's rows, to order a MultiJoin's inputs: a scan's
        table row count (the engine counts without decoding), halved for each filter or
        pushed predicate, at most the key count of its runtime filters; above a scan, its
        estimate; a join, its largest input. `filters=False` (and `runtime=False`): the
        rows before any filter, against which an input's selectivity is measured."""
        if isinstance(node, L.Scan):
            if node.changes:
                return float("inf")
            n = self.ex.table_rows.get(node.table)
            if n is None:
                table = self.ex.catalog.table(node.table)
                if getattr(table, "virtual", False):
                    n = float("inf")
                else:
                    n = float(table.count_rows())
                self.ex.table_rows[node.table] = n
            if filters:
                n *= 0.5 ** min(4, len(node.filters) + len(node.pushed))
            runtime_filters = self.ex.runtime_filters.get(id(node)) if runtime else None
            if runtime_filters:     # about one row per key of the most selective filter
                n = min(n, min(f.count for f in runtime_filters))
            return n
        if isinstance(node, L.Filter):
            return (0.5 if filters else 1.0) * self.estimate_rows(node.input, runtime, filters)
        if isinstance(node, L.Limit) and node.limit is not None:
            return min(float(node.limit), self.estimate_rows(node.input, runtime, filters))
        kids = node.children()
        if not kids:
            return float("inf")
        return max(self.estimate_rows(k, runtime, filters) for k in kids)

    def _run_inputs(self, node: L.MultiJoin, owner: dict[str, int]) -> list[pa.Table]:
        """Run a MultiJoin's inputs, each one's scan filtered by the join keys of the inputs
        run before it (planner/executor/runtime_filters.py). Next runs the input whose
        estimate, scaled by the selectivity of the inputs already run that can filter it,
        is smallest - but a bare scan, which can filter nothing, waits for an input that can
        filter it (`waits`); a condition over that one input alone filters it at once."""
        n = len(node.inputs)
        local = [[] for _ in range(n)]
        for c in node.conditions:
            ins = {owner[k] for k in refs(c) if k in owner}
            if len(ins) == 1:
                local[next(iter(ins))].append(c)
        if n < 2 or self.ex.schema_only:
            out = []
            for inp, conds in zip(node.inputs, local):
                t = self.ex.run(inp)
                for c in conds:
                    t = self.ex.filter_table(t, c)
                out.append(t)
            return out
        est = [max(1.0, self.estimate_rows(i)) for i in node.inputs]
        # an input's selectivity: its rows against its rows before any filter
        base = [max(1.0, self.estimate_rows(i, runtime=False, filters=False))
                for i in node.inputs]
        links = _filter_links(node, owner)
        done: dict[int, pa.Table] = {}
        sel: dict[int, float] = {}

        def useful(i):      # {probe key: [(j, build expression)]} from selective inputs run
            out = {}
            for x, y, j in links[i]:
                if j in done and sel[j] < SELECTIVE:
                    out.setdefault(x, []).append((j, y))
            return out

        def score(i):
            f = 1.0
            for srcs in useful(i).values():
                f *= min(sel[j] for j, _ in srcs)
            return est[i] * f

        def waits(i):
            # a bare scan (no filter, pushed predicate, condition or runtime filter of its
            # own) returns its whole table: its selectivity is 1, so it can filter no
            # other input, and running it early gains nothing; it waits until an input
            # run before it can filter it, or until only such scans remain (TPC-H Q10:
            # customer, 150k rows with long text, is then filtered by the 3-month orders
            # range to the ~43k customers that ordered, instead of being read whole)
            inp = node.inputs[i]
            return isinstance(inp, L.Scan) and not inp.filters and not inp.pushed \
                and not local[i] and inp.snapshot is None and not inp.changes \
                and est[i] >= base[i] and not useful(i)

        remaining = list(range(n))
        while remaining:
            i = min(remaining, key=lambda i: (waits(i), score(i), i))
            remaining.remove(i)
            inp = node.inputs[i]
            sources = useful(i)
            filters = self._build_filters(sources, self._probe_types(inp, sources), done) \
                if sources else []
            t = self.run_filtered(inp, filters, node)
            for c in local[i]:
                t = self.ex.filter_table(t, c)
            done[i] = t
            sel[i] = min(1.0, t.num_rows / base[i])
        return [done[i] for i in range(n)]

    def _build_filters(self, sources: dict, types: dict, done: dict) -> list:
        """RuntimeFilters on probe keys (typed by `types`) from the build expressions over
        the inputs in `done`."""
        filters = []
        for x, srcs in sources.items():
            typ = types.get(x)
            if typ is None:
                continue
            for j, y in srcs:
                f = _rf.RuntimeFilter.build(x, typ, self.ex.eval(y, done[j]), y.sql())
                if f is not None:
                    self.ex.guard.charge(f.nbytes)
                    filters.append(f)
        return filters

    def _probe_types(self, node: L.Node, keys) -> dict[str, pa.DataType]:
        """The Arrow types of `keys` of `node` that come unchanged from a scan below it."""
        out = {}
        for k in keys:
            traced = trace_key(node, k)
            if traced is None:
                continue
            scan, sk = traced
            table = self.ex.catalog.table(scan.table)
            if getattr(table, "virtual", False):
                continue
            col = sk[len(scan.prefix) + 1:]
            out[k] = table.schema.arrow_schema([col]).field(0).type
        return out

    def run_filtered(self, node: L.Node, filters: list, owner_node: L.Node) -> pa.Table:
        """Run `node` with runtime filters on its keys: each applies to the batches of the
        scan below `node` that its key comes from unchanged (`trace_key`), so rows that
        cannot join are never held (nor aggregated, nor joined further)."""
        placed = []
        for f in filters:
            traced = trace_key(node, f.key)
            if traced is None:
                continue                      # every filter was built from a traced key
            scan, f.key = traced
            self.ex.runtime_filters.setdefault(id(scan), []).append(f)
            placed.append((id(scan), f))
        try:
            return self.ex.run(node)
        finally:
            for sid, f in placed:
                lst = self.ex.runtime_filters.get(sid)
                if lst is not None:
                    lst.remove(f)
                    if not lst:
                        del self.ex.runtime_filters[sid]

    def run_multijoin(self, node: L.MultiJoin) -> pa.Table:
        owner = {}
        for i, inp in enumerate(node.inputs):
            for k in output_keys(inp):
                owner[k] = i
        inputs = self._run_inputs(node, owner)
        pre = self.ex.prefilter.pop(id(node), None)
        if pre is not None:
            i, semi, right = pre
            if right.num_rows < inputs[i].num_rows:
                t = inputs[i]
                inputs[i] = self._semi_filter(semi, t, right)
                if self.ex.analyze:
                    self.ex.stats.setdefault(id(node), NodeStats()).detail.append(
                        f"semi-join reduction of input [{i}]: {t.num_rows} -> "
                        f"{inputs[i].num_rows} rows")
        needed = self.ex.needed_above(node)
        comps = [_Comp(t, {i}) for i, t in enumerate(inputs)]
        pending = [(c, {owner[k] for k in refs(c) if k in owner}) for c in node.conditions]
        order = []
        # conditions over a single input were applied as it ran (_run_inputs); those over
        # none (constants) apply at once
        for c, ins in list(pending):
            if len(ins) <= 1:
                if not ins:
                    for comp in comps:
                        comp.table = self.ex.filter_table(comp.table, c)
                pending.remove((c, ins))
        while len(comps) > 1:
            self.ex.check_cancel()
            best = None
            for a, b in itertools.combinations(range(len(comps)), 2):
                A, B = comps[a], comps[b]
                keys = []
                for c, ins in pending:
                    if not ins <= (A.inputs | B.inputs) or ins <= A.inputs or ins <= B.inputs:
                        continue
                    pair = _split_equi(c, A.inputs, B.inputs, owner)
                    if pair is not None:
                        keys.append(pair)
                if not keys:
                    continue
                est = self._estimate(A, B, keys)
                if best is None or est < best[0]:
                    best = (est, a, b, keys)
            if best is None:      # no connected pair: cross join the two smallest
                a, b = sorted(range(len(comps)), key=lambda i: comps[i].table.num_rows)[:2]
                best = (comps[a].table.num_rows * comps[b].table.num_rows, a, b, [])
            _est, a, b, keys = best
            A, B = comps[a], comps[b]
            if build_cost(A.table) < build_cost(B.table):  # the cheaper side builds
                A, B = B, A
                keys = [(r, l) for l, r in keys]
            merged = A.inputs | B.inputs
            t0 = time.perf_counter()
            # the conditions this join covers (but its keys), and the columns needed
            # above, are applied to each batch of its output as it is made: a join with a
            # large fan-out keeps only its matches and the columns used, never the whole
            # product (a hash join's output batches, a cross join's chunks)
            covered = [c for c, ins in pending
                       if ins <= merged and not (keys and _is_key_of(c, keys))]
            keep = needed | {k for c, ins in pending if not ins <= merged for k in refs(c)}

            def shrink(chunk, covered=covered, keep=keep):
                for c in covered:
                    chunk = self.ex.filter_table(chunk, c)
                return chunk.select([n for n in chunk.column_names if n in keep])
            if keys:
                lk = [self.ex.eval(x, A.table) for x, _ in keys]
                rk = [self.ex.eval(y, B.table) for _, y in keys]
                t = hash_join(A.table, B.table, lk, rk, "inner", self.ex, shrink,
                              keep | {k for c in covered for k in refs(c)})
            else:
                t = cross_join(A.table, B.table, self.ex.check_cancel, shrink)
            pending = [(c, ins) for c, ins in pending if not ins <= merged]
            keep_cols = needed | {k for c, _ in pending for k in refs(c)}
            t = t.select([n for n in t.column_names if n in keep_cols])
            order.append(f"join {sorted(A.inputs)} x {sorted(B.inputs)} -> {t.num_rows} rows"
                         f" ({A.table.num_rows} probe x {B.table.num_rows} build, "
                         f"{(time.perf_counter() - t0) * 1000:.1f} ms)")
            # the two inputs are dropped now: only the join's result stays held
            self.ex.guard.release(table_nbytes(A.table) + table_nbytes(B.table))
            comps = [c for i, c in enumerate(comps) if i not in (a, b)] + [_Comp(t, merged)]
        if self.ex.analyze:
            self.ex.stats.setdefault(id(node), NodeStats()).detail.extend(order)
        t = comps[0].table
        for c, _ in pending:
            t = self.ex.filter_table(t, c)
        return t

    def _estimate(self, A: "_Comp", B: "_Comp", keys) -> float:
        na, nb = A.table.num_rows, B.table.num_rows
        if na == 0 or nb == 0:
            return 0.0
        da = db = 1
        for x, y in keys:
            da *= A.ndv(x, self.ex)
            db *= B.ndv(y, self.ex)
        return na * nb / max(min(da, na), min(db, nb), 1)

