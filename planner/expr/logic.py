"""Predicates and conditionals: Kleene AND / OR / NOT, IS, comparisons (PostgreSQL's NaN order),
IS [NOT] DISTINCT FROM, BETWEEN, IN, LIKE / ILIKE / ESCAPE, regular expressions, CASE, IIF,
COALESCE, NULLIF, GREATEST / LEAST.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from planner.errors import FeatureNotSupported
from planner.expr.arrow_values import Value
from planner.expr.located import error_at, node_position, user_sql
from planner.expr.decimal_types import int_to_decimal
from planner.expr.sqltypes import (
    array_storage,
    ArrayType,
    is_unknown_literal,
    kind_of,
    null_of,
    pg_name,
    supertype,
    wrap_array,
)
from planner.expr.core import EvalContext, eval_node, eval_where, handles
from planner.expr.casts import cast
from planner.expr.coerce import (
    boolean_arg,
    check_comparable,
    coerce_pair,
    const_arg,
    narrow_exact,
    string_arg,
    unify,
    widen,
)
from planner.expr.arrays import is_quantifier, array_equality, quantified_comparison


@handles(exp.And, exp.Or)
def _and_or(node: exp.Connector, ctx: EvalContext) -> Value:
    is_and = isinstance(node, exp.And)
    what = "AND" if is_and else "OR"
    left = boolean_arg(eval_node(node.this, ctx), what, node.this)
    # The right side only matters where the left side did not decide the result.
    undecided = pc.fill_null(left if is_and else pc.invert(left), True)
    right = boolean_arg(eval_where(node.expression, ctx, undecided), what, node.expression)
    return (pc.and_kleene if is_and else pc.or_kleene)(left, right)


@handles(exp.Not)
def _not(node: exp.Not, ctx: EvalContext) -> Value:
    return pc.invert(boolean_arg(eval_node(node.this, ctx), "NOT", node.this))


@handles(exp.Is)
def _is(node: exp.Is, ctx: EvalContext) -> Value:
    v = eval_node(node.this, ctx)
    target = node.expression
    if isinstance(target, exp.Null):
        r = pc.is_null(v)
    elif isinstance(target, exp.Boolean):
        b = boolean_arg(v, "IS", node.this)
        r = pc.fill_null(b if target.this else pc.invert(b), False)
    else:
        raise FeatureNotSupported(f"unsupported IS test: {user_sql(node)}",
                                  position=node_position(node))
    return pc.invert(r) if node.args.get("negate") else r


_COMPARISONS: dict[type, tuple[str, Callable[..., Value]]] = {
    exp.EQ: ("=", pc.equal), exp.NEQ: ("<>", pc.not_equal), exp.GT: (">", pc.greater),
    exp.GTE: (">=", pc.greater_equal), exp.LT: ("<", pc.less), exp.LTE: ("<=", pc.less_equal),
}


@handles(*_COMPARISONS)
def _comparison(node: exp.Binary, ctx: EvalContext) -> Value:
    op, fn = _COMPARISONS[type(node)]
    if is_quantifier(node.expression):
        return quantified_comparison(node, ctx, op, fn)
    a, b = eval_node(node.this, ctx), eval_node(node.expression, ctx)
    if "list" in (kind_of(a.type), kind_of(b.type)):
        return array_equality(a, node.this, b, node.expression, op, node)
    a, b = coerce_pair(a, node.this, b, node.expression, op, node)
    check_comparable(a, op, b, node)
    if kind_of(a.type) == "null":
        return null_of(pa.bool_())
    return compare_values(op, fn, a, b)


def compare_values(op: str, fn: Callable[..., Value], a: Value, b: Value) -> Value:
    """`a op b` for two values of one type, as PostgreSQL compares them: floats with NaN
    equal to itself and above every number, intervals by their span; `fn` the Arrow
    kernel of `op`. Every comparison (=, <, IS DISTINCT FROM, BETWEEN, IN) goes here."""
    if kind_of(a.type) == "float":
        return _float_compare(op, fn, a, b)
    if kind_of(a.type) == "interval":
        return _interval_compare(fn, a, b)
    return fn(a, b)


def _interval_span(v: Value) -> tuple[Value, Value]:
    """MonthDayNano -> (whole days with a month as 30, nanoseconds within the day) int64:
    PostgreSQL compares intervals by that span ('1 mon' = '30 days', '1 day' = '24:00')."""
    day = 86_400_000_000_000
    if isinstance(v, pa.Scalar):
        if not v.is_valid:
            return pa.scalar(None, pa.int64()), pa.scalar(None, pa.int64())
        m, d, ns = v.as_py()
        return pa.scalar(m * 30 + d + ns // day, pa.int64()), pa.scalar(ns % day, pa.int64())
    a = v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v
    rec = np.frombuffer(a.buffers()[1], dtype=np.dtype(
        [("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]))[a.offset:a.offset + len(a)]
    mask = a.is_null().to_numpy(zero_copy_only=False) if a.null_count else None
    days = rec["months"].astype(np.int64) * 30 + rec["days"] + rec["nanos"] // day
    return pa.array(days, mask=mask), pa.array(rec["nanos"] % day, mask=mask)


def _interval_compare(fn: Callable[..., Value], a: Value, b: Value) -> Value:
    (da, na), (db, nb) = _interval_span(a), _interval_span(b)
    return pc.if_else(pc.equal(da, db), fn(na, nb), fn(da, db))


def _float_compare(op: str, fn: Callable[..., Value], a: Value, b: Value) -> Value:
    """PostgreSQL's float comparison: NaN equals NaN and is greater than every other value
    (so that floats sort and group totally); IEEE, which Arrow follows, has NaN unordered."""
    r = fn(a, b)
    an, bn = pc.fill_null(pc.is_nan(a), False), pc.fill_null(pc.is_nan(b), False)
    if op in ("=", "<>"):
        fix = pc.and_(an, bn)                            # NaN = NaN
        value = op == "="
    elif op in (">", ">="):
        fix = pc.and_(an, pc.invert(bn)) if op == ">" else an
        value = True
    else:
        fix = pc.and_(bn, pc.invert(an)) if op == "<" else bn
        value = True
    fix = pc.and_(fix, pc.and_(pc.is_valid(a), pc.is_valid(b)))     # NULL stays NULL
    if isinstance(fix, pa.Scalar) and not fix.as_py():
        return r
    return pc.if_else(fix, pa.scalar(value), r)


@handles(exp.NullSafeEQ, exp.NullSafeNEQ)
def _distinct_from(node: exp.Binary, ctx: EvalContext) -> Value:
    a, b = coerce_pair(eval_node(node.this, ctx), node.this, eval_node(node.expression, ctx),
                        node.expression, "IS DISTINCT FROM", node)
    a_null, b_null = pc.is_null(a), pc.is_null(b)
    if kind_of(a.type) == "null":
        same = pc.and_(a_null, b_null)
    else:
        # floats compare as PostgreSQL's `=` does (NaN equals NaN), not as IEEE; intervals
        # by their span
        eq = compare_values("=", pc.equal, a, b)
        same = pc.or_(pc.fill_null(eq, False), pc.and_(a_null, b_null))
    return same if isinstance(node, exp.NullSafeEQ) else pc.invert(same)


@handles(exp.Between)
def _between(node: exp.Between, ctx: EvalContext) -> Value:
    x = eval_node(node.this, ctx)
    lo_node, hi_node = node.args["low"], node.args["high"]
    x1, lo = coerce_pair(x, node.this, eval_node(lo_node, ctx), lo_node, ">=", node)
    x2, hi = coerce_pair(x, node.this, eval_node(hi_node, ctx), hi_node, "<=", node)
    if kind_of(x1.type) == "null" or kind_of(x2.type) == "null":
        return null_of(pa.bool_())
    return pc.and_kleene(compare_values(">=", pc.greater_equal, x1, lo),
                         compare_values("<=", pc.less_equal, x2, hi))


@handles(exp.In)
def _in(node: exp.In, ctx: EvalContext) -> Value:
    if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
        raise FeatureNotSupported("IN (subquery) must be planned as a join",
                                  position=node_position(node))
    x = eval_node(node.this, ctx)
    items = node.expressions
    values = [eval_node(e, ctx) for e in items]
    if not all(isinstance(v, pa.Scalar) for v in values) or kind_of(x.type) == "interval":
        # one comparison per item (intervals too: equal spans are equal, '1 day' =
        # '24 hours', which a hash lookup of their fields would miss)
        result: Value | None = None
        for v, e in zip(values, items):
            a, b = coerce_pair(x, node.this, v, e, "=", node)
            eq = null_of(pa.bool_()) if kind_of(a.type) == "null" else \
                compare_values("=", pc.equal, a, b)
            result = eq if result is None else pc.or_kleene(result, eq)
        return result
    # All constants: one hash lookup per row. Literals take x's type; otherwise unify.
    if kind_of(x.type) not in ("string", "null"):
        values = [cast(v, x.type, e) if is_unknown_literal(e) else v
                  for v, e in zip(values, items)]
    if kind_of(x.type) == "decimal" or any(kind_of(v.type) == "decimal" for v in values):
        values = [int_to_decimal(v) if kind_of(v.type) == "int" else v for v in values]
    # (x of type null - a bare NULL - narrows nothing: the list's type decides)
    narrowed = [v if v.type == x.type else narrow_exact(v, x.type) if v.is_valid
                else v.cast(x.type) for v in values] if kind_of(x.type) != "null" else [None]
    if all(v is not None for v in narrowed):
        values = narrowed
    # x IN (a) is x = a; a longer list is resolved to one common type first (PostgreSQL:
    # REAL IN (2.75, 3.9) compares in real, REAL = 3.9 in double precision)
    t = supertype([x.type] + [v.type for v in values], operator=len(values) == 1)
    if t is None:
        bad = next(v.type for v in values if supertype([x.type, v.type]) is None)
        raise error_at(f"operator does not exist: {pg_name(x.type)} = {pg_name(bad)}",
                   "42883", node)
    if kind_of(t) == "null":
        return null_of(pa.bool_())
    # the list is brought to its common type, then x = each by the operator's type
    # (16777217 IN (16777216::real, 0::real) compares in double precision: false)
    values = [widen(v, t, None) if v.is_valid else v for v in values]
    t = supertype([x.type, t], operator=True)
    x = widen(x, t, node.this)
    present = [widen(v, t, None) for v in values if v.is_valid]
    has_null = len(present) < len(values)
    value_set = pa.array([v.as_py() for v in present], type=t)
    if kind_of(t) == "float":       # -0.0 = 0.0, which the hash lookup does not know
        x, value_set = pc.add(x, pa.scalar(0.0, t)), pc.add(value_set, pa.scalar(0.0, t))
    found = pc.is_in(x, value_set=value_set, skip_nulls=True)
    no_answer = null_of(pa.bool_())
    if has_null:  # no match against a list holding NULL is NULL
        return pc.if_else(found, True, no_answer)
    return pc.if_else(pc.is_null(x), no_answer, found)


def _like_pattern(pattern: str, escape: str | None, node: exp.Expr) -> str:
    """A LIKE pattern with escape character `escape` in Arrow's backslash-escape syntax."""
    if escape is None:
        escape = "\\"
    if len(escape) > 1:
        raise error_at("invalid escape string", "22025", node)
    out = []
    chars = iter(pattern)
    for c in chars:
        if escape and c == escape:
            nxt = next(chars, None)
            if nxt is None:
                raise error_at("LIKE pattern must not end with escape character", "22025", node)
            out.append("\\" + nxt if nxt in "%_\\" else nxt)
        elif c == "\\":
            out.append("\\\\")
        else:
            out.append(c)
    return "".join(out)


def _like(node: exp.Like | exp.ILike, ctx: EvalContext, escape: exp.Expr | None) -> Value:
    s = eval_node(node.this, ctx)
    p = eval_node(node.expression, ctx)
    op = "~~*" if isinstance(node, exp.ILike) else "~~"
    if kind_of(s.type) not in ("string", "null") or kind_of(p.type) not in ("string", "null"):
        raise error_at(f"operator does not exist: {pg_name(s.type)} {op} {pg_name(p.type)}",
                   "42883", node)
    if not isinstance(p, pa.Scalar):
        raise FeatureNotSupported("LIKE with a non-constant pattern is not supported",
                                  position=node_position(node.expression))
    esc = None
    if escape is not None:
        e = eval_node(escape, ctx)
        if not isinstance(e, pa.Scalar) or kind_of(e.type) not in ("string", "null"):
            raise FeatureNotSupported("ESCAPE must be a constant string",
                                      position=node_position(escape))
        if not e.is_valid:
            return null_of(pa.bool_())
        esc = e.as_py()
    if not p.is_valid or kind_of(s.type) == "null":
        return null_of(pa.bool_())
    r = pc.match_like(s, pattern=_like_pattern(p.as_py(), esc, node),
                      ignore_case=isinstance(node, exp.ILike))
    return pc.invert(r) if node.args.get("negate") else r


@handles(exp.Like, exp.ILike)
def _like_node(node: exp.Like | exp.ILike, ctx: EvalContext) -> Value:
    return _like(node, ctx, None)


@handles(exp.Escape)
def _escape(node: exp.Escape, ctx: EvalContext) -> Value:
    inner = node.this
    negate = False
    if isinstance(inner, exp.Not):
        inner, negate = inner.this, True
    if not isinstance(inner, (exp.Like, exp.ILike)):
        raise FeatureNotSupported(f"unsupported ESCAPE: {user_sql(node)}",
                                  position=node_position(node))
    r = _like(inner, ctx, node.expression)
    return pc.invert(r) if negate else r


@handles(exp.RegexpLike, exp.RegexpILike)
def _regexp(node: exp.Binary, ctx: EvalContext) -> Value:
    s = string_arg(eval_node(node.this, ctx), "~", node.this)
    p = const_arg(eval_node(node.expression, ctx), "regular expression", node.expression)
    if p is None or kind_of(s.type) == "null":
        return null_of(pa.bool_())
    # (?s): `.` matches a newline in PostgreSQL's regular expressions, not in RE2's default
    return pc.match_substring_regex(s, pattern="(?s)" + p,
                                    ignore_case=isinstance(node, exp.RegexpILike))


def _conditional(node: exp.Expr, ctx: EvalContext, arms: list[tuple[exp.Expr, exp.Expr]],
                 default: exp.Expr | None, subject: exp.Expr | None) -> Value:
    """CASE: each arm's condition and value only for the rows still undecided."""
    remaining: Value | None = None
    conds: list[Value] = []
    values: list[Value] = []
    value_nodes: list[exp.Expr] = []
    subject_value = eval_node(subject, ctx) if subject is not None else None
    for when, then in arms:
        if subject is not None:
            a, b = coerce_pair(subject_value, subject, eval_where(when, ctx, remaining), when,
                                "=", node)
            c = null_of(pa.bool_()) if kind_of(a.type) == "null" else pc.equal(a, b)
        else:
            c = boolean_arg(eval_where(when, ctx, remaining), "CASE/WHEN", when)
        c = pc.fill_null(c, False)
        if remaining is not None:
            c = pc.and_(c, remaining)
        conds.append(c)
        values.append(eval_where(then, ctx, c))
        value_nodes.append(then)
        remaining = pc.invert(c) if remaining is None else pc.and_not(remaining, c)
    if default is not None:
        values.append(eval_where(default, ctx, remaining))
        value_nodes.append(default)
    else:
        values.append(pa.scalar(None))
        value_nodes.append(exp.Null())
    values, t = unify(values, value_nodes, "CASE", node)
    if isinstance(t, ArrayType):                    # choose among the arrays' text forms
        values = [array_storage(v) for v in values]
    result = values[-1]
    if kind_of(t) == "null":
        return result
    for c, v in zip(reversed(conds), reversed(values[:-1])):
        result = pc.if_else(c, v, result)
    return wrap_array(result, t) if isinstance(t, ArrayType) else result


@handles(exp.Case)
def _case(node: exp.Case, ctx: EvalContext) -> Value:
    arms = [(i.this, i.args["true"]) for i in node.args.get("ifs") or []]
    return _conditional(node, ctx, arms, node.args.get("default"), node.this)


@handles(exp.If)
def _if(node: exp.If, ctx: EvalContext) -> Value:
    return _conditional(node, ctx, [(node.this, node.args["true"])], node.args.get("false"),
                        None)


@handles(exp.Coalesce)
def _coalesce(node: exp.Coalesce, ctx: EvalContext) -> Value:
    nodes = [node.this, *node.expressions]
    values: list[Value] = []
    missing: Value | None = None  # rows where every argument so far is NULL
    for n in nodes:
        v = eval_where(n, ctx, missing)
        values.append(v)
        missing = pc.is_null(v) if missing is None else pc.and_(missing, pc.is_null(v))
    values, t = unify(values, nodes, "COALESCE", node)
    if kind_of(t) == "null" or len(values) == 1:
        return values[0]
    if isinstance(t, ArrayType):
        return wrap_array(pc.coalesce(*[array_storage(v) for v in values]), t)
    return pc.coalesce(*values)


@handles(exp.Nullif)
def _nullif(node: exp.Nullif, ctx: EvalContext) -> Value:
    a, b = coerce_pair(eval_node(node.this, ctx), node.this, eval_node(node.expression, ctx),
                        node.expression, "=", node)
    if kind_of(a.type) == "null":
        return a
    same = pc.fill_null(compare_values("=", pc.equal, a, b), False)
    return pc.if_else(same, null_of(a.type), a)


@handles(exp.Greatest, exp.Least)
def _greatest_least(node: exp.Func, ctx: EvalContext) -> Value:
    nodes = [node.this, *node.expressions]
    name = "GREATEST" if isinstance(node, exp.Greatest) else "LEAST"
    values, t = unify([eval_node(n, ctx) for n in nodes], nodes, name, node)
    if kind_of(t) == "null":
        return values[0]
    fn = pc.max_element_wise if isinstance(node, exp.Greatest) else pc.min_element_wise
    if pa.types.is_timestamp(t) and t.tz:
        # Arrow has no element-wise kernel for zoned timestamps: compare the instants
        return fn(*[v.cast(pa.int64()) for v in values], skip_nulls=True).cast(t)
    if kind_of(t) == "interval":
        # nor for intervals, which compare by their span: pick pairwise, NULLs skipped
        op = (">", pc.greater) if isinstance(node, exp.Greatest) else ("<", pc.less)
        out = values[0]
        for v in values[1:]:
            better = compare_values(op[0], op[1], v, out)
            out = pc.if_else(pc.or_(pc.is_null(out), pc.fill_null(better, False)), v, out)
        return out
    return fn(*values, skip_nulls=True)
