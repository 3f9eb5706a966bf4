"""Subqueries in the binder (see the shapes in the package docstring): EXISTS / IN in WHERE
become semi / anti joins, scalar subqueries SubqueryRefs or grouped left joins, and the
rest SubPlans, whose `_SubPlanSource` binds the subquery per outer tuple and hands it to
the injected SubqueryRunner.
"""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
from sqlglot import exp

from planner import logical as L
from planner.errors import FeatureNotSupported, SqlError
from planner.expr import Const, InSubPlan, SubPlan
from planner.logical import and_all, AvgOf, conjuncts, keycol, SubqueryRef
from planner.binder.common import Scope, in_nested_subquery, need_runner, position


class _SubPlanSlot(exp.Expression):
    """Where a SubPlan's i-th outer value goes in its query (replaced before binding)."""
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class _SubPlanSource:
    """What a SubPlan runs: the query with the outer values substituted, bound by a fresh
    binder of the same kind over the same catalog and parameters, and handed to the
    binder's SubqueryRunner (which optimizes and executes it)."""

    def __init__(self, binder, query: exp.Expression):
        self.binder_type = type(binder)
        self.catalog = binder.catalog
        self.sql = binder.sql
        self.params = binder.params
        self.runner = binder.runner
        self.query = query

    def __deepcopy__(self, memo: dict) -> _SubPlanSource:
        return self

    def run(self, values: list[pa.Scalar], schema_only: bool = False) -> pa.Table:
        q = self.query.copy()
        for slot in list(q.find_all(_SubPlanSlot)):
            slot.replace(Const(this=values[slot.this]))
        out = self.binder_type(self.catalog, self.sql, self.params, self.runner).bind_query(q)
        return need_runner(self.runner, self.sql, q)(out, schema_only=schema_only)


def _defined_within(col: exp.Column, root: exp.Expression) -> bool:
    """Whether `col` refers to a source of a SELECT between `col` and `root`: its table
    alias is one, or it is unqualified (qualify qualifies every column it can resolve; it
    leaves outer columns a FROM-less derived table reads, e.g. pgcli's
    `(SELECT unnest(confkey)) x`, unqualified)."""
    if not col.table:
        sel = col.parent
        while sel is not None and not isinstance(sel, exp.Select):
            sel = sel.parent
        return sel is None or bool(sel.args.get("from_") or sel.args.get("from") or
                                   sel.args.get("joins"))
    p = col.parent
    while p is not None:
        if isinstance(p, exp.Select):
            from_ = p.args.get("from_") or p.args.get("from")
            sources = ([from_.this] if from_ is not None else []) + \
                [j.this for j in p.args.get("joins") or []]
            if any(s.alias_or_name == col.table for s in sources):
                return True
        if p is root:
            return False
        p = p.parent
    return False


def _has_lateral_source(sel: exp.Select) -> bool:
    """Whether a FROM item of `sel` may read outer columns: a function call, or a derived
    table with a column not defined inside it."""
    from_ = sel.args.get("from_") or sel.args.get("from")
    sources = ([from_.this] if from_ is not None else []) + \
        [j.this for j in sel.args.get("joins") or []]
    for s in sources:
        if isinstance(s, exp.Unnest) or (isinstance(s, exp.Table) and
                                         isinstance(s.this, exp.Func)):
            return True
        if isinstance(s, exp.Subquery) and any(not _defined_within(c, s)
                                               for c in s.find_all(exp.Column)):
            return True
    return False


def quantified_query(node: exp.Expression) -> exp.Expression | None:
    """The query of `op ANY (subquery)` / `op ALL (subquery)`, else None (an array)."""
    q = node.this
    while isinstance(q, (exp.Subquery, exp.Paren)) and not q.alias:
        if isinstance(q, exp.Subquery) and isinstance(q.this, exp.Query):
            return q.this
        q = q.this
    return q if isinstance(q, exp.Query) else None


def _set_operand(sq: exp.Subquery) -> bool:
    """Whether subquery `sq` is the set of an IN / ANY / ALL (bound as an array SubPlan by
    `Binder.expr`), not a scalar subquery."""
    p = sq.parent
    return (isinstance(p, exp.In) and p.args.get("query") is sq) or isinstance(p, (exp.Any,
                                                                                   exp.All))


def _empty_group_value(value: exp.Expression, aggs: list[L.AggCall]) -> exp.Expression | None:
    """`value` (an expression over aggregate keys) for a group with no rows: count and
    count(*) are 0, the other aggregates NULL. None when that is simply NULL (no count in
    `value`), so the plain left-join result needs no CASE."""
    counts = {a.key for a in aggs if a.func in ("count", "count_star")}
    value = value.copy().transform(                 # avg over no rows is NULL
        lambda n: exp.Null() if isinstance(n, AvgOf) else n)
    if not any(c.name in counts for c in value.find_all(exp.Column)):
        if isinstance(value, exp.Column) or value.find(exp.Coalesce, exp.Case, exp.If,
                                                       exp.Is) is None:
            return None
    keys = {a.key for a in aggs}

    def sub(n):
        if isinstance(n, exp.Column) and n.name in keys:
            return exp.Literal.number(0) if n.name in counts else exp.Null()
        return n
    return value.transform(sub)


def _outer_refs(q: exp.Expression) -> bool:
    """Whether query `q` reads a column of an enclosing query (anywhere, not only in its
    WHERE: the SELECT list of `(SELECT t.b)`, a branch of a set operation)."""
    return any(not _defined_within(c, q) for c in q.find_all(exp.Column))


class SubqueryBinding:
    """Subqueries: decorrelated into joins where their shape allows, else SubPlans.
    Mixed into planner.binder.Binder."""

    # -- subqueries in WHERE ---------------------------------------------------------------
    def subquery_conjunct(self, c: exp.Expression, node: L.Node, scope: Scope, ctes
                          ) -> L.Node:
        negated = False
        inner = c
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Not):
            negated = True
            inner = inner.this
            while isinstance(inner, exp.Paren):
                inner = inner.this
        if isinstance(inner, exp.Exists):
            return self.exists(inner.this, node, scope, ctes, anti=negated)
        if isinstance(inner, exp.In) and inner.args.get("query") is not None:
            return self.in_subquery(inner, node, scope, ctes, negated)
        # A scalar subquery somewhere inside an expression.
        bound, node = self.expr_with_subqueries(c, node, scope, ctes)
        return L.Filter(node, bound)

    def _split_correlated(self, sel: exp.Select) -> tuple[list, list]:
        """WHERE conjuncts of `sel` -> (local, correlated) by the aliases sel defines."""
        local_aliases = set()
        from_ = sel.args.get("from_") or sel.args.get("from")
        sources = ([from_.this] if from_ is not None else []) + \
            [j.this for j in sel.args.get("joins") or []]
        for s in sources:
            local_aliases.add(s.alias_or_name)
        local, corr = [], []
        for c in conjuncts(self._where(sel)):
            outer = [col for col in c.find_all(exp.Column)
                     if col.table and col.table not in local_aliases
                     and self._nearest_select(col) is sel]
            (corr if outer else local).append(c)
        return local, corr

    @staticmethod
    def _nearest_select(node: exp.Expression) -> exp.Expression | None:
        p = node.parent
        while p is not None and not isinstance(p, exp.Select):
            p = p.parent
        return p

    def _subquery_select(self, q: exp.Expression) -> exp.Select:
        while isinstance(q, exp.Subquery):
            q = q.this
        if not isinstance(q, exp.Select):
            raise FeatureNotSupported("correlated set operations in subqueries are not "
                                      "supported", position=position(self.sql, q))
        return q

    def exists(self, q, node, scope, ctes, anti: bool, in_pair=None) -> L.Node:
        sel = self._subquery_select(q)
        local, corr = self._split_correlated(sel)
        if not corr and in_pair is None:
            # Uncorrelated EXISTS: true iff the subquery has a row (a one-row semi join).
            sub, _n, _k = self.query(sel, scope, ctes)
            return L.Join(node, L.Limit(sub, 1), "anti" if anti else "semi", [], [])
        if sel.args.get("group") or sel.args.get("having") or self._has_agg(sel) \
                or sel.args.get("limit") or sel.args.get("offset") or _has_lateral_source(sel):
            # not a plain join: evaluated per outer tuple (SubPlan / InSubPlan)
            if in_pair is not None:
                test: exp.Expression = InSubPlan(this=in_pair[0], expression=self.subplan(
                    sel, scope, "set"))
            else:
                test = self.subplan(sel, scope, "exists")
            return L.Filter(node, exp.Not(this=test) if anti else test)
        sub_scope = Scope(scope)
        sub = self.from_where(sel, sub_scope, ctes, where=local)
        inner_keys = sub_scope.keys()
        outer_keys = scope.keys()
        lk, rk, residual = self._split_equi([self.expr(c, sub_scope) for c in corr],
                                            lambda s: s and s <= outer_keys,
                                            lambda s: s and s <= inner_keys)
        if in_pair is not None:
            lk.insert(0, in_pair[0])
            rk.insert(0, self.expr(in_pair[1], sub_scope))
        return L.Join(node, sub, "anti" if anti else "semi", lk, rk, and_all(residual))

    def in_subquery(self, c: exp.In, node, scope, ctes, negated: bool) -> L.Node:
        q = c.args["query"]
        sel = q.this if isinstance(q, exp.Subquery) else q
        if isinstance(c.this, exp.Tuple):
            return self._row_in_subquery(c, sel, node, scope, ctes, negated)
        lhs = self.expr(c.this, scope)
        if isinstance(sel, exp.Select):
            _local, corr = self._split_correlated(sel)
            if corr:
                if negated:       # NULL-aware and correlated: per outer tuple (InSubPlan)
                    return L.Filter(node, exp.Not(this=self.expr(c, scope)))
                if len(sel.expressions) != 1:
                    raise SqlError("subquery has too many columns", "42601",
                                   position(self.sql, sel))
                return self.exists(sel, node, scope, ctes, anti=False,
                                   in_pair=(lhs, sel.expressions[0].unalias()))
        elif _outer_refs(sel):          # a correlated set operation: per outer tuple
            test = InSubPlan(this=lhs, expression=self.subplan(sel, scope, "set"))
            return L.Filter(node, exp.Not(this=test) if negated else test)
        sub, _names, keys = self.query(sel, scope, ctes)
        if len(keys) != 1:
            raise SqlError("subquery has too many columns", "42601", position(self.sql, sel))
        return L.Join(node, sub, "anti" if negated else "semi", [lhs], [keycol(keys[0])],
                      null_aware=negated)

    def _row_in_subquery(self, c: exp.In, sel, node, scope, ctes, negated: bool) -> L.Node:
        """`(a, b) IN (SELECT x, y ...)`, a WHERE conjunct: a semi join on every column (a
        NULL never matches, and a row that is not TRUE is dropped either way). NOT IN with
        a row (NULL-aware over several columns) and a correlated subquery: 0A000."""
        items = c.this.expressions
        if negated or (isinstance(sel, exp.Select) and self._split_correlated(sel)[1]) or \
                (not isinstance(sel, exp.Select) and _outer_refs(sel)):
            raise FeatureNotSupported("a row of several columns IN a subquery is supported "
                                      "for uncorrelated IN only (not NOT IN)",
                                      position=position(self.sql, c))
        sub, _names, keys = self.query(sel, scope, ctes)
        if len(keys) != len(items):
            raise SqlError("subquery has too " + ("many" if len(keys) > len(items) else "few")
                           + " columns", "42601", position(self.sql, sel))
        return L.Join(node, sub, "semi", [self.expr(i, scope) for i in items],
                      [keycol(k) for k in keys])

    def expr_with_subqueries(self, e: exp.Expression, node: L.Node, scope: Scope, ctes
                             ) -> tuple[exp.Expression, L.Node]:
        """Bind `e`, replacing each scalar subquery: uncorrelated ones by a SubqueryRef,
        correlated ones by a left join with the grouped subquery."""
        replacements: dict[int, exp.Expression] = {}
        for sq in list(e.find_all(exp.Subquery)):
            if in_nested_subquery(sq, e) or _set_operand(sq):
                continue
            sel = self._subquery_select(sq)
            _local, corr = self._split_correlated(sel)
            if not corr and _outer_refs(sel):       # correlated outside its WHERE
                replacements[id(sq)] = self.subplan(sel, scope, "scalar")
                continue
            if not corr:
                sub, _names, keys = self.query(sel, scope, ctes)
                if len(keys) != 1:
                    raise SqlError("subquery must return only one column", "42601",
                                   position(self.sql, sq))
                replacements[id(sq)] = SubqueryRef(this=L.Output(sub, _names, keys))
            else:
                ref, node = self.correlated_scalar(sel, node, scope, ctes)
                replacements[id(sq)] = ref
        return self.expr(e, scope, replacements=replacements), node

    def correlated_scalar(self, sel: exp.Select, node: L.Node, scope: Scope, ctes):
        local, corr = self._split_correlated(sel)
        if sel.args.get("group") or sel.args.get("limit") or len(sel.expressions) != 1 or \
                not self._has_agg(sel) or _has_lateral_source(sel):
            return self.subplan(sel, scope, "scalar"), node   # run per outer row
        sub_scope = Scope(scope)
        inner = self.from_where(sel, sub_scope, ctes, where=local)
        inner_keys = sub_scope.keys()
        outer_keys = scope.keys()
        lk, rk, other = self._split_equi([self.expr(c, sub_scope) for c in corr],
                                         lambda s: s and s <= outer_keys,
                                         lambda s: s and s <= inner_keys)
        if other:                             # not only equalities: run per outer row
            return self.subplan(sel, scope, "scalar"), node
        n = next(self._n)
        groups = [(f"$corr{n}.{i}", e) for i, e in enumerate(rk)]
        item = sel.expressions[0].unalias()
        aggs: list[L.AggCall] = []
        value = self.aggregate_expr(item, sub_scope, groups, aggs)
        agg = L.Aggregate(inner, groups, aggs)
        vkey = f"$corr{n}.value"
        proj = L.Project(agg, [(k, keycol(k)) for k, _ in groups] + [(vkey, value)])
        join = L.Join(node, proj, "left", lk, [keycol(k) for k, _ in groups])
        # An outer row without matching inner rows gets no group: its value is that of the
        # aggregates over no rows (count 0, others NULL), not NULL - `(SELECT count(*) ...)`
        # is 0 there. A joined group's first key is never NULL (it matched by equality).
        empty = _empty_group_value(value, aggs)
        if empty is None:
            return keycol(vkey), join
        return exp.Case(ifs=[exp.If(this=exp.Is(this=keycol(groups[0][0]),
                                                expression=exp.Null()), true=empty)],
                        default=keycol(vkey)), join

    def uncorrelated_subqueries(self, e, scope, ctes) -> dict[int, exp.Expression]:
        """Scalar subqueries above an aggregation (SELECT list, HAVING): uncorrelated only,
        each becoming a SubqueryRef."""
        out: dict[int, exp.Expression] = {}
        for sq in e.find_all(exp.Subquery):
            if in_nested_subquery(sq, e) or _set_operand(sq):
                continue
            sel = self._subquery_select(sq)
            if self._split_correlated(sel)[1] or _outer_refs(sel):
                out[id(sq)] = self.subplan(sel, scope, "scalar")
                continue
            sub, names, keys = self.query(sel, scope, ctes)
            if len(keys) != 1:
                raise SqlError("subquery must return only one column", "42601",
                               position(self.sql, sq))
            out[id(sq)] = SubqueryRef(this=L.Output(sub, names, keys))
        return out

    # -- PostgreSQL compatibility: subplans, set-returning functions, catalog functions -----
    # Client catalog queries (psql, SQLAlchemy, pgcli, JDBC) use shapes the decorrelation
    # above does not cover. These fall back to SubPlans (planner.expr.SubPlan: the subquery
    # bound and run once per distinct outer tuple), set-returning functions become joins
    # with a series of row numbers, and functions / reg* casts the catalog wrapper provides
    # (`catalog.function(name)`, e.g. wire.pg_catalog) become HostCalls.
    def subplan(self, q: exp.Expression, scope: Scope, kind: str,
                slots: list[tuple[exp.Expression, exp.Expression]] | None = None
                ) -> SubPlan:
        """A SubPlan for query `q` (a Select / set operation AST) evaluated in `scope`: its
        references to outer columns become the SubPlan's arguments. `slots` adds (node in
        `q`, bound value) pairs that are substituted the same way."""
        q = q.copy() if slots is None else q
        args: list[exp.Expression] = []
        index: dict[str, int] = {}
        for node, value in slots or []:
            node.replace(_SubPlanSlot(this=len(args)))
            args.append(value)
        for col in list(q.find_all(exp.Column)):
            if _defined_within(col, q):
                continue
            key = self.resolve(col, scope)
            if key not in index:
                index[key] = len(args)
                args.append(keycol(key))
            col.replace(_SubPlanSlot(this=index[key]))
        return SubPlan(plan=_SubPlanSource(self, q), expressions=args, kind=kind)

