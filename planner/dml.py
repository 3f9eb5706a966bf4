"""INSERT [ON CONFLICT DO NOTHING | DO UPDATE], UPSERT, UPDATE, DELETE: Kudu semantics.

The rows are computed first (VALUES or a query; UPDATE/DELETE scan the table for the keys
that match), then written as one op per tablet; every row is applied on its own. Rows that
fail are reported in `StatementResult.row_errors` (1-based ordinal in the statement,
SQLSTATE, key) while the other rows stay applied; `rowcount` counts the applied rows.
INSERT ... ON CONFLICT DO NOTHING drops the duplicate-key failures.

UPDATE / DELETE read the matching rows at one snapshot timestamp S (`read_timestamp`) and
write each row with the read precondition "unchanged since S" (engine/tablet/row_check.py:
checked by the tablet under its write lock, atomically with the write). A row another
statement updated after S fails that check (CHANGED) and is read again at a new snapshot:
its WHERE is evaluated again and SET recomputed on the newest version, and it is written
again under the new precondition; a row that no longer matches is skipped and not counted
(PostgreSQL's READ COMMITTED, EvalPlanQual). A row deleted after S - even if a row of its
key was inserted since, another row to PostgreSQL - fails it as NOT_FOUND and is skipped,
not counted and not read again, as PostgreSQL skips it. After
MAX_REREAD_ROUNDS rounds a row still changing fails the statement with 40001 (the rows
written before stay written). UPSERT is `insert(..., upsert=True)`: the session passes it for the dialect's
KuduUpsert node. `insert_target` / `insert_rows` are also the session's bulk path
(executemany), and `update_data` the wire fast path's.

INSERT ... ON CONFLICT (key) DO UPDATE is planner/on_conflict.py's rounds of insert and
preconditioned update (built on this module's pieces; the dispatcher sends it there).

`... RETURNING list`: the writers keep the rows they applied as whole rows (`kept`; an
UPDATE / DELETE then also reads the row's other columns) and planner/returning.py evaluates
the list over them; the result carries them as its `table` beside the command's count.
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any

import pyarrow as pa
from sqlglot import exp

from engine import clock as _clock
from engine.tablet.write_op import READ_TS_COLUMN
from engine.types import sql_literal
from planner import logical as L
from planner.binder import Binder, position
from planner.binder.views import catalog_views
from planner.commands import KuduUpsert
from planner.dialect import KuduSQL
from planner.ddl import declared_columns
from planner.errors import SqlError
from planner.expr import sql_type
from planner.expr.timezones import to_local
from planner.executor import Executor
from planner.query import run_query, subquery_runner
from planner.result import RowFailure, StatementResult
from planner.returning import (Returning, applied_rows, as_stored, check_items, empty_rows,
                                plan_returning, with_defaults)
from planner.rules import optimize


def write_target(catalog, ast: exp.Expression, sql: str):
    t = ast.this
    if isinstance(t, exp.Schema):
        t = t.this
    if not isinstance(t, exp.Table):
        raise SqlError("expected a table name", "42601", position(sql, ast))
    db = t.db.lower() if t.db else ""
    if db and db != "public" and catalog.has_table(f"{db}${t.name}"):
        # a schema-qualified system relation (kudu_system.servers, pg_catalog.pg_class):
        # resolved as SELECT resolves it; system relations are read-only
        rel = catalog.table(f"{db}${t.name}")
        if getattr(rel, "virtual", False):
            raise SqlError(f'cannot change system relation "{db}.{t.name}"', "42809",
                           position(sql, t))
        return t, rel
    view = catalog_views(catalog).get(t.name)
    if view is not None and not db:
        from planner.views import refuse_write
        verb = "INSERT" if isinstance(ast, exp.Insert) else \
            "UPDATE" if isinstance(ast, exp.Update) else "DELETE"
        raise refuse_write(view, verb, sql, t)
    if not catalog.has_table(t.name):
        raise SqlError(f'relation "{t.name}" does not exist', "42P01", position(sql, t))
    return t, catalog.table(t.name)


def row_failures(table_name: str, schema, errors, ordinals=None) -> list[RowFailure]:
    out = []
    for e in errors:
        ordinal = (int(ordinals[e.index]) if ordinals is not None else e.index) + 1
        key = tuple(e.key) if e.key is not None else None
        sqlstate = e.sqlstate
        if sqlstate == "22P02" and "range" in e.message:
            sqlstate = "22003"
        if e.code == "ALREADY_PRESENT":
            cols = ", ".join(schema.key_names)
            vals = ", ".join(sql_literal(v) for v in key or ())
            msg = (f'duplicate key value violates the primary key of "{table_name}": row '
                   f"{ordinal}: Key ({cols})=({vals}) already exists")
        else:
            msg = f"row {ordinal}: {e.message}"
        out.append(RowFailure(ordinal, sqlstate, msg, key))
    return out


@dataclasses.dataclass
class InsertTarget:
    """What an INSERT writes to: the table, its target columns, ON CONFLICT DO NOTHING."""
    name: str
    table: Any
    columns: list[str]
    explicit: bool             # columns were listed: the source must match them exactly
    ignore_dups: bool
    node: exp.Expression       # for error positions
    # ON CONFLICT (key) DO UPDATE: the OnConflict node (planner/on_conflict.py)
    on_update: exp.Expression | None = None


def insert_target(catalog, ast: exp.Insert, sql: str) -> InsertTarget:
    tnode, table = write_target(catalog, ast, sql)
    schema = table.schema
    target = ast.this
    explicit = isinstance(target, exp.Schema) and bool(target.expressions)
    if explicit:
        cols = []
        for c in target.expressions:
            name = c.name
            if not schema.has_column(name):
                raise SqlError(f'column "{name}" of relation "{tnode.name}" does not exist',
                               "42703", position(sql, c))
            if name in cols:
                raise SqlError(f'column "{name}" specified more than once', "42701",
                               position(sql, c))
            cols.append(name)
    else:
        cols = declared_columns(table)
    conflict = ast.args.get("conflict")
    ignore_dups, on_update = False, None
    if conflict is not None:
        if conflict_updates(conflict):
            if isinstance(ast, KuduUpsert):
                raise SqlError("UPSERT cannot have an ON CONFLICT clause", "42601",
                               position(sql, conflict))
            check_conflict_target(conflict, table, tnode.name, sql)
            on_update = conflict
        else:
            ignore_dups = True
    out = InsertTarget(tnode.name, table, cols, explicit, ignore_dups, target, on_update)
    if ast.expression is None:      # DEFAULT VALUES: a primary key column has no default
        insert_columns(out, 0, sql, ast)
    return out


def check_conflict_target(conflict: exp.Expression, table, name: str, sql: str) -> None:
    """ON CONFLICT DO UPDATE's target must be the primary key (the only unique
    constraint): by its columns or as the constraint `<table>_pkey`."""
    keys = conflict.args.get("conflict_keys") or []
    constraint = conflict.args.get("constraint")
    if constraint is not None:
        if constraint.name != f"{name}_pkey":
            raise SqlError(f'constraint "{constraint.name}" for table "{name}" does not exist',
                           "42704", position(sql, constraint))
        return
    if not keys:
        raise SqlError("ON CONFLICT DO UPDATE requires inference specification or "
                       "constraint name", "42601", position(sql, conflict),
                       hint="For example, ON CONFLICT (column_name).")
    cols = [k.this.name if isinstance(k, exp.Ordered) else k.name for k in keys]
    if sorted(set(cols)) != sorted(table.schema.key_names) or len(cols) != len(set(cols)):
        raise SqlError("there is no unique or exclusion constraint matching the ON CONFLICT "
                       "specification", "42P10", position(sql, conflict))


def conflict_updates(conflict: exp.Expression) -> bool:
    """ON CONFLICT ... DO UPDATE (else DO NOTHING)."""
    action = conflict.args.get("action")
    text = str(action.this if hasattr(action, "this") else action or "").upper()
    return "UPDATE" in text or bool(conflict.args.get("expressions"))


def insert_columns(target: InsertTarget, n: int, sql: str,
                   source: exp.Expression | None = None) -> list[str]:
    """The target columns `n` source columns are written to, or the statement-level error
    of that shape (too many expressions or target columns, a key column left out)."""
    cols = target.columns
    if n > len(cols):
        raise SqlError("INSERT has more expressions than target columns", "42601",
                       position(sql, source))
    if n < len(cols):
        if target.explicit:
            raise SqlError("INSERT has more target columns than expressions", "42601",
                           position(sql, source))
        cols = cols[:n]
    for k in target.table.schema.key_names:
        if k not in cols:     # every row would fail alike: one statement-level error
            raise SqlError(f'null value in column "{k}" of relation "{target.name}" violates '
                           "not-null constraint (a primary key column)", "23502",
                           position(sql, target.node))
    return cols


def insert_rows(target: InsertTarget, rows: pa.Table, upsert: bool, sql: str,
                source: exp.Expression | None = None, in_order: bool = False,
                returning: Returning | None = None) -> StatementResult:
    """Write computed rows (columns in target order) with Kudu's per-row semantics; with
    `in_order`, as one-row statements run one after another up to the first that fails
    (engine `Table.write(..., in_order=True)`; not with ON CONFLICT DO NOTHING, whose
    skipped rows are no failures: the caller runs those one by one). `returning`: the
    result also carries the RETURNING rows of the rows applied (planner/returning.py)."""
    if in_order and target.ignore_dups:
        raise SqlError("an in-order batch cannot skip conflicting rows", "0A000")
    if target.on_update is not None:      # callers send these to `insert` (bulk_parameters)
        raise SqlError("ON CONFLICT DO UPDATE is written by `insert`, not `insert_rows`",
                       "XX000")
    cols = insert_columns(target, rows.num_columns, sql, source)
    schema = target.table.schema
    verb = "UPSERT" if upsert else "INSERT"
    data = pa.Table.from_arrays([sql_round(a, schema.column(c).arrow_type)
                                 for a, c in zip(rows.columns, cols)], names=cols)
    if rows.num_rows == 0:
        return StatementResult(verb, rowcount=0, table=returning.run(
            with_defaults(schema, data)) if returning is not None else None)
    r = target.table.upsert(data, in_order) if upsert else target.table.insert(data, in_order)
    errs = [e for e in r.row_errors if not (target.ignore_dups and e.code == "ALREADY_PRESENT")]
    out = StatementResult(verb, rowcount=r.num_applied,
                          row_errors=row_failures(target.name, schema, errs))
    if returning is not None:
        out.table = returning.run(applied_rows(with_defaults(schema, data), r.row_errors))
    return out


def sql_round(col, target: pa.DataType):
    """SQL assignment rounds as PostgreSQL's assignment casts do: to DECIMAL(p, s), to s
    digits (also from text: '3.145' into NUMERIC(6,2) is 3.15); NUMERIC / float into an
    integer column to the nearest integer (numeric halves away from zero, float halves to
    even: 3.7 is 4). The engine itself refuses values that do not fit (Kudu). A column that
    cannot be cast as a whole is left to the engine, which reports each bad row.
    A timestamptz into a TIMESTAMP column is its local time in the session's TimeZone
    (PostgreSQL's assignment cast), not its UTC wall time: the caller runs in the zone."""
    if pa.types.is_timestamp(col.type) and col.type.tz is not None and \
            pa.types.is_timestamp(target) and target.tz is None:
        return to_local(col).cast(target)
    numeric = pa.types.is_decimal(col.type) or pa.types.is_floating(col.type)
    if col.type == target or not (
            pa.types.is_decimal(target) and (numeric or pa.types.is_string(col.type)) or
            pa.types.is_integer(target) and numeric):
        return col
    from planner.expr import cast as _cast
    try:
        return _cast(col, target, None)
    except SqlError:
        return col


def insert_source(ast: exp.Insert, target: InsertTarget) -> exp.Expression:
    """An INSERT's rows query, with the statement's WITH list (`WITH w AS (...) INSERT INTO
    t SELECT ... FROM w`) moved onto it, and DEFAULT in a VALUES row replaced by its
    column's default (`_default_value`)."""
    src, with_ = ast.expression, ast.args.get("with_")
    if with_ is not None and isinstance(src, exp.Query):
        ast.set("with_", None)
        src.set("with_", with_)
    if isinstance(src, exp.Values):
        for row in src.expressions:
            items = row.expressions if isinstance(row, exp.Tuple) else [row]
            for i, e in enumerate(items):
                if _is_default(e) and i < len(target.columns):
                    e.replace(_default_value(target.table.schema, target.columns[i]))
    return src


def _is_default(e: exp.Expression) -> bool:
    """The keyword DEFAULT where a value goes (VALUES: a Var; UPDATE's SET: a Column)."""
    return isinstance(e, (exp.Var, exp.Column)) and not isinstance(e.this, exp.Star) and \
        e.name.upper() == "DEFAULT" and not (isinstance(e, exp.Column) and (
            e.table or e.this.quoted))


def _default_value(schema, name: str) -> exp.Expression:
    """Column `name`'s default as a constant of its type (NULL without one)."""
    col = schema.column(name)
    if col.default is None:
        return exp.Cast(this=exp.Null(), to=exp.DataType.build(sql_type(col.arrow_type),
                                                                dialect="postgres"))
    return exp.maybe_parse(sql_literal(col.default), dialect=KuduSQL)


def insert(catalog, ast: exp.Insert, sql, params, upsert: bool, check_cancel) -> StatementResult:
    target = insert_target(catalog, ast, sql)
    returning = plan_returning(catalog, ast, sql, params, table_node(ast), target.table,
                               check_cancel, _returning_snapshot(catalog, ast))
    if target.on_update is not None:      # planner/on_conflict.py runs these
        raise SqlError("INSERT ... ON CONFLICT DO UPDATE is run by planner.on_conflict",
                       "XX000")
    rows = run_query(catalog, insert_source(ast, target), sql, params, check_cancel)
    return insert_rows(target, rows, upsert, sql, ast.expression, returning=returning)


def table_node(ast: exp.Expression) -> exp.Table:
    """A write's target table node (INSERT's may be wrapped in its column list)."""
    t = ast.this
    return t.this if isinstance(t, exp.Schema) else t


def bulk_parameters(ast: exp.Expression) -> int | None:
    """n if `ast` is `INSERT ... VALUES ($1, ..., $n)` (one row of plain parameters in
    order): executemany can then send every parameter set as one Arrow batch."""
    if not isinstance(ast, exp.Insert) or not isinstance(ast.expression, exp.Values) or \
            ast.args.get("returning") is not None or (
                ast.args.get("conflict") is not None and
                conflict_updates(ast.args["conflict"])):
        return None
    rows = ast.expression.expressions
    if len(rows) != 1 or not isinstance(rows[0], exp.Tuple):
        return None
    items = rows[0].expressions
    for i, e in enumerate(items, 1):
        if not isinstance(e, exp.Parameter) or e.name != str(i):
            return None
    return len(items)


# the plan cache key prefix of UPDATE / DELETE row-matching queries (`_matching`); the
# session's `key_write_rows` (wire fast path) finds them under it
MATCHING_KEY = "\x00matching\x00"


# rounds of re-reading rows whose write found them changed since their read (`write_reread`)
# before the statement fails with 40001; between rounds a short, growing, jittered pause
MAX_REREAD_ROUNDS = 50


def read_timestamp(catalog) -> int:
    """The snapshot S an UPDATE / DELETE reads its rows at and names in its writes' read
    preconditions: after every write acknowledged so far (the catalog's clock; a cluster
    front end's wall clock, and at least the newest timestamp it has seen). A read at S
    waits until every op holding a timestamp <= S has committed (`Tablet.wait_safe`; on a
    cluster the leader's snapshot barrier), so it sees every change up to S."""
    clock = getattr(catalog, "clock", None)
    if clock is not None:
        return clock.now()
    ts = _clock.from_micros(_clock.wall_ns() // 1000)
    client = getattr(catalog, "client", None)
    return max(ts, getattr(client, "last_ts", 0) or 0)


def _read_ts_array(n: int, read_ts: int) -> pa.Array:
    """The read-precondition column of n rows: each unchanged since `read_ts`
    (engine/tablet/row_check.py)."""
    return pa.repeat(pa.scalar(read_ts, pa.int64()), n)


def update_data(table, rows: pa.Table, names: list[str], read_ts: int | None = None
                ) -> pa.Table:
    """The rows an UPDATE writes: the matching query's key columns and SET values (in
    `names` order), SQL-rounded to their columns' types (one place for `update` and the
    wire's key-write fast path); with `read_ts`, and each row's read precondition."""
    schema = table.schema
    cols = schema.key_names + names
    arrays = [sql_round(a, schema.column(c).arrow_type) for a, c in zip(rows.columns, cols)]
    if read_ts is not None:
        arrays.append(_read_ts_array(rows.num_rows, read_ts))
        cols = cols + [READ_TS_COLUMN]
    return pa.Table.from_arrays(arrays, names=cols)


def _matching(catalog, ast, sql, params, tnode, extra: list[exp.Expression], check_cancel,
              cache=None, snapshot: int | None = None):
    """Rows of the target matching the WHERE clause: key columns then `extra` values.

    With a plan cache and parameters, the row-matching query is cached under the statement's
    text (marked apart from a SELECT of the same text), and a match by the full primary key
    runs as a point read (planner.point_read): `UPDATE t SET v = v + 1 WHERE k = $1` executed
    again skips parsing the query, binding and the rules. `snapshot`: the timestamp the
    target table (every table of the query) is read at."""
    key = MATCHING_KEY + sql
    if cache is not None and params:
        t = cache.point_result(catalog, key, params, snapshot=snapshot)
        if t is not None:
            return t
        out = cache.lookup(catalog, key, params)
        if out is not None:
            rows = Executor(catalog, check_cancel=check_cancel, snapshot=snapshot).run_output(
                optimize(out, catalog))
            return first_per_key(rows, len(catalog.table(tnode.name).schema.key_names)) \
                if joined_items(ast) else rows
    out = matching_query(catalog, ast, sql, params, tnode, extra)
    if cache is not None and params:
        cache.store(catalog, key, params, out)
    rows = Executor(catalog, check_cancel=check_cancel, snapshot=snapshot).run_output(
        optimize(out, catalog))
    return first_per_key(rows, len(catalog.table(tnode.name).schema.key_names)) \
        if joined_items(ast) else rows


def matching_query(catalog, ast, sql, params, tnode, extra: list[exp.Expression]) -> L.Output:
    """The bound (not optimized) row-matching query of an UPDATE / DELETE (`_matching`)."""
    table = catalog.table(tnode.name)
    keys = table.schema.key_names
    alias = tnode.alias_or_name
    sel = exp.select(*[target_column(ast, tnode, k) for k in keys],
                     *[e.as_(f"__set{i}") for i, e in enumerate(extra)])
    sel = sel.from_(tnode.copy())
    # UPDATE ... FROM items / DELETE ... USING items: joined after the target, as a comma
    # join (an item's own JOINs follow it: `t, s JOIN r ON ...` is `t, (s JOIN r ON ...)`
    # for the ON conditions, which cannot name the target)
    joins = []
    for item in joined_items(ast):
        # `UPDATE t ... FROM t`: two relations of one name (PostgreSQL: 42712; give one an
        # alias). Compared without case: names differing only by quoted case are refused too
        if isinstance(item, exp.Table) and item.alias_or_name.lower() == alias.lower():
            raise SqlError(f'table name "{item.alias_or_name}" specified more than once',
                           "42712", position(sql, item))
        item = item.copy()
        own = item.args.get("joins") or []
        item.set("joins", None)
        joins.append(exp.Join(this=item))
        joins.extend(own)
    if joins:
        sel.set("joins", joins)
    if ast.args.get("with_") is not None:      # WITH ... UPDATE / DELETE: the CTEs the
        sel.set("with_", ast.args["with_"].copy())   # WHERE clause's subqueries may read
    where = ast.args.get("where")
    if where is not None:
        sel = sel.where(where.this.copy())
    # keep positions: the copied nodes keep their meta
    return Binder(catalog, sql, params, subquery_runner(catalog)).bind_query(sel)


def target_column(ast, tnode: exp.Table, name: str) -> exp.Column:
    """Column `name` of an UPDATE / DELETE's target in its row-matching query: quoted (a
    key column created as "Key" keeps its case); qualified by the target's name or alias
    only when FROM / USING items could make it ambiguous."""
    ident = exp.to_identifier(name, quoted=True)
    if not joined_items(ast):
        return exp.column(ident)
    named = tnode.args.get("alias")
    # the target's alias or name as written (a quoted "Mixed" stays quoted)
    return exp.column(ident, table=(named.this if named is not None else tnode.this).copy())


def joined_items(ast) -> list[exp.Expression]:
    """The FROM items of `UPDATE ... FROM` or the USING items of `DELETE ... USING`."""
    from_ = ast.args.get("from_") or ast.args.get("from")
    if from_ is not None:
        return [from_.this] + [e for e in from_.expressions or []]
    return list(ast.args.get("using") or [])


def first_per_key(rows: pa.Table, nkeys: int) -> pa.Table:
    """`rows` with one row per key (the first): a target row that joins several rows of
    UPDATE ... FROM / DELETE ... USING is updated or deleted once (PostgreSQL uses one of
    the joined rows, which one unspecified)."""
    if rows.num_rows < 2:
        return rows
    names = [f"k{i}" for i in range(nkeys)]
    keyed = pa.Table.from_arrays(rows.columns[:nkeys] + [pa.array(
        range(rows.num_rows), pa.int64())], names=names + ["i"])
    first = keyed.group_by(names, use_threads=False).aggregate([("i", "min")])
    if first.num_rows == rows.num_rows:
        return rows
    import pyarrow.compute as pc
    firsts = first["i_min"]
    return rows.take(pc.take(firsts, pc.sort_indices(firsts)))   # in the rows' order


def update(catalog, ast: exp.Update, sql, params, check_cancel, cache=None
           ) -> StatementResult:
    """Run an UPDATE. `ast` is only read, never changed (the row-matching query is built
    from copies of its parts): the session passes the parse cache's shared node."""
    tnode, table = write_target(catalog, ast, sql)
    names, values = update_assignments(ast, sql, tnode, table.schema)
    ret = plan_returning(catalog, ast, sql, params, tnode, table, check_cancel,
                         _returning_snapshot(catalog, ast))
    # RETURNING: the columns the SET list leaves as they are are read too
    others = returned_columns(table, names) if ret is not None else []
    extra = values + [target_column(ast, tnode, c) for c in others]
    kept = [] if ret is not None else None
    out = write_reread(catalog, table, tnode, "UPDATE", lambda snap: _matching(
        catalog, ast, sql, params, tnode, extra, check_cancel, cache, snap),
        lambda rows, snap: apply_update(table, tnode, names, rows, snap, kept, others))
    return _with_returning(out, ret, kept, table)


def _returning_snapshot(catalog, ast) -> int | None:
    """The snapshot a RETURNING list's subqueries read (taken before the write)."""
    return read_timestamp(catalog) if ast.args.get("returning") is not None else None


def returned_columns(table, written: list[str]) -> list[str]:
    """The table's non-key columns not in `written`, in table order: what an UPDATE /
    DELETE ... RETURNING reads besides the key and the SET values."""
    schema = table.schema
    return [c.name for c in schema.columns if not schema.is_key(c.name)
            and c.name not in written]


def _with_returning(out: StatementResult, ret: Returning | None, kept: list | None,
                    table) -> StatementResult:
    """`out` with the RETURNING rows of the rows `kept` (whole rows, the table's column
    names) when the statement has a RETURNING list."""
    if ret is None:
        return out
    rows = pa.concat_tables(kept) if kept else empty_rows(table.schema)
    out.table = ret.run(rows)
    return out


def update_assignments(ast: exp.Update, sql, tnode, schema) -> tuple[list[str], list]:
    """UPDATE's SET list, checked: (column names, value expressions)."""
    names, values = [], []
    for a in ast.expressions:
        if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column):
            raise SqlError("expected SET column = value", "42601", position(sql, a))
        name = a.this.name
        if not schema.has_column(name):
            raise SqlError(f'column "{name}" of relation "{tnode.name}" does not exist',
                           "42703", position(sql, a.this))
        if schema.is_key(name):
            raise SqlError(f'cannot update primary key column "{name}" of "{tnode.name}": '
                           "primary keys are immutable (delete and insert the row instead)",
                           "0A000", position(sql, a.this))
        if name in names:
            raise SqlError(f'multiple assignments to same column "{name}"', "42601",
                           position(sql, a.this))
        names.append(name)
        values.append(_default_value(schema, name) if _is_default(a.expression)
                      else a.expression)
    # one value per row: an aggregate, window or set-returning function is refused before
    # anything is written (a set-returning one wrote each row once per value, re-read
    # after re-read, until 40001)
    check_items(values, sql, "UPDATE")
    return names, values


def apply_update(table, tnode, names: list[str], rows: pa.Table,
                 read_ts: int | None = None, kept: list | None = None,
                 others: list[str] = ()) -> StatementResult:
    """Write the matching rows (key columns, then the SET values) as updates; with
    `read_ts`, each under the precondition "unchanged since read_ts", and the rows that
    fail it are the result's `info["changed"]` (their indexes in `rows`). `kept`: a list
    the applied rows are added to as whole rows after the update (RETURNING), the
    `others` columns following the SET values in `rows`."""
    if rows.num_rows == 0:
        return StatementResult("UPDATE", rowcount=0)
    data = update_data(table, rows, names, read_ts)
    r = table.update(data)
    if kept is not None:
        n = len(table.schema.key_names) + len(names)
        written = data.select(list(range(n)))
        full = pa.Table.from_arrays(written.columns + rows.columns[n:n + len(others)],
                                    names=written.column_names + list(others))
        kept.append(applied_rows(as_stored(table.schema, full), r.row_errors))
    return _written("UPDATE", table, tnode, r)


def _written(verb: str, table, tnode, r) -> StatementResult:
    """The StatementResult of an UPDATE / DELETE write: NOT_FOUND rows (deleted since the
    read) are not counted, CHANGED rows are set apart in `info["changed"]` for re-reading."""
    errs = [e for e in r.row_errors if e.code not in ("NOT_FOUND", "CHANGED")]
    out = StatementResult(verb, rowcount=r.num_applied,
                          row_errors=row_failures(tnode.name, table.schema, errs))
    changed = [e.index for e in r.row_errors if e.code == "CHANGED"]
    if changed:
        out.info["changed"] = changed
    gone = [e.index for e in r.row_errors if e.code == "NOT_FOUND"]
    if gone:
        out.info["gone"] = gone
    return out


def write_reread(catalog, table, tnode, verb: str, read, write, first=None,
                 dedupe: bool = False) -> StatementResult:
    """Run an UPDATE / DELETE: `read(S)` the matching rows at snapshot S, `write(rows, S)`
    them under the precondition "unchanged since S"; a row deleted since S is skipped
    (NOT_FOUND, `_written`), the rows updated since (by a statement that committed after
    S: CHANGED) are read again at a new snapshot - the whole
    matching query, of which only those rows' keys are kept: a row that no longer
    matches or is gone is skipped - and written again, for up to MAX_REREAD_ROUNDS rounds
    (PostgreSQL's READ COMMITTED re-check, EvalPlanQual). Rows that match only at a later
    snapshot are not added, as in PostgreSQL. `first`: (rows, S) already read (EXPLAIN
    ANALYZE reads them with its own executor). The result's `info["gone"]`: the rows
    skipped as deleted since their read (tables of `rows`' columns; ON CONFLICT DO UPDATE
    proposes them for insertion again). `dedupe`: `read` may give a key more than once
    (UPDATE ... FROM read by EXPLAIN ANALYZE): one row per key is written (`first_per_key`).
    Rows that name one key twice are refused with 21000 when they come back CHANGED (the
    second failed its precondition on the first's write, which re-reading would repeat)."""
    keys = table.schema.key_names
    if first is None:
        snap = read_timestamp(catalog)
        rows = read(snap)
    else:
        rows, snap = first
    if dedupe:
        rows = first_per_key(rows, len(keys))
    total = None
    gone_rows = []
    for rounds in range(MAX_REREAD_ROUNDS):
        r = write(rows, snap)
        if total is None:
            total = r
        else:
            total.rowcount += r.rowcount
            total.row_errors.extend(r.row_errors)
        changed = r.info.pop("changed", None)
        gone = r.info.pop("gone", None)
        if gone:
            gone_rows.append(rows.take(pa.array(gone, pa.int64())))
            total.info["gone"] = gone_rows
        if not changed:
            return total
        if not rounds and first_per_key(rows, len(keys)).num_rows < rows.num_rows:
            # a key written twice by this statement (a set-returning SET value, ...): its
            # second row failed on the first's write; re-reading would apply it again
            raise SqlError(f"{verb} command cannot affect row a second time", "21000",
                           detail=f"{total.rowcount} row(s) were written and stay written",
                           hint="Ensure that each row is matched by one row of the source.")
        if rounds:              # contention: let the other writers' statements finish
            time.sleep(random.uniform(0, min(0.02, 0.0005 * 2 ** min(rounds, 6))))
        again = rows.take(pa.array(changed, pa.int64())).select(list(range(len(keys))))
        again = again.rename_columns(keys)
        snap = read_timestamp(catalog)
        fresh = read(snap)
        if dedupe:
            fresh = first_per_key(fresh, len(keys))
        fresh = fresh.rename_columns(keys + fresh.column_names[len(keys):])
        # the changed rows' keys only (vectorised: a semi join on the key columns)
        rows = fresh.join(again, keys=keys, join_type="left semi") if fresh.num_rows \
            else fresh
        if rows.num_rows == 0:
            return total
    raise SqlError(
        f"could not serialize access due to concurrent update: {len(changed)} row(s) of "
        f'"{tnode.name}" kept changing while this {verb} read them again '
        f"{MAX_REREAD_ROUNDS} times", "40001",
        detail=f"{total.rowcount} row(s) were written before and stay written "
               "(writes are not undone)", hint="Run the statement again.")


def delete(catalog, ast: exp.Delete, sql, params, check_cancel, cache=None
           ) -> StatementResult:
    """Run a DELETE; `ast` is only read, never changed (as `update`)."""
    tnode, table = write_target(catalog, ast, sql)
    ret = plan_returning(catalog, ast, sql, params, tnode, table, check_cancel,
                         _returning_snapshot(catalog, ast))
    # RETURNING: the deleted rows' other columns are read too
    others = returned_columns(table, []) if ret is not None else []
    extra = [target_column(ast, tnode, c) for c in others]
    kept = [] if ret is not None else None
    out = write_reread(catalog, table, tnode, "DELETE", lambda snap: _matching(
        catalog, ast, sql, params, tnode, extra, check_cancel, cache, snap),
        lambda rows, snap: apply_delete(table, tnode, rows, snap, kept, others))
    return _with_returning(out, ret, kept, table)


def apply_delete(table, tnode, rows: pa.Table, read_ts: int | None = None,
                 kept: list | None = None, others: list[str] = ()) -> StatementResult:
    """Delete the matching rows (their key columns); `read_ts`, `kept` (the deleted rows
    as they were) and `others` as in `apply_update`."""
    if rows.num_rows == 0:
        return StatementResult("DELETE", rowcount=0)
    keys = table.schema.key_names
    arrays = rows.columns[:len(keys)]
    names = keys
    if read_ts is not None:
        arrays = arrays + [_read_ts_array(rows.num_rows, read_ts)]
        names = keys + [READ_TS_COLUMN]
    r = table.delete(pa.Table.from_arrays(arrays, names=names))
    if kept is not None:
        full = pa.Table.from_arrays(rows.columns[:len(keys) + len(others)],
                                    names=keys + list(others))
        kept.append(applied_rows(full, r.row_errors))
    return _written("DELETE", table, tnode, r)


__all__ = ["execute", "explain", "describe", "plan_query", "run_query", "render"]
