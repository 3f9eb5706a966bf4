"""The `Binder` class: qualify (tables checked against the catalog, sqlglot's qualify,
parenthesised joins flattened), queries and set operations, VALUES, FROM sources, WHERE
and join conditions (equi-keys, outer joins), expressions and column resolution,
parameters. Subqueries, aggregates and PostgreSQL functions come from its mixins.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, NamedTuple

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.qualify import qualify

from planner import logical as L
from planner.ddl import declared_columns
from planner.errors import FeatureNotSupported, SqlError
from planner.expr import Const, InSubPlan, constant_value, fold_constants, param_scalar
from planner.expr.located import copy_meta
from planner.logical import and_all, conjuncts, keycol, refs
from planner.binder.aggregates import (AggregateBinding, inline_named_windows,
                                       rewrite_filter_clauses)
from planner.binder.common import Scope, SubqueryRunner, ancestors, quoted_key, rebuild, position
from planner.binder.decorrelate import SubqueryBinding, quantified_query
from planner.binder.pg_functions import PgFunctionBinding, pg_rewrites
from planner.binder.views import expand_views


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


def complete_alias_columns(ast: exp.Expression, sql: str) -> None:
    """A VALUES list in FROM names its columns column1, column2, ... (PostgreSQL), and an
    alias column list shorter than its source names the first columns only: `(VALUES (1, 2))
    AS v(a)` has columns a, column2 and `(SELECT x, y FROM t) AS s(a)` a, y (in place, before
    qualify, which dropped the unnamed columns and named VALUES' _col_0, _col_1)."""
    for node in list(ast.find_all(exp.Values, exp.Subquery)):
        alias = node.args.get("alias")
        if not isinstance(node.parent, (exp.From, exp.Join)):
            continue
        if isinstance(node, exp.Values):
            rows = node.expressions
            n = len(rows[0].expressions) if rows and isinstance(rows[0], exp.Tuple) else 1
            names = [f"column{i + 1}" for i in range(n)]
            if alias is None:
                alias = exp.TableAlias(this=exp.to_identifier("*VALUES*", quoted=True))
                node.set("alias", alias)
        else:
            inner = node.this
            while isinstance(inner, exp.SetOperation):
                inner = inner.this
            if alias is None or not isinstance(inner, exp.Select) or \
                    any(isinstance(e, exp.Star) or isinstance(e, exp.Column) and
                        isinstance(e.this, exp.Star) for e in inner.expressions):
                continue
            names = [e.alias_or_name if isinstance(e, (exp.Alias, exp.Column)) else "?column?"
                     for e in inner.expressions]
        cols = list(alias.columns)
        if len(cols) > len(names):
            raise SqlError(f'table "{alias.name}" has {len(names)} columns available but '
                           f"{len(cols)} columns specified", "42P10", position(sql, alias))
        if len(cols) < len(names):
            alias.set("columns", cols + [exp.to_identifier(x, quoted=not x.isidentifier())
                                         for x in names[len(cols):]])


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


class _CteDef(NamedTuple):
    """A WITH query as the binder keeps it until a FROM names it (bound there, per use)."""
    body: exp.Expression
    ctes: dict                     # the WITH queries its body sees
    cte: exp.CTE
    recursive: bool                # WITH RECURSIVE, and its body reads itself


class _WorkRef(NamedTuple):
    """A recursive CTE's name inside its own recursive term: its RecursiveUnion's ref."""
    ref: int
    names: list[str]


def _references(body: exp.Expression, name: str) -> bool:
    return any(t.name == name for t in body.find_all(exp.Table))


def _cte_columns(cte: exp.CTE) -> list[str]:
    alias = cte.args.get("alias")
    return [c.name for c in alias.columns] if alias is not None and alias.columns else []


class Binder(SubqueryBinding, AggregateBinding, PgFunctionBinding):
    """Binds one statement's query: `bind_query(ast) -> logical.Output`.

    `runner` is how the binder gets a value it needs at bind time (a SubPlan's rows, the
    length of a set-returning function's series): the statement layer passes a
    `SubqueryRunner` that optimizes and executes a bound plan; the binder itself never
    executes. Without one, binding a query that needs a run raises 0A000.
    """

    def __init__(self, catalog, sql: str, params: list[Any] | None = None,
                 runner: SubqueryRunner | None = None):
        self.catalog = catalog
        self.sql = sql
        self.params = list(params or [])
        self.runner = runner
        self._n = itertools.count(1)
        self._placeholder = itertools.count(0)
        self._changes: dict[str, exp.Anonymous] = {}
        self._window_keys: set[str] = set()
        self.views: dict = {}          # name -> ViewMetadata of every view the query reads

    # -- entry points ----------------------------------------------------------------------
    def qualify(self, ast: exp.Expression) -> exp.Expression:
        # unquoted identifiers fold to lower case (PostgreSQL); quoted ones keep theirs
        ast = normalize_identifiers(ast, dialect="postgres")
        ast = expand_views(ast, self.catalog, self.sql, self.views)
        pg_rewrites(ast)
        flatten_paren_joins(ast)
        complete_alias_columns(ast, self.sql)
        rewrite_filter_clauses(ast)
        inline_named_windows(ast, self.sql)
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
            copy_meta(t.this, ident)
            t.set("this", ident)
            t.set("db", None)
        self.check_tables(ast)
        self.check_recursive_anchors(ast)
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
                schema[quoted_key(synthetic)] = {quoted_key(c): "text" for c in cols + ["is_deleted"]}
                t.set("this", exp.to_identifier(synthetic))
                if not t.alias:
                    t.set("alias", exp.TableAlias(this=exp.to_identifier("table_changes")))
        for t in ast.find_all(exp.Table):
            name = t.name
            if self.catalog.has_table(name):
                schema[quoted_key(name)] = {quoted_key(c): "text"
                                         for c in declared_columns(self.catalog.table(name))}
                if not t.alias and isinstance(t.this, exp.Identifier) and t.this.quoted:
                    # a quoted name is its own alias, quoted: qualify would alias `"Users"`
                    # as `users`, and `"Users".id` (what SQLAlchemy writes) then named
                    # no table (42703)
                    t.set("alias", exp.TableAlias(this=t.this.copy()))
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
            raise self._qualify_error(ast, str(e), schema) from None

    def bind_query(self, ast: exp.Expression) -> L.Output:
        q = self.qualify(ast)
        node, names, keys = self.query(q, None, {})
        return L.Output(node, names, keys, views=tuple(self.views.items()))

    # -- errors ----------------------------------------------------------------------------
    def _qualify_error(self, ast: exp.Expression, msg: str, schema: dict | None = None
                       ) -> SqlError:
        m = re.search(r"Column '\"?([^'\"]+)\"?' could not be resolved", msg) or \
            re.search(r"Unknown column: (\S+)", msg)
        if m:
            parts = m.group(1).split(".")
            name = parts[-1]
            t = re.search(r"for table: '([^']+)'", msg)
            if t and len(parts) == 1:
                parts = [t.group(1), name]
            cols = [c for c in ast.find_all(exp.Column) if c.name == name]
            node = next((c for c in cols if len(parts) > 1 and c.table == parts[-2]),
                        cols[0] if cols else None)
            if node is not None and node.table and node.table not in {
                    a.name for a in ast.find_all(exp.TableAlias)} | {
                    t.name for t in ast.find_all(exp.Table)}:
                return SqlError(f'missing FROM-clause entry for table "{node.table}"',
                                "42P01", position(self.sql, node))
            # unqualified, and a column of two or more of the tables read: qualify cannot
            # choose (its message says "could not be resolved")
            holders = [t for t in ast.find_all(exp.Table)
                       if quoted_key(name) in (schema or {}).get(quoted_key(t.name), {})]
            if node is not None and not node.table and len(holders) > 1:
                return SqlError(f'column reference "{name}" is ambiguous', "42702",
                                position(self.sql, node))
            return SqlError(f'column "{name}" does not exist', "42703", position(self.sql, node))
        m = re.search(r"Ambiguous column[s]?:? '?\"?([^'\"\s]+)", msg) or \
            re.search(r"Column '\"?([^'\"]+)\"?' is ambiguous", msg)
        if m:
            name = m.group(1)
            node = next((c for c in ast.find_all(exp.Column) if c.name == name), None)
            return SqlError(f'column reference "{name}" is ambiguous', "42702",
                            position(self.sql, node))
        m = re.search(r"Cannot automatically join: (\S+)", msg)
        if m:
            name = m.group(1)
            node = next((i for j in ast.find_all(exp.Join) for i in j.args.get("using") or []
                         if i.name == name), None)
            return SqlError(f'column "{name}" specified in USING clause does not exist in '
                            "left or right table", "42703", position(self.sql, node))
        m = re.search(r"Alias already used: (\S+)", msg)
        if m:
            name = m.group(1)
            node = [a for a in ast.find_all(exp.TableAlias) if a.name == name][-1:] or [None]
            return SqlError(f'table name "{name}" specified more than once', "42712",
                            position(self.sql, node[0]))
        m = re.search(r"Unknown output column: (\d+)", msg)
        if m:
            n = m.group(1)
            node = next((o for o in ast.find_all(exp.Ordered) if o.this.name == n), None)
            clause = "ORDER BY"
            if node is None:
                clause = "GROUP BY"
                node = next((e for g in ast.find_all(exp.Group) for e in g.expressions
                             if isinstance(e, exp.Literal) and e.name == n), None)
            return SqlError(f"{clause} position {n} is not in select list", "42P10",
                            position(self.sql, node))
        m = re.search(r"Unknown table: '?\"?([^'\"\s]+)", msg)
        if m:
            name = m.group(1)
            node = next((c for c in ast.find_all(exp.Column) if c.table == name), None)
            return SqlError(f'missing FROM-clause entry for table "{name}"', "42P01",
                            position(self.sql, node))
        return SqlError(msg, "42601")

    def check_recursive_anchors(self, ast: exp.Expression) -> None:
        """42P19 for a WITH RECURSIVE query whose non-recursive term reads itself, before
        qualify (which would call its columns unknown, 42703)."""
        for w in ast.find_all(exp.With):
            if not w.args.get("recursive"):
                continue
            for cte in w.expressions:
                name = cte.alias_or_name
                if isinstance(cte.this, exp.Union) and _references(cte.this.this, name):
                    raise SqlError(f'recursive reference to query "{name}" must not appear '
                                   "within its non-recursive term", "42P19",
                                   position(self.sql, cte))

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
            recursive = bool(with_.args.get("recursive"))
            ctes = dict(ctes)
            for cte in with_.expressions:
                if isinstance(cte.this, (exp.Insert, exp.Update, exp.Delete)):
                    # PostgreSQL runs them even when nothing reads them: never skip one
                    raise FeatureNotSupported("data-modifying statements in WITH are not "
                                              "supported", position=position(self.sql, cte))
                ctes[cte.alias_or_name] = _CteDef(
                    cte.this, dict(ctes), cte,
                    recursive and _references(cte.this, cte.alias_or_name))
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
        if isinstance(limit, exp.Fetch):   # FETCH FIRST / NEXT [n] ROW[S] ONLY (SQL standard)
            opts = limit.args.get("limit_options")
            if opts is not None and (opts.args.get("percent") or opts.args.get("with_ties")):
                raise FeatureNotSupported("FETCH ... PERCENT / WITH TIES is not supported",
                                          position=position(self.sql, limit))
            count = limit.args.get("count")
            n = 1 if count is None else self._int_clause(count)
        elif limit is not None and isinstance(limit.expression, exp.Var) and \
                limit.expression.name.upper() == "ALL":
            n = None                        # LIMIT ALL: no limit
        else:
            n = self._int_clause(limit.expression if limit is not None else None)
        off = self._int_clause(offset.expression if offset is not None else None) or 0
        if isinstance(node, L.Sort) and n is not None:
            node = dataclasses.replace(node, limit=n + off)
        return L.Limit(node, n, off)

    def _int_clause(self, e: exp.Expression | None) -> int | None:
        if e is None:
            return None
        v = self.constant(self.expr(e, Scope()))
        if v is None:
            return None
        if not isinstance(v, int) or isinstance(v, bool):
            raise SqlError("argument of LIMIT/OFFSET must be an integer", "42804",
                           position(self.sql, e))
        if v < 0:   # PostgreSQL's 2201W / 2201X
            which = "OFFSET" if isinstance(e.parent, exp.Offset) else "LIMIT"
            raise SqlError(f"{which} must not be negative",
                           "2201X" if which == "OFFSET" else "2201W", position(self.sql, e))
        return v

    def constant(self, e: exp.Expression) -> Any:
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
        self._type_unknown_literals(rows, width or 0)
        n = next(self._n)
        keys = [f"$values{n}.{i}" for i in range(width or 0)]
        names = [f"column{i + 1}" for i in range(width or 0)]
        return L.Values(keys, rows), names, keys

    @staticmethod
    def _type_unknown_literals(rows: list[list[exp.Expression]], width: int) -> None:
        """A quoted literal in a VALUES column whose other rows are constants of one
        non-text type is read as that type, as PostgreSQL resolves an unknown literal
        (`VALUES (1), ('2')` is two integers; it was 42804 'bigint and text')."""
        from planner.expr import sql_type, supertype
        for i in range(width):
            col = [r[i] for r in rows]
            quoted = [j for j, e in enumerate(col) if isinstance(e, exp.Literal) and
                      e.is_string]
            if not quoted or len(quoted) == len(col):
                continue
            typed = [constant_value(e) for j, e in enumerate(col) if j not in quoted]
            if not all(ok and t is not None for ok, _, t in typed):
                continue        # a non-constant row: its type is the executor's to unify
            t = supertype([t for _, _, t in typed if not pa.types.is_null(t)])
            if t is None or pa.types.is_null(t) or pa.types.is_string(t):
                continue
            for j in quoted:
                rows[j][i] = exp.Cast(this=col[j],
                                      to=exp.DataType.build(sql_type(t), dialect="postgres"))

    # -- FROM sources ----------------------------------------------------------------------
    def source(self, src: exp.Expression, scope: Scope, ctes: dict) -> L.Node:
        alias = src.alias_or_name
        if isinstance(src, exp.Table) and src.name in self._changes:
            return self.table_function(src, self._changes[src.name], scope)
        if isinstance(src, exp.Unnest) or (isinstance(src, exp.Table) and
                                            isinstance(src.this, exp.Func)):
            return self.function_source(src, scope)
        if isinstance(src, exp.Table) and src.name in ctes:
            d = ctes[src.name]
            if isinstance(d, _WorkRef):          # in its own recursive term
                keys = [f"$wt{next(self._n)}.{i}" for i in range(len(d.names))]
                return self._register_derived(L.WorkTable(d.ref, keys), alias, d.names, keys,
                                              scope, src)
            if d.recursive:
                node, col_names, keys = self.recursive_cte(d, scope)
            else:
                node, names, keys = self.query(d.body, scope.parent, d.ctes)
                col_names = _cte_columns(d.cte) or names
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
            # a view's query never sees the statement's WITH queries (binder/views.py)
            node, names, keys = self.query(src.this, scope.parent,
                                           {} if src.meta.get("view") else ctes)
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

    def recursive_cte(self, d: "_CteDef", scope: Scope
                      ) -> tuple[L.Node, list[str], list[str]]:
        """A WITH RECURSIVE CTE that reads itself -> RecursiveUnion, PostgreSQL's rules
        (42P19): the body is `non-recursive term UNION [ALL] recursive term`, the anchor
        does not read the CTE, the recursive term reads it once, in its own FROM (not in a
        subquery: a subquery's plan runs once, not per step)."""
        name, body, where = d.cte.alias_or_name, d.body, position(self.sql, d.cte)
        if not isinstance(body, exp.Union) or _references(body.this, name):
            raise SqlError(f'recursive query "{name}" does not have the form '
                           "non-recursive-term UNION [ALL] recursive-term", "42P19",
                           position=where)
        if body.args.get("order") or body.args.get("limit") or body.args.get("offset"):
            raise FeatureNotSupported("ORDER BY / LIMIT / OFFSET on a recursive query's "
                                      "UNION is not supported", position=where)
        refs = [t for t in body.expression.find_all(exp.Table) if t.name == name]
        if len(refs) > 1:
            raise SqlError(f'recursive reference to query "{name}" must not appear more '
                           "than once", "42P19", position=position(self.sql, refs[1]))
        term = body.expression
        while isinstance(term, exp.Subquery):
            term = term.this
        if any(isinstance(a, (exp.Exists, exp.In, exp.Any, exp.All)) or (
                isinstance(a, exp.Subquery) and not isinstance(a.parent, (exp.From, exp.Join)))
               for a in ancestors(refs[0], term)):
            raise SqlError(f'recursive reference to query "{name}" must not appear within '
                           "a subquery", "42P19", position=position(self.sql, refs[0]))
        if isinstance(term, exp.Select) and (term.args.get("group") or any(
                a.find_ancestor(exp.Select) is term for a in term.find_all(exp.AggFunc))):
            raise SqlError("aggregate functions are not allowed in a recursive query's "
                           "recursive term", "42P19", position=position(self.sql, term))
        anchor, names, akeys = self.query(body.this, scope.parent, d.ctes)
        col_names = _cte_columns(d.cte) or names
        if len(col_names) != len(akeys):
            raise SqlError(f'WITH query "{name}" has {len(akeys)} columns available but '
                           f"{len(col_names)} columns specified", "42P10", position=where)
        ref = next(self._n)
        inner = {**d.ctes, name: _WorkRef(ref, col_names)}
        rec, _names, rkeys = self.query(term, scope.parent, inner)
        if len(rkeys) != len(akeys):
            raise SqlError("each UNION query must have the same number of columns", "42601",
                           position=position(self.sql, body.expression))
        keys = [f"$rec{ref}.{i}" for i in range(len(akeys))]
        return (L.RecursiveUnion(anchor, rec, not body.args.get("distinct", True), ref, keys),
                col_names, keys)

    def _register_derived(self, node, alias, names, keys, scope, src) -> L.Node:
        mapping: dict[str, str] = {}
        for n, k in zip(names, keys):
            mapping.setdefault(n, k)
        scope.add(alias, mapping, src, self.sql)
        return node

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

    _WINDOW_FUNCS = {exp.RowNumber: "row_number", exp.Rank: "rank",
                     exp.DenseRank: "dense_rank", exp.Lag: "lag", exp.Lead: "lead",
                     exp.FirstValue: "first_value", exp.Sum: "sum", exp.Count: "count",
                     exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
                     exp.PercentRank: "percent_rank", exp.CumeDist: "cume_dist",
                     exp.Ntile: "ntile", exp.LastValue: "last_value",
                     exp.NthValue: "nth_value"}

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
                return InSubPlan(this=rebuild(node.this, conv), expression=self.subplan(
                    q.this if isinstance(q, exp.Subquery) else q, scope, "set"))
            if isinstance(node, (exp.Any, exp.All)) and quantified_query(node) is not None:
                return node.__class__(this=self.subplan(quantified_query(node), scope,
                                                        "array"))
            if isinstance(node, exp.Window):
                raise FeatureNotSupported("window functions are not supported",
                                          position=position(self.sql, node))
            return None

        return rebuild(e, conv)

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

