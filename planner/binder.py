"""Binder: a parsed query (sqlglot AST) -> a logical plan (`planner.logical`) over the catalog.

    sql --parse--> AST --check tables--> --sqlglot qualify--> qualified AST --Binder--> Output

- Tables are checked against the catalog first (42P01 with the name's position); sqlglot's
  `qualify` then expands `*`, resolves every column to its source alias and rejects unknown
  (42703) or ambiguous (42702) columns.
- Each FROM source becomes a relation with a fresh internal prefix (`alias#n`), so the same
  alias used in a subquery and its outer query never collide (TPC-H Q17, Q21).
- Subqueries are decorrelated here, by shape:
    EXISTS / NOT EXISTS (sel)      -> semi / anti join; correlated equalities become keys, other
                                      correlated conjuncts the join's residual condition
    x IN (sel) / x NOT IN (sel)    -> semi / null-aware anti join on x = sel's column
    scalar, uncorrelated           -> `SubqueryRef`, run once by the executor (an init plan)
    scalar, correlated by equality -> the subquery grouped by its correlated columns and
                                      left-joined, the expression replaced by the result column
  Other shapes - correlation by non-equalities or outside the WHERE, no aggregate,
  subqueries in other positions, EXISTS and ARRAY(subquery) inside expressions, correlated
  EXISTS with GROUP BY / aggregates / LIMIT - become SubPlans (planner.expr.SubPlan): the
  subquery is bound and run once per distinct tuple of the outer values it reads, as
  PostgreSQL's SubPlan does. `x IN (sel)` where it cannot be a join (an OR, a CASE, the
  SELECT list, correlated NOT IN, a correlated set operation) is an InSubPlan: the set is
  such a SubPlan's rows, tested against x with SQL's NULL logic.
  A correlated scalar aggregate joined by its groups gets, where no group matched, the
  aggregates' value over no rows (count 0), not NULL.
- Before qualify: parenthesised joins in FROM are flattened (`flatten_paren_joins`),
  `agg(x) FILTER (WHERE c)` becomes `agg(CASE WHEN c THEN x END)`, and unaliased scalar
  subqueries in the SELECT list get qualify's `_col_<i>` alias (ORDER BY 2 naming one made
  qualify fail an assertion). In FROM, a comma binds looser than JOIN: an outer join's left
  side is what follows the last comma. array_agg / string_agg (with ORDER BY, DISTINCT) are SubPlans
  per group. Set-returning functions in FROM (constant arguments) become VALUES lists, in
  the SELECT list a join with row numbers. Functions and reg* casts a catalog wrapper
  provides (`catalog.function(name)`, wire.pg_catalog) are bound as HostCalls.
- Aggregates are collected from SELECT, HAVING and ORDER BY; avg(x) is planned as
  sum(x) / count(x) so DECIMAL keeps its exactness (and double for integers and floats).
"""

from __future__ import annotations

import itertools
import re
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.qualify import qualify

from planner import logical as L
from planner.ddl import declared_columns
from planner.errors import FeatureNotSupported, SqlError
from planner.expr import (
    ArrayType,
    Const,
    HostCall,
    HostFunction,
    InSubPlan,
    SubPlan,
    array_to_list,
    constant_scalar,
    constant_value,
    fold_constants,
    list_to_array,
    param_scalar,
)

AGGREGATES: dict[type, str] = {
    exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Stddev: "stddev", exp.StddevSamp: "stddev", exp.StddevPop: "stddev_pop",
    exp.Variance: "variance", exp.VariancePop: "variance_pop",
    exp.LogicalAnd: "bool_and", exp.LogicalOr: "bool_or",
}


class SubqueryRef(exp.Expression):
    """A scalar uncorrelated subquery: `this` is its `logical.Output`; the executor runs it
    once and substitutes the value."""
    arg_types = {"this": True}


def position(sql: str, node: exp.Expression | None) -> int | None:
    """1-based character offset of `node` in `sql` (PostgreSQL's error position): its own
    token, else its first descendant's (sqlglot keeps positions on identifiers, literals and
    functions), else the nearest ancestor's."""
    if node is not None:
        for d in node.walk(bfs=False):
            m = d.meta if d._meta else {}
            if "start" in m:
                return m["start"] + 1
    while node is not None:
        meta = node.meta if hasattr(node, "meta") else {}
        if "start" in meta:
            return meta["start"] + 1
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
            m = node.this.meta
            if "start" in m:
                return m["start"] + 1
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            m = node.this.meta
            if "start" in m:
                return m["start"] + 1
        node = node.parent
    return None


def _quoted(name: str) -> str:
    """A schema-mapping key sqlglot will not case-fold (names are stored exactly)."""
    return '"' + name.replace('"', '""') + '"'


def in_nested_subquery(node: exp.Expression, root: exp.Expression) -> bool:
    """Whether `node` sits inside a subquery nested in `root` (not counting `root` itself)."""
    if node is root:
        return False
    p = node.parent
    while p is not None and p is not root:
        if isinstance(p, (exp.Subquery, exp.Exists)) or (
                isinstance(p, exp.Select) and p is not root):
            return True
        p = p.parent
    return False


def conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    if e is None:
        return []
    if isinstance(e, exp.Paren):
        return conjuncts(e.this)
    if isinstance(e, exp.And):
        return conjuncts(e.this) + conjuncts(e.expression)
    return [e]


def _ancestors(node: exp.Expression, root: exp.Expression):
    """Parents of `node` up to (excluding) `root`."""
    if node is root:
        return
    p = node.parent
    while p is not None and p is not root:
        yield p
        p = p.parent


def and_all(parts: list[exp.Expression]) -> exp.Expression | None:
    out = None
    for p in parts:
        out = p if out is None else exp.And(this=out, expression=p)
    return out


def keycol(key: str) -> exp.Column:
    return exp.Column(this=exp.Identifier(this=key, quoted=True))


def refs(e: exp.Expression) -> set[str]:
    """Internal keys an (already bound) expression reads."""
    return {c.name for c in e.find_all(exp.Column)}


class Scope:
    """Aliases visible in one SELECT: alias -> {column name -> internal key}."""

    def __init__(self, parent: "Scope | None" = None):
        self.parent = parent
        self.aliases: dict[str, dict[str, str]] = {}

    def add(self, alias: str, columns: dict[str, str], node: exp.Expression, sql: str) -> None:
        if alias in self.aliases:
            raise SqlError(f'table name "{alias}" specified more than once', "42712",
                           position(sql, node))
        self.aliases[alias] = columns

    def keys(self) -> set[str]:
        return {k for cols in self.aliases.values() for k in cols.values()}


class Binder:
    def __init__(self, catalog, sql: str, params: list[Any] | None = None):
        self.catalog = catalog
        self.sql = sql
        self.params = list(params or [])
        self._n = itertools.count(1)
        self._placeholder = itertools.count(0)
        self._changes: dict[str, exp.Anonymous] = {}
        self._window_keys: set[str] = set()

    # -- entry points ----------------------------------------------------------------------
    def qualify(self, ast: exp.Expression) -> exp.Expression:
        # unquoted identifiers fold to lower case (PostgreSQL); quoted ones keep theirs
        ast = normalize_identifiers(ast, dialect="postgres")
        pg_rewrites(ast)
        flatten_paren_joins(ast)
        rewrite_filter_clauses(ast)
        # schema-qualified names: `public.t` is `t`; `pg_catalog.pg_class` becomes the one
        # identifier `pg_catalog$pg_class` (aliased `pg_class`) that a catalog wrapper with
        # system views may serve (the engine catalog itself knows only bare names).
        for t in list(ast.find_all(exp.Table)):
            if t.args.get("db") is None or isinstance(t.this, exp.Func):
                continue
            db = t.db
            if db.lower() == "public":
                t.set("db", None)
                continue
            if not t.alias:
                t.set("alias", exp.TableAlias(this=exp.to_identifier(t.name)))
            ident = exp.to_identifier(f"{db}${t.name}", quoted=True)
            if t.this._meta:
                ident.meta.update(t.this.meta)
            t.set("this", ident)
            t.set("db", None)
        self.check_tables(ast)
        schema = {}
        # table_changes('t', from, to) AS x: a synthetic table so that qualify knows its
        # columns (t's and is_deleted); `source` turns it back into a diff scan.
        for t in list(ast.find_all(exp.Table)):
            fn = t.this
            if isinstance(fn, exp.Anonymous) and fn.name.lower() == "table_changes":
                synthetic = f"__table_changes_{next(self._n)}"
                self._changes[synthetic] = fn
                args = fn.expressions
                name = args[0].name if args and isinstance(args[0], exp.Literal) else None
                if name is None or not self.catalog.has_table(name):
                    raise SqlError(f'relation "{name}" does not exist', "42P01",
                                   position(self.sql, args[0] if args else t))
                cols = [c.name for c in self.catalog.table(name).schema.columns]
                schema[_quoted(synthetic)] = {_quoted(c): "text" for c in cols + ["is_deleted"]}
                t.set("this", exp.to_identifier(synthetic))
                if not t.alias:
                    t.set("alias", exp.TableAlias(this=exp.to_identifier("table_changes")))
        for t in ast.find_all(exp.Table):
            name = t.name
            if self.catalog.has_table(name):
                schema[_quoted(name)] = {_quoted(c): "text"
                                         for c in declared_columns(self.catalog.table(name))}
        # qualify aliases every unaliased SELECT item, but wraps a scalar subquery in a
        # Subquery alias rather than an exp.Alias, and then fails an assertion when ORDER BY
        # or GROUP BY names that item by position. Alias such items as qualify names other
        # expressions (`_col_<i>`, which output_name does not take for a user's name).
        for sel in list(ast.find_all(exp.Select)):
            for i, item in enumerate(sel.expressions):
                if isinstance(item, exp.Subquery) and not item.alias:
                    item.replace(exp.Alias(this=item.copy(), alias=exp.to_identifier(
                        f"_col_{i}")))
        try:
            return qualify(ast, schema=schema, dialect="postgres", quote_identifiers=False,
                           validate_qualify_columns=True, identify=False)
        except OptimizeError as e:
            raise self._qualify_error(ast, str(e)) from None

    def bind_query(self, ast: exp.Expression) -> L.Output:
        q = self.qualify(ast)
        node, names, keys = self.query(q, None, {})
        return L.Output(node, names, keys)

    # -- errors ----------------------------------------------------------------------------
    def _qualify_error(self, ast: exp.Expression, msg: str) -> SqlError:
        import re
        m = re.search(r"Column '\"?([^'\"]+)\"?' could not be resolved", msg) or \
            re.search(r"Unknown column: (\S+)", msg)
        if m:
            name = m.group(1).split(".")[-1]
            node = next((c for c in ast.find_all(exp.Column) if c.name == name), None)
            return SqlError(f'column "{name}" does not exist', "42703", position(self.sql, node))
        m = re.search(r"Ambiguous column[s]?:? '?\"?([^'\"\s]+)", msg) or \
            re.search(r"Column '\"?([^'\"]+)\"?' is ambiguous", msg)
        if m:
            name = m.group(1)
            node = next((c for c in ast.find_all(exp.Column) if c.name == name), None)
            return SqlError(f'column reference "{name}" is ambiguous', "42702",
                            position(self.sql, node))
        return SqlError(msg, "42601")

    def check_tables(self, ast: exp.Expression) -> None:
        ctes = {c.alias_or_name for c in ast.find_all(exp.CTE)}
        for t in ast.find_all(exp.Table):
            if isinstance(t.this, exp.Func):
                continue      # table_changes(...) or a function in FROM (function_source)
            if not t.name:
                continue
            if t.name in ctes or self.catalog.has_table(t.name):
                continue
            raise SqlError(f'relation "{t.name.replace("$", ".")}" does not exist', "42P01",
                           position(self.sql, t))

    # -- queries ---------------------------------------------------------------------------
    def query(self, q: exp.Expression, parent: Scope | None, ctes: dict
              ) -> tuple[L.Node, list[str], list[str]]:
        """Bind a SELECT / set operation -> (node, output names, output keys)."""
        with_ = q.args.get("with_") or q.args.get("with")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise FeatureNotSupported("WITH RECURSIVE is not supported",
                                          position=position(self.sql, with_))
            ctes = dict(ctes)
            for cte in with_.expressions:
                ctes[cte.alias_or_name] = (cte.this, dict(ctes), cte)
        if isinstance(q, exp.Subquery):
            return self.query(q.this, parent, ctes)
        if isinstance(q, exp.SetOperation):
            return self.set_operation(q, parent, ctes)
        if isinstance(q, exp.Select):
            return self.select(q, parent, ctes)
        if isinstance(q, exp.Values):
            return self.values(q, parent)
        raise FeatureNotSupported(f"unsupported query: {q.key}", position=position(self.sql, q))

    def set_operation(self, q: exp.SetOperation, parent, ctes):
        left, lnames, lkeys = self.query(q.this, parent, ctes)
        right, _rnames, rkeys = self.query(q.expression, parent, ctes)
        if len(lkeys) != len(rkeys):
            raise SqlError("each UNION/INTERSECT/EXCEPT query must have the same number of "
                           "columns", "42601", position(self.sql, q.expression))
        kind = {exp.Union: "union", exp.Intersect: "intersect", exp.Except: "except"}[type(q)]
        keys = [f"$set{next(self._n)}" for _ in lkeys]
        node: L.Node = L.SetOp(left, right, kind, not q.args.get("distinct", True), keys)
        # ORDER BY / LIMIT on the whole set operation refer to output names or ordinals.
        order = q.args.get("order")
        if order is not None:
            # qualify may have turned `ORDER BY 2` into the name it gave that item of the
            # leftmost SELECT (`_col_1` for `count(*)`): those names count too
            first = q.this
            while isinstance(first, (exp.SetOperation, exp.Subquery)):
                first = first.this
            aliases = {i: it.alias for i, it in enumerate(first.expressions)
                       if isinstance(it, exp.Alias)} if isinstance(first, exp.Select) else {}
            skeys = []
            for o in order.expressions:
                e = o.this
                k = self._output_ref(e, lnames, keys, aliases)
                if k is None:
                    raise FeatureNotSupported(
                        "ORDER BY on a set operation must name an output column",
                        position=position(self.sql, e))
                skeys.append(L.SortKey(keycol(k), bool(o.args.get("desc")),
                                       o.args.get("nulls_first")))
            node = L.Sort(node, skeys)
        node = self._limit(q, node)
        return node, lnames, keys

    def _output_ref(self, e: exp.Expression, names: list[str], keys: list[str],
                    aliases: dict[int, str] | None = None) -> str | None:
        aliases = aliases or {}
        if isinstance(e, exp.Literal) and not e.is_string:
            i = int(e.this)
            if not 1 <= i <= len(keys):
                raise SqlError(f"ORDER BY position {i} is not in select list", "42P10",
                               position(self.sql, e))
            return keys[i - 1]
        if isinstance(e, exp.Column) and not e.table:
            for i, n in enumerate(names):
                if e.name == n or e.name == aliases.get(i):
                    return keys[i]
        return None

    def _limit(self, q: exp.Expression, node: L.Node) -> L.Node:
        limit = q.args.get("limit")
        offset = q.args.get("offset")
        if limit is None and offset is None:
            return node
        n = self._int_clause(limit.expression if limit is not None else None)
        off = self._int_clause(offset.expression if offset is not None else None) or 0
        if isinstance(node, L.Sort) and n is not None:
            node.limit = n + off
        return L.Limit(node, n, off)

    def _int_clause(self, e: exp.Expression | None) -> int | None:
        if e is None:
            return None
        v = self.constant(self.expr(e, Scope()))
        if v is None:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise SqlError("LIMIT/OFFSET must be a non-negative integer", "22023",
                           position(self.sql, e))
        return v

    def constant(self, e: exp.Expression) -> Any:
        from planner.expr import constant_value, fold_constants
        ok, v, _ = constant_value(fold_constants(e))
        if not ok:
            raise SqlError("expected a constant expression", "42601", position(self.sql, e))
        return v

    def values(self, q: exp.Values, parent):
        rows = []
        width = None
        for t in q.expressions:
            items = t.expressions if isinstance(t, exp.Tuple) else [t]
            if width is None:
                width = len(items)
            elif len(items) != width:
                raise SqlError("VALUES lists must all be the same length", "42601",
                               position(self.sql, t))
            rows.append([self.expr(i, Scope(parent)) for i in items])
        n = next(self._n)
        keys = [f"$values{n}.{i}" for i in range(width or 0)]
        names = [f"column{i + 1}" for i in range(width or 0)]
        return L.Values(keys, rows), names, keys

    # -- FROM sources ----------------------------------------------------------------------
    def source(self, src: exp.Expression, scope: Scope, ctes: dict) -> L.Node:
        alias = src.alias_or_name
        if isinstance(src, exp.Table) and src.name in self._changes:
            return self.table_function(src, self._changes[src.name], scope)
        if isinstance(src, exp.Unnest) or (isinstance(src, exp.Table) and
                                            isinstance(src.this, exp.Func)):
            return self.function_source(src, scope)
        if isinstance(src, exp.Table) and src.name in ctes:
            body, cte_ctes, cte = ctes[src.name]
            node, names, keys = self.query(body, scope.parent, cte_ctes)
            col_names = [c.name for c in cte.args["alias"].columns] \
                if cte.args.get("alias") is not None and cte.args["alias"].columns else names
            return self._register_derived(node, alias, col_names, keys, scope, src)
        if src.args.get("sample") is not None:
            raise FeatureNotSupported("TABLESAMPLE is not supported",
                                      position=position(self.sql, src))
        if isinstance(src, exp.Table):
            table = self.catalog.table(src.name)
            prefix = f"{alias}#{next(self._n)}"
            cols = [c.name for c in table.schema.columns]
            scope.add(alias, {c: f"{prefix}.{c}" for c in cols}, src, self.sql)
            version = src.args.get("version")
            snapshot = None
            if version is not None:
                if str(version.this).upper() not in ("TIMESTAMP", "SYSTEM_TIME") or \
                        str(version.args.get("kind", "")).upper() != "AS OF":
                    raise FeatureNotSupported("only FOR SYSTEM_TIME AS OF <timestamp> is "
                                              "supported", position=position(self.sql, src))
                snapshot = self.expr(version.expression, Scope())
            return L.Scan(src.name, alias, prefix, cols, snapshot=snapshot)
        if isinstance(src, exp.Subquery):
            node, names, keys = self.query(src.this, scope.parent, ctes)
            alias_node = src.args.get("alias")
            if alias_node is not None and alias_node.columns:
                names = [c.name for c in alias_node.columns]
            return self._register_derived(node, alias, names, keys, scope, src)
        if isinstance(src, exp.Values):
            node, names, keys = self.values(src, scope.parent)
            alias_node = src.args.get("alias")
            if alias_node is not None and alias_node.columns:
                names = [c.name for c in alias_node.columns]
            return self._register_derived(node, alias or "values", names, keys, scope, src)
        raise FeatureNotSupported(f"unsupported FROM item: {src.sql()}",
                                  position=position(self.sql, src))

    def _register_derived(self, node, alias, names, keys, scope, src) -> L.Node:
        mapping: dict[str, str] = {}
        for n, k in zip(names, keys):
            mapping.setdefault(n, k)
        scope.add(alias, mapping, src, self.sql)
        return node

    def table_function(self, src: exp.Table, fn: exp.Anonymous, scope: Scope) -> L.Node:
        args = fn.expressions
        if len(args) != 3:
            raise SqlError("table_changes(table, from, to) takes three arguments", "42883",
                           position(self.sql, src))
        name = self.constant(self.expr(args[0], Scope()))
        if not isinstance(name, str) or not self.catalog.has_table(name):
            raise SqlError(f'relation "{name}" does not exist', "42P01",
                           position(self.sql, args[0]))
        table = self.catalog.table(name)
        alias = src.alias or "table_changes"
        prefix = f"{alias}#{next(self._n)}"
        cols = [c.name for c in table.schema.columns] + ["is_deleted"]
        scope.add(alias, {c: f"{prefix}.{c}" for c in cols}, src, self.sql)
        return L.Scan(name, alias, prefix, cols[:-1],
                      changes=(self.expr(args[1], Scope()), self.expr(args[2], Scope())))

    # -- SELECT ----------------------------------------------------------------------------
    def select(self, sel: exp.Select, parent: Scope | None, ctes: dict):
        scope = Scope(parent)
        node = self.from_where(sel, scope, ctes)
        sel, node = self.set_returning_items(sel, node, scope)
        return self.finish_select(sel, node, scope, ctes)

    def from_where(self, sel: exp.Select, scope: Scope, ctes: dict,
                   where: list[exp.Expression] | None = None) -> L.Node:
        """FROM, JOINs and WHERE (with its subqueries) of `sel`."""
        from_ = sel.args.get("from_") or sel.args.get("from")
        if from_ is None:
            node: L.Node = L.Values([], [[]])
            items, conds = [node], []
        else:
            items = [self.source(from_.this, scope, ctes)]
            conds: list[exp.Expression] = []
        # `FROM a, b LEFT JOIN c ON ...` is `a, (b LEFT JOIN c ON ...)`: a comma binds looser
        # than JOIN, so an outer join takes as its left side only what follows the last
        # comma (`group`: the index of its first item and of its first ON condition).
        group = (0, 0)
        group_keys = scope.keys()
        for j in sel.args.get("joins") or []:
            side = (j.side or "").upper()
            kind = (j.kind or "").upper()
            if kind in ("SEMI", "ANTI") or j.args.get("using"):
                raise FeatureNotSupported(f"{kind or 'USING'} joins are not supported; "
                                          "use ON", position=position(self.sql, j))
            before = scope.keys()
            comma = not side and not kind and j.args.get("on") is None
            if comma:
                group = (len(items), len(conds))
            right = self.source(j.this, scope, ctes)
            if comma:
                group_keys = scope.keys() - before
            on = [self.expr(c, scope) for c in conjuncts(j.args.get("on"))]
            if side in ("", "INNER") and kind in ("", "INNER", "CROSS"):
                items.append(right)
                conds.extend(on)
                if not comma:
                    group_keys = group_keys | (scope.keys() - before)
                continue
            g_items, g_conds = items[group[0]:], conds[group[1]:]
            left = g_items[0] if len(g_items) == 1 and not g_conds else \
                L.MultiJoin(g_items, g_conds)
            rkeys = scope.keys() - before
            if side == "RIGHT":
                left, right = right, left
                rkeys = set(group_keys)
            if side not in ("LEFT", "RIGHT", "FULL"):
                raise FeatureNotSupported(f"{side} {kind} JOIN is not supported",
                                          position=position(self.sql, j))
            items = items[:group[0]] + [self._outer_join(
                left, right, "full" if side == "FULL" else "left", on, rkeys)]
            conds = conds[:group[1]]
            group_keys = group_keys | (scope.keys() - before)
        for c in (where if where is not None else conjuncts(self._where(sel))):
            if c.find(exp.Subquery, exp.Exists) is None and not (
                    isinstance(c, exp.In) and c.args.get("query") is not None):
                conds.append(self.expr(c, scope))
        node = items[0] if len(items) == 1 and not conds else L.MultiJoin(items, conds)
        for c in (where if where is not None else conjuncts(self._where(sel))):
            if c.find(exp.Subquery, exp.Exists) is not None or (
                    isinstance(c, exp.In) and c.args.get("query") is not None):
                node = self.subquery_conjunct(c, node, scope, ctes)
        return node

    @staticmethod
    def _where(sel: exp.Select) -> exp.Expression | None:
        w = sel.args.get("where")
        return w.this if w is not None else None

    def _outer_join(self, left, right, kind, on, right_keys: set[str]) -> L.Node:
        on_both = []
        for c in on:
            r = refs(c)
            if kind == "left" and r and r <= right_keys:
                right = L.Filter(right, c)     # an ON condition on the inner side alone
                continue
            on_both.append(c)
        lk, rk, residual = self._split_equi(on_both, lambda s: s and not (s & right_keys),
                                            lambda s: s and s <= right_keys)
        return L.Join(left, right, kind, lk, rk, and_all(residual))

    @classmethod
    def _split_equi(cls, conds, is_left, is_right) -> tuple[list, list, list]:
        """Bound conditions -> (left keys, right keys, the others): equalities between an
        expression over the left side and one over the right become join keys."""
        lk, rk, rest = [], [], []
        for c in conds:
            pair = cls._equi(c, is_left, is_right)
            if pair:
                lk.append(pair[0])
                rk.append(pair[1])
            else:
                rest.append(c)
        return lk, rk, rest

    @staticmethod
    def _equi(c, is_left, is_right):
        """`c` as (left expr, right expr) if it is an equality between the two sides."""
        if not isinstance(c, exp.EQ) or isinstance(c.expression, (exp.Any, exp.All)) or (
                isinstance(c.expression, exp.Anonymous)
                and c.expression.name.lower() in ("all", "any", "some")):
            return None     # `x = ANY (array)` / ALL (sqlglot: a call) compares each element
        a, b = c.this, c.expression
        ra, rb = refs(a), refs(b)
        if is_left(ra) and is_right(rb):
            return a, b
        if is_left(rb) and is_right(ra):
            return b, a
        return None

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
        if group is not None and (any(group.args.get(k) for k in ("rollup", "cube",
                                                                   "grouping_sets")) or any(
                isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets))
                for g in group.expressions)):
            raise FeatureNotSupported("ROLLUP, CUBE and GROUPING SETS are not supported",
                                      position=position(self.sql, group))
        if has_agg:
            groups: list[tuple[str, exp.Expression]] = []
            for i, g in enumerate(group.expressions if group is not None else []):
                if isinstance(g, exp.Literal) and not g.is_string:
                    g = items[int(g.this) - 1].unalias()
                groups.append((f"$grp{n}.{i}", self.expr(g, scope)))
            aggs: list[L.AggCall] = []
            hav = None
            if having is not None:
                hav = self.aggregate_expr(having.this, scope, groups, aggs,
                                          self.uncorrelated_subqueries(having.this, scope, ctes))
            node = L.Aggregate(node, groups, aggs)
            if hav is not None:
                node = L.Filter(node, hav)
            wrepl, node = self.window_calls(
                windows, node, lambda e: self.aggregate_expr(e, scope, groups, aggs))
            proj_exprs = []
            for it in items:
                e = it.unalias()
                proj_exprs.append(self.aggregate_expr(
                    e, scope, groups, aggs,
                    {**self.uncorrelated_subqueries(e, scope, ctes), **wrepl}))
            bind_order = lambda e: self.aggregate_expr(e, scope, groups, aggs)  # noqa: E731
            # aggregates first appearing in ORDER BY: bind before building the node list
            order_bound = [self._order_expr(o.this, names, out_keys, bind_order, aliases)
                           for o in order_items]
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
        proj = list(zip(out_keys, proj_exprs))
        hidden = []
        sort_keys = []
        for o, (kind, val) in zip(order_items, order_bound):
            if kind == "key":
                k = val
            else:
                k = next((ok for ok, pe in proj if pe == val), None)
                if k is None:
                    if sel.args.get("distinct"):
                        raise SqlError("for SELECT DISTINCT, ORDER BY expressions must appear "
                                       "in select list", "42P10", position(self.sql, o))
                    k = f"$ord{n}.{len(hidden)}"
                    hidden.append((k, val))
            sort_keys.append(L.SortKey(keycol(k), bool(o.args.get("desc")),
                                       o.args.get("nulls_first")))
        node = L.Project(node, proj + hidden)
        if sel.args.get("distinct"):
            if sel.args["distinct"].args.get("on"):
                raise FeatureNotSupported("DISTINCT ON is not supported",
                                          position=position(self.sql, sel))
            node = L.Distinct(node)
        if sort_keys:
            node = L.Sort(node, sort_keys)
        node = self._limit(sel, node)
        if hidden:
            node = L.Project(node, [(k, keycol(k)) for k in out_keys])
        return node, names, out_keys

    _WINDOW_FUNCS = {exp.RowNumber: "row_number", exp.Rank: "rank",
                     exp.DenseRank: "dense_rank", exp.Lag: "lag", exp.Lead: "lead",
                     exp.FirstValue: "first_value", exp.Sum: "sum", exp.Count: "count",
                     exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}

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
                raise FeatureNotSupported(f"window function {fn.sql_name().lower()}() is not "
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
            elif fn.args.get("this") is not None and func not in ("row_number",):
                args = [bind(fn.this)]
            partition = [bind(e) for e in w.args.get("partition_by") or []]
            order = [L.SortKey(bind(o.this), bool(o.args.get("desc")), o.args.get("nulls_first"))
                     for o in (w.args["order"].expressions if w.args.get("order") else [])]
            frame = "range" if order else "partition"
            spec = w.args.get("spec")
            if spec is not None:
                start = str(spec.args.get("start") or "").upper()
                end = str(spec.args.get("end") or "").upper()
                kind = str(spec.args.get("kind") or "").lower()
                if start == "UNBOUNDED" and end == "CURRENT ROW" and kind in ("rows", "range"):
                    frame = kind if order else "partition"
                elif start == "UNBOUNDED" and end == "UNBOUNDED":
                    frame = "partition"
                else:
                    raise FeatureNotSupported("window frames other than UNBOUNDED PRECEDING "
                                              "to CURRENT ROW / UNBOUNDED FOLLOWING are not "
                                              "supported", position=position(self.sql, w))
            if func in ("row_number", "rank", "dense_rank", "lag", "lead") and not order and \
                    func != "row_number":
                frame = "partition"
            key = f"$win{next(self._n)}"
            self._window_keys.add(key)
            calls.append(L.WindowCall(key, func, args, partition, order, frame))
            repl[id(w)] = keycol(key)
        return repl, L.Window(node, calls)

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

    def _order_expr(self, e, names, out_keys, bind, aliases=None):
        k = self._output_ref(e, names, out_keys, aliases)
        if k is not None:
            return "key", k
        return "expr", bind(e)

    def aggregate_expr(self, e: exp.Expression, scope: Scope, groups, aggs,
                       subqueries: dict | None = None) -> exp.Expression:
        """Bind `e` above an Aggregate: aggregate calls -> their output keys, GROUP BY
        expressions -> theirs; any other column is an error (42803)."""
        repl: dict[int, exp.Expression] = dict(subqueries or {})
        for a in list(e.find_all(exp.AggFunc)):
            if any(isinstance(x, exp.AggFunc) for x in _ancestors(a, e)) and \
                    not in_nested_subquery(a, e):
                raise SqlError("aggregate function calls cannot be nested", "42803",
                               position(self.sql, a))
            if in_nested_subquery(a, e) or any(id(x) in repl for x in
                                                  [*_ancestors(a, e), e]):
                continue
            repl[id(a)] = self.ordered_aggregate(a, scope, groups) \
                if isinstance(a, (exp.ArrayAgg, exp.GroupConcat)) else \
                self._agg_call(a, scope, aggs)
        bound = self.expr(e, scope, replacements=repl)
        group_map = {g.sql(): k for k, g in groups}
        agg_keys = {c.key for c in aggs}

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

    def _agg_call(self, a: exp.AggFunc, scope: Scope, aggs: list[L.AggCall]) -> exp.Expression:
        func = AGGREGATES.get(type(a))
        if func is None:
            raise FeatureNotSupported(f"aggregate function {a.sql_name().lower()} is not "
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
            if (prev.func, prev.distinct) == (call.func, call.distinct) and (
                    (prev.arg is None and bound is None) or
                    (prev.arg is not None and bound is not None and prev.arg == bound)):
                return keycol(prev.key)
        aggs.append(call)
        return keycol(call.key)

    # -- expressions -----------------------------------------------------------------------
    def expr(self, e: exp.Expression, scope: Scope, replacements: dict | None = None
             ) -> exp.Expression:
        """Copy of `e` with columns replaced by internal keys and parameters by constants."""
        replacements = replacements or {}

        def conv(node: exp.Expression) -> exp.Expression:
            r = replacements.get(id(node))
            if r is not None:
                return r
            if isinstance(node, exp.Column):
                if isinstance(node.this, exp.Star):
                    raise FeatureNotSupported("* is not allowed here",
                                              position=position(self.sql, node))
                return keycol(self.resolve(node, scope))
            if isinstance(node, (exp.Parameter, exp.Placeholder)):
                return self.parameter(node)
            if isinstance(node, (exp.Subquery, exp.Exists)):
                return self.subplan(node.this, scope,
                                    "exists" if isinstance(node, exp.Exists) else "scalar")
            if isinstance(node, exp.Array) and node.expressions and \
                    isinstance(node.expressions[0], exp.Query):
                return self.subplan(node.expressions[0], scope, "array")
            call = self.host_call(node, conv)
            if call is not None:
                return call
            if isinstance(node, exp.In) and node.args.get("query") is not None:
                # Outside a WHERE conjunct (those become semi / anti joins): an InSubPlan,
                # the subquery run once per outer tuple it reads, x tested against its rows
                q = node.args["query"]
                return InSubPlan(this=_rebuild(node.this, conv), expression=self.subplan(
                    q.this if isinstance(q, exp.Subquery) else q, scope, "set"))
            if isinstance(node, (exp.Any, exp.All)) and _quantified_query(node) is not None:
                return node.__class__(this=self.subplan(_quantified_query(node), scope,
                                                        "array"))
            if isinstance(node, exp.Window):
                raise FeatureNotSupported("window functions are not supported",
                                          position=position(self.sql, node))
            return None

        return _rebuild(e, conv)

    def resolve(self, col: exp.Column, scope: Scope) -> str:
        name = col.name
        s: Scope | None = scope
        while s is not None:
            if col.table:
                cols = s.aliases.get(col.table)
                if cols is not None:
                    if name in cols:
                        return cols[name]
                    raise SqlError(f'column {col.table}.{name} does not exist', "42703",
                                   position(self.sql, col))
            else:
                hits = [cols[name] for cols in s.aliases.values() if name in cols]
                if len(hits) == 1:
                    return hits[0]
                if len(hits) > 1:
                    raise SqlError(f'column reference "{name}" is ambiguous', "42702",
                                   position(self.sql, col))
            s = s.parent
        raise SqlError(f'column "{name}" does not exist', "42703", position(self.sql, col))

    def parameter(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Parameter):
            i = int(node.name) - 1
        else:
            i = next(self._placeholder)
        if not 0 <= i < len(self.params):
            raise SqlError(f"there is no parameter ${i + 1}", "42P02", position(self.sql, node))
        v = self.params[i]
        c = Const(this=param_scalar(v))
        c.meta["param"] = i          # planner.plan_cache substitutes new values here
        return c

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

    def ordered_aggregate(self, a: exp.AggFunc, scope: Scope, groups) -> exp.Expression:
        """array_agg / string_agg ([DISTINCT] x [ORDER BY ...]): per group, a SubPlan over
        the same FROM and WHERE restricted to the group's key values."""
        sel = self._nearest_select(a)
        arg, order, distinct = a.this, None, False
        if isinstance(arg, exp.Order):
            arg, order = arg.this, arg.expressions
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise FeatureNotSupported("aggregates over several DISTINCT arguments are not "
                                          "supported", position=position(self.sql, a))
            arg, distinct = arg.expressions[0], True
        items = sel.expressions
        group_asts = []
        for g in (sel.args["group"].expressions if sel.args.get("group") else []):
            if isinstance(g, exp.Literal) and not g.is_string:
                g = items[int(g.this) - 1].unalias()
            group_asts.append(g)
        q = exp.Select(expressions=[arg.copy()])
        from_ = sel.args.get("from_") or sel.args.get("from")
        if from_ is not None:
            q.set("from_", from_.copy())
        q.set("joins", [j.copy() for j in sel.args.get("joins") or []] or None)
        conds = [self._where(sel).copy()] if self._where(sel) is not None else []
        if isinstance(a, exp.GroupConcat):    # string_agg skips NULLs (all NULL: NULL)
            conds.append(exp.Not(this=exp.Is(this=exp.Paren(this=arg.copy()),
                                             expression=exp.Null())))
        slots = []
        for g, (gkey, _e) in zip(group_asts, groups):
            slot = exp.Null()
            conds.append(exp.NullSafeEQ(this=g.copy(), expression=slot))
            slots.append((slot, keycol(gkey)))
        if conds:
            q.set("where", exp.Where(this=and_all(conds)))
        if order:
            q.set("order", exp.Order(expressions=[o.copy() for o in order]))
        if distinct:
            q.set("distinct", exp.Distinct())
        value: exp.Expression = self.subplan(q, scope, "array_agg", slots)
        if isinstance(a, exp.GroupConcat):
            sep = a.args.get("separator")
            value = exp.ArrayToString(this=value, expression=self.expr(sep, scope)
                                      if sep is not None else exp.Literal.string(","))
        return value

    def function_source(self, src: exp.Expression, scope: Scope) -> L.Node:
        """A function in FROM (`generate_series(1, 3) AS s(n)`, `unnest(array) [WITH
        ORDINALITY]`, a set-returning catalog function): its arguments must be constants
        (inside a SubPlan, outer references are); the rows become a VALUES list."""
        fn = src if isinstance(src, exp.Unnest) else src.this
        alias_node = src.args.get("alias")
        alias = alias_node.name if alias_node is not None and alias_node.name else \
            _function_name(fn)
        columns = [c.name for c in alias_node.columns] if alias_node is not None else []
        rows_of = [self._function_rows(exp.Explode(this=arg)) for arg in fn.expressions] \
            if isinstance(fn, exp.Unnest) else [self._function_rows(fn)]
        ordinality = bool(src.args.get("ordinality") or
                          (isinstance(fn, exp.Unnest) and fn.args.get("offset")))
        n = max((len(r) for r in rows_of), default=0)
        arrays = [pa.concat_arrays([r, pa.nulls(n - len(r), r.type)]) if len(r) < n else r
                  for r in rows_of]
        if ordinality:
            arrays.append(pa.array(range(1, n + 1), pa.int64()))
        names = columns + [f"column{i + 1}" for i in range(len(columns), len(arrays))]
        if len(arrays) == 1 and not columns:
            names = [alias]
        k = next(self._n)
        keys = [f"$fn{k}.{i}" for i in range(len(arrays))]
        node = _values_node(keys, arrays)
        return self._register_derived(node, alias, names[:len(arrays)], keys, scope, src)

    def _function_rows(self, call: exp.Expression) -> pa.Array:
        """The rows of one function call in FROM, as an Arrow array (its arguments must be
        constants)."""
        def const(e: exp.Expression) -> pa.Scalar:
            s = _constant(self.expr(e, Scope()))
            if s is None:
                raise FeatureNotSupported(
                    "functions in FROM need constant arguments (LATERAL is not supported)",
                    position=position(self.sql, e))
            return s
        name = _function_name(call)
        args = [const(a) for a in _srf_args(call)]
        if name == "generate_series":
            start, stop = args[0].as_py(), args[1].as_py()
            step = args[2].as_py() if len(args) > 2 else 1
            if start is None or stop is None or step is None:
                return pa.array([], pa.int64())
            if not all(isinstance(v, int) for v in (start, stop, step)):
                raise FeatureNotSupported("generate_series over non-integers is not supported",
                                          position=position(self.sql, call))
            if step == 0:
                raise SqlError("step size cannot equal zero", "22023",
                               position(self.sql, call))
            count = max(0, (stop - start) // step + 1)
            if count > _MAX_SERIES:
                raise FeatureNotSupported(f"set-returning functions are limited to "
                                          f"{_MAX_SERIES} rows", position=position(self.sql, call))
            t = pa.int32() if all(a.type == pa.int32() for a in args) else pa.int64()
            return pa.array(range(start, stop + (1 if step > 0 else -1), step), t)
        if name in ("unnest", "generate_subscripts") or _is_srf(call):
            value = args[0] if name in ("unnest", "generate_subscripts") else \
                const(call)
            if value.type == pa.null():
                return pa.array([], pa.string())
            if not isinstance(value.type, ArrayType):
                raise SqlError(f"function {name}({value.type}) does not exist", "42883",
                               position(self.sql, call))
            value = array_to_list(value)
            elems = value.values if value.is_valid else pa.array([], value.type.value_type)
            if name == "generate_subscripts":
                return pa.array(range(1, len(elems) + 1), pa.int32())
            return elems
        v = const(call)
        return pa.array([v.as_py()], v.type)

    def set_returning_items(self, sel: exp.Select, node: L.Node, scope: Scope
                            ) -> tuple[exp.Select, L.Node]:
        """Set-returning functions in the SELECT list (unnest, generate_series,
        generate_subscripts, ...), run in lockstep as PostgreSQL 10+ does: the rows are
        joined with row numbers 1..n, n the longest result of any of them in that row."""
        srfs = []
        for i, it in enumerate(sel.expressions):
            e, field = it.unalias(), None
            if isinstance(e, exp.Dot) and isinstance(e.this, exp.Paren) and \
                    _is_srf(e.this.this):             # (_pg_expandarray(a)).n
                e, field = e.this.this, e.name
            if _is_srf(e):
                srfs.append((i, e, field))
        if not srfs:
            return sel, node
        k = next(self._n)
        alias, key = f"$srf{k}", f"$srf{k}.i"
        scope.add(alias, {"i": key}, sel, self.sql)
        lengths = [self.expr(_srf_length(call), scope) for _, call, _f in srfs]
        longest = lengths[0] if len(lengths) == 1 else exp.Greatest(
            this=lengths[0], expressions=lengths[1:])
        n = self._max_value(longest, node)
        series = _values_node([key], [pa.array(range(1, n + 1), pa.int64())])
        cond = exp.LTE(this=keycol(key), expression=longest)
        node = L.MultiJoin([node, series], [cond])
        sel = sel.copy()
        renamed: dict[str, str] = {}
        row = exp.column("i", table=alias)
        for i, call, field in srfs:
            item = sel.expressions[i]
            value = _srf_value(call, row, field)
            name = output_name(item) if isinstance(item, exp.Alias) and not re.fullmatch(
                r"_col_\d+", item.alias) else field or _function_name(call)
            if isinstance(item, exp.Alias):
                renamed[item.alias] = name
            item.replace(exp.alias_(value, name))
        order = sel.args.get("order")
        for col in list(order.find_all(exp.Column)) if order is not None else []:
            if not col.table and col.name in renamed:   # ORDER BY <qualify's _col_n alias>
                col.replace(exp.column(renamed[col.name]))
        return sel, node

    def _max_value(self, e: exp.Expression, node: L.Node) -> int:
        """max(e) over the rows of `node`, computed now (the row count of a series)."""
        ok, v, _ = constant_value(fold_constants(e))
        if not ok:
            from planner.executor import Executor
            k = f"$max{next(self._n)}"
            agg = L.Aggregate(node, [], [L.AggCall(k, "max", e)])
            v = Executor(self.catalog).run_output(L.Output(agg, [k], [k])).column(0)[0].as_py()
        n = int(v or 0)
        if n > _MAX_SERIES:
            raise FeatureNotSupported(f"set-returning functions are limited to {_MAX_SERIES} "
                                      "rows", position=position(self.sql, e))
        return max(n, 0)

    def host_call(self, node: exp.Expression, conv) -> exp.Expression | None:
        """A call of a function the catalog provides (or a reg* cast), bound as HostCall."""
        lookup = getattr(self.catalog, "function", None)
        if lookup is None:
            return None
        if isinstance(node, exp.Cast):
            reg = _reg_type(node.args.get("to"))
            inner = node.this
            if reg is None and _is_text_type(node.args.get("to")) and \
                    isinstance(inner, exp.Cast) and _reg_type(inner.args.get("to")):
                # x::regclass::text is the name, not the number
                reg = _reg_type(inner.args.get("to"))
                fin, fout = lookup(reg), lookup(reg + "out")
                if fin is None or fout is None:
                    return None
                value = HostCall(this=reg, expressions=[_rebuild(inner.this, conv)], fn=fin)
                return HostCall(this=reg + "out", expressions=[value], fn=fout)
            elem = _array_reg_type(node.args.get("to"))
            if reg is None and elem is not None:
                # x::regtype[]: each element's name, as PostgreSQL prints such an array
                fin, fout = lookup(elem), lookup(elem + "out")
                if fin is None or fout is None:
                    return None
                return HostCall(this=elem + "[]", expressions=[_rebuild(inner, conv)],
                                fn=_elementwise(elem + "[]", [fin, fout]))
            if reg is None:
                return None
            fn = lookup(reg)
            return HostCall(this=reg, expressions=[_rebuild(inner, conv)], fn=fn) \
                if fn is not None else None
        name = _CATALOG_FUNCTION_NODES.get(type(node))
        args: list[exp.Expression] = []
        if name is None and isinstance(node, exp.Anonymous):
            name, args = node.name.lower(), list(node.expressions)
        elif name is not None and node.this is not None:
            args = [node.this]
        if name is None:
            return None
        fn = lookup(name)
        if fn is None:
            return None
        call = HostCall(this=name, expressions=[_rebuild(a, conv) for a in args], fn=fn)
        call.meta.update(node.meta) if node._meta else None
        return call


def output_name(item: exp.Expression) -> str:
    """PostgreSQL's result column name: the alias, the column, the function's name, the
    cast's type, else ?column? (qualify's generated `_col_<n>` aliases are not names)."""
    import re
    # qualify also aliases a bare expression by sqlglot's `output_name` (`SELECT 1` gets
    # AS "1"): such an alias is not the user's either
    if isinstance(item, exp.Alias) and not re.fullmatch(r"_col_\d+", item.alias) and \
            not (item.alias == item.this.output_name and
                 not isinstance(item.this, exp.Column)):
        return item.alias
    e = item.unalias()
    if isinstance(e, exp.Column):
        return e.name
    if isinstance(e, exp.Cast):
        if isinstance(e.this, (exp.Column, exp.Cast)):  # a cast keeps a column's name
            return output_name(e.this)
        name = _type_name(e.to)
        return name.rsplit(".", 1)[-1] if name and name != "userdefined" else "?column?"
    if isinstance(e, exp.Subquery) and isinstance(e.this, exp.Select) and \
            len(e.this.expressions) == 1:
        return output_name(e.this.expressions[0])
    if type(e) in _FUNCTION_NAMES:
        return _FUNCTION_NAMES[type(e)]
    if isinstance(e, exp.Func):
        return e.sql_name().lower() if not isinstance(e, exp.Anonymous) else e.name.lower()
    return "?column?"


# PostgreSQL's names of functions sqlglot parses into differently named nodes
_FUNCTION_NAMES: dict[type, str] = {
    exp.CurrentVersion: "version", exp.Explode: "unnest", exp.GroupConcat: "string_agg",
    exp.ArraySize: "array_length", exp.ExplodingGenerateSeries: "generate_series",
    exp.Array: "array",
}


class AvgOf(exp.Expression):
    """avg(x) as sum / count, with the result type of SQL's avg: DECIMAL for DECIMAL input
    (exact division), double otherwise. Evaluated by the executor."""
    arg_types = {"this": True, "expression": True}


def _rebuild(e: exp.Expression, conv) -> exp.Expression:
    """Copy `e`, replacing nodes for which `conv` returns a node (not descending into them)."""
    r = conv(e)
    if r is not None:
        return r
    new = e.__class__(**{k: v for k, v in e.args.items()
                         if not isinstance(v, (exp.Expression, list))})
    for k, v in e.args.items():
        if isinstance(v, exp.Expression):
            new.set(k, _rebuild(v, conv))
        elif isinstance(v, list):
            new.set(k, [_rebuild(x, conv) if isinstance(x, exp.Expression) else x for x in v])
    new.meta.update(e.meta) if e._meta else None
    return new


def _register_sql(cls, render) -> None:
    """Let sqlglot's generator print our plan-only nodes (EXPLAIN, structural matching):
    the same registration planner.expr does for Const."""
    import sqlglot.generator as g
    setattr(g.Generator, f"{cls.key}_sql", render)
    exp.EXPR_CLASSES.setdefault(cls.key, cls)
    for dispatch in getattr(g, "_DISPATCH_CACHE", {}).values():
        dispatch.setdefault(cls, render)


_register_sql(AvgOf, lambda self, e: f"({self.sql(e, 'this')} / {self.sql(e, 'expression')})")
_register_sql(SubqueryRef, lambda self, e: f"(subquery {id(e.this):x})")


# -- PostgreSQL compatibility helpers (see Binder.subplan and friends) -----------------------
_MAX_SERIES = 10_000       # rows a set-returning function may produce (a VALUES list)

_SET_RETURNING = {"unnest", "generate_series", "generate_subscripts", "pg_partition_ancestors",
                  "_pg_expandarray"}

# sqlglot nodes for functions a catalog wrapper may provide
_CATALOG_FUNCTION_NODES: dict[type, str] = {
    exp.CurrentUser: "current_user", exp.SessionUser: "session_user",
    exp.CurrentSchema: "current_schema", exp.CurrentSchemas: "current_schemas",
    exp.CurrentDatabase: "current_database", exp.CurrentRole: "current_role",
    exp.CurrentVersion: "version",
}

_REG_TYPES = {"regclass", "regtype", "regnamespace", "regrole", "regproc", "regprocedure"}


class _SubPlanSlot(exp.Expression):
    """Where a SubPlan's i-th outer value goes in its query (replaced before binding)."""
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class _SubPlanSource:
    """What a SubPlan runs: the query with the outer values substituted, bound, optimized
    and executed by a fresh Binder / Executor over the same catalog and parameters."""

    def __init__(self, binder: Binder, query: exp.Expression):
        self.catalog = binder.catalog
        self.sql = binder.sql
        self.params = binder.params
        self.query = query

    def __deepcopy__(self, memo: dict) -> _SubPlanSource:
        return self

    def run(self, values: list[pa.Scalar], schema_only: bool = False) -> pa.Table:
        from planner.executor import Executor
        from planner.rules import optimize

        q = self.query.copy()
        for slot in list(q.find_all(_SubPlanSlot)):
            slot.replace(Const(this=values[slot.this]))
        out = optimize(Binder(self.catalog, self.sql, self.params).bind_query(q), self.catalog)
        return Executor(self.catalog, schema_only=schema_only).run_output(out)


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


def _function_name(fn: exp.Expression) -> str:
    if isinstance(fn, (exp.Unnest, exp.Explode)):
        return "unnest"
    if isinstance(fn, exp.GenerateSeries):
        return "generate_series"
    return fn.name.lower() if isinstance(fn, exp.Anonymous) else fn.sql_name().lower()


def _is_srf(e: exp.Expression) -> bool:
    if isinstance(e, (exp.Explode, exp.GenerateSeries, exp.Unnest)):
        return True
    return isinstance(e, exp.Anonymous) and e.name.lower() in _SET_RETURNING


def _srf_args(call: exp.Expression) -> list[exp.Expression]:
    if isinstance(call, exp.GenerateSeries):
        return [call.args["start"], call.args["end"]] + (
            [call.args["step"]] if call.args.get("step") is not None else [])
    if isinstance(call, exp.Explode):
        return [call.this] + list(call.expressions)
    return list(call.expressions)


def _constant(e: exp.Expression) -> pa.Scalar | None:
    """The typed value of a constant (bound) expression, else None."""
    return constant_scalar(e)


def _srf_length(call: exp.Expression) -> exp.Expression:
    """The number of rows a set-returning call yields for one input row."""
    name = _function_name(call)
    args = _srf_args(call)
    if name == "generate_series":
        step = args[2] if len(args) > 2 else exp.Literal.number(1)
        return exp.Greatest(this=exp.Literal.number(0), expressions=[exp.Add(
            this=exp.Div(this=exp.Sub(this=args[1].copy(), expression=args[0].copy()),
                         expression=step.copy()),
            expression=exp.Literal.number(1))])
    arr = args[0] if name in ("unnest", "generate_subscripts", "_pg_expandarray") else call
    return exp.Coalesce(this=exp.Anonymous(this="cardinality", expressions=[arr.copy()]),
                        expressions=[exp.Literal.number(0)])


def _srf_value(call: exp.Expression, row: exp.Column, field: str | None = None
               ) -> exp.Expression:
    """The value of a set-returning call at row number `row` (1-based; NULL past its end);
    `field` picks a field of a record result."""
    name = _function_name(call)
    args = _srf_args(call)
    within = exp.LTE(this=row.copy(), expression=_srf_length(call))
    if name == "_pg_expandarray":      # information_schema's (x, n) records (JDBC)
        x = exp.Bracket(this=exp.Paren(this=args[0].copy()), expressions=[row.copy()])
        n = row.copy()
        if field is not None:
            value = {"x": x, "n": n}.get(field.lower())
            if value is None:
                raise SqlError(f'column "{field}" not found in data type record', "42703")
        else:
            value = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier("x"),
                                                           expression=x),
                                            exp.PropertyEQ(this=exp.to_identifier("n"),
                                                           expression=n)])
    elif name == "generate_series":
        step = args[2] if len(args) > 2 else exp.Literal.number(1)
        value = exp.Add(this=args[0].copy(), expression=exp.Mul(
            this=exp.Paren(this=exp.Sub(this=row.copy(), expression=exp.Literal.number(1))),
            expression=step.copy()))
    elif name == "generate_subscripts":
        value = row.copy()
    else:
        arr = args[0] if name == "unnest" else call
        value = exp.Bracket(this=exp.Paren(this=arr.copy()), expressions=[row.copy()])
    return exp.Case(ifs=[exp.If(this=within, true=value)])


def _values_node(keys: list[str], arrays: list[pa.Array]) -> L.Node:
    """A VALUES list of constant columns (a zero-row list is one NULL row filtered out)."""
    n = len(arrays[0]) if arrays else 0
    if n == 0:
        row = [Const(this=pa.scalar(None, a.type)) for a in arrays]
        return L.Filter(L.Values(keys, [row]), Const(this=pa.scalar(False)))
    rows = [[Const(this=a[i]) for a in arrays] for i in range(n)]
    return L.Values(keys, rows)


def _type_name(dt: exp.Expression | None) -> str | None:
    if isinstance(dt, exp.ObjectIdentifier):
        return dt.name.lower()
    if isinstance(dt, exp.DataType):
        if dt.this == exp.DataType.Type.USERDEFINED and dt.args.get("kind") is not None:
            return dt.args["kind"].name.lower()
        return dt.this.value.lower() if hasattr(dt.this, "value") else None
    return None


def _reg_type(dt: exp.Expression | None) -> str | None:
    name = _type_name(dt)
    return name if name in _REG_TYPES else None


def _array_reg_type(dt: exp.Expression | None) -> str | None:
    """`regtype` for the type `regtype[]` (any reg* type), else None."""
    if isinstance(dt, exp.DataType) and dt.this == exp.DataType.Type.ARRAY and \
            len(dt.expressions) == 1:
        return _reg_type(dt.expressions[0])
    return None


def _elementwise(name: str, fns: list[HostFunction]) -> HostFunction:
    """A function applying `fns` in turn to every element of a list value (NULL lists stay
    NULL); the reg* casts of arrays."""
    def call(values, n):
        (v,) = values
        if isinstance(v.type, ArrayType):
            v = array_to_list(v)
        scalar = isinstance(v, pa.Scalar)
        arr = pa.array([v.as_py()], v.type) if scalar else (
            v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v)
        if pa.types.is_null(arr.type):
            out = list_to_array(pa.nulls(len(arr), pa.list_(pa.string())))
            return out[0] if scalar else out
        flat = pc.list_flatten(arr)
        for f in fns:
            m = len(flat)
            flat = f.fn([flat], m)
            if isinstance(flat, pa.Scalar):           # a constant result: one per element
                flat = pa.array([flat.as_py()] * m, flat.type)
        lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        out = list_to_array(pa.ListArray.from_arrays(pa.array(offsets), flat,
                                                     mask=arr.is_null()))
        return out[0] if scalar else out
    return HostFunction(name, call)


def _is_text_type(dt: exp.Expression | None) -> bool:
    return _type_name(dt) in ("text", "varchar", "name", "char", "bpchar", "nvarchar",
                              "nchar")


def _builtin_function(fn: exp.Expression) -> exp.Expression:
    """`f(...)` read as sqlglot reads it without a schema (after `pg_catalog.f(...)` left it
    an anonymous call): array_to_string -> exp.ArrayToString, ..."""
    if not isinstance(fn, exp.Anonymous):
        return fn
    from planner.dialect import KuduSQL
    build = KuduSQL.parser_class.FUNCTIONS.get(fn.name.upper())
    if build is None:
        return fn
    args = list(fn.expressions)
    try:
        try:
            new = build(args)
        except TypeError:
            new = build(args, KuduSQL())
    except (TypeError, ValueError, IndexError, KeyError, SqlglotError):
        return fn                    # a builder that rejects these arguments: keep the call
    if fn._meta:
        new.meta.update(fn.meta)
    return new


def pg_rewrites(ast: exp.Expression) -> None:
    """PostgreSQL spellings the binder reads as their plain forms (in place):
    `pg_catalog.f(...)` -> `f(...)`, `x COLLATE c` -> `x`, and functions in FROM get the
    column names PostgreSQL gives them (`unnest(a)` -> column `unnest`; `f(...) AS x` ->
    column `x`) so that qualify can resolve them."""
    for d in list(ast.find_all(exp.Dot)):
        if isinstance(d.this, exp.Identifier) and d.this.name.lower() in (
                "pg_catalog", "information_schema") and isinstance(d.expression, exp.Func):
            d.replace(_builtin_function(d.expression))
    for c in list(ast.find_all(exp.Collate)):
        c.replace(c.this)
    for t in list(ast.find_all(exp.Table, exp.Unnest)):
        fn = t if isinstance(t, exp.Unnest) else t.this
        if not isinstance(fn, exp.Func) or (isinstance(fn, exp.Anonymous) and
                                            fn.name.lower() == "table_changes"):
            continue
        if isinstance(t, exp.Unnest) and not isinstance(t.parent, (exp.From, exp.Join)):
            continue
        if isinstance(t, exp.Table) and t.args.get("db") is not None:
            t.set("db", None)
        alias = t.args.get("alias")
        name = _function_name(fn)
        if alias is None:
            alias = exp.TableAlias(this=exp.to_identifier(name))
            t.set("alias", alias)
        if not alias.columns:
            width = len(fn.expressions) if isinstance(fn, exp.Unnest) else 1
            cols = [alias.name] if width == 1 else [f"column{i + 1}" for i in range(width)]
            if t.args.get("ordinality") or (isinstance(fn, exp.Unnest) and fn.args.get("offset")):
                cols.append("ordinality")
            alias.set("columns", [exp.to_identifier(c) for c in cols])


def _paren_item(src: exp.Expression) -> bool:
    """Whether FROM item `src` is a parenthesised FROM item, `(t)` or `(a JOIN b ON ...)`,
    which sqlglot parses as a Subquery around a Table (or derived table) that carries the
    inner joins, rather than a subquery."""
    if not isinstance(src, exp.Subquery):
        return False
    inner = src.this
    if isinstance(inner, (exp.Select, exp.SetOperation, exp.Values)):
        return False                      # a derived table (which may have joins inside)
    return isinstance(inner, exp.Table) or bool(inner.args.get("joins")) or (
        isinstance(inner, exp.Subquery) and (bool(inner.alias) or _paren_item(inner)))


def _unparen(src: exp.Expression) -> tuple[exp.Expression, list[exp.Join]]:
    """A parenthesised FROM item -> (its first source, the joins after it), flattened. An
    aliased one (`(a JOIN b ON ...) AS j`) becomes the derived table `(SELECT * FROM a JOIN
    b ON ...) AS j`, which exposes the same columns under `j`."""
    if not _paren_item(src):
        return src, []
    if src.alias:
        inner = src.this.copy()
        joins = inner.args.get("joins") or []
        inner.set("joins", None)
        first, more = _unparen(inner)
        body = exp.Select(expressions=[exp.Star()]).from_(first, copy=False)
        body.set("joins", more + joins or None)
        return exp.Subquery(this=body, alias=src.args["alias"].copy()), []
    inner = src.this.copy()
    joins = list(inner.args.get("joins") or [])
    inner.set("joins", None)
    first, more = _unparen(inner)
    return first, more + joins


def flatten_paren_joins(ast: exp.Expression) -> None:
    """Parenthesised joins in FROM (in place, every SELECT): `FROM (a JOIN b ON p) LEFT JOIN
    c ON q` is `FROM a JOIN b ON p LEFT JOIN c ON q` (joins associate to the left, so the
    parentheses around the first item change nothing). On the right of a join, `a JOIN (b
    JOIN c ON p) ON q` is flattened to `a CROSS JOIN b JOIN c ON p AND q` when every join
    involved is inner or cross (the same conjunction of conditions); with an outer join
    there the parentheses change the result and the shape is refused (0A000)."""
    for sel in list(ast.find_all(exp.Select)):
        from_ = sel.args.get("from_") or sel.args.get("from")
        joins = list(sel.args.get("joins") or [])
        changed = False
        if from_ is not None and _paren_item(from_.this):
            first, more = _unparen(from_.this)
            from_.set("this", first)
            joins = more + joins
            changed = True
        out: list[exp.Join] = []
        for j in joins:
            if not _paren_item(j.this):
                out.append(j)
                continue
            changed = True
            first, more = _unparen(j.this)
            if not more:
                j.set("this", first)
                out.append(j)
                continue
            inner_kinds = [(x.side or "", x.kind or "") for x in [j, *more]]
            if any(side not in ("", "INNER") or kind not in ("", "INNER", "CROSS")
                   for side, kind in inner_kinds) or j.args.get("using") or any(
                    x.args.get("using") for x in more):
                raise FeatureNotSupported(
                    "a parenthesised join on the right of another join is supported for "
                    "inner and cross joins only", position=position("", j))
            out.append(exp.Join(this=first, kind="CROSS"))
            last = more[-1]
            conds = conjuncts(last.args.get("on")) + conjuncts(j.args.get("on"))
            for x in more[:-1]:
                out.append(x)
            last.set("on", and_all([c.copy() for c in conds]))
            if conds and (last.kind or "").upper() == "CROSS":
                last.set("kind", None)
            out.append(last)
        if changed:
            sel.set("joins", out or None)


def _quantified_query(node: exp.Expression) -> exp.Expression | None:
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


def rewrite_filter_clauses(ast: exp.Expression) -> None:
    """`agg(x) FILTER (WHERE c)` -> `agg(CASE WHEN c THEN x END)` (in place): the aggregates
    here all skip NULLs, so the rows the filter drops count for nothing; `count(*)` becomes
    `count(CASE WHEN c THEN 1 END)`. array_agg / string_agg keep the clause (0A000)."""
    for f in list(ast.find_all(exp.Filter)):
        agg = f.this
        cond = f.expression.this if isinstance(f.expression, exp.Where) else f.expression
        if not isinstance(agg, exp.AggFunc) or isinstance(agg, (exp.ArrayAgg,
                                                                exp.GroupConcat)):
            raise FeatureNotSupported(f"FILTER on {agg.sql_name().lower()} is not supported")
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
