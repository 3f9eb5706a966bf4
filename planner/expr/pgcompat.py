"""PostgreSQL compatibility operators for client catalog queries: & | # on integers, records of
named fields and their field access, E'' strings, COLLATE (ignored: one byte-order
collation) and OPERATOR(schema.op), rewritten to the node the plain operator parses to;
`pg_typeof(x)`: the name of x's type, as text (PostgreSQL's is a regtype that prints so).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.errors import FeatureNotSupported
from planner.expr.arrow_values import broadcast, combine, Value
from planner.expr.located import error_at, node_position, user_sql
from planner.expr.sqltypes import kind_of, null_of, pg_name, supertype
from planner.expr.core import ANONYMOUS, EvalContext, eval_node, handles, no_function
from planner.expr.coerce import widen

_BITWISE = {exp.BitwiseAnd: pc.bit_wise_and, exp.BitwiseOr: pc.bit_wise_or,
            exp.BitwiseXor: pc.bit_wise_xor}


@handles(*_BITWISE)
def _bitwise(node: exp.Binary, ctx: EvalContext) -> Value:
    a, b = eval_node(node.this, ctx), eval_node(node.expression, ctx)
    if kind_of(a.type) not in ("int", "null") or kind_of(b.type) not in ("int", "null"):
        raise error_at(f"operator does not exist: {pg_name(a.type)} & {pg_name(b.type)}",
                   "42883", node)
    t = supertype([a.type, b.type])
    if kind_of(t) == "null":
        return null_of(pa.int32())
    return _BITWISE[type(node)](widen(a, t, node.this), widen(b, t, node.expression))


@handles(exp.Struct)
def _struct(node: exp.Struct, ctx: EvalContext) -> Value:
    """A record of named fields (`information_schema._pg_expandarray`'s (x, n))."""
    names, values = [], []
    for i, e in enumerate(node.expressions):
        if isinstance(e, (exp.PropertyEQ, exp.Alias)):
            names.append(e.this.name if isinstance(e, exp.PropertyEQ) else e.alias)
            e = e.expression if isinstance(e, exp.PropertyEQ) else e.this
        else:
            names.append(f"f{i + 1}")
        values.append(eval_node(e, ctx))
    if all(isinstance(v, pa.Scalar) for v in values):
        return pa.scalar({n: v.as_py() for n, v in zip(names, values)},
                         pa.struct([pa.field(n, v.type) for n, v in zip(names, values)]))
    n = ctx.num_rows
    return pc.make_struct(*[combine(broadcast(v, n)) for v in values], field_names=names)


@handles(exp.Dot)
def _field(node: exp.Dot, ctx: EvalContext) -> Value:
    """(record).field"""
    v = eval_node(node.this, ctx)
    if not pa.types.is_struct(v.type):
        raise FeatureNotSupported(f"unsupported expression: {user_sql(node)}",
                                  position=node_position(node))
    name = node.name
    names = [v.type.field(i).name for i in range(v.type.num_fields)]
    match = [n for n in names if n.lower() == name.lower()]
    if not match:
        raise error_at(f'column "{name}" not found in data type record', "42703", node)
    if isinstance(v, pa.Scalar):
        return v[match[0]] if v.is_valid else null_of(v.type.field(match[0]).type)
    return pc.struct_field(v, match[0])


@handles(exp.ByteString)
def _escape_string(node: exp.ByteString, ctx: EvalContext) -> Value:
    """E'...': the tokenizer has already resolved the backslash escapes."""
    return pa.scalar(node.this, pa.string())


@handles(exp.Collate)
def _collate(node: exp.Collate, ctx: EvalContext) -> Value:
    return eval_node(node.this, ctx)       # one collation: byte order (C)


# OPERATOR(schema.op) -> the node the plain operator parses to
_OPERATORS: dict[str, Callable[[exp.Expr, exp.Expr], exp.Expr]] = {
    "~": lambda a, b: exp.RegexpLike(this=a, expression=b),
    "~*": lambda a, b: exp.RegexpILike(this=a, expression=b),
    "!~": lambda a, b: exp.Not(this=exp.RegexpLike(this=a, expression=b)),
    "!~*": lambda a, b: exp.Not(this=exp.RegexpILike(this=a, expression=b)),
    "~~": lambda a, b: exp.Like(this=a, expression=b),
    "~~*": lambda a, b: exp.ILike(this=a, expression=b),
    "!~~": lambda a, b: exp.Not(this=exp.Like(this=a, expression=b)),
    "!~~*": lambda a, b: exp.Not(this=exp.ILike(this=a, expression=b)),
    "=": lambda a, b: exp.EQ(this=a, expression=b),
    "<>": lambda a, b: exp.NEQ(this=a, expression=b),
    "!=": lambda a, b: exp.NEQ(this=a, expression=b),
    "<": lambda a, b: exp.LT(this=a, expression=b),
    "<=": lambda a, b: exp.LTE(this=a, expression=b),
    ">": lambda a, b: exp.GT(this=a, expression=b),
    ">=": lambda a, b: exp.GTE(this=a, expression=b),
    "||": lambda a, b: exp.DPipe(this=a, expression=b),
    "+": lambda a, b: exp.Add(this=a, expression=b),
    "-": lambda a, b: exp.Sub(this=a, expression=b),
    "*": lambda a, b: exp.Mul(this=a, expression=b),
    "/": lambda a, b: exp.Div(this=a, expression=b),
}


@handles(exp.Operator)
def _operator(node: exp.Operator, ctx: EvalContext) -> Value:
    name = str(node.args["operator"]).strip()
    name = name.rsplit(".", 1)[-1] if "." in name and not name.endswith(".") else name
    make = _OPERATORS.get(name)
    if make is None:
        raise error_at(f"operator does not exist: {name}", "42883", node)
    return eval_node(make(node.this, node.expression), ctx)


def _pg_typeof(node: exp.Anonymous, ctx: EvalContext) -> Value:
    """pg_typeof(x): the name PostgreSQL gives x's type ('bigint', 'numeric', 'text', ...)."""
    if len(node.expressions) != 1:
        no_function(node.name, node.expressions, ctx, node_position(node))
    return pa.scalar(pg_name(eval_node(node.expressions[0], ctx).type), pa.string())


ANONYMOUS["pg_typeof"] = _pg_typeof
