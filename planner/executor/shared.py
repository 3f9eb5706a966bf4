"""Repeated aggregations computed once per statement: a WITH query read twice (TPC-H Q15's
revenue0, joined with supplier and read again by the scalar subquery that takes its
maximum) is bound as two copies of the same plan, and each copy scanned and aggregated
lineitem.

`fingerprint(node)` is a plan's canonical text: its scans' internal prefixes (`lineitem#2`
against `lineitem#5`) and the internal keys of the projections and aggregations inside it
are replaced by their positions in the plan, so two bindings of one query text get the
same fingerprint, and two plans with the same fingerprint compute the same rows, column
for column. Only Scans (not table_changes), Filters, Projects and Aggregates take part;
anything else, an expression reading a key from outside the plan (a correlation), a
scalar subquery, a volatile call (random(), clock_timestamp(), a volatile host function,
a correlated SubPlan), an ordered aggregate, makes the plan unshared (None).

`Shared` (one per statement: the executor of a scalar subquery shares its parent's)
knows which aggregation fingerprints occur at least twice in the statement, scalar
subqueries included (`plan`), and keeps their results (`get` / `put`), renamed to the
asking node's output keys on the way out. A result is kept only when it is the whole
aggregation: every runtime join filter on a scan below it dropped no row (a filter's
`seen == kept`), and no semi-join reduction applied inside it. A kept result handed to a
node whose scans carry runtime filters is a superset of what the filters would leave,
which is what its join would compute anyway (a runtime filter only drops rows that
cannot join). Results over MAX_BYTES are not kept; a kept result is metered by the query
memory limit while an operator holds it, not while it only waits in `Shared` for its
second reader (at most MAX_BYTES per repeated aggregation).

A scalar aggregate over the same rows as a grouped one (TPC-H Q11: `HAVING sum(v) >
(SELECT sum(v) * 0.0001 FROM <the same FROM and WHERE>)`) is rolled up from the grouped
result instead of joining and aggregating again: `_canonical(..., rows_only=True)` compares
the two inputs by their rows (scan column lists left out, inner MultiJoins included), each
scalar call must be a call of the grouped one (same function and canonical argument), and
`_roll_up` sums the sums (decimal or int64, when the per-group bounds times the groups
prove the total fits), sums the counts (avg is bound as sum / count), takes the extreme of
the extremes (not of floats: NaN); anything else is computed as before. The grouped result
is kept (`keep_grouped`) only when whole, as above, and only when it ran first (Q11's HAVING
reads its subquery after its input).
"""

from __future__ import annotations

import decimal
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner import logical as L
from planner.expr.core import NON_DETERMINISTIC
from planner.expr.subplans import HostCall, SubPlan
from planner.executor.kernels import table_nbytes

MAX_BYTES = 64 << 20        # a result above this is recomputed rather than held


class _Unshared(Exception):
    pass


def _volatile(e: exp.Expression) -> bool:
    for n in e.walk():
        if isinstance(n, (exp.Rand, SubPlan, L.SubqueryRef)):
            return True
        if isinstance(n, exp.Anonymous) and n.name.lower() in NON_DETERMINISTIC:
            return True
        if isinstance(n, HostCall) and n.args["fn"].volatile:
            return True
    return False


def fingerprint(node: L.Node) -> str | None:
    """The canonical text of `node`'s plan (see the module docstring), or None."""
    out = _canonical(node, rows_only=False)
    return None if out is None else out[0]


def _canonical(node: L.Node, rows_only: bool):
    """(canonical text of `node`'s plan, a function giving an expression over its output
    keys in canonical form), or None. `rows_only`: the text says which rows the plan
    gives, not which columns - a scan's column list is left out (a column a plan reads
    shows as `#<scan>.<column>` wherever it is used), and inner MultiJoins take part."""
    canon: dict[str, str] = {}
    counter = [0]

    def expr(e: exp.Expression) -> str:
        if _volatile(e):
            raise _Unshared

        def fix(n):
            if isinstance(n, exp.Column):
                c = canon.get(n.name)
                if c is None:
                    raise _Unshared         # a key from outside the plan
                return L.keycol(c)
            return n
        return e.transform(fix, copy=True).sql()

    def name(keys: list[str]) -> None:
        i = counter[0]
        counter[0] += 1
        for j, k in enumerate(keys):
            canon[k] = f"${i}.{j}"

    def visit(n: L.Node) -> tuple:
        if isinstance(n, L.Scan):
            if n.changes:
                raise _Unshared
            snap = expr(n.snapshot) if n.snapshot is not None else None
            i = counter[0]
            counter[0] += 1
            for c in n.columns:
                canon[n.key(c)] = f"#{i}.{c}"
            return ("scan", n.table, () if rows_only else tuple(n.columns),
                    tuple(repr(p) for p in n.pushed), tuple(expr(f) for f in n.filters), snap)
        if isinstance(n, L.MultiJoin) and rows_only:
            inputs = tuple(visit(i) for i in n.inputs)
            return ("multijoin", inputs, tuple(expr(c) for c in n.conditions))
        if isinstance(n, L.Filter):
            inner = visit(n.input)
            return ("filter", inner, expr(n.condition))
        if isinstance(n, L.Project):
            inner = visit(n.input)
            items = tuple(expr(e) for _, e in n.items)
            name([k for k, _ in n.items])
            return ("project", inner, items)
        if isinstance(n, L.Aggregate):
            inner = visit(n.input)
            if any(a.order for a in n.aggs):
                raise _Unshared
            groups = tuple(expr(e) for _, e in n.groups)
            aggs = tuple((a.func, None if a.arg is None else expr(a.arg), a.distinct,
                          repr(a.param)) for a in n.aggs)
            grouping = tuple(ix for _, ix in n.grouping)
            name(L.output_keys(n))
            return ("aggregate", inner, groups, aggs, n.sets, grouping)
        raise _Unshared

    def canonical_expr(e: exp.Expression) -> str | None:
        try:
            return expr(e)
        except _Unshared:
            return None

    try:
        return repr(visit(node)), canonical_expr
    except _Unshared:
        return None


# -- a scalar aggregate rolled up from a grouped one over the same rows -----------------------
_ROLLUP = {"sum": "sum", "count": "sum", "count_star": "sum", "min": "min", "max": "max"}


def _rollup_calls(node: L.Aggregate):
    """(the canonical text of `node`'s input rows, {(func, canonical argument): call}),
    or None when `node` has a call that cannot roll up (DISTINCT, ordered, other
    functions) or grouping sets."""
    if node.sets is not None or node.grouping:
        return None
    if any(a.distinct or a.order or a.func not in _ROLLUP for a in node.aggs):
        return None
    out = _canonical(node.input, rows_only=True)
    if out is None:
        return None
    text, canonical_expr = out
    calls = {}
    for a in node.aggs:
        arg = None if a.arg is None else canonical_expr(a.arg)
        if a.arg is not None and arg is None:
            return None
        calls[(a.func, arg)] = a
    return text, calls


def _roll_up(func: str, col) -> pa.Array | None:
    """The one value `func` over all rows gives, from its per-group values `col`; None
    where that is not exact here (float sums: another order of additions; float extremes:
    NaN; a decimal or int64 total that might not fit its type)."""
    typ = col.type
    if func == "sum":
        if pa.types.is_decimal(typ):
            limit = decimal.Decimal(10) ** (typ.precision - 1 - typ.scale)
        elif pa.types.is_int64(typ):
            limit = 1 << 63
        else:
            return None
        if len(col):
            lo, hi = pc.min_max(col).values()
            if abs(lo.as_py() or 0) * len(col) >= limit or \
                    abs(hi.as_py() or 0) * len(col) >= limit:
                return None
        return pa.array([pc.sum(col, min_count=1).as_py()], typ)
    if func in ("count", "count_star"):
        return pa.array([pc.sum(col).as_py() or 0], pa.int64())
    if pa.types.is_floating(typ) or pa.types.is_nested(typ):
        return None
    return pa.array([pc.min_max(col)[func].as_py()], typ)


class Shared:
    """The repeated aggregations of one statement and their kept results."""

    def __init__(self) -> None:
        self.repeated: set[str] = set()
        self.results: dict[str, pa.Table] = {}
        self._fp: dict[int, str | None] = {}      # id(node) -> fingerprint
        self.reused = 0
        # scalar aggregate id -> (grouped aggregate id, [(its call, the grouped call)]);
        # the grouped aggregates' ids whose results those read, and the results kept
        self.rollups: dict[int, tuple[int, list]] = {}
        self.rolled: set[int] = set()
        self.grouped: dict[int, pa.Table] = {}

    def plan(self, root: L.Node) -> None:
        """Find the aggregations that occur more than once under `root`."""
        counts: Counter = Counter()
        for n in L.all_nodes(root):
            if isinstance(n, L.Aggregate):
                fp = self.key(n)
                if fp is not None:
                    counts[fp] += 1
        self.repeated = {fp for fp, c in counts.items() if c > 1}
        self._plan_rollups(root)

    def _plan_rollups(self, root: L.Node) -> None:
        """A scalar aggregate over the same rows as a grouped one whose calls hold each of
        its own (TPC-H Q11: HAVING sum(v) > (SELECT sum(v) * 0.0001 ...) over the same
        join) is the roll-up of the grouped result (`rollup`): sums of the sums, counts
        and extremes of the extremes."""
        grouped: dict[str, list] = {}
        scalars = []
        for n in L.all_nodes(root):
            if not isinstance(n, L.Aggregate):
                continue
            rc = _rollup_calls(n)
            if rc is None:
                continue
            if n.groups:
                grouped.setdefault(rc[0], []).append((n, rc[1]))
            else:
                scalars.append((n, rc))
        for n, (text, calls) in scalars:
            for g, gcalls in grouped.get(text, ()):
                if all(k in gcalls and gcalls[k].func == k[0] for k in calls):
                    self.rollups[id(n)] = (id(g), [(a, gcalls[k]) for k, a in calls.items()])
                    self.rolled.add(id(g))
                    break

    def keep_grouped(self, node: L.Node, t: pa.Table, runtime_filters: dict,
                     prefilter: dict) -> None:
        """Keep a grouped aggregation's result that a scalar one rolls up (if whole)."""
        if id(node) in self.rolled and self._whole(node, t, runtime_filters, prefilter):
            self.grouped[id(node)] = t

    def rollup(self, node: L.Node) -> pa.Table | None:
        """`node`'s result rolled up from its grouped aggregation's kept result, or None
        (not planned, the grouped one not run yet or not whole, or not exact)."""
        plan = self.rollups.get(id(node))
        if plan is None:
            return None
        t = self.grouped.get(plan[0])
        if t is None:
            return None
        cols = {}
        for a, g in plan[1]:
            v = _roll_up(a.func, t.column(g.key))
            if v is None:
                return None
            cols[a.key] = v
        self.reused += 1
        return pa.table(cols)

    def key(self, node: L.Node) -> str | None:
        k = id(node)
        if k not in self._fp:
            self._fp[k] = fingerprint(node)
        return self._fp[k]

    def wanted(self, node: L.Node) -> str | None:
        """`node`'s fingerprint if it is a repeated aggregation, else None."""
        if not self.repeated or not isinstance(node, L.Aggregate):
            return None
        fp = self.key(node)
        return fp if fp in self.repeated else None

    def get(self, fp: str, node: L.Node) -> pa.Table | None:
        t = self.results.get(fp)
        if t is None:
            return None
        self.reused += 1
        return t.rename_columns(L.output_keys(node))

    def put(self, fp: str, node: L.Node, t: pa.Table, runtime_filters: dict,
            prefilter: dict) -> None:
        """Keep `t` (node's result) if it is the whole aggregation (module docstring)."""
        if fp not in self.results and self._whole(node, t, runtime_filters, prefilter):
            self.results[fp] = t

    @staticmethod
    def _whole(node: L.Node, t: pa.Table, runtime_filters: dict, prefilter: dict) -> bool:
        """Whether `t`, node's result, is the whole aggregation and small enough to keep:
        no runtime filter from outside it dropped a row of a scan below it, no semi-join
        reduction applied inside it (the filters its own joins placed are gone by now)."""
        if table_nbytes(t) > MAX_BYTES:
            return False
        for n in L.walk(node):
            if id(n) in prefilter:
                return False
            for f in runtime_filters.get(id(n), ()):
                if f.kept != f.seen:
                    return False
        return True
