"""Functions a host provides and subqueries run per statement.

`HostFunction` / `HostCall`: a function the embedding layer supplies (the wire layer's catalog
functions). `SubPlan` / `InSubPlan`: the binder's fallback for subqueries it cannot turn into
joins; the plan is run through the executor handed over at bind time, once per distinct
outer value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.expr.arrow_values import broadcast, combine, Value
from planner.expr.located import error_at
from planner.expr.sqltypes import array_storage, ArrayType, kind_of, null_of, wrap_array
from planner.expr.core import EvalContext, eval_node, handles
from planner.expr.coerce import check_comparable, coerce_pair
from planner.expr.arrays import as_array_value


# -- host functions and subplans -------------------------------------------------------------


class HostFunction:
    """A SQL function implemented by the host of the planner, e.g. the wire layer's catalog
    (format_type, pg_get_indexdef, ::regclass): `fn(args, num_rows)` takes the argument
    Values (scalars or arrays) and returns one Value. Shared, never copied, by the plan
    nodes that call it. `volatile` functions are not folded at planning time."""

    def __init__(self, name: str, fn: Callable[[list[Value], int], Value], *,
                 volatile: bool = False):
        self.name = name
        self.fn = fn
        self.volatile = volatile

    def __deepcopy__(self, memo: dict) -> HostFunction:
        return self

    def __repr__(self) -> str:
        return f"HostFunction({self.name})"


class HostCall(exp.Expression, exp.Func):
    """A call of a HostFunction: `this` is its name, `fn` the function."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": False, "fn": True}


@handles(HostCall)
def _host_call(node: HostCall, ctx: EvalContext) -> Value:
    values = [eval_node(a, ctx) for a in node.expressions]
    return node.args["fn"].fn(values, ctx.num_rows)


class SubPlan(exp.Expression):
    """A subquery run once per distinct combination of the outer values it reads (what
    PostgreSQL calls a SubPlan): the fallback for correlated subqueries the binder cannot
    turn into joins, and ARRAY(subquery).

    `expressions` are the outer values; `plan` has `run(values: list[pa.Scalar],
    schema_only: bool) -> pa.Table` (one column) which binds and runs the subquery with those
    values as constants; `kind` says what the rows become:
        scalar     the one value (NULL without rows; 21000 with more than one)
        exists     whether there is a row
        array      the column as an array ('{}' without rows)
    """

    arg_types: ClassVar[dict[str, bool]] = {"plan": True, "expressions": False, "kind": True}


@handles(SubPlan)
def _subplan(node: SubPlan, ctx: EvalContext) -> Value:
    plan, kind = node.args["plan"], node.args["kind"]
    values = [eval_node(e, ctx) for e in node.expressions]
    if all(isinstance(v, pa.Scalar) for v in values):
        v = _subplan_value(plan, kind, values, node)[0]
        return as_array_value(v) if kind_of(v.type) == "list" else v
    n = ctx.num_rows
    cols = [combine(broadcast(v, n)) for v in values]
    if n == 0:
        t = _subplan_value(plan, kind, [null_of(c.type) for c in cols], node, True)[1]
        return pa.nulls(0, ArrayType(t.value_type) if kind_of(t) == "list" else t)
    # One run per distinct outer tuple; the row -> tuple mapping is a Python loop over the
    # rows (each run binds and executes a plan, which dominates).
    groups: dict[tuple, int] = {}
    inverse = np.empty(n, dtype=np.int64)
    for r, key in enumerate(zip(*[c.to_pylist() for c in cols])):
        inverse[r] = groups.setdefault(key, len(groups))
    firsts = np.unique(inverse, return_index=True)[1]
    results, t = [], None
    for first in firsts:
        v, t = _subplan_value(plan, kind, [c[int(first)] for c in cols], node)
        results.append(v)
    if isinstance(t, ArrayType):
        arr = wrap_array(pa.array([array_storage(r).as_py() for r in results], pa.string()), t)
    else:
        arr = pa.array([r.as_py() for r in results], t)
    arr = arr.take(pa.array(inverse))
    return as_array_value(arr) if kind_of(t) == "list" else arr


class InSubPlan(exp.Expression):
    """`x IN (subquery)` where it cannot be a semi join (outside a WHERE conjunct: in an OR,
    a CASE, the SELECT list): `this` is x, `expression` a SubPlan of kind "set" whose rows
    are the set. The subquery runs once per distinct tuple of the outer values it reads
    (once when uncorrelated), and x is tested against its column with PostgreSQL's NULL
    logic, vectorised over the rows: TRUE on a match, else NULL if x is NULL (and the set
    is not empty) or the set holds a NULL, else FALSE."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True}


@handles(InSubPlan)
def _in_subplan(node: InSubPlan, ctx: EvalContext) -> Value:
    sub: SubPlan = node.expression
    plan = sub.args["plan"]
    x = eval_node(node.this, ctx)
    values = [eval_node(e, ctx) for e in sub.expressions]
    if all(isinstance(v, pa.Scalar) for v in values):
        return _in_set(x, node.this, _subplan_set(plan, values, node), node)
    n = ctx.num_rows
    cols = [combine(broadcast(v, n)) for v in values]
    xs = combine(broadcast(x, n))
    # One run per distinct outer tuple (a Python loop over the rows to group them, as in
    # _subplan: each run binds and executes a plan, which dominates).
    groups: dict[tuple, list[int]] = {}
    for r, key in enumerate(zip(*[c.to_pylist() for c in cols])):
        groups.setdefault(key, []).append(r)
    parts, order = [], []
    for rows in groups.values():
        idx = pa.array(rows, pa.int64())
        first = rows[0]
        part = _in_set(xs.take(idx), node.this,
                       _subplan_set(plan, [c[first] for c in cols], node), node)
        parts.append(combine(broadcast(part, len(rows))).cast(pa.bool_()))
        order.append(idx)
    if not parts:
        return pa.nulls(0, pa.bool_())
    result = pa.concat_arrays(parts)
    inverse = pc.sort_indices(pa.concat_arrays(order))
    return result.take(inverse)


def _subplan_set(plan: Any, values: list[pa.Scalar], node: exp.Expr) -> pa.Array:
    t = plan.run(values, False)
    if t.num_columns != 1:
        raise error_at("subquery has too many columns", "42601", node)
    return combine(t.column(0))


def _in_set(x: Value, x_node: exp.Expr, col: pa.Array, node: exp.Expr) -> Value:
    """x IN (the values of `col`) with SQL's NULL logic."""
    if len(col) == 0:
        return pa.scalar(False) if isinstance(x, pa.Scalar) else pa.array(
            np.zeros(len(x), dtype=bool))
    has_null = col.null_count > 0
    present = pc.drop_null(col)
    if kind_of(present.type) == "null":
        present = present.cast(x.type) if kind_of(x.type) != "null" else present
    a, b = coerce_pair(x, x_node, present, exp.Column(), "=", node)
    check_comparable(a, "=", b, node)
    if kind_of(a.type) == "null":
        return null_of(pa.bool_())
    b = combine(b)
    if kind_of(a.type) == "float":  # -0.0 = 0.0, which the hash lookup does not know
        a, b = pc.add(a, pa.scalar(0.0, a.type)), pc.add(b, pa.scalar(0.0, b.type))
    found = pc.is_in(a, value_set=b, skip_nulls=True)
    unknown = pc.is_null(a)
    if has_null:
        unknown = pc.or_(unknown, pa.scalar(True))
    return pc.if_else(found, True, pc.if_else(unknown, null_of(pa.bool_()), False))


def _subplan_value(plan: Any, kind: str, values: list[pa.Scalar], node: SubPlan,
                   schema_only: bool = False) -> tuple[pa.Scalar, pa.DataType]:
    t = plan.run(values, schema_only)
    if t.num_columns != 1 and kind != "exists":
        raise error_at("subquery must return only one column", "42601", node)
    col = t.column(0) if t.num_columns else pa.chunked_array([], pa.null())
    if kind == "exists":
        return pa.scalar(t.num_rows > 0), pa.bool_()
    if kind == "scalar":
        if t.num_rows > 1:
            raise error_at("more than one row returned by a subquery used as an expression",
                       "21000", node)
        return (col[0] if t.num_rows else null_of(col.type)), col.type
    lt = pa.list_(col.type if kind_of(col.type) != "null" else pa.string())
    return pa.scalar(col.to_pylist(), lt), lt
