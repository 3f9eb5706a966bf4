"""Queries: bind (planner.binder) -> optimize (planner.rules) -> execute (planner.executor).

    plan_query(catalog, ast, sql, params) -> L.Output   the optimized plan
    run_select(catalog, out, stream) -> StatementResult  its rows, whole or streamed
    run_query(catalog, ast, sql, params) -> pa.Table     both, for the statements that read
                                                         rows to write them (DML, CTAS)

`subquery_runner` is what the binder runs uncorrelated subqueries with. `now()` /
`current_timestamp` are timestamp with time zone everywhere (planner/expr/temporal.py);
`Output.utc` still marks the result columns that are `now()` itself, which keeps such a
plan out of the point-read path (planner/point_read.py), and `with_utc` gives a marked
column that is a plain timestamp the zone (no longer the case for now(): a no-op kept
with the mark).
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
from sqlglot import exp

from planner import logical as L
from planner.binder import Binder
from planner.dialect import KuduNow
from planner.executor import Executor
from planner.result import StatementResult
from planner.rules import optimize

QUERY_TYPES = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values)


def plan_query(catalog, ast: exp.Expression, sql: str, params=None, cache=None
               ) -> L.Output:
    out = Binder(catalog, sql, params, subquery_runner(catalog)).bind_query(ast)
    out = dataclasses.replace(out, utc=_now_columns(ast))
    if cache is not None and params:
        cache.store(catalog, sql, params, out)
    return _optimize(out, catalog)


def subquery_runner(catalog, snapshot: int | None = None):
    """The binder's SubqueryRunner (planner.binder.common): optimize a bound plan (unless
    `rules=False`) and execute it with a fresh Executor over `catalog` (reading at
    `snapshot`, when given: a RETURNING list's subqueries read the tables as they were
    before the statement wrote)."""
    def run(plan: L.Output, *, rules: bool = True, schema_only: bool = False) -> pa.Table:
        if rules:
            plan = optimize(plan, catalog)
        return Executor(catalog, schema_only=schema_only, snapshot=snapshot).run_output(plan)
    return run


def _optimize(out: L.Output, catalog) -> L.Output:
    o = optimize(out, catalog)
    return o if o.utc == out.utc else dataclasses.replace(o, utc=out.utc)


def _now_columns(ast: exp.Expression) -> tuple[int, ...]:
    """Result positions that are `now()` / `current_timestamp` themselves (`Output.utc`,
    see the module docstring)."""
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
