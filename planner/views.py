"""Views: CREATE [OR REPLACE] VIEW, DROP VIEW, SHOW CREATE VIEW, and their expansion.

    CREATE [OR REPLACE] VIEW v [(c1, ...)] AS query
        the query is planned (its tables, columns and functions resolved; nothing read) to
        find its output columns (names and types: fixed now, as PostgreSQL fixes them) and
        the relations it reads; the catalog stores the query's text as written
        (engine/catalog/views.py `ViewMetadata`) - the embedded catalog's catalog.json, a
        cluster's replicated sys catalog
    DROP VIEW [IF EXISTS] v [, ...] [CASCADE | RESTRICT]
    SHOW CREATE VIEW v              CREATE VIEW v (columns) AS <the query as written>

Reading a view: planner/binder/views.py expands it in place of its name at bind time.

PostgreSQL's rules kept (SQLSTATEs): 42P07 a relation of the name exists; 42701 two
columns of one name; 42601 more column names than columns; 42P16 OR REPLACE that drops,
renames or retypes a column; 42809 DROP VIEW of a table / DROP TABLE of a view; 2BP01 DROP
of a relation a view reads (without CASCADE); 55000 INSERT / UPDATE / DELETE on a view
(`refuse_write`: kudusql has no automatically updatable views).

ALTER TABLE t RENAME TO t2 with views reading t: as in PostgreSQL the views follow the
table. `follow_table_rename` rewrites each one's stored query - every reference to t (not
one a WITH query of that name shadows) reads t2, aliased t where it had no alias, so `t.c`
and the view's columns mean what they meant - and the catalog commits the rename and the
rewritten views together (engine/catalog/views.py `check_rename`). The new text is the
query as sqlglot prints it; a query that does not print back to the same tree is not
rewritten, and then the rename is refused (2BP01). ALTER TABLE ... RENAME COLUMN / DROP
COLUMN of a column a view may read (its name appears in the view's query, or the query
has a `*`) is refused with 2BP01 (`check_column_change`): PostgreSQL follows a renamed
column and refuses to drop one without CASCADE; a view stored as text cannot tell which
table an unqualified name belongs to without binding, so both are refused.

Deliberately different: the stored text is the query as written, not PostgreSQL's
deparsed form; a view over `SELECT *` keeps the columns it had; RENAME COLUMN of a column
a view reads is refused where PostgreSQL follows it; DROP COLUMN ... CASCADE does not
drop the views.
"""

from __future__ import annotations

import dataclasses
import re

import pyarrow as pa
from sqlglot import exp

from engine import errors as engine_errors
from engine.catalog.views import ViewMetadata
from planner.binder.common import position
from planner.binder.views import catalog_views, parse_view, shadowed_by_cte
from planner.errors import FeatureNotSupported, SqlError
from planner.executor import Executor
from planner.query import QUERY_TYPES, plan_query, with_utc
from planner.result import StatementResult

CREATE_VIEW_SCHEMA = pa.schema([("statement", pa.string())])


def _name(node: exp.Expression) -> str:
    t = node.this if isinstance(node, exp.Schema) else node
    ident = t.this if isinstance(t, exp.Table) else t
    return ident.name if getattr(ident, "quoted", False) else ident.name.lower()


def _query_text(sql: str, ast: exp.Create) -> str:
    """The query after AS as written (whitespace and a final `;` trimmed); the generated
    SQL if the text cannot be found."""
    m = re.search(r"\bAS\s*(?=\(*\s*(?:SELECT|WITH|VALUES|TABLE)\b)", sql, re.IGNORECASE)
    if m:
        text = sql[m.end():].strip().rstrip(";").strip()
        if text:
            return text
    from planner.dialect import KuduSQL
    return ast.expression.sql(dialect=KuduSQL)


def _depends_on(catalog, query: exp.Expression) -> tuple[str, ...]:
    """The tables and views `query` reads (WITH queries and system relations left out)."""
    ctes = {c.alias_or_name for c in query.find_all(exp.CTE)}
    views = catalog_views(catalog)
    tables = set(catalog.list_tables())
    out: list[str] = []
    for t in query.find_all(exp.Table):
        if isinstance(t.this, exp.Func) or not t.name or t.name in ctes:
            continue
        if t.args.get("db") is not None and t.db.lower() != "public":
            continue
        if (t.name in views or t.name in tables) and t.name not in out:
            out.append(t.name)
    return tuple(out)


def create_view(catalog, ast: exp.Create, sql: str) -> StatementResult:
    if ast.args.get("kind", "").upper() != "VIEW" or ast.args.get("materialized"):
        raise FeatureNotSupported("materialized views are not supported",
                                  position=position(sql, ast))
    props = ast.args.get("properties")
    if props is not None and any(isinstance(p, exp.TemporaryProperty)
                                 for p in props.expressions):
        raise FeatureNotSupported("temporary views are not supported",
                                  position=position(sql, ast))
    query = ast.expression
    if not isinstance(query, QUERY_TYPES):
        raise SqlError("CREATE VIEW needs a query: CREATE VIEW v AS SELECT ...", "42601",
                       position(sql, query))
    target = ast.this
    name = _name(target)
    name_pos = position(sql, target)
    if ast.args.get("exists"):
        raise SqlError('syntax error at or near "NOT"', "42601", name_pos)
    listed = [c.name if c.quoted else c.name.lower()
              for c in (target.expressions if isinstance(target, exp.Schema) else [])]
    text = _query_text(sql, ast)
    # planned and run over empty inputs: the columns' names and types, nothing read
    out = plan_query(catalog, query.copy(), sql, [])
    schema = with_utc(Executor(catalog, schema_only=True).run_output(out).schema, out.utc)
    if len(listed) > len(schema):
        raise SqlError("CREATE VIEW specifies more column names than columns", "42601",
                       name_pos)
    names = listed + schema.names[len(listed):]
    seen = set()
    for n in names:
        if n in seen:
            raise SqlError(f'column "{n}" specified more than once', "42701", name_pos)
        seen.add(n)
    fields = [pa.field(n, pa.string() if pa.types.is_null(f.type) else f.type)
              for n, f in zip(names, schema)]
    view = ViewMetadata(name, text, pa.schema(fields), _depends_on(catalog, ast.expression))
    replace = bool(ast.args.get("replace"))
    old = catalog_views(catalog).get(name)
    if replace and old is not None:
        _check_replacement(old, view, name_pos)
    if catalog.has_table(name) and name not in catalog_views(catalog):
        raise SqlError(f'relation "{name}" already exists', "42P07", name_pos)
    try:
        catalog.create_view(view, replace=replace)
    except engine_errors.EngineError as e:
        raise SqlError.from_engine(e, name_pos) from None
    return StatementResult("CREATE VIEW")


def _check_replacement(old: ViewMetadata, new: ViewMetadata, pos) -> None:
    """PostgreSQL's CREATE OR REPLACE VIEW: the new query keeps the old columns (names and
    types, in order) and may add columns at the end (42P16 otherwise)."""
    from planner.expr import pg_name
    if len(new.schema) < len(old.schema):
        raise SqlError("cannot drop columns from view", "42P16", pos)
    for a, b in zip(old.schema, new.schema):
        if a.name != b.name:
            raise SqlError(f'cannot change name of view column "{a.name}" to "{b.name}"',
                           "42P16", pos, hint="Use ALTER VIEW ... RENAME COLUMN ... to "
                           "change name of view column instead.")
        if a.type != b.type:
            raise SqlError(f'cannot change data type of view column "{a.name}" from '
                           f"{pg_name(a.type)} to {pg_name(b.type)}", "42P16", pos)


def cascade_notices(dropped: list[str]) -> list[str]:
    """PostgreSQL's NOTICE for the views a DROP ... CASCADE dropped along."""
    if not dropped:
        return []
    if len(dropped) == 1:
        return [f"drop cascades to view {dropped[0]}"]
    return [f"drop cascades to {len(dropped)} other objects"]


def drop_views(catalog, ast: exp.Drop, sql: str) -> StatementResult:
    nodes = ast.args.get("tables") or [ast.this]
    if_exists = bool(ast.args.get("exists"))
    cascade = bool(ast.args.get("cascade"))
    views = catalog_views(catalog)
    names, notices = [], []
    for node in nodes:          # as PostgreSQL: every name checked before any is dropped
        name = _name(node)
        if name in views:
            names.append(name)
        elif catalog.has_table(name):
            raise SqlError(f'"{name}" is not a view', "42809", position(sql, node),
                           hint="Use DROP TABLE to remove a table.")
        elif if_exists:
            notices.append(f'view "{name}" does not exist, skipping')
        else:
            raise SqlError(f'view "{name}" does not exist', "42P01", position(sql, node))
    if names:
        try:
            along = catalog.drop_views(names, if_exists=if_exists, cascade=cascade)
        except engine_errors.EngineError as e:
            raise SqlError.from_engine(e) from None
        notices += cascade_notices(along)
    return StatementResult("DROP VIEW", notices=notices)


def create_view_sql(view: ViewMetadata) -> str:
    """SHOW CREATE VIEW's statement: parses back to the same view."""
    from planner.ddl_sql import quote_identifier
    cols = ", ".join(quote_identifier(c) for c in view.columns)
    return f"CREATE VIEW {quote_identifier(view.name)} ({cols}) AS\n{view.query}"


def show_create_view(catalog, name: str, pos) -> pa.Table:
    view = catalog_views(catalog).get(name)
    if view is None:
        if catalog.has_table(name):
            raise SqlError(f'"{name}" is not a view', "42809", pos)
        raise SqlError(f'view "{name}" does not exist', "42P01", pos)
    return pa.table([pa.array([create_view_sql(view)], pa.string())],
                    schema=CREATE_VIEW_SCHEMA)


def refuse_write(view: ViewMetadata, verb: str, sql: str, node) -> SqlError:
    """55000 for INSERT / UPDATE / DELETE on a view, PostgreSQL's words."""
    into = {"INSERT": "insert into", "UPDATE": "update", "DELETE": "delete from"}[verb]
    return SqlError(f'cannot {into} view "{view.name}"', "55000", position(sql, node),
                    detail="kudusql does not update views automatically (PostgreSQL does "
                           "for simple views).",
                    hint="Write to the table the view reads instead.")


def _reads(t: exp.Table, name: str) -> bool:
    """Whether the FROM item `t` is the catalog's relation `name` (not a table function,
    another schema's relation or a WITH query of that name)."""
    if isinstance(t.this, exp.Func) or t.name != name:
        return False
    if t.args.get("db") is not None and t.db.lower() != "public":
        return False
    return not shadowed_by_cte(t)


def follow_table_rename(view: ViewMetadata, old: str, new: str) -> ViewMetadata | None:
    """`view` rewritten to read table `new` where it read `old` (module docstring), or
    None when it cannot be rewritten soundly (its query does not print back to the same
    tree)."""
    from planner.dialect import KuduSQL, parse_sql
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
    body = parse_view(view)
    for t in list(body.find_all(exp.Table)):
        if not _reads(t, old):
            continue
        if t.args.get("alias") is None:
            t.set("alias", exp.TableAlias(this=exp.to_identifier(old, quoted=True)))
        t.set("this", exp.to_identifier(new, quoted=True))
        t.set("db", None)
    text = body.sql(dialect=KuduSQL)
    try:
        again = normalize_identifiers(parse_sql(text)[0], dialect="postgres")
    except Exception:           # noqa: BLE001 - any failure to parse back: not rewritten
        return None
    if again != body:
        return None
    deps = tuple(dict.fromkeys(new if d == old else d for d in view.depends_on))
    return dataclasses.replace(view, query=text, depends_on=deps)


def views_following_rename(catalog, old: str, new: str) -> list[ViewMetadata]:
    """The views that read table `old`, each rewritten to read `new` (those that cannot
    be are left out: the catalog then refuses the rename, 2BP01)."""
    out = []
    for view in catalog_views(catalog).values():
        if old in view.depends_on:
            followed = follow_table_rename(view, old, new)
            if followed is not None:
                out.append(followed)
    return out


def check_column_change(catalog, table: str, column: str, verb: str, pos) -> None:
    """RENAME COLUMN / DROP COLUMN (`verb` "rename" / "drop") of `column` of `table`:
    2BP01 when a view reading the table may read the column (module docstring)."""
    readers = []
    for view in sorted(catalog_views(catalog).values(), key=lambda v: v.name):
        if table not in view.depends_on:
            continue
        body = parse_view(view)
        if any(i.name == column for i in body.find_all(exp.Identifier)) or \
                any(True for _ in body.find_all(exp.Star)):
            readers.append(view.name)
    if readers:
        hint = ("Use DROP ... CASCADE to drop the dependent objects too." if verb == "drop"
                else "Drop the views, rename the column, and create them again.")
        raise SqlError(f"cannot {verb} column {column} of table {table} because other "
                       "objects depend on it", "2BP01", pos,
                       detail="\n".join(f"view {v} depends on column {column} of table "
                                        f"{table}" for v in readers), hint=hint)
