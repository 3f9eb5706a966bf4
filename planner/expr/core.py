"""The evaluator's core: the dispatch registry and the public entry points.

    evaluate(node, batch) -> eval_node(node, ctx) -> HANDLERS[type(node)](node, ctx) -> Value

`@handles(*node_types)` registers a handler; the other modules of planner.expr add theirs
when imported. `eval_where` evaluates on a subset of rows after a data exception (CASE,
AND / OR). Leaves (columns, literals, NULL, booleans, Const) and the functions sqlglot leaves
as `exp.Anonymous` (`ANONYMOUS`, extended by strings, temporal and arrays) live here.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.errors import FeatureNotSupported, SqlError
from planner.expr.arrow_values import broadcast, combine, Value
from planner.expr.located import error_at, function_name, node_position, user_sql
from planner.expr.decimal_types import decimal_digits, MAX_PRECISION
from planner.expr.sqltypes import kind_of, pg_name


# -- public API ------------------------------------------------------------------------------


def column_key(col: exp.Column) -> str:
    """The batch field name a column reference reads: `table.name`, or `name` unqualified."""
    return f"{col.table}.{col.name}" if col.table else col.name


class Const(exp.Expression):
    """A folded constant: `this` is a typed `pa.Scalar` (possibly null).

    `evaluate` broadcasts it; `.sql()` renders it as a SQL literal (`DATE '1998-09-02'`,
    `0.06`, `CAST(NULL AS INTEGER)`).
    """

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


def evaluate(node: exp.Expression, batch: pa.Table | pa.RecordBatch) -> pa.Array | pa.ChunkedArray:
    """Evaluate `node` over `batch`: exactly `batch.num_rows` Arrow values (constants broadcast).

    Raises SqlError with PostgreSQL's SQLSTATE for unknown columns (42703), functions or
    operators (42883), type mismatches (42804) and data errors (22xxx).
    """
    ctx = EvalContext(batch)
    return broadcast(eval_node(node, ctx), ctx.num_rows)


def evaluate_filter(node: exp.Expression,
                    batch: pa.Table | pa.RecordBatch) -> pa.Array | pa.ChunkedArray:
    """WHERE semantics: a boolean per row, NULL counted as false. Non-boolean is 42804."""
    ctx = EvalContext(batch)
    v = eval_node(node, ctx)
    if kind_of(v.type) == "null":
        return pa.repeat(pa.scalar(False), ctx.num_rows)
    if kind_of(v.type) != "bool":
        raise SqlError(f"argument of WHERE must be type boolean, not type {pg_name(v.type)}",
                       "42804", node_position(node))
    if isinstance(v, pa.Scalar):
        return pa.repeat(pa.scalar(bool(v.as_py())), ctx.num_rows)
    return pc.fill_null(v, False)


# -- evaluation context and dispatch ---------------------------------------------------------


class EvalContext:
    """The batch being evaluated and its name -> column index map."""

    __slots__ = ("batch", "index", "num_rows")

    def __init__(self, batch: pa.Table | pa.RecordBatch):
        self.batch = batch
        self.num_rows = batch.num_rows
        self.index: dict[str, int] = {}
        for i, name in enumerate(batch.schema.names):
            self.index.setdefault(name, i)

    def column(self, i: int) -> pa.Array | pa.ChunkedArray:
        return self.batch.column(i)

    def filtered(self, mask: Value) -> EvalContext:
        """The rows where `mask` is true (a scalar mask keeps all rows or none)."""
        if isinstance(mask, pa.Scalar):
            return self if mask.as_py() else EvalContext(self.batch.slice(0, 0))
        if isinstance(self.batch, pa.RecordBatch) and isinstance(mask, pa.ChunkedArray):
            mask = mask.combine_chunks()
        return EvalContext(self.batch.filter(mask))


Handler = Callable[[Any, EvalContext], Value]
HANDLERS: dict[type, Handler] = {}


def handles(*types: type) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for t in types:
            HANDLERS[t] = fn
        return fn
    return register


def eval_node(node: exp.Expr, ctx: EvalContext) -> Value:
    handler = HANDLERS.get(type(node))
    if handler is None:
        _unsupported(node, ctx)
    try:
        return handler(node, ctx)
    except pa.ArrowException as e:
        raise _from_arrow(e, node) from None
    except OverflowError:
        raise SqlError("value out of range", "22003", node_position(node)) from None


def eval_where(node: exp.Expr, ctx: EvalContext, mask: Value | None) -> Value:
    """`node` over the rows where `mask` holds; other rows are unspecified (null or a value).

    Tries all rows first (one kernel call); only a data exception triggers the re-evaluation
    on the masked rows, scattered back into a full-length column. When no row reaches
    `node` its error is never raised (a branch not taken, even a constant one such as the
    1/0 of `CASE WHEN x > 0 THEN x ELSE 1/0 END` over rows that are all positive): the value
    is then a NULL of the type `node` has over no rows (its type never depends on the
    data: a stream's batches all have one schema), untyped only when `node` fails even
    over no rows (a constant error), which the CASE / COALESCE around it never picks.
    """
    try:
        return eval_node(node, ctx)
    except SqlError as e:
        if mask is None or not e.sqlstate.startswith("22"):
            raise
        sub = ctx.filtered(mask)
        if sub.num_rows == ctx.num_rows and ctx.num_rows:
            raise
        if not sub.num_rows and not _any_true(mask):
            try:
                return pa.scalar(None, eval_node(node, sub).type)   # its type, over no rows
            except SqlError:
                return pa.scalar(None)
        v = eval_node(node, sub)
        if isinstance(v, pa.Scalar):
            return v
        return _scatter(mask, v, ctx.num_rows)


def _any_true(mask: Value) -> bool:
    if isinstance(mask, pa.Scalar):
        return bool(mask.as_py())
    return bool(pc.any(pc.fill_null(mask, False)).as_py())


def _scatter(mask: Value, values: pa.Array | pa.ChunkedArray, n: int) -> pa.Array:
    mask = combine(broadcast(pc.fill_null(mask, False), n))
    return pc.replace_with_mask(pa.nulls(n, values.type), mask, combine(values))


def _unsupported(node: exp.Expr, ctx: EvalContext) -> None:
    pos = node_position(node)
    if isinstance(node, exp.AggFunc):
        raise SqlError(f"aggregate function {function_name(node)}() is not allowed here",
                       "42803", pos)
    if isinstance(node, (exp.Query, exp.Subquery)):
        raise FeatureNotSupported("subquery not expected in a scalar expression", position=pos)
    if isinstance(node, (exp.Parameter, exp.Placeholder)):
        raise SqlError(f"there is no parameter {node.sql()}", "42P02", pos)
    if isinstance(node, tuple(_JSON_OPERATORS)):
        # no json types: `x::jsonb ->> 'a'` fails on the type, `text ->> 'a'` on the operator
        left = pg_name(eval_node(node.this, ctx).type)
        raise SqlError(f"operator does not exist: {left} {_JSON_OPERATORS[type(node)]} unknown",
                       "42883", pos)
    if isinstance(node, exp.Func):
        no_function(function_name(node), list(node.iter_expressions()), ctx, pos)
    raise FeatureNotSupported(f"unsupported expression: {user_sql(node)}", position=pos)


_JSON_OPERATORS = {exp.JSONExtract: "->", exp.JSONExtractScalar: "->>",
                   exp.JSONBExtract: "#>", exp.JSONBExtractScalar: "#>>",
                   exp.JSONBContains: "?"}


def no_function(name: str, args: list[exp.Expr] | None, ctx: EvalContext, pos: int | None) -> None:
    types = []
    for a in args or []:
        try:
            types.append(pg_name(eval_node(a, ctx).type))
        except SqlError:
            types.append("unknown")
    raise SqlError(f"function {name.lower()}({', '.join(types)}) does not exist", "42883", pos)


def _from_arrow(e: pa.ArrowException, node: exp.Expr) -> SqlError:
    msg = str(e)
    low = msg.lower()
    if "divide by zero" in low:
        return error_at("division by zero", "22012", node)
    if "square root of negative" in low:
        return error_at("cannot take square root of a negative number", "2201F", node)
    if "logarithm of zero" in low:
        return error_at("cannot take logarithm of zero", "2201E", node)
    if "logarithm of negative" in low:
        return error_at("cannot take logarithm of a negative number", "2201E", node)
    if any(w in low for w in ("overflow", "out of bounds", "does not fit", "out of range")):
        return error_at("value out of range", "22003", node)
    if isinstance(e, (pa.ArrowNotImplementedError, pa.ArrowTypeError)):
        return error_at(f"operator does not exist: {user_sql(node)}", "42883", node)
    return error_at(msg, "22000", node)


# -- leaves ----------------------------------------------------------------------------------


@handles(exp.Column)
def _column(node: exp.Column, ctx: EvalContext) -> Value:
    key = column_key(node)
    i = ctx.index.get(key)
    if i is None:
        if isinstance(node.this, exp.Star):
            raise FeatureNotSupported("* is not a scalar expression", position=node_position(node))
        name = f"{node.table}.{node.name}" if node.table else f'"{node.name}"'
        raise error_at(f"column {name} does not exist", "42703", node)
    return ctx.column(i)


_LITERALS: dict[tuple[str, bool], pa.Scalar] = {}    # literal text -> its typed scalar


@handles(exp.Literal)
def _literal(node: exp.Literal, ctx: EvalContext) -> Value:
    # Filters are evaluated once per scan batch: a literal's scalar (a regex, a Decimal,
    # an Arrow scalar: ~0.2 ms) is made once per text, not per batch and row group.
    key = (node.this, node.is_string)
    v = _LITERALS.get(key)
    if v is None:
        v = _literal_scalar(node)
        if len(_LITERALS) < 4096:
            _LITERALS[key] = v
    return v


def _literal_scalar(node: exp.Literal) -> pa.Scalar:
    text = node.this
    if node.is_string:
        return pa.scalar(text, pa.string())
    if re.fullmatch(r"[+-]?\d+", text):
        n = int(text)          # integer (int4), else bigint, else numeric: PostgreSQL's
        if -(2**31) <= n < 2**31:
            return pa.scalar(n, pa.int32())
        if -(2**63) <= n < 2**63:
            return pa.scalar(n, pa.int64())
        if decimal_digits(n) > MAX_PRECISION:
            raise error_at("value out of range", "22003", node)
        return pa.scalar(decimal.Decimal(n), pa.decimal128(decimal_digits(n), 0))
    if re.search(r"[eE]", text):
        return pa.scalar(float(text), pa.float64())
    d = decimal.Decimal(text)
    _, digits, exponent = d.as_tuple()
    scale = max(-exponent, 0)
    precision = max(len(digits), scale, 1)
    if precision > MAX_PRECISION:
        raise error_at("value out of range", "22003", node)
    return pa.scalar(d, pa.decimal128(precision, scale))


@handles(exp.Null)
def _null(node: exp.Null, ctx: EvalContext) -> Value:
    return pa.scalar(None)


@handles(exp.Boolean)
def _boolean(node: exp.Boolean, ctx: EvalContext) -> Value:
    return pa.scalar(bool(node.this))


@handles(Const)
def _const(node: Const, ctx: EvalContext) -> Value:
    return node.this


@handles(exp.Paren, exp.Alias)
def _child(node: exp.Expr, ctx: EvalContext) -> Value:
    return eval_node(node.this, ctx)


# Functions sqlglot leaves as exp.Anonymous, by lower-case name; each concept's module adds its
# own (strings: octet_length; temporal: transaction_timestamp, ...; arrays: json_build_object).
ANONYMOUS: dict[str, Callable[[exp.Anonymous, EvalContext], Value]] = {}
NON_DETERMINISTIC = {"clock_timestamp"}


@handles(exp.Anonymous)
def _anonymous(node: exp.Anonymous, ctx: EvalContext) -> Value:
    fn = ANONYMOUS.get(node.name.lower())
    if fn is None:
        no_function(node.name, node.expressions, ctx, node_position(node))
    return fn(node, ctx)
