"""Aggregates and windows in the binder: what follows FROM / WHERE in a SELECT - GROUP BY,
aggregate calls (avg as sum / count: `logical.AvgOf`), array_agg / string_agg (aggregate
calls that keep their DISTINCT and ORDER BY: `AggCall.order`), the ordered-set aggregates
(percentile_cont / percentile_disc / mode() WITHIN GROUP: `ordered_set`), ROLLUP / CUBE /
GROUPING SETS (`grouping_sets`) and GROUPING(...), HAVING, window calls, the SELECT list,
DISTINCT, ORDER BY and LIMIT - and the rewrite of `agg(x) FILTER (WHERE c)` before qualify.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from sqlglot import exp

from planner import logical as L
from planner.errors import FeatureNotSupported, SqlError
from planner.expr import Const, function_name
from planner.expr.folding import constant_value
from planner.logical import and_all, AvgOf, keycol
from planner.binder.common import Scope, ancestors, in_nested_subquery, output_name, position

AGGREGATES: dict[type, str] = {
    exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Stddev: "stddev", exp.StddevSamp: "stddev", exp.StddevPop: "stddev_pop",
    exp.Variance: "variance", exp.VariancePop: "variance_pop",
    exp.LogicalAnd: "bool_and", exp.LogicalOr: "bool_or",
}

ORDERED_SET: dict[type, str] = {
    exp.PercentileCont: "percentile_cont", exp.PercentileDisc: "percentile_disc",
    exp.Mode: "mode",
}


def rewrite_filter_clauses(ast: exp.Expression) -> None:
    """`agg(x) FILTER (WHERE c)` -> `agg(CASE WHEN c THEN x END)` (in place): the aggregates
    here all skip NULLs, so the rows the filter drops count for nothing; `count(*)` becomes
    `count(CASE WHEN c THEN 1 END)`. array_agg / string_agg keep the clause (0A000)."""
    for f in list(ast.find_all(exp.Filter)):
        agg = f.this
        cond = f.expression.this if isinstance(f.expression, exp.Where) else f.expression
        if not isinstance(agg, exp.AggFunc) or isinstance(agg, (exp.ArrayAgg,
                                                                exp.GroupConcat)):
            raise FeatureNotSupported(f"FILTER on {function_name(agg)} is not supported")
        arg = agg.this
        target = arg.expressions[0] if isinstance(arg, exp.Distinct) and \
            len(arg.expressions) == 1 else arg
        if target is None or isinstance(target, exp.Star):
            new_arg: exp.Expression = exp.Case(ifs=[exp.If(this=cond.copy(),
                                                           true=exp.Literal.number(1))])
            agg = exp.Count(this=new_arg)
        else:
            case = exp.Case(ifs=[exp.If(this=cond.copy(), true=target.copy())])
            if isinstance(arg, exp.Distinct):
                agg = agg.copy()
                agg.this.set("expressions", [case])
            else:
                agg = agg.copy()
                agg.set("this", case)
        f.replace(agg)


def inline_named_windows(ast: exp.Expression, sql: str) -> None:
    """`... OVER w ... WINDOW w AS (PARTITION BY a ORDER BY b)` -> the definition written
    out in each call (in place), as PostgreSQL reads it: a call may add an ORDER BY or a
    frame to a window without them (`OVER (w ORDER BY c)`), never replace one (42P20); an
    unknown name is 42704."""
    for select in list(ast.find_all(exp.Select)):
        defs: dict[str, exp.Window] = {}
        for d in select.args.get("windows") or []:     # one may build on an earlier one
            if d.args.get("alias") is not None:
                _merge_window(d, defs, sql)
            defs[d.name] = d
        for call in select.find_all(exp.Window):
            if call.args.get("alias") is None or call.args.get("over") is None or \
                    call.find_ancestor(exp.Select) is not select:
                continue
            _merge_window(call, defs, sql)
        select.set("windows", None)


def _merge_window(call: exp.Window, defs: dict[str, exp.Window], sql: str) -> None:
    """Write the definition `call` names (its alias) into `call`, PostgreSQL's rules."""
    ref = call.args["alias"]
    d = defs.get(ref.name)
    if d is None:
        raise SqlError(f'window "{ref.name}" does not exist', "42704",
                       position=position(sql, call))
    if call.args.get("partition_by"):
        raise SqlError(f'cannot override PARTITION BY clause of window "{ref.name}"',
                       "42P20", position=position(sql, call))
    for part in ("order", "spec"):
        if d.args.get(part) is not None:
            if call.args.get(part) is not None:
                what = "ORDER BY" if part == "order" else "frame"
                raise SqlError(f'cannot override {what} clause of window "{ref.name}"',
                               "42P20", position=position(sql, call))
            call.set(part, d.args[part].copy())
    if d.args.get("partition_by"):
        call.set("partition_by", [p.copy() for p in d.args["partition_by"]])
    call.set("alias", None)


_CUBE_LIMIT = 12                  # PostgreSQL's: 2^12 grouping sets


def grouping_sets(items: list[exp.Expression], sql: str
                  ) -> tuple[list[exp.Expression], tuple[tuple[int, ...], ...] | None]:
    """A GROUP BY list -> (its distinct expressions, its grouping sets as tuples of indices
    into them), PostgreSQL's rules: ROLLUP (a, b) is the sets (a, b), (a), (); CUBE (a, b)
    every subset; GROUPING SETS (...) the sets of each element ((a, b), a, (), or a ROLLUP /
    CUBE in it); a parenthesised list in ROLLUP / CUBE is one unit; the list's elements
    combine as a cross product, each set keeping an expression once. Sets are None for a
    plain GROUP BY."""
    exprs: list[exp.Expression] = []
    index: dict[str, int] = {}

    def idx(e: exp.Expression) -> int:
        if e.sql() not in index:
            index[e.sql()] = len(exprs)
            exprs.append(e)
        return index[e.sql()]

    def unit(e: exp.Expression) -> tuple[int, ...]:
        if isinstance(e, exp.Paren):
            e = e.this
        parts = e.expressions if isinstance(e, exp.Tuple) else [e]
        return tuple(idx(p) for p in parts)

    def sets_of(e: exp.Expression) -> list[tuple[int, ...]]:
        if isinstance(e, exp.Rollup):
            units = [unit(u) for u in e.expressions]
            return [sum(units[:i], ()) for i in range(len(units), -1, -1)]
        if isinstance(e, exp.Cube):
            units = [unit(u) for u in e.expressions]
            if len(units) > _CUBE_LIMIT:
                raise SqlError(f"CUBE is limited to {_CUBE_LIMIT} elements", "54011",
                               position(sql, e))
            n = len(units)
            return [sum((units[j] for j in range(n) if not mask >> (n - 1 - j) & 1), ())
                    for mask in range(1 << n)]
        if isinstance(e, exp.GroupingSets):
            return [s for x in e.expressions for s in sets_of(x)]
        return [unit(e)]

    if not any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets)) for g in items):
        return [e for e in items], None
    combined: list[tuple[int, ...]] = [()]
    for g in items:
        sets = sets_of(g)
        if len(combined) * len(sets) > 4096:       # before building the product
            raise SqlError("too many grouping sets present (maximum 4096)", "54001",
                           position(sql, g))
        combined = [a + b for a in combined for b in sets]
    return exprs, tuple(tuple(dict.fromkeys(s)) for s in combined)


class AggregateBinding:
    """GROUP BY, aggregates, HAVING, windows, ORDER BY / DISTINCT / LIMIT of a SELECT.
    Mixed into planner.binder.Binder."""

    @staticmethod
    def _has_agg(sel: exp.Select) -> bool:
        return any(not in_nested_subquery(a, sel)
                   for e in sel.expressions for a in e.find_all(exp.AggFunc))

    # -- GROUP BY, projections, ORDER BY ---------------------------------------------------
    def finish_select(self, sel: exp.Select, node: L.Node, scope: Scope, ctes):
        items = sel.expressions
        windows = [w for it in items for w in it.find_all(exp.Window)
                   if not in_nested_subquery(w, sel)]
        for w in sel.find_all(exp.Window):
            if not in_nested_subquery(w, sel) and not any(w is x for x in windows):
                raise FeatureNotSupported("window functions are supported in the SELECT list "
                                          "only", position=position(self.sql, w))
        names = [output_name(i) for i in items]
        aliases = {i: it.alias for i, it in enumerate(items) if isinstance(it, exp.Alias)}
        group = sel.args.get("group")
        having = sel.args.get("having")
        order = sel.args.get("order")
        has_agg = any(not in_nested_subquery(a, sel) and not isinstance(a.parent, exp.Window)
                      for i in items for a in i.find_all(exp.AggFunc)) or \
            (having is not None) or group is not None
        n = next(self._n)
        out_keys = [f"$out{n}.{i}" for i in range(len(items))]
        order_items = order.expressions if order is not None else []
        distinct = sel.args.get("distinct")
        on = distinct.args.get("on") if distinct is not None else None
        on_items = (on.expressions if isinstance(on, exp.Tuple) else [on]) if on else []
        if group is not None and any(group.args.get(k) for k in ("rollup", "cube",
                                                                  "grouping_sets")):
            raise FeatureNotSupported("GROUP BY ... WITH ROLLUP / CUBE is not supported: use "
                                      "GROUP BY ROLLUP (...)",
                                      position=position(self.sql, group))
        if has_agg:
            group_asts, sets = grouping_sets(group.expressions if group is not None else [],
                                             self.sql)
            groups: list[tuple[str, exp.Expression]] = []
            for i, g in enumerate(group_asts):
                if isinstance(g, exp.Literal) and g.is_string:
                    raise SqlError("non-integer constant in GROUP BY", "42601",
                                   position(self.sql, g))
                if isinstance(g, exp.Literal) and not g.is_string:
                    g = items[int(g.this) - 1].unalias()
                groups.append((f"$grp{n}.{i}", self.expr(g, scope)))
            aggs: list[L.AggCall] = []
            grouping: list[tuple[str, tuple[int, ...]]] = []

            def bind_agg(e, subqueries=None):
                return self.aggregate_expr(e, scope, groups, aggs, subqueries, grouping)
            hav = None
            if having is not None:
                hav = bind_agg(having.this,
                               self.uncorrelated_subqueries(having.this, scope, ctes))
            node = L.Aggregate(node, groups, aggs, sets, grouping)
            if hav is not None:
                node = L.Filter(node, hav)
            wrepl, node = self.window_calls(windows, node, bind_agg)
            proj_exprs = []
            for it in items:
                e = it.unalias()
                proj_exprs.append(bind_agg(
                    e, {**self.uncorrelated_subqueries(e, scope, ctes), **wrepl}))
            bind_order = bind_agg
            # aggregates first appearing in ORDER BY: bind before building the node list
            order_bound = [self._order_expr(o.this, names, out_keys, bind_order, aliases)
                           for o in order_items]
            on_bound = [self._order_expr(e, names, out_keys, bind_order, aliases)
                        for e in on_items]
        else:
            wrepl, node = self.window_calls(windows, node, lambda e: self.expr(e, scope))
            proj_exprs = []
            for it in items:
                e = it.unalias()
                if wrepl and e.find(exp.Window):
                    proj_exprs.append(self.expr(e, scope, replacements=wrepl))
                elif e.find(exp.Subquery):
                    bound, node = self.expr_with_subqueries(e, node, scope, ctes)
                    proj_exprs.append(bound)
                else:
                    proj_exprs.append(self.expr(e, scope))
            order_bound = [self._order_expr(o.this, names, out_keys,
                                            lambda e: self.expr(e, scope), aliases)
                           for o in order_items]
            on_bound = [self._order_expr(e, names, out_keys, lambda e: self.expr(e, scope),
                                         aliases) for e in on_items]
        proj = list(zip(out_keys, proj_exprs))
        hidden: list[tuple[str, exp.Expression]] = []

        def key_of(bound, item) -> str:
            kind, val = bound
            if kind == "key":
                return val
            k = next((ok for ok, pe in proj + hidden if pe == val), None)
            if k is None:
                if distinct is not None and not on_items:
                    raise SqlError("for SELECT DISTINCT, ORDER BY expressions must appear "
                                   "in select list", "42P10", position(self.sql, item))
                k = f"$ord{n}.{len(hidden)}"
                hidden.append((k, val))
            return k
        sort_keys = [L.SortKey(keycol(key_of(b, o)), bool(o.args.get("desc")),
                               o.args.get("nulls_first"))
                     for o, b in zip(order_items, order_bound)]
        on_keys = [key_of(b, e) for e, b in zip(on_items, on_bound)]
        node = L.Project(node, proj + hidden)
        if on_keys:
            node = self._distinct_on(node, on_keys, sort_keys, on_items, n)
        elif distinct is not None:
            node = L.Distinct(node)
        if sort_keys:
            node = L.Sort(node, sort_keys)
        node = self._limit(sel, node)
        if hidden or on_keys:
            node = L.Project(node, [(k, keycol(k)) for k in out_keys])
        return node, names, out_keys

    def _distinct_on(self, node: L.Node, on_keys: list[str], sort_keys: list[L.SortKey],
                     on_items: list[exp.Expression], n: int) -> L.Node:
        """DISTINCT ON (e, ...): the first row of each group of equal e, ... in the ORDER
        BY's order - row_number() OVER (PARTITION BY e, ... ORDER BY <the ORDER BY>) = 1.
        As in PostgreSQL, the ORDER BY must begin with the DISTINCT ON expressions (42P10);
        without one, the row kept from each group is any one."""
        distinct_on = set(on_keys)
        order_names = list(dict.fromkeys(k.expr.name for k in sort_keys))   # repeats once
        lead = set(order_names[:len(distinct_on)])
        if sort_keys and not (lead <= distinct_on and (
                len(order_names) < len(distinct_on) or lead == distinct_on)):
            raise SqlError("SELECT DISTINCT ON expressions must match initial ORDER BY "
                           "expressions", "42P10", position(self.sql, on_items[0]))
        rn = f"$don{n}"
        node = L.Window(node, [L.WindowCall(rn, "row_number", [],
                                            [keycol(k) for k in on_keys], sort_keys,
                                            "rows")])
        return L.Filter(node, exp.EQ(this=keycol(rn), expression=Const(
            this=pa.scalar(1, pa.int64()))))

    def window_calls(self, windows, node, bind) -> tuple[dict[int, exp.Expression], L.Node]:
        """OVER (...) calls of the SELECT list -> a Window node above `node` and the
        replacements of each call by its output column. `bind` binds in the context the
        window sees (after GROUP BY/HAVING when the query aggregates)."""
        if not windows:
            return {}, node
        calls, repl = [], {}
        for w in windows:
            fn = w.this
            func = self._WINDOW_FUNCS.get(type(fn))
            if func is None or w.args.get("alias"):
                raise FeatureNotSupported(f"window function {function_name(fn)}() is not "
                                          "supported", position=position(self.sql, w))
            if isinstance(fn.this, exp.Distinct):
                raise FeatureNotSupported("DISTINCT in window functions is not supported",
                                          position=position(self.sql, w))
            args = []
            if func in ("lag", "lead"):
                args = [bind(fn.this)] + [bind(fn.args[a]) for a in ("offset", "default")
                                          if fn.args.get(a) is not None]
            elif func == "count" and (fn.this is None or isinstance(fn.this, exp.Star)):
                func = "count_star"
            elif func == "nth_value":
                args = [bind(fn.this), bind(fn.args["offset"])]
            elif fn.args.get("this") is not None and func not in ("row_number",):
                args = [bind(fn.this)]
            partition = [bind(e) for e in w.args.get("partition_by") or []]
            order = [L.SortKey(bind(o.this), bool(o.args.get("desc")), o.args.get("nulls_first"))
                     for o in (w.args["order"].expressions if w.args.get("order") else [])]
            frame, rows, offsets = "range" if order else "partition", None, None
            spec = w.args.get("spec")
            if spec is not None:
                frame, rows, offsets = self._frame(spec, w, len(order))
            if func in ("rank", "dense_rank", "lag", "lead", "percent_rank", "cume_dist",
                        "ntile") and not order:
                frame = "partition"
            key = f"$win{next(self._n)}"
            self._window_keys.add(key)
            calls.append(L.WindowCall(key, func, args, partition, order, frame, rows,
                                      offsets))
            repl[id(w)] = keycol(key)
        return repl, L.Window(node, calls)

    def _frame(self, spec: exp.WindowSpec, w: exp.Window, n_order: int
               ) -> tuple[str, tuple[int | None, int | None] | None, tuple | None]:
        """A frame clause -> (frame, rows, range) of L.WindowCall. RANGE / ROWS from
        UNBOUNDED PRECEDING to CURRENT ROW or UNBOUNDED FOLLOWING, ROWS frames with constant
        offsets, RANGE frames with constant offsets over one ORDER BY key (a number, or an
        interval for a date / timestamp key); GROUPS with offsets, EXCLUDE: 0A000.
        PostgreSQL's errors for a frame that starts after it ends (42P20), a negative
        offset (22013), a NULL one (22004) and RANGE offsets without exactly one ORDER BY
        key (42P20)."""
        kind = str(spec.args.get("kind") or "").lower()
        where = position(self.sql, w)
        ordered = n_order > 0

        def range_offset(v: exp.Expression, side: str):
            is_const, value, typ = constant_value(self.expr(v, Scope()))
            if not is_const:
                raise FeatureNotSupported("RANGE frame offsets must be constants",
                                          position=where)
            if value is None:
                raise SqlError(f"frame {'starting' if side == 'start' else 'ending'} offset "
                               "must not be null", "22004", position=where)
            if pa.types.is_interval(typ):
                negative = value.months < 0 or value.days < 0 or value.nanoseconds < 0
            elif pa.types.is_integer(typ) or pa.types.is_floating(typ) or \
                    pa.types.is_decimal(typ):
                negative = value < 0
            else:
                raise FeatureNotSupported("RANGE frame offsets are numbers or intervals",
                                          position=where)
            if negative:
                raise SqlError("invalid preceding or following size in window function",
                               "22013", position=where)
            return value

        def bound(side: str) -> tuple[str, Any]:
            v, direction = spec.args.get(side), str(spec.args.get(f"{side}_side") or "")
            text = (v.upper() if isinstance(v, str) else v.sql().upper()) if v else ""
            if not text:                    # `ROWS 3 PRECEDING`: the end is CURRENT ROW
                return "current", 0
            if text == "UNBOUNDED":
                return ("unbounded_" + direction.lower()), 0
            if text == "CURRENT ROW":
                return "current", 0
            if kind == "range":
                return direction.lower(), range_offset(v, side)
            literal = v.this if isinstance(v, exp.Neg) else v
            n = literal.to_py() if isinstance(literal, exp.Literal) and literal.is_int else None
            if n is not None and isinstance(v, exp.Neg):
                n = -n
            if kind != "rows" or n is None:
                raise FeatureNotSupported(
                    "GROUPS frames with offsets are not supported" if kind == "groups" else
                    "ROWS frame offsets must be integer constants", position=where)
            if n >= 2 ** 63:
                raise SqlError("bigint out of range", "22003", position=where)
            if n < 0:
                raise SqlError("frame starting offset must not be negative"
                               if side == "start" else
                               "frame ending offset must not be negative", "22013",
                               position=where)
            return direction.lower(), n
        if spec.args.get("exclude"):
            raise FeatureNotSupported("EXCLUDE in a window frame is not supported",
                                      position=where)
        (s_kind, s_n), (e_kind, e_n) = bound("start"), bound("end")
        if s_kind == "unbounded_following":
            raise SqlError("frame start cannot be UNBOUNDED FOLLOWING", "42P20",
                           position=where)
        if e_kind == "unbounded_preceding":
            raise SqlError("frame end cannot be UNBOUNDED PRECEDING", "42P20", position=where)
        if e_kind == "preceding" and s_kind in ("current", "following"):
            raise SqlError(f"frame starting from {s_kind.replace('current', 'current row')}"
                           f"{' row' if s_kind == 'following' else ''} cannot have preceding "
                           "rows", "42P20", position=where)
        if s_kind == "following" and e_kind == "current":
            raise SqlError("frame starting from following row cannot end with current row",
                           "42P20", position=where)
        if s_kind == "unbounded_preceding" and e_kind == "current" and kind == "range":
            return ("range" if ordered else "partition"), None, None
        if s_kind == "unbounded_preceding" and e_kind == "current" and kind == "rows":
            return "rows", None, None           # a running frame, ORDER BY or not
        if s_kind == "unbounded_preceding" and e_kind == "unbounded_following":
            return "partition", None, None
        if kind == "range":
            if {s_kind, e_kind} & {"preceding", "following"} and n_order != 1:
                raise SqlError("RANGE with offset PRECEDING/FOLLOWING requires exactly one "
                               "ORDER BY column", "42P20", position=where)
            if not ordered:                     # CURRENT ROW .. : every row is a peer
                return "partition", None, None
            return "range", None, ((s_kind, s_n), (e_kind, e_n))
        if kind != "rows":
            raise FeatureNotSupported(
                f"{kind.upper()} frames other than UNBOUNDED PRECEDING to CURRENT ROW / "
                "UNBOUNDED FOLLOWING are not supported", position=where)

        def offset(k: str, n: int) -> int | None:
            return {"preceding": -n, "following": n, "current": 0}.get(k)
        return "rows", (offset(s_kind, s_n), offset(e_kind, e_n)), None

    def _order_expr(self, e, names, out_keys, bind, aliases=None):
        if isinstance(e, exp.Literal) and e.is_string:     # ORDER BY 'x' sorts nothing
            raise SqlError("non-integer constant in ORDER BY", "42601", position(self.sql, e))
        k = self._output_ref(e, names, out_keys, aliases)
        if k is not None:
            return "key", k
        return "expr", bind(e)

    def aggregate_expr(self, e: exp.Expression, scope: Scope, groups, aggs,
                       subqueries: dict | None = None,
                       grouping: list | None = None) -> exp.Expression:
        """Bind `e` above an Aggregate: aggregate calls -> their output keys, GROUP BY
        expressions -> theirs, GROUPING(...) calls -> theirs (added to `grouping`, the
        Aggregate's list); any other column is an error (42803)."""
        repl: dict[int, exp.Expression] = dict(subqueries or {})
        for g in list(e.find_all(exp.Grouping)):
            if in_nested_subquery(g, e) or any(id(x) in repl for x in [*ancestors(g, e), e]):
                continue
            repl[id(g)] = self._grouping_call(g, scope, groups, grouping)
        for a in list(e.find_all(exp.AggFunc)):
            if isinstance(a, exp.Grouping):
                continue
            # inside a window call already bound (`sum(count(*)) OVER ()`: the window's
            # argument is an aggregate of the group) or a subquery: not this level's
            if in_nested_subquery(a, e) or any(id(x) in repl for x in
                                                  [*ancestors(a, e), e]):
                continue
            if any(isinstance(x, exp.AggFunc) for x in ancestors(a, e)):
                raise SqlError("aggregate function calls cannot be nested", "42803",
                               position(self.sql, a))
            if isinstance(a.parent, exp.WithinGroup) and a.parent.this is a:
                repl[id(a.parent)] = self.ordered_set(a.parent, scope, aggs)
                continue
            repl[id(a)] = self.ordered_aggregate(a, scope, aggs) \
                if isinstance(a, (exp.ArrayAgg, exp.GroupConcat)) else \
                self._agg_call(a, scope, aggs)
        bound = self.expr(e, scope, replacements=repl)
        group_map = {g.sql(): k for k, g in groups}
        agg_keys = {c.key for c in aggs} | {k for k, _ in grouping or ()}

        def sub(node):
            if isinstance(node, exp.Column) and node.name in agg_keys:
                return node
            k = group_map.get(node.sql()) if not isinstance(node, (exp.Literal, Const)) else None
            if k is not None:
                return keycol(k)
            return node
        out = bound.transform(sub)
        for col in out.find_all(exp.Column):
            if col.name not in agg_keys and col.name not in group_map.values() and \
                    col.name not in self._window_keys:
                name = col.name.split(".")[-1]
                raise SqlError(f'column "{name}" must appear in the GROUP BY clause or be used '
                               "in an aggregate function", "42803", position(self.sql, e))
        return out

    def _grouping_call(self, g: exp.Grouping, scope: Scope, groups, grouping: list | None
                       ) -> exp.Expression:
        """GROUPING(a, ...) -> the output key of its column in the Aggregate (see
        logical.Aggregate); each argument must be one of the GROUP BY expressions."""
        where = position(self.sql, g)
        if grouping is None:
            raise SqlError("GROUPING is not allowed here", "42803", position=where)
        if not g.expressions:
            raise SqlError("GROUPING needs at least one argument", "42601", position=where)
        if len(g.expressions) > 31:
            raise SqlError("GROUPING must have fewer than 32 arguments", "54011",
                           position=where)
        index = {ge.sql(): i for i, (_, ge) in enumerate(groups)}
        args = []
        for a in g.expressions:
            i = index.get(self.expr(a, scope).sql())
            if i is None:
                raise SqlError("arguments to GROUPING must be grouping expressions of the "
                               "associated query level", "42803",
                               position=position(self.sql, a))
            args.append(i)
        for k, prev in grouping:
            if prev == tuple(args):
                return keycol(k)
        key = f"$gbits{next(self._n)}"
        grouping.append((key, tuple(args)))
        return keycol(key)

    def _agg_call(self, a: exp.AggFunc, scope: Scope, aggs: list[L.AggCall]) -> exp.Expression:
        func = AGGREGATES.get(type(a))
        if type(a) in ORDERED_SET:           # PostgreSQL finds no such plain aggregate
            raise SqlError(f"function {ORDERED_SET[type(a)]}(...) does not exist", "42883",
                           position(self.sql, a),
                           hint=f"{ORDERED_SET[type(a)]} is an ordered-set aggregate: add "
                                "WITHIN GROUP (ORDER BY ...).")
        if func is None:
            raise FeatureNotSupported(f"aggregate function {function_name(a)} is not "
                                      "supported", position=position(self.sql, a))
        arg = a.this
        distinct = False
        if isinstance(arg, exp.Distinct):
            distinct = True
            if len(arg.expressions) != 1 or isinstance(arg.expressions[0], exp.Tuple):
                raise FeatureNotSupported("aggregates over several DISTINCT arguments are not "
                                          "supported", position=position(self.sql, a))
            arg = arg.expressions[0]
        if func == "count" and (arg is None or isinstance(arg, exp.Star)):
            func, bound = "count_star", None
        else:
            if arg is None:
                raise SqlError(f"{func}() needs an argument", "42883", position(self.sql, a))
            bound = self.expr(arg, scope)
        if distinct and func in ("bool_and", "bool_or"):
            distinct = False                   # the same result: duplicates change nothing
        n = next(self._n)
        if func == "avg":
            s = L.AggCall(f"$agg{n}.sum", "sum", bound, distinct)
            c = L.AggCall(f"$agg{n}.count", "count", bound, distinct)
            aggs.extend([s, c])
            return AvgOf(this=keycol(s.key), expression=keycol(c.key))
        call = L.AggCall(f"$agg{n}", func, bound, distinct)
        for prev in aggs:
            if prev.key.endswith(".sum"):
                continue    # avg(real)'s sum is double, sum(real) real: the executor
                #             computes a repeated sum once (executor/aggregates.py)
            if (prev.func, prev.distinct) == (call.func, call.distinct) and (
                    (prev.arg is None and bound is None) or
                    (prev.arg is not None and bound is not None and prev.arg == bound)):
                return keycol(prev.key)
        aggs.append(call)
        return keycol(call.key)

    def ordered_set(self, w: exp.WithinGroup, scope: Scope, aggs: list[L.AggCall]
                    ) -> exp.Expression:
        """percentile_cont / percentile_disc (fraction) and mode() WITHIN GROUP (ORDER BY x):
        an AggCall over x's non-NULL values in each group, sorted by the ORDER BY (the
        executor's list-aggregate path), the fraction a constant in [0, 1] (`param`; None
        for a NULL fraction, which makes the result NULL)."""
        fn, where = w.this, position(self.sql, w)
        func = ORDERED_SET.get(type(fn))
        if func is None:
            raise SqlError(f"function {function_name(fn)}(...) does not exist", "42883",
                           position=where,
                           hint="WITHIN GROUP (ORDER BY ...) goes with the ordered-set "
                                "aggregates percentile_cont, percentile_disc and mode.")
        order = w.expression.expressions if isinstance(w.expression, exp.Order) else []
        direct = [fn.this] if fn.args.get("this") is not None else []
        if len(order) != 1 or len(direct) != (0 if func == "mode" else 1):
            raise SqlError(f"function {func} with {len(direct)} direct and {len(order)} "
                           "ordered arguments does not exist", "42883", position=where)
        param = None
        if direct:
            is_const, value, _ = constant_value(self.expr(direct[0], scope))
            if not is_const or isinstance(value, (list, str, bytes)):
                raise FeatureNotSupported(f"the fraction of {func} must be a numeric "
                                          "constant", position=where)
            if value is not None:
                value = float(value)
                if not 0 <= value <= 1:          # NaN too
                    raise SqlError(f"percentile value {value:g} is not between 0 and 1",
                                   "22003", position=where)
            param = value
        o = order[0]
        x = self.expr(o.this, scope)
        call = L.AggCall(f"$agg{next(self._n)}", func, x, False,
                         (L.SortKey(x, bool(o.args.get("desc")), o.args.get("nulls_first")),),
                         param)
        aggs.append(call)
        return keycol(call.key)

    def ordered_aggregate(self, a: exp.AggFunc, scope: Scope, aggs: list[L.AggCall]
                          ) -> exp.Expression:
        """array_agg / string_agg ([DISTINCT] x [ORDER BY ...]): an AggCall that collects
        each group's values in order (the executor sorts the input once by group and the
        ORDER BY keys: planner/executor/aggregates.py). string_agg is array_to_string over
        the group's non-NULL values (`list_agg`: NULL when there are none)."""
        arg, order, distinct = a.this, None, False
        if isinstance(arg, exp.Order):
            arg, order = arg.this, arg.expressions
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise FeatureNotSupported("aggregates over several DISTINCT arguments are not "
                                          "supported", position=position(self.sql, a))
            arg, distinct = arg.expressions[0], True
        if distinct and order and any(o.this != arg for o in order):
            raise SqlError("in an aggregate with DISTINCT, ORDER BY expressions must appear "
                           "in argument list", "42P10", position(self.sql, order[0]))
        keys = tuple(L.SortKey(self.expr(o.this, scope), bool(o.args.get("desc")),
                               o.args.get("nulls_first")) for o in order or [])
        string_agg = isinstance(a, exp.GroupConcat)
        call = L.AggCall(f"$agg{next(self._n)}", "list_agg" if string_agg else "array_agg",
                         self.expr(arg, scope), distinct, keys)
        aggs.append(call)
        value: exp.Expression = keycol(call.key)
        if string_agg:
            sep = a.args.get("separator")
            value = exp.ArrayToString(this=value, expression=self.expr(sep, scope)
                                      if sep is not None else exp.Literal.string(","))
        return value

