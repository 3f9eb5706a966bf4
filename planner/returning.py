"""INSERT / UPDATE / DELETE ... RETURNING: the rows a write applied, through its RETURNING list.

    ret = plan_returning(catalog, ast, sql, params, tnode, table)   # None without RETURNING
    ret.schema()                 # the result's columns, for Describe (no data read)
    ret.run(rows)                # rows: the applied rows, the table's columns by name

As in PostgreSQL, RETURNING's expressions are evaluated over each row the statement
applied: an INSERT's row as stored (omitted columns at their defaults, values rounded to
their columns' types), an UPDATE's row after the update, a DELETE's row as it was; rows
that failed (Kudu's per-row errors) or were skipped (ON CONFLICT DO NOTHING, a row deleted
meanwhile) return nothing. The list is bound as the query `SELECT <list> FROM <target>`
(so `*`, `t.*`, the table's alias, functions, casts, CASE and subqueries resolve as in a
SELECT, and the columns are named as a SELECT names them), and the target's Scan is
replaced by the rows handed in (an `L.WorkTable` the executor reads from its
`work_tables`). Aggregates, window functions and set-returning functions are refused with
PostgreSQL's errors. UPSERT ... RETURNING is refused (0A000): an upserted row's omitted
columns keep the existing row's values, which the write does not read back.

The planner/dml.py writers hand the applied rows in: `applied_rows` keeps a write's rows
that no per-row error names.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
from sqlglot import exp

from planner import logical as L
from planner.binder import Binder, position
from planner.binder.pg_functions import is_srf
from planner.errors import FeatureNotSupported, SqlError
from planner.executor import Executor
from planner.rules import optimize

# the work table id the RETURNING plan reads its rows from (no recursive query shares the
# plan: a RETURNING list's subqueries run with their own executors)
_ROWS = -1


@dataclasses.dataclass
class Returning:
    """A bound RETURNING list (see the module docstring)."""
    out: L.Output            # the plan, its target Scan replaced by a WorkTable
    columns: list[str]       # the target table's columns the plan reads, in WorkTable order
    empty: pa.Table          # no rows of those columns (what Describe runs the plan over)
    catalog: object
    check_cancel: object = None
    # what the list's subqueries read: the statement's snapshot, taken before it wrote
    # (PostgreSQL's: `RETURNING (SELECT count(*) FROM t)` counts the rows as they were)
    snapshot: int | None = None

    def run(self, rows: pa.Table) -> pa.Table:
        """The RETURNING rows of `rows` (the applied rows, the table's columns by name)."""
        ex = Executor(self.catalog, check_cancel=self.check_cancel, snapshot=self.snapshot)
        ex.work_tables[_ROWS] = rows.select(self.columns)
        return ex.run_output(self.out)

    def schema(self) -> pa.Schema:
        """The result's schema, without running anything (Describe)."""
        ex = Executor(self.catalog, schema_only=True)
        ex.work_tables[_ROWS] = self.empty
        return ex.run_output(self.out).schema


def plan_returning(catalog, ast: exp.Expression, sql: str, params, tnode: exp.Table, table,
                   check_cancel=None, snapshot: int | None = None) -> Returning | None:
    """The statement's RETURNING list bound over its target (`tnode`, the write's table
    node, whose alias the list may use), or None when it has none. `snapshot`: a
    timestamp taken before the statement writes (its subqueries read the tables then)."""
    ret = ast.args.get("returning")
    if ret is None:
        return None
    items = [e.copy() for e in ret.expressions]
    check_items(items, sql)
    from planner.commands import KuduUpsert
    if isinstance(ast, KuduUpsert):
        raise FeatureNotSupported("UPSERT ... RETURNING is not supported (use INSERT ... "
                                  "RETURNING, or UPSERT and then SELECT the rows)",
                                  position=position(sql, ret))
    sel = exp.select(*items).from_(tnode.copy())
    if ast.args.get("with_") is not None:      # WITH ... UPDATE ... RETURNING: its CTEs
        sel.set("with_", ast.args["with_"].copy())
    from planner.query import subquery_runner
    out = Binder(catalog, sql, params, subquery_runner(catalog, snapshot)).bind_query(sel)
    out = optimize(out, catalog)
    scan = find_scan(out.plan, lambda s: s.table == tnode.name)
    # a list that reads no column (`RETURNING 1`) still returns a row per applied row: the
    # rows come with one column, or a table of none would have none
    columns = list(scan.columns) or table.schema.key_names[:1]
    rows = L.WorkTable(_ROWS, [scan.key(c) for c in columns])
    plan = replace_node(out.plan, scan, rows)
    empty = empty_rows(table.schema).select(columns)
    return Returning(dataclasses.replace(out, plan=plan), columns, empty, catalog,
                     check_cancel, snapshot)


def check_items(items: list[exp.Expression], sql: str, where: str = "RETURNING") -> None:
    """PostgreSQL's refusals of RETURNING items or UPDATE's SET values (`where`: the
    clause's name in the message), outside subqueries, which are queries of their own:
    aggregates 42803, window functions 42P20, set-returning functions 0A000."""
    for item in items:
        for e in item.walk(bfs=False):
            if isinstance(e, exp.Subquery) or isinstance(e, exp.Select):
                continue
            if e.find_ancestor(exp.Subquery, exp.Select) is not None:
                continue
            if isinstance(e, exp.Window):
                raise SqlError(f"window functions are not allowed in {where}", "42P20",
                               position(sql, e))
            if isinstance(e, exp.AggFunc) and e.find_ancestor(exp.Window) is None:
                raise SqlError(f"aggregate functions are not allowed in {where}", "42803",
                               position(sql, e))
            if is_srf(e):
                raise SqlError(f"set-returning functions are not allowed in {where}",
                               "0A000", position(sql, e))


def find_scan(node: L.Node, matches) -> L.Scan | None:
    """The first Scan reached from `node` (depth first) for which `matches(scan)` holds:
    the FROM item a statement built over its target names (subqueries being plans of
    their own)."""
    if isinstance(node, L.Scan) and matches(node):
        return node
    for child in node.children():
        found = find_scan(child, matches)
        if found is not None:
            return found
    return None


def replace_node(node: L.Node, old: L.Node, new: L.Node) -> L.Node:
    """`node` with `old` (by identity) replaced by `new`."""
    if node is old:
        return new
    changes = {}
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        if isinstance(v, L.Node):
            r = replace_node(v, old, new)
            if r is not v:
                changes[f.name] = r
        elif isinstance(v, list) and any(isinstance(c, L.Node) for c in v):
            r = [replace_node(c, old, new) if isinstance(c, L.Node) else c for c in v]
            if any(a is not b for a, b in zip(r, v)):
                changes[f.name] = r
    return dataclasses.replace(node, **changes) if changes else node


def applied_rows(rows: pa.Table, errors) -> pa.Table:
    """`rows` without those a write's per-row errors name (`e.index`, 0-based)."""
    if not errors:
        return rows
    keep = [True] * rows.num_rows
    for e in errors:            # a loop over the failed rows only
        keep[e.index] = False
    return rows.filter(pa.array(keep, pa.bool_()))


def with_defaults(schema, data: pa.Table) -> pa.Table:
    """An INSERT's rows (`data`: some of the table's columns) as the table's whole rows:
    the omitted columns at their defaults (NULL without one), in the table's column order."""
    from engine.convert import cast_column, default_array
    from engine.types import to_logical
    n = data.num_rows
    cols = []
    for c in schema.columns:       # a loop per column
        if c.name in data.column_names:
            # as every write path converts a value (VARCHAR(n) truncated, ...); a value it
            # cannot convert failed its row, which `applied_rows` drops
            cols.append(cast_column(data.column(c.name).combine_chunks(), c, {}))
        else:
            cols.append(to_logical(default_array(c, n), c.type, c.precision, c.scale))
    return pa.Table.from_arrays(cols, names=[c.name for c in schema.columns])


def as_stored(schema, rows: pa.Table) -> pa.Table:
    """`rows` (columns of the table, by name) as the table stores them: each value
    converted as every write path converts it (a REAL rounded to float4, a VARCHAR(n)
    cut, text read as a timestamp, NULL typed), so that what RETURNING shows is what was
    written (an UPDATE's SET values are computed in the expression's own type)."""
    from engine.convert import cast_column
    cols = []
    for name in rows.column_names:      # a loop per column
        c = schema.column(name)
        a = rows.column(name).combine_chunks()
        cols.append(a if a.type == c.arrow_type and c.length is None
                    else cast_column(a, c, {}))
    return pa.Table.from_arrays(cols, names=rows.column_names)


def empty_rows(schema) -> pa.Table:
    """No rows, with the table's columns (a write that applied none)."""
    return pa.schema([(c.name, c.arrow_type) for c in schema.columns]).empty_table()
