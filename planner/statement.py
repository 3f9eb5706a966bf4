"""Run one parsed statement against the catalog: queries, DML, EXPLAIN, utility statements.

    execute(catalog, ast, sql, params) -> StatementResult

- SELECT / set operations / VALUES: bind (planner.binder) -> optimize (planner.rules) ->
  execute (planner.executor).
- INSERT [ON CONFLICT DO NOTHING], UPSERT (`upsert=True`: the session passes it for the
  dialect's KuduUpsert node), UPDATE ... WHERE, DELETE ... WHERE: Kudu semantics. The rows are computed first
  (VALUES or a query; UPDATE/DELETE scan the table for the keys that match), then written as
  one op per tablet; every row is applied on its own. Rows that fail are reported in
  `StatementResult.row_errors` (1-based ordinal in the statement, SQLSTATE, key) while the
  other rows stay applied; `rowcount` counts the applied rows. INSERT ... ON CONFLICT DO
  NOTHING drops the duplicate-key failures. A row whose key vanished between UPDATE/DELETE's
  scan and its write (a concurrent DELETE) is simply not counted.
- EXPLAIN [ANALYZE] <query>: the optimized plan tree (pushed predicates, projected columns,
  pruned tablets); ANALYZE runs it and adds rows and time per operator and the scans'
  statistics (rows skipped by zone maps and lazy materialization). The session passes
  `analyze` as EXPLAIN's grammar read it (planner/commands.py: `EXPLAIN (ANALYZE false)` is
  a plain EXPLAIN). EXPLAIN [ANALYZE] <INSERT | UPSERT | UPDATE | DELETE>: the plan of the
  rows written under `Update on t` (...); ANALYZE performs the write, as PostgreSQL does,
  and adds `Rows written: N` (`_write_plan`).
- PREPARE / EXECUTE (the session keeps the names): `prepare` checks a PREPARE and returns
  its `PreparedSql`; `execute_arguments` casts EXECUTE's values to the parameter types.
- `now()` / `current_timestamp` as a query's own result columns are timestamp with time
  zone (`with_utc`); inside expressions timestamps have none (UTC).
- Everything else (CREATE/DROP/ALTER TABLE, SHOW, DESCRIBE) goes to planner.utility; a
  statement kind nobody runs is 0A000 `VACUUM is not supported`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pyarrow as pa
from sqlglot import exp

from engine.types import sql_literal
from planner import logical as L
from planner.binder import Binder, position
from planner.commands import KuduUpsert
from planner.dialect import KuduNow, KuduSQL
from planner.ddl import declared_columns
from planner.errors import FeatureNotSupported, SqlError
from planner.expr import sql_type
from planner.executor import Executor
from planner.result import RowFailure, StatementResult
from planner.rules import optimize

QUERY_TYPES = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values)


def plan_query(catalog, ast: exp.Expression, sql: str, params=None, cache=None
               ) -> L.Output:
    out = Binder(catalog, sql, params, subquery_runner(catalog)).bind_query(ast)
    out = dataclasses.replace(out, utc=_now_columns(ast))
    if cache is not None and params:
        cache.store(catalog, sql, params, out)
    return _optimize(out, catalog)


def subquery_runner(catalog):
    """The binder's SubqueryRunner (planner.binder.common): optimize a bound plan (unless
    `rules=False`) and execute it with a fresh Executor over `catalog`."""
    def run(plan: L.Output, *, rules: bool = True, schema_only: bool = False) -> pa.Table:
        if rules:
            plan = optimize(plan, catalog)
        return Executor(catalog, schema_only=schema_only).run_output(plan)
    return run


def _optimize(out: L.Output, catalog) -> L.Output:
    o = optimize(out, catalog)
    return o if o.utc == out.utc else dataclasses.replace(o, utc=out.utc)




def _now_columns(ast: exp.Expression) -> tuple[int, ...]:
    """Result positions that are `now()` / `current_timestamp` themselves: PostgreSQL types
    them timestamp with time zone. Inside expressions the engine's timestamps stay
    without a time zone (UTC), so only these top-level columns change type."""
    if not isinstance(ast, exp.Select):
        return ()
    return tuple(i for i, e in enumerate(ast.expressions)
                 if type(e.unalias()) in (exp.CurrentTimestamp, KuduNow))


def with_utc(t, utc: tuple[int, ...]):
    """A result table (or batch, or schema) with the `utc` columns as timestamp[us, UTC]."""
    if not utc:
        return t
    tz = pa.timestamp("us", tz="UTC")
    if isinstance(t, pa.Schema):
        return pa.schema([f.with_type(tz) if i in utc and pa.types.is_timestamp(f.type)
                          else f for i, f in enumerate(t)])
    cols = [c.cast(tz) if i in utc and pa.types.is_timestamp(c.type) else c
            for i, c in enumerate(t.columns)]
    return type(t).from_arrays(cols, names=t.schema.names)


def run_query(catalog, ast, sql, params=None, check_cancel=None) -> pa.Table:
    out = plan_query(catalog, ast, sql, params)
    return Executor(catalog, check_cancel=check_cancel).run_output(out)


def run_select(catalog, out: L.Output, stream: bool, check_cancel=None) -> StatementResult:
    """Execute an optimized query plan: the whole table, or with `stream` a streamed result
    (see StatementResult.stream) whose first batch is computed here - the scan starts and
    takes its snapshot now; later execution errors arise while the stream is consumed."""
    ex = Executor(catalog, check_cancel=check_cancel)
    if not stream:
        return StatementResult.rows("SELECT", with_utc(ex.run_output(out), out.utc))
    gen = ex.stream_output(out)
    first = with_utc(next(gen), out.utc)

    def rows():
        yield first
        for batch in gen:
            yield with_utc(batch, out.utc)
    return StatementResult("SELECT", rowcount=-1, stream=rows(), schema=first.schema)


def run_cached(catalog, out: L.Output, stream: bool, check_cancel=None) -> StatementResult:
    """A plan from planner.plan_cache (parameters already substituted, rules not yet run)."""
    return run_select(catalog, _optimize(out, catalog), stream, check_cancel)


def execute(catalog, ast: exp.Expression, sql: str, params: list[Any] | None = None, *,
            upsert: bool = False, check_cancel=None, stream: bool = False,
            cache=None) -> StatementResult:
    if isinstance(ast, QUERY_TYPES):
        return run_select(catalog, plan_query(catalog, ast, sql, params, cache), stream,
                          check_cancel)
    if isinstance(ast, exp.Insert):
        return insert(catalog, ast, sql, params, upsert, check_cancel)
    if isinstance(ast, exp.Update):
        return update(catalog, ast, sql, params, check_cancel, cache)
    if isinstance(ast, exp.Delete):
        return delete(catalog, ast, sql, params, check_cancel, cache)
    if isinstance(ast, exp.Create) and ast.args.get("expression") is not None and \
            str(ast.args.get("kind", "")).upper() == "TABLE":
        return create_table_as(catalog, ast, sql, params, check_cancel)
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
        _target(catalog, inner, sql)           # the table exists
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
    if not isinstance(ast, QUERY_TYPES):
        return ptypes, None
    params = [pa.scalar(None, t if t is not None else pa.null()) for t in ptypes]
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
    schemas = {}
    for t in ast.find_all(exp.Table):
        if catalog.has_table(t.name):
            sch = catalog.table(t.name).schema
            schemas[t.alias_or_name] = sch
            schemas.setdefault(t.name, sch)

    def col_type(c: exp.Column) -> pa.DataType | None:
        cands = [schemas[c.table]] if c.table in schemas else list(schemas.values())
        hits = {sch.column(c.name).arrow_type for sch in cands if sch.has_column(c.name)}
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
    ex = Executor(catalog, analyze=True, check_cancel=check_cancel) if analyze else None
    total = written = None
    if ex is not None:
        t0 = time.perf_counter()
        result = ex.run_output(out)
        if write is not None:
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
        lines.append(f"Execution Time: {total[0] * 1000:.3f} ms ({total[1]} rows)")
    return StatementResult.rows("EXPLAIN", pa.table({"QUERY PLAN": pa.array(lines, pa.string())}))


def _write_plan(catalog, ast, sql, params):
    """(head line, the optimized plan of the rows a write statement writes, a function
    that writes a computed result of that plan -> StatementResult)."""
    if isinstance(ast, exp.Insert):
        upsert = isinstance(ast, KuduUpsert)
        target = insert_target(catalog, ast, sql)
        out = plan_query(catalog, _source(ast, target), sql, params)
        # the statement's shape errors before anything runs (PostgreSQL's EXPLAIN has them)
        out = dataclasses.replace(out, names=insert_columns(target, len(out.names), sql,
                                                            ast.expression))
        verb = "Upsert" if upsert else "Insert"
        return (f"{verb} on {target.name}", out,
                lambda rows: insert_rows(target, rows, upsert, sql, ast.expression))
    tnode, table = _target(catalog, ast, sql)
    if isinstance(ast, exp.Update):
        names, values = _assignments(ast, sql, tnode, table.schema)
        out = optimize(_matching_query(catalog, ast, sql, params, tnode, values), catalog)
        # shown as the key columns and the new values of the SET columns
        out = dataclasses.replace(out, names=table.schema.key_names + names)
        return (f"Update on {tnode.name} (SET {', '.join(names)})", out,
                lambda rows: _apply_update(table, tnode, names, rows))
    out = optimize(_matching_query(catalog, ast, sql, params, tnode, []), catalog)
    return f"Delete on {tnode.name}", out, lambda rows: _apply_delete(table, tnode, rows)


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
    from planner.ddl import _ident
    key: list[str] = []
    if isinstance(target, exp.Schema):
        for e in target.expressions:
            if isinstance(e, exp.PrimaryKey):
                key = [_ident(i) for i in e.expressions]
            else:
                raise FeatureNotSupported("CREATE TABLE AS SELECT takes its columns from the "
                                          "query; only PRIMARY KEY (...) may be listed",
                                          position=position(sql, e))
    props = ast.args.get("properties")
    other_props = []
    for p in (props.expressions if props is not None else []):
        if isinstance(p, KuduPrimaryKeyProperty):
            key = [_ident(i) for i in p.expressions]
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
                           row_errors=_row_failures(table.name, tbl.schema, r.row_errors))


# -- DML -------------------------------------------------------------------------------------
def _target(catalog, ast: exp.Expression, sql: str):
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
    if not catalog.has_table(t.name):
        raise SqlError(f'relation "{t.name}" does not exist', "42P01", position(sql, t))
    if ast.args.get("returning"):      # INSERT / UPDATE / DELETE ... RETURNING
        raise FeatureNotSupported("RETURNING is not supported",
                                  position=position(sql, ast.args["returning"]))
    return t, catalog.table(t.name)


def _row_failures(table_name: str, schema, errors, ordinals=None) -> list[RowFailure]:
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


def insert_target(catalog, ast: exp.Insert, sql: str) -> InsertTarget:
    tnode, table = _target(catalog, ast, sql)
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
    ignore_dups = False
    if conflict is not None:
        action = conflict.args.get("action")
        if action is None or "NOTHING" not in str(action.this if hasattr(action, "this")
                                                   else action).upper() or \
                conflict.args.get("expressions"):
            raise FeatureNotSupported("only ON CONFLICT DO NOTHING is supported (use UPSERT "
                                      "to replace rows)", position=position(sql, conflict))
        ignore_dups = True
    out = InsertTarget(tnode.name, table, cols, explicit, ignore_dups, target)
    if ast.expression is None:      # DEFAULT VALUES: a primary key column has no default
        insert_columns(out, 0, sql, ast)
    return out


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
                source: exp.Expression | None = None, in_order: bool = False
                ) -> StatementResult:
    """Write computed rows (columns in target order) with Kudu's per-row semantics; with
    `in_order`, as one-row statements run one after another up to the first that fails
    (engine `Table.write(..., in_order=True)`; not with ON CONFLICT DO NOTHING, whose
    skipped rows are no failures: the caller runs those one by one)."""
    if in_order and target.ignore_dups:
        raise SqlError("an in-order batch cannot skip conflicting rows", "0A000")
    cols = insert_columns(target, rows.num_columns, sql, source)
    schema = target.table.schema
    verb = "UPSERT" if upsert else "INSERT"
    if rows.num_rows == 0:
        return StatementResult(verb, rowcount=0)
    data = pa.Table.from_arrays([_sql_round(a, schema.column(c).arrow_type)
                                 for a, c in zip(rows.columns, cols)], names=cols)
    r = target.table.upsert(data, in_order) if upsert else target.table.insert(data, in_order)
    errs = [e for e in r.row_errors if not (target.ignore_dups and e.code == "ALREADY_PRESENT")]
    return StatementResult(verb, rowcount=r.num_applied,
                           row_errors=_row_failures(target.name, schema, errs))


def _sql_round(col, target: pa.DataType):
    """SQL assignment rounds as PostgreSQL's assignment casts do: to DECIMAL(p, s), to s
    digits (also from text: '3.145' into NUMERIC(6,2) is 3.15); NUMERIC / float into an
    integer column to the nearest integer (numeric halves away from zero, float halves to
    even: 3.7 is 4). The engine itself refuses values that do not fit (Kudu). A column that
    cannot be cast as a whole is left to the engine, which reports each bad row."""
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


def _source(ast: exp.Insert, target: InsertTarget) -> exp.Expression:
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
    rows = run_query(catalog, _source(ast, target), sql, params, check_cancel)
    return insert_rows(target, rows, upsert, sql, ast.expression)


def bulk_parameters(ast: exp.Expression) -> int | None:
    """n if `ast` is `INSERT ... VALUES ($1, ..., $n)` (one row of plain parameters in
    order): executemany can then send every parameter set as one Arrow batch."""
    if not isinstance(ast, exp.Insert) or not isinstance(ast.expression, exp.Values):
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


def update_data(table, rows: pa.Table, names: list[str]) -> pa.Table:
    """The rows an UPDATE writes: the matching query's key columns and SET values (in
    `names` order), SQL-rounded to their columns' types (one place for `update` and the
    wire's key-write fast path)."""
    schema = table.schema
    cols = schema.key_names + names
    return pa.Table.from_arrays([_sql_round(a, schema.column(c).arrow_type)
                                 for a, c in zip(rows.columns, cols)], names=cols)


def _matching(catalog, ast, sql, params, tnode, extra: list[exp.Expression], check_cancel,
              cache=None):
    """Rows of the target matching the WHERE clause: key columns then `extra` values.

    With a plan cache and parameters, the row-matching query is cached under the statement's
    text (marked apart from a SELECT of the same text), and a match by the full primary key
    runs as a point read (planner.fastpath): `UPDATE t SET v = v + 1 WHERE k = $1` executed
    again skips parsing the query, binding and the rules."""
    key = MATCHING_KEY + sql
    if cache is not None and params:
        t = cache.point_result(catalog, key, params)
        if t is not None:
            return t
        out = cache.lookup(catalog, key, params)
        if out is not None:
            return Executor(catalog, check_cancel=check_cancel).run_output(
                optimize(out, catalog))
    out = _matching_query(catalog, ast, sql, params, tnode, extra)
    if cache is not None and params:
        cache.store(catalog, key, params, out)
    return Executor(catalog, check_cancel=check_cancel).run_output(optimize(out, catalog))


def _matching_query(catalog, ast, sql, params, tnode, extra: list[exp.Expression]) -> L.Output:
    """The bound (not optimized) row-matching query of an UPDATE / DELETE (`_matching`)."""
    table = catalog.table(tnode.name)
    keys = table.schema.key_names
    alias = tnode.alias_or_name
    sel = exp.select(*[exp.column(k, table=alias) for k in keys],
                     *[e.as_(f"__set{i}") for i, e in enumerate(extra)])
    sel = sel.from_(tnode.copy())
    if ast.args.get("with_") is not None:      # WITH ... UPDATE / DELETE: the CTEs the
        sel.set("with_", ast.args["with_"].copy())   # WHERE clause's subqueries may read
    where = ast.args.get("where")
    if where is not None:
        sel = sel.where(where.this.copy())
    if ast.args.get("from") or ast.args.get("from_") or ast.args.get("using"):
        raise FeatureNotSupported("UPDATE ... FROM / DELETE ... USING is not supported",
                                  position=position(sql, ast))
    # keep positions: the copied nodes keep their meta
    return Binder(catalog, sql, params, subquery_runner(catalog)).bind_query(sel)


def update(catalog, ast: exp.Update, sql, params, check_cancel, cache=None
           ) -> StatementResult:
    tnode, table = _target(catalog, ast, sql)
    names, values = _assignments(ast, sql, tnode, table.schema)
    rows = _matching(catalog, ast, sql, params, tnode, values, check_cancel, cache)
    return _apply_update(table, tnode, names, rows)


def _assignments(ast: exp.Update, sql, tnode, schema) -> tuple[list[str], list]:
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
    return names, values


def _apply_update(table, tnode, names: list[str], rows: pa.Table) -> StatementResult:
    """Write the matching rows (key columns, then the SET values) as updates."""
    if rows.num_rows == 0:
        return StatementResult("UPDATE", rowcount=0)
    data = update_data(table, rows, names)
    r = table.update(data)
    errs = [e for e in r.row_errors if e.code != "NOT_FOUND"]
    return StatementResult("UPDATE", rowcount=r.num_applied,
                           row_errors=_row_failures(tnode.name, table.schema, errs))


def delete(catalog, ast: exp.Delete, sql, params, check_cancel, cache=None
           ) -> StatementResult:
    tnode, table = _target(catalog, ast, sql)
    rows = _matching(catalog, ast, sql, params, tnode, [], check_cancel, cache)
    return _apply_delete(table, tnode, rows)


def _apply_delete(table, tnode, rows: pa.Table) -> StatementResult:
    """Delete the matching rows (their key columns)."""
    if rows.num_rows == 0:
        return StatementResult("DELETE", rowcount=0)
    data = pa.Table.from_arrays(rows.columns, names=table.schema.key_names)
    r = table.delete(data)
    errs = [e for e in r.row_errors if e.code != "NOT_FOUND"]
    return StatementResult("DELETE", rowcount=r.num_applied,
                           row_errors=_row_failures(tnode.name, table.schema, errs))


__all__ = ["execute", "explain", "describe", "plan_query", "run_query", "render"]
