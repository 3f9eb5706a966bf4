"""Views expanded at bind time (the DDL side is planner/views.py).

`expand_views`, called by the binder before qualification: each FROM item that names a
view - not shadowed by a WITH query of that name - becomes the view's query as a derived
table aliased with the view's name (or the alias written) and its stored column names,
`(query) AS v(c1, ...)`; the query's own views are expanded in turn (a view over a view),
so the plan is the plan of the expanded statement and the rules push predicates into the
view's scans. Positions inside a view's text are dropped: an error raised while binding a
view's query points at the view's name in the statement. A derived table made from a view
carries `meta["view"]`: the binder binds it without the statement's WITH queries (a view
never sees them).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from engine.catalog.views import ViewMetadata
from planner.binder.common import position
from planner.errors import FeatureNotSupported, SqlError

# a view over a view over ...: PostgreSQL has no fixed limit; this one stops a cycle a
# race between two CREATE OR REPLACE VIEWs could still make
MAX_VIEW_DEPTH = 64


def catalog_views(catalog) -> dict[str, ViewMetadata]:
    """The catalog's views by name ({} for a catalog that keeps none)."""
    views = getattr(catalog, "views", None)
    return views() if callable(views) else {}


def shadowed_by_cte(t: exp.Table) -> bool:
    """Whether a WITH query visible at `t` has its name (then it is not the view)."""
    node = t.parent
    while node is not None:
        w = node.args.get("with_") or node.args.get("with") if isinstance(
            node, exp.Expression) else None
        if isinstance(w, exp.With) and any(c.alias_or_name == t.name for c in w.expressions):
            return True
        node = node.parent
    return False


def parse_view(view: ViewMetadata) -> exp.Expression:
    """A view's stored query parsed, identifiers folded as PostgreSQL folds them, without
    positions (they are the view text's, not a statement's)."""
    from planner.dialect import parse_sql
    body = parse_sql(view.query)[0]
    body = normalize_identifiers(body, dialect="postgres")
    for n in body.walk():               # positions are the view text's, not the statement's
        n.meta.pop("start", None)
        n.meta.pop("end", None)
    return body


def expand_views(ast: exp.Expression, catalog, sql: str, used: dict | None = None,
                 depth: int = 0) -> exp.Expression:
    """`ast` with every FROM item naming a view replaced by the view's query (module
    docstring), in place; `used` collects name -> ViewMetadata of every view expanded."""
    views = catalog_views(catalog)
    if not views:
        return ast
    for t in list(ast.find_all(exp.Table)):
        if isinstance(t.this, exp.Func) or not t.name or t.name not in views:
            continue
        if t.args.get("db") is not None and t.db.lower() != "public":
            continue
        if not isinstance(t.parent, (exp.From, exp.Join)) or shadowed_by_cte(t):
            continue
        view = views[t.name]
        if depth >= MAX_VIEW_DEPTH:
            raise SqlError(f'infinite recursion detected in rules for relation "{t.name}"',
                           "42P17", position(sql, t))
        if t.args.get("version") is not None:
            raise FeatureNotSupported("FOR SYSTEM_TIME AS OF on a view is not supported",
                                      position=position(sql, t))
        if used is not None:
            used[view.name] = view
        body = expand_views(parse_view(view), catalog, sql, used, depth + 1)
        alias = t.args.get("alias")
        written = [c.copy() for c in alias.columns] if alias is not None else []
        if len(written) > len(view.columns):
            raise SqlError(f'table "{alias.name}" has {len(view.columns)} columns available '
                           f"but {len(written)} columns specified", "42P10",
                           position(sql, alias))
        cols = written + [exp.to_identifier(c, quoted=True)
                          for c in view.columns[len(written):]]
        ident = exp.to_identifier(alias.name if alias is not None and alias.name else t.name,
                                  quoted=True)
        ident.meta.update(t.this.meta)
        sub = exp.Subquery(this=body, alias=exp.TableAlias(this=ident, columns=cols))
        sub.meta["view"] = view.name
        t.replace(sub)
    if depth == 0:
        _isolate_view_bodies(ast)
    return ast


def _view_between(node: exp.Expression, top: exp.Expression) -> bool:
    """Whether `node` lies in the body of a view expanded below `top` (its ancestor)."""
    p = node.parent
    while p is not None and p is not top:
        if isinstance(p, exp.Subquery) and p.meta.get("view"):
            return True
        p = p.parent
    return False


def _isolate_view_bodies(ast: exp.Expression) -> None:
    """A WITH query named like a relation that a view expanded inside its scope reads
    would capture that name when sqlglot qualifies the expanded statement (a view must see
    the catalog's relation): such a WITH query is renamed, with the references to it in
    its scope outside those views, to a name no view reads (`m` -> `"m$cte1"`, aliased `m`
    where unaliased). The WITH query may be the statement's or one inside a view's own
    query that reads another view (a view over a view)."""
    bodies = [s.this for s in ast.find_all(exp.Subquery) if s.meta.get("view")]
    if not bodies:
        return
    read = {t.name for b in bodies for t in b.find_all(exp.Table)}
    n = 0
    for cte in list(ast.find_all(exp.CTE)):
        name = cte.alias_or_name
        if name not in read:
            continue
        scope = cte.parent.parent if cte.parent is not None else ast
        tables = [t for t in scope.find_all(exp.Table)
                  if t.name == name and t.args.get("db") is None]
        if not any(_view_between(t, scope) for t in tables):
            continue            # no view inside its scope reads the name
        n += 1
        new = f"{name}$cte{n}"
        recursive = bool(cte.parent.args.get("recursive")) if cte.parent else False
        for t in tables:
            if _view_between(t, scope):
                continue
            if not recursive and t.find_ancestor(exp.CTE) is cte:
                continue        # its own query reads the outer relation of that name
            if not t.alias:
                t.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
            t.set("this", exp.to_identifier(new, quoted=True))
        cte.args["alias"].set("this", exp.to_identifier(new, quoted=True))
