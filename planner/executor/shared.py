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
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
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
            return ("scan", n.table, tuple(n.columns), tuple(repr(p) for p in n.pushed),
                    tuple(expr(f) for f in n.filters), snap)
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

    try:
        return repr(visit(node))
    except _Unshared:
        return None


class Shared:
    """The repeated aggregations of one statement and their kept results."""

    def __init__(self) -> None:
        self.repeated: set[str] = set()
        self.results: dict[str, pa.Table] = {}
        self._fp: dict[int, str | None] = {}      # id(node) -> fingerprint
        self.reused = 0

    def plan(self, root: L.Node) -> None:
        """Find the aggregations that occur more than once under `root`."""
        counts: Counter = Counter()
        for n in L.all_nodes(root):
            if isinstance(n, L.Aggregate):
                fp = self.key(n)
                if fp is not None:
                    counts[fp] += 1
        self.repeated = {fp for fp, c in counts.items() if c > 1}

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
        if fp in self.results or table_nbytes(t) > MAX_BYTES:
            return
        for n in L.walk(node):
            if id(n) in prefilter:
                return
            for f in runtime_filters.get(id(n), ()):
                if f.kept != f.seen:
                    return
        self.results[fp] = t
