"""Dispatch one parsed statement by its kind and run it against the catalog: queries, DML,
EXPLAIN, utility statements.

    execute(catalog, ast, sql, params) -> StatementResult

- SELECT / set operations / VALUES: planner.query (bind -> optimize -> execute).
- INSERT [ON CONFLICT DO NOTHING], UPSERT (`upsert=True`: the session passes it for the
  dialect's KuduUpsert node), UPDATE ... WHERE, DELETE ... WHERE: planner.dml (Kudu
  semantics: each row applied on its own, failures reported per row).
- EXPLAIN [ANALYZE] <query>: the optimized plan tree (pushed predicates, projected columns,
  pruned tablets); ANALYZE runs it and adds rows and time per operator and the scans'
  statistics (rows skipped by zone maps and lazy materialization). The session passes
  `analyze` as EXPLAIN's grammar read it (planner/commands.py: `EXPLAIN (ANALYZE false)` is
  a plain EXPLAIN). EXPLAIN [ANALYZE] <INSERT | UPSERT | UPDATE | DELETE>: the plan of the
  rows written under `Update on t` (...); ANALYZE performs the write, as PostgreSQL does,
  and adds `Rows written: N` (`_write_plan`).
- PREPARE / EXECUTE (the session keeps the names): `prepare` checks a PREPARE and returns
  its `PreparedSql`; `execute_arguments` casts EXECUTE's values to the parameter types.
- CREATE [OR REPLACE] VIEW, DROP VIEW: planner.views.
- Everything else (CREATE/DROP/ALTER TABLE, SHOW, DESCRIBE) goes to planner.utility; a
  statement kind nobody runs is 0A000 `VACUUM is not supported`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pyarrow as pa
from sqlglot import exp

from planner import logical as L
from planner.binder import position
from planner.commands import KuduUpsert
from planner.dialect import KuduSQL
from planner.dml import (apply_delete, apply_update, conflict_updates, delete, insert,
                         insert_columns, joined_items, read_timestamp, write_reread,
                         insert_rows, insert_source, insert_target, matching_query,
                         row_failures, update, update_assignments, write_target)
from planner.errors import FeatureNotSupported, SqlError
from planner.executor import Executor
from planner.query import QUERY_TYPES, plan_query, run_query, run_select, with_utc
from planner.result import StatementResult
from planner.returning import plan_returning
from planner.rules import optimize


def execute(catalog, ast: exp.Expression, sql: str, params: list[Any] | None = None, *,
            upsert: bool = False, check_cancel=None, stream: bool = False,
            cache=None) -> StatementResult:
    if isinstance(ast, QUERY_TYPES):
        return run_select(catalog, plan_query(catalog, ast, sql, params, cache), stream,
                          check_cancel)
    if isinstance(ast, exp.Insert):
        if ast.args.get("conflict") is not None and conflict_updates(ast.args["conflict"]):
            from planner import on_conflict
            return on_conflict.insert(catalog, ast, sql, params, check_cancel)
        return insert(catalog, ast, sql, params, upsert, check_cancel)
    if isinstance(ast, exp.Update):
        return update(catalog, ast, sql, params, check_cancel, cache)
    if isinstance(ast, exp.Delete):
        return delete(catalog, ast, sql, params, check_cancel, cache)
    if isinstance(ast, exp.Create) and ast.args.get("expression") is not None and \
            str(ast.args.get("kind", "")).upper() == "TABLE":
        return create_table_as(catalog, ast, sql, params, check_cancel)
    if isinstance(ast, exp.Create) and str(ast.args.get("kind", "")).upper() == "VIEW":
        if params:
            raise SqlError("there is no parameter $1", "42P02")
        from planner.views import create_view
        return create_view(catalog, ast, sql)
    if isinstance(ast, exp.Drop) and str(ast.args.get("kind", "")).upper() == "VIEW":
        from planner.views import drop_views
        return drop_views(catalog, ast, sql)
    from planner.utility import execute_utility, is_utility
    if is_utility(ast):
        if params:
            raise SqlError("parameters are not allowed in utility statements", "42P02")
        return execute_utility(catalog, ast, sql)
    if isinstance(ast, exp.TruncateTable):
        raise FeatureNotSupported("TRUNCATE is not supported (Kudu has no truncate: use DELETE, "
                                  "or DROP and CREATE the table)",
                                  position=position(sql, ast))
    what = str(ast.this).split()[0].upper() if isinstance(ast, exp.Command) and ast.this \
        else (sql.split(None, 1) or [ast.key])[0].upper()
    raise FeatureNotSupported(f"{what} is not supported", position=position(sql, ast))



# -- SQL-level PREPARE / EXECUTE (the session keeps the PreparedSql by name) ------------------
@dataclasses.dataclass(frozen=True)
class PreparedSql:
    """`PREPARE name [(types)] AS statement`: what EXECUTE needs, and pg_prepared_statements
    shows. `types`: $1..$n, declared or else inferred from the statement (None: unknown,
    PostgreSQL's text)."""
    name: str
    text: str                  # the statement after AS (what EXECUTE runs)
    types: tuple[pa.DataType | None, ...]
    type_names: tuple[str, ...]
    prepare_time: Any
    statement: str             # the whole PREPARE as written


_PREPARABLE = QUERY_TYPES + (exp.Insert, exp.Update, exp.Delete)


def prepare(catalog, ast, sql: str, name: str) -> PreparedSql:
    """Check a PREPARE (a KuduPrepare node of `sql`) as PostgreSQL does: the statement must
    be a SELECT / VALUES / INSERT / UPDATE / DELETE, and a query is planned (its tables,
    columns and functions resolved) with the parameter types."""
    import datetime as _dt

    from planner.expr import arrow_type as _arrow_type, pg_name as _pg_name

    inner = ast.expression
    if not isinstance(inner, _PREPARABLE):
        raise SqlError(f'syntax error at or near "{ast.args["text"].split()[0]}"', "42601",
                       position(sql, inner))
    declared = [_arrow_type(t, None, t) for t in ast.expressions]
    inferred = parameter_types(catalog, inner, sql)
    n = max(len(declared), len(inferred))
    types = tuple(declared[i] if i < len(declared) else inferred[i] for i in range(n))
    if isinstance(inner, QUERY_TYPES):
        params = [pa.scalar(None, t if t is not None else pa.null()) for t in types]
        Executor(catalog, schema_only=True).run_output(plan_query(catalog, inner, sql, params))
    else:
        write_target(catalog, inner, sql)           # the table exists
    names = tuple(_pg_name(t) if t is not None else "text" for t in types)
    return PreparedSql(name, ast.args["text"], types, names,
                       _dt.datetime.now(_dt.timezone.utc), sql.strip().rstrip(";"))


def execute_arguments(catalog, prepared: PreparedSql, ast, sql: str) -> list[pa.Scalar]:
    """The values of `EXECUTE name (arg, ...)` (a KuduExecute node of `sql`), each cast to
    its parameter's type as PostgreSQL's EXECUTE coerces them."""
    from planner.expr import sql_type as _sql_type

    args = ast.expressions
    if len(args) != len(prepared.types):
        raise SqlError(f'wrong number of parameters for prepared statement "{prepared.name}"',
                       "42601", position(sql, ast),
                       detail=f"Expected {len(prepared.types)} parameters but got "
                              f"{len(args)}.")
    if not args:
        return []
    items = []
    for a, t in zip(args, prepared.types):
        a = a.copy()
        if t is not None:
            a = exp.Cast(this=a, to=exp.DataType.build(_sql_type(t), dialect="postgres"))
        items.append(a)
    table = execute(catalog, exp.Select(expressions=items), sql).table
    return [table.column(i)[0] for i in range(len(items))]


# -- Describe (the wire protocol's Parse / Describe) ----------------------------------------
def describe(catalog, ast: exp.Expression, sql: str
             ) -> tuple[list[pa.DataType | None], pa.Schema | None]:
    """Parameter types (inferred from context; None when nothing says) and the result schema
    (None for statements that return no rows), without reading any table data: the plan
    runs over empty inputs."""
    ptypes = parameter_types(catalog, ast, sql)
    params = [pa.scalar(None, t if t is not None else pa.null()) for t in ptypes]
    if isinstance(ast, (exp.Insert, exp.Update, exp.Delete)) and \
            ast.args.get("returning") is not None:       # ... RETURNING: its rows
        tnode, table = write_target(catalog, ast, sql)
        return ptypes, plan_returning(catalog, ast, sql, params, tnode, table).schema()
    if not isinstance(ast, QUERY_TYPES):
        return ptypes, None
    return ptypes, describe_query(catalog, ast, sql, params)


def describe_query(catalog, ast: exp.Expression, sql: str, params: list) -> pa.Schema:
    """The result schema of a query (planned with `params`, run over empty inputs)."""
    out = plan_query(catalog, ast, sql, params)
    return with_utc(Executor(catalog, schema_only=True).run_output(out).schema, out.utc)


# PostgreSQL's (and the protocol's) limit: Bind counts parameters in an int16
MAX_PARAMETERS = 65535


def parameter_types(catalog, ast: exp.Expression, sql: str | None = None
                    ) -> list[pa.DataType | None]:
    """The types of $1..$n in order (see infer_parameter_types). `$n` beyond
    MAX_PARAMETERS is 42P02 (the list of n types would otherwise be built: `SELECT
    $9999999999` made the server allocate without bound; found by tests/wire/fuzz_scale)."""
    types = infer_parameter_types(catalog, ast)
    n = max(types, default=0)
    if n > MAX_PARAMETERS:
        node = next((p for p in ast.find_all(exp.Parameter) if p.name.isdigit()
                     and int(p.name) == n), None)
        raise SqlError(f"there is no parameter ${n}", "42P02",
                       position(sql, node) if sql is not None else None,
                       hint=f"Parameters are numbered $1 to ${MAX_PARAMETERS}.")
    return [types.get(i) for i in range(1, n + 1)]


def _param_index(node: exp.Expression, counter: list[int]) -> int:
    if isinstance(node, exp.Parameter):
        return int(node.name)
    counter[0] += 1
    return counter[0]


def infer_parameter_types(catalog, ast: exp.Expression) -> dict[int, pa.DataType | None]:
    """$n -> the type its context implies: the column it is compared with, assigned to or
    inserted into, a CAST's type, integers for LIMIT/OFFSET; None when unknown (PostgreSQL
    then calls it text)."""
    from planner.expr import arrow_type as _arrow_type   # SQL type -> Arrow type, shared with CAST
    from planner.binder.views import catalog_views
    views = catalog_views(catalog)
    schemas: dict[str, dict[str, pa.DataType]] = {}   # table or alias -> column -> type
    for t in ast.find_all(exp.Table):
        if t.name in views:           # a view: the column types it was created with
            sch = {f.name: f.type for f in views[t.name].schema}
        elif catalog.has_table(t.name):
            sch = {c.name: c.arrow_type for c in catalog.table(t.name).schema.columns}
        else:
            continue
        schemas[t.alias_or_name] = sch
        schemas.setdefault(t.name, sch)

    def col_type(c: exp.Column) -> pa.DataType | None:
        cands = [schemas[c.table]] if c.table in schemas else list(schemas.values())
        hits = {sch[c.name] for sch in cands if c.name in sch}
        return hits.pop() if len(hits) == 1 else None

    insert_cols = None
    if isinstance(ast, exp.Insert) and catalog.has_table(
            (ast.this.this if isinstance(ast.this, exp.Schema) else ast.this).name):
        tgt = ast.this.this if isinstance(ast.this, exp.Schema) else ast.this
        sch = catalog.table(tgt.name).schema
        names = [c.name for c in ast.this.expressions] if isinstance(ast.this, exp.Schema) \
            and ast.this.expressions else sch.names
        insert_cols = [sch.column(n).arrow_type if sch.has_column(n) else None for n in names]
    out: dict[int, pa.DataType | None] = {}
    counter = [0]
    for p in ast.find_all(exp.Parameter, exp.Placeholder):
        if isinstance(p, exp.Placeholder) and p.name and not p.args.get("jdbc"):
            continue
        idx = _param_index(p, counter)
        node, parent = p, p.parent
        while isinstance(parent, exp.Paren):
            node, parent = parent, parent.parent
        typ = None
        other = None
        if isinstance(parent, exp.Cast):
            try:
                typ = _arrow_type(parent.to, None, parent)
            except Exception:  # an unknown type name: leave it to execution to report
                typ = None
        elif isinstance(parent, (exp.Limit, exp.Offset, exp.Fetch)):
            typ = pa.int64()
        elif isinstance(parent, exp.Between):
            other = parent.this
        elif isinstance(parent, exp.In) and node is not parent.this:
            other = parent.this
        elif isinstance(parent, exp.Tuple) and insert_cols is not None and \
                isinstance(parent.parent, exp.Values):
            i = parent.expressions.index(node)
            typ = insert_cols[i] if i < len(insert_cols) else None
        elif isinstance(parent, exp.Values) and insert_cols:
            typ = insert_cols[0]
        elif isinstance(parent, exp.Binary) and not isinstance(parent, (exp.And, exp.Or)):
            other = parent.expression if parent.this is node else parent.this
        if other is not None:
            while isinstance(other, exp.Paren):
                other = other.this
            if isinstance(other, exp.Column):
                typ = col_type(other)
        if out.get(idx) is None:
            out[idx] = typ
    return out


# -- EXPLAIN ---------------------------------------------------------------------------------
def explain(catalog, ast, sql, params=None, analyze: bool = False,
            check_cancel=None) -> StatementResult:
    """EXPLAIN [ANALYZE] of a query, or of INSERT / UPSERT / UPDATE / DELETE: the plan of
    the rows the statement writes under a `Insert on t` (`Upsert`, `Update`, `Delete`)
    line. As in PostgreSQL, EXPLAIN ANALYZE of a write *performs* it and reports the rows
    written (and any refused, with the first refusal's SQLSTATE)."""
    if isinstance(ast, QUERY_TYPES):
        head, out, write = None, plan_query(catalog, ast, sql, params), None
    elif isinstance(ast, (exp.Insert, exp.Update, exp.Delete)):
        head, out, write = _write_plan(catalog, ast, sql, params)
    else:
        raise FeatureNotSupported("EXPLAIN supports queries, INSERT, UPSERT, UPDATE and "
                                  "DELETE only", position=position(sql, ast))
    # an UPDATE / DELETE reads at one snapshot and writes under its read precondition
    # (planner/dml.py `write_reread`): rows changed meanwhile are read again
    snap = read_timestamp(catalog) if analyze and isinstance(ast, (exp.Update, exp.Delete)) \
        else None
    ex = Executor(catalog, analyze=True, check_cancel=check_cancel, snapshot=snap) \
        if analyze else None
    total = written = None
    if ex is not None:
        t0 = time.perf_counter()
        result = ex.run_output(out)
        if snap is not None:
            written = write(result, snap)
        elif write is not None:
            written = write(result)
        total = (time.perf_counter() - t0, result.num_rows)
    lines = render(out, ex)
    if head is not None:
        lines = [head] + ["  " + x for x in lines]
    if written is not None:
        refused = f", {len(written.row_errors)} refused ({written.row_errors[0].sqlstate})" \
            if written.row_errors else ""
        lines.append(f"Rows written: {written.rowcount}{refused}")
    if total is not None:
        # (PostgreSQL's last line is the execution time: clients read it there)
        lines.append(f"Peak Memory: {ex.guard.peak / (1 << 20):.1f} MB (intermediate results "
                     f"the query memory limit meters)")
        lines.append(f"Execution Time: {total[0] * 1000:.3f} ms ({total[1]} rows)")
    return StatementResult.rows("EXPLAIN", pa.table({"QUERY PLAN": pa.array(lines, pa.string())}))


def _write_plan(catalog, ast, sql, params):
    """(head line, the optimized plan of the rows a write statement writes, a function
    that writes a computed result of that plan -> StatementResult)."""
    if isinstance(ast, exp.Insert):
        upsert = isinstance(ast, KuduUpsert)
        target = insert_target(catalog, ast, sql)
        out = plan_query(catalog, insert_source(ast, target), sql, params)
        # the statement's shape errors before anything runs (PostgreSQL's EXPLAIN has them)
        out = dataclasses.replace(out, names=insert_columns(target, len(out.names), sql,
                                                            ast.expression))
        verb = "Upsert" if upsert else "Insert"
        if target.on_update is not None:     # PostgreSQL's EXPLAIN names the resolution
            head = f"{verb} on {target.name} (ON CONFLICT DO UPDATE, arbiter {target.name}_pkey)"

            def refuse(rows):
                raise FeatureNotSupported("EXPLAIN ANALYZE of INSERT ... ON CONFLICT DO "
                                          "UPDATE is not supported (EXPLAIN shows its plan)")
            return head, out, refuse
        return (f"{verb} on {target.name}", out,
                lambda rows: insert_rows(target, rows, upsert, sql, ast.expression))
    tnode, table = write_target(catalog, ast, sql)
    if isinstance(ast, exp.Update):
        names, values = update_assignments(ast, sql, tnode, table.schema)
        out = optimize(matching_query(catalog, ast, sql, params, tnode, values), catalog)
        # shown as the key columns and the new values of the SET columns
        out = dataclasses.replace(out, names=table.schema.key_names + names)
        return (f"Update on {tnode.name} (SET {', '.join(names)})", out,
                _reread(catalog, table, tnode, "UPDATE", out,
                        lambda rows, snap: apply_update(table, tnode, names, rows, snap),
                        bool(joined_items(ast))))
    out = optimize(matching_query(catalog, ast, sql, params, tnode, []), catalog)
    return f"Delete on {tnode.name}", out, _reread(
        catalog, table, tnode, "DELETE", out,
        lambda rows, snap: apply_delete(table, tnode, rows, snap), bool(joined_items(ast)))


def _reread(catalog, table, tnode, verb, out, write, dedupe: bool = False):
    """EXPLAIN ANALYZE's write of an UPDATE / DELETE: (rows read at S, S) -> the rows
    written under their read precondition, changed ones read again (`write_reread`;
    `dedupe` for UPDATE ... FROM / DELETE ... USING, whose join may repeat a key)."""
    def read(snap):
        return Executor(catalog, snapshot=snap).run_output(out)
    return lambda rows, snap: write_reread(catalog, table, tnode, verb, read, write,
                                           (rows, snap), dedupe)


def render(out: L.Output, ex: Executor | None) -> list[str]:
    from planner.logical import SubqueryRef
    lines: list[str] = []

    def node_lines(node: L.Node, depth: int) -> None:
        pad = "  " * depth
        head = node.label()
        if ex is not None:
            st = ex.stats.get(id(node))
            if st is not None:
                head += f"  (rows={st.rows} time={st.seconds * 1000:.1f} ms)"
            else:
                head += "  (never executed)"
        lines.append(("-> " if depth else "") + head if not depth else f"{pad}-> {head}")
        for d in L.describe(node):
            lines.append(f"{pad}     {d}")
        if ex is not None:
            st = ex.stats.get(id(node))
            if st is not None and st.scan is not None:
                s = st.scan
                lines.append(f"{pad}     scanned: {s.rows_scanned} rows in "
                             f"{st.tablets[0]} of {st.tablets[1]} tablets; "
                             f"returned {s.rows_returned}")
                lines.append(f"{pad}     skipped: {s.blocks_skipped_zone_map} blocks by zone "
                             f"maps, {s.blocks_skipped_lazy} blocks and "
                             f"{s.cells_skipped_lazy} cells by lazy materialization, "
                             f"{s.rowsets_pruned} rowsets by key range")
            if st is not None:
                for d in st.detail:
                    lines.append(f"{pad}     {d}")
        for e in node.expressions():
            for sq in e.find_all(SubqueryRef):
                lines.append(f"{pad}     subquery:")
                node_lines(sq.this.plan, depth + 3)
        for c in node.children():
            node_lines(c, depth + 1)

    lines.append("Output: " + ", ".join(out.names))
    node_lines(out.plan, 0)
    return lines


# -- CREATE TABLE AS SELECT ------------------------------------------------------------------
_SQL_TYPES = [(pa.types.is_int8, "TINYINT"), (pa.types.is_int16, "SMALLINT"),
              (pa.types.is_int32, "INT"), (pa.types.is_int64, "BIGINT"),
              (pa.types.is_float32, "FLOAT"), (pa.types.is_float64, "DOUBLE"),
              (pa.types.is_boolean, "BOOLEAN"), (pa.types.is_date, "DATE"),
              (pa.types.is_timestamp, "TIMESTAMP"), (pa.types.is_string, "STRING"),
              (pa.types.is_large_string, "STRING"), (pa.types.is_binary, "BINARY"),
              (pa.types.is_null, "STRING")]


def _column_type_sql(t: pa.DataType) -> str:
    if pa.types.is_decimal(t):
        return f"DECIMAL({min(t.precision, 38)},{t.scale})"
    for pred, name in _SQL_TYPES:
        if pred(t):
            return name
    raise FeatureNotSupported(f"a column of type {t} cannot be stored")


def create_table_as(catalog, ast: exp.Create, sql, params, check_cancel) -> StatementResult:
    """Impala's CTAS: `CREATE TABLE t PRIMARY KEY (k) [PARTITION BY ...] AS SELECT ...`
    (also `CREATE TABLE t (PRIMARY KEY (k)) ... AS SELECT`). Columns take the query's names
    and types; the rows are then inserted with the usual per-row errors."""
    from planner.ddl import column_order_properties, create_table_spec, quote_identifier
    from planner.dialect import KuduPrimaryKeyProperty, KuduSQL
    target = ast.this
    table = target.this if isinstance(target, exp.Schema) else target
    from planner.ddl import fold_ident
    key: list[str] = []
    if isinstance(target, exp.Schema):
        for e in target.expressions:
            if isinstance(e, exp.PrimaryKey):
                key = [fold_ident(i) for i in e.expressions]
            else:
                raise FeatureNotSupported("CREATE TABLE AS SELECT takes its columns from the "
                                          "query; only PRIMARY KEY (...) may be listed",
                                          position=position(sql, e))
    props = ast.args.get("properties")
    other_props = []
    for p in (props.expressions if props is not None else []):
        if isinstance(p, KuduPrimaryKeyProperty):
            key = [fold_ident(i) for i in p.expressions]
        else:
            other_props.append(p)
    if not key:
        raise SqlError("CREATE TABLE AS SELECT needs a primary key: CREATE TABLE t "
                       "PRIMARY KEY (col, ...) AS SELECT ...", "42P16", position(sql, table))
    if catalog.has_table(table.name):
        if ast.args.get("exists"):
            return StatementResult("CREATE TABLE AS", rowcount=0, notices=[
                f'relation "{table.name}" already exists, skipping'])
        raise SqlError(f'relation "{table.name}" already exists', "42P07",
                       position(sql, table))
    rows = run_query(catalog, ast.expression, sql, params, check_cancel)
    names = rows.column_names
    if len(set(names)) != len(names):
        raise SqlError("CREATE TABLE AS SELECT needs distinct column names (alias them)",
                       "42701", position(sql, ast.expression))
    for k in key:
        if k not in names:
            raise SqlError(f'primary key column "{k}" is not a column of the query', "42703",
                           position(sql, table))
    cols = [f"{quote_identifier(f.name)} {_column_type_sql(f.type)}"
            + (" NOT NULL" if f.name in key else "") for f in rows.schema]
    cols.append("PRIMARY KEY (" + ", ".join(quote_identifier(k) for k in key) + ")")
    tail = " ".join(p.sql(dialect=KuduSQL) for p in other_props)
    ddl = f"CREATE TABLE {quote_identifier(table.name)} ({', '.join(cols)}) {tail}"
    spec = create_table_spec(ddl)
    catalog.create_table(spec.name, spec.schema, spec.partition_schema,
                         replication_factor=spec.replication_factor,
                         properties=column_order_properties(names, spec.schema,
                                                            spec.properties))
    if rows.num_rows == 0:
        return StatementResult("SELECT", rowcount=0)
    tbl = catalog.table(table.name)
    r = tbl.insert(rows)
    return StatementResult("SELECT", rowcount=r.num_applied,
                           row_errors=row_failures(table.name, tbl.schema, r.row_errors))
